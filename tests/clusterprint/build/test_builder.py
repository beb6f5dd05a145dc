"""One image's build against a local fake of the Compute API, over real HTTP.

What a user notices: an image that exists is never rebuilt; a built one has its content
name, its family and labels saying what it holds; the builder VM and its disk are gone
after every ending (done, a failed step, a timeout, Ctrl-C, an API error), and a failure
names its step and shows the end of the serial console.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from google.auth.transport.requests import AuthorizedSession
from google.oauth2.credentials import Credentials

from clusterprint.build import builder
from clusterprint.build.builder import BuildFailed, BuildSite, ImageBuild, Outcome, Timing
from clusterprint.build.compute import ComputeApi
from clusterprint.facts import slurm
from clusterprint.render.images import node_image
from tests.support.image_compute_fake import (
    PROJECT,
    TOKEN,
    ZONE,
    FakeImageCompute,
    Install,
    installs,
)

CPU, GPU_ARM = node_image("cpu"), node_image("gpu-rdma-arm64")


class FakeClock:
    """Monotonic time that passes only when the build sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def api_of(fake: FakeImageCompute) -> ComputeApi:
    """The API client as the command makes it, with credentials that hold a fixed token."""
    return ComputeApi(AuthorizedSession(Credentials(TOKEN)), PROJECT, fake.url,
                      sleep=lambda seconds: None)


def build(fake: FakeImageCompute, clock: FakeClock, image=CPU, site=None,
          timing: Timing | None = None, lines: list[str] | None = None) -> Outcome:
    return ImageBuild(api_of(fake), image, site or BuildSite(PROJECT, ZONE),
                      timing or Timing(), report=(lines if lines is not None else []).append,
                      clock=clock, sleep=clock.sleep, version="1.2.3").run()


def test_builds_a_missing_image_and_deletes_its_builder_and_disk(fake, clock):
    lines: list[str] = []
    assert build(fake, clock, lines=lines) is Outcome.BUILT
    assert list(fake.images) == [CPU.name]
    assert fake.instances == {} and fake.disks == {}
    assert lines == [
        f"{CPU.name}: builder {CPU.name}-builder started in {ZONE} (n2-standard-16, from "
        f"{CPU.base.path})",
        f"{CPU.name}: step: base", f"{CPU.name}: step: slurm",
        f"{CPU.name}: installed; stopping the builder",
        f"{CPU.name}: creating the image in family clusterprint-cpu",
        f"{CPU.name}: builder {CPU.name}-builder deleted"]
    # It looked until the script said done, a poll apart.
    assert clock.sleeps == [30.0]


def test_the_image_is_named_by_content_in_its_family_with_labels_saying_what_it_holds(fake,
                                                                                      clock):
    build(fake, clock)
    image = fake.images[CPU.name]
    assert image["family"] == "clusterprint-cpu"
    assert image["sourceDisk"] == f"projects/{PROJECT}/zones/{ZONE}/disks/{CPU.name}-builder"
    assert image["architecture"] == "X86_64"
    assert image["labels"] == {"clusterprint-kind": "cpu",
                               "clusterprint-slurm": slurm.SLURM_VERSION.replace(".", "-"),
                               "clusterprint-base": CPU.base.name,
                               "clusterprint-version": "1-2-3"}
    assert image["description"] == (
        f"clusterprint cpu image: Slurm {slurm.SLURM_VERSION} and {', '.join(CPU.parts)} on "
        f"{CPU.base.path}; built by clusterprint 1.2.3 from images/{CPU.name}.sh")


def test_the_builder_boots_the_dated_base_with_the_install_script_and_no_credentials(fake,
                                                                                     clock):
    build(fake, clock)
    (insert,) = [c.body for c in fake.calls if c.method == "POST" and c.verb == "instances"]
    metadata = {item["key"]: item["value"] for item in insert["metadata"]["items"]}
    assert metadata["clusterprint-install-script"] == CPU.script
    assert metadata["enable-guest-attributes"] == "TRUE"
    assert metadata["startup-script"] == builder.STARTUP_SCRIPT
    assert insert["machineType"] == f"zones/{ZONE}/machineTypes/n2-standard-16"
    (disk,) = insert["disks"]
    assert disk["autoDelete"] is True
    assert disk["initializeParams"]["sourceImage"] == CPU.base.path
    assert disk["initializeParams"]["diskType"] == f"zones/{ZONE}/diskTypes/pd-balanced"
    assert insert["serviceAccounts"] == []
    # A builder whose build was killed outright deletes itself after the build's time.
    assert insert["scheduling"] == {"maxRunDuration": {"seconds": str(2 * 3600 + 20 * 60)},
                                    "instanceTerminationAction": "DELETE"}


def test_an_arm64_image_builds_on_c4a_with_hyperdisk(fake, clock):
    build(fake, clock, image=GPU_ARM)
    (insert,) = [c.body for c in fake.calls if c.method == "POST" and c.verb == "instances"]
    assert insert["machineType"].endswith("/c4a-highcpu-16")
    assert insert["disks"][0]["initializeParams"]["diskType"].endswith("/hyperdisk-balanced")
    assert fake.images[GPU_ARM.name]["architecture"] == "ARM64"


@pytest.mark.parametrize(("site", "interface"), [
    (BuildSite(PROJECT, ZONE), {"network": f"projects/{PROJECT}/global/networks/default"}),
    (BuildSite(PROJECT, ZONE, "projects/p/regions/r/subnetworks/s", external_ip=False),
     {"subnetwork": "projects/p/regions/r/subnetworks/s"}),
    (BuildSite(PROJECT, ZONE, external_ip=True),
     {"network": f"projects/{PROJECT}/global/networks/default",
      "accessConfigs": [{"type": "ONE_TO_ONE_NAT", "name": "external-nat"}]}),
], ids=["default-network", "subnetwork", "external-ip"])
def test_the_builder_is_in_the_network_it_is_given(site, interface):
    assert builder.instance_body(CPU, site, Timing())["networkInterfaces"] == [interface]


def test_an_existing_image_is_kept_and_no_builder_is_made(fake, clock):
    fake.images[CPU.name] = {"name": CPU.name, "status": "READY"}
    assert build(fake, clock) is Outcome.EXISTS
    assert fake.verbs() == [f"GET {CPU.name}"]


def test_a_second_run_builds_nothing(fake, clock):
    assert build(fake, clock) is Outcome.BUILT
    made = len(fake.calls)
    assert build(fake, clock) is Outcome.EXISTS
    assert fake.verbs()[made:] == [f"GET {CPU.name}"]


def test_a_failed_step_is_named_with_the_serial_tail_and_the_builder_is_gone(fake, clock):
    fake.install = lambda image: installs("base", "slurm", result="failed",
                                          failure="line 212: make -j16")
    with pytest.raises(BuildFailed) as failed:
        build(fake, clock)
    assert failed.value.step == "slurm"
    assert failed.value.summary == f"{CPU.name}: failed at step slurm: line 212: make -j16"
    text = failed.value.text().splitlines()
    assert text[1] == f"{CPU.name}: the builder's serial console ended with:"
    assert text[-3].endswith("startup-script: step: slurm")
    assert text[-2].endswith("startup-script: <3>FAILED: line 212: make -j16")
    assert text[-1].endswith("<3>FAILED: the install script ended with status 1")
    assert fake.instances == {} and fake.disks == {} and fake.images == {}


def test_the_tail_is_the_last_lines_of_a_long_console(fake, clock):
    steps = [f"s{i}" for i in range(100)]
    fake.install = lambda image: installs(*steps, result="failed")
    with pytest.raises(BuildFailed) as failed:
        build(fake, clock)
    assert len(failed.value.tail) == builder.TAIL_LINES
    assert failed.value.tail[-2].endswith("step: s99")
    # No FAILED line of the install script's own: the startup script's names its status.
    assert failed.value.reason == "the install script ended with status 1"


def test_a_script_that_never_ends_times_out_and_the_builder_is_gone(fake, clock):
    fake.install = lambda image: installs("base", "gpu", result=None)
    with pytest.raises(BuildFailed) as failed:
        build(fake, clock, timing=Timing(poll_s=60, build_timeout_s=600))
    assert failed.value.summary == (f"{CPU.name}: failed at step gpu: the install script did "
                                    "not finish within 10 minutes")
    assert sum(clock.sleeps) == 600
    assert fake.instances == {} and fake.disks == {}


def test_ctrl_c_while_it_waits_deletes_the_builder(fake, clock):
    fake.install = lambda image: installs("base", result=None)

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    clock.sleep = interrupted
    with pytest.raises(KeyboardInterrupt):
        build(fake, clock)
    assert fake.instances == {} and fake.disks == {}
    assert fake.verbs()[-2:] == [f"DELETE {CPU.name}-builder", "POST wait"]


def test_a_builder_that_stops_by_itself_fails_the_build(fake, clock):
    fake.install = lambda image: installs("base", result=None)
    real = fake._guest_attribute

    def stopped_meanwhile(name: str, key: str):
        fake.instances[name]["status"] = "TERMINATED"
        return real(name, key)

    fake._guest_attribute = stopped_meanwhile
    with pytest.raises(BuildFailed) as failed:
        build(fake, clock)
    assert failed.value.reason == "the builder is TERMINATED before the install script finished"
    assert fake.instances == {}


def test_an_operation_error_fails_the_build_and_still_deletes_the_builder(fake, clock):
    fake.operation_errors["images.insert"] = "Quota 'IMAGES' exceeded"
    with pytest.raises(BuildFailed) as failed:
        build(fake, clock)
    assert "Quota 'IMAGES' exceeded" in failed.value.reason
    assert failed.value.step == "slurm"
    assert fake.instances == {} and fake.disks == {}


def test_a_refused_builder_fails_without_deleting_anything(fake, clock):
    fake.refusals["POST instances"] = (403, "Required 'compute.instances.create' permission")
    with pytest.raises(BuildFailed) as failed:
        build(fake, clock)
    assert "HTTP 403: Required 'compute.instances.create' permission" in failed.value.reason
    assert not [c for c in fake.calls if c.method == "DELETE"]


def test_a_builder_already_there_is_left_alone_and_the_error_says_how_to_remove_it(fake,
                                                                                   clock):
    other = {"status": "RUNNING", "body": {}, "install": Install()}
    fake.instances[f"{CPU.name}-builder"] = other
    with pytest.raises(BuildFailed) as failed:
        build(fake, clock)
    assert fake.instances[f"{CPU.name}-builder"] is other
    assert (f"gcloud compute instances delete {CPU.name}-builder --zone {ZONE} --project "
            f"{PROJECT}") in failed.value.reason


def test_a_builder_that_cannot_be_deleted_is_reported_with_the_command(fake, clock):
    fake.refusals[f"DELETE {CPU.name}-builder"] = (500, "backend error")
    lines: list[str] = []
    assert build(fake, clock, lines=lines) is Outcome.BUILT
    assert lines[-1].startswith(f"{CPU.name}: could not delete the builder (")
    assert lines[-1].endswith(f"delete it: gcloud compute instances delete {CPU.name}-builder "
                              f"--zone {ZONE} --project {PROJECT}")


def test_an_image_another_build_created_meanwhile_counts_as_there(fake, clock):
    real = fake._images

    def raced(method, name, body):
        if method == "POST":
            fake.images[CPU.name] = {"name": CPU.name}
        return real(method, name, body)

    fake._images = raced
    assert build(fake, clock) is Outcome.EXISTS
    assert fake.instances == {}


def test_a_console_read_split_mid_line_keeps_the_step_whole():
    console = builder.SerialConsole()
    assert console.feed("boot ok\nstartup-script: ste", 30) == []
    assert console.feed("p: slurm\n", 39) == ["slurm"]
    assert (console.step, console.next, console.lines()) == (
        "slurm", 39, ["boot ok", "startup-script: step: slurm"])


def test_a_step_word_inside_another_line_is_not_a_step():
    console = builder.SerialConsole()
    console.feed("startup-script: <3>FAILED: line 9: echo 'next step: x' broke\n", 60)
    assert console.step is None
    assert console.failure == "line 9: echo 'next step: x' broke"


# The startup script, run with curl and the install script's metadata replaced by a stub.
FAKE_CURL = """\
#!/bin/bash
# curl as the builder's startup script calls it: the install script from $INSTALL, guest
# attribute writes appended to $REPORTS.
out=""
data=""
url=""
while (($#)); do
  case $1 in
    -o) out=$2; shift ;;
    --data) data=$2; shift ;;
    -X|-H|--retry) shift ;;
    -*) ;;
    *) url=$1 ;;
  esac
  shift
done
case $url in
  */attributes/clusterprint-install-script) cp "$INSTALL" "$out" ;;
  */guest-attributes/clusterprint/build) echo "$data" >>"$REPORTS" ;;
  *) exit 22 ;;
esac
"""


def run_startup(tmp_path: Path, install: str) -> tuple[subprocess.CompletedProcess, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text(FAKE_CURL)
    (bin_dir / "curl").chmod(0o755)
    (tmp_path / "install.sh").write_text(install)
    reports = tmp_path / "reports"
    result = subprocess.run(
        ["bash", "-c", builder.STARTUP_SCRIPT], capture_output=True, text=True, timeout=30,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "INSTALL": str(tmp_path / "install.sh"),
             "REPORTS": str(reports), "TMPDIR": str(tmp_path)})
    return result, reports.read_text() if reports.exists() else ""


def test_the_startup_script_reports_done_after_the_install_script_succeeds(tmp_path):
    result, reports = run_startup(tmp_path, "echo 'step: base'\n")
    assert (result.returncode, reports) == (0, "done\n")
    assert result.stdout == "step: base\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "install.sh", "reports"]


def test_the_startup_script_reports_failed_with_the_scripts_status(tmp_path):
    result, reports = run_startup(tmp_path, "echo 'step: slurm'\nexit 3\n")
    assert reports == "failed\n"
    assert result.stdout.splitlines() == [
        "step: slurm", "<3>FAILED: the install script ended with status 3"]


def test_the_startup_script_passes_bash_and_shellcheck(tmp_path):
    script = tmp_path / "startup.sh"
    script.write_text(builder.STARTUP_SCRIPT)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    checked = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
