"""Reading blueprint files: every way a file can be wrong is one finding at its line."""

import json
import time

import pytest

from clusterprint.blueprint.loader import MAX_DEPTH, MAX_FILE_BYTES, load_document, parse
from clusterprint.blueprint.validate import check_file
from tests.support.blueprint_texts import LINE_FORMAT, MINIMAL, blueprint_text, describe

#: The slowest refusal allowed for a hostile file on a busy 2-core machine.
QUICK_S = 5.0


def only_finding(checked):
    """The single finding of a file that failed to load, checked against the contract."""
    assert checked.blueprint is None
    assert len(checked.findings) == 1, describe(checked)
    located = checked.findings[0]
    assert LINE_FORMAT.match(located.line_text()) or located.line is None, located.line_text()
    return located


@pytest.mark.parametrize(("text", "line", "column", "message"), [
    ("a: 1\nb: [1, 2\nc: 3\n", 3, 2, "invalid YAML: expected ',' or ']', but got ':'"),
    ("a:\n  b: 1\n c: 2\n", 3, 2,
     "invalid YAML: expected <block end>, but found '<block mapping start>'"),
    ("a:\n\tb: 1\n", 2, 1, "invalid YAML: found character '\\t' that cannot start any token"),
    ("name: a: b\n", 1, 8, "invalid YAML: mapping values are not allowed here"),
    ('name: "demo\nzone: x\n', 3, 1, "invalid YAML: found unexpected end of stream"),
    ("apiVersion: clusterprint/v1\napiVersion: clusterprint/v2\n", 2, 1,
     'invalid YAML: found duplicate key "apiVersion"'),
    ("a: 1\n---\nb: 2\n", 2, 1, "invalid YAML: expected a single document in the stream, "
                                "but found another document"),
    ("? [a]\n: b\n", 1, 3, "mapping keys must be plain strings"),
], ids=["unclosed-list", "bad-indent", "tab", "colon-in-value", "unclosed-quote",
        "duplicate-key", "two-documents", "list-as-key"])
def test_yaml_syntax_errors_point_at_line_and_column(check, text, line, column, message):
    found = only_finding(check(text))
    assert (found.line, found.column, found.finding.message) == (line, column, message)
    assert found.finding.rule == "file.syntax"


@pytest.mark.parametrize(("value", "column", "message"), [
    ("1" + "0" * 5000, 6, "a number of 5001 digits is too long (at most 4300 digits)"),
    ("-" + "9" * 4301, 6, "a number of 4301 digits is too long (at most 4300 digits)"),
    ("2024-13-45", 6, "`2024-13-45` is not a valid date (month must be in 1..12)"),
    ("!!int abc", 6, "`abc` is not a valid integer"),
    ("!!float x", 6, "`x` is not a valid number"),
    ("!!bool maybe", 6, "`maybe` is not a valid boolean"),
], ids=["long-integer", "long-negative", "bad-date", "int-tag", "float-tag", "bool-tag"])
def test_values_yaml_cannot_convert_point_at_their_line(check, value, column, message):
    text = blueprint_text() + f"labels:\n  a: {value}\n"
    found = only_finding(check(text))
    assert (found.line, found.column) == (len(text.splitlines()), column)
    assert found.finding.message == f"invalid YAML: {message}"


@pytest.mark.parametrize(("char", "code"), [("\x01", "0001"), ("\x07", "0007"),
                                            ("\x7f", "007F"), ("\ufffe", "FFFE")])
def test_control_characters_point_at_their_real_line(check, char, code):
    text = blueprint_text() + f'labels:\n  team: "ml{char}"\n'
    found = only_finding(check(text))
    assert (found.line, found.column) == (len(text.splitlines()), 12)
    assert found.finding.message == (f"invalid YAML: control character U+{code} is not allowed "
                                     "(write it as an escape inside double quotes)")
    assert "position" not in found.line_text() and "unicode string" not in found.line_text()


@pytest.mark.parametrize(("text", "rule"), [
    ("", "file.empty"), ("  \n\n", "file.empty"), ("# only\n# comments\n", "file.empty"),
    ("---\n", "file.empty"),
])
def test_empty_and_comment_only_files(check, text, rule):
    found = only_finding(check(text))
    assert (found.line, found.column, found.finding.rule) == (1, 1, rule)
    assert "blueprint" in found.finding.message


@pytest.mark.parametrize(("text", "line", "column", "message"), [
    ('{\n  "apiVersion": "clusterprint/v1",\n  "kind": "TrainingCluster",\n}\n', 3, 28,
     "invalid JSON: trailing comma before `}`"),
    ('{"a": [1,\n 2,\n ]}', 2, 3, "invalid JSON: trailing comma before `]`"),
    ('{\n "a": 1\n "b": 2\n}', 3, 2,
     "invalid JSON: expected `,` or the end of the list or object"),
    ("{'a': 1}", 1, 2, "invalid JSON: expected a key in double quotes"),
    ('{"a": "x\x01y"}', 1, 9, "invalid JSON: control character in a string: write it as a "
                              "\\u escape"),
    ('{"a":\n  "unclosed}', 2, 3, "invalid JSON: a string is never closed"),
    ('{"a": "\\q"}', 1, 8, "invalid JSON: invalid backslash escape in a string"),
    ('{"a": 1} x', 1, 10, "invalid JSON: more text after the end of the document"),
    ('{"a": }', 1, 7, "invalid JSON: expected a value"),
    ('{"a":\n  1' + "0" * 5000 + "}", 2, 3,
     "invalid JSON: a number of 5001 digits is too long (at most 4300 digits)"),
    ('{\n  "name": "a",\n  "name": "b"\n}', 3, 3, 'invalid JSON: found duplicate key "name"'),
    ('{\n  "x": "NaN",\n  "mtu": NaN\n}', 3, 10, "invalid JSON: NaN is not a JSON number"),
    ('{"a": [1, -Infinity]}', 1, 11, "invalid JSON: -Infinity is not a JSON number"),
], ids=["trailing-comma-object", "trailing-comma-list", "missing-comma", "single-quotes",
        "control-character", "unclosed-string", "bad-escape", "extra-data", "no-value",
        "long-integer", "duplicate-key", "nan", "infinity"])
def test_json_errors_point_at_their_line(check, text, line, column, message):
    found = only_finding(check(text, is_json=True))
    assert (found.line, found.column, found.finding.message) == (line, column, message)


def test_json_blueprint_is_as_valid_as_its_yaml(check):
    assert check(json.dumps(MINIMAL, indent=2), is_json=True).exit_code == 0
    assert check(json.dumps(MINIMAL), is_json=True).exit_code == 0


def test_json_findings_have_json_lines(check):
    data = json.loads(json.dumps(MINIMAL))
    data["slurm"]["nodesets"][0]["count"] = "two"
    text = json.dumps(data, indent=2)
    [found] = check(text, is_json=True).findings
    assert text.splitlines()[found.line - 1].strip() == '"count": "two"'
    assert found.finding.message == 'expected an integer, got a string ("two")'


@pytest.mark.parametrize(("text", "got"), [
    ("- apiVersion: clusterprint/v1\n", "a list"),
    ("hello\n", 'a string ("hello")'),
    ("42\n", "an integer (42)"),
])
def test_root_must_be_a_mapping(check, text, got):
    found = only_finding(check(text))
    assert found.finding.message == f"a blueprint is a mapping of keys, got {got}"
    assert (found.line, found.finding.rule) == (1, "schema.type")


def test_missing_file_is_a_usage_error(tmp_path):
    checked = check_file(str(tmp_path / "nope.yaml"))
    found = only_finding(checked)
    assert checked.exit_code == 2
    assert found.line_text() == f"{tmp_path / 'nope.yaml'}: error: no such file"


def test_directory_is_a_usage_error(tmp_path):
    checked = check_file(str(tmp_path))
    assert checked.exit_code == 2
    assert only_finding(checked).finding.message == "is a directory, not a blueprint file"


def test_empty_file_name_is_a_usage_error_not_the_current_folder():
    checked = check_file("")
    assert checked.exit_code == 2
    assert only_finding(checked).finding.message == "the file name is empty"


def test_non_utf8_names_the_line(tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_bytes(b"apiVersion: clusterprint/v1\nkind: TrainingCluster\nname: caf\xe9\n")
    checked = check_file(str(path))
    found = only_finding(checked)
    assert checked.exit_code == 1
    assert (found.line, found.finding.message) == (3, "file is not UTF-8 text")


def test_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bp.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(MINIMAL).encode())
    assert check_file(str(path)).exit_code == 0


def test_file_over_the_limit_is_refused_before_parsing(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text(blueprint_text() + "# " + "x" * MAX_FILE_BYTES + "\n")
    start = time.monotonic()
    found = only_finding(check_file(str(path)))
    assert time.monotonic() - start < QUICK_S
    assert found.finding.rule == "file.size"
    assert found.finding.message == "file is over 1 MiB, the limit for a blueprint"


def test_endless_device_is_refused_not_read_forever():
    start = time.monotonic()
    found = only_finding(check_file("/dev/zero"))
    assert time.monotonic() - start < QUICK_S
    assert found.finding.rule == "file.size"


def test_billion_laughs_is_refused_quickly(check):
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    start = time.monotonic()
    found = only_finding(check("\n".join(lines) + "\n"))
    assert time.monotonic() - start < QUICK_S
    assert found.finding.message == ("document is too large or too deep once aliases are "
                                     "expanded")


@pytest.mark.parametrize(("text", "is_json"), [
    ("a: " + "[" * 5000 + "]" * 5000, False),
    ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", True),
    ("a: " + "{b: " * 3000 + "1" + "}" * 3000, False),
    ("a:\n" + "- " * 5000 + "x\n", False),
], ids=["flow-lists", "json", "flow-mappings", "block-lists"])
def test_deep_nesting_is_refused_quickly(check, text, is_json):
    start = time.monotonic()
    found = only_finding(check(text, is_json))
    assert time.monotonic() - start < QUICK_S
    assert found.finding.rule == "file.size"
    assert "nests" in found.finding.message


def test_nesting_at_the_limit_loads(check):
    text = "a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n"
    assert parse(text, False).data == {"a": _nested(MAX_DEPTH)}


def _nested(depth):
    value = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_positions_of_keys_and_values(tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text("name: demo\nslurm:\n  nodesets:\n    - name: cpu\n      count: 2\n")
    doc = load_document(str(path))
    assert doc.position(("name",)) == (1, 7)
    assert doc.position(("name",), key=True) == (1, 1)
    assert doc.position(("slurm", "nodesets", 0)) == (4, 7)
    assert doc.position(("slurm", "nodesets", 0, "count")) == (5, 14)
    # A key the file leaves out is placed at its nearest written ancestor.
    assert doc.position(("slurm", "nodesets", 0, "placement")) == (4, 7)
    assert doc.position(("network", "mtu")) == (1, 1)


def test_empty_value_is_reported_on_its_own_line(check):
    text = blueprint_text().replace('zone: "us-central1-a"', "zone:")
    [found] = check(text).findings
    assert text.splitlines()[found.line - 1] == "zone:"
    assert found.finding.message == "expected a string, got nothing (null)"


@pytest.mark.parametrize(("value", "got"), [
    ("2024-01-01", "a date (2024-01-01)"),
    ("!!binary aGVsbG8=", "binary data"),
    ("!custom demo", "a tagged YAML value"),
])
def test_yaml_only_values_are_named_in_words(check, value, got):
    [found] = check(blueprint_text().replace('name: "demo"', f"name: {value}")).findings
    assert found.finding.message == f"expected a string, got {got}"


def test_number_key_is_an_unknown_key_on_its_line(check):
    text = blueprint_text() + "network:\n  mtu: 8244\n  1: x\n"
    [found] = check(text).findings
    assert (found.line, found.column) == (len(text.splitlines()), 3)
    assert (found.finding.path, found.finding.message) == (("network", "1"), "unknown key")
