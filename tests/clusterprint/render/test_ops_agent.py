"""The Ops Agent's configuration on every role (clusterprint/render/ops_agent.py): it is of
the agent's documented format, keeps exactly that role's journal, labelled with the cluster
and the role, and each boot writes it and starts the agent once.

The agent's own validator (google_cloud_ops_agent_engine -in CONFIG, which its unit runs
before it starts) cannot run here: its package comes only from packages.cloud.google.com and
building it needs Go and its modules, none of which this machine reaches. So the rendered
files are checked against fixtures/ops-agent-config.schema.json, the subset clusterprint
writes as the agent's confgenerator source reads it (the schema's $comment cites each file).
The one part of the engine that builds without outside modules, its filter parser
(confgenerator/filter with the packages it imports, GoogleCloudPlatform/ops-agent at
588c4b9, built with Debian's Go 1.19 and golang-go.uber-multierr-dev, ``slices.Equal``
written out), parsed every reference blueprint's exclude_logs condition on 2026-12-04: each
one is ``not (A or B ...)`` over record["_SYSTEMD_UNIT"] and record["SYSLOG_IDENTIFIER"]
in its fluent-bit and OTTL forms; that check is not repeated here, which has no Go.
What only a real VM shows: that the agent takes the file, and the entries in Cloud Logging.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from clusterprint.blueprint.validate import load_checked
from clusterprint.contract import node_metadata
from clusterprint.facts import ops_agent as agent_facts
from clusterprint.facts import slurm_metrics
from clusterprint.render import ops_agent, rendered_files, topology
from clusterprint.render.node_scripts import TENSORBOARD_SYNC_UNIT
from tests.support.boot_sandbox import Node, daemon_starts, ready
from tests.support.ops_agent_config import written_config
from tests.support.paths import reference_blueprints
from tests.support.prometheus_duration import seconds
from tests.support.topology_blueprints import a4x_cluster

SCHEMA = json.loads((Path(__file__).parent / "fixtures" / "ops-agent-config.schema.json")
                    .read_text())
#: The rendered files of every reference blueprint, and of an A4X cluster (its controller
#: alone runs the NVLink blocks service).
RENDERED = {**{path.stem: rendered_files(load_checked(str(path)))
               for path in reference_blueprints()},
            "a4x": rendered_files(a4x_cluster())}
SCRIPTS = [(blueprint, name) for blueprint, files in RENDERED.items()
           for name in files if name.startswith("scripts/") and name.endswith(".sh")]
BOOT = ops_agent.BOOT_UNIT
#: What each role of cpu-small keeps: its units, the boot's journal tag and those of the
#: programs a daemon runs (power saving's, the health check: common.Log's tags). It has
#: accounting in MariaDB on the controller, power saving, and users without node
#: credentials (the metadata guard, the MLOps broker).
CPU_SMALL = {
    "controller": ({"slurmctld.service", "slurmdbd.service", "mariadb.service",
                    "slurmrestd.service", "clusterprint-remediate.service",
                    "clusterprint-config-sync.service", "clusterprint-capacity.service",
                    "clusterprint-slurm-exporter.service", BOOT},
                   {"clusterprint-controller", "clusterprint-capacity"}),
    "login": ({"clusterprint-config-sync.service", "clusterprint-mlops.service",
               "clusterprint-metadata-guard.service", BOOT}, {"clusterprint-login"}),
    "compute-cpu": ({"slurmd.service", "clusterprint-metadata-guard.service", BOOT},
                    {"clusterprint-compute-cpu", "clusterprint-healthcheck"}),
}


def kept(config: dict) -> tuple[set[str], set[str]]:
    """The units and journal tags a configuration's only exclude_logs keeps."""
    (condition,) = config["logging"]["processors"][ops_agent.UNITS_FILTER]["match_any"]
    pairs = re.findall(r'jsonPayload\.(\w+) = "([^"]+)"', condition)
    return ({v for f, v in pairs if f == "_SYSTEMD_UNIT"},
            {v for f, v in pairs if f == "SYSLOG_IDENTIFIER"})


def scrape_configs(config: dict) -> list[dict]:
    """Every Prometheus scrape a configuration's receivers run."""
    return [scrape for receiver in config.get("metrics", {}).get("receivers", {}).values()
            if receiver["type"] == "prometheus"
            for scrape in receiver["config"]["scrape_configs"]]


def labels(config: dict) -> dict[str, str]:
    fields = config["logging"]["processors"][ops_agent.LABELLER]["fields"]
    return {re.fullmatch(r'labels\."(\w+)"', k)[1]: v["static_value"] for k, v in fields.items()}


@pytest.mark.parametrize(("blueprint", "name"), SCRIPTS)
def test_every_roles_configuration_is_of_the_agents_format(blueprint, name):
    config = written_config(RENDERED[blueprint][name])
    jsonschema.validate(config, SCHEMA)
    # What the schema cannot say (confgenerator/config.go ValidateLogging, ValidateMetrics):
    # a pipeline names only receivers and processors the file defines; one hostmetrics.
    for section in ("logging", "metrics"):
        defined = config.get(section, {})
        for pipeline in defined.get("service", {}).get("pipelines", {}).values():
            assert set(pipeline.get("receivers", [])) <= set(defined["receivers"])
            assert set(pipeline.get("processors", [])) <= set(defined.get("processors", {}))
    assert [r["type"] for r in config.get("metrics", {}).get("receivers", {}).values()
            ].count("hostmetrics") <= 1
    # prometheus/prometheus config/config.go ScrapeConfig.Validate: no scrape may outlast
    # its interval.
    for scrape in scrape_configs(config):
        assert seconds(scrape["scrape_timeout"]) <= seconds(scrape["scrape_interval"])
    # The built-in syslog pipeline is off: no journal line reaches Cloud Logging twice.
    assert config["logging"]["service"]["pipelines"]["default_pipeline"] == {"receivers": []}


def controller_with(change) -> dict:
    """cpu-small's controller configuration after ``change`` (config -> None)."""
    config = written_config(RENDERED["cpu-small"]["scripts/controller.sh"])
    change(config)
    return config


@pytest.mark.parametrize("change", [
    lambda c: scrape_configs(c)[0].update(scrape_intervall="60s"),
    lambda c: scrape_configs(c)[0]["static_configs"][0]["labels"].update(
        {"clusterprint-cluster": "x"}),
    lambda c: scrape_configs(c)[0]["static_configs"][0]["labels"].update({"__x": "x"}),
    lambda c: c["logging"]["receivers"][ops_agent.RECEIVER].update(units=["slurmd"]),
    lambda c: c["metrics"]["receivers"][slurm_metrics.RECEIVER].update(honor_labels=True),
], ids=["scrape-key-misspelt", "label-name-hyphen", "label-name-reserved",
        "journald-option", "receiver-key"])
def test_the_schema_refuses_what_the_agent_or_prometheus_refuses(change):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(controller_with(change), SCHEMA)


@pytest.mark.parametrize("role", CPU_SMALL)
def test_each_role_keeps_exactly_its_units_and_labels_cluster_and_role(role):
    config = written_config(RENDERED["cpu-small"][f"scripts/{role}.sh"])
    assert kept(config) == CPU_SMALL[role]
    expected = {"cluster": "cpu-small", "role": role.split("-")[0]}
    assert labels(config) == expected | ({"nodeset": "cpu"} if role == "compute-cpu" else {})
    if role == "controller":
        # the Slurm exporter's receiver, in a pipeline of its own: the agent's built-in host
        # metrics stay as it ships them
        receivers = config["metrics"]["receivers"]
        assert receivers == {slurm_metrics.RECEIVER: {
            "type": "prometheus", **dict(slurm_metrics.receiver("cpu-small").settings)}}
        assert config["metrics"]["service"]["pipelines"] == {
            slurm_metrics.RECEIVER: {"receivers": [slurm_metrics.RECEIVER]}}
    else:
        assert "metrics" not in config  # the agent's built-in host metrics, as it ships


@pytest.mark.parametrize("blueprint", ["a3mega", "a3ultra", "a4"])
def test_a_gpu_node_keeps_slurmd_and_its_boot_and_collects_gpu_metrics(blueprint):
    files = RENDERED[blueprint]
    for name in (n for n in files if n.startswith("scripts/compute-")):
        config = written_config(files[name])
        nodeset = name.removeprefix("scripts/compute-").removesuffix(".sh")
        units, tags = kept(config)
        assert units - {"clusterprint-metadata-guard.service"} == {"slurmd.service", BOOT}
        # the health check, which slurmd runs outside any unit's stream, tags its entries
        assert tags == {f"clusterprint-compute-{nodeset}", "clusterprint-healthcheck"}
        assert labels(config) == {"cluster": blueprint, "role": "compute", "nodeset": nodeset}
        assert "workload.googleapis.com/gpu.dcgm.sm.utilization" in (
            agent_facts.metrics_collected(config))


def test_only_the_a4x_controller_keeps_the_nvlink_blocks_service_it_runs():
    with_blocks = [b for b, files in RENDERED.items() if topology.BLOCKS_UNIT in kept(
        written_config(files["scripts/controller.sh"]))[0]]
    assert with_blocks == ["a4x"]


def test_label_values_are_json_quoted_and_a_unit_that_could_end_its_string_is_refused():
    odd = 'a "quoted"\\ value\nCLUSTERPRINT_EOF'
    text = ops_agent.config({"cluster": odd}, ("slurmd.service",), ("clusterprint-x",))
    assert YAML(typ="safe").load(text)["logging"]["processors"][ops_agent.LABELLER][
        "fields"]['labels."cluster"']["static_value"] == odd
    with pytest.raises(ValueError, match="not units or journal tags"):
        ops_agent.kept_entries(('slurmd.service" OR x = "y',), ())


@pytest.mark.parametrize("blueprint", sorted(RENDERED))
def test_the_controllers_script_with_its_agent_configuration_fits_one_metadata_value(
        blueprint):
    assert len(RENDERED[blueprint]["scripts/controller.sh"].encode()) <= (
        node_metadata.VALUE_LIMIT_BYTES)


#: A VM of each role, booted on its built image: blueprint, script, what starts after.
ROLES = [pytest.param("cpu-small", "controller", id="controller"),
         pytest.param("cpu-small", "login", id="login"),
         pytest.param("cpu-small", "compute-cpu", id="CPU compute"),
         pytest.param("a4", "compute-a4", id="GPU compute")]


@pytest.fixture
def node(sandbox, tmp_path) -> Node:
    return Node(tmp_path)


def agent_calls(calls: list[str]) -> list[str]:
    """What a boot asked systemd of the agent's unit."""
    return [c.removeprefix("systemctl ") for c in calls
            if c.startswith("systemctl ") and c.split()[-1] == agent_facts.UNIT]


@pytest.mark.parametrize(("blueprint", "script"), ROLES)
def test_every_role_writes_its_configuration_and_starts_the_agent_once(node, blueprint,
                                                                       script):
    files = RENDERED[blueprint]
    ready(node, blueprint)
    node.booted_from(files, script)
    calls = node.calls()
    assert YAML(typ="safe").load(node.file(agent_facts.CONFIG).read_text()) == written_config(
        files[f"scripts/{script}.sh"])
    assert agent_calls(calls) == [f"enable {agent_facts.UNIT}", f"restart {agent_facts.UNIT}"]
    assert "Ops Agent: sending this node's journal to Cloud Logging" in node.journal()
    # Before the role's daemons, which then log to a journal already on its way.
    first_daemon = min((i for i, c in enumerate(calls) if c in daemon_starts(calls)),
                       default=len(calls))
    assert calls.index(f"systemctl restart {agent_facts.UNIT}") < first_daemon
    # A reboot with the same configuration starts it as it is, and restarts nothing.
    node.booted_from(files, script)
    assert agent_calls(node.calls()) == [f"enable {agent_facts.UNIT}",
                                         f"start {agent_facts.UNIT}"]


@pytest.mark.parametrize(("blueprint", "script"), ROLES)
def test_an_image_without_the_agents_engine_fails_the_boot_naming_it(node, blueprint, script):
    ready(node, blueprint)
    node.file(agent_facts.ENGINE).unlink()
    done = node.boot_from(RENDERED[blueprint], script)
    assert done.returncode != 0
    assert node.journal().splitlines()[-1].startswith(
        f"<3>FAILED: Ops Agent: this image lacks {agent_facts.ENGINE}")
    assert daemon_starts(node.calls()) == []


def test_an_agent_that_refuses_its_configuration_fails_the_boot_naming_the_file(node):
    ready(node, "cpu-small")
    node.fail_for_good(f"systemctl restart {agent_facts.UNIT}")
    done = node.boot_from(RENDERED["cpu-small"], "controller")
    assert done.returncode != 0
    assert node.journal().splitlines()[-1] == (
        f"<3>FAILED: Ops Agent: {agent_facts.UNIT} did not start with {agent_facts.CONFIG} "
        f"(journalctl -u {agent_facts.UNIT} says why)")


@pytest.mark.parametrize("blueprint", RENDERED)
def test_a_login_node_keeps_the_tensorboard_sync_exactly_where_it_runs(blueprint):
    units, _ = kept(written_config(RENDERED[blueprint]["scripts/login.sh"]))
    wanted = "clusterprint-tensorboard-sync.service" in RENDERED[blueprint]["scripts/login.sh"]
    assert wanted == (blueprint in ("a3mega", "a3ultra"))  # the references that set it
    assert (TENSORBOARD_SYNC_UNIT in units) == wanted
