"""clusterprint-config-sync: a changed metadata value reaches a running node's Slurm files.

The metadata server is a local fake that waits for changes as Compute Engine's does
(tests/support/metadata_fake.py). Slurm's commands are recorded by a fake, except ``scontrol -V``,
which is the installed Slurm's: it parses every slurm.conf before it is swapped in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from clusterprint.contract import node_metadata
from clusterprint.node import common, config_sync
from clusterprint.render.config_sync import ROLE_FILES, slurm_config_value
from clusterprint.render.node_programs import program_files
from tests.support.metadata_fake import FakeMetadata, etag_of
from tests.support.node_log import entries, messages

KEY = node_metadata.SLURM_CONFIG
SLURM_CONF = ("ClusterName=demo\nSlurmctldHost=demo-controller\nSelectType=select/cons_tres\n"
              "MaxNodeCount=4\n"
              "NodeSet=cpu Feature=cpu\nPartitionName=debug Nodes=cpu Default=YES State=UP\n")
FILES = {"slurm.conf": SLURM_CONF, "gres.conf": "AutoDetect=nvml\n",
         "cgroup.conf": "ConstrainCores=yes\n"}


def value(**changes: str | None) -> str:
    """The controller's metadata value, with files changed (None: left out)."""
    files = {**FILES, **changes}
    return slurm_config_value({k: v for k, v in files.items() if v is not None}, "controller")


def with_lines(*lines: str) -> str:
    """slurm.conf with lines added (or, for a key it has, replacing that key's line)."""
    conf = SLURM_CONF
    for line in lines:
        key = line.split("=", 1)[0]
        kept = [x for x in conf.splitlines() if not x.startswith(key + "=")
                or key == "PartitionName"]
        conf = "\n".join([*kept, line]) + "\n"
    return conf


class FakeSlurm:
    """slurmctld and systemctl as the program sees them: each call recorded; ``scontrol -V``
    is the installed one, which parses SLURM_CONF. ``reconfigure_stops``: a reconfigure
    that stops slurmctld, as Slurm 22.05's does on a fatal error in the new files."""

    def __init__(self, version: str = "22.05.8", up: bool = True) -> None:
        self.version, self.up = version, up
        self.calls: list[list[str]] = []
        self.reconfigure_fails = self.reconfigure_stops = self.restart_fails = False

    def __call__(self, argv: list[str], timeout: float, env=None) -> subprocess.CompletedProcess:
        if argv == ["scontrol", "-V"]:
            return common.run(argv, timeout, env)
        self.calls.append(argv)
        out, rc, err = "", 0, ""
        if argv == ["slurmctld", "-V"]:
            out = f"slurm-wlm {self.version}\n"
        elif argv == ["scontrol", "ping"]:
            out = f"Slurmctld(primary) at demo-controller is {'UP' if self.up else 'DOWN'}\n"
            rc = 0 if self.up else 1
        elif argv == ["scontrol", "reconfigure"] and (self.reconfigure_fails
                                                      or self.reconfigure_stops):
            rc, err = 1, "slurm_reconfigure error: Zero Bytes were transmitted or received\n"
            self.up = self.up and not self.reconfigure_stops
        elif argv == ["systemctl", "restart", "slurmctld"]:
            self.up = not self.restart_fails
        return subprocess.CompletedProcess(argv, rc, out, err)

    def actions(self) -> list[str]:
        """What changed slurmctld: reconfigures and restarts, in order."""
        return [" ".join(c) for c in self.calls
                if c in (["scontrol", "reconfigure"], ["systemctl", "restart", "slurmctld"])]


@pytest.fixture
def slurm() -> FakeSlurm:
    return FakeSlurm()


@pytest.fixture
def etc(tmp_path) -> Path:
    """The node's /etc/slurm as the boot left it: the files of ``value()``."""
    folder = tmp_path / "etc-slurm"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text)
    return folder


def node(etc: Path, slurm: FakeSlurm, role: str = "controller") -> config_sync.Node:
    return config_sync.Node(etc, role, run=slurm, sleep=lambda _: None)


@pytest.fixture
def metadata(fake_metadata: FakeMetadata) -> FakeMetadata:
    """The VM's metadata server."""
    return fake_metadata


@pytest.fixture
def service(metadata):
    """Starts serve() threads against the fake; stops every one after the test."""
    started: list[Service] = []

    def start(target: config_sync.Node) -> Service:
        started.append(Service(target, metadata))
        return started[-1]

    yield start
    for one in started:
        one.stop()


class Service:
    """serve() in a thread against the fake metadata server, until the test ends."""

    def __init__(self, target: config_sync.Node, metadata: FakeMetadata) -> None:
        self.stopping = threading.Event()
        self.sleeps: list[float] = []
        self.thread = threading.Thread(target=config_sync.serve, kwargs=dict(
            node=target, url=metadata.url, wait_s=1, sleep=self.sleep,
            keep_going=lambda: not self.stopping.is_set()), daemon=True)
        self.thread.start()

    def sleep(self, seconds: float) -> None:
        """Record the backoff; wait only a moment."""
        self.sleeps.append(seconds)
        time.sleep(0.01)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=10)


def eventually(check, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_the_key_and_files_are_the_ones_the_components_write():
    assert config_sync.KEY == node_metadata.SLURM_CONFIG
    assert {n for names in ROLE_FILES.values() for n in names} == set(config_sync.KNOWN_FILES)


def test_a_changed_value_is_written_and_reconfigures_slurmctld_once(etc, slurm, metadata,
                                                                     service, capsys):
    metadata.set(KEY, value())
    running = service(node(etc, slurm))
    # The value the boot installed: nothing to do, and the service waits on its ETag.
    eventually(lambda: len(metadata.waits()) >= 1, "the service waits for a change")
    assert slurm.actions() == []
    metadata.set(KEY, value(**{"slurm.conf": with_lines(
        "PartitionName=extra Nodes=cpu Default=NO State=UP")}))
    eventually(lambda: slurm.actions(), "reconfigure after the change")
    # Two more waits begin: the first of them timed out unchanged, and nothing more happened.
    seen = len(metadata.waits())
    eventually(lambda: len(metadata.waits()) >= seen + 2, "another wait times out unchanged")
    running.stop()
    assert slurm.actions() == ["scontrol reconfigure"]
    assert "PartitionName=extra" in (etc / "slurm.conf").read_text()
    wait = metadata.waits()[0]
    assert wait["wait_for_change"] == ["true"] and wait["timeout_sec"] == ["1"]
    assert wait["last_etag"] == [etag_of(value())]
    said = messages(capsys.readouterr().err)
    assert f"wrote {etc / 'slurm.conf'}" in said and f"wrote {etc / 'gres.conf'}" not in said
    assert "scontrol reconfigure: slurmctld and the configless nodes read the new files" in said


def test_the_same_files_under_a_new_etag_change_nothing(etc, slurm):
    stamp = (etc / "slurm.conf").stat().st_mtime_ns
    # Another spelling of the same object (its keys in another order): a new ETag.
    same = json.dumps(dict(reversed(list(json.loads(value()).items()))))
    assert same != value()
    assert node(etc, slurm).apply(same)
    assert slurm.actions() == [] and (etc / "slurm.conf").stat().st_mtime_ns == stamp


@pytest.mark.parametrize(("version", "line", "action"), [
    ("22.05.8", "PartitionName=extra Nodes=cpu State=UP", "scontrol reconfigure"),
    ("22.05.8", "MaxNodeCount=8", "systemctl restart slurmctld"),
    ("22.05.8", "SelectTypeParameters=CR_Core", "systemctl restart slurmctld"),
    ("23.11.4", "MaxNodeCount=8", "scontrol reconfigure"),
    ("23.11.4", "SlurmctldPort=6900", "systemctl restart slurmctld"),
    ("23.11.4", "PartitionName=extra Nodes=cpu State=UP", "scontrol reconfigure"),
])
def test_a_key_that_needs_a_restart_restarts_slurmctld_per_slurm_version(
        etc, version, line, action, capsys):
    slurm = FakeSlurm(version)
    assert node(etc, slurm).apply(value(**{"slurm.conf": with_lines(line)}))
    assert slurm.actions() == [action]
    if action.startswith("systemctl"):
        key = line.split("=")[0]
        assert (f"{key} changed, which Slurm {version[:5]} applies only on a restart: "
                "restarting slurmctld") in capsys.readouterr().err


def test_an_unknown_slurm_version_restarts_for_either_versions_keys(etc):
    slurm = FakeSlurm("unknown")
    assert node(etc, slurm).apply(value(**{"slurm.conf": with_lines("MaxNodeCount=8")}))
    assert slurm.actions() == ["systemctl restart slurmctld"]


def test_a_slurm_conf_slurm_cannot_parse_keeps_the_old_files(etc, slurm, capsys):
    before = {p.name: p.read_text() for p in etc.iterdir()}
    broken = with_lines("PartitionName=extra Nodes=cpu MaxTime=soon")
    assert not node(etc, slurm).apply(value(**{"slurm.conf": broken}))
    assert {p.name: p.read_text() for p in etc.iterdir()} == before
    assert slurm.actions() == []
    ((severity, said),) = entries(capsys.readouterr().err)
    assert severity == "ERROR" and said.startswith(
        "REFUSED the new Slurm files of metadata clusterprint-slurm-config, keeping the ones "
        "in place: Slurm cannot parse the new slurm.conf: ")
    assert 'Bad value "soon" for MaxTime' in said


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(("bad", "said"), [
    ("not json", "the value: not JSON"),
    (json.dumps(["slurm.conf"]), "the value: expected dict, got list"),
    (json.dumps({"slurm.conf": 5}), "the value's slurm.conf: expected str, got int"),
    (json.dumps({"slurm.conf": SLURM_CONF, "../passwd": "x"}), "unknown files ['../passwd']"),
    (json.dumps({"gres.conf": "x"}), "no slurm.conf"),
    (value(**{"slurm.conf": SLURM_CONF.replace("demo", "other")}),
     "ClusterName changes from demo to other"),
    # Hostile values: each one line, and nothing the program could not survive.
    ('{"slurm.conf": ' + DEEP + "}", "the value: nested deeper than 32 levels"),
    (DEEP, "the value: nested deeper than 32 levels"),
    ('{"slurm.conf": ' * 40 + "{}" + "}" * 40, "nested deeper than 32 levels"),
    (b'{"slurm.conf": "\xff"}', "the value: not UTF-8 (byte 16)"),
    (value(**{"slurm.conf": SLURM_CONF + "Include x\x00\n"}),
     "slurm.conf line 7: control character \\x00"),
    (value(**{"gres.conf": "AutoDetect=off\n\x1b[2K\n"}),
     "gres.conf line 2: control character \\x1b"),
    (json.dumps({"slurm.conf": SLURM_CONF, "x\n<1>{}": "y"}), "unknown files ['x\\n<1>{}']"),
    (value(**{"plugstack.conf": "#" * (config_sync.VALUE_MAX + 1)}),
     "bytes, over the 262144 bytes of a metadata value"),
], ids=["not-json", "list", "int-text", "unknown-name", "no-slurm-conf", "other-cluster",
        "deep-text", "deep", "deep-objects", "not-utf8", "nul", "escape", "newline-name",
        "huge"])
def test_a_value_that_is_not_this_clusters_files_is_refused_in_one_line(
        etc, slurm, bad, said, capsys):
    before = {p.name: p.read_text() for p in etc.iterdir()}
    assert not node(etc, slurm).apply(bad)
    ((severity, message),) = entries(capsys.readouterr().err)
    assert severity == "ERROR" and said in message, message
    assert {p.name: p.read_text() for p in etc.iterdir()} == before and slurm.actions() == []


#: gres.conf and cgroup.conf lines, and whether the installed Slurm's ``slurmd -G`` (which
#: reads both) takes them: the program's check refuses what Slurm 22.05 stops on.
SLURM_FILE_LINES = [
    ("gres.conf", "AutoDetect=off", True), ("gres.conf", "name=gpu file=/dev/null", True),
    ("gres.conf", "NodeName=probe Name=gpu File=/dev/null Type=\"a b\"", True),
    ("gres.conf", "AutoDetect=off Name=gpu File=/dev/null", False),
    ("gres.conf", "File=/dev/null Name=gpu", False),
    ("gres.conf", "Name=gpu File=/dev/null Bogus=1", False),
    ("gres.conf", "Name=gpu File", False), ("gres.conf", "Name=gpu Count=", False),
    ("gres.conf", "Name=gpu Type=\"a b", False),
    ("cgroup.conf", "constraincores=YES", True), ("cgroup.conf", "ConstrainKmemSpace=yes", True),
    ("cgroup.conf", "AllowedRAMSpace=99.5", True),
    ("cgroup.conf", "ConstrainCores=yes ConstrainDevices=yes", False),
    ("cgroup.conf", "ConstrainCores=maybe", False), ("cgroup.conf", "EnableControllers=yes", False),
    ("cgroup.conf", "AllowedRAMSpace=abc", False), ("cgroup.conf", "MinRAMSpace=-1", False),
    ("cgroup.conf", "ConstrainCores", False), ("cgroup.conf", "CgroupPlugin=", False),
]


@pytest.mark.parametrize(("name", "line", "taken"), SLURM_FILE_LINES)
def test_gres_and_cgroup_conf_are_checked_as_the_installed_slurm_reads_them(
        etc, slurm, tmp_path, name, line, taken, capsys):
    # The oracle: slurmd -G of this machine's Slurm 22.05 with the line in its file.
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "slurm.conf").write_text("ClusterName=demo\nSlurmctldHost=localhost\n"
                                      "GresTypes=gpu\nNodeName=probe CPUs=2\n")
    (probe / "gres.conf").write_text("AutoDetect=off\n")
    (probe / "cgroup.conf").write_text("ConstrainCores=yes\n")
    (probe / name).write_text(f"# the line under test\n{line}\n")
    done = subprocess.run(["slurmd", "-G", "-N", "probe"], capture_output=True, text=True,
                          env={**os.environ, "SLURM_CONF": str(probe / "slurm.conf")},
                          timeout=60)
    assert (done.returncode == 0) is taken, done.stderr
    assert node(etc, slurm).apply(value(**{name: f"# the line under test\n{line}\n"})) is taken
    if not taken:
        ((severity, message),) = entries(capsys.readouterr().err)
        assert severity == "ERROR" and f": {name} line 2: " in message, message
        assert (etc / name).read_text() == FILES[name]


def test_cgroup_conf_keys_follow_the_slurm_version(etc):
    # 23.11 dropped the kernel memory keys and added EnableControllers.
    new, old = FakeSlurm("23.11.4"), FakeSlurm("22.05.8")
    assert not node(etc, new).apply(value(**{"cgroup.conf": "ConstrainKmemSpace=yes\n"}))
    assert node(etc, new).apply(value(**{"cgroup.conf": "EnableControllers=yes\n"}))
    assert not node(etc, old).apply(value(**{"cgroup.conf": "EnableControllers=yes\n"}))
    assert not node(etc, FakeSlurm("unknown")).apply(value(**{
        "cgroup.conf": "ConstrainKmemSpace=yes\n"}))


def test_files_a_running_slurmctld_refuses_are_put_back_and_it_is_left_running(etc, capsys):
    # 23.11: a reconfigure that fails leaves the old slurmctld running.
    slurm = FakeSlurm("23.11.4")
    slurm.reconfigure_fails = True
    assert not node(etc, slurm).apply(value(**{"slurm.conf": with_lines(
        "PartitionName=extra Nodes=cpu State=UP"), "plugstack.conf": "required x.so\n"}))
    assert (etc / "slurm.conf").read_text() == SLURM_CONF
    assert not (etc / "plugstack.conf").exists()
    assert slurm.actions() == ["scontrol reconfigure"] and slurm.up
    assert messages(capsys.readouterr().err, "ERROR") == [
        "slurmctld did not take the new files (scontrol reconfigure failed (exit 1): "
        "slurm_reconfigure error: Zero Bytes were transmitted or received): the old ones are "
        "back; slurmctld answers with them"]


def test_a_reconfigure_that_stops_slurmctld_restarts_it_with_the_old_files(etc, capsys):
    # 22.05: a partition naming an unknown nodeset passes scontrol -V and stops slurmctld.
    slurm = FakeSlurm("22.05.8")
    slurm.reconfigure_stops = True
    restarted_with: list[str] = []
    real_call = slurm.__call__

    def run(argv, timeout, env=None):
        if argv[:2] == ["systemctl", "restart"]:
            restarted_with.append((etc / "slurm.conf").read_text())
        return real_call(argv, timeout, env)

    bad = with_lines("PartitionName=bad Nodes=nosuchset State=UP")
    assert not config_sync.Node(etc, "controller", run=run, sleep=lambda _: None).apply(
        value(**{"slurm.conf": bad}))
    assert slurm.actions() == ["scontrol reconfigure", "systemctl restart slurmctld"]
    assert restarted_with == [SLURM_CONF] and slurm.up
    (line,) = messages(capsys.readouterr().err, "ERROR")
    assert line.startswith("slurmctld did not take the new files (scontrol reconfigure failed")
    assert line.endswith("the old ones are back; slurmctld had stopped and was restarted with "
                         "them")


def test_a_reconfigure_that_succeeds_but_leaves_slurmctld_silent_is_undone(etc, capsys):
    slurm = FakeSlurm()
    pings = iter([True, False])  # up before the change, silent after it

    def run(argv, timeout, env=None):
        if argv == ["scontrol", "ping"]:
            slurm.up = next(pings, slurm.up)
        return slurm(argv, timeout, env)

    assert not config_sync.Node(etc, "controller", run=run, sleep=lambda _: None).apply(
        value(**{"slurm.conf": with_lines("PartitionName=x Nodes=cpu")}))
    assert (etc / "slurm.conf").read_text() == SLURM_CONF
    assert slurm.actions() == ["scontrol reconfigure", "systemctl restart slurmctld"]
    (line,) = messages(capsys.readouterr().err, "ERROR")
    assert "slurmctld stopped answering after scontrol reconfigure" in line


def test_a_slurmctld_that_stays_down_with_the_old_files_is_an_alert(etc, capsys):
    slurm = FakeSlurm()
    slurm.reconfigure_stops = slurm.restart_fails = True
    node_ = config_sync.Node(etc, "controller", run=slurm, sleep=lambda _: None,
                             restart_budget_s=0)
    assert not node_.apply(value(**{"slurm.conf": with_lines("PartitionName=x Nodes=cpu")}))
    assert (etc / "slurm.conf").read_text() == SLURM_CONF
    (line,) = messages(capsys.readouterr().err, "ALERT")
    assert line.endswith("the old ones are back, and slurmctld does not run with them either: "
                         "not answering 0s after its restart")


def test_a_restart_the_new_files_fail_restarts_it_again_with_the_old_ones(etc, capsys):
    slurm = FakeSlurm()
    restarts = iter([False, True])  # the new files fail, the old ones run

    def run(argv, timeout, env=None):
        if argv[:2] == ["systemctl", "restart"]:
            slurm.restart_fails = not next(restarts)
        return slurm(argv, timeout, env)

    assert not config_sync.Node(etc, "controller", run=run, sleep=lambda _: None,
                                restart_budget_s=0).apply(
        value(**{"slurm.conf": with_lines("MaxNodeCount=8")}))
    assert slurm.actions() == ["systemctl restart slurmctld"] * 2 and slurm.up
    assert (etc / "slurm.conf").read_text() == SLURM_CONF
    assert messages(capsys.readouterr().err, "ERROR") == [
        "slurmctld did not take the new files (not answering 0s after its restart): the old "
        "ones are back; slurmctld had stopped and was restarted with them"]


def test_a_controller_whose_slurmctld_is_down_gets_the_files_for_its_next_start(etc, capsys):
    slurm = FakeSlurm(up=False)
    assert node(etc, slurm).apply(value(**{"slurm.conf": with_lines("MaxNodeCount=8")}))
    assert "MaxNodeCount=8" in (etc / "slurm.conf").read_text() and slurm.actions() == []
    assert "slurmctld does not answer: it reads the new files when it starts" in (
        capsys.readouterr().err)


def test_a_key_compute_nodes_apply_only_on_a_slurmd_restart_says_how(etc, slurm, capsys):
    node(etc, slurm).apply(value(**{"slurm.conf": with_lines("GresTypes=gpu,shard")}))
    assert slurm.actions() == ["systemctl restart slurmctld"]
    assert ("GresTypes changed: compute nodes apply it only when slurmd restarts; "
            "reboot them once idle with `scontrol reboot ASAP nextstate=RESUME ALL`"
            ) in messages(capsys.readouterr().err, "WARNING")


def test_files_are_replaced_whole_with_the_boot_scripts_mode_and_a_dropped_one_removed(
        etc, slurm):
    (etc / "plugstack.conf").write_text("required /usr/local/lib/slurm/spank_pyxis.so\n")
    (etc / "slurmdbd.conf").write_text("not ours\n")
    (etc / "gres.conf").chmod(0o600)
    node(etc, slurm).apply(value(**{"gres.conf": "AutoDetect=off\n"}))
    assert (etc / "gres.conf").read_text() == "AutoDetect=off\n"
    assert oct((etc / "gres.conf").stat().st_mode & 0o777) == "0o644"
    assert not (etc / "plugstack.conf").exists()
    # Only its own files: the rest of /etc/slurm is left alone, and no temp file stays.
    assert sorted(p.name for p in etc.iterdir()) == ["cgroup.conf", "gres.conf", "slurm.conf",
                                                     "slurmdbd.conf"]


def test_a_login_node_only_writes_the_files_client_commands_read(etc, slurm, capsys):
    login = {"slurm.conf": with_lines("MaxNodeCount=8")}
    assert node(etc, slurm, "login").apply(slurm_config_value(login, "login"))
    assert "MaxNodeCount=8" in (etc / "slurm.conf").read_text() and slurm.calls == []
    assert "the client commands read the new files from their next run" in (
        capsys.readouterr().err)


def test_metadata_server_errors_are_retried_with_backoff_and_never_stop_it(
        etc, slurm, metadata, service, capsys):
    metadata.failures = [503, 429, "drop", 500]
    running = service(node(etc, slurm))
    eventually(lambda: len(running.sleeps) >= 5, "four failures and a missing key")
    metadata.set(KEY, value(**{"slurm.conf": with_lines("PartitionName=x Nodes=cpu")}))
    eventually(lambda: slurm.actions(), "the value once the server answers")
    running.stop()
    assert running.sleeps[:5] == [1, 2, 4, 8, 16]
    warned = messages(capsys.readouterr().err, "WARNING")
    assert "metadata server: HTTP 503; retrying in 1s" in warned
    assert "metadata server: HTTP 429; retrying in 2s" in warned
    assert "metadata clusterprint-slurm-config is not set on this VM; retrying in 16s" in warned


def test_the_backoff_stops_doubling_at_a_minute(etc, slurm, metadata, service):
    metadata.failures = [503] * 9
    metadata.set(KEY, value())
    running = service(node(etc, slurm))
    eventually(lambda: len(metadata.waits()) >= 1, "waiting once the server answers")
    running.stop()
    assert running.sleeps == [1, 2, 4, 8, 16, 32, 60, 60, 60]


def run_program(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clusterprint.node.config_sync", *args],
                          input=stdin, capture_output=True, text=True, timeout=60)


def test_install_prints_what_it_changed_and_nothing_when_unchanged(tmp_path):
    etc = tmp_path / "etc-slurm"
    first = run_program("--role", "controller", "--dir", str(etc), "--install", stdin=value())
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == [str(etc / n) for n in ("slurm.conf", "gres.conf",
                                                           "cgroup.conf")]
    again = run_program("--role", "controller", "--dir", str(etc), "--install", stdin=value())
    assert (again.returncode, again.stdout.strip()) == (0, "")


def test_install_of_a_refused_value_exits_1_naming_why(etc):
    done = run_program("--role", "controller", "--dir", str(etc), "--install",
                       stdin=value(**{"slurm.conf": "ClusterName=demo\n"}))
    assert done.returncode == 1
    ((severity, said),) = entries(done.stderr)
    assert severity == "ERROR"
    assert said.startswith("REFUSED the Slurm files of metadata clusterprint-slurm-config")
    assert "No SlurmctldHost defined" in said
    assert (etc / "slurm.conf").read_text() == SLURM_CONF


def test_the_service_process_follows_the_key_and_reconfigures(etc, metadata, tmp_path):
    record = tmp_path / "reconfigured"
    metadata.set(KEY, value())
    process = subprocess.Popen(
        [sys.executable, "-m", "clusterprint.node.config_sync", "--role", "controller",
         "--dir", str(etc), "--metadata-url", metadata.url, "--wait-s", "1",
         "--ping-command", "echo Slurmctld is UP", "--version-command", "echo slurm 22.05.8",
         "--reconfigure-command", f"touch {record}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        eventually(lambda: len(metadata.waits()) >= 2, "waiting, twice")
        assert not record.exists()
        metadata.set(KEY, value(**{"slurm.conf": with_lines("PartitionName=x Nodes=cpu")}))
        eventually(record.exists, "the reconfigure command")
        assert "PartitionName=x" in (etc / "slurm.conf").read_text()
        assert process.poll() is None
    finally:
        process.terminate()
        _, err = process.communicate(timeout=10)
    assert f"following metadata clusterprint-slurm-config into {etc} (controller)" in err
    assert not [p for p in etc.iterdir() if p.name.startswith(".")]
    assert os.stat(etc / "slurm.conf").st_mode & 0o777 == 0o644


def test_the_program_never_holds_the_heredoc_terminator():
    # The boot script writes it from a heredoc ending at this word.
    assert "CLUSTERPRINT_EOF" not in Path(config_sync.__file__).read_text()


def test_a_write_that_fails_midway_leaves_every_old_file_whole(etc, slurm, monkeypatch, capsys):
    # The disk fills while the second file is staged: nothing was renamed yet.
    staged = []
    real_stage = common.stage

    def stage(path, data, mode=0o644):
        if staged:
            raise OSError(28, "No space left on device")
        staged.append(path)
        return real_stage(path, data, mode)

    monkeypatch.setattr(common, "stage", stage)
    before = {p.name: p.read_text() for p in etc.iterdir()}
    with pytest.raises(OSError, match="No space left"):
        node(etc, slurm).apply(value(**{"slurm.conf": with_lines("PartitionName=x Nodes=cpu"),
                                        "gres.conf": "AutoDetect=off\n"}))
    assert {p.name: p.read_text() for p in etc.iterdir()} == before  # and no temp file
    assert slurm.actions() == []


def test_a_reader_during_the_swap_sees_the_old_or_the_new_file_whole(etc, slurm):
    texts = [SLURM_CONF, with_lines("PartitionName=x Nodes=cpu " + "Default=NO " * 2000)]
    seen, stop = set(), threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.add((etc / "slurm.conf").read_text())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for turn in range(60):
            assert node(etc, slurm).apply(value(**{"slurm.conf": texts[(turn + 1) % 2]}))
    finally:
        stop.set()
        reader.join()
    assert seen == set(texts)


def waiting_on(metadata: FakeMetadata, text: str) -> None:
    """Until the service waits for a change from the value ``text``: it is done with it."""
    eventually(lambda: metadata.waits()[-1]["last_etag"] == [etag_of(text)],
               "a wait on the value")


def test_the_service_waits_on_a_refused_value_instead_of_fetching_it_again(
        etc, slurm, metadata, service, capsys):
    metadata.set(KEY, value())
    running = service(node(etc, slurm))
    eventually(lambda: len(metadata.waits()) >= 1, "the service waits for a change")
    for bad in ("[" * 100_000, '{"slurm.conf": "\\u0000"}'):
        metadata.set(KEY, bad)
        waiting_on(metadata, bad)
        asked = len(metadata.requests)
        time.sleep(1.5)  # a wait is 1 s here: at most two requests, each a wait on it
        later = metadata.requests[asked:]
        assert len(later) <= 2 and all(q["last_etag"] == [etag_of(bad)] for _, q, _ in later)
    metadata.set(KEY, value(**{"slurm.conf": with_lines("PartitionName=x Nodes=cpu")}))
    eventually(lambda: slurm.actions(), "the next good value")
    running.stop()
    assert running.thread.is_alive() is False and running.sleeps == []
    refused = messages(capsys.readouterr().err, "ERROR")
    assert len(refused) == 2 and "nested deeper than 32 levels" in refused[0]
    assert "slurm.conf line 1: control character \\x00" in refused[1]


def test_an_install_process_whose_write_fails_midway_leaves_every_old_file_whole(etc):
    # Its file size limited (RLIMIT_FSIZE): slurm.conf is small and staged first, gres.conf
    # does not fit (EFBIG), as on a full disk.
    import resource

    before = {p.name: p.read_text() for p in etc.iterdir()}
    big = "#" * 200_000 + "\nAutoDetect=off\n"
    done = subprocess.run(
        [sys.executable, str(Path(config_sync.__file__)), "--role", "controller", "--dir",
         str(etc), "--install"],
        input=value(**{"slurm.conf": with_lines("PartitionName=x Nodes=cpu"), "gres.conf": big}),
        capture_output=True, text=True, timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000)))
    assert done.returncode == 1
    assert {p.name: p.read_text() for p in etc.iterdir()} == before  # and no temp file
    assert messages(done.stderr, "ERROR") == [
        "writing the Slurm files failed, the old ones are kept: [Errno 27] File too large"]


#: The program, killed (SIGKILL) while it stages its second file (slurm.conf is first).
KILLED_MIDWAY = """
import os, signal, sys
from clusterprint.node import common, config_sync
real = common.stage
def stage(path, data, mode=0o644):
    if path.name == "gres.conf":
        os.kill(os.getpid(), signal.SIGKILL)
    return real(path, data, mode)
common.stage = stage
sys.exit(config_sync.main(sys.argv[1:]))
"""


def test_an_install_process_killed_midway_leaves_every_old_file_whole(etc):
    before = {p.name: p.read_text() for p in etc.iterdir()}
    done = subprocess.run([sys.executable, "-c", KILLED_MIDWAY, "--role", "controller",
                           "--dir", str(etc), "--install"], capture_output=True, text=True,
                          input=value(**{"slurm.conf": with_lines("PartitionName=x Nodes=cpu"),
                                         "gres.conf": "AutoDetect=off\n"}), timeout=60)
    assert done.returncode == -9
    # slurm.conf was staged, not renamed: a temp file stays beside the old files, whole.
    assert {p.name: p.read_text() for p in etc.iterdir() if p.name[0] != "."} == before


def test_the_program_runs_from_a_link_with_common_beside_it(tmp_path, etc):
    # As the nodes install it: /usr/local/lib/clusterprint/{config_sync,common}.py and a link.
    lib = tmp_path / "lib"
    lib.mkdir()
    for path, text in program_files(str(lib), config_sync, shebang=True).items():
        Path(path).write_text(text)
        Path(path).chmod(0o755)
    link = tmp_path / "clusterprint-config-sync"
    link.symlink_to(lib / "config_sync.py")
    done = subprocess.run(["python3", str(link), "--role", "controller", "--dir", str(etc),
                           "--install"], input=value(**{"gres.conf": "Bogus=1\n"}),
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1
    assert messages(done.stderr, "ERROR") == [
        "REFUSED the Slurm files of metadata clusterprint-slurm-config: gres.conf line 1: "
        "unknown key Bogus (a GRES line starts with Name= or NodeName=)"]


def service_process(etc: Path, metadata: FakeMetadata, flags: Path) -> subprocess.Popen:
    """The service as a process; slurmctld is the file ``flags/up``: a reconfigure that
    stops it when slurm.conf names the nodeset ``nosuchset``, a restart that starts it."""
    (flags / "up").touch()
    up, conf = flags / "up", etc / "slurm.conf"
    return subprocess.Popen(
        [sys.executable, "-m", "clusterprint.node.config_sync", "--role", "controller",
         "--dir", str(etc), "--metadata-url", metadata.url, "--wait-s", "1",
         "--version-command", "echo slurm 22.05.8",
         "--ping-command", f"sh -c 'test -e {up} && echo Slurmctld is UP'",
         "--reconfigure-command",
         f"sh -c 'echo reconfigure >> {flags}/log; ! grep -q nosuchset {conf} || "
         f"{{ rm {up}; exit 1; }}'",
         "--restart-command", f"sh -c 'echo restart >> {flags}/log; touch {up}'"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_service_process_refuses_hostile_values_and_restores_a_stopped_slurmctld(
        etc, metadata, tmp_path):
    metadata.set(KEY, value())
    process = service_process(etc, metadata, tmp_path)
    try:
        eventually(lambda: len(metadata.waits()) >= 1, "waiting")
        for bad in ("[" * 100_000, '{"slurm.conf": "\\u0000"}', value(**{
                "cgroup.conf": "ConstrainCores=maybe\n"})):
            metadata.set(KEY, bad)
            waiting_on(metadata, bad)
        stops = value(**{"slurm.conf": with_lines("PartitionName=bad Nodes=nosuchset State=UP")})
        metadata.set(KEY, stops)
        waiting_on(metadata, stops)  # done with it
        assert (etc / "slurm.conf").read_text() == SLURM_CONF
        assert (tmp_path / "up").exists() and process.poll() is None
    finally:
        process.terminate()
        _, err = process.communicate(timeout=10)
    assert (tmp_path / "log").read_text().split() == ["reconfigure", "restart"]
    errors = messages(err, "ERROR")
    assert [e.split(": ", 1)[0] for e in errors[:3]] == ["REFUSED the new Slurm files of "
                                                         "metadata clusterprint-slurm-config, "
                                                         "keeping the ones in place"] * 3
    assert "nested deeper than 32 levels" in errors[0]
    assert "slurm.conf line 1: control character \\x00" in errors[1]
    assert "cgroup.conf line 1: ConstrainCores=maybe is not a bool" in errors[2]
    (recovered,) = errors[3:]
    assert recovered.startswith("slurmctld did not take the new files (sh -c echo reconfigure")
    assert recovered.endswith("failed (exit 1)): the old ones are back; slurmctld had stopped "
                              "and was restarted with them")
