"""What every GPU node sets up at boot, booted on its built image in the sandbox of
test_node_scripts_boot: locked memory, the local SSD RAID0, persistence mode, DCGM's host
engine and the Ops Agent with GPU metrics, enroot's paths; nothing again after a reboot, a
loud stop naming what failed, none of it on CPU nodes. The software itself (DCGM, the Ops
Agent, enroot, pyxis) is the image's: tests/clusterprint/render/test_images.py.

What only a GPU VM shows: that DCGM sees the GPUs and the Ops Agent sends their metrics, and
that a container runs (nvcr.io images are pulled by enroot on the VM): the stubs record what
was asked, not what the cloud did.
"""

from __future__ import annotations

import functools
import re
import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterprint.blueprint.validate import check_text, load_checked
from clusterprint.components.observability import COMPUTE_METRICS, charts
from clusterprint.facts import gpu_software, machines, ops_agent, slurm_metrics
from clusterprint.render import ops_agent as render_ops_agent
from clusterprint.render import rendered_files
from tests.support.boot_sandbox import Node, daemon_starts, installing_at_boot, storage_ready
from tests.support.ops_agent_config import written_config
from tests.support.paths import blueprint_path

#: blueprint, its GPU nodeset, its machine type, the public sample of its GPUs
#: (tests/fixtures/gpu/README.md).
FAMILIES = [
    pytest.param("a3mega", "a3mega", "a3-megagpu-8g", "h100", id="A3 Mega"),
    pytest.param("a3ultra", "a3ultra", "a3-ultragpu-8g", "b200", id="A3 Ultra"),
    pytest.param("a4", "a4", "a4-highgpu-8g", "b200", id="A4"),
]
LIMITS = "/etc/security/limits.d/99-unlimited.conf"
SLURMD_LIMITS = "/etc/systemd/system/slurmd.service.d/limits.conf"
SYSCTL = "/etc/sysctl.d/99-clusterprint-enroot.conf"
PERSISTENCED = "/etc/systemd/system/nvidia-persistenced.service.d/persistence-mode.conf"
#: What only GPU nodes run or write: none of it may show on a CPU node.
GPU_CALLS = ("mdadm", "mkfs", "sysctl")
GPU_FILES = (LIMITS, SLURMD_LIMITS, SYSCTL, "/etc/enroot/enroot.conf")


@functools.cache
def files_of(name: str) -> dict[str, str]:
    """The rendered files of reference blueprint ``name``."""
    return rendered_files(load_checked(blueprint_path(name)))


@pytest.fixture
def bare(sandbox, tmp_path) -> Node:
    """A fresh VM of a built image, nothing of a GPU VM's attached yet."""
    return Node(tmp_path)


def gpu_vm(node: Node, blueprint: str, machine_type: str, sample: str) -> Node:
    """``node`` as a VM of ``machine_type`` in ``blueprint``'s cluster: its storage there, its
    local SSDs attached, its driver installed."""
    storage_ready(node, blueprint)
    node.local_ssds(machines.bundled_local_ssds(machine_type))
    node.driver(sample, machines.gpu_count(machine_type))
    return node


def reboot(node: Node) -> None:
    """What a reboot keeps: the disks (the array is assembled again), not the mounts."""
    shutil.rmtree(node.fake / "mounted")
    (node.fake / "mounted").mkdir()


def started(calls: list[str], *prefixes: str) -> list[str]:
    return [c for c in calls if c.startswith(prefixes)]


@pytest.mark.parametrize(("blueprint", "nodeset", "machine_type", "sample"), FAMILIES)
def test_a_gpu_node_sets_up_its_gpus_scratch_and_services_once(bare, blueprint, nodeset,
                                                              machine_type, sample):
    node = gpu_vm(bare, blueprint, machine_type, sample)
    script = files_of(blueprint)[f"scripts/compute-{nodeset}.sh"]
    disks = machines.bundled_local_ssds(machine_type)
    node.booted(script)
    calls = node.calls()
    devices = " ".join(sorted(f"/dev/disk/by-id/google-local-nvme-ssd-{n}" for n in range(disks)))
    assert (f"mdadm --create /dev/md/localssd --name=localssd --homehost=any --level=0 --run"
            f" --force --raid-devices={disks} {devices}") in calls
    assert "mkfs.ext4 -q -m 0 -F /dev/md/localssd" in calls
    assert "mount -t ext4 -o discard,defaults /dev/md/localssd /mnt/localssd" in calls
    assert oct(node.file("/mnt/localssd").stat().st_mode & 0o7777) == "0o1777"

    assert node.file(LIMITS).read_text() == "* - memlock unlimited\n* - nofile 1048576\n"
    assert "LimitMEMLOCK=infinity" in node.file(SLURMD_LIMITS).read_text()
    assert node.file(SYSCTL).read_text() == "kernel.apparmor_restrict_unprivileged_userns = 0\n"
    assert f"sysctl -e -p {SYSCTL}" in calls
    enroot_conf = node.file("/etc/enroot/enroot.conf").read_text()
    assert "ENROOT_CACHE_PATH /mnt/localssd/${UID}/enroot/cache" in enroot_conf
    assert "ENROOT_DATA_PATH /mnt/localssd/${UID}/enroot/data" in enroot_conf
    assert "--no-persistence-mode" not in node.file(PERSISTENCED).read_text()
    config = YAML(typ="safe").load(node.file(ops_agent.CONFIG).read_text())
    assert "workload.googleapis.com/gpu.dcgm.sm.utilization" in ops_agent.metrics_collected(
        config)
    for service in ("nvidia-persistenced", "google-cloud-ops-agent"):
        assert f"systemctl enable {service}" in calls and f"systemctl restart {service}" in calls
    assert "systemctl enable nvidia-dcgm" in calls and "systemctl start nvidia-dcgm" in calls
    # Everything is in place before slurmd starts, and slurmd then inherits the limits.
    last_gpu_step = max(i for i, c in enumerate(calls) if c.startswith(
        ("systemctl restart google-cloud-ops-agent", "sysctl")))
    assert calls.index("systemctl restart slurmd") > last_gpu_step
    assert "GPU node software ready" in node.journal()
    assert node.installs() == []

    reboot(node)
    node.booted(script)
    calls = node.calls()
    assert not started(calls, "mdadm --create", "mkfs", "sysctl", "systemctl restart")
    assert "mount -t ext4 -o discard,defaults /dev/md/localssd /mnt/localssd" in calls
    assert "systemctl start slurmd" in calls
    assert node.installs() == []


def test_local_ssds_that_came_back_empty_are_made_an_array_again(bare):
    node = gpu_vm(bare, "a4", "a4-highgpu-8g", "b200")
    script = files_of("a4")["scripts/compute-a4.sh"]
    node.booted(script)
    node.calls()
    # A stop or a host maintenance hands the VM new, empty local SSDs.
    reboot(node)
    (node.overlay("/dev") / "md" / "localssd").unlink()
    for mark in ("md-superblock", "ext4"):
        (node.fake / mark).unlink()
    node.booted(script)
    calls = node.calls()
    assert len(started(calls, "mdadm --assemble", "mdadm --create", "mkfs.ext4")) == 3
    assert node.installs() == []
    assert "local SSD: created /dev/md/localssd from 32 disks" in node.journal()


def test_a_custom_image_that_carries_the_gpu_software_unlisted_installs_none_of_it(bare):
    node = gpu_vm(bare, "a4", "a4-highgpu-8g", "b200")
    node.manifest("my-image", tuple(p for p in node.parts if p not in ("gpu", "pyxis")))
    node.booted(rendered_files(installing_at_boot("a4"))["scripts/compute-a4.sh"])
    assert "image: my-image lacks pyxis gpu: installing them at boot" in node.journal()
    assert node.installs() == []
    assert not started(node.calls(), "make", "tar", "apt-mark hold")


def test_a_gpu_machine_type_without_local_ssd_keeps_scratch_on_the_boot_disk(bare):
    # G2 comes with no local SSD; the driver sample is the B200's (the boot reads only its
    # CUDA version, which is the driver's).
    text = Path(blueprint_path("cpu-small")).read_text().replace("n2-standard-4", "g2-standard-8")
    checked = check_text("g2.yaml", text)
    assert checked.ok and checked.blueprint, checked
    assert machines.bundled_local_ssds("g2-standard-8") == 0
    storage_ready(bare, "cpu-small").driver("b200", 1)
    script = rendered_files(checked.blueprint)["scripts/compute-cpu.sh"]
    assert bare.boot(script).returncode == 0, bare.journal()
    calls = bare.calls()
    assert not started(calls, "mdadm", "mkfs", "mount -t ext4")
    assert oct(bare.file("/mnt/localssd").stat().st_mode & 0o7777) == "0o1777"
    assert "/mnt/localssd is on the boot disk" in bare.journal()
    assert "ENROOT_DATA_PATH /mnt/localssd/${UID}/enroot/data" in bare.file(
        "/etc/enroot/enroot.conf").read_text()


LOCAL_SSDS = "local SSD: this machine type comes with 32 local SSDs and none is attached"
#: What a GPU node cannot boot without, and the FAILED line that names it (what the image
#: must hold fails while it is built: test_images.py).
BROKEN = [
    pytest.param("disks", "", LOCAL_SSDS + " (/dev/disk/by-id/google-local-nvme-ssd-*)",
                 id="no local SSD"),
    pytest.param("call", "systemctl is-active --quiet nvidia-dcgm",
                 "nvidia-dcgm running: still failing after 0s", id="DCGM does not start"),
]


@pytest.mark.parametrize(("how", "what", "failed"), BROKEN)
def test_a_gpu_node_that_cannot_set_up_stops_the_boot_before_slurmd(bare, how, what, failed):
    node = gpu_vm(bare, "a4", "a4-highgpu-8g", "b200")
    if how == "disks":
        shutil.rmtree(node.overlay("/dev") / "disk")
    else:
        node.fail_for_good(what)
    done = node.boot(files_of("a4")["scripts/compute-a4.sh"])
    assert done.returncode != 0
    assert node.journal().splitlines()[-1] == "<3>FAILED: " + failed
    assert daemon_starts(node.calls()) == []


def test_cpu_nodes_get_none_of_the_gpu_parts(bare):
    node = bare
    files = files_of("cpu-small")
    assert "plugstack.conf" not in files
    # The health check is one program for every node (its text names dcgm and the local
    # SSD); a CPU nodeset's config asks for no GPU check (tests/clusterprint/render/
    # test_healthcheck.py), so it is left out here, and so is common.py, shipped beside every
    # node program (its text names the Ops Agent's source).
    shipped = [files["scripts/healthcheck.py"], files["scripts/healthcheck-cpu.json"],
               files["scripts/common.py"]]
    for name, text in files.items():
        if name.startswith("scripts/") and not name.startswith("scripts/healthcheck"):
            for part in shipped:
                text = text.replace(part, "")
            assert not re.search(r"enroot|pyxis|dcgm|localssd|memlock", text), name
    (node.fake / "secret" / "1").write_text("key from the controller")
    node.booted(files["scripts/compute-cpu.sh"])
    assert not started(node.calls(), *GPU_CALLS)
    assert not [path for path in GPU_FILES if node.file(path).exists()]


def test_a_cpu_nodeset_beside_gpu_nodesets_renders_none_of_the_gpu_parts():
    text = Path(blueprint_path("a4")).read_text()
    text = text.replace("slurm:\n  nodesets:\n", "slurm:\n  nodesets:\n    - {name: debug,"
                        " machine_type: n2-standard-8, count: 1}\n", 1)
    text = text.replace("  partitions:\n",
                        "  partitions:\n    - {name: debug, nodesets: [debug]}\n", 1)
    checked = check_text("mixed.yaml", text)
    assert checked.ok and checked.blueprint, checked
    files = rendered_files(checked.blueprint)
    assert "plugstack.conf" in files
    assert "set_up_gpu_node" not in files["scripts/compute-debug.sh"]
    assert "set_up_gpu_node" in files["scripts/compute-a4.sh"]


@pytest.mark.parametrize("blueprint", ["a3mega", "a4"])
def test_login_and_controller_name_pyxis_in_plugstack_conf(bare, blueprint):
    node = storage_ready(bare, blueprint)
    files = files_of(blueprint)
    assert files["plugstack.conf"] == gpu_software.plugstack_conf()
    node.booted_from(files, "login")
    assert node.file("/etc/slurm/plugstack.conf").read_text() == files["plugstack.conf"]
    assert not started(node.calls(), "mdadm", "sysctl")

    shutil.rmtree(node.fake / "secret")
    (node.fake / "secret").mkdir()
    node.booted_from(files, "controller")
    assert node.file("/etc/slurm/plugstack.conf").read_text() == files["plugstack.conf"]
    assert not started(node.calls(), "mdadm")
    assert node.installs() == []


@pytest.mark.parametrize("blueprint", ["a3mega", "a3ultra", "a4"])
def test_the_dashboard_charts_only_metrics_the_gpu_nodes_collect(blueprint):
    scripts = [text for name, text in files_of(blueprint).items()
               if name.startswith("scripts/compute-")]
    collected = set.intersection(*(set(ops_agent.metrics_collected(
        written_config(s))) for s in scripts))
    # Compute Engine itself writes the instance metrics of every VM, the controller's exporter
    # the Slurm ones; the rest is the GPU nodes' agent's.
    charted = {m for m in charts(render_ops_agent.metrics_written(
                   load_checked(blueprint_path(blueprint)))).values()
               if not m.startswith(COMPUTE_METRICS) and m not in slurm_metrics.METRIC_TYPES}
    assert charted <= collected, charted - collected
    assert {m.split("/")[0] for m in charted} == {"agent.googleapis.com",
                                                  "workload.googleapis.com"}


def test_a_configuration_without_the_dcgm_pipeline_collects_no_dcgm_metric():
    config = written_config(files_of("a4")["scripts/compute-a4.sh"])
    assert any(".dcgm." in m for m in ops_agent.metrics_collected(config))
    del config["metrics"]["service"]["pipelines"]["dcgm"]
    assert not any(".dcgm." in m for m in ops_agent.metrics_collected(config))
    config["metrics"]["receivers"]["hostmetrics"]["collection_interval"] = "10s"
    assert ops_agent.metrics_collected(config) == frozenset()


def test_a_chart_cannot_name_a_metric_no_receiver_writes():
    assert ops_agent.metric("dcgm", "nvlink.io") == "workload.googleapis.com/gpu.dcgm.nvlink.io"
    with pytest.raises(KeyError, match="receiver dcgm writes no metric gpu/utilization"):
        ops_agent.metric("dcgm", "gpu/utilization")
