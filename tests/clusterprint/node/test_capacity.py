"""Power saving on the controller (clusterprint/node/capacity.py) as a module and as a process,
on a fake Slurm and a fake Compute API.

What an operator sees: which VMs a resume creates and where, what a suspend deletes, which
reason a node that could not get a VM shows in ``sinfo -R``, and that it comes back after
``backoff_s``, never down for ever. The config is the one rendered for the a4 reference
blueprint (its nodeset a4spot has six elastic nodes, ``a4-a4spot-e00001`` to ``-e00006``),
pointed at the fake API; the steps run in the test process with an injected clock, and the
program runs as slurmctld and the watch service run it: a file with common.py beside it, on
the standard library alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.blueprint.validate import load_checked
from clusterprint.node import capacity, common
from clusterprint.render import capacity as rendered
from tests.support.compute_fake import FakeCompute
from tests.support.paths import ROOT, STDLIB_ONLY, blueprint_path
from tests.support.remediation_fakes import fake_scontrol, node_line, scontrol_log

BLUEPRINT = load_checked(blueprint_path("a4"))
PROGRAM = ROOT / "clusterprint" / "node" / "capacity.py"
BASE = "a4-a4spot-e"
GROUP = "a4-nodeset-a4spot-elastic-abc1234"
MACHINE = "a4-highgpu-8g"
#: a4-highgpu-8g as machineTypes.get answers it: 224 vCPUs, 3968 GiB
CPUS, MEMORY_MB = 224, 4_063_232
STATIC = ["a4-a4spot-0001", "a4-a4spot-0002"]
#: VMs the elastic nodes' group holds that are none of power saving's names (a group
#: resized by hand names its VMs base-xxxx): they take room and are never touched.
HELD = ["a4-a4spot-e-ab12", "a4-a4spot-e-cd34"]
STOCKOUT = ("ZONE_RESOURCE_POOL_EXHAUSTED",
            "The zone 'projects/p/zones/z' does not have enough resources available to "
            "fulfill the request. Try a different zone, or try again later.")
QUOTA = ("QUOTA_EXCEEDED", "Quota 'PREEMPTIBLE_NVIDIA_B200_GPUS' exceeded. Limit: 8.0 in "
                           "region us-central1.")
T0 = 1_000_000.0


def elastic(*numbers: int) -> list[str]:
    return [f"a4-a4spot-e{n:05d}" for n in numbers]


def hostlist(*numbers: int) -> str:
    return ",".join(elastic(*numbers))


class FakeSlurm(capacity.Slurm):
    """``scontrol show node -o`` from lines, ``show hostnames`` of a comma list; every
    command recorded."""

    def __init__(self, lines: list[str] | None = None, declared: bool = True) -> None:
        """``declared``: Slurm also knows every elastic node the lines leave out, powered
        down, as once power saving has declared them (each watch pass declares first)."""
        self.lines, self.commands = lines or [], []
        if declared:
            given = {line.split()[0].removeprefix("NodeName=") for line in self.lines}
            self.lines = self.lines + [
                node_line(n, state="IDLE+CLOUD+POWERED_DOWN", reason="", feature="a4spot")
                for n in elastic(1, 2, 3, 4, 5, 6) if n not in given]
        super().__init__(self._run)

    def _run(self, argv: list[str]) -> str:
        self.commands.append(argv)
        if argv[:3] == ["scontrol", "show", "node"]:
            return "\n".join(self.lines)
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            return "\n".join(argv[3].split(","))
        return ""

    def changes(self) -> list[list[str]]:
        """What power saving did to Slurm: every command but the reads."""
        return [c for c in self.commands if c[:2] != ["scontrol", "show"]]


class Journal(list):
    """The program's log lines as (severity, message)."""

    def __call__(self, message: str, severity: str = "INFO", **fields: object) -> None:
        self.append((severity, message))

    def severities(self, severity: str) -> list[str]:
        return [message for level, message in self if level == severity]


@pytest.fixture
def fake():
    # The static nodes' group (another base name) is never power saving's.
    api = FakeCompute("p", "z", groups={GROUP: (BASE, dict.fromkeys(HELD, "RUNNING")),
                                        "a4-nodeset-a4spot-group-abc1234": (
                                            "a4-a4spot", dict.fromkeys(STATIC, "RUNNING"))},
                      machine_types={MACHINE: (CPUS, MEMORY_MB)})
    yield api
    api.stop()


def written(tmp_path: Path, fake: FakeCompute, **changes: object) -> Path:
    """The rendered config of the a4 blueprint, pointed at the fake API and a state file
    in ``tmp_path``."""
    raw = {**json.loads(rendered.config_text(BLUEPRINT)), "project": "p", "zone": "z",
           "state_file": str(tmp_path / "state.json"), **fake.config(), **changes}
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(raw))
    return path


def config_for(tmp_path: Path, fake: FakeCompute, **changes: object) -> capacity.Config:
    return capacity.Config.load(str(written(tmp_path, fake, **changes)))


def power_saving(config: capacity.Config, slurm: FakeSlurm, now: list[float] | None = None,
                 log: Journal | None = None) -> capacity.Capacity:
    """The steps with the clock at ``now[0]`` (T0 unless given)."""
    clock = now or [T0]
    compute = common.Compute(config.project, config.zone, config.api, config.token_url,
                             config.http_timeout_s)
    return capacity.Capacity(config, slurm, compute, clock=lambda: clock[0],
                             log=log if log is not None else Journal())


def creates(fake: FakeCompute) -> list[tuple[str, list[str]]]:
    """Each createInstances call: its group and the names it created."""
    return [(c.path.split("/")[-2], [i["name"] for i in c.body["instances"]])
            for c in fake.verbs("createInstances")]


def deletes(fake: FakeCompute) -> list[tuple[str, list[str]]]:
    return [(c.path.split("/")[-2], c.body["instances"]) for c in fake.verbs("deleteInstances")]


def state_of(config: capacity.Config) -> capacity.State:
    return capacity.State.load(config.state_file)


def power_down(nodes: list[str], reason: str) -> list[str]:
    return ["scontrol", "update", f"nodename={','.join(nodes)}", "state=power_down_force",
            f"reason={reason}"]


def powering_up(*numbers: int) -> list[str]:
    """Slurm's lines of elastic nodes it is resuming for a job."""
    return [node_line(n, state="ALLOCATED+CLOUD+POWERING_UP", reason="", feature="a4spot")
            for n in elastic(*numbers)]


def stockout_reason(code: str = STOCKOUT[0], message: str = STOCKOUT[1],
                    kind: str = "stockout") -> str:
    return f"cp:capacity: {kind}: {code}: {message}"


# --- Why a create failed -------------------------------------------------------------------

@pytest.mark.parametrize(("code", "message", "kind"), [
    ("ZONE_RESOURCE_POOL_EXHAUSTED", STOCKOUT[1], "stockout"),
    ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "no a4-highgpu-8g in z", "stockout"),
    ("RESOURCE_POOL_EXHAUSTED", "no room", "stockout"),
    ("INSUFFICIENT_CAPACITY", "no room", "stockout"),
    # the code decides first: a stockout whose message names a reservation is a stockout
    ("ZONE_RESOURCE_POOL_EXHAUSTED", "while consuming reservation r", "stockout"),
    ("QUOTA_EXCEEDED", QUOTA[1], "quota"),
    ("quotaExceeded", "any", "quota"),
    ("REGION_QUOTA_EXCEEDED", "any", "quota"),
    ("CONDITION_NOT_MET", "Specified Reservation 'a4-res' does not have available resources",
     "reservation"),
    ("RESOURCE_NOT_FOUND", "The resource 'projects/p/global/images/x' was not found", "error"),
    ("", "", "error"),
])
def test_a_failed_create_is_named_by_its_kind(code, message, kind):
    assert capacity.kind_of(code, message) == kind


# --- The config and the elastic names ------------------------------------------------------

def test_the_rendered_config_loads_back_as_rendered(tmp_path):
    path = tmp_path / "capacity.json"
    path.write_text(rendered.config_text(BLUEPRINT))
    config = capacity.Config.load(str(path))
    assert config == rendered.capacity_config(BLUEPRINT)
    assert list(config.nodesets) == ["a4spot"]  # the reservation nodeset a4 has none
    assert config.nodesets["a4spot"].names() == elastic(1, 2, 3, 4, 5, 6)


@pytest.mark.parametrize(("node", "held"), [
    ("a4-a4spot-e00001", True),
    ("a4-a4spot-e00006", True),
    ("a4-a4spot-e00007", False),   # above max_count - count
    ("a4-a4spot-e00000", False),
    ("a4-a4spot-e0001", False),    # digits short
    ("a4-a4spot-e000001", False),  # digits long
    ("a4-a4spot-e0000x", False),
    ("a4-a4spot-e-0001", False),
    ("a4-a4spot-0001", False),     # a static node of the same nodeset
    ("a4-a4-e00001", False),       # another nodeset's name
    ("b4-a4spot-e00001", False),
])
def test_a_nodeset_holds_only_its_own_fixed_elastic_names(node, held):
    nodeset = rendered.capacity_config(BLUEPRINT).nodesets["a4spot"]
    assert nodeset.holds(node) is held
    assert (node in nodeset.names()) is held


def run_program(tmp_path: Path, config: Path | str, *args: str,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The program as the controller runs it: the file, with common.py beside it, on the
    standard library alone."""
    return subprocess.run([*STDLIB_ONLY, str(PROGRAM), "--config", str(config), *args],
                          env=env if env is not None else slurm_env(tmp_path),
                          capture_output=True, text=True, timeout=60)


def changed(**changes: object):
    """The config text with these keys changed (None: taken out)."""
    def text(raw: dict) -> str:
        raw = {**raw, **changes}
        return json.dumps({k: v for k, v in raw.items() if v is not None})
    return text


def nodeset_changed(**changes: object):
    def text(raw: dict) -> str:
        raw["nodesets"]["a4spot"].update(changes)
        return json.dumps(raw)
    return text


BAD_CONFIGS = {
    "not JSON": lambda raw: "{not json",
    "a list": lambda raw: "[1, 2]",
    "no nodesets": changed(nodesets=None),
    "no zone": changed(zone=None),
    "an unknown key": changed(backof_s=60),
    "a nodeset with an unknown key": nodeset_changed(max_count=8),
    "a nodeset that is a list": changed(nodesets={"a4spot": []}),
}


@pytest.mark.parametrize("what", BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_a_broken_config_is_refused_in_one_line_and_touches_nothing(fake, tmp_path, what):
    """slurmctld logs what its ResumeProgram said: one line naming the config, exit 1, no
    traceback, no VM and no Slurm change."""
    config = written(tmp_path, fake)
    config.write_text(what(json.loads(config.read_text())))
    done = run_program(tmp_path, config, "resume", hostlist(1))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1 and str(config) in done.stderr
    assert fake.calls == [] and scontrol_log(tmp_path) == []


def test_a_config_value_of_the_wrong_type_is_refused_in_one_line(fake, tmp_path):
    """A hand-edited count of "6" must be said about the config, as the remediation loop's
    config is, not be found later as a traceback in slurmctld's log."""
    config = written(tmp_path, fake)
    config.write_text(nodeset_changed(count="6")(json.loads(config.read_text())))
    done = run_program(tmp_path, config, "resume", hostlist(1))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1 and "count" in done.stderr


def test_a_missing_config_is_an_error_exit(tmp_path):
    done = run_program(tmp_path, tmp_path / "nowhere.json", "declare")
    assert done.returncode == 1 and "nowhere.json" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("args", "said"), [
    (["resume"], "resume takes a hostlist"),
    (["suspend"], "suspend takes a hostlist"),
    (["resume-fail"], "resume-fail takes a hostlist"),
    (["declare", "a4-a4spot-e00001"], "declare takes no hostlist"),
    (["watch", "a4-a4spot-e00001"], "watch takes no hostlist"),
    (["power-up", "a4-a4spot-e00001"], "invalid choice"),
])
def test_bad_usage_exits_2_before_reading_the_config(tmp_path, args, said):
    done = run_program(tmp_path, tmp_path / "nowhere.json", *args)
    assert done.returncode == 2 and said in done.stderr
    assert scontrol_log(tmp_path) == [] and not (tmp_path / "state.json").exists()


# --- declare -------------------------------------------------------------------------------

def created_line(names: list[str], features: str = "a4spot") -> list[str]:
    return ["scontrol", "create", f"NodeName={','.join(names)}", "State=CLOUD",
            f"Features={features}", f"CPUs={CPUS}", f"RealMemory={int(MEMORY_MB * 0.9)}",
            "SuspendTime=300"]


def test_declare_creates_the_elastic_nodes_slurm_does_not_know_powered_down(fake, tmp_path):
    """Slurm knows the static nodes and two elastic ones (declared before a restart): one
    ``scontrol create`` for the other four, with the nodeset's GPUs and topology."""
    config = config_for(tmp_path, fake)
    slurm = FakeSlurm([node_line(n, state="IDLE", reason="", feature="a4spot")
                       for n in STATIC + elastic(1, 2)], declared=False)
    power_saving(config, slurm).declare()
    assert slurm.changes() == [created_line(elastic(3, 4, 5, 6))
                               + ["Gres=gpu:b200:8", "Topology=fabric:fabric:unplaced"]]
    assert [c.verb for c in fake.calls] == [MACHINE]  # machineTypes/a4-highgpu-8g
    assert fake.calls[0].method == "GET"


def test_declare_when_slurm_knows_every_elastic_node_changes_nothing(fake, tmp_path):
    config = config_for(tmp_path, fake)
    slurm = FakeSlurm([node_line(n, state="IDLE+CLOUD+POWERED_DOWN", reason="")
                       for n in elastic(1, 2, 3, 4, 5, 6)])
    power_saving(config, slurm).declare()
    assert slurm.changes() == [] and fake.calls == []


def test_declare_makes_one_create_per_nodeset_and_names_gres_and_topology_only_where_set(
        fake, tmp_path):
    cpu = {"base_instance_name": "a4-cpu", "prefix": "a4-cpu-e", "count": 2, "digits": 5,
           "machine_type": "c2-standard-8", "features": "cpu", "gres": "", "topology": "",
           "suspend_time_s": 900}
    raw = json.loads(rendered.config_text(BLUEPRINT))
    fake.machine_types["c2-standard-8"] = (8, 32768)
    config = config_for(tmp_path, fake, nodesets={**raw["nodesets"], "cpu": cpu})
    slurm = FakeSlurm(declared=False)
    power_saving(config, slurm).declare()
    assert slurm.changes() == [
        created_line(elastic(1, 2, 3, 4, 5, 6))
        + ["Gres=gpu:b200:8", "Topology=fabric:fabric:unplaced"],
        ["scontrol", "create", "NodeName=a4-cpu-e00001,a4-cpu-e00002", "State=CLOUD",
         "Features=cpu", "CPUs=8", f"RealMemory={int(32768 * 0.9)}", "SuspendTime=900"]]


def test_declare_as_a_process(fake, tmp_path):
    env = slurm_env(tmp_path)
    (tmp_path / "nodes.txt").write_text("\n".join(
        node_line(n, state="IDLE", reason="") for n in [*STATIC, *elastic(1, 2, 3, 4, 5)]))
    done = run_program(tmp_path, written(tmp_path, fake), "declare", env=env)
    assert done.returncode == 0, done.stderr
    assert scontrol_log(tmp_path) == [created_line(elastic(6)) + [
        "Gres=gpu:b200:8", "Topology=fabric:fabric:unplaced"]]


# --- resume --------------------------------------------------------------------------------

def test_resume_creates_each_nodes_vm_by_name_and_records_it_being_created(fake, tmp_path):
    config = config_for(tmp_path, fake)
    slurm = FakeSlurm()
    assert power_saving(config, slurm).resume(hostlist(1, 2)) == 0
    assert creates(fake) == [(GROUP, elastic(1, 2))]
    assert fake.groups[GROUP][1] == {**dict.fromkeys(HELD, "RUNNING"),
                                     **dict.fromkeys(elastic(1, 2), "RUNNING")}
    assert state_of(config).creating == dict.fromkeys(elastic(1, 2), T0)
    assert slurm.changes() == []


def test_resume_fills_the_groups_with_room_in_calls_of_at_most_request_vms_max(fake,
                                                                             tmp_path):
    """Groups of at most three VMs, calls of at most two: the first group (two VMs already)
    takes one, the second the other three, in two calls."""
    second = GROUP.replace("abc1234", "def5678")
    fake.groups[second] = (BASE, {})
    fake.groups["a4-a4-group-abc1234"] = ("a4-a4", {})  # another nodeset's group
    config = config_for(tmp_path, fake, group_vms_max=3, request_vms_max=2)
    assert power_saving(config, FakeSlurm()).resume(hostlist(1, 2, 3, 4)) == 0
    assert creates(fake) == [(GROUP, elastic(1)), (second, elastic(2, 3)),
                             (second, elastic(4))]


def test_resume_of_more_nodes_than_the_groups_have_room_for_backs_them_off(fake, tmp_path):
    config = config_for(tmp_path, fake, group_vms_max=3)
    slurm = FakeSlurm()
    assert power_saving(config, slurm).resume(hostlist(1, 2)) == 1
    reason = "cp:capacity: error: no group of nodeset a4spot has room for 1 more VM(s)"
    assert slurm.changes() == [power_down(elastic(1, 2), reason)]
    assert set(state_of(config).backoff) == set(elastic(1, 2))


def test_resume_of_a_node_whose_vm_exists_creates_only_the_others(fake, tmp_path):
    """Slurm resumes a node again (its first try timed out on Slurm's side): the VM the
    group already holds is not created twice, which the API would refuse."""
    fake.groups[GROUP][1][elastic(1)[0]] = "STAGING"
    config = config_for(tmp_path, fake)
    assert power_saving(config, FakeSlurm()).resume(hostlist(1, 2)) == 0
    assert creates(fake) == [(GROUP, elastic(2))]
    assert set(state_of(config).creating) == set(elastic(1, 2))


def test_resume_of_a_node_backing_off_powers_it_down_again_without_an_api_call(fake,
                                                                              tmp_path):
    config = config_for(tmp_path, fake)
    capacity.State(backoff={elastic(1)[0]: {"until": T0 + 300,
                                            "reason": stockout_reason()}}).save(
        config.state_file)
    slurm = FakeSlurm()
    assert power_saving(config, slurm).resume(hostlist(1)) == 0
    assert fake.calls == [] and fake.tokens == 0
    assert slurm.changes() == [power_down(elastic(1), stockout_reason())]
    assert state_of(config).backoff[elastic(1)[0]]["until"] == T0 + 300


def test_resume_of_a_node_backing_off_and_one_not_creates_only_the_other(fake, tmp_path):
    config = config_for(tmp_path, fake)
    capacity.State(backoff={elastic(1)[0]: {"until": T0 + 300,
                                            "reason": stockout_reason()}}).save(
        config.state_file)
    slurm = FakeSlurm()
    assert power_saving(config, slurm).resume(hostlist(1, 2)) == 0
    assert creates(fake) == [(GROUP, elastic(2))]
    assert slurm.changes() == [power_down(elastic(1), stockout_reason())]


def test_resume_of_a_node_that_is_not_elastic_is_logged_and_left_alone(fake, tmp_path):
    config = config_for(tmp_path, fake)
    slurm, log = FakeSlurm(), Journal()
    assert power_saving(config, slurm, log=log).resume(STATIC[0]) == 0
    assert fake.calls == [] and slurm.changes() == []
    assert log.severities("ERROR") == [f"{STATIC[0]} is no elastic node: left alone"]


def test_a_create_the_api_refuses_backs_the_nodes_off_with_its_error(fake, tmp_path):
    fake.failing.add("createInstances")
    config = config_for(tmp_path, fake)
    slurm = FakeSlurm()
    assert power_saving(config, slurm).resume(hostlist(1, 2)) == 1
    (update,) = slurm.changes()
    assert update[:4] == ["scontrol", "update", f"nodename={hostlist(1, 2)}",
                          "state=power_down_force"]
    assert update[4].startswith(f"reason=cp:capacity: error: POST instanceGroupManagers/"
                                f"{GROUP}/createInstances: HTTP 500")
    state = state_of(config)
    assert state.creating == {}
    assert state.backoff == dict.fromkeys(elastic(1, 2), {
        "until": T0 + config.backoff_s, "reason": update[4].removeprefix("reason=")})


def test_a_resume_records_the_nodes_being_created_before_the_api_is_called(fake, tmp_path):
    """The state file as it is when createInstances arrives: a create that the API takes
    but whose answer never comes still counts."""
    config = config_for(tmp_path, fake)
    seen = []

    def answer(call):
        seen.append(state_of(config).creating)
        return 200, b'{"kind": "compute#operation", "status": "DONE"}'

    fake.answers["createInstances"] = answer
    power_saving(config, FakeSlurm()).resume(hostlist(1, 2))
    assert seen == [dict.fromkeys(elastic(1, 2), T0)]


def test_a_create_that_happened_but_answered_late_is_undone_by_the_suspend_after_it(
        fake, tmp_path):
    """The API creates the VMs and answers after the client gave up: the nodes back off
    powered down, and the SuspendProgram Slurm then runs deletes the VMs that were made."""
    fake.delay["createInstances"] = 1.0
    config = config_for(tmp_path, fake, http_timeout_s=0.3)
    slurm = FakeSlurm()
    steps = power_saving(config, slurm)
    assert steps.resume(hostlist(1, 2)) == 1
    (update,) = slurm.changes()
    assert update[3] == "state=power_down_force" and "timed out" in update[4]
    assert set(fake.groups[GROUP][1]) == {*HELD, *elastic(1, 2)}
    assert steps.suspend(hostlist(1, 2)) == 0
    assert deletes(fake) == [(GROUP, elastic(1, 2))]
    assert set(fake.groups[GROUP][1]) == set(HELD)


def test_resume_as_a_process_creates_the_vms_and_records_them(fake, tmp_path):
    env = slurm_env(tmp_path)
    done = run_program(tmp_path, written(tmp_path, fake), "resume", hostlist(1, 2), env=env)
    assert done.returncode == 0, done.stderr
    assert creates(fake) == [(GROUP, elastic(1, 2))]
    assert set(json.loads((tmp_path / "state.json").read_text())["creating"]) == set(
        elastic(1, 2))
    assert scontrol_log(tmp_path) == []


def test_a_refused_create_as_a_process_exits_1_and_powers_the_nodes_down(fake, tmp_path):
    env = slurm_env(tmp_path)
    fake.failing.add("createInstances")
    done = run_program(tmp_path, written(tmp_path, fake), "resume", hostlist(1), env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    ((*command, reason),) = scontrol_log(tmp_path)
    assert command == ["scontrol", "update", f"nodename={hostlist(1)}",
                       "state=power_down_force"]
    assert reason.startswith("reason=cp:capacity: error: ")


# --- suspend and resume-fail ---------------------------------------------------------------

def test_suspend_deletes_only_the_vms_the_groups_hold_and_forgets_their_creates(fake,
                                                                              tmp_path):
    """Slurm also powers down a node it has just been given: a name without a VM is
    skipped; one VM in each of two groups is deleted through its own group."""
    second = GROUP.replace("abc1234", "def5678")
    fake.groups[GROUP][1][elastic(1)[0]] = "RUNNING"
    fake.groups[second] = (BASE, {elastic(3)[0]: "RUNNING"})
    config = config_for(tmp_path, fake)
    capacity.State(creating=dict.fromkeys(elastic(1, 2, 3), T0)).save(config.state_file)
    assert power_saving(config, FakeSlurm()).suspend(hostlist(1, 2, 3)) == 0
    assert deletes(fake) == [(GROUP, elastic(1)), (second, elastic(3))]
    assert fake.verbs("deleteInstances")[0].body["skipInstancesOnValidationError"] is True
    assert set(fake.groups[GROUP][1]) == set(HELD) and fake.groups[second][1] == {}
    assert state_of(config).creating == {}


def test_suspend_of_nodes_without_vms_deletes_nothing(fake, tmp_path):
    config = config_for(tmp_path, fake)
    slurm = FakeSlurm()
    assert power_saving(config, slurm).suspend(hostlist(1, 2)) == 0
    assert deletes(fake) == [] and slurm.changes() == []


def test_a_suspend_whose_delete_fails_exits_1_and_says_so(fake, tmp_path):
    fake.groups[GROUP][1][elastic(1)[0]] = "RUNNING"
    fake.failing.add("deleteInstances")
    config = config_for(tmp_path, fake)
    log = Journal()
    assert power_saving(config, FakeSlurm(), log=log).suspend(hostlist(1)) == 1
    (error,) = log.severities("ERROR")
    assert error.startswith(f"deleting the VMs of {hostlist(1)} failed: ")


def test_resume_fail_deletes_the_vm_and_holds_the_node_down_for_the_back_off(fake,
                                                                            tmp_path):
    """ResumeTimeout passed without the node registering: its VM goes, and the node stays
    down with the reason until backoff_s has passed."""
    fake.groups[GROUP][1][elastic(1)[0]] = ""  # still being created
    config = config_for(tmp_path, fake)
    capacity.State(creating={elastic(1)[0]: T0 - 600}).save(config.state_file)
    slurm = FakeSlurm()
    assert power_saving(config, slurm).resume_fail(hostlist(1)) == 0
    reason = "cp:capacity: timeout: no VM registered within ResumeTimeout"
    assert deletes(fake) == [(GROUP, elastic(1))]
    assert slurm.changes() == [["scontrol", "update", f"nodename={hostlist(1)}",
                                "state=down", f"reason={reason}"]]
    state = state_of(config)
    assert state.creating == {}
    assert state.backoff == {elastic(1)[0]: {"until": T0 + 600, "reason": reason}}


# --- watch ---------------------------------------------------------------------------------

def test_a_stockout_is_stopped_and_its_nodes_powered_down_with_the_reason(fake, tmp_path):
    """The group retries a stockout for ever; watch deletes the VMs and powers the nodes
    down at once (the job is requeued) with a reason sinfo -R shows."""
    config = config_for(tmp_path, fake)
    slurm = FakeSlurm(powering_up(1, 2))
    steps = power_saving(config, slurm)
    fake.create_errors = STOCKOUT
    steps.resume(hostlist(1, 2))
    steps.watch()
    assert deletes(fake) == [(GROUP, elastic(1, 2))]
    assert set(fake.groups[GROUP][1]) == set(HELD)
    assert slurm.changes() == [power_down(elastic(1, 2), stockout_reason())]
    state = state_of(config)
    assert state.creating == {}
    assert state.backoff == dict.fromkeys(elastic(1, 2), {
        "until": T0 + config.backoff_s, "reason": stockout_reason()})


def test_a_long_create_error_is_cut_to_a_reason_sinfo_shows_on_one_line(fake, tmp_path):
    config = config_for(tmp_path, fake)
    slurm = FakeSlurm(powering_up(1))
    steps = power_saving(config, slurm)
    fake.create_errors = (STOCKOUT[0], "no room;\n" + "x" * 400)
    steps.resume(hostlist(1))
    steps.watch()
    (update,) = slurm.changes()
    reason = update[4].removeprefix("reason=")
    assert len(reason) == common.REASON_MAX and reason.endswith("...")
    assert reason.startswith(f"cp:capacity: stockout: {STOCKOUT[0]}: no room;\\nxxx")
    assert state_of(config).backoff[elastic(1)[0]]["reason"] == reason


def test_creates_that_failed_for_different_reasons_are_powered_down_each_with_its_own(
        fake, tmp_path):
    config = config_for(tmp_path, fake)
    slurm = FakeSlurm(powering_up(1, 2))
    steps = power_saving(config, slurm)
    fake.create_errors = STOCKOUT
    steps.resume(hostlist(1))
    fake.create_errors = QUOTA
    steps.resume(hostlist(2))
    steps.watch()
    assert sorted(deletes(fake)) == [(GROUP, elastic(1)), (GROUP, elastic(2))]
    assert sorted(slurm.changes()) == sorted([
        power_down(elastic(1), stockout_reason()),
        power_down(elastic(2), stockout_reason(*QUOTA, kind="quota"))])


def test_a_created_vm_leaves_the_creates_and_nothing_is_done_to_it(fake, tmp_path):
    config = config_for(tmp_path, fake)
    slurm = FakeSlurm()
    steps = power_saving(config, slurm)
    steps.resume(hostlist(1))
    steps.watch()
    assert state_of(config).creating == {}
    assert deletes(fake) == [] and slurm.changes() == []


def test_a_create_that_failed_once_and_then_succeeded_is_left_alone(fake, tmp_path):
    """The group's own retry got the VM before watch looked: no stop, no back-off."""
    config = config_for(tmp_path, fake)
    slurm = FakeSlurm()
    steps = power_saving(config, slurm)
    fake.create_errors = STOCKOUT
    steps.resume(hostlist(1))
    fake.create_errors = None
    fake.retry_creates()
    steps.watch()
    assert deletes(fake) == [] and slurm.changes() == []
    assert state_of(config) == capacity.State()


def test_a_vm_still_being_created_stays_watched_until_its_create_fails(fake, tmp_path):
    """A group takes a create and tries it a while later: until then listManagedInstances
    shows the VM CREATING with no status and no error. That is not a created VM: when the
    try fails with a stockout, the next pass must still stop it and back the node off."""
    config = config_for(tmp_path, fake)
    fake.groups[GROUP][1][elastic(1)[0]] = ""  # taken, not yet tried
    capacity.State(creating={elastic(1)[0]: T0}).save(config.state_file)
    slurm = FakeSlurm(powering_up(1))
    steps = power_saving(config, slurm)
    steps.watch()
    assert state_of(config).creating == {elastic(1)[0]: T0}
    fake.failed[elastic(1)[0]] = STOCKOUT  # the try failed
    steps.watch()
    assert deletes(fake) == [(GROUP, elastic(1))]
    assert slurm.changes() == [power_down(elastic(1), stockout_reason())]


def test_a_pass_that_cannot_list_the_groups_keeps_the_creates_for_the_next(fake, tmp_path):
    config = config_for(tmp_path, fake)
    capacity.State(creating={elastic(1)[0]: T0}).save(config.state_file)
    fake.failing.add("listManagedInstances")
    log = Journal()
    power_saving(config, FakeSlurm(), log=log).watch()
    assert state_of(config).creating == {elastic(1)[0]: T0}
    assert [m for m in log.severities("ERROR")
            if m.startswith("cannot list the VMs of nodeset a4spot")]


def test_a_vm_left_by_a_failed_suspend_is_deleted_by_the_next_pass(fake, tmp_path):
    """Slurm counts a node powered down once SuspendTimeout passes, whether the delete
    worked or not: the VM would bill for ever unused."""
    config = config_for(tmp_path, fake)
    fake.groups[GROUP][1][elastic(2)[0]] = "RUNNING"
    fake.failing.add("deleteInstances")
    slurm = FakeSlurm()  # e00002 is IDLE+CLOUD+POWERED_DOWN
    steps = power_saving(config, slurm)
    assert steps.suspend(hostlist(2)) == 1
    fake.failing.clear()
    steps.watch()
    assert deletes(fake)[-1] == (GROUP, elastic(2))
    assert elastic(2)[0] not in fake.groups[GROUP][1]


def test_the_vms_of_nodes_powering_up_or_being_created_and_others_vms_are_kept(fake,
                                                                               tmp_path):
    config = config_for(tmp_path, fake)
    for vm in elastic(1, 2):
        fake.groups[GROUP][1][vm] = "RUNNING"
    capacity.State(creating={elastic(2)[0]: T0}).save(config.state_file)
    slurm = FakeSlurm(powering_up(1))  # e00002 powered down, its create recorded
    power_saving(config, slurm).watch()
    assert deletes(fake) == []
    assert set(fake.groups[GROUP][1]) == {*HELD, *elastic(1, 2)}


def test_a_pass_lists_each_group_once_even_when_it_stops_creates(fake, tmp_path):
    """The loop's cost at any size: one listing of each group a pass (tests/benchmarks/
    bench_capacity.py times it at 4,000 VMs)."""
    config = config_for(tmp_path, fake)
    slurm = FakeSlurm(powering_up(1, 2))
    steps = power_saving(config, slurm)
    fake.create_errors = STOCKOUT
    steps.resume(hostlist(1, 2))
    fake.calls.clear()
    steps.watch()
    assert deletes(fake) == [(GROUP, elastic(1, 2))]
    assert [c.path.split("/")[-2] for c in fake.verbs("listManagedInstances")] == [GROUP]


def backing_off(config: capacity.Config, reason: str = "") -> None:
    capacity.State(backoff={elastic(1)[0]: {"until": T0 + 600,
                                            "reason": reason or stockout_reason()}}).save(
        config.state_file)


@pytest.mark.parametrize(("shown", "held_down"), [
    ("IDLE+CLOUD+POWERED_DOWN", True),
    ("IDLE+CLOUD+POWERING_DOWN", False),    # not yet: Slurm is still suspending it
    ("DOWN+CLOUD+POWERED_DOWN", False),     # already down
])
def test_a_node_backing_off_once_powered_down_is_set_down_with_its_reason(
        fake, tmp_path, shown, held_down):
    """Slurm returns a powered-down node to ``idle~``; a node backing off must stay out of
    service (DOWN, its reason in sinfo -R) until backoff_s has passed."""
    config = config_for(tmp_path, fake)
    backing_off(config)
    slurm = FakeSlurm([node_line(elastic(1)[0], state=shown, reason="")])
    power_saving(config, slurm, now=[T0 + 60]).watch()
    assert slurm.changes() == ([["scontrol", "update", f"nodename={hostlist(1)}",
                                 "state=down", f"reason={stockout_reason()}"]]
                               if held_down else [])
    assert elastic(1)[0] in state_of(config).backoff


def test_a_node_returns_to_service_exactly_at_backoff_s(fake, tmp_path):
    config = config_for(tmp_path, fake)
    backing_off(config)
    slurm = FakeSlurm([node_line(elastic(1)[0], state="DOWN+CLOUD+POWERED_DOWN",
                                 reason=stockout_reason())])
    power_saving(config, slurm, now=[T0 + 599]).watch()
    assert slurm.changes() == [] and elastic(1)[0] in state_of(config).backoff
    power_saving(config, slurm, now=[T0 + 600]).watch()
    assert slurm.changes() == [["scontrol", "update", f"nodename={hostlist(1)}",
                                "state=resume"]]
    assert state_of(config) == capacity.State()


def test_a_stockout_backs_off_then_the_node_is_tried_again(fake, tmp_path):
    """The whole round: resume, stockout, held down, back after backoff_s, resumed and
    created once the zone has room."""
    config = config_for(tmp_path, fake)
    slurm, now = FakeSlurm(powering_up(1)), [T0]
    steps = power_saving(config, slurm, now)
    fake.create_errors = STOCKOUT
    steps.resume(hostlist(1))
    steps.watch()
    slurm.lines = FakeSlurm([node_line(elastic(1)[0], state="IDLE+CLOUD+POWERED_DOWN",
                                       reason="")]).lines
    now[0] = T0 + 30
    steps.watch()
    now[0] = T0 + config.backoff_s
    steps.watch()
    assert [c[3] for c in slurm.changes()] == ["state=power_down_force", "state=down",
                                               "state=resume"]
    fake.create_errors = None
    assert steps.resume(hostlist(1)) == 0
    assert creates(fake) == [(GROUP, elastic(1)), (GROUP, elastic(1))]
    assert fake.groups[GROUP][1][elastic(1)[0]] == "RUNNING"


def test_a_node_slurm_no_longer_knows_leaves_the_back_off(fake, tmp_path):
    config = config_for(tmp_path, fake)
    backing_off(config)
    slurm = FakeSlurm([node_line(STATIC[0], state="IDLE", reason="")], declared=False)
    power_saving(config, slurm, now=[T0 + 60]).watch()
    # Gone from Slurm (deleted by hand): declared again, powered down, and not held.
    assert state_of(config) == capacity.State()
    assert [c[:2] for c in slurm.changes()] == [["scontrol", "create"]]


# --- watch as the service runs it ----------------------------------------------------------

def slurm_env(tmp_path: Path) -> dict[str, str]:
    """fake_scontrol's environment, with ``scontrol show hostnames`` expanding a comma
    list as Slurm does."""
    env = fake_scontrol(tmp_path)
    folder = tmp_path / "hostnames"
    folder.mkdir(exist_ok=True)
    script = folder / "scontrol"
    script.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        "if sys.argv[1:3] == ['show', 'hostnames']:\n"
        "    print('\\n'.join(sys.argv[3].split(',')))\n"
        "else:\n"
        f"    os.execv({str(tmp_path / 'bin' / 'scontrol')!r}, sys.argv)\n")
    script.chmod(0o755)
    return {**env, "PATH": f"{folder}:{env['PATH']}"}


def test_watch_once_as_a_process_stops_a_stockout_and_powers_the_node_down(fake, tmp_path):
    env = slurm_env(tmp_path)
    config = written(tmp_path, fake)
    fake.create_errors = STOCKOUT
    assert run_program(tmp_path, config, "resume", hostlist(1), env=env).returncode == 0
    (tmp_path / "nodes.txt").write_text("\n".join(
        FakeSlurm([node_line(elastic(1)[0], state="IDLE+CLOUD", reason="")]).lines))
    done = run_program(tmp_path, config, "watch", "--once", env=env)
    assert done.returncode == 0, done.stderr
    assert deletes(fake) == [(GROUP, elastic(1))]
    assert scontrol_log(tmp_path) == [power_down(elastic(1), stockout_reason())]
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["creating"] == {} and list(state["backoff"]) == elastic(1)
    assert state["backoff"][elastic(1)[0]]["reason"] == stockout_reason()


def test_watch_once_when_slurm_does_not_answer_exits_1_in_one_line(fake, tmp_path):
    env = slurm_env(tmp_path)
    (tmp_path / "scontrol.fails").write_text("slurm_load_node error: Unable to contact "
                                             "slurm controller (connect failure)")
    done = run_program(tmp_path, written(tmp_path, fake), "watch", "--once", env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert "pass skipped: scontrol show node -o failed (exit 1): slurm_load_node error" in line


# --- Flex-start: a resize request per resume ---------------------------------------------

FLEX_RUN_S = 604_800
QUOTA_FAILED = ("QUOTA_EXCEEDED", "Quota 'PREEMPTIBLE_NVIDIA_B200_GPUS' exceeded. Limit: 0.0 "
                                  "in region us-central1.")


def flex_config(tmp_path: Path, fake: FakeCompute) -> capacity.Config:
    """The a4spot nodeset as a flex-start one: its elastic VMs come through resize requests."""
    path = written(tmp_path, fake)
    raw = json.loads(path.read_text())
    raw["nodesets"]["a4spot"]["run_duration_s"] = FLEX_RUN_S
    path.write_text(json.dumps(raw))
    return capacity.Config.load(str(path))


def requests_made(fake: FakeCompute) -> list[tuple[str, list[str], str]]:
    """Each resize request inserted: its group, the VMs it names and its run duration."""
    return [(c.path.split("/")[-2], [i["name"] for i in c.body["instances"]],
             c.body["requestedRunDuration"]["seconds"])
            for c in fake.calls if c.method == "POST" and c.verb == "resizeRequests"]


def test_a_flex_start_resume_asks_for_all_its_nodes_in_one_resize_request(tmp_path, fake):
    config = flex_config(tmp_path, fake)
    slurm = FakeSlurm(powering_up(1, 2, 3))
    assert power_saving(config, slurm).resume(hostlist(1, 2, 3)) == 0
    # One request names the three VMs (all or nothing, as a job of three nodes needs), for
    # the longest run; no createInstances, which a flex-start VM cannot come from.
    assert requests_made(fake) == [(GROUP, elastic(1, 2, 3), str(FLEX_RUN_S))]
    assert not creates(fake)
    (name,) = fake.resize_requests[GROUP]
    assert name.startswith("cp-resume-") and len(name) <= 63
    assert state_of(config).requests == {name: {"group": GROUP, "nodes": elastic(1, 2, 3)}}
    # Capacity was there: the VMs exist; the next pass deletes the finished request and the
    # nodes are created, left for their slurmd to register.
    assert set(elastic(1, 2, 3)) <= set(fake.groups[GROUP][1])
    power_saving(config, slurm).watch()
    assert fake.resize_requests[GROUP] == {}
    assert state_of(config).requests == {}
    assert state_of(config).creating == {}
    assert slurm.changes() == []


def test_a_waiting_flex_start_request_is_left_to_wait_until_capacity_comes(tmp_path, fake):
    fake.flex_capacity = False
    config = flex_config(tmp_path, fake)
    slurm = FakeSlurm(powering_up(1, 2))
    power_saving(config, slurm).resume(hostlist(1, 2))
    for _ in range(3):  # no stockout to stop: Dynamic Workload Scheduler is looking
        power_saving(config, slurm).watch()
    (name,) = fake.resize_requests[GROUP]
    assert fake.resize_requests[GROUP][name]["state"] == "ACCEPTED"
    assert not fake.verbs("cancel") and not deletes(fake) and slurm.changes() == []
    assert set(state_of(config).creating) == set(elastic(1, 2))
    fake.provide_flex()
    power_saving(config, slurm).watch()
    assert fake.resize_requests[GROUP] == {} and state_of(config).creating == {}
    assert set(elastic(1, 2)) <= set(fake.groups[GROUP][1])


def test_a_failed_flex_start_request_backs_its_nodes_off_with_its_error(tmp_path, fake):
    fake.request_error = QUOTA_FAILED
    config = flex_config(tmp_path, fake)
    slurm = FakeSlurm(powering_up(1, 2))
    log = Journal()
    power_saving(config, slurm).resume(hostlist(1, 2))
    power_saving(config, slurm, log=log).watch()
    reason = stockout_reason(*QUOTA_FAILED, kind="quota")
    assert power_down(elastic(1, 2), reason) in slurm.changes()
    assert set(state_of(config).backoff) == set(elastic(1, 2))
    assert fake.resize_requests[GROUP] == {}  # the failed request is deleted
    # Back in service after the back-off, for the next try.
    later = [T0 + config.backoff_s + 1]
    power_saving(config, FakeSlurm(), now=later).watch()
    assert state_of(config).backoff == {}


def test_a_resume_fail_cancels_the_request_that_still_waits(tmp_path, fake):
    fake.flex_capacity = False
    config = flex_config(tmp_path, fake)
    slurm = FakeSlurm(powering_up(1, 2))
    power_saving(config, slurm).resume(hostlist(1, 2))
    (name,) = fake.resize_requests[GROUP]
    power_saving(config, slurm).resume_fail(hostlist(1, 2))
    assert [c.path.split("/")[-2] for c in fake.verbs("cancel")] == [name]
    assert fake.resize_requests[GROUP][name]["state"] == "CANCELLED"
    assert state_of(config).requests == {}
    assert set(state_of(config).backoff) == set(elastic(1, 2))
    # Capacity found later makes nothing: the cancelled request is deleted next pass.
    fake.provide_flex()
    power_saving(config, slurm).watch()
    assert fake.resize_requests[GROUP] == {}
    assert not set(elastic(1, 2)) & set(fake.groups[GROUP][1])


def test_a_waiting_request_whose_nodes_gave_up_is_cancelled_and_pulumis_is_never_touched(
        tmp_path, fake):
    fake.flex_capacity = False
    # Pulumi's request for the static nodes, and one of power saving's that no state knows
    # (its state file was lost).
    fake.resize_requests[GROUP] = {
        "ns-resize-a1b2c3": {"state": "ACCEPTED", "error": None, "instances": [],
                             "seconds": str(FLEX_RUN_S)},
        "cp-resume-999-0123456789abcdef": {"state": "ACCEPTED", "error": None,
                                           "instances": elastic(4), "seconds": "1"}}
    config = flex_config(tmp_path, fake)
    power_saving(config, FakeSlurm()).watch()
    assert [c.path.split("/")[-2] for c in fake.verbs("cancel")] == [
        "cp-resume-999-0123456789abcdef"]
    assert fake.resize_requests[GROUP]["ns-resize-a1b2c3"]["state"] == "ACCEPTED"
    power_saving(config, FakeSlurm()).watch()
    assert list(fake.resize_requests[GROUP]) == ["ns-resize-a1b2c3"]


def test_a_refused_resize_request_is_forgotten_and_its_nodes_back_off(tmp_path, fake):
    fake.failing.add("resizeRequests")
    config = flex_config(tmp_path, fake)
    slurm = FakeSlurm(powering_up(1))
    assert power_saving(config, slurm).resume(hostlist(1)) == 1
    assert state_of(config).requests == {}
    assert list(state_of(config).backoff) == elastic(1)
    assert slurm.changes()[-1][3] == "state=power_down_force"


def test_a_flex_start_nodeset_renders_its_run_duration_and_others_none():
    spot = BLUEPRINT.slurm.nodesets[1]
    nodesets = [BLUEPRINT.slurm.nodesets[0], spot.model_copy(update={"provisioning": "flex-start"})]
    flex = BLUEPRINT.model_copy(update={"slurm": BLUEPRINT.slurm.model_copy(
        update={"nodesets": nodesets})})
    assert rendered.capacity_config(flex).nodesets["a4spot"].run_duration_s == FLEX_RUN_S
    assert rendered.capacity_config(BLUEPRINT).nodesets["a4spot"].run_duration_s == 0


def test_a_reservation_nodeset_is_elastic_only_when_asked():
    # a4's nodeset a4 consumes a reservation: its max_count stays a ceiling unless
    # power_saving is set, and then its nodes above count are created (in the reservation,
    # by its template's affinity) and deleted like a spot nodeset's.
    reserved = BLUEPRINT.slurm.nodesets[0].model_copy(update={"max_count": 6})
    assert reserved.provisioning == "reservation" and not reserved.elastic
    asked = reserved.model_copy(update={"power_saving": True})
    blueprint = BLUEPRINT.model_copy(update={"slurm": BLUEPRINT.slurm.model_copy(
        update={"nodesets": [asked, BLUEPRINT.slurm.nodesets[1]]})})
    config = rendered.capacity_config(blueprint)
    assert list(config.nodesets) == ["a4", "a4spot"]
    assert config.nodesets["a4"].names() == ["a4-a4-e00001", "a4-a4-e00002"]
    assert config.nodesets["a4"].run_duration_s == 0
