"""The remediation loop as rendered: the program, its config, slurm.conf's reboot lines."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from clusterprint.blueprint.validate import check_text, load_checked
from clusterprint.node import common, host_events, remediate, scale_down
from clusterprint.render import remediation, rendered_files
from tests.support.paths import STDLIB_ONLY, blueprint_path
from tests.support.remediation_cluster import blueprint


def files_of(name: str) -> dict[str, str]:
    return rendered_files(load_checked(blueprint_path(name)))


def test_render_ships_the_package_program_itself_with_common_beside_it():
    files = files_of("a4")
    assert files["scripts/remediate.py"] == Path(remediate.__file__).read_text()
    assert files["scripts/common.py"] == Path(common.__file__).read_text()
    assert files["scripts/scale_down.py"] == Path(scale_down.__file__).read_text()
    assert files["scripts/host_events.py"] == Path(host_events.__file__).read_text()


def test_the_controller_installs_the_program_and_common_in_one_folder():
    script = files_of("a4")["scripts/controller.sh"]
    assert "install_text /etc/slurm/clusterprint/remediate.py 0755 <<" in script
    assert "install_text /etc/slurm/clusterprint/common.py 0644 <<" in script
    assert "install_text /etc/slurm/clusterprint/host_events.py 0644 <<" in script
    assert "install_text /etc/slurm/clusterprint/scale_down.py 0644 <<" in script
    # A new common.py, host_events.py or scale_down.py restarts the loop as a new program does.
    assert ("start_unit clusterprint-remediate.service /etc/slurm/clusterprint/remediate.py "
            "/etc/slurm/clusterprint/common.py /etc/slurm/clusterprint/host_events.py "
            "/etc/slurm/clusterprint/scale_down.py") in script


def test_the_rendered_program_runs_from_its_folder(tmp_path):
    """On the controller it imports common.py, host_events.py and scale_down.py beside it:
    no package (-S: no site-packages)."""
    for name in ("remediate.py", "host_events.py", "scale_down.py", "common.py",
                 "remediate.json"):
        (tmp_path / name).write_text(files_of("a4")[f"scripts/{name}"])
    done = subprocess.run([*STDLIB_ONLY, str(tmp_path / "remediate.py"), "--config",
                           str(tmp_path / "remediate.json"), "--reset", "nowhere"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "no nodeset nowhere" in done.stderr


def test_the_config_names_every_nodeset_its_vms_size_and_the_policy():
    config = json.loads(files_of("a4")["scripts/remediate.json"])
    assert config["project"] == "my-project" and config["zone"] == "us-central1-b"
    assert config["max_share_per_hour"] == 0.1
    assert config["nodesets"] == {
        "a4": {"base_instance_name": "a4-a4", "vm_names": "a4-a4-([a-z0-9]{4}|e[0-9]{5})",
               "nodes": 4, "on_failure": "drain", "report_faulty_host": False,
               "maintenance_reservations": True},
        "a4spot": {"base_instance_name": "a4-a4spot",
                   "vm_names": "a4-a4spot-([a-z0-9]{4}|e[0-9]{5})", "nodes": 8,
                   "on_failure": "drain", "report_faulty_host": False,
                   "maintenance_reservations": True}}
    # The program reads what render writes, and the defaults are the program's.
    loaded = remediate.Config.from_json(config)
    assert loaded.state_file == remediation.STATE
    assert (loaded.protect_after_failures, loaded.replace_timeout_s) == (3, 1800)
    assert loaded == remediation.remediation_config(load_checked(blueprint_path("a4")))


def test_the_replace_timeout_is_slurms_resume_timeout():
    assert f"ResumeTimeout={remediation.REPLACE_TIMEOUT_S}" in files_of("a4")["slurm.conf"]


def test_hosts_are_reported_only_for_reservation_bound_a3_ultra_and_a4_replacing_nodes():
    for bound in (False, True):
        nodesets = remediation.remediation_config(blueprint("replace", reservation_bound=bound))
        reserved, spot = nodesets.nodesets.values()
        assert reserved.on_failure == "replace" and reserved.report_faulty_host is bound
        assert not spot.report_faulty_host
    assert not any(n.report_faulty_host for n in remediation.remediation_config(
        blueprint("reboot", reservation_bound=True)).nodesets.values())


def test_slurm_conf_reboots_from_the_controller_on_one_parameters_line():
    conf = files_of("cpu-small")["slurm.conf"].splitlines()
    assert [line for line in conf if line.startswith("SlurmctldParameters=")] == [
        "SlurmctldParameters=enable_configless,reboot_from_controller,idle_on_node_suspend"]
    assert f"RebootProgram={remediation.REBOOT_PROGRAM}" in conf


def test_the_desired_counts_are_each_static_nodeset_s_count_but_flex_start_s():
    """Flex-start VMs come through resize requests, elastic ones through power saving: the
    controller sizes the others' static groups."""
    checked = load_checked(blueprint_path("a4"))
    assert json.loads(remediation.sizes_text(checked)) == {"a4": 4, "a4spot": 2}
    text = Path(blueprint_path("a4")).read_text().replace(
        "provisioning: reservation\n", "provisioning: flex-start\n", 1)
    text = "\n".join(line for line in text.splitlines()
                     if not line.strip().startswith("reservation:"))
    flex = check_text("a4.yaml", text)
    assert flex.ok, [f.line_text() for f in flex.findings]
    assert json.loads(remediation.sizes_text(flex.blueprint)) == {"a4spot": 2}
    assert scale_down.parse_sizes(remediation.sizes_text(checked)) == {"a4": 4, "a4spot": 2}
