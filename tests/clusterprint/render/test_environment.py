"""The heredoc filter: a file's text reaches the node byte for byte, and no line of it, the
marker's own word included, ever ends the heredoc and runs as a command."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from clusterprint.render import environment
from clusterprint.render.environment import heredoc

TEMPLATES = Path(environment.__file__).parent / "templates"

TEXTS = [
    "plain\n",
    "CLUSTERPRINT_EOF\ntouch canary\n",
    "CLUSTERPRINT_EOF\nCLUSTERPRINT_EOF_2\nCLUSTERPRINT_EOF_3\ntouch canary\n",
    " CLUSTERPRINT_EOF\nCLUSTERPRINT_EOF \n\tCLUSTERPRINT_EOF\nCLUSTERPRINT_EOF\r\n",
    "$(touch canary) `touch canary` ${IFS} $HOME \\ ' \" ; % ! *\n",
    "\n\nblank lines around\n\n",
    "no marker: EOF CLUSTERPRINT_EOFX\nünïcödé \u2028 \x1b[31m\n",
]


def through_bash(text: str, tmp_path) -> subprocess.CompletedProcess:
    """What ``cat`` reads from the heredoc, run by bash in ``tmp_path`` (where a command
    the text would run leaves ``canary``)."""
    script = tmp_path / "script.sh"
    script.write_bytes(f"cat >{tmp_path}/out {heredoc(text)}\necho after\n".encode())
    return subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_the_text_arrives_byte_for_byte_and_runs_nothing(text, tmp_path):
    done = through_bash(text, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"after\n"
    assert (tmp_path / "out").read_bytes() == text.encode()
    assert not (tmp_path / "canary").exists()


def test_the_marker_is_the_usual_one_unless_the_text_holds_it():
    assert heredoc("a\n") == "<<'CLUSTERPRINT_EOF'\na\nCLUSTERPRINT_EOF"
    assert heredoc("CLUSTERPRINT_EOF\n").startswith("<<'CLUSTERPRINT_EOF_2'\n")


@pytest.mark.parametrize("text", ["no newline at the end", "", "a\0b\n"])
def test_text_a_heredoc_cannot_carry_is_refused(text):
    with pytest.raises(ValueError):
        heredoc(text)


def test_no_template_writes_a_variable_into_a_heredoc_of_its_own():
    """``<<'M'`` then ``{{ text }}M`` is the idiom the filter replaces: a text holding the line
    M ended the heredoc there and ran the rest as root. Every text goes through ``heredoc``."""
    found = [f"{template.relative_to(TEMPLATES)}:{number}: {line}"
             for template in sorted(TEMPLATES.rglob("*.j2"))
             for number, line in enumerate(template.read_text().splitlines(), 1)
             if re.search(r"\}\}\s*[A-Z][A-Z0-9_]*EOF\s*$", line)]
    assert len(list(TEMPLATES.rglob("*.j2"))) > 20
    assert found == []


def test_every_bash_function_of_the_boot_scripts_is_defined_in_one_template():
    """Shared helpers live once (common.sh.j2), not copied into each role's part: the
    duplicates tool does not read templates. The RxDM prolog (rxdm.sh.j2) is a program of
    its own, with its own ``fail``."""
    folder = TEMPLATES / "scripts"
    defined: dict[str, list[str]] = {}
    for template in sorted(folder.glob("*.sh.j2")):
        if template.name == "rxdm.sh.j2":
            continue
        names = set(re.findall(r"^([a-z_][a-z0-9_]*)\(\) \{$", template.read_text(),
                               re.MULTILINE))
        for name in names:
            defined.setdefault(name, []).append(template.name)
    assert {"retry", "changed", "start_unit", "install_text"} <= set(defined)
    twice = {name: where for name, where in defined.items() if len(where) > 1}
    assert not twice, twice


def test_no_template_reads_os_release_itself():
    """Every template reads /etc/os-release through ``os_release``, its one way of doing so."""
    readers = [f"{template.relative_to(TEMPLATES)}:{number}"
               for template in sorted(TEMPLATES.rglob("*.j2"))
               for number, line in enumerate(template.read_text().splitlines(), 1)
               if environment.OS_RELEASE in line]
    assert readers == []


def test_os_release_reads_a_field_without_its_quotes(tmp_path):
    release = tmp_path / "os-release"
    release.write_text('ID=ubuntu\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\n')
    script = (f'{environment.os_release("VERSION_CODENAME")} {environment.NVIDIA_DISTRO}'
              .replace(environment.OS_RELEASE, str(release)))
    assert subprocess.run(["bash", "-c", f"echo {script}"], capture_output=True, text=True,
                          check=True).stdout == "noble ubuntu2404\n"
