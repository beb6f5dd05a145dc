"""No blueprint text becomes code: every string key the schema has, drawn with the most
hostile values its schema accepts, renders files that parse, pass shellcheck and, run in the
boot sandbox (the login node's boot, a recipe's job), never run a command the text names.

The keys are read from the schema the model generates, so a string key added later is
drawn here too; the keys that name another entry (a partition's nodesets) are set to what
they name and the GPU machine type is kept, so that the cluster still has a recipe to run.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import tempfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.schema import blueprint_schema
from clusterprint.blueprint.validate import CONTROL_CATEGORIES
from clusterprint.contract import node_metadata
from clusterprint.render import rendered_files
from clusterprint.render.nccl_job import staged_job_path
from clusterprint.render.node_scripts import render_login_script
from clusterprint.render.recipes import recipe_path, storage_root
from clusterprint.render.slurm_config import render_slurm_configs
from tests.support.boot_sandbox import Node

SCHEMA = blueprint_schema()
#: The command hostile text tries to run; the sandbox's image has it, and it leaves a mark.
CANARY = "clusterprint-canary"
#: Pieces of hostile text: every way a shell, a heredoc, sbatch, pyxis or printf would read
#: text as more than text, spaces, non-ASCII letters and digits (an Arabic-Indic three, a
#: full-width one: what a regex's \d or \w may take).
FRAGMENTS = ["'", '"', "`", "\\", "$", f"$({CANARY})", f"`{CANARY}`", f"${{IFS}}{CANARY}",
             f";{CANARY};", f"|{CANARY}", f"&&{CANARY}", "${HOME}", "$HOME", "%", "%x", "%j",
             " ", "*", "?", "[a]", "{a,b}", "~", "!", "#", ",", ":", "=", "-", "--", ".", "..",
             "/", "é", "ü", "\u00a0", "\u2028", "\n", f"\nCLUSTERPRINT_EOF\n{CANARY}\n", "\t",
             "\0", "\x1b[31m", "a", "Z", "0", "_", "\u0663", "\uff11"]
#: What every string the schema accepts is limited to: letters, digits and . _ - / :.
SAFE = re.compile(r"^[A-Za-z0-9._/:-]*$")
#: Keys whose strings reach a Google API only, never a rendered file, and what each holds:
#: an email address needs its @ (and takes a +tag).
API_ONLY = {"observability.alert_emails[]": re.compile(r"^[A-Za-z0-9._+-]+@[A-Za-z0-9.-]+$")}


def string_keys(node: dict, path: str = "") -> list[tuple[str, str | None]]:
    """Every string the schema describes: (its dotted path, with [] for a list's items,
    <key> for a mapping's keys and * for its values; its pattern, "enum" where an enum or a
    constant fixes it, else None)."""
    if "$ref" in node:
        return string_keys(SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]], path)
    found = [k for branch in node.get("anyOf", []) for k in string_keys(branch, path)]
    kind = node.get("type")
    if kind == "object":
        for key, child in node.get("properties", {}).items():
            found += string_keys(child, f"{path}.{key}" if path else key)
        for key_pattern, child in node.get("patternProperties", {}).items():
            found.append((f"{path}.<key>", key_pattern))
            found += string_keys(child, f"{path}.*")
    elif kind == "array":
        found += string_keys(node["items"], f"{path}[]")
    elif kind == "string":
        found.append((path, node.get("pattern") or ("enum" if "enum" in node or "const" in node
                                                     else None)))
    return found


STRING_KEYS = dict(string_keys(SCHEMA))
#: Keys that name another entry, whose rule refuses any other name: set to the name they
#: refer to, after the draw (storage.home.lustre stays unset: /home is Filestore).
REFERENCES = {"slurm.partitions[].nodesets[]", "recipes[].partition", "storage.home.lustre"}
#: Where the sandbox keeps what the boot writes: mounts are drawn below it (see hostile_data).
SANDBOXED_ROOT = "/mnt/"


def a_value(pattern: str | None) -> st.SearchStrategy[str]:
    """A string ``pattern`` accepts, as hostile as it lets through: one the pattern makes,
    with pieces of hostile text put in wherever the pattern still accepts the whole. A key
    without a pattern takes any text validate lets through: every piece but the controls."""
    if pattern is None:
        return st.lists(st.sampled_from([f for f in FRAGMENTS if _printable(f)]),
                        min_size=1, max_size=6).map("".join)
    made = st.from_regex(pattern, fullmatch=True)

    @st.composite
    def draw(draw_from) -> str:
        value = draw_from(made)
        for _ in range(draw_from(st.integers(1, 4))):
            at = draw_from(st.integers(0, len(value)))
            bolder = value[:at] + draw_from(st.sampled_from(FRAGMENTS)) + value[at:]
            value = bolder if re.fullmatch(pattern, bolder) else value
        return value

    return draw()


def _printable(text: str) -> bool:
    """No control character in ``text``: what validate refuses in every string."""
    return all(unicodedata.category(c) not in CONTROL_CATEGORIES for c in text)


#: Every optional string key is set, so that each is drawn: an existing network with a peering,
#: a reservation, a custom image, Cloud SQL, an explicit PSA range, Lustre, a bucket, labels.
BASE = {
    "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "demo",
    "labels": {"team": "research"}, "project": "my-project", "region": "us-central1",
    "zone": "us-central1-a",
    "network": {"subnet_cidr": "10.0.0.0/20", "gpu_subnets_cidr": "10.128.0.0/16",
                "ssh_source_ranges": ["35.235.240.0/20"],
                "private_service_access": {"range": "10.200.0.0/20"},
                "peerings": [{"name": "peer", "peer_network":
                              "projects/other-project/global/networks/other"}],
                "existing": "projects/my-project/global/networks/net",
                "existing_subnetwork": "projects/my-project/regions/us-central1/subnetworks/s"},
    "storage": {"home": {"filestore": {"tier": "ZONAL", "capacity_gib": 1024}},
                "lustre": [{"name": "scratch", "filesystem": "scratch", "mount": "/mnt/lustre",
                            "capacity_gib": 18000}],
                "buckets": [{"bucket": "ckpts", "mount": "/mnt/gcs/ckpts"}]},
    "slurm": {"controller": {"machine_type": "c2-standard-8"},
              "login": {"machine_type": "n2-standard-4"},
              "nodesets": [{"name": "gpu", "machine_type": "a3-megagpu-8g", "count": 2,
                            "provisioning": "reservation",
                            "reservation": "projects/my-project/reservations/res",
                            "image": {"project": "my-project", "family": "slurm"}},
                           {"name": "cpu", "machine_type": "n2-standard-4", "count": 1,
                            "image": {"project": "my-project", "name": "pinned"}}],
              "partitions": [{"name": "gpu", "nodesets": ["gpu"], "max_time": "7-00:00:00",
                              "default_time": "4:00:00"},
                             {"name": "cpu", "nodesets": ["cpu"]}],
              "accounting": {"cloud_sql": {"instance": "projects/my-project/instances/db",
                                           "database": "slurm_acct_db"}}},
    "recipes": [{"name": "llama3-8b-pretrain", "partition": "gpu",
                 "data_path": "/mnt/lustre/data/web"}],
    "observability": {"alert_emails": ["oncall@example.com"]},
}
#: The GPU machine type keeps the recipe rendered: a drawn one would be unknown, with no GPUs.
KEPT = {"slurm.nodesets[].machine_type"}


def places(data, path: str) -> list[tuple[dict | list, str | int]]:
    """(container, key) of every place in ``data`` that a path of ``string_keys`` names."""
    tokens = [t for t in re.split(r"\.|(?=\[\])", path) if t]
    slots: list[tuple[dict | list, str | int]] = [({"": data}, "")]
    for token in tokens:
        values = [c[k] for c, k in slots]
        if token == "[]":
            slots = [(v, i) for v in values if isinstance(v, list) for i in range(len(v))]
        elif token in ("*", "<key>"):
            slots = [(v, k) for v in values if isinstance(v, dict) for k in list(v)]
        else:
            slots = [(v, token) for v in values if isinstance(v, dict) and token in v]
    return slots


@st.composite
def hostile_data(draw) -> dict:
    """BASE with every string key drawn: the most hostile value each key's schema accepts."""
    data = copy.deepcopy(BASE)
    for path, pattern in STRING_KEYS.items():
        if pattern == "enum" or path in KEPT | REFERENCES:
            continue
        for container, key in places(data, path):
            value = draw(a_value(pattern), label=path)
            if path.endswith(".mount"):
                # A boot makes each mount's folder: below /mnt it lands in the sandbox's
                # overlay, elsewhere on this machine's own disk.
                value = SANDBOXED_ROOT + value
            if path.endswith("<key>"):
                container[value] = container.pop(key)
            else:
                container[key] = value
    slurm = data["slurm"]
    slurm["partitions"][0]["nodesets"] = [slurm["nodesets"][0]["name"]]
    data["recipes"][0]["partition"] = slurm["partitions"][0]["name"]
    return data


def test_every_string_key_of_the_schema_is_limited_and_drawn_hostile():
    """Each string key has a pattern, an enum, or names another entry (and its rule refuses
    any other name); the base blueprint sets every patterned one, so each is drawn."""
    unlimited = {path for path, pattern in STRING_KEYS.items() if pattern is None}
    assert unlimited == REFERENCES, "a string key with neither a pattern nor an enum"
    patterned = {path for path, pattern in STRING_KEYS.items() if pattern not in (None, "enum")}
    assert len(patterned) > 30
    for path in patterned:
        assert places(copy.deepcopy(BASE), path), f"BASE does not set {path}"


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_no_string_the_schema_accepts_holds_more_than_letters_digits_and_path_marks(data):
    path, pattern = data.draw(st.sampled_from(sorted(
        (p, pattern) for p, pattern in STRING_KEYS.items() if pattern not in (None, "enum"))))
    value = data.draw(a_value(pattern), label=path)
    assert API_ONLY.get(path, SAFE).match(value), f"{path} accepts {value!r}"
    assert ".." not in value or path not in ("storage.lustre[].mount", "storage.buckets[].mount",
                                             "recipes[].data_path"), value


def sandbox_node(tmp: Path) -> Node:
    """A login node's sandbox whose built image has the canary command, recording each run."""
    node = Node(tmp)
    node.fake_command(CANARY, f'echo "ran $0 $*" >>"$FAKE/{CANARY}"')
    (node.fake / "secret" / "1").write_text("key from the controller")
    return node


def canary_runs(node: Node) -> str:
    """Every run of the canary so far, one line each."""
    mark = node.fake / CANARY
    return mark.read_text() if mark.exists() else ""


def check_scripts(files: dict[str, str], folder: Path) -> None:
    """Every script parses (bash -n) and passes shellcheck; every #SBATCH value is plain."""
    scripts = []
    for path, text in files.items():
        if path.endswith((".sh", ".sbatch")):
            script = folder / path.replace("/", "_")
            script.write_text(text)
            scripts.append(str(script))
            done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
            assert done.returncode == 0, (path, done.stderr)
        if path.endswith(".sbatch"):
            for value in re.findall(r"^#SBATCH --[a-z-]+=(.*)$", text, re.MULTILINE):
                assert re.fullmatch(r"[A-Za-z0-9._/:|@%-]+", value), (path, value)
        if path.endswith(".json"):
            json.loads(text)
    # One shellcheck per script, side by side: the compute script alone takes a second.
    checks = [subprocess.Popen(["shellcheck", "--severity=style", script],
                               stdout=subprocess.PIPE, text=True) for script in scripts]
    for check in checks:
        out, _ = check.communicate()
        assert check.returncode == 0, out


def run_recipe(node: Node, text: str) -> list[str]:
    """The recipe's job in the sandbox, its training step the stand-in (as on real Slurm with
    CLUSTERPRINT_RECIPE_PROGRAM): the data path and checkpoint folder the stand-in got."""
    standin = node.fake / "standin"
    standin.write_text('#!/bin/bash\nprintf "%s\\n" "$CLUSTERPRINT_DATA_PATH" '
                       '"$CLUSTERPRINT_CHECKPOINT_DIR" >"$FAKE/standin-saw"\n')
    standin.chmod(0o755)
    node.fake_command("srun", 'while [[ $1 == -* ]]; do shift; done\nexec "$@"')
    node.env.update({"CLUSTERPRINT_RECIPE_PROGRAM": str(standin), "CLUSTERPRINT_MAX_STEPS": "0",
                     "USER": "alice", "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "a,b",
                     "SLURM_JOB_NUM_NODES": "2"})
    # The job writes no journal: it runs as a script, not as a boot.
    done = node.run(text)
    assert done.returncode == 0, done.stdout + done.stderr
    return (node.fake / "standin-saw").read_text().splitlines()


@pytest.fixture(scope="module")
def workdir(sandbox, tmp_path_factory) -> Path:
    assert shutil.which("shellcheck"), "install shellcheck (make system-packages)"
    return tmp_path_factory.mktemp("hostile")


@given(hostile_data())
# Each example boots a node: no shrinking, whose hundreds of boots would take minutes; a
# failure prints its blueprint whole.
@settings(max_examples=5, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
def test_hostile_strings_stay_data_in_every_rendered_file_and_on_the_node(workdir, data):
    blueprint = Blueprint.model_validate(data)  # the schema accepts every drawn value
    files = rendered_files(blueprint)
    example = Path(tempfile.mkdtemp(dir=workdir))
    check_scripts(files, example)

    node = sandbox_node(example / "node")
    for lustre in blueprint.storage.lustre:
        node.metadata(node_metadata.lustre_source(lustre.name), "10.9.8.7@tcp:/scratch")
    node.serve_slurm_config(files, "login")
    done = node.boot(files["scripts/login.sh"])
    assert done.returncode == 0, node.journal()
    assert canary_runs(node) == ""
    for path, text in files.items():
        if path.startswith(("jobs/", "recipes/")):
            assert node.file(staged_job_path(path)).read_text() == text
    mlops = json.loads(node.file("/etc/clusterprint/mlops.json").read_text())
    assert [b["mount"] for b in mlops["buckets"]] == [
        b.mount_path for b in blueprint.storage.buckets]

    # The recipe's job gets the blueprint's data path and storage exactly, and runs no text.
    recipe = blueprint.recipes[0]
    saw = run_recipe(node, files[recipe_path(recipe.name)])
    assert canary_runs(node) == ""
    assert saw == [recipe.data_path,
                   f"{storage_root(blueprint)}/alice/clusterprint/{recipe.name}/checkpoints"]


def test_a_staged_file_holding_the_heredocs_marker_reaches_the_login_node_whole(sandbox,
                                                                              tmp_path):
    """The login node stages each job through a heredoc: a job whose text holds the usual
    marker line arrives whole, and the lines after it are never run as root."""
    blueprint = Blueprint.model_validate(BASE)
    job = f"#!/bin/bash\nCLUSTERPRINT_EOF\n{CANARY}\nCLUSTERPRINT_EOF_2\n{CANARY} again\n"
    slurm_files = render_slurm_configs(blueprint)
    script = render_login_script(blueprint, slurm_files, {"jobs/marker.sbatch": job})
    node = sandbox_node(tmp_path)
    node.metadata(node_metadata.lustre_source("scratch"), "10.9.8.7@tcp:/scratch")
    node.serve_slurm_config(slurm_files, "login")
    done = node.boot(script)
    assert done.returncode == 0, node.journal()
    assert node.file(staged_job_path("jobs/marker.sbatch")).read_text() == job
    assert canary_runs(node) == ""
