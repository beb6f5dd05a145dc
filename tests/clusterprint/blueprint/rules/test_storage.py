"""storage.* rules: Filestore and Lustre sizes per tier, /home, mount paths."""

import pytest

from tests.support.blueprint_texts import Here, table_tests

CAPACITY = "storage.home.filestore.capacity_gib"


def filestore(tier, capacity):
    """Overrides for a Filestore /home."""
    return {"storage.home.filestore": {"tier": tier, "capacity_gib": capacity}}


def lustre(tier, capacity, **extra):
    """Overrides for one Lustre entry named scratch."""
    return {"storage.lustre[0]": {"name": "scratch", "filesystem": "scratch",
                                  "performance_tier": tier, "capacity_gib": capacity, **extra}}


def bucket(name, mount=None):
    """A bucket entry, with a mount when given."""
    return {"bucket": name, **({"mount": mount} if mount else {})}


LUSTRE_CAPACITY = "storage.lustre[0].capacity_gib"

REFUSED = [
    # Filestore ZONAL: 1024..9984 by 256, then 10240..102400 by 2560.
    *[pytest.param("storage.filestore-capacity", CAPACITY, filestore(tier, Here(cap)), "error", 1,
                   id=f"{tier}-{cap}")
      for tier, cap in [("ZONAL", 1023), ("ZONAL", 1100), ("ZONAL", 10000), ("ZONAL", 9985),
                        ("ZONAL", 10241), ("ZONAL", 102401), ("REGIONAL", 10239),
                        ("BASIC_HDD", 1023), ("BASIC_SSD", 2559), ("BASIC_SSD", 65434),
                        ("ENTERPRISE", 10496), ("HIGH_SCALE_SSD", 9984)]],
    # Lustre: min, step, threshold, step above threshold, max per tier.
    *[pytest.param("storage.lustre-capacity", LUSTRE_CAPACITY, lustre(tier, Here(cap)), "error", 1,
                   id=f"lustre-{tier}-{cap}")
      for tier, cap in [(500, 17999), (500, 20000), (500, 3078000), (500, 3204000),
                        (500, 20160000), (1000, 4500), (1000, 1548000), (1000, 10080000),
                        (250, 6156000), (250, 40320000), (125, 108000), (125, 12312000)]],
    pytest.param("storage.home", "storage.home",
                 {"storage.home": Here({"filestore": {"tier": "ZONAL"}, "lustre": "scratch"}),
                  **lustre(500, 18000)}, "error", 1, id="filestore-and-lustre"),
    pytest.param("storage.home", "storage.home", {"storage.home": Here({})}, "error", 1,
                 id="neither"),
    pytest.param("storage.home", "storage.home.lustre",
                 {"storage.home.lustre": Here("scratc"), **lustre(500, 18000)}, "error", 1,
                 id="home-names-unlisted-lustre"),
    pytest.param("storage.mounts", "storage.lustre[0].mount",
                 lustre(500, 18000, mount=Here("lustre")), "error", 1, id="relative"),
    pytest.param("storage.mounts", "storage.buckets[0].mount",
                 {"storage.buckets": [bucket("ckpts", Here("/home/ckpts"))]}, "error", 1,
                 id="inside-home"),
    pytest.param("storage.mounts", "storage.buckets[0].mount",
                 {"storage.buckets": [bucket("ckpts", Here("/home"))]}, "error", 1, id="on-home"),
    pytest.param("storage.mounts", "storage.buckets[0].mount",
                 {**lustre(500, 18000, mount="/data"),
                  "storage.buckets": [bucket("ckpts", Here("/data"))]}, "error", 1,
                 id="same-as-lustre"),
    pytest.param("storage.mounts", "storage.buckets[1].mount",
                 {"storage.buckets": [bucket("ckpts"), bucket("other", Here("/gcs/ckpts"))]},
                 "error", 1, id="same-as-default-mount"),
    pytest.param("storage.mounts", "storage.buckets[0].mount",
                 {**lustre(500, 18000, mount="/data"),
                  "storage.buckets": [bucket("ckpts", Here("/data/ckpts"))]}, "error", 1,
                 id="nested"),
    pytest.param("storage.mounts", "storage.buckets[0].mount",
                 {"storage.buckets": [bucket("ckpts", Here("/usr/local/ckpts"))]}, "error", 1,
                 id="system-directory"),
    *[pytest.param("storage.mounts", "storage.buckets[0].mount",
                   {"storage.buckets": [bucket("ckpts", Here(path))]}, "error", 1,
                   id=f"system-path-{path}")
      for path in ("/", "/snap", "/snap/ckpts", "/mnt", "/mnt/localssd", "/mnt/localssd/ckpts",
                   "/var", "/run/ckpts", "/lib64")],
    pytest.param("storage.mounts", "storage.lustre[0].mount",
                 {**lustre(500, 18000, mount=Here("/snap")),
                  "storage.buckets": [bucket("ckpts", "/mnt")]}, "error", 2,
                 id="lustre-and-bucket-on-system-paths"),
    pytest.param("storage.mounts", "storage.buckets[0].mount",
                 {"storage.buckets": [bucket("ckpts", Here("/gcs/ckpts/"))]}, "error", 1,
                 id="not-normalized"),
    pytest.param("storage.mounts", "storage.lustre[0].mount",
                 {"storage.home": {"lustre": "scratch"},
                  **lustre(500, 18000, mount=Here("/scratch"))}, "error", 1,
                 id="home-lustre-mounted-elsewhere"),
]

ACCEPTED = [
    *[pytest.param("storage.filestore-capacity", filestore(tier, cap),
                   id=f"{tier}-{cap}")
      for tier, cap in [("ZONAL", 1024), ("ZONAL", 9984), ("ZONAL", 10240), ("ZONAL", 12800),
                        ("ZONAL", 102400), ("REGIONAL", 9984), ("BASIC_HDD", 1025),
                        ("BASIC_SSD", 2560), ("BASIC_SSD", 65433), ("ENTERPRISE", 10240),
                        ("HIGH_SCALE_SSD", 10240)]],
    pytest.param("storage.filestore-capacity", {}, id="default-home"),
    *[pytest.param("storage.lustre-capacity", lustre(tier, cap),
                   id=f"lustre-{tier}-{cap}")
      for tier, cap in [(500, 18000), (500, 36000), (500, 3060000), (500, 3168000),
                        (500, 20016000), (1000, 9000), (1000, 1530000), (1000, 1584000),
                        (1000, 10008000), (250, 36000), (250, 6120000), (250, 40032000),
                        (125, 72000), (125, 12240000)]],
    pytest.param("storage.home", {"storage.home": {"lustre": "scratch"},
                                  **lustre(500, 18000)}, id="home-on-lustre"),
    pytest.param("storage.home", {"storage.home.filestore.tier": "BASIC_SSD",
                                  "storage.home.filestore.capacity_gib": 2560}, id="filestore"),
    pytest.param("storage.mounts", {**lustre(500, 18000, mount="/lustre"),
                                    "storage.buckets": [bucket("ckpts", "/gcs/checkpoints"),
                                                        bucket("data")]}, id="siblings"),
    pytest.param("storage.mounts", {"storage.home": {"lustre": "scratch"},
                                    **lustre(500, 18000, mount="/home")},
                 id="home-lustre-at-home"),
    pytest.param("storage.mounts", {**lustre(500, 18000, mount="/snapshots"),
                                    "storage.buckets": [bucket("ckpts", "/mnt/ckpts"),
                                                        bucket("data", "/srv/data"),
                                                        bucket("cache", "/mnt/localssd2"),
                                                        bucket("media", "/media/data")]},
                 id="beside-system-paths"),
]

#: Several problems of one rule in one blueprint, and paths right beside the refused ones.
REFUSED += [
    pytest.param("storage.lustre-capacity", "storage.lustre[1].capacity_gib",
                 {"storage.lustre": [{"name": "a", "filesystem": "a", "capacity_gib": 1,
                                      "mount": "/a"},
                                     {"name": "b", "filesystem": "b", "mount": "/b",
                                      "capacity_gib": Here(20000)}]}, "error", 2,
                 id="every-lustre-entry-checked"),
    pytest.param("storage.home", "storage.home.lustre",
                 {"storage.home": {"filestore": {"tier": "ZONAL", "capacity_gib": 1024},
                                   "lustre": Here("nope")}}, "error", 2,
                 id="both-kinds-and-an-unknown-lustre"),
]
ACCEPTED += [
    pytest.param("storage.mounts",
                 {"storage.buckets": [{"bucket": "data-a", "mount": "/data"},
                                      {"bucket": "data-b", "mount": "/data2"}]},
                 id="shared-prefix-without-nesting"),
    pytest.param("storage.mounts",
                 {"storage.buckets": [{"bucket": "work", "mount": "/homework"}]},
                 id="beside-home-not-inside"),
    pytest.param("storage.mounts",
                 {"storage.buckets": [{"bucket": "usr-data", "mount": "/usrdata"},
                                      {"bucket": "var-data", "mount": "/variable"}]},
                 id="beside-system-paths-not-inside"),
]

test_refused, test_accepted = table_tests(REFUSED, ACCEPTED)


def test_lustre_step_message_is_the_contracts(rules_check):
    hit = rules_check.refused(lustre(500, Here(20000)), "storage.lustre-capacity",
                              LUSTRE_CAPACITY)
    assert hit.line_text() == (
        "bp.yaml:20:21: error: storage.lustre[0].capacity_gib: 20000 is not a multiple of "
        "18000, the step of performance tier 500 (try 18000 or 36000)")


@pytest.mark.parametrize(("tier", "capacity", "message", "hint"), [
    ("ZONAL", 10000, "10000 falls between the allowed ranges of Filestore tier ZONAL",
     "try 9984 or 10240"),
    ("ZONAL", 1000, "1000 is below 1024, the minimum of Filestore tier ZONAL", "try 1024"),
    ("ZONAL", 102401, "102401 is above 102400, the maximum of Filestore tier ZONAL",
     "try 102400"),
])
def test_filestore_messages_say_what_would_be_right(rules_check, tier, capacity, message, hint):
    hit = rules_check.refused(filestore(tier, Here(capacity)), "storage.filestore-capacity",
                              CAPACITY)
    assert (hit.finding.message, hit.finding.hint) == (message, hint)


def test_lustre_between_threshold_and_first_large_step(rules_check):
    hit = rules_check.refused(lustre(500, Here(3078000)), "storage.lustre-capacity",
                              LUSTRE_CAPACITY)
    assert hit.finding.hint == "try 3060000 or 3168000"


def test_duplicate_mount_names_the_other_entry(rules_check):
    hit = rules_check.refused({**lustre(500, 18000, mount="/data"),
                               "storage.buckets": [bucket("ckpts", Here("/data"))]},
                              "storage.mounts", "storage.buckets[0].mount")
    assert hit.finding.message == "/data is already the mount of storage.lustre[0]"


@pytest.mark.parametrize(("path", "message"), [
    ("/mnt", "/mnt would cover /mnt/localssd, where the node keeps its local SSD, as Cluster "
             "Toolkit's GPU nodes do"),
    ("/snap/gcs", "/snap/gcs is inside /snap, where the node keeps snaps, gcloud among them on "
                  "Ubuntu's images: the boot scripts call it"),
])
def test_system_path_message_says_what_lives_there(rules_check, path, message):
    hit = rules_check.refused({"storage.buckets": [bucket("ckpts", Here(path))]},
                              "storage.mounts", "storage.buckets[0].mount")
    assert hit.finding.message == message
