"""clusterprint new: the wizard in a real terminal, the flag form without one, and refusals."""

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterprint.cli import wizard
from clusterprint.cli.main import main
from clusterprint.facts import machines
from tests.support.cli_imports import loaded_modules
from tests.support.paths import ROOT

#: How long one prompt may take to appear on a loaded machine.
PROMPT_TIMEOUT_S = 30

FLAGS = ["--name", "train", "--project", "my-project", "--machine-type", "a3-ultragpu-8g",
         "--count", "2", "--reservation", "a3ultra-res", "--zone", "europe-west1-b"]


def cli(*argv, cwd):
    """``clusterprint ARGV`` as a process whose stdin is not a terminal."""
    return subprocess.run([sys.executable, "-m", "clusterprint.cli", *argv], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)


def validate(path: Path):
    """The real validator's verdict on a written file: it must be 0 with nothing to say."""
    result = cli("validate", str(path), cwd=path.parent)
    assert (result.returncode, result.stdout) == (0, ""), result.stdout + result.stderr
    return YAML(typ="safe").load(path.read_text())


class Terminal:
    """A tmux pane on a private server: type keys, read the screen, wait for text on it."""

    def __init__(self, socket: str, command: str) -> None:
        self.socket = socket
        self.tmux("new-session", "-d", "-x", "120", "-y", "40", command)

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True,
                              capture_output=True, text=True, timeout=30).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p")

    def wait_for(self, text: str) -> str:
        """Poll the screen until ``text`` shows (never a fixed sleep)."""
        deadline = time.monotonic() + PROMPT_TIMEOUT_S
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.05)
        raise AssertionError(f"{text!r} did not appear; the screen:\n{self.screen()}")

    def answer(self, prompt: str, *keys: str) -> None:
        """Wait for the question, then type the answer."""
        self.wait_for(f"? {prompt}")
        self.tmux("send-keys", *keys)

    def pick(self, prompt: str, choices, value: str) -> None:
        """Answer a numbered select with the number of ``value`` among ``choices``."""
        values = [c if isinstance(c, str) else c[0] for c in choices]
        self.answer(prompt, str(values.index(value) + 1), "Enter")

    def type_and_enter(self, prompt: str, text: str) -> None:
        """Type into a completing prompt, wait for the text to echo, then press Enter."""
        self.answer(prompt, "-l", text)
        self.wait_for(f"{prompt}")
        deadline = time.monotonic() + PROMPT_TIMEOUT_S
        while text not in self.screen().split(f"? {prompt}")[-1]:
            assert time.monotonic() < deadline, self.screen()
            time.sleep(0.05)
        self.tmux("send-keys", "Enter")


@pytest.fixture
def terminal(tmp_path):
    """``terminal()``: `clusterprint new` running in a 120x40 tmux pane in ``tmp_path``."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is needed: `make system-packages` installs it")
    socket = f"clusterprint-test-{os.getpid()}-{tmp_path.name}"
    started = []

    def start() -> Terminal:
        command = (f"cd {shlex.quote(str(tmp_path))} && PYTHONPATH={shlex.quote(str(ROOT))} "
                   f"{shlex.quote(sys.executable)} -m clusterprint.cli new; "
                   f"echo \"EXIT=$?\"; sleep 600")
        started.append(Terminal(socket, command))
        return started[0]

    yield start
    subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=30)


def test_wizard_gpu_reservation_with_lustre_scratch(terminal, tmp_path):
    t = terminal()
    t.answer("Cluster name", "train", "Enter")
    t.answer("Google Cloud project id", "my-project", "Enter")
    t.pick("Machine family", wizard.FAMILIES, "A3 Mega")
    t.answer("How many a3-megagpu-8g nodes", "4", "Enter")
    t.pick("How to get the VMs", wizard.PROVISIONING_CHOICES, "reservation")
    t.answer("Reservation name", "a3mega-res", "Enter")
    t.type_and_enter("Region (those with a3-megagpu-8g)", "us-east4")
    t.pick("Zone", wizard.zones_of("a3-megagpu-8g", "us-east4"), "us-east4-b")
    t.pick("/home on", wizard.HOME_CHOICES, "filestore")
    t.pick("Filestore tier", wizard.FILESTORE_TIER_CHOICES, "ZONAL")
    t.answer("Filestore size in GiB", "C-u", "2560", "Enter")
    t.answer("Add Managed Lustre scratch at /lustre?", "y")
    t.pick("Lustre performance tier", wizard.LUSTRE_TIER_CHOICES, "1000")
    t.answer("Lustre size in GiB", "C-u", "27000", "Enter")
    t.answer("Mount a Cloud Storage bucket", "n")
    t.answer("Write the blueprint to", "Enter")
    assert "train.yaml: written; next: clusterprint validate train.yaml" in t.wait_for("EXIT=0")

    data = validate(tmp_path / "train.yaml")
    assert (data["name"], data["project"], data["region"], data["zone"]) == (
        "train", "my-project", "us-east4", "us-east4-b")
    assert data["slurm"]["nodesets"][0] | {"name": "gpu"} == {
        "name": "gpu", "machine_type": "a3-megagpu-8g", "count": 4,
        "provisioning": "reservation", "reservation": "a3mega-res", "placement": "none"}
    assert data["storage"]["home"] == {"filestore": {"tier": "ZONAL", "capacity_gib": 2560}}
    assert data["storage"]["lustre"] == [{"name": "scratch", "filesystem": "scratch",
                                          "mount": "/lustre", "performance_tier": 1000,
                                          "capacity_gib": 27000}]
    assert "buckets" not in data["storage"]


def test_wizard_cpu_spot_with_filestore_only_refuses_bad_answers_on_the_way(terminal, tmp_path):
    (tmp_path / "play.yaml").write_text("mine\n")
    t = terminal()
    t.answer("Cluster name", "Play", "Enter")
    t.wait_for("'Play' is not a cluster name")
    t.tmux("send-keys", "C-u", "play", "Enter")
    t.answer("Google Cloud project id", "my-project", "Enter")
    t.pick("Machine family", wizard.FAMILIES, "N2 (CPU)")
    n2 = [o.machine_type for o in wizard.OFFERS if o.family == "N2 (CPU)"]
    t.pick("Machine type", n2, "n2-standard-8")
    t.answer("How many n2-standard-8 nodes", "0", "Enter")
    t.wait_for("'0' is not a node count from 1 to 16384")
    t.tmux("send-keys", "C-u", "3", "Enter")
    t.pick("How to get the VMs", wizard.PROVISIONING_CHOICES, "spot")
    t.type_and_enter("Region (those with n2-standard-8)", "europe-west4")
    t.pick("Zone", wizard.zones_of("n2-standard-8", "europe-west4"), "europe-west4-c")
    t.pick("/home on", wizard.HOME_CHOICES, "filestore")
    t.pick("Filestore tier", wizard.FILESTORE_TIER_CHOICES, "BASIC_HDD")
    t.answer("Filestore size in GiB", "Enter")
    t.answer("Add Managed Lustre scratch at /lustre?", "n")
    t.answer("Mount a Cloud Storage bucket", "y")
    t.answer("Bucket name", "Enter")
    t.answer("Write the blueprint to", "Enter")
    t.wait_for("play.yaml exists; choose another file or add --force to replace it")
    t.tmux("send-keys", "C-u", "cpu/play.yml", "Enter")
    t.wait_for("folder cpu does not exist")
    (tmp_path / "cpu").mkdir()
    # prompt-toolkit keeps a refusal until the text changes: type it again.
    t.tmux("send-keys", "C-u", "cpu/play.yml", "Enter")
    t.wait_for("EXIT=0")

    assert (tmp_path / "play.yaml").read_text() == "mine\n"
    data = validate(tmp_path / "cpu" / "play.yml")
    assert (data["name"], data["zone"]) == ("play", "europe-west4-c")
    assert data["slurm"]["nodesets"][0] == {"name": "cpu", "machine_type": "n2-standard-8",
                                            "count": 3, "provisioning": "spot"}
    assert data["storage"]["home"] == {"filestore": {"tier": "BASIC_HDD",
                                                     "capacity_gib": 1024}}
    assert "lustre" not in data["storage"]
    assert data["storage"]["buckets"][0]["bucket"] == "my-project-play-data"
    assert data["slurm"]["health_checks"] == {"gpu": "off"}
    assert (tmp_path / "cpu" / "play.yml").read_text().startswith(
        "# yaml-language-server: $schema=")


def test_flags_without_a_terminal_write_a_valid_blueprint(tmp_path):
    result = cli("new", *FLAGS, "--home", "lustre", "--lustre-tier", "250", "--bucket",
                 "my-project-train", "--out", "train.yaml", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == ("train.yaml: written; next: clusterprint validate train.yaml, "
                             "clusterprint plan train.yaml\n")
    data = validate(tmp_path / "train.yaml")
    assert data["storage"]["home"] == {"lustre": "shared"}
    assert data["storage"]["lustre"][0]["capacity_gib"] == 36000
    assert data["slurm"]["nodesets"][0]["reservation"] == "a3ultra-res"
    assert [p.name for p in tmp_path.iterdir()] == ["train.yaml"]  # no temporary file left


def test_without_a_terminal_and_flags_it_names_every_needed_flag(tmp_path):
    result = cli("new", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "clusterprint new: stdin is not a terminal, so nothing can be asked; give these "
        "flags: --name NAME; --project ID; --machine-type TYPE; --count N; one of "
        "--on-demand, --spot, --flex-start, --reservation NAME; --zone ZONE\n")
    assert list(tmp_path.iterdir()) == []


def test_without_a_terminal_it_names_only_the_flags_still_missing(tmp_path):
    result = cli("new", "--name", "demo", "--spot", "--count", "2", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.endswith("give these flags: --project ID; --machine-type TYPE; "
                                  "--zone ZONE\n")


def test_a_zone_without_the_machine_type_is_refused_with_the_valid_zones(tmp_path):
    flags = [*FLAGS[:-1], "us-central1-a"]
    result = cli("new", *flags, cwd=tmp_path)
    assert result.returncode == 2
    zones = ", ".join(machines.machine_zones("a3-ultragpu-8g"))
    assert result.stderr == (f"clusterprint new: --zone us-central1-a: a3-ultragpu-8g does not "
                             f"exist in zone us-central1-a; its zones: {zones}\n")
    assert list(tmp_path.iterdir()) == []


def test_every_refused_flag_shows_in_one_run(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["new", *FLAGS[:7], "many", "--spot", "--region", "us-east4", "--zone",
                 "europe-west1-b", "--home", "lustre", "--home-tier", "ZONAL",
                 "--lustre-tier", "300", "--lustre-size", "1000", "--bucket", "X"])
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        "clusterprint new: --count many: 'many' is not a node count from 1 to 16384",
        "clusterprint new: --zone europe-west1-b: zone europe-west1-b is not in region "
        "us-east4; a3-ultragpu-8g in us-east4: us-east4-b",
        "clusterprint new: --lustre-tier 300: choose one of 125, 250, 500, 1000",
        "clusterprint new: --lustre-size 1000: 1000 is below 18000, the minimum of "
        "performance tier 500 (try 18000)",
        "clusterprint new: --bucket X: 'X' is not a bucket name: 3 to 63 lowercase letters, "
        "digits, dots, hyphens and underscores",
        "clusterprint new: --home-tier does not apply: /home is on Lustre"]
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_kept_unless_force(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.yaml").write_text("mine\n")
    assert main(["new", *FLAGS]) == 2
    assert capsys.readouterr().err == (
        "clusterprint new: train.yaml exists; add --force to replace it\n")
    assert main(["new", *FLAGS, "--out", "train.yaml"]) == 2
    assert capsys.readouterr().err == (
        "clusterprint new: --out train.yaml: train.yaml exists; choose another file or add "
        "--force to replace it\n")
    assert (tmp_path / "train.yaml").read_text() == "mine\n"
    assert [p.name for p in tmp_path.iterdir()] == ["train.yaml"]
    assert main(["new", *FLAGS, "--force"]) == 0
    validate(tmp_path / "train.yaml")


def test_a_blueprint_that_does_not_validate_is_never_written(capsys, tmp_path, monkeypatch):
    """The answers are all checked; should the text still be wrong, the validator stops it."""
    monkeypatch.chdir(tmp_path)
    made = wizard.blueprint_text
    monkeypatch.setattr(wizard, "blueprint_text", lambda *args: made(*args).replace(
        "region: europe-west1", "region: us-east1"))
    assert main(["new", *FLAGS]) == 1
    err = capsys.readouterr().err.splitlines()
    assert re.match(r"train\.yaml:\d+:7: error: zone: zone europe-west1-b is not in region "
                    r"us-east1", err[0])
    assert err[-1] == ("clusterprint new: train.yaml not written: the blueprint made from "
                       "these answers does not validate (the lines above say why)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("offer", wizard.OFFERS, ids=lambda o: o.machine_type)
def test_the_flag_form_writes_a_valid_file_for_every_offered_machine_type(
        capsys, tmp_path, monkeypatch, offer):
    monkeypatch.chdir(tmp_path)
    zone = machines.machine_zones(offer.machine_type)[-1]
    assert main(["new", "--name", "demo", "--project", "my-project", "--machine-type",
                 offer.machine_type, "--count", "2", "--flex-start", "--zone", zone]) == 0
    assert capsys.readouterr().err == ("demo.yaml: written; next: clusterprint validate "
                                       "demo.yaml, clusterprint plan demo.yaml\n")
    from clusterprint.blueprint.validate import check_file

    checked = check_file(str(tmp_path / "demo.yaml"))
    assert checked.ok and checked.lines() == []
    assert checked.blueprint.slurm.nodesets[0].machine_type == offer.machine_type


def test_the_prompt_library_is_loaded_only_to_ask(tmp_path):
    """validate and the flag form never import questionary (nor its prompt-toolkit)."""
    loaded = loaded_modules(["new", *FLAGS], ["validate", "train.yaml"], cwd=tmp_path,
                            watched=("questionary", "prompt_toolkit"), timeout=120)
    assert (loaded.statuses, loaded.modules) == ([0, 0], [])
