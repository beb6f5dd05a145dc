"""The wizard's pure half: what it offers, how it checks answers, the blueprint it writes."""

from dataclasses import replace

import pytest
from ruamel.yaml import YAML

from clusterprint.blueprint.validate import check_text
from clusterprint.cli import wizard
from clusterprint.cli.wizard import Answers
from clusterprint.facts import catalog, machines

GPU_RESERVED = Answers(name="train", project="my-project", machine_type="a3-megagpu-8g",
                       count=4, provisioning="reservation", reservation="a3mega-res",
                       zone="us-central1-a", lustre=True, bucket="my-project-train-ckpt")
CPU_SPOT = Answers(name="play", project="my-project", machine_type="n2-standard-4", count=2,
                   provisioning="spot", reservation=None, zone="europe-west4-b",
                   home_tier="BASIC_HDD", home_size_gib=1536)


def written(answers: Answers) -> tuple[str, dict]:
    """The blueprint text for ``answers`` and its data, after asserting it validates clean."""
    text = wizard.blueprint_text(answers, "bp.yaml", "../schemas/blueprint.schema.json")
    checked = check_text("bp.yaml", text)
    assert checked.ok and checked.lines() == [], checked.lines()
    return text, YAML(typ="safe").load(text)


@pytest.mark.parametrize("offer", wizard.OFFERS, ids=lambda o: o.machine_type)
def test_every_offered_machine_type_makes_a_clean_blueprint_in_every_provisioning(offer):
    zone = machines.machine_zones(offer.machine_type)[0]
    for provisioning in ("on-demand", "spot", "flex-start", "reservation"):
        answers = replace(CPU_SPOT, machine_type=offer.machine_type, zone=zone,
                          provisioning=provisioning,
                          reservation="res" if provisioning == "reservation" else None)
        _, data = written(answers)
        assert data["slurm"]["nodesets"][0]["machine_type"] == offer.machine_type
        assert data["slurm"]["nodesets"][0]["provisioning"] == provisioning


@pytest.mark.parametrize("offer", wizard.OFFERS, ids=lambda o: o.machine_type)
def test_every_offered_zone_has_the_controller_and_login_types(offer):
    for zone in machines.machine_zones(offer.machine_type):
        controller = wizard.controller_machine_type(zone)
        assert zone in machines.machine_zones(controller), (zone, controller)
        assert zone in machines.machine_zones(wizard.LOGIN_MACHINE_TYPE), zone


def test_gpu_types_left_out_are_exactly_those_without_zones():
    """A GPU family catalogued later is offered once its zones are in the table."""
    left_out = set(machines.GPU_MACHINES) - set(wizard.OFFERED)
    assert left_out == {"a4x-highgpu-4g", *(t for t in machines.GPU_MACHINES
                                            if t.startswith("g2-"))}
    assert all(machines.machine_zones(t) == () for t in left_out)


@pytest.mark.parametrize("tier", catalog.FILESTORE_TIERS)
def test_every_filestore_tier_at_its_least_size_is_clean(tier):
    written(replace(CPU_SPOT, home_tier=tier,
                    home_size_gib=catalog.FILESTORE_TIERS[tier][0].minimum))


@pytest.mark.parametrize("tier", catalog.LUSTRE_TIERS)
def test_lustre_home_at_every_tier_is_one_instance_at_home(tier):
    _, data = written(replace(CPU_SPOT, home="lustre", lustre=True, lustre_tier=tier,
                              lustre_size_gib=catalog.LUSTRE_TIERS[tier].minimum))
    assert data["storage"]["home"] == {"lustre": "shared"}
    assert [x["performance_tier"] for x in data["storage"]["lustre"]] == [tier]
    assert "mount" not in data["storage"]["lustre"][0]


def test_gpu_reservation_blueprint_holds_every_answer_and_says_what_to_change():
    text, data = written(GPU_RESERVED)
    assert text.startswith("# yaml-language-server: $schema=../schemas/blueprint.schema.json\n")
    assert (data["name"], data["project"], data["region"], data["zone"]) == (
        "train", "my-project", "us-central1", "us-central1-a")
    nodeset = data["slurm"]["nodesets"][0]
    assert (nodeset["count"], nodeset["reservation"], nodeset["placement"]) == (
        4, "a3mega-res", "none")
    assert data["storage"]["lustre"][0]["mount"] == "/lustre"
    assert data["storage"]["buckets"] == [{"bucket": "my-project-train-ckpt",
                                           "mount": "/gcs/my-project-train-ckpt",
                                           "create": True}]
    assert "CHANGE BEFORE USE: `project`, `slurm.nodesets[0].reservation`," in text
    assert "project: my-project            # CHANGE: your project id\n" in text
    assert "clusterprint validate bp.yaml" in text
    assert all(len(line) <= 100 for line in text.splitlines())


def test_cpu_blueprint_turns_gpu_checks_off_and_has_no_lustre():
    _, data = written(CPU_SPOT)
    assert data["slurm"]["health_checks"] == {"gpu": "off"}
    assert "lustre" not in data["storage"]
    assert data["storage"]["home"]["filestore"] == {"tier": "BASIC_HDD", "capacity_gib": 1536}


def test_controller_falls_back_to_n2_where_the_zone_has_no_c2():
    _, data = written(replace(CPU_SPOT, zone="africa-south1-a"))
    assert data["slurm"]["controller"]["machine_type"] == "n2-standard-8"
    assert wizard.controller_machine_type("us-central1-a") == "c2-standard-8"


@pytest.mark.parametrize("name", ["null", "true", "no"])
def test_a_name_yaml_would_read_as_another_type_is_quoted(name):
    text, data = written(replace(CPU_SPOT, name=name))
    assert data["name"] == name


@pytest.mark.parametrize(("machine_type", "region", "zone", "problem"), [
    ("a3-megagpu-8g", None, "us-central1-a", None),
    ("a3-megagpu-8g", None, "us-central1-f",
     "a3-megagpu-8g does not exist in zone us-central1-f; its zones: asia-east1-c, "),
    ("a3-ultragpu-8g", "us-central1", "europe-west1-b",
     "zone europe-west1-b is not in region us-central1; a3-ultragpu-8g in us-central1: "
     "us-central1-b"),
    ("no-such-type", None, "us-central1-f", None),  # the machine type's own refusal says it
])
def test_zone_problem(machine_type, region, zone, problem):
    found = wizard.zone_problem(machine_type, region)(zone)
    assert found is None if problem is None else found.startswith(problem)


def test_region_problem_lists_the_regions_of_the_type():
    assert wizard.region_problem("a3-ultragpu-8g")("us-central1") is None
    assert wizard.region_problem("a3-ultragpu-8g")("asia-east1") == (
        "a3-ultragpu-8g is in no zone of asia-east1; its regions: asia-south1, asia-south2, "
        "europe-west1, europe-west4, us-central1, us-east4, us-east5, us-south1, us-west1")


@pytest.mark.parametrize(("check", "text", "problem"), [
    (wizard.count_problem, "0", "'0' is not a node count from 1 to 16384"),
    (wizard.count_problem, "16384", None),
    (wizard.count_problem, "two", "'two' is not a node count from 1 to 16384"),
    (wizard.filestore_size_problem("ZONAL"), "1000",
     "1000 is below 1024, the minimum of Filestore tier ZONAL (try 1024)"),
    (wizard.filestore_size_problem("ZONAL"), "1280", None),
    (wizard.lustre_size_problem(500), "20000",
     "20000 is not a multiple of 18000, the step of performance tier 500 (try 18000 or 36000)"),
    (wizard.lustre_size_problem(500), "much", "'much' is not a size in GiB"),
    (wizard.name_problem, "My-Cluster", "'My-Cluster' is not a cluster name: 2 to 20 "
     "lowercase letters, digits and hyphens, starting with a letter and not ending with a "
     "hyphen"),
    (wizard.project_problem, "my-project", None),
    (wizard.reservation_problem, "projects/my-project/reservations/r1", None),
    (wizard.bucket_problem, "B", "'B' is not a bucket name: 3 to 63 lowercase letters, "
     "digits, dots, hyphens and underscores"),
])
def test_answer_checks_say_what_is_wrong(check, text, problem):
    assert check(text) == problem


def test_machine_problem_lists_the_offered_types():
    assert wizard.machine_problem("a3-megagpu-8g") is None
    assert wizard.machine_problem("a4x-highgpu-4g") == (
        "'a4x-highgpu-4g' is not a machine type clusterprint new offers; choose one of "
        + ", ".join(o.machine_type for o in wizard.OFFERS))


class Scripted:
    """An Ask that answers from a table and records the questions, in order."""

    def __init__(self, **answers):
        self.answers = answers
        self.keys: list[str] = []

    def given(self, key):
        return False

    def _answer(self, key, default):
        self.keys.append(key)
        return self.answers.get(key, default)

    def text(self, key, message, check, default=None):
        value = self._answer(key, default)
        assert check(value) is None, (key, value)
        return value

    def choice(self, key, message, choices, default=None, check=None):
        value = self._answer(key, default)
        assert value in [v for v, _ in choices], (key, value, choices)
        return value

    def confirm(self, key, message, default):
        return self._answer(key, default)


BASE = {"name": "demo", "project": "my-project", "family": "A3 Ultra",
        "machine_type": "a3-ultragpu-8g", "count": "2", "provisioning": "spot",
        "region": "europe-west1", "zone": "europe-west1-b"}


def test_gather_asks_filestore_questions_then_scratch_then_bucket():
    ask = Scripted(**BASE, lustre=True, use_bucket=True)
    answers = ask_and_check(ask)
    assert ask.keys == ["name", "project", "family", "machine_type", "count", "provisioning",
                        "region", "zone", "home", "home_tier", "home_size", "lustre",
                        "lustre_tier", "lustre_size", "use_bucket", "bucket"]
    assert (answers.home_size_gib, answers.lustre_size_gib, answers.bucket) == (
        1024, 18000, "my-project-demo-data")


def test_gather_with_lustre_home_asks_no_filestore_or_scratch_question():
    ask = Scripted(**{**BASE, "home": "lustre", "provisioning": "reservation",
                      "reservation": "r"})
    answers = ask_and_check(ask)
    assert ask.keys == ["name", "project", "family", "machine_type", "count", "provisioning",
                        "reservation", "region", "zone", "home", "lustre_tier", "lustre_size",
                        "use_bucket"]
    assert (answers.lustre, answers.reservation) == (True, "r")


def ask_and_check(ask: Scripted) -> Answers:
    answers = wizard.gather(ask)
    written(answers)
    return answers
