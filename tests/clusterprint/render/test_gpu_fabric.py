"""A GPU node boots with exactly its family's fabric, once, or stops naming what failed.

The rendered compute scripts run on their built image in the mount-namespace sandbox of
test_node_scripts_boot (stub commands record every call; the NICs come from fixtures/nics,
see its README): the fabric's software is the image's (test_images.py), the boot loads its
module, applies its devices, finds the NICs and writes the job environment. The RxDM prolog
runs as a process with stub docker and modprobe.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from clusterprint.blueprint.validate import load_checked
from clusterprint.render import rendered_files
from clusterprint.render.gpu_fabric import fabric_context
from tests.support.boot_sandbox import STUBS, Node, daemon_starts, ready
from tests.support.paths import blueprint_path

RELEASE = os.uname().release
NCCL_ENV = "/etc/clusterprint/nccl-env.sh"
PROLOG = "/etc/slurm/prolog.d/10-rxdm"
EPILOG = "/etc/slurm/epilog.d/10-rxdm"
UDEV_RULE = "/etc/udev/rules.d/00-a3-megagpu.rules"
RXDM = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.23"
A3MEGA_GPU_NICS = "enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0"
RDMA_GPU_NICS = ",".join(f"gpu{i}rdma0" for i in range(8))


@pytest.fixture(scope="module")
def scripts() -> dict[str, dict[str, str]]:
    """The rendered files of the reference blueprints the tests boot."""
    return {name: rendered_files(load_checked(blueprint_path(name)))
            for name in ("a3mega", "a3ultra", "a4", "cpu-small")}


@pytest.fixture
def built(sandbox, tmp_path) -> Node:
    """A VM of a built image, the munge key already made."""
    node = Node(tmp_path)
    (node.fake / "secret" / "1").write_text("key from the controller")
    return node


def boot(node: Node, blueprint: str, nodeset: str, scripts) -> list[str]:
    """Boot the nodeset's compute script; it must succeed. The stub calls it made."""
    done = node.boot(scripts[blueprint][f"scripts/compute-{nodeset}.sh"])
    assert done.returncode == 0, node.journal()[-3000:]
    return node.calls()


def ran(calls: list[str], *prefixes: str) -> list[str]:
    return [c for c in calls if c.startswith(prefixes)]


def test_an_a3mega_node_boots_its_gpudirect_tcpxo_fabric_once(built, scripts):
    ready(built, "a3mega")
    calls = boot(built, "a3mega", "a3mega", scripts)
    assert "modprobe import-helper" in calls
    assert ran(calls, "udevadm") == [
        "udevadm control --reload-rules",
        "udevadm trigger --action=add --subsystem-match=pci --attr-match=vendor=0x1ae0 "
        "--attr-match=device=0x0084"]
    assert calls.index("systemctl enable docker") < calls.index("systemctl start docker")
    prolog, epilog = built.file(PROLOG), built.file(EPILOG)
    assert prolog.read_text() == epilog.read_text() == rxdm_script(scripts)
    assert oct(prolog.stat().st_mode & 0o777) == oct(epilog.stat().st_mode & 0o777) == "0o755"
    env = built.file(NCCL_ENV).read_text()
    assert env.splitlines()[2:] == [
        "NCCL_LIB_DIR=/var/lib/tcpxo/lib64 source /var/lib/tcpxo/lib64/nccl-env-profile.sh",
        "export NCCL_FASTRAK_CTRL_DEV=enp0s12",
        f"export NCCL_FASTRAK_IFNAME={A3MEGA_GPU_NICS}",
        "export NCCL_SOCKET_IFNAME=enp0s12",
        "export NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=/dev/aperture_devices",
        'export LD_LIBRARY_PATH="/var/lib/tcpxo/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"',
        "export CLUSTERPRINT_SOCKET_IFNAMES=enp0s12",
        f"export CLUSTERPRINT_GPU_IFNAMES={A3MEGA_GPU_NICS}"]
    # slurmd starts last, once the fabric is in place.
    assert calls.index("systemctl restart slurmd") > calls.index("udevadm control --reload-rules")
    assert built.installs() == []

    before = {path: built.file(path).read_text() for path in (NCCL_ENV, PROLOG)}
    again = boot(built, "a3mega", "a3mega", scripts)
    assert ran(again, "udevadm") == []  # the aperture devices are bound
    assert {path: built.file(path).read_text() for path in before} == before
    assert "systemctl start slurmd" in again and "systemctl restart slurmd" not in again


def rxdm_script(scripts) -> str:
    """The RxDM prolog the a3mega blueprint's compute nodes get."""
    bp = load_checked(blueprint_path("a3mega"))
    return fabric_context(bp, bp.slurm.nodesets[0])["rxdm_script"]


@pytest.mark.parametrize("blueprint", ["a3ultra", "a4"])
def test_an_rdma_node_boots_with_gibs_environment_and_nothing_of_tcpxo(built, scripts,
                                                                       blueprint):
    ready(built, blueprint)
    calls = boot(built, blueprint, blueprint, scripts)
    assert ran(calls, "docker", "dkms", "udevadm", "modprobe import-helper",
               "systemctl start docker") == []
    for absent in (PROLOG, EPILOG, UDEV_RULE):
        assert not built.file(absent).exists()
    env = built.file(NCCL_ENV).read_text().splitlines()[2:]
    # A4's kernel lists the RoCE NICs first: the names still follow the metadata's order.
    assert env == [
        "source /usr/local/gib/scripts/set_nccl_env.sh",
        "export NCCL_NET=gIB",
        "export NCCL_SOCKET_IFNAME=enp0s19,enp192s20",
        'export LD_LIBRARY_PATH="/usr/local/gib/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"',
        "export CLUSTERPRINT_SOCKET_IFNAMES=enp0s19,enp192s20",
        f"export CLUSTERPRINT_GPU_IFNAMES={RDMA_GPU_NICS}"]
    assert built.installs() == []


def test_an_a3high_node_gets_its_nic_names_and_a_warning_that_tcpx_is_not_installed(
        built, tmp_path):
    path = tmp_path / "a3high.yaml"
    path.write_text(Path(blueprint_path("a3mega")).read_text().replace(
        "a3-megagpu-8g", "a3-highgpu-8g"))
    script = rendered_files(load_checked(str(path)))["scripts/compute-a3mega.sh"]
    (tmp_path / "compute.sh").write_text(script)
    checked = subprocess.run(["shellcheck", "--severity=style", "--shell=bash",
                              str(tmp_path / "compute.sh")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
    ready(built, "a3mega")
    built.nics("dranet-5nic")
    for _ in ("first boot", "reboot"):
        done = built.boot(script)
        assert done.returncode == 0, built.journal()[-3000:]
        calls = built.calls()
        assert ran(calls, "docker", "dkms", "udevadm", "modprobe") == []
        assert ("<4>fabric: WARNING: GPUDirect-TCPX needs Canonical's TCPX kernel"
                in built.journal())
    assert built.installs() == []
    assert built.file(NCCL_ENV).read_text().splitlines()[2:] == [
        "unset NCCL_NET",
        "export NCCL_SOCKET_IFNAME=enp0s12",
        "export CLUSTERPRINT_SOCKET_IFNAMES=enp0s12",
        "export CLUSTERPRINT_GPU_IFNAMES=enp6s0,enp12s0,enp134s0,enp140s0"]
    assert not built.file(PROLOG).exists()


def test_a_cpu_nodeset_and_the_other_roles_get_no_fabric(built, scripts):
    for name, text in scripts["cpu-small"].items():
        if name.startswith("scripts/"):
            assert "ensure_gpu_fabric" not in text and NCCL_ENV not in text, name
    for name in ("controller", "login"):
        assert "ensure_gpu_fabric" not in scripts["a3mega"][f"scripts/{name}.sh"]
    calls = boot(built, "cpu-small", "cpu", scripts)
    assert ran(calls, "docker", "dkms", "udevadm", "modprobe", "systemctl start docker") == []
    for absent in (NCCL_ENV, PROLOG, EPILOG, UDEV_RULE):
        assert not built.file(absent).exists()


def test_gpu_nodes_without_their_gpu_network_get_no_fabric(tmp_path):
    path = tmp_path / "a3mega.yaml"
    path.write_text(Path(blueprint_path("a3mega")).read_text().replace(
        "gpu_networks: auto", "gpu_networks: none"))
    bp = load_checked(str(path))
    assert fabric_context(bp, bp.slurm.nodesets[0]) is None
    assert "ensure_gpu_fabric" not in rendered_files(bp)["scripts/compute-a3mega.sh"]


def failure(blueprint, failed, broken=None, down=(), nics=None, touch=None):
    """A boot of ``blueprint``'s compute node that fails with ``failed``: a stub call
    containing ``broken`` fails, NICs ``down`` are not up, the NICs are fixture ``nics``'s,
    or fake/``touch`` exists. (A part the image cannot get fails its build: test_images.py.)"""
    return pytest.param(blueprint, broken, down, nics, touch, failed, id=failed[:60])


FAILURES = [
    failure("a3mega", f"fabric: the image has no import-helper module for kernel {RELEASE}",
            broken="modprobe import-helper"),
    failure("a3mega", "fabric: udevadm could not apply /etc/udev/rules.d/00-a3-megagpu.rules",
            broken="udevadm trigger"),
    failure("a3mega", "fabric: aperture devices in /dev/aperture_devices: still failing "
            "after 0s", touch="no-apertures"),
    failure("a3mega", f"fabric: GPU NICs up ({A3MEGA_GPU_NICS}): still failing after 0s",
            down=("enp141s0",)),
    failure("a4", "fabric: the metadata server's NICs in /sys/class/net: still failing "
            "after 0s", nics="a3mega"),
]


@pytest.mark.parametrize(("blueprint", "broken", "down", "nics", "touch", "failed"), FAILURES)
def test_a_fabric_the_node_cannot_set_up_stops_the_boot_naming_it(
        built, scripts, blueprint, broken, down, nics, touch, failed):
    ready(built, blueprint)
    built.nics(nics or blueprint, down=down)
    if touch:
        (built.fake / touch).touch()
    built.no_retries()
    if broken:
        built.fail_for_good(broken)
    started = time.monotonic()
    done = built.boot(scripts[blueprint][f"scripts/compute-{blueprint}.sh"])
    assert done.returncode != 0
    assert time.monotonic() - started < 30
    journal = built.journal().splitlines()
    assert journal[-1] == f"<3>FAILED: {failed}", journal[-6:]
    assert daemon_starts(built.calls()) == []
    assert not built.file(NCCL_ENV).exists()


def test_the_nic_wait_and_mismatch_say_which_nic(built, scripts):
    ready(built, "a3mega")
    built.nics("a3mega", down=("enp141s0",))
    built.env["CLUSTERPRINT_NIC_BUDGET_S"] = "0"
    built.boot(scripts["a3mega"]["scripts/compute-a3mega.sh"])
    assert "fabric: enp141s0 is down" in built.journal()

    ready(built, "a4")
    built.nics("a3mega")
    built.boot(scripts["a4"]["scripts/compute-a4.sh"])
    assert "NICs: the metadata server lists 9 NICs; this machine type has 2 system and 8 GPU " \
           "NICs" in built.journal()


# --- The RxDM prolog as Slurm runs it ---

@pytest.fixture
def prolog(tmp_path, scripts) -> tuple[Path, dict[str, str], Path]:
    """The rendered prolog on disk, the environment of a 2-node job's prolog, the fakes."""
    path = tmp_path / "10-rxdm"
    path.write_text(rxdm_script(scripts))
    path.chmod(0o755)
    fake = tmp_path / "fake"
    fake.mkdir()
    env = {"PATH": f"{STUBS}:{STUBS / 'packages'}:/usr/bin", "FAKE": str(fake),
           "SLURM_SCRIPT_CONTEXT": "prolog_slurmd", "SLURM_JOB_ID": "42",
           "SLURM_JOB_NUM_NODES": "2", "CLUSTERPRINT_RXDM_BUDGET_S": "3"}
    return path, env, fake


def run(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(path)], env=env, capture_output=True, text=True, timeout=60)


def calls_of(fake: Path) -> list[str]:
    path = fake / "calls"
    return path.read_text().splitlines() if path.exists() else []


def test_the_rxdm_prolog_starts_rxdm_and_waits_until_it_is_ready(prolog):
    path, env, fake = prolog
    (fake / "rxdm-ready").touch()
    done = run(path, env)
    assert done.returncode == 0, done.stderr
    calls = calls_of(fake)
    assert calls[0] == "modprobe import-helper"
    start = next(c for c in calls if c.startswith("docker run"))
    assert start == ("docker run --detach --rm --name receive-datapath-manager-42 "
                     "--cap-add=NET_ADMIN --network=host --privileged --gpus all "
                     "--volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64 "
                     "--volume /dev/dmabuf_import_helper:/dev/dmabuf_import_helper "
                     "--env LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu "
                     f"{RXDM} --num_hops=2 --num_nics=8 --uid= --alsologtostderr")
    assert calls[-1] == "docker container logs receive-datapath-manager-42"


def test_an_rxdm_that_is_never_ready_fails_the_prolog_with_the_reason(prolog):
    path, env, fake = prolog
    done = run(path, env)
    assert done.returncode == 1
    # It looked again every 2 s, and gave up once its 3 s were over (bash counts SECONDS in
    # whole seconds: 2 or 3 looks).
    assert calls_of(fake).count("docker container logs receive-datapath-manager-42") in (2, 3)
    assert done.stderr.splitlines()[-1] == (
        f"rxdm: RxDM not ready on {os.uname().nodename} after 3s: it never logged "
        "'Buffer manager initialization complete'")
    assert "tcpgpudmarxd starting" in done.stderr


def test_a_prolog_whose_module_does_not_load_fails_naming_it(prolog):
    path, env, fake = prolog
    (fake / "broken").write_text("modprobe import-helper\n")
    done = run(path, env)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "rxdm: modprobe import-helper failed: the dmabuf import-helper module is not built "
        f"for kernel {RELEASE}")
    assert not [c for c in calls_of(fake) if c.startswith("docker")]


@pytest.mark.parametrize("nodes", [{"SLURM_JOB_NUM_NODES": "1"},
                                   {"SLURM_JOB_NUM_NODES": "", "SLURM_JOB_NODELIST": "a3-1"}])
def test_a_single_node_job_starts_no_rxdm(prolog, nodes):
    path, env, fake = prolog
    done = run(path, {**env, **nodes})
    assert done.returncode == 0, done.stderr
    assert [c for c in calls_of(fake) if not c.startswith("scontrol")] == []


def test_a_job_counted_from_its_node_list_gets_rxdm(prolog):
    path, env, fake = prolog
    (fake / "rxdm-ready").touch()
    done = run(path, {**env, "SLURM_JOB_NUM_NODES": "", "SLURM_JOB_NODELIST": "a3-1,a3-2"})
    assert done.returncode == 0, done.stderr
    assert any(c.startswith("docker run --detach") for c in calls_of(fake))


def test_the_epilog_stops_every_rxdm(prolog):
    path, env, fake = prolog
    (fake / "docker-running").write_text("0123abcd\n")
    done = run(path, {**env, "SLURM_SCRIPT_CONTEXT": "epilog_slurmd"})
    assert done.returncode == 0, done.stderr
    assert calls_of(fake) == [
        "docker container list --filter name=receive-datapath-manager- --quiet",
        "docker container stop 0123abcd", "docker container prune --force"]


def test_the_rxdm_script_refuses_to_run_outside_slurm(prolog):
    path, env, _ = prolog
    done = run(path, {**env, "SLURM_SCRIPT_CONTEXT": ""})
    assert done.returncode == 1
    assert "Slurm runs this as a prolog or an epilog" in done.stderr


def test_the_rxdm_script_parses_and_passes_shellcheck(prolog):
    path = prolog[0]
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    checked = subprocess.run(["shellcheck", "--severity=style", str(path)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
