"""recipes.* rules: a recipe runs on an existing partition that can hold it."""

import pytest

from tests.clusterprint.blueprint_texts import Here, table_tests

GPU = {"slurm.nodesets[0].machine_type": "a3-megagpu-8g", "slurm.nodesets[0].max_count": 4}
#: A partition over 4 GPU nodes and 6 CPU nodes: a GPU recipe fits on the 4 GPU nodes only.
MIXED = {**GPU, "slurm.nodesets[1]": {"name": "cpu2", "machine_type": "n2-standard-4",
                                      "count": 6},
         "slurm.partitions[0].nodesets": ["cpu", "cpu2"]}

REFUSED = [
    pytest.param("recipes.partition", "recipes[0].partition",
                 {**GPU, "recipes": [{"name": "gemma-2b-sft", "partition": Here("gpu")}]},
                 "error", 1, id="unknown-partition"),
    pytest.param("recipes.partition", "recipes[0].nodes",
                 {**GPU, "recipes": [{"name": "gemma-2b-sft", "partition": "debug",
                                      "nodes": Here(5)}]}, "error", 1, id="more-nodes-than-max"),
    pytest.param("recipes.partition", "recipes[0].partition",
                 {"recipes": [{"name": "llama3-8b-pretrain", "partition": Here("debug")}]},
                 "error", 1, id="gpu-recipe-on-cpu"),
    pytest.param("recipes.partition", "recipes[0].nodes",
                 {**MIXED, "recipes": [{"name": "llama3-8b-pretrain", "partition": "debug",
                                        "nodes": Here(5)}]}, "error", 1,
                 id="mixed-partition-counts-only-gpu-nodes"),
    pytest.param("recipes.partition", "recipes[1].partition",
                 {"recipes": [{"name": "llama3-8b-pretrain", "partition": "debug"},
                              {"name": "llama3-70b-pretrain", "partition": Here("debug")},
                              {"name": "gemma-2b-sft", "partition": "nope"}]},
                 "error", 3, id="every-recipe-is-checked"),
]

ACCEPTED = [
    pytest.param("recipes.partition",
                 {**GPU, "recipes": [{"name": "llama3-8b-pretrain", "partition": "debug",
                                      "nodes": 4}]}, id="fits-max-count"),
    pytest.param("recipes.partition",
                 {**MIXED, "recipes": [{"name": "llama3-8b-pretrain", "partition": "debug",
                                        "nodes": 4}]}, id="mixed-partition-fits-its-gpu-nodes"),
    pytest.param("recipes.partition",
                 {**MIXED, "recipes": [{"name": "gemma-2b-sft", "partition": "debug",
                                        "nodes": 4}]}, id="one-gpu-recipe-on-mixed-partition"),
    pytest.param("recipes.partition", {}, id="no-recipes"),
]

test_refused, test_accepted = table_tests(REFUSED, ACCEPTED)


def test_node_count_message(rules_check):
    hit = rules_check.refused({**GPU, "recipes": [{"name": "gemma-2b-sft", "partition": "debug",
                                                   "nodes": Here(5)}]},
                              "recipes.partition", "recipes[0].nodes")
    assert hit.finding.message == "5 nodes is more than partition debug holds (4)"
    assert hit.finding.hint == "use at most 4"


def test_unknown_recipe_is_refused_by_the_model(rules_check):
    hit = rules_check.refused({**GPU, "recipes": [{"name": Here("gemma-2b-sfd"),
                                                   "partition": "debug"}]},
                              "schema.enum", "recipes[0].name")
    assert hit.finding.hint == "did you mean `gemma-2b-sft`?"


def test_mixed_partition_message_says_which_nodes_count(rules_check):
    hit = rules_check.refused({**MIXED, "recipes": [{"name": "llama3-8b-pretrain",
                                                     "partition": "debug", "nodes": Here(5)}]},
                              "recipes.partition", "recipes[0].nodes")
    assert hit.finding.message == ("5 nodes is more than partition debug holds with at least "
                                   "8 GPU(s) per node (4)")
    assert hit.finding.hint == "use at most 4"


def test_gpu_message_names_the_numbers(rules_check):
    hit = rules_check.refused({"recipes": [{"name": "llama3-8b-pretrain",
                                            "partition": Here("debug")}]},
                              "recipes.partition", "recipes[0].partition")
    assert hit.finding.message == ("llama3-8b-pretrain needs at least 8 GPU(s) per node; "
                                   "partition debug has 0")
