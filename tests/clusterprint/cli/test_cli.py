"""The clusterprint command: help that reads well, exit codes, no traceback ever."""

import errno
import io
import re
import subprocess
import sys

import pytest

from clusterprint.cli.main import COMMANDS, main
from tests.support.cli_imports import loaded_modules
from tests.support.paths import ROOT


def test_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert out.startswith("usage: clusterprint [-h] [--version] COMMAND ...")
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
    assert result.stderr == "blueprints/a4.yaml: ok\n2 errors\n"


def test_validate_does_not_import_pulumi():
    loaded = loaded_modules(["validate", "-q", "blueprints/a3mega.yaml"],
                            watched=("pulumi", "pulumi_gcp", "jinja2", "jsonschema"))
    assert (loaded.statuses, loaded.modules) == ([0], [])


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


SMALL = "blueprints/cpu-small.yaml"


def clusterprint(*argv: str, stdin: str | None = None, stdout=subprocess.PIPE
                 ) -> subprocess.CompletedProcess:
    """``clusterprint ARGV`` as a user runs it: a real process in the repository root."""
    return subprocess.run([sys.executable, "-m", "clusterprint.cli", *argv], cwd=ROOT,
                          input=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=120)


def in_bash(line: str) -> subprocess.CompletedProcess:
    """A shell line where ``clusterprint`` is this checkout's CLI (for process substitution)."""
    return subprocess.run(["bash", "-c", f'clusterprint() {{ "{sys.executable}" -m '
                                         f'clusterprint.cli "$@"; }}; {line}'],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_plan_reads_a_blueprint_from_a_pipe():
    by_path = clusterprint("plan", "--json", SMALL)
    piped = clusterprint("plan", "--json", "/dev/stdin", stdin=(ROOT / SMALL).read_text())
    assert (piped.returncode, piped.stderr) == (0, "")
    assert piped.stdout == by_path.stdout and '"resources"' in piped.stdout


def test_diff_reads_blueprints_from_process_substitution():
    result = in_bash(f"clusterprint diff <(cat {SMALL}) <(cat {SMALL})")
    assert (result.returncode, result.stderr) == (0, "")
    assert "No changes." in result.stdout


def test_validate_and_plan_of_an_invalid_pipe_print_the_same_lines():
    text = (ROOT / SMALL).read_text().replace("zone: us-central1-c", "zone: us-east1-b")
    assert text != (ROOT / SMALL).read_text()
    validated = clusterprint("validate", "/dev/stdin", stdin=text)
    planned = clusterprint("plan", "/dev/stdin", stdin=text)
    assert validated.returncode == planned.returncode == 1
    assert validated.stdout.startswith("/dev/stdin:12:7: error: zone: zone us-east1-b is not in")
    # validate's findings (stdout) and its count line (stderr), all on plan's stderr.
    assert validated.stderr == "1 error\n"
    assert planned.stderr == validated.stdout + validated.stderr and planned.stdout == ""


@pytest.mark.parametrize("argv", [
    ["validate", "blueprints/missing.yaml", "tests/clusterprint/bad-input.yaml"],
    ["validate", "--format", "json", "tests/clusterprint/bad-input.yaml"],
    ["schema"],
    ["plan", SMALL],
], ids=["validate", "validate-json", "schema", "plan"])
def test_a_full_disk_is_one_line_and_exit_2(argv, tmp_path):
    bad = ROOT / "tests/clusterprint/bad-input.yaml"
    argv = [str(tmp_path / "bad.yaml") if a == str(bad.relative_to(ROOT)) else a for a in argv]
    (tmp_path / "bad.yaml").write_text("apiVersion: clusterprint/v1\nkind: Cluster\n")
    with open("/dev/full", "w") as full:
        result = clusterprint(*argv, stdout=full)
    assert result.returncode == 2
    assert result.stderr == (f"clusterprint {argv[0]}: cannot write the output: "
                             "No space left on device\n")


#: What argparse itself prints on stdout: the version and every help text.
ARGPARSE_OUTPUTS = [["--version"], ["--help"], *([name, "--help"] for name in COMMANDS)]


@pytest.mark.parametrize("argv", ARGPARSE_OUTPUTS, ids=" ".join)
def test_help_and_version_on_a_full_disk_are_one_line_and_exit_2(argv):
    """argparse drops its own write errors: without the guard these exited 0, having
    printed nothing."""
    with open("/dev/full", "w") as full:
        result = clusterprint(*argv, stdout=full)
    who = " ".join(["clusterprint", *argv[:-1]])
    assert (result.returncode, result.stderr) == (
        2, f"{who}: cannot write the output: No space left on device\n")


@pytest.mark.parametrize("argv", [*ARGPARSE_OUTPUTS, ["schema"], ["diff", SMALL, SMALL]],
                         ids=" ".join)
def test_a_closed_stdout_is_one_line_and_exit_2(argv):
    """Started with stdout closed (``>&-``), Python has no sys.stdout: the help was then
    sent to stderr with exit 0, and a command's output was a traceback."""
    result = in_bash(f"clusterprint {' '.join(argv)} >&-")
    who = "clusterprint" if argv[0].startswith("-") else f"clusterprint {argv[0]}"
    assert (result.returncode, result.stderr) == (
        2, f"{who}: cannot write the output: stdout is closed\n")


class _FullOnFlush(io.StringIO):
    """A buffered stdout on a full disk: the write is kept, the flush at exit fails."""

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_version_that_fails_only_at_flush_is_exit_2(monkeypatch, capsys):
    """The short version line stays in the buffer; it must be flushed before exit 0."""
    monkeypatch.setattr(sys, "stdout", _FullOnFlush())
    assert main(["--version"]) == 2
    assert capsys.readouterr().err == ("clusterprint: cannot write the output: "
                                       "No space left on device\n")


def test_help_written_in_full_still_exits_0():
    result = clusterprint("diff", "--help")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("usage: clusterprint diff ") and "Exit status" in result.stdout


def test_plan_leaves_no_event_loop_open():
    """After a plan the interpreter finds no open event loop to collect.

    An open loop collected at exit printed an asyncio traceback in about 1 run of 30;
    with ResourceWarning shown, every run that leaves one open says so on stderr.
    """
    argv = [sys.executable, "-W", "always::ResourceWarning", "-m", "clusterprint.cli"]
    runs = [subprocess.Popen([*argv, *command], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
            for command in (["plan", SMALL], ["plan", "--json", "blueprints/a4.yaml"],
                            ["diff", SMALL, "blueprints/a3mega.yaml"])]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert (run.returncode, err) == (0 if "diff" not in run.args else 3, ""), run.args


@pytest.mark.parametrize(("text", "line"), [
    ("apiVersion: clusterprint/v1\nname: n\ncount: 1" + "0" * 5000 + "\n",
     "{f}:3:8: error: invalid YAML: a number of 5001 digits is too long (at most 4300 digits)"),
    ('apiVersion: clusterprint/v1\nname: "a\x01b"\n',
     "{f}:2:9: error: invalid YAML: control character U+0001 is not allowed "
     "(write it as an escape inside double quotes)"),
], ids=["long-integer", "control-character"])
def test_unreadable_values_are_one_line_in_a_real_process(tmp_path, text, line):
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    result = clusterprint("validate", str(path))
    assert (result.returncode, result.stdout, result.stderr) == (
        1, line.format(f=path) + "\n", "1 error\n")


def test_a_key_with_a_newline_or_escape_prints_escaped_on_one_line(tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text('apiVersion: clusterprint/v1\n"fo\\no": 1\n"x\\e[31m": 2\n')
    result = clusterprint("validate", str(path))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert any(line.startswith(f"{path}:2:1: error: fo\\no: the key holds a control "
                               "character U+000A (newline)") for line in lines)
    assert any(line.startswith(f"{path}:3:1: error: x\\x1b[31m: the key holds a control "
                               "character U+001B (ESC)") for line in lines)
    assert "\x1b" not in result.stdout


@pytest.mark.parametrize("command", ["validate", "plan", "render"])
def test_an_empty_file_name_is_a_usage_error(command):
    argv = [command, ""] + (["--out", "out"] if command == "render" else [])
    result = clusterprint(*argv)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (f"clusterprint {command}: error: argument FILE: "
                                              "the file name is empty")
    assert "Traceback" not in result.stderr and result.stdout == ""
