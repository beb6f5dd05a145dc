"""The clusterprint command: help that reads well, exit codes, no traceback ever."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusterprint.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]


def test_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert out.startswith("usage: clusterprint [-h] COMMAND ...")
    for name, help_text in COMMANDS.items():
        first_words = r"\s+".join(help_text.split()[:3])
        assert re.search(rf"^\s+{name}\s+{first_words}", out, re.MULTILINE), name


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "validate" in capsys.readouterr().err


def test_unknown_command_suggests_the_list(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["valdate", "bp.yaml"])
    assert exc.value.code == 2
    assert "invalid choice: 'valdate' (choose from 'validate'" in capsys.readouterr().err


def test_whole_process_never_prints_a_traceback(tmp_path):
    """The console entry, as a user runs it: findings on stdout, exit 1, nothing else."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: clusterprint/v1\nkind: TrainingCluster\nname: demo\n"
                   "region: us-central1\nzone: [us-central1-a\n")
    missing = tmp_path / "missing.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "clusterprint.cli", "validate", str(bad), "blueprints/a4.yaml",
         str(missing)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        f"{bad}:6:1: error: invalid YAML: expected ',' or ']', but got '<stream end>'",
        f"{missing}: error: no such file"]
    assert result.stderr == "blueprints/a4.yaml: ok\n"


def test_validate_does_not_import_pulumi(tmp_path):
    code = ("import sys; from clusterprint.cli import main; "
            "main(['validate', '-q', 'blueprints/a3mega.yaml']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_gcp', "
            "'jinja2', 'jsonschema')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_reader_going_away_is_never_success(tmp_path):
    """`validate ... | head -1` on invalid files must not turn into exit 0."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: clusterprint/v1\nkind: Cluster\nname: X\nzone: 1\n")
    argv = [sys.executable, "-m", "clusterprint.cli", "validate", "--format", "json",
            *[str(bad)] * 400]  # far more output than a pipe buffer holds
    with subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as process:
        assert process.stdout.read(1) == b"["
        process.stdout.close()
        assert process.wait(timeout=60) == 141
        assert process.stderr.read() == b""


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_explains_itself(capsys, name):
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert out.startswith(f"usage: clusterprint {name} ")
    assert "Exit status" in out or name == "schema"
