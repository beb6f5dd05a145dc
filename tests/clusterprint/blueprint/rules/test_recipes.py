"""recipes.* rules: a recipe runs on an existing partition that can hold it and its model."""

import pytest

from tests.support.blueprint_texts import Here, table_tests

GPU = {"slurm.nodesets[0].machine_type": "a3-megagpu-8g", "slurm.nodesets[0].max_count": 4}
#: A partition over 4 GPU nodes and 6 CPU nodes: a GPU recipe fits on the 4 GPU nodes only.
MIXED = {**GPU, "slurm.nodesets[1]": {"name": "cpu2", "machine_type": "n2-standard-4",
                                      "count": 6},
         "slurm.partitions[0].nodesets": ["cpu", "cpu2"]}
#: Four nodes of one L4 GPU each.
G2 = {"slurm.nodesets[0].machine_type": "g2-standard-8", "slurm.nodesets[0].max_count": 4}



def recipe(name: str, partition: object = "debug", **keys: object) -> dict:
    """One ``recipes`` entry: the catalog recipe ``name`` on ``partition``, plus ``keys``."""
    return {"name": name, "partition": partition, **keys}


REFUSED = [
    pytest.param("recipes.partition", "recipes[0].partition",
                 {**GPU, "recipes": [recipe("gemma-2b-sft", Here("gpu"))]},
                 "error", 1, id="unknown-partition"),
    pytest.param("recipes.partition", "recipes[0].nodes",
                 {**GPU, "recipes": [recipe("gemma-2b-sft", nodes=Here(5))]},
                 "error", 1, id="more-nodes-than-max"),
    pytest.param("recipes.partition", "recipes[0].partition",
                 {"recipes": [recipe("llama3-8b-pretrain", Here("debug"))]},
                 "error", 1, id="gpu-recipe-on-cpu"),
    pytest.param("recipes.partition", "recipes[0].nodes",
                 {**MIXED, "recipes": [recipe("llama3-8b-pretrain", nodes=Here(5))]}, "error", 1,
                 id="mixed-partition-counts-only-gpu-nodes"),
    pytest.param("recipes.partition", "recipes[1].partition",
                 {"recipes": [recipe("llama3-8b-pretrain"),
                              recipe("llama3-70b-pretrain", Here("debug")),
                              recipe("gemma-2b-sft", "nope")]},
                 "error", 3, id="every-recipe-is-checked"),
    # 70B needs 32 GPUs: 3 nodes of 8 hold 24.
    pytest.param("recipes.gpus", "recipes[0].nodes",
                 {**GPU, "recipes": [recipe("llama3-70b-pretrain", nodes=Here(3))]},
                 "error", 1, id="too-few-gpus"),
    pytest.param("recipes.gpus", "recipes[1].nodes",
                 {**GPU, "recipes": [recipe("llama3-70b-pretrain", nodes=2),
                                     recipe("gemma3-27b-rl", nodes=Here(4))]}, "error", 2,
                 id="every-recipe-short-of-gpus"),
    pytest.param("recipes.gpus", "recipes[0].nodes",
                 {**G2, "recipes": [recipe("gemma-7b-sft", nodes=Here(3))]}, "error", 1,
                 id="one-gpu-nodes-short-of-a-4-gpu-model"),
    pytest.param("recipes.data-path", "recipes[0].data_path",
                 {**GPU, "recipes": [recipe("gemma-2b-sft", data_path=Here("/lustre/data/web"))]},
                 "error", 1, id="data-path-on-sft"),
    pytest.param("recipes.data-path", "recipes[1].data_path",
                 {**GPU, "recipes": [recipe("gemma3-1b-rl", data_path="/lustre/a"),
                                     recipe("gemma-2b-sft", data_path=Here("/lustre/b"))]},
                 "error", 2, id="data-path-on-every-non-pretraining-recipe"),
]

ACCEPTED = [
    pytest.param("recipes.partition",
                 {**GPU, "recipes": [recipe("llama3-8b-pretrain", nodes=4)]}, id="fits-max-count"),
    pytest.param("recipes.partition",
                 {**MIXED, "recipes": [recipe("llama3-8b-pretrain", nodes=4)]},
                 id="mixed-partition-fits-its-gpu-nodes"),
    pytest.param("recipes.partition",
                 {**MIXED, "recipes": [recipe("gemma-2b-sft", nodes=4)]},
                 id="one-gpu-recipe-on-mixed-partition"),
    pytest.param("recipes.partition", {}, id="no-recipes"),
    pytest.param("recipes.gpus",
                 {**GPU, "recipes": [recipe("llama3-70b-pretrain", nodes=4)]},
                 id="exactly-the-gpus-the-model-needs"),
    pytest.param("recipes.gpus",
                 {**G2, "recipes": [recipe("gemma-7b-sft", nodes=4)]},
                 id="four-one-gpu-nodes-hold-4-gpus"),
    pytest.param("recipes.gpus",
                 {"recipes": [recipe("llama3-70b-pretrain")]},
                 id="no-gpu-partition-is-recipes-partition-s-to-report"),
    pytest.param("recipes.data-path",
                 {**GPU, "recipes": [recipe("llama3-8b-pretrain",
                                            data_path="/lustre/data/web_text_document")]},
                 id="data-path-on-pretraining"),
]

test_refused, test_accepted = table_tests(REFUSED, ACCEPTED)


def test_node_count_message(rules_check):
    hit = rules_check.refused({**GPU, "recipes": [recipe("gemma-2b-sft", nodes=Here(5))]},
                              "recipes.partition", "recipes[0].nodes")
    assert hit.finding.message == "5 nodes is more than partition debug holds (4)"
    assert hit.finding.hint == "use at most 4"


def test_unknown_recipe_is_refused_by_the_model(rules_check):
    hit = rules_check.refused({**GPU, "recipes": [{"name": Here("gemma-2b-sfd"),
                                                   "partition": "debug"}]},
                              "schema.enum", "recipes[0].name")
    assert hit.finding.hint == "did you mean `gemma-2b-sft`?"


@pytest.mark.parametrize(("overrides", "rule", "path", "message", "hint"), [
    pytest.param({**MIXED, "recipes": [recipe("llama3-8b-pretrain", nodes=Here(5))]},
                 "recipes.partition", "recipes[0].nodes",
                 "5 nodes is more than partition debug holds with at least 8 GPU(s) per node (4)",
                 "use at most 4", id="mixed-partition-says-which-nodes-count"),
    pytest.param({"recipes": [recipe("llama3-8b-pretrain", Here("debug"))]},
                 "recipes.partition", "recipes[0].partition",
                 "llama3-8b-pretrain needs at least 8 GPU(s) per node; partition debug has 0",
                 "submit it to a GPU partition", id="gpus-per-node"),
    pytest.param({**GPU, "recipes": [recipe("llama3-70b-pretrain", nodes=Here(3))]},
                 "recipes.gpus", "recipes[0].nodes",
                 "llama3-70b-pretrain needs 32 GPUs; 3 node(s) x 8 GPU(s) of partition debug "
                 "have 24", "use at least 4 nodes", id="gpus-of-the-job"),
])
def test_messages_name_the_numbers(rules_check, overrides, rule, path, message, hint):
    hit = rules_check.refused(overrides, rule, path)
    assert (hit.finding.message, hit.finding.hint) == (message, hint)


def test_a_relative_data_path_is_refused_by_the_model(rules_check):
    hit = rules_check.refused({**GPU, "recipes": [recipe("llama3-8b-pretrain",
                                                         data_path=Here("data/web"))]},
                              "schema.pattern", "recipes[0].data_path")
    assert hit.finding.severity == "error"
