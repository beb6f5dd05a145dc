"""Valid blueprints drawn over the model's whole range, for hypothesis: names over their
whole pattern, the longest included; time limits over the whole range the rules accept, in
every form Slurm reads, each with what scontrol shows of it. The real-Slurm tests boot
and submit to them (tests/slurm/test_generated_blueprints.py, test_nccl_jobs.py)."""

from __future__ import annotations

import re

from hypothesis import assume
from hypothesis import strategies as st

from clusterprint.blueprint import rules
from clusterprint.blueprint.model import (
    LIST_NAME_PATTERN,
    NAME_PATTERN,
    PARTITION_NAME_PATTERN,
    Blueprint,
)
from clusterprint.blueprint.slurm_time import (
    MAX_MINUTES,
    format_minutes,
    slurm_minutes,
    slurm_time_seconds,
)

MACHINE_TYPES = ["a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g", "n2-standard-4",
                 "c2-standard-60"]
LETTERS = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"


def names(pattern: str, shortest: int, longest: int) -> st.SearchStrategy[str]:
    """Names of ``pattern``: a letter, then letters, digits or hyphens, ending in no hyphen.

    The longest legal length is drawn as often as any other, so it is always tried.
    """
    @st.composite
    def draw_name(draw) -> str:
        length = draw(st.just(longest) | st.integers(shortest, longest))
        middle = draw(st.text(LETTERS + DIGITS + "-", min_size=length - 2,
                              max_size=length - 2)) if length > 2 else ""
        last = draw(st.sampled_from(LETTERS + DIGITS)) if length > 1 else ""
        name = draw(st.sampled_from(LETTERS)) + middle + last
        assert re.fullmatch(pattern, name), (pattern, name)
        return name
    return draw_name()


cluster_names = names(NAME_PATTERN, 2, 20)
nodeset_names = names(LIST_NAME_PATTERN, 1, 16)
partition_names = names(PARTITION_NAME_PATTERN, 1, 31)


def spelled(minutes: int, form: str, seconds: int) -> str:
    """``minutes`` in one of Slurm's time forms; ``M:S`` comes ``seconds`` (1-60) short.

    Slurm rounds seconds up to the next minute, so every form means exactly ``minutes``.
    """
    days, rest = divmod(minutes, 24 * 60)
    return {"M": f"{minutes}",
            "M:S": f"{minutes - 1}:{seconds:02d}",
            "H:M:S": f"{minutes // 60}:{minutes % 60:02d}:00",
            "D-H:M": f"{days}-{rest // 60}:{rest % 60}",
            "D-H:M:S": f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"}[form]


@st.composite
def time_limits(draw) -> tuple[str | None, str]:
    """A max_time the rules accept and how scontrol shows it back."""
    if draw(st.integers(0, 4)) == 0:
        text = draw(st.sampled_from([None, "UNLIMITED", "INFINITE"]))
        return text, "UNLIMITED"
    minutes = draw(st.sampled_from([1, MAX_MINUTES]) | st.integers(1, MAX_MINUTES))
    form = draw(st.sampled_from(["M", "M:S", "H:M:S", "D-H:M", "D-H:M:S"]))
    return spelled(minutes, form, draw(st.integers(1, 60))), format_minutes(minutes)


@st.composite
def default_times(draw, max_time: str | None, max_shown: str) -> tuple[str | None, str]:
    """A default_time within ``max_time`` (none, sometimes) and how scontrol shows it."""
    if draw(st.booleans()):
        return None, max_shown
    seconds = slurm_time_seconds(max_time) if max_time else None
    longest = MAX_MINUTES if seconds is None else slurm_minutes(seconds)
    minutes = draw(st.sampled_from([1, longest]) | st.integers(1, longest))
    form = draw(st.sampled_from(["M", "M:S", "H:M:S", "D-H:M", "D-H:M:S"]))
    return spelled(minutes, form, draw(st.integers(1, 60))), format_minutes(minutes)


def blueprint_of(cluster: str, nodesets: list[dict], partitions: list[dict]) -> Blueprint:
    """A blueprint of these parts in us-central1-b, a zone that offers every drawn machine type."""
    return Blueprint.model_validate({
        "apiVersion": "clusterprint/v1", "kind": "TrainingCluster", "name": cluster,
        "region": "us-central1", "zone": "us-central1-b",
        "slurm": {"nodesets": nodesets, "partitions": partitions}})


@st.composite
def blueprints(draw) -> tuple[Blueprint, dict[str, tuple[str, str]]]:
    """A valid blueprint with several nodesets and partitions, and each partition's
    MaxTime and DefaultTime as scontrol shows them."""
    nodeset_list = draw(st.lists(nodeset_names, min_size=2, max_size=4, unique=True))
    nodesets = []
    for name in nodeset_list:
        count = draw(st.integers(0, 64))
        nodesets.append({"name": name, "machine_type": draw(st.sampled_from(MACHINE_TYPES)),
                         "count": count, "max_count": draw(st.integers(max(count, 1), 256))})
    partitions, shown = [], {}
    for name in draw(st.lists(partition_names, min_size=2, max_size=4, unique=True)):
        members = draw(st.lists(st.sampled_from(nodeset_list), min_size=1, unique=True))
        max_time, max_shown = draw(time_limits())
        default_time, default_shown = draw(default_times(max_time, max_shown))
        shown[name] = (max_shown, default_shown)
        partitions.append({"name": name, "nodesets": members,
                           **({"max_time": max_time} if max_time else {}),
                           **({"default_time": default_time} if default_time else {})})
    marked = draw(st.none() | st.integers(0, len(partitions) - 1))
    if marked is not None:
        partitions[marked]["default"] = True
    blueprint = blueprint_of(draw(cluster_names), nodesets, partitions)
    assume(not [f for f in rules.check(blueprint) if f.severity == "error"])
    return blueprint, shown
