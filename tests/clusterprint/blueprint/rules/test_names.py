"""names.* rules: unique names, resolving references, one default partition."""

import pytest

from tests.support.blueprint_texts import Here, table_tests

CPU = {"machine_type": "n2-standard-4", "count": 1}
GPU = {"slurm.nodesets[0].machine_type": "a3-megagpu-8g"}
LUSTRE = {"filesystem": "fs", "capacity_gib": 18000}
MANAGED = {"orchestrator": "managed"}

REFUSED = [
    pytest.param("names.unique", "slurm.nodesets[1].name",
                 {"slurm.nodesets[1]": Here({"name": "cpu", **CPU})}, "error", 1,
                 id="nodeset-twice"),
    pytest.param("names.unique", "slurm.partitions[1].name",
                 {"slurm.partitions[1]": Here({"name": "debug", "nodesets": ["cpu"]})}, "error", 1,
                 id="partition-twice"),
    pytest.param("names.unique", "storage.lustre[1].name",
                 {"storage.lustre": [{"name": "s", **LUSTRE, "mount": "/a"},
                                     Here({"name": "s", **LUSTRE, "mount": "/b"})]}, "error", 1,
                 id="lustre-twice"),
    pytest.param("names.unique", "storage.buckets[1].bucket",
                 {"storage.buckets": [{"bucket": "ckpts", "mount": "/gcs/a"},
                                      Here({"bucket": "ckpts", "mount": "/gcs/b"})]}, "error", 1,
                 id="bucket-twice"),
    pytest.param("names.unique", "network.peerings[1].name",
                 {"network.peerings": [
                     {"name": "p", "peer_network": "projects/other-proj/global/networks/a"},
                     Here({"name": "p", "peer_network": "projects/other-proj/global/networks/b"})]},
                 "error", 1, id="peering-twice"),
    pytest.param("names.unique", "recipes[1].name",
                 {**GPU, "recipes": [{"name": "gemma-2b-sft", "partition": "debug"},
                                     Here({"name": "gemma-2b-sft", "partition": "debug"})]},
                 "error", 1, id="recipe-twice"),
    pytest.param("names.derived-collision", "storage.lustre[0].name",
                 {"storage.lustre": [Here({"name": "home", **LUSTRE})]}, "error", 1,
                 id="lustre-named-like-the-filestore-home"),
    pytest.param("names.derived-collision", "storage.lustre[1].name",
                 {"storage.lustre": [{"name": "scratch", **LUSTRE},
                                     Here({"name": "lnet", **LUSTRE})]}, "error", 1,
                 id="lustre-named-like-the-lnet-firewall"),
    pytest.param("names.derived-collision", "storage.buckets[0].bucket",
                 {"storage.lustre": [{"name": "scratch", **LUSTRE}],
                  "storage.buckets": [Here({"bucket": "scratch"})]}, "error", 1,
                 id="bucket-named-like-a-lustre-entry"),
    pytest.param("names.derived-collision", "slurm.nodesets[1].name",
                 {"slurm.nodesets[1]": Here({"name": "cpu-template", **CPU}),
                  "slurm.partitions[0].nodesets[1]": "cpu-template"}, "error", 1,
                 id="nodeset-named-like-another-ones-template"),
    pytest.param("names.derived-collision", "slurm.nodesets[1].name",
                 {"slurm.nodesets[0].name": "cpu-group", "slurm.partitions[0].nodesets[0]": "cpu",
                  "slurm.nodesets[1]": Here({"name": "cpu", **CPU}),
                  "slurm.partitions[0].nodesets[1]": "cpu-group"}, "error", 1,
                 id="nodeset-whose-group-is-an-earlier-nodeset"),
    pytest.param("names.derived-collision", "slurm.nodesets[1].name",
                 {"slurm.nodesets[0].placement": "compact",
                  "slurm.nodesets[1]": Here({"name": "cpu-placement", **CPU}),
                  "slurm.partitions[0].nodesets[1]": "cpu-placement"}, "error", 1,
                 id="nodeset-named-like-a-placement-policy"),
    pytest.param("names.derived-collision", "slurm.nodesets[1].name",
                 {"slurm.nodesets[0].provisioning": "flex-start",
                  "slurm.nodesets[1]": Here({"name": "cpu-resize", **CPU}),
                  "slurm.partitions[0].nodesets[1]": "cpu-resize"}, "error", 1,
                 id="nodeset-named-like-a-flex-start-resize-request"),
    pytest.param("names.derived-collision", "slurm.nodesets[1].name",
                 {"slurm.nodesets[1]": Here({"name": "cpu-group", **CPU}),
                  "slurm.nodesets[2]": {"name": "cpu-template", **CPU},
                  "slurm.partitions[0].nodesets": ["cpu", "cpu-group", "cpu-template"]},
                 "error", 2, id="two-nodesets-named-like-children"),
    pytest.param("names.derived-collision", "slurm.nodesets[1].name",
                 {"slurm.nodesets[0].max_count": 4,
                  "slurm.nodesets[1]": Here({"name": "cpu-e", **CPU}),
                  "slurm.partitions[0].nodesets[1]": "cpu-e"}, "error", 1,
                 id="nodeset-whose-groups-share-the-base-name-of-anothers-elastic-groups"),
    pytest.param("names.derived-collision", "storage.lustre[0].name",
                 {**MANAGED, "storage.lustre": [Here({"name": "home", **LUSTRE})]}, "error", 1,
                 id="managed-lustre-id-home-drops-the-filestore-mount"),
    pytest.param("names.derived-collision", "storage.lustre[0].name",
                 {**MANAGED, "storage.buckets": [{"bucket": "ckpts"}],
                  "storage.lustre": [Here({"name": "bucket-0", **LUSTRE})]}, "error", 1,
                 id="managed-lustre-id-like-a-bucket-id"),
    pytest.param("names.slurm-keyword", "slurm.partitions[0].name",
                 {"slurm.partitions[0].name": Here("default")}, "error", 1,
                 id="partition-named-default"),
    pytest.param("names.slurm-keyword", "slurm.nodesets[0].name",
                 {"slurm.nodesets[0].name": Here("all"),
                  "slurm.partitions[0].nodesets": ["all"]}, "error", 1, id="nodeset-named-all"),
    pytest.param("names.partition-nodesets", "slurm.partitions[0].nodesets[1]",
                 {"slurm.partitions[0].nodesets[1]": Here("gpu")}, "error", 1,
                 id="unknown-nodeset"),
    pytest.param("names.partition-nodesets", "slurm.partitions[0].nodesets[1]",
                 {"slurm.partitions[0].nodesets": ["cpu", Here("cpu")]}, "error", 1,
                 id="nodeset-listed-twice"),
    pytest.param("names.partition-nodesets", "slurm.partitions[1].nodesets[2]",
                 {"slurm.nodesets[1]": {"name": "cpu2", **CPU},
                  "slurm.partitions[0].nodesets": ["cpu", "cpu2", "cpu"],
                  "slurm.partitions[1]": {"name": "b", "nodesets": ["cpu2", "cpu", Here("cpu2")]}},
                 "error", 2, id="repeats-in-two-partitions"),
    pytest.param("names.partition-nodesets", "slurm.partitions[0].nodesets[2]",
                 {"slurm.partitions[0].nodesets": ["cpu", "gpu", Here("gpu")]}, "error", 2,
                 id="unknown-nodeset-twice"),
    pytest.param("names.default-partition", "slurm.partitions[1].default",
                 {"slurm.partitions[0].default": True,
                  "slurm.partitions[1]": {"name": "other", "nodesets": ["cpu"],
                                          "default": Here(True)}}, "error", 1,
                 id="two-defaults"),
    pytest.param("names.unused-nodeset", "slurm.nodesets[1].name",
                 {"slurm.nodesets[1]": Here({"name": "spare", **CPU})}, "warning", 1,
                 id="nodeset-in-no-partition"),
]

ACCEPTED = [
    pytest.param("names.slurm-keyword", {"slurm.partitions[0].name": "defaults",
                                         "slurm.nodesets[0].name": "allgpu",
                                         "slurm.partitions[0].nodesets": ["allgpu"]},
                 id="keywords-inside-names"),
    pytest.param("names.derived-collision",
                 {"storage.home": {"lustre": "home"},
                  "storage.lustre": [{"name": "home", **LUSTRE}]}, id="lustre-home-named-home"),
    pytest.param("names.derived-collision",
                 {"storage.lustre": [{"name": "scratch", **LUSTRE}],
                  "storage.buckets": [{"bucket": "scratch", "create": False}]},
                 id="existing-bucket-named-like-a-lustre-entry"),
    pytest.param("names.derived-collision",
                 {"slurm.nodesets[1]": {"name": "cpu-placement", **CPU},
                  "slurm.partitions[0].nodesets[1]": "cpu-placement"},
                 id="placement-name-free-without-compact-placement"),
    pytest.param("names.derived-collision",
                 {"slurm.nodesets[0].placement": "compact",
                  "slurm.nodesets[0].provisioning": "reservation",
                  "slurm.nodesets[0].reservation": "r1",
                  "slurm.nodesets[1]": {"name": "cpu-placement", **CPU},
                  "slurm.partitions[0].nodesets[1]": "cpu-placement"},
                 id="no-placement-policy-on-a-reservation"),
    pytest.param("names.derived-collision",
                 {"slurm.nodesets[0].provisioning": "flex-start", "slurm.nodesets[0].count": 0,
                  "slurm.nodesets[0].max_count": 2,
                  "slurm.nodesets[1]": {"name": "cpu-resize", **CPU},
                  "slurm.partitions[0].nodesets[1]": "cpu-resize"},
                 id="no-resize-request-for-zero-flex-start-nodes"),
    pytest.param("names.derived-collision",
                 {"storage.buckets": [{"bucket": "ckpts"}],
                  "storage.lustre": [{"name": "bucket-0", **LUSTRE}]},
                 id="bucket-ids-only-in-managed-mode"),
    pytest.param("names.derived-collision",
                 {"slurm.nodesets[1]": {"name": "cpu-e", **CPU},
                  "slurm.partitions[0].nodesets[1]": "cpu-e"},
                 id="cpu-e-beside-cpu-without-elastic-nodes"),
    pytest.param("names.derived-collision",
                 {"slurm.nodesets[0].max_count": 4,
                  "slurm.nodesets[1]": {"name": "cpu-big", "max_count": 4, **CPU},
                  "slurm.partitions[0].nodesets[1]": "cpu-big"},
                 id="elastic-nodesets-whose-names-start-alike"),
    pytest.param("names.derived-collision",
                 {**MANAGED, "storage.buckets": [{"bucket": "ckpts"}],
                  "storage.lustre": [{"name": "bucket-1", **LUSTRE}],
                  "slurm.nodesets[1]": {"name": "cpu-template", **CPU},
                  "slurm.partitions[0].nodesets[1]": "cpu-template"},
                 id="managed-past-the-last-bucket-id-and-no-templates"),
    pytest.param("names.unique", {"slurm.nodesets[1]": {"name": "cpu2", **CPU},
                                  "slurm.partitions[1]": {"name": "two", "nodesets": ["cpu2"]}},
                 id="distinct-names"),
    pytest.param("names.partition-nodesets", {"slurm.nodesets[1]": {"name": "cpu2", **CPU},
                                              "slurm.partitions[0].nodesets[1]": "cpu2"},
                 id="listed-nodesets"),
    pytest.param("names.partition-nodesets",
                 {"slurm.nodesets[1]": {"name": "cpu2", **CPU},
                  "slurm.partitions[0].nodesets": ["cpu", "cpu2"],
                  "slurm.partitions[1]": {"name": "b", "nodesets": ["cpu2", "cpu"]}},
                 id="each-nodeset-once-per-partition"),
    pytest.param("names.default-partition",
                 {"slurm.partitions[1]": {"name": "b", "nodesets": ["cpu"], "default": True},
                  "slurm.partitions[0].default": False}, id="one-default"),
    pytest.param("names.default-partition",
                 {"slurm.partitions[1]": {"name": "b", "nodesets": ["cpu"]}}, id="none-marked"),
    pytest.param("names.unused-nodeset", {}, id="every-nodeset-used"),
]

#: Several problems of one rule in one blueprint: each is reported, none twice.
SPARE = [{"name": f"spare{i}", **CPU} for i in range(2)]
REFUSED += [
    pytest.param("names.unique", "slurm.nodesets[2].name",
                 {"slurm.nodesets[1]": {"name": "cpu", **CPU},
                  "slurm.nodesets[2]": Here({"name": "cpu", **CPU}),
                  "slurm.partitions[1]": {"name": "debug", "nodesets": ["cpu"]}}, "error", 3,
                 id="every-repeat-of-every-list"),
    pytest.param("names.slurm-keyword", "slurm.partitions[0].name",
                 {"slurm.nodesets[0].name": "all", "slurm.partitions[0].nodesets": ["all"],
                  "slurm.partitions[0].name": Here("default")}, "error", 2,
                 id="nodeset-and-partition-keywords"),
    pytest.param("names.default-partition", "slurm.partitions[2].default",
                 {"slurm.partitions[0].default": True,
                  "slurm.partitions[1]": {"name": "b", "nodesets": ["cpu"], "default": True},
                  "slurm.partitions[2]": {"name": "c", "nodesets": ["cpu"],
                                          "default": Here(True)}}, "error", 2,
                 id="three-defaults-two-findings"),
    pytest.param("names.unused-nodeset", "slurm.nodesets[2].name",
                 {"slurm.nodesets[1]": SPARE[0], "slurm.nodesets[2]": Here(SPARE[1])},
                 "warning", 2, id="two-unused-nodesets"),
]
ACCEPTED += [
    pytest.param("names.unique", {"slurm.nodesets[1]": {"name": "debug", **CPU},
                                  "slurm.partitions[0].nodesets": ["cpu", "debug"]},
                 id="a-nodeset-may-share-a-partitions-name"),
    pytest.param("names.slurm-keyword", {"slurm.partitions[0].name": "all1",
                                         "slurm.nodesets[0].name": "default0",
                                         "slurm.partitions[0].nodesets": ["default0"]},
                 id="keyword-plus-one-character"),
]

test_refused, test_accepted = table_tests(REFUSED, ACCEPTED)


def test_unknown_nodeset_suggests_the_closest_name(rules_check):
    hit = rules_check.refused({"slurm.partitions[0].nodesets[0]": Here("cpus")},
                              "names.partition-nodesets", "slurm.partitions[0].nodesets[0]")
    assert hit.finding.message == "'cpus' is not a listed nodeset"
    assert hit.finding.hint == "did you mean 'cpu'?"


def test_default_partition_is_the_first_when_none_is_marked(make_text, check):
    checked = check(make_text({"slurm.partitions[1]": {"name": "b", "nodesets": ["cpu"]}}))
    assert checked.blueprint.slurm.default_partition.name == "debug"


def test_a_warning_alone_keeps_the_blueprint_valid(make_text, check):
    checked = check(make_text({"slurm.nodesets[1]": {"name": "spare", **CPU}}))
    assert checked.exit_code == 0
    assert [f.finding.severity for f in checked.findings] == ["warning"]


def test_repeated_nodeset_names_its_first_place(rules_check):
    hit = rules_check.refused({"slurm.partitions[0].nodesets": ["cpu", Here("cpu")]},
                              "names.partition-nodesets", "slurm.partitions[0].nodesets[1]")
    assert hit.finding.message == "'cpu' is already listed at nodesets[0]"
