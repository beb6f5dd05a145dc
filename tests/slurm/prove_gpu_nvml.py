"""Slow proof, run by hand: the gpu/nvml plugin a GPU node builds finds its GPUs in Slurm.

    /work/main/.venv/bin/pytest -p no:cacheprovider tests/slurm/prove_gpu_nvml.py

pytest collects a file named on its command line; the suite's ``test_*.py`` pattern leaves
this one out, because it downloads Debian's Slurm source and NVML's header (about 10 MB from
deb.debian.org, into a test-local apt configuration: the machine's apt sources are left
alone) and builds the plugin: about 40 s of its 47 s here.

The rendered compute script's own functions (``fetch_slurm_source``, ``build_nvml_plugin``)
fetch this machine's installed Slurm source package with ``apt-get source`` and build only
the plugin, as a GPU VM does at its first boot. A fake ``libnvidia-ml.so`` (fake_nvml.c),
answering every NVML call the plugin makes as a node of 4 H100s or 8 B200s would, stands in
for the driver; slurmd runs in a mount namespace whose /dev holds fake /dev/nvidia<N>
character devices. What it proves: the built plugin loads into the installed slurmd, which
registers the node with the typed GPUs its ``--conf`` line declares (gpu/nvml's name,
``nvidia_h100_80gb_hbm3``, matched to the declared ``h100``), bound to the device files NVML's
minor numbers name; jobs get the GPU indices they asked for; a CPU node beside them (no
libnvidia-ml) registers with none; and without the plugin the same GPU node is drained. What
only a GPU VM can show: the real driver's answers, Ubuntu 24.04's 23.11 source building the
same way, and the cgroup confining a job to its device files (this machine has no systemd).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.facts import machines
from clusterprint.render import compute_script_path, rendered_files
from clusterprint.render.environment import render
from tests.support.local_slurm import (
    NVIDIA_MAJOR,
    Daemon,
    LocalSlurm,
    localize,
    private_dir,
    wait_until,
)

FAKE_NVML = Path(__file__).with_name("fake_nvml.c")
#: The installed Slurm's plugin folder (Debian's), where slurmd finds every other plugin.
SLURM_PLUGINS = "/usr/lib/x86_64-linux-gnu/slurm-wlm"
#: NVML's device names of the GPUs the fake reports, as nvidia-smi -L prints them.
NVML_NAMES = {"a3-highgpu-4g": "NVIDIA H100 80GB HBM3", "a4-highgpu-8g": "NVIDIA B200"}
#: Character devices every process expects in /dev: (major, minor).
DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9),
           "tty": (5, 0)}


@dataclass(frozen=True)
class Built:
    """The plugin the rendered functions built, and the fake NVML library's folder."""

    plugins: Path
    nvml_lib: Path


def run(argv: list[str], **kwargs) -> str:
    """A command that must succeed; its stdout."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, **kwargs)
    assert done.returncode == 0, f"{argv}: {done.returncode}\n{done.stdout[-3000:]}{done.stderr}"
    return done.stdout


def local_apt(root: Path) -> dict[str, str]:
    """An apt configuration of this machine's Debian release with source packages and NVML's
    header (non-free), in ``root``: the environment its commands run with."""
    codename = re.search(r"^VERSION_CODENAME=(\w+)", Path("/etc/os-release").read_text(),
                         re.MULTILINE)[1]
    for sub in ("lists/partial", "cache/archives/partial"):
        (root / sub).mkdir(parents=True)
    sources = root / "sources.list"
    sources.write_text("".join(f"{kind} http://deb.debian.org/debian {suite} main non-free\n"
                               for kind in ("deb", "deb-src")
                               for suite in (codename, f"{codename}-updates"))
                       + f"deb-src http://deb.debian.org/debian-security {codename}-security "
                       "main\n")
    conf = root / "apt.conf"
    conf.write_text(f'Dir::Etc::SourceList "{sources}";\nDir::Etc::SourceParts "/nonexistent";\n'
                    f'Dir::State::Lists "{root}/lists";\nDir::Cache "{root}/cache";\n'
                    'Debug::NoLocking "true";\n')
    env = {**os.environ, "APT_CONFIG": str(conf)}
    run(["apt-get", "-q", "update"], env=env)
    return env


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Iterator[Built]:
    """The gpu/nvml plugin, built by the rendered script's functions for the installed Slurm."""
    root = tmp_path_factory.mktemp("gpu-nvml")
    env = local_apt(root / "apt")
    run(["apt-get", "-q", "download", "libnvidia-ml-dev"], env=env, cwd=root)
    (deb,) = root.glob("libnvidia-ml-dev_*.deb")
    run(["dpkg-deb", "-x", str(deb), str(root / "nvml-dev")])
    include = root / "nvml-dev" / "usr" / "include"
    lib = root / "lib"
    lib.mkdir()
    run(["gcc", "-shared", "-fPIC", "-Wall", "-Werror", f"-I{include}", "-o",
         str(lib / "libnvidia-ml.so.1"), "-Wl,-soname,libnvidia-ml.so.1", str(FAKE_NVML)])
    (lib / "libnvidia-ml.so").symlink_to("libnvidia-ml.so.1")

    plugins = private_dir()  # slurmctld, as the slurm user, reads every plugin folder
    functions = render("scripts/gpu_detect.sh.j2").replace(
        "readonly NVML_BUILD_DIR=/var/lib/clusterprint/slurm-nvml-build",
        f"readonly NVML_BUILD_DIR={root / 'build'}")
    driver = root / "build.sh"
    driver.write_text(
        "set -Eeuo pipefail\nlog() { echo \"$*\"; }\n"
        "fail() { echo \"FAILED: $*\" >&2; exit 1; }\n"
        "retry() { shift 2; \"$@\"; }\n" + functions +
        "read -r package version < <(dpkg-query -W -f '${source:Package} ${source:Version}\\n' "
        "slurmd)\nfetch_slurm_source \"$package\" \"$version\"\n"
        f"build_nvml_plugin {plugins}\n")
    started = time.monotonic()
    # configure finds NVML where a GPU VM has it in the system paths: here, beside the build.
    run(["bash", str(driver)], env={**env, "CPPFLAGS": f"-I{include}", "LDFLAGS": f"-L{lib}"})
    assert (plugins / "gpu_nvml.so").exists()
    print(f"gpu/nvml plugin fetched and built in {time.monotonic() - started:.0f} s")
    yield Built(plugins, lib)
    shutil.rmtree(plugins)


def test_the_proof_runs_the_compute_scripts_own_functions():
    script = rendered_files(mixed_cluster())[compute_script_path("h100")]
    assert render("scripts/gpu_detect.sh.j2") in script


def mixed_cluster() -> Blueprint:
    """A CPU debug nodeset beside 4 H100s and 8 B200s, all in one partition; the H100 nodeset
    may grow by one, for the node that boots without the plugin."""
    nodesets = {"debug": "n2-standard-4", "h100": "a3-highgpu-4g", "b200": "a4-highgpu-8g"}
    return Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": "mixed",
        "region": "us-central1", "zone": "us-central1-a",
        "slurm": {"nodesets": [{"name": n, "machine_type": m, "count": 1,
                                "max_count": 2 if n == "h100" else 1}
                               for n, m in nodesets.items()],
                  "partitions": [{"name": "all", "nodesets": list(nodesets)}]}})


def fake_dev(folder: Path, gpus: int) -> Path:
    """A /dev for slurmd: the usual character devices and ``gpus`` NVIDIA ones."""
    folder.mkdir()
    for name, (major, minor) in DEVICES.items():
        os.mknod(folder / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    for index in range(gpus):
        os.mknod(folder / f"nvidia{index}", 0o666 | stat.S_IFCHR,
                 os.makedev(NVIDIA_MAJOR, index))
    for sub in ("pts", "shm"):
        (folder / sub).mkdir()
    (folder / "fd").symlink_to("/proc/self/fd")
    return folder


def as_node(cluster: LocalSlurm, built: Built, name: str, machine_type: str,
            *slurmd: str) -> tuple[list[str], dict[str, str]]:
    """slurmd with ``slurmd`` arguments as the node ``name`` of ``machine_type`` runs it: the
    fake NVML answering for its GPUs (none for a CPU machine), in a mount namespace whose /dev
    has their device files. The command line and its environment."""
    nodeset = next(n for n in cluster.blueprint.slurm.nodesets if n.machine_type == machine_type)
    env = {**cluster.env, "FAKE_NVML_GPUS": str(nodeset.gpus),
           "FAKE_NVML_NAME": NVML_NAMES.get(machine_type, "")}
    if nodeset.gpus:
        env["LD_LIBRARY_PATH"] = str(built.nvml_lib)
    dev = cluster.root / f"dev-{name}"
    if not dev.exists():
        fake_dev(dev, nodeset.gpus)
    return (["unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount --bind "$0" /dev && exec "$@"', str(dev), "slurmd", *slurmd, "-N", name,
             "-Z", "--conf", cluster.compute_node_conf(nodeset.name)], env)


def start_nvml_node(cluster: LocalSlurm, built: Built, name: str, machine_type: str,
                    conf: Path, state: str = "idle") -> Daemon:
    """The node's slurmd (``as_node``) reading ``conf``, until sinfo shows it ``state``."""
    (cluster.root / f"spool-{name}").mkdir()
    argv, env = as_node(cluster, built, name, machine_type, "-D", "-f", str(conf))
    slurmd = Daemon(argv, cluster.root / f"slurmd-{name}.log", env)
    cluster.daemons.append(slurmd)
    wait_until(lambda: slurmd.running() and cluster.node_state(name) == state,
               f"node {name} registering {state}", slurmd.log)
    return slurmd


def slurmd_gres(cluster: LocalSlurm, built: Built, name: str, machine_type: str) -> str:
    """What ``slurmd -G`` prints of the GRES the node's slurmd finds (the plugin's records)."""
    argv, env = as_node(cluster, built, name, machine_type, "-G", "-f", str(cluster.conf))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


def test_nodes_register_the_gpus_the_built_plugin_finds(built, local_slurm):
    blueprint = mixed_cluster()
    cluster = local_slurm(blueprint, start=False)
    # The rendered gres.conf alone (AutoDetect=nvml): no node gets a stand-in line here.
    (cluster.root / "gres.conf").write_text(cluster.files["gres.conf"])
    without = cluster.root / "slurm-without-plugin.conf"
    without.write_text(cluster.conf.read_text())
    cluster.conf.write_text(localize(cluster.conf.read_text(),
                                     {"PluginDir": f"{SLURM_PLUGINS}:{built.plugins}"}))
    cluster.start_controller()

    # Without the plugin a GPU node finds no GPUs and is drained, as before this change.
    slurmd = start_nvml_node(cluster, built, "h100-bare", "a3-highgpu-4g", without, "inval")
    assert "cannot create gpu context for gpu/nvml" in slurmd.log.read_text()
    reason = cluster.run("sinfo", "-h", "-R", "-n", "h100-bare", "-o", "%E").strip()
    assert reason == "gres/gpu count reported lower than configured (0 < 4)"
    slurmd.stop()

    for nodeset in blueprint.slurm.nodesets:
        name = f"{nodeset.name}-vm"
        slurmd = start_nvml_node(cluster, built, name, nodeset.machine_type, cluster.conf)
        shown = cluster.run("scontrol", "show", "node", name)
        gres_type = machines.gres_type(nodeset.machine_type)
        assert f"Gres={f'gpu:{gres_type}:{nodeset.gpus}' if nodeset.gpus else '(null)'}" in shown
        assert cluster.run("sinfo", "-h", "-R", "-n", name, "-o", "%E").strip() == ""
        log = slurmd.log.read_text()
        if nodeset.gpus:
            detected = f"_get_system_gpu_list_nvml: {nodeset.gpus} GPU system device(s) detected"
            assert detected in log, log[-3000:]
            # NVML's GPUs as the plugin records them: typed after NVML's device name, each
            # bound to the device file of its minor number.
            records = re.findall(r"Gres Name=gpu Type=(\S+) Count=1 Index=(\d+) .*File=(\S+)",
                                 slurmd_gres(cluster, built, name, nodeset.machine_type))
            assert records == [(gres_type, str(i), f"/dev/nvidia{i}")
                               for i in range(nodeset.gpus)]
            check_job(cluster, name, gres_type, nodeset.gpus)
        else:
            assert "gpu/nvml" not in log
        slurmd.stop()


def check_job(cluster: LocalSlurm, node: str, gres_type: str, gpus: int) -> None:
    """Half the node's GPUs: the step sees their indices; the job holds the node's, typed."""
    asked = gpus // 2
    out = cluster.run("srun", "-w", node, f"--gres=gpu:{gres_type}:{asked}", "-N1", "bash", "-c",
                      'echo "$CUDA_VISIBLE_DEVICES"; ls /dev | grep -c "^nvidia[0-9]"; '
                      'scontrol show -d job "$SLURM_JOB_ID" | grep -o " GRES=gpu[^ ]*"')
    devices, visible, bound = out.split()
    assert devices == ",".join(map(str, range(asked)))
    assert visible == str(gpus)  # no cgroup here: the job still sees every file
    # The partition gives whole nodes (OverSubscribe=EXCLUSIVE): the job holds every GPU.
    assert bound == f"GRES=gpu:{gres_type}:{gpus}(IDX:0-{gpus - 1})"
