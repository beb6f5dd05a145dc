"""clusterprint image build: its lines and exit statuses, against a local fake of the Compute
API, in process and as a process (real credentials file, real HTTP, signals)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from clusterprint.blueprint.validate import load_checked
from clusterprint.build import compute
from clusterprint.cli.commands import image as command
from clusterprint.cli.main import main
from clusterprint.render.images import needed_images
from tests.support.cli_imports import clusterprint, loaded_modules, offline_env
from tests.support.image_compute_fake import FakeImageCompute, installs, reach_in_process
from tests.support.paths import ROOT, blueprint_path

A3MEGA, CPU_SMALL = blueprint_path("a3mega"), blueprint_path("cpu-small")
MANAGED = str(ROOT / "tests/components/blueprints/managed.yaml")
PROJECT = "my-project"  # the reference blueprints' project
CPU, TCPXO = needed_images(load_checked(A3MEGA))  # by name: cpu first
(SMALL,) = needed_images(load_checked(CPU_SMALL))


@pytest.fixture
def fake(monkeypatch):
    """The fake API in a3mega's zone, which the command reaches with fixed credentials;
    each builder says done at the first look, so no build sleeps."""
    compute_fake = FakeImageCompute(PROJECT, "us-central1-a",
                                    install=lambda image: installs("base", "slurm", after=1))
    reach_in_process(compute_fake, monkeypatch)
    yield compute_fake
    compute_fake.stop()


def test_builds_only_the_missing_images_one_line_each(fake, capsys):
    fake.images[CPU.name] = {"name": CPU.name}
    assert main(["image", "build", A3MEGA]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"{CPU.name}: exists in project {PROJECT}",
        f"{TCPXO.name}: built in project {PROJECT} (family clusterprint-gpu-tcpxo, 0 min)"]
    assert sorted(fake.images) == [CPU.name, TCPXO.name]
    assert fake.instances == {}
    assert (f"clusterprint image build: builders run in us-central1-a, in the default network "
            f"of {PROJECT}, with an external IP") in err
    assert f"{TCPXO.name}: step: slurm" in err.splitlines()


def test_a_second_run_builds_nothing(fake, capsys):
    assert main(["image", "build", A3MEGA]) == 0
    capsys.readouterr()
    assert main(["image", "build", A3MEGA]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{CPU.name}: exists in project {PROJECT}", f"{TCPXO.name}: exists in project {PROJECT}"]


def test_a_failed_build_exits_3_and_the_other_image_is_still_built(fake, capsys):
    fake.install = lambda image: (installs("base", "gpu", result="failed", failure="line 7: "
                                           "apt-get install -y datacenter-gpu-manager-4", after=1)
                                  if image == TCPXO.name else installs("base", after=1))
    assert main(["image", "build", A3MEGA]) == command.EXIT_BUILD_FAILED
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"{CPU.name}: built in project {PROJECT} (family clusterprint-cpu, 0 min)",
        f"{TCPXO.name}: failed at step gpu: line 7: apt-get install -y "
        "datacenter-gpu-manager-4"]
    assert f"{TCPXO.name}: the builder's serial console ended with:" in err
    assert err.splitlines()[-2].endswith(
        "<3>FAILED: line 7: apt-get install -y datacenter-gpu-manager-4")
    assert list(fake.images) == [CPU.name] and fake.instances == {}


def test_the_project_and_subnetwork_options_choose_where(fake, capsys):
    other = FakeImageCompute("other-project", "us-central1-c",
                             install=lambda image: installs(after=1))
    os.environ[compute.API_VARIABLE] = other.url
    try:
        subnet = "projects/net-host/regions/us-central1/subnetworks/builders"
        assert main(["image", "build", CPU_SMALL, "--project", "other-project",
                     "--subnetwork", subnet]) == 0
    finally:
        other.stop()
    (insert,) = [c.body for c in other.calls if c.method == "POST" and c.verb == "instances"]
    assert insert["networkInterfaces"] == [{"subnetwork": subnet}]
    assert list(other.images) == [SMALL.name] and fake.calls == []


def test_a_blueprint_naming_its_subnetwork_builds_there_without_an_external_ip(fake, tmp_path,
                                                                               capsys):
    subnet = "projects/my-project/regions/us-central1/subnetworks/shared"
    text = (ROOT / A3MEGA).read_text().replace("network:\n", (
        f"network:\n  existing: projects/my-project/global/networks/shared\n"
        f"  existing_subnetwork: {subnet}\n"), 1)
    (tmp_path / "bp.yaml").write_text(text)
    assert main(["image", "build", str(tmp_path / "bp.yaml")]) == 0
    inserts = [c.body for c in fake.calls if c.method == "POST" and c.verb == "instances"]
    assert [i["networkInterfaces"] for i in inserts] == [[{"subnetwork": subnet}]] * 2
    assert f"in {subnet}, without an external IP (it needs Cloud NAT)" in capsys.readouterr().err


def test_a_managed_cluster_has_nothing_built(fake, capsys):
    assert main(["image", "build", MANAGED]) == 0
    assert capsys.readouterr().out == "" and fake.calls == []


def test_an_invalid_blueprint_exits_1_before_any_call(fake, tmp_path, capsys):
    (tmp_path / "bp.yaml").write_text((ROOT / CPU_SMALL).read_text().replace(
        "name: cpu-small", "name: Cpu_Small"))
    assert main(["image", "build", str(tmp_path / "bp.yaml")]) == 1
    assert "error" in capsys.readouterr().err and fake.calls == []


@pytest.mark.parametrize(("argv", "message"), [
    (["image", "build", "missing.yaml"], None),
    (["image", "build", CPU_SMALL, "--subnetwork", "default"],
     "argument --subnetwork: 'default' is not projects/P/regions/R/subnetworks/S"),
    (["image", "build", CPU_SMALL, "--project", "My_Project"],
     "argument --project: 'My_Project' is not a project id"),
    (["image", "build", CPU_SMALL, "--timeout", "0"],
     "argument --timeout: '0' is not a whole number of minutes"),
], ids=["unreadable", "subnetwork", "project", "timeout"])
def test_usage_errors_exit_2(argv, message, capsys):
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code
    assert status == 2
    if message:
        assert capsys.readouterr().err.splitlines()[-1].endswith(message)


def test_no_project_anywhere_exits_2(fake, tmp_path, capsys):
    (tmp_path / "bp.yaml").write_text((ROOT / CPU_SMALL).read_text().replace(
        "project: my-project", ""))
    assert main(["image", "build", str(tmp_path / "bp.yaml")]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "clusterprint image build: no project: set `project` in the blueprint or pass "
        "--project")


def test_dry_run_lists_the_images_offline_without_loading_google_auth(tmp_path):
    loaded = loaded_modules(["image", "build", "--dry-run", "blueprints/a3mega.yaml"],
                            watched=("google.auth",), env=offline_env(tmp_path))
    assert (loaded.statuses, loaded.modules) == ([0], [])
    assert loaded.process.stdout.splitlines() == [
        f"{image.name}: would be built unless it exists in project {PROJECT} (family "
        f"{image.family}, base {image.base.path}, builder n2-standard-16 in us-central1-a)"
        for image in (CPU, TCPXO)]


def test_dry_run_without_a_project_says_the_credentials_one(tmp_path):
    (tmp_path / "bp.yaml").write_text((ROOT / CPU_SMALL).read_text().replace(
        "project: my-project", ""))
    result = clusterprint("image", "build", "--dry-run", str(tmp_path / "bp.yaml"),
                          env=offline_env(tmp_path))
    assert result.returncode == 0
    assert result.stdout.startswith(f"{SMALL.name}: would be built unless it exists in the "
                                    "credentials' project (family clusterprint-cpu")


def test_without_credentials_the_process_exits_2_saying_how_to_get_them(tmp_path):
    result = clusterprint("image", "build", CPU_SMALL, env=offline_env(tmp_path))
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = [line for line in result.stderr.splitlines() if line.startswith(command.WHO)]
    assert "run `gcloud auth application-default login`, or use --dry-run" in line
    assert "Traceback" not in result.stderr


@pytest.fixture
def process_fake(tmp_path):
    """The fake in cpu-small's zone, reached by the process through a credentials file whose
    token the fake hands out, and the environment that points the process at it."""
    compute_fake = FakeImageCompute(PROJECT, "us-central1-c",
                                    install=lambda image: installs("base", "slurm", after=1))
    env = {**offline_env(tmp_path), compute.API_VARIABLE: compute_fake.url,
           "GOOGLE_APPLICATION_CREDENTIALS": str(compute_fake.credentials_file(tmp_path))}
    yield compute_fake, env
    compute_fake.stop()


def test_as_a_process_it_builds_with_the_credentials_file_then_finds_the_image(process_fake):
    fake, env = process_fake
    first = clusterprint("image", "build", CPU_SMALL, env=env)
    assert (first.returncode, first.stdout) == (
        0, f"{SMALL.name}: built in project {PROJECT} (family clusterprint-cpu, 0 min)\n")
    second = clusterprint("image", "build", CPU_SMALL, env=env)
    assert (second.returncode, second.stdout) == (0, f"{SMALL.name}: exists in project "
                                                     f"{PROJECT}\n")
    assert fake.instances == {} and list(fake.images) == [SMALL.name]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_process_deletes_its_builder_and_exits_130(process_fake, signum):
    fake, env = process_fake
    fake.install = lambda image: installs("base", result=None)
    with subprocess.Popen([sys.executable, "-m", "clusterprint.cli", "image", "build",
                           CPU_SMALL], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as process:
        deadline = time.monotonic() + 60
        while "GET getGuestAttributes" not in fake.verbs():  # it waits on the install
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert out == "" and fake.instances == {} and fake.disks == {}
    assert f"{SMALL.name}: builder {SMALL.name}-builder deleted" in err.splitlines()
