"""The jinja2 environment every template is rendered with.

Templates live in the package (``clusterprint/render/templates``) so an installed wheel renders
the same bytes as a checkout; undefined names fail instead of rendering as empty text.
"""

from __future__ import annotations

import shlex
from functools import cache

import jinja2


@cache
def environment() -> jinja2.Environment:
    """One shared environment: strict, no autoescape (the output is config and shell)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("clusterprint.render", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["shell_quote"] = lambda value: shlex.quote(str(value))
    env.filters["heredoc"] = heredoc
    env.globals["os_release"] = os_release
    env.globals["nvidia_distro"] = NVIDIA_DISTRO
    return env


#: Where a boot script reads the VM's distribution from.
OS_RELEASE = "/etc/os-release"


def os_release(key: str, drop: str = '"') -> str:
    """The bash command substitution that reads ``key`` of /etc/os-release, every character
    of ``drop`` removed: ``ID="ubuntu"`` reads ubuntu. The one way every template reads it."""
    return f"$(sed -n 's/^{key}=//p' {OS_RELEASE} | tr -d '{drop}')"


#: The release as NVIDIA's repository folders name it, ID and VERSION_ID without its dot:
#: ubuntu2404 for ID=ubuntu VERSION_ID="24.04".
NVIDIA_DISTRO = os_release("ID") + os_release("VERSION_ID", drop='".')


#: The end marker of a heredoc, unless a line of its content is that very word.
HEREDOC_MARKER = "CLUSTERPRINT_EOF"


def heredoc(text: str) -> str:
    """``text`` as a quoted bash heredoc, ``<<'MARKER'`` to the marker line: what a command
    written before it reads on stdin, byte for byte.

    The marker is one no line of ``text`` equals (CLUSTERPRINT_EOF, else CLUSTERPRINT_EOF_2 and
    on), so no content ends the heredoc early and runs its remaining lines as commands; it is
    quoted, so bash expands nothing in it. A heredoc ends in a newline and bash drops NUL
    bytes, so content without a final newline, or with a NUL, is refused rather than changed.
    """
    if not text.endswith("\n"):
        raise ValueError(f"heredoc content must end with a newline: {text[-40:]!r}")
    if "\0" in text:
        raise ValueError("heredoc content holds a NUL byte, which bash cannot carry")
    lines = set(text.split("\n"))
    marker, n = HEREDOC_MARKER, 1
    while marker in lines:
        n += 1
        marker = f"{HEREDOC_MARKER}_{n}"
    return f"<<'{marker}'\n{text}{marker}"


def render(template: str, **context: object) -> str:
    """The text of ``template`` (a path under ``templates/`` here) with ``context``."""
    return environment().get_template(template).render(**context)
