"""The NCCL proof job: one per GPU partition, valid shell, and a pass/fail a user can trust.

The job runs here as a process with a stub `srun` that prints a recorded nccl-tests output
(tests/fixtures/nccl-tests/README.md says where each came from), so its verdict and exit
status are what a user would get from those numbers. What only a GPU VM can show is the
bandwidth itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import load_checked
from clusterprint.facts import gpu_software, machines
from clusterprint.render import rendered_files
from clusterprint.render.nccl_job import JOB_MINUTES, nccl_job_path
from tests.support.job_blueprints import (
    A3HIGH,
    GENERATED,
    MIXED,
    NO_FABRIC,
    TWO_NODESETS,
    sbatch_options,
)
from tests.support.paths import ROOT, reference_blueprints

FIXTURES = ROOT / "tests" / "fixtures" / "nccl-tests"
#: 2 x A3 High over TCPX: Avg bus bandwidth 30.9622.
A3HIGH_OUTPUT = FIXTURES / "a3high-tcpx-2-nodes.txt"
#: 2 x A3 Ultra over RDMA: Avg bus bandwidth 120.248.
A3ULTRA_OUTPUT = FIXTURES / "a3ultra-rdma-2-nodes.txt"

#: srun as the job calls it, each call on one line of $FAKE/srun-calls: a build (`git clone`
#: in its command) leaves an all_reduce_perf in the folder mounted at /nccl-tests; a run
#: prints $FAKE/output, or fails when $FAKE/fail exists.
SRUN_STUB = r"""#!/bin/bash
args="$*"
printf '%s\n' "${args//$'\n'/ }" >>"$FAKE/srun-calls"
mounts=
for arg; do [[ $arg == --container-mounts=* ]] && mounts=${arg#*=}; done
if [[ $* == *"git clone"* ]]; then
  mkdir -p "${mounts%%:/nccl-tests*}/build"
  printf '#!/bin/true\n' >"${mounts%%:/nccl-tests*}/build/all_reduce_perf"
  chmod +x "${mounts%%:/nccl-tests*}/build/all_reduce_perf"
  exit 0
fi
[[ ! -e $FAKE/fail ]] || exit 1
if [[ -e $FAKE/container ]]; then
  # The task's command as pyxis runs it: /nccl-tests is the folder mounted there, the job
  # environment file the node's ($FAKE/nccl-env.sh), the other mounts the same paths.
  inner=${*: -1}
  tests=${mounts%%:/nccl-tests*}
  CLUSTERPRINT_NCCL_ENV=$FAKE/nccl-env.sh exec bash -c "${inner//\/nccl-tests/$tests}"
fi
cat "$FAKE/output"
"""
#: all_reduce_perf as the container runs it: what NCCL would see, then $FAKE/output.
ALL_REDUCE_PERF = """#!/bin/bash
echo "NCCL_NET=${NCCL_NET:-} LD_LIBRARY_PATH=$LD_LIBRARY_PATH args: $*"
cat "$FAKE/output"
"""
ALL_BLUEPRINTS = {**{p.stem: load_checked(str(p)) for p in reference_blueprints()}, **GENERATED}


def jobs_of(blueprint: Blueprint) -> dict[str, str]:
    return {k: v for k, v in rendered_files(blueprint).items() if k.startswith("jobs/")}


@pytest.mark.parametrize("name", sorted(ALL_BLUEPRINTS))
def test_every_job_parses_and_passes_shellcheck(name, tmp_path):
    jobs = jobs_of(ALL_BLUEPRINTS[name])
    for path, text in jobs.items():
        script = tmp_path / Path(path).name
        script.write_text(text)
        parsed = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert parsed.returncode == 0, parsed.stderr
        assert shutil.which("shellcheck"), "install shellcheck (make system-packages)"
        checked = subprocess.run(["shellcheck", "--severity=style", str(script)],
                                 capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout
        assert not re.search(r"#\s*shellcheck\s+disable", text)


def test_each_gpu_partition_gets_a_job_and_cpu_partitions_none():
    assert sorted(jobs_of(ALL_BLUEPRINTS["a4"])) == [nccl_job_path("a4"), nccl_job_path("a4spot")]
    assert jobs_of(ALL_BLUEPRINTS["cpu-small"]) == {}
    assert sorted(jobs_of(MIXED)) == [nccl_job_path("all"), nccl_job_path("l4")]


def test_the_job_asks_for_whole_gpu_nodes_of_its_partition():
    job = jobs_of(ALL_BLUEPRINTS["a3mega"])[nccl_job_path("a3mega")]
    assert sbatch_options(job) == {
        "job-name": "nccl-allreduce-a3mega", "partition": "a3mega", "nodes": "2",
        "ntasks-per-node": "8", "gpus-per-node": "8", "constraint": "a3mega", "exclusive": "",
        "mem": "0", "time": str(JOB_MINUTES), "output": "%x-%j.out",
        # Both nodes under one sub-block of the network tree, if one frees up in 5 minutes.
        "switches": "1@5:00"}
    assert "readonly IMAGE='nvcr.io#nvidia/pytorch:24.04-py3'" in job
    assert "readonly THRESHOLD_GBPS=150\n" in job
    assert 'MOUNTS+=",/var/lib/tcpxo/lib64:/var/lib/tcpxo/lib64"' in job


def test_a_mixed_partition_is_pinned_to_its_fabric_nodes_and_a_short_partition_caps_the_time():
    jobs = jobs_of(MIXED)
    everything = sbatch_options(jobs[nccl_job_path("all")])
    assert (everything["constraint"], everything["gpus-per-node"]) == ("mega", "8")
    l4 = jobs[nccl_job_path("l4")]
    # One g2 node at most: the job runs on it alone, with no network threshold.
    assert (sbatch_options(l4)["nodes"], sbatch_options(l4)["time"]) == ("1", "10")
    assert "readonly THRESHOLD_GBPS=\n" in l4
    assert "CLUSTERPRINT_NCCL_ENV_REQUIRED=no" in l4


def test_nodesets_of_one_machine_type_serve_the_job_together():
    options = sbatch_options(jobs_of(TWO_NODESETS)[nccl_job_path("a4")])
    assert (options["constraint"], options["nodes"]) == ("a4|a4spot", "2")


def test_without_gpu_networks_an_a3_mega_job_has_no_fabric_threshold():
    job = jobs_of(NO_FABRIC)[nccl_job_path("mega")]
    assert "readonly THRESHOLD_GBPS=\n" in job
    assert machines.NCCL_PROOF_WITHOUT_FABRIC.image in job


def test_every_fabric_family_with_a_public_threshold_keeps_it():
    assert {f.machine_type: f.nccl_proof.threshold_gbps for f in machines.MACHINE_FAMILIES
            if f.nccl_proof} == {
        "a3-highgpu-8g": 60, "a3-edgegpu-8g": None, "a3-megagpu-8g": 150,
        "a3-ultragpu-8g": 250, "a4-highgpu-8g": 250, "a4x-highgpu-4g": 160}


class Run:
    """A rendered job run as a process on a fake batch node, srun stubbed."""

    def __init__(self, root: Path, job: str) -> None:
        self.root = root
        self.fake = root / "fake"
        (self.fake / "bin").mkdir(parents=True)
        stub = self.fake / "bin" / "srun"
        stub.write_text(SRUN_STUB)
        stub.chmod(0o755)
        self.home = root / "home"
        self.home.mkdir()
        self.script = root / "job.sbatch"
        self.script.write_text(job)

    def built(self, binary: str = "#!/bin/true\n") -> None:
        """nccl-tests already built by an earlier run: its all_reduce_perf is ``binary``."""
        (cache,) = re.findall(r"\$HOME/(\.cache/clusterprint/\S+)\}", self.script.read_text())
        path = self.home / cache / "build" / "all_reduce_perf"
        path.parent.mkdir(parents=True)
        path.write_text(binary)
        path.chmod(0o755)

    def in_container(self, nccl_env: str | None) -> None:
        """Run the task's own command (srun stands in for pyxis); the node's job environment
        file holds ``nccl_env``, or is missing."""
        (self.fake / "container").touch()
        if nccl_env is not None:
            (self.fake / "nccl-env.sh").write_text(nccl_env)

    def __call__(self, output: Path | str, nodes: int = 2) -> subprocess.CompletedProcess:
        out = self.fake / "output"
        out.write_text(output.read_text() if isinstance(output, Path) else output)
        env = {"PATH": f"{self.fake / 'bin'}:/usr/bin:/bin", "HOME": str(self.home),
               "FAKE": str(self.fake), "TMPDIR": str(self.root), "SLURM_JOB_ID": "42",
               "SLURM_JOB_NUM_NODES": str(nodes),
               "SLURM_JOB_NODELIST": "proof-h100-[0-1]" if nodes > 1 else "proof-h100-0"}
        return subprocess.run(["bash", str(self.script)], env=env, capture_output=True,
                              text=True, timeout=30)

    def srun_calls(self) -> list[str]:
        calls = self.fake / "srun-calls"
        return calls.read_text().splitlines() if calls.exists() else []


@pytest.fixture
def a3high_job(tmp_path) -> Run:
    run = Run(tmp_path, jobs_of(A3HIGH)[nccl_job_path("gpu")])
    run.built()
    return run


def test_a_bandwidth_above_the_threshold_passes(a3high_job):
    done = a3high_job(A3ULTRA_OUTPUT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == (
        "PASS: bus bandwidth 120.248 GB/s across 2 nodes (proof-h100-[0-1]), at least 60 GB/s "
        "for a3-highgpu-8g")
    # nccl-tests' own output stays in the job's output file above the verdict.
    assert "# Avg bus bandwidth    : 120.248" in done.stdout


def test_a_bandwidth_below_the_threshold_fails_naming_the_nodes(a3high_job):
    done = a3high_job(A3HIGH_OUTPUT)
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == (
        "FAIL: bus bandwidth 30.9622 GB/s across 2 nodes (proof-h100-[0-1]), below 60 GB/s "
        "for a3-highgpu-8g")


@pytest.mark.parametrize("bandwidth, passed", [("60", True), ("59.999", False), ("6e+01", True)])
def test_the_threshold_itself_passes(a3high_job, bandwidth, passed):
    summary = A3HIGH_OUTPUT.read_text().replace("30.9622", bandwidth)
    assert a3high_job(summary).returncode == (0 if passed else 1)


def test_a_run_that_printed_no_summary_fails(a3high_job):
    cut = A3HIGH_OUTPUT.read_text().split("# Out of bounds")[0]
    done = a3high_job(cut)
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == (
        "FAIL: all_reduce_perf printed no '# Avg bus bandwidth' on proof-h100-[0-1]")


def test_wrong_values_fail_whatever_the_bandwidth(a3high_job):
    wrong = A3ULTRA_OUTPUT.read_text().replace("values : 0 OK", "values : 3 FAILED")
    done = a3high_job(wrong)
    assert done.returncode == 1
    assert "FAIL: all_reduce_perf got 3 wrong values" in done.stdout


def test_a_failed_srun_fails_the_job(a3high_job):
    (a3high_job.fake / "fail").touch()
    done = a3high_job(A3ULTRA_OUTPUT)
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == (
        "FAIL: all_reduce_perf did not finish on proof-h100-[0-1]")


def test_one_node_passes_saying_the_network_was_not_measured(a3high_job):
    done = a3high_job(A3HIGH_OUTPUT, nodes=1)
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1].endswith("one node measures NVLink only, not the network")


def test_the_run_mounts_the_job_environment_and_only_plugins_the_node_has(a3high_job):
    assert a3high_job(A3ULTRA_OUTPUT).returncode == 0
    (call,) = a3high_job.srun_calls()
    assert call.startswith("--mpi=pmi2 --container-image=nvcr.io#nvidia/pytorch:23.10-py3 ")
    mounts = re.search(r"--container-mounts=(\S+)", call)[1].split(",")
    # GPUDirect-TCPX is not installed on A3 High (gpu_software.TCPX): nothing to mount.
    assert mounts[1:] == ["/etc/clusterprint:/etc/clusterprint:ro"]
    assert mounts[0].endswith("/.cache/clusterprint/nccl-tests-v2.19.6-pytorch-23.10-py3"
                              ":/nccl-tests")


def test_the_a3mega_job_mounts_the_fastrak_plugin():
    job = jobs_of(ALL_BLUEPRINTS["a3mega"])[nccl_job_path("a3mega")]
    assert 'MOUNTS+=",/var/lib/tcpxo/lib64:/var/lib/tcpxo/lib64"\n' in job
    assert "export CLUSTERPRINT_NCCL_LIBRARY_PATH=/var/lib/tcpxo/lib64\n" in job


def test_the_first_run_builds_nccl_tests_once_and_later_runs_reuse_it(tmp_path):
    run = Run(tmp_path, jobs_of(A3HIGH)[nccl_job_path("gpu")])
    assert run(A3ULTRA_OUTPUT).returncode == 0
    build, test = run.srun_calls()
    assert build.startswith("--nodes=1 --ntasks=1 --ntasks-per-node=1 "
                            "--container-image=nvcr.io#nvidia/pytorch:23.10-py3 ")
    assert (f"git clone --depth 1 --branch {gpu_software.NCCL_TESTS_VERSION} "
            f"{gpu_software.NCCL_TESTS_REPOSITORY} /nccl-tests") in build
    assert test.startswith("--mpi=pmi2 ")
    (built,) = (run.home / ".cache" / "clusterprint").iterdir()
    assert os.access(built / "build" / "all_reduce_perf", os.X_OK)

    assert run(A3ULTRA_OUTPUT).returncode == 0
    assert len(run.srun_calls()) == 3  # no second build


@pytest.fixture
def a3ultra_job(tmp_path) -> Run:
    """The A3 Ultra reference blueprint's job, its tasks run as the container would."""
    run = Run(tmp_path, jobs_of(ALL_BLUEPRINTS["a3ultra"])[nccl_job_path("a3ultra")])
    run.built(ALL_REDUCE_PERF)
    return run


def test_each_task_sources_the_job_environment_and_puts_the_plugin_first(a3ultra_job):
    a3ultra_job.in_container("export NCCL_NET=gIB\n")
    done = a3ultra_job(A3ULTRA_OUTPUT)
    assert ("NCCL_NET=gIB LD_LIBRARY_PATH=/usr/local/gib/lib64 args: -b 2G -e 8G -f 2 -g 1 -w 5 "
            "--iters 20") in done.stdout
    # 120.248 GB/s was A3 Ultra on GKE over 1K-8G: below the 250 its 2G-8G run must reach.
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1].endswith("below 250 GB/s for a3-ultragpu-8g")


def test_a_node_without_its_job_environment_fails_the_job_saying_why(a3ultra_job):
    a3ultra_job.in_container(None)
    done = a3ultra_job(A3ULTRA_OUTPUT)
    assert done.returncode == 1
    assert "the node's GPU network setup did not run" in done.stderr
    assert done.stdout.splitlines()[-1] == (
        "FAIL: all_reduce_perf did not finish on proof-h100-[0-1]")
