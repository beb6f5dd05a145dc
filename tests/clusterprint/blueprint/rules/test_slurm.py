"""slurm.* rules: provisioning, node counts, machine types, boot disks, placement, time limits."""

import pytest

from tests.support.blueprint_texts import Here, table_tests

NS = "slurm.nodesets[0]"
RESERVATION = "projects/my-project/reservations/res"
ULTRA = {f"{NS}.machine_type": "a3-ultragpu-8g"}

PART = "slurm.partitions[0]"
LONGEST = "35791393"  # minutes: the last one Slurm keeps (tests/slurm/test_slurm_limits.py)

RESERVED = {f"{NS}.provisioning": "reservation", f"{NS}.reservation": RESERVATION}
BOUND = {**RESERVED, f"{NS}.machine_type": "a4-highgpu-8g", f"{NS}.reservation_bound": True}

ACCT = "slurm.accounting"
SQL = {"instance": "my-project:us-central1:acct"}

REFUSED = [
    pytest.param("slurm.accounting", f"{ACCT}.cloud_sql",
                 {f"{ACCT}.enabled": False, f"{ACCT}.cloud_sql": Here(SQL)}, "error", 1,
                 id="cloud-sql-with-accounting-off"),
    pytest.param("slurm.accounting", f"{ACCT}.cloud_sql.instance",
                 {f"{ACCT}.cloud_sql.instance": Here("my-project:europe-west4:acct")},
                 "warning", 1, id="cloud-sql-in-another-region"),
    pytest.param("slurm.reservation-placement", f"{NS}.placement",
                 {**RESERVED, f"{NS}.placement": Here("compact")}, "error", 1,
                 id="compact-placement-on-a-reservation"),
    pytest.param("slurm.reservation-placement", "slurm.nodesets[1].placement",
                 {**RESERVED, f"{NS}.placement": "compact",
                  "slurm.nodesets[1]": {"name": "more", "count": 2, "machine_type": "n2-standard-4",
                                        "provisioning": "reservation", "reservation": "res2",
                                        "placement": Here("compact")},
                  "slurm.partitions[0].nodesets": ["cpu", "more"]}, "error", 2,
                 id="two-reserved-nodesets-with-compact-placement"),
    pytest.param("slurm.reservation-bound", f"{NS}.reservation_bound",
                 {f"{NS}.provisioning": "flex-start", f"{NS}.reservation_bound": Here(True)},
                 "error", 1, id="reservation-bound-without-a-reservation"),
    pytest.param("slurm.reservation-bound", f"{NS}.reservation_bound",
                 {f"{NS}.reservation_bound": Here(True)}, "error", 1,
                 id="reservation-bound-on-demand"),
    pytest.param("slurm.reservation-bound", f"{NS}.machine_type",
                 {**BOUND, f"{NS}.machine_type": Here("a3-highgpu-4g")}, "warning", 1,
                 id="reservation-bound-on-an-undocumented-type"),
    pytest.param("slurm.reservation", f"{NS}.provisioning",
                 {f"{NS}.provisioning": Here("reservation")}, "error", 1, id="no-reservation"),
    *[pytest.param("slurm.reservation", f"{NS}.reservation",
                   {f"{NS}.provisioning": kind, f"{NS}.reservation": Here(RESERVATION)}, "error", 1,
                   id=f"reservation-with-{kind}")
      for kind in ("on-demand", "spot", "flex-start")],
    pytest.param("slurm.reservation", f"{NS}.reservation",
                 {f"{NS}.reservation": Here("res")}, "error", 1,
                 id="reservation-default-on-demand"),
    pytest.param("slurm.max-count", f"{NS}.max_count", {f"{NS}.max_count": Here(1)}, "error", 1,
                 id="max-below-count"),
    pytest.param("slurm.max-count", f"{NS}.count", {f"{NS}.count": Here(0)}, "error", 1,
                 id="count-0-without-max"),
    pytest.param("slurm.machine-type", f"{NS}.machine_type",
                 {f"{NS}.machine_type": Here("a3-megagpu-16g")}, "error", 1,
                 id="gpu-type-not-in-catalog"),
    pytest.param("slurm.machine-type", f"{NS}.machine_type",
                 {f"{NS}.machine_type": Here("n2-standrd-4")}, "error", 1,
                 id="cpu-shape-misspelt"),
    pytest.param("slurm.machine-type", f"{NS}.machine_type",
                 {f"{NS}.machine_type": Here("qq-zzzzzz-4")}, "error", 1,
                 id="unknown-series"),
    *[pytest.param("slurm.machine-type", f"{NS}.machine_type",
                   {f"{NS}.machine_type": Here(typo)}, "error", 1, id=f"cpu-form-{typo}")
      for typo in ("n2-standard-4x", "n1-standard-96-foo", "n2-standard", "e2-micro-2",
                   "n2-custom-8", "custom-4")],
    pytest.param("slurm.machine-type", "slurm.login.machine_type",
                 {"slurm.controller.machine_type": "c2-standrd-8",
                  "slurm.login.machine_type": Here("n2-standard4")}, "error", 2,
                 id="controller-and-login-misspelt"),
    pytest.param("slurm.machine-type", f"{NS}.machine_type",
                 {f"{NS}.machine_type": Here("a3-ultragpu-8"),
                  f"{NS}.machine_type_unlisted": True}, "warning", 1,
                 id="unlisted-type-newer-than-the-catalog"),
    pytest.param("slurm.machine-type", "slurm.login.machine_type",
                 {"slurm.login.machine_type_unlisted": True,
                  "slurm.login.machine_type": Here("n2-standard-4")}, "warning", 1,
                 id="unlisted-set-on-a-type-the-catalog-knows"),
    pytest.param("slurm.boot-disk", f"{NS}.boot_disk.type",
                 {**ULTRA, f"{NS}.boot_disk.type": Here("pd-ssd")}, "error", 1,
                 id="a3ultra-on-pd-ssd"),
    pytest.param("slurm.boot-disk", f"{NS}.boot_disk.type",
                 {f"{NS}.machine_type": "a4-highgpu-8g", f"{NS}.boot_disk.type":
                  Here("pd-balanced")}, "error", 1, id="a4-on-pd-balanced"),
    pytest.param("slurm.placement", f"{NS}.placement",
                 {f"{NS}.count": 1, f"{NS}.placement": Here("compact")}, "warning", 1,
                 id="compact-single-node"),
    *[pytest.param("slurm.time-limit", f"{PART}.max_time", {f"{PART}.max_time": Here(limit)},
                   "error", 1, id=f"max-time-{limit}")
      for limit in ("0", "0:0", "00:00:00", "0-0", "35791394", "24855-03:14:00",
                    "24855-03:13:01", "4294967296", "99999999999")],
    pytest.param("slurm.time-limit", "slurm.partitions[1].max_time",
                 {f"{PART}.max_time": "0",
                  "slurm.partitions[1]": {"name": "long", "nodesets": ["cpu"],
                                          "max_time": Here("71582788")}}, "error", 2,
                 id="every-partition-past-the-bounds"),
    *[pytest.param("slurm.time-limit", f"{PART}.default_time",
                   {f"{PART}.default_time": Here(limit)}, "error", 1, id=f"default-time-{limit}")
      for limit in ("0", "0:00", "35791394")],
    pytest.param("slurm.time-limit", f"{PART}.default_time",
                 {f"{PART}.max_time": "4:00:00", f"{PART}.default_time": Here("4:00:01")},
                 "error", 1, id="default-time-a-minute-past-max-time"),
    pytest.param("slurm.time-limit", f"{PART}.default_time",
                 {f"{PART}.max_time": "1-00:00:00", f"{PART}.default_time": Here("UNLIMITED")},
                 "error", 1, id="unlimited-default-under-a-max-time"),
    pytest.param("slurm.time-limit", "slurm.partitions[1].default_time",
                 {f"{PART}.max_time": "30", f"{PART}.default_time": "31",
                  "slurm.partitions[1]": {"name": "long", "nodesets": ["cpu"], "max_time": "1",
                                          "default_time": Here("2-00:00")}}, "error", 2,
                 id="every-partition-with-a-default-past-its-max"),
]

ACCEPTED = [
    pytest.param("slurm.reservation-placement", {**RESERVED}, id="reservation-without-placement"),
    pytest.param("slurm.reservation-placement", {**RESERVED, f"{NS}.placement": "none"},
                 id="reservation-placement-none"),
    pytest.param("slurm.reservation-placement", {f"{NS}.placement": "compact"},
                 id="compact-on-demand"),
    pytest.param("slurm.reservation-bound", {**BOUND}, id="dense-a4-reservation"),
    pytest.param("slurm.reservation-bound", {**BOUND, f"{NS}.machine_type": "a3-highgpu-8g"},
                 id="a3-high-8-gpus-is-the-smallest-documented"),
    pytest.param("slurm.reservation-bound", {**RESERVED, f"{NS}.reservation_bound": False},
                 id="ordinary-reservation"),
    pytest.param("slurm.reservation", {f"{NS}.provisioning": "reservation",
                                       f"{NS}.reservation": RESERVATION}, id="reservation"),
    pytest.param("slurm.reservation",
                 {f"{NS}.provisioning": "reservation", f"{NS}.reservation":
                  "res/reservationBlocks/b1/reservationSubBlocks/s1"}, id="sub-block"),
    pytest.param("slurm.reservation", {f"{NS}.provisioning": "flex-start"}, id="flex-start"),
    pytest.param("slurm.max-count", {f"{NS}.count": 0, f"{NS}.max_count": 4}, id="dynamic"),
    pytest.param("slurm.max-count", {f"{NS}.max_count": 2}, id="max-equals-count"),
    pytest.param("slurm.machine-type", {f"{NS}.machine_type": "a3-highgpu-8g"},
                 id="catalog-gpu"),
    pytest.param("slurm.machine-type", {}, id="cpu"),
    *[pytest.param("slurm.machine-type", {f"{NS}.machine_type": machine_type}, id=machine_type)
      for machine_type in ("a2-highgpu-1g", "a2-megagpu-16g", "a2-ultragpu-8g", "g2-standard-4",
                           "g2-standard-96", "a3-highgpu-2g", "a3-edgegpu-8g", "a4x-highgpu-4g",
                           "e2-micro", "n2-custom-8-32768", "custom-8-32768",
                           "c3-standard-4-lssd")],
    pytest.param("slurm.boot-disk", {**ULTRA, f"{NS}.boot_disk.type": "hyperdisk-balanced"},
                 id="a3ultra-on-hyperdisk"),
    pytest.param("slurm.boot-disk", {**ULTRA}, id="a3ultra-default"),
    pytest.param("slurm.boot-disk", {f"{NS}.boot_disk.type": "pd-ssd"}, id="cpu-on-pd-ssd"),
    pytest.param("slurm.placement", {f"{NS}.placement": "compact"}, id="compact-two-nodes"),
    pytest.param("slurm.placement", {f"{NS}.count": 1, f"{NS}.max_count": 2,
                                     f"{NS}.placement": "compact"}, id="compact-up-to-two"),
    *[pytest.param("slurm.time-limit", {f"{PART}.max_time": limit}, id=f"max-time-{limit}")
      for limit in ("1", "0:01", "0:0:1", "0-0:1", "7-00:00:00", "UNLIMITED", "INFINITE",
                    LONGEST, "596523:13:00", "24855-03:13:00", "24855-3:13", "35791392:60")],
    pytest.param("slurm.time-limit", {}, id="no-max-time"),
    *[pytest.param("slurm.time-limit", {f"{PART}.default_time": limit},
                   id=f"default-time-{limit}") for limit in ("1", "0:01", LONGEST, "UNLIMITED")],
    pytest.param("slurm.time-limit", {f"{PART}.max_time": "4:00:00",
                                        f"{PART}.default_time": "3:59:01"},
                 id="default-time-rounding-up-to-max-time"),
    pytest.param("slurm.time-limit", {f"{PART}.max_time": "1",
                                        f"{PART}.default_time": "0:01"},
                 id="default-time-of-the-shortest-max-time"),
    pytest.param("slurm.time-limit", {f"{PART}.default_time": "UNLIMITED"},
                 id="unlimited-default-without-max-time"),
    pytest.param("slurm.time-limit", {f"{PART}.max_time": "7-00:00:00"},
                 id="no-default-time"),
]

#: Several problems of one rule in one blueprint: each is reported, none twice.
SECOND = "slurm.nodesets[1]"
TWO = {SECOND: {"name": "cpu2", "machine_type": "n2-standard-4", "count": 2},
       "slurm.partitions[0].nodesets": ["cpu", "cpu2"]}
REFUSED += [
    pytest.param("slurm.reservation", f"{SECOND}.reservation",
                 {**TWO, f"{NS}.provisioning": "reservation",
                  f"{SECOND}.reservation": Here(RESERVATION)}, "error", 2,
                 id="missing-and-stray-reservation"),
    pytest.param("slurm.max-count", f"{SECOND}.max_count",
                 {**TWO, f"{NS}.count": 0, f"{SECOND}.max_count": Here(1)}, "error", 2,
                 id="count-0-and-max-below-count"),
    pytest.param("slurm.boot-disk", f"{SECOND}.boot_disk.type",
                 {**TWO, **ULTRA, f"{NS}.boot_disk.type": "pd-ssd",
                  f"{SECOND}.machine_type": "a4-highgpu-8g",
                  f"{SECOND}.boot_disk.type": Here("pd-balanced")}, "error", 2,
                 id="two-hyperdisk-families-on-pd"),
    pytest.param("slurm.placement", f"{SECOND}.placement",
                 {**TWO, f"{NS}.count": 1, f"{NS}.placement": "compact",
                  f"{SECOND}.count": 1, f"{SECOND}.placement": Here("compact")}, "warning", 2,
                 id="two-single-node-compact-nodesets"),
    pytest.param("slurm.image", f"{NS}.image",
                 {f"{NS}.image": Here({"project": "my-images", "name": "a", "family": "b"})},
                 "error", 1, id="image-name-and-family"),
    pytest.param("slurm.image", f"{SECOND}.image",
                 {**TWO, f"{NS}.image": {"project": "my-images"},
                  f"{SECOND}.image": Here({"project": "my-images", "install_at_boot": True})},
                 "error", 2, id="images-without-name-or-family"),
]
ACCEPTED += [
    pytest.param("slurm.image", {f"{NS}.image": {"project": "my-images", "name": "img-1"}},
                 id="pinned-image"),
    pytest.param("slurm.image", {f"{NS}.image": {"project": "my-images", "family": "fam",
                                                 "install_at_boot": True}},
                 id="family-installing-at-boot"),
    pytest.param("slurm.accounting", {f"{ACCT}.cloud_sql": SQL}, id="cloud-sql-in-the-region"),
    pytest.param("slurm.accounting", {f"{ACCT}.cloud_sql.instance":
                                      "projects/my-project/instances/acct"},
                 id="cloud-sql-by-resource-name"),
    pytest.param("slurm.accounting", {f"{ACCT}.enabled": False}, id="accounting-off"),
    pytest.param("slurm.max-count", {f"{NS}.max_count": 2}, id="max-count-equal-to-count"),
    pytest.param("slurm.max-count", {f"{NS}.count": 0, f"{NS}.max_count": 1},
                 id="count-0-with-max-count-1"),
    pytest.param("slurm.placement", {f"{NS}.placement": "compact"},
                 id="compact-on-two-nodes"),
    pytest.param("slurm.placement", {f"{NS}.count": 0, f"{NS}.max_count": 2,
                                     f"{NS}.placement": "compact"},
                 id="compact-on-two-dynamic-nodes"),
]

test_refused, test_accepted = table_tests(REFUSED, ACCEPTED)


def test_defaults_follow_the_contract(make_text, check):
    ns = check(make_text(ULTRA)).blueprint.slurm.nodesets[0]
    assert (ns.upper_bound, ns.provisioning, ns.placement) == (2, "on-demand", "none")
    assert (ns.boot_disk_type, ns.boot_disk.size_gb, ns.gpus) == ("hyperdisk-balanced", 200, 8)
    cpu = check(make_text()).blueprint.slurm.nodesets[0]
    assert (cpu.boot_disk_type, cpu.gpus) == ("pd-balanced", 0)


@pytest.mark.parametrize(("typo", "hint"), [
    ("a3-megagpu-8", "did you mean a3-megagpu-8g?"),
    ("a2-higpu-1g", "did you mean a2-highgpu-1g?"),
    ("n2-standrd-4", "did you mean n2-standard-4?"),
    ("c3-highmen-8", "did you mean c3-highmem-8?"),
])
def test_unknown_machine_type_suggests_the_closest(rules_check, typo, hint):
    hit = rules_check.refused({f"{NS}.machine_type": Here(typo)},
                              "slurm.machine-type", f"{NS}.machine_type")
    assert hit.finding.hint == (f"{hint} if it is newer than the catalog, set "
                                f"{NS}.machine_type_unlisted: true; its nodes are then built as "
                                "CPU nodes: no GPU GRES, no GPU networks, no GPU drivers, and "
                                "no price in the cost estimate")


def test_a_typo_of_a_gpu_type_is_an_error_that_names_it_and_the_escape(rules_check):
    hit = rules_check.refused({f"{NS}.machine_type": Here("a3-ultragpu-8")},
                              "slurm.machine-type", f"{NS}.machine_type")
    assert hit.line_text() == (
        "bp.yaml:9:21: error: slurm.nodesets[0].machine_type: a3-ultragpu-8 is not a machine "
        "type clusterprint knows (did you mean a3-ultragpu-8g? if it is newer than the catalog, "
        "set slurm.nodesets[0].machine_type_unlisted: true; its nodes are then built as CPU "
        "nodes: no GPU GRES, no GPU networks, no GPU drivers, and no price in the cost "
        "estimate)")


def test_a_cpu_type_with_a_stray_suffix_is_told_the_type_without_it(rules_check):
    hit = rules_check.refused({f"{NS}.machine_type": Here("n2-standard-4x")},
                              "slurm.machine-type", f"{NS}.machine_type")
    assert hit.finding.hint.startswith("did you mean n2-standard-4? ")


def test_an_unlisted_type_warns_that_its_facts_are_unknown_and_builds_a_cpu_node(rules_check):
    hit = rules_check.refused({f"{NS}.machine_type": Here("a5-ultragpu-8g"),
                               f"{NS}.machine_type_unlisted": True},
                              "slurm.machine-type", f"{NS}.machine_type", "warning")
    assert hit.finding.message == (
        "a5-ultragpu-8g is not in clusterprint's catalog, so its GPUs, NICs and price are "
        "unknown; its nodes are then built as CPU nodes: no GPU GRES, no GPU networks, no GPU "
        "drivers, and no price in the cost estimate")
    assert hit.finding.hint == ("check it exists in the zone: gcloud compute machine-types "
                                "list --filter=name=a5-ultragpu-8g --zones=us-central1-a")
    checked = rules_check.accepted({f"{NS}.machine_type": "a5-ultragpu-8g",
                                    f"{NS}.machine_type_unlisted": True}, "location.machine-zone")
    assert checked.exit_code == 0 and checked.blueprint.slurm.nodesets[0].gpus == 0


def test_the_escape_belongs_to_its_own_machine_type(rules_check):
    hit = rules_check.refused({"slurm.controller.machine_type": Here("c2-standrd-8"),
                               f"{NS}.machine_type_unlisted": True},
                              "slurm.machine-type", "slurm.controller.machine_type", count=2)
    assert "set slurm.controller.machine_type_unlisted: true" in hit.finding.hint


def test_time_limit_message_gives_the_range(rules_check):
    hit = rules_check.refused({f"{PART}.max_time": Here("35791394")}, "slurm.time-limit",
                              f"{PART}.max_time")
    assert hit.finding.message == (
        "35791394 is 24855-03:14:00, longer than Slurm's 32-bit time arithmetic holds: "
        "slurmctld refuses it or wraps it to another limit")
    assert hit.finding.hint == ("use 1 minute up to 35791393 minutes = 24855-03:13:00, "
                                "or UNLIMITED")


def test_zero_time_limit_says_slurm_keeps_zero(rules_check):
    hit = rules_check.refused({f"{PART}.max_time": Here("0")}, "slurm.time-limit",
                              f"{PART}.max_time")
    assert hit.finding.message == "0 is a limit of 0 minutes: Slurm keeps it as 0, not as no limit"


def test_a_type_with_nothing_close_lists_the_known_series(rules_check):
    hit = rules_check.refused({f"{NS}.machine_type": Here("qq-zzzzzz-4")},
                              "slurm.machine-type", f"{NS}.machine_type")
    assert hit.finding.hint.startswith("known series: a2, a3, a4, a4x, c2, ")


def test_a2_and_g2_nodes_get_their_gpus(make_text, check):
    ns = check(make_text({f"{NS}.machine_type": "a2-megagpu-16g"})).blueprint.slurm.nodesets[0]
    assert (ns.gpus, ns.boot_disk_type) == (16, "pd-balanced")
    ns = check(make_text({f"{NS}.machine_type": "g2-standard-24"})).blueprint.slurm.nodesets[0]
    assert (ns.gpus, ns.boot_disk_type) == (2, "pd-balanced")


def test_a_default_time_past_max_time_says_slurmctld_would_ignore_it(rules_check):
    hit = rules_check.refused({f"{PART}.max_time": "4:00:00", f"{PART}.default_time":
                               Here("5:00:00")}, "slurm.time-limit", f"{PART}.default_time")
    assert hit.finding.message == ("default_time 5:00:00 is longer than max_time 4:00:00: "
                                   "slurmctld ignores it")
    assert hit.finding.hint == "set default_time to at most 4:00:00"
