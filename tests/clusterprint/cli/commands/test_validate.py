"""clusterprint validate: one line per problem, JSON on request, the contract's exit codes."""

import json

import pytest

from clusterprint.cli.main import main
from tests.support.blueprint_texts import LINE_FORMAT, Here, blueprint_text
from tests.support.paths import ROOT

BLUEPRINTS = sorted((ROOT / "blueprints").glob("*.yaml"))
JSON_KEYS = {"file", "line", "column", "path", "rule", "severity", "message", "hint"}


@pytest.fixture
def write(tmp_path):
    """``write(name, text)``: a blueprint file in a temporary folder, as a path string."""
    def make(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text)
        return str(path)
    return make


@pytest.fixture
def files(write):
    """One valid, one warning-only and one invalid blueprint file."""
    return {
        "valid": write("valid.yaml", blueprint_text()),
        "warning": write("warning.yaml", blueprint_text(
            {"slurm.nodesets[1]": {"name": "spare", "machine_type": "n2-standard-4",
                                   "count": 1}})),
        "invalid": write("invalid.yaml", blueprint_text(
            {"zone": Here("us-east1-b"), "slurm.nodesets[0].count": 2,
             "storage.home.filestore.capacity_gib": 10000})),
    }


def run(capsys, *argv):
    """Exit status, stdout lines and stderr of ``clusterprint validate ARGV``."""
    code = main(["validate", *argv])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


@pytest.mark.parametrize("path", BLUEPRINTS, ids=lambda p: p.name)
def test_reference_blueprints_are_valid(capsys, path):
    code, out, err = run(capsys, str(path))
    assert (code, out) == (0, [])
    assert err == f"{path}: ok\n"


def test_valid_file(capsys, files):
    assert run(capsys, files["valid"]) == (0, [], f"{files['valid']}: ok\n")


def test_warnings_print_but_do_not_fail(capsys, files):
    code, out, err = run(capsys, files["warning"])
    assert code == 0
    assert len(out) == 1 and ": warning: slurm.nodesets[1].name: " in out[0]
    assert LINE_FORMAT.match(out[0])
    assert err == f"{files['warning']}: ok\n1 warning\n"


def test_invalid_file_prints_every_problem(capsys, files):
    code, out, err = run(capsys, files["invalid"])
    assert code == 1
    assert [line.split(": ")[2] for line in out] == ["zone", "storage.home.filestore.capacity_gib"]
    assert all(LINE_FORMAT.match(line) for line in out)
    assert out[0].startswith(f"{files['invalid']}:5:7: error: zone: zone us-east1-b is not in")
    assert err == "2 errors\n"


def test_missing_file_exits_2(capsys, tmp_path):
    missing = str(tmp_path / "missing.yaml")
    assert run(capsys, missing) == (2, [f"{missing}: error: no such file"], "1 error\n")


@pytest.mark.parametrize(("names", "code"), [
    (["valid", "warning"], 0),
    (["valid", "invalid"], 1),
    (["invalid", "missing"], 2),
    (["missing", "valid"], 2),
])
def test_several_files_worst_wins(capsys, files, tmp_path, names, code):
    paths = [files.get(n, str(tmp_path / "missing.yaml")) for n in names]
    assert run(capsys, *paths)[0] == code


def test_several_files_report_each(capsys, files):
    _, out, err = run(capsys, files["invalid"], files["warning"], files["valid"])
    assert {line.split(":")[0] for line in out} == {files["invalid"], files["warning"]}
    assert err.splitlines() == [f"{files['warning']}: ok", f"{files['valid']}: ok",
                                "2 errors, 1 warning"]


def test_the_count_line_counts_every_file_and_ends_the_output(capsys, files, tmp_path):
    missing = str(tmp_path / "missing.yaml")
    _, out, err = run(capsys, files["invalid"], missing, files["warning"], files["warning"])
    assert len(out) == 5
    assert err.splitlines()[-1] == "3 errors, 2 warnings"


def test_json_format_has_no_count_line(capsys, files):
    code, _, err = run(capsys, "--format", "json", files["invalid"])
    assert (code, err) == (1, "")


def test_json_format(capsys, files):
    code, out, _ = run(capsys, "--format", "json", files["invalid"], files["warning"])
    findings = json.loads("\n".join(out))
    assert code == 1
    assert all(set(f) == JSON_KEYS for f in findings)
    assert [(f["rule"], f["severity"]) for f in findings] == [
        ("location.zone-in-region", "error"), ("storage.filestore-capacity", "error"),
        ("names.unused-nodeset", "warning")]
    assert findings[0] == {
        "file": files["invalid"], "line": 5, "column": 7, "path": "zone",
        "rule": "location.zone-in-region", "severity": "error",
        "message": "zone us-east1-b is not in region us-central1",
        "hint": "try us-central1-a, or region us-east1"}


def test_json_format_of_a_valid_file_is_an_empty_list(capsys, files):
    code, out, _ = run(capsys, "--format", "json", files["valid"])
    assert (code, json.loads("\n".join(out))) == (0, [])


def test_json_format_of_an_unreadable_file(capsys, tmp_path):
    code, out, _ = run(capsys, "--format", "json", str(tmp_path))
    [finding] = json.loads("\n".join(out))
    assert code == 2
    assert (finding["line"], finding["rule"]) == (None, "file.unreadable")


def test_quiet_prints_errors_only(capsys, files):
    code, out, err = run(capsys, "--quiet", files["warning"], files["valid"], files["invalid"])
    assert code == 1
    assert len(out) == 2 and all(": error: " in line for line in out)
    assert err == ""


def test_json_file_is_read_as_strict_json(capsys, write):
    path = write("bp.json", '{\n  "apiVersion": "clusterprint/v1",\n}\n')
    code, out, _ = run(capsys, path)
    assert (code, out) == (1, [f"{path}:2:34: error: invalid JSON: trailing comma before `}}`"])


@pytest.mark.parametrize("argv", [[], ["--format", "xml", "bp.yaml"]])
def test_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(["validate", *argv])
    assert exc.value.code == 2
    assert "usage: clusterprint validate" in capsys.readouterr().err


def test_help_explains_output_and_exit_codes(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["validate", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert "FILE:LINE:COL: error: KEY.PATH: message (hint)" in out
    assert "0 valid (warnings allowed), 1 invalid, 2 usage error or unreadable file" in out
    assert "--format" in out and "--quiet" in out


@pytest.mark.parametrize(("overrides", "line"), [
    ({"slurm.nodesets[0].machine_type": Here("a3-ultragpu-8")},
     "error: slurm.nodesets[0].machine_type: a3-ultragpu-8 is not a machine type clusterprint "
     "knows (did you mean a3-ultragpu-8g? if it is newer than the catalog, set "
     "slurm.nodesets[0].machine_type_unlisted: true; "),
    ({"slurm.nodesets[0].machine_type": Here("a4-highgpu-8g")},
     "error: slurm.nodesets[0].machine_type: a4-highgpu-8g is not offered in zone us-central1-a "
     "(did you mean us-central1-b? zones of us-central1 that offer it: us-central1-b; if the "
     "catalog's zone table is older than the zone's offer, set zone_unlisted: true)"),
], ids=["type-the-catalog-does-not-know", "zone-without-the-type"])
def test_what_the_wizard_refuses_fails_validate_with_the_close_match(capsys, write, overrides,
                                                                     line):
    code, out, _ = run(capsys, write("bad.yaml", blueprint_text(overrides)))
    assert code == 1
    assert len(out) == 1 and line in out[0]


def test_the_escapes_let_a_type_and_zone_newer_than_the_catalog_through_as_warnings(capsys,
                                                                                    write):
    newer = write("newer.yaml", blueprint_text({
        "slurm.nodesets[0].machine_type": "a5-ultragpu-8g",
        "slurm.nodesets[0].machine_type_unlisted": True,
        "slurm.nodesets[1]": {"name": "a4", "machine_type": "a4-highgpu-8g", "count": 1},
        "slurm.partitions[0].nodesets": ["cpu", "a4"], "zone_unlisted": True}))
    code, out, _ = run(capsys, newer)
    assert code == 0
    assert [line.split(": ")[2:4] for line in out] == [
        ["slurm.nodesets[0].machine_type", "a5-ultragpu-8g is not in clusterprint's catalog, so "
                                           "its GPUs, NICs and price are unknown; its nodes are "
                                           "then built as CPU nodes"],
        ["slurm.nodesets[1].machine_type", "a4-highgpu-8g is not offered in zone us-central1-a "
                                           "as far as the catalog's zone table knows; "
                                           "zone_unlisted says it is (check it is"]]
