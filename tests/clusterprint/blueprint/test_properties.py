"""Random mutations of every reference blueprint never crash the validator.

Each mutated blueprint ends valid (exit 0) or invalid with at least one error line
(exit 1), every line in the contract's form and in words; never an exception, never a
partial result.
"""

import copy
import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from clusterprint.blueprint.loader import parse
from clusterprint.blueprint.validate import check_text
from tests.support.blueprint_texts import LINE_FORMAT, to_yaml
from tests.support.paths import ROOT

TEXTS = {p.name: p.read_text() for p in sorted((ROOT / "blueprints").glob("*.yaml"))}
REFERENCES = {name: parse(text, False).data for name, text in TEXTS.items()}

#: Keys whose values name or place an entry; list items (a partition's nodesets) count too.
REFERENCE_KEYS = {"lustre", "partition", "name", "bucket", "mount", "reservation"}

WRONG_VALUES = st.one_of(
    st.integers(-(10**12), 10**12), st.text(max_size=12), st.booleans(), st.none(),
    st.floats(), st.lists(st.integers(0, 9), max_size=3),
    st.dictionaries(st.sampled_from(["name", "x", "count"]), st.integers(0, 9), max_size=2),
)
OUT_OF_RANGE = st.one_of(st.sampled_from([-1, 0, 1, 7, 1299, 8897, 65537, 10**9]),
                         st.integers(-(10**15), 10**15))


def paths(node, prefix=()):
    """Every key path in plain data, parents before children."""
    items = node.items() if isinstance(node, dict) else (
        enumerate(node) if isinstance(node, list) else ())
    for key, value in items:
        yield (*prefix, key)
        yield from paths(value, (*prefix, key))


def parent_of(data, path):
    """The container holding ``path``'s last step."""
    for step in path[:-1]:
        data = data[step]
    return data


def value_at(data, path):
    """The value at ``path``."""
    return parent_of(data, path)[path[-1]]


@st.composite
def mutated(draw):
    """A reference blueprint with one to three mutations, as YAML or JSON text.

    "original" edits the reference file itself (ruamel round trip: its comments and flow
    mappings stay), "block" rewrites it one key per line, "json" as JSON.
    """
    name = draw(st.sampled_from(sorted(REFERENCES)))
    form = draw(st.sampled_from(["original", "block", "json"]))
    yaml = YAML(typ="rt", pure=True)
    data = yaml.load(TEXTS[name]) if form == "original" else copy.deepcopy(REFERENCES[name])
    for _ in range(draw(st.integers(1, 3))):
        everything = list(paths(data))
        if not everything:
            break
        path = draw(st.sampled_from(everything))
        holder, last = parent_of(data, path), path[-1]
        kind = draw(st.sampled_from(["drop", "wrong-type", "out-of-range", "rename"]))
        if kind == "drop":
            del holder[last]
        elif kind == "wrong-type":
            holder[last] = draw(WRONG_VALUES)
        elif kind == "out-of-range":
            numbers = [p for p in everything if isinstance(value_at(data, p), int)
                       and not isinstance(value_at(data, p), bool)]
            if numbers:
                target = draw(st.sampled_from(numbers))
                parent_of(data, target)[target[-1]] = draw(OUT_OF_RANGE)
        else:
            names = [p for p in everything if isinstance(value_at(data, p), str)
                     and (p[-1] in REFERENCE_KEYS or isinstance(p[-1], int))]
            if names:
                target = draw(st.sampled_from(names))
                value = value_at(data, target)
                parent_of(data, target)[target[-1]] = draw(st.sampled_from(
                    [value + "x", value[:-1], value.upper(), "/" + value, "gpu", "scratch",
                     "/home", "a3mega"]))
    if form == "original":
        out = io.StringIO()
        yaml.dump(data, out)
        return out.getvalue(), False
    return (json.dumps(data, indent=2), True) if form == "json" else (to_yaml(data), False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_blueprints_end_valid_or_with_errors(case):
    text, as_json = case
    checked = check_text("bp.json" if as_json else "bp.yaml", text, as_json)
    lines = [f.line_text() for f in checked.findings]
    assert checked.exit_code in (0, 1)
    if checked.exit_code == 0:
        assert checked.blueprint is not None
        assert not any(": error: " in line for line in lines)
    else:
        assert any(": error: " in line for line in lines), lines
    for line in lines:
        assert LINE_FORMAT.match(line), line
    # Every model error is put in words; pydantic's own phrasing never reaches a user.
    assert not [line for f, line in zip(checked.findings, lines, strict=True)
                if f.finding.rule == "schema.invalid"]
