"""The jinja2 environment every template is rendered with.

Templates live in the package (``clusterprint/templates``) so an installed wheel renders
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
        loader=jinja2.PackageLoader("clusterprint", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["shell_quote"] = lambda value: shlex.quote(str(value))
    return env


def render(template: str, **context: object) -> str:
    """The text of ``template`` (a path under ``clusterprint/templates``) with ``context``."""
    return environment().get_template(template).render(**context)
