"""Coloured levels on a terminal, plain text everywhere else (pipes, NO_COLOR, TERM=dumb)."""

import io
import os
import pty
import select
import subprocess
import sys
import time

import pytest

from clusterprint.blueprint.findings import Finding, Located, error, warning
from clusterprint.cli.terminal import LEVEL_COLOURS, RESET, colour_wanted, finding_line
from tests.support.blueprint_texts import blueprint_text
from tests.support.paths import ROOT

ESC = "\x1b["
RED_ERROR = f"{LEVEL_COLOURS['error']}error{RESET}"
YELLOW_WARNING = f"{LEVEL_COLOURS['warning']}warning{RESET}"


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("stream", "environ", "wanted"), [
    (Terminal(), {"TERM": "xterm-256color"}, True),
    (Terminal(), {}, True),
    (Terminal(), {"NO_COLOR": ""}, True),  # no-color.org: an empty value does not count
    (Terminal(), {"NO_COLOR": "1"}, False),
    (Terminal(), {"NO_COLOR": "false"}, False),  # any value at all
    (Terminal(), {"TERM": "dumb"}, False),
    (io.StringIO(), {"TERM": "xterm-256color"}, False),
], ids=["terminal", "no-term", "empty-no-color", "no-color", "no-color-any-value", "dumb",
        "not-a-terminal"])
def test_colour_only_on_a_terminal_that_wants_it(stream, environ, wanted):
    assert colour_wanted(stream, environ) is wanted


def test_a_closed_stream_gets_no_colour():
    with open(os.devnull, "w") as stream:
        pass
    assert colour_wanted(stream, {}) is False


def test_only_the_level_word_is_coloured():
    found = Located("bp.yaml", 5, 7, error(("zone",), "zone us-east1-b is not in region",
                                           "try us-central1-a"))
    assert finding_line(found, colour=True) == (
        f"bp.yaml:5:7: {RED_ERROR}: zone: zone us-east1-b is not in region (try us-central1-a)")
    assert finding_line(found, colour=False) == found.line_text()


def test_a_file_level_finding_colours_its_level_too():
    found = Located("missing.yaml", None, None, Finding((), "file.unreadable", "no such file"))
    assert finding_line(found, colour=True) == f"missing.yaml: {RED_ERROR}: no such file"


def test_an_escaped_file_name_moves_the_colour_with_it():
    """A newline in the file name prints as \\n; the colour still lands on the level."""
    found = Located("a\nb: error.yaml", 3, 8, warning(("network", "mtu"), "8000 differs"))
    assert finding_line(found, colour=True) == (
        f"a\\nb: error.yaml:3:8: {YELLOW_WARNING}: network.mtu: 8000 differs")


def environment(**changes: str) -> dict[str, str]:
    """This process's environment without colour settings, as a terminal user has it."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    return {**env, "TERM": "xterm-256color", **changes}


def in_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``clusterprint ARGV`` with stdout and stderr on a real pseudo-terminal."""
    main_fd, sub_fd = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "clusterprint.cli", *argv], cwd=ROOT,
                               stdin=subprocess.DEVNULL, stdout=sub_fd, stderr=sub_fd, env=env)
    os.close(sub_fd)
    output = b""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if not select.select([main_fd], [], [], 1)[0]:
                continue
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(main_fd)
    return process.wait(timeout=60), output.decode()


def piped(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``clusterprint ARGV`` with stdout and stderr on pipes."""
    result = subprocess.run([sys.executable, "-m", "clusterprint.cli", *argv], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, env=env)
    return result.returncode, result.stdout + result.stderr


@pytest.fixture(scope="module")
def bad(tmp_path_factory) -> str:
    """A blueprint with an error and a warning."""
    path = tmp_path_factory.mktemp("bp") / "bad.yaml"
    path.write_text(blueprint_text({
        "zone": "us-east1-b",
        "slurm.nodesets[1]": {"name": "spare", "machine_type": "n2-standard-4", "count": 1}}))
    return str(path)


REFUSALS = {
    "validate": ["validate", "{bad}"],
    "plan": ["plan", "{bad}"],
    "diff": ["diff", "blueprints/cpu-small.yaml", "{bad}"],
}


@pytest.mark.parametrize("command", REFUSALS)
def test_a_terminal_sees_coloured_levels(bad, command):
    code, output = in_terminal([a.format(bad=bad) for a in REFUSALS[command]], environment())
    assert code == 1
    lines = output.replace("\r\n", "\n").splitlines()
    assert sum(RED_ERROR in line for line in lines) == 1, output
    assert sum(YELLOW_WARNING in line for line in lines) == 1, output
    assert lines[-1] == "1 error, 1 warning"  # the count line itself stays plain


@pytest.mark.parametrize("command", REFUSALS)
def test_a_pipe_gets_plain_text(bad, command):
    code, output = piped([a.format(bad=bad) for a in REFUSALS[command]], environment())
    assert code == 1
    assert ": error: zone:" in output and ": warning: slurm.nodesets[1].name:" in output
    assert ESC not in output


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}], ids=["NO_COLOR", "dumb"])
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_no_color_and_a_dumb_terminal_get_plain_text(bad, command, env):
    code, output = in_terminal([a.format(bad=bad) for a in REFUSALS[command]],
                               environment(**env))
    assert code == 1
    assert ": error: zone:" in output and ESC not in output


def test_json_is_never_coloured(bad):
    code, output = in_terminal(["validate", "--format", "json", bad], environment())
    assert code == 1
    assert '"severity": "error"' in output and ESC not in output
