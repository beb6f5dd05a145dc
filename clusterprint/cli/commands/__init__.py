"""One module per ``clusterprint`` command: ``add_arguments(parser)`` and ``run(args)``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from clusterprint.blueprint.findings import Located
    from clusterprint.blueprint.model import Blueprint
    from clusterprint.build.compute import ComputeApi


def file_argument(text: str) -> str:
    """An argparse type for FILE arguments: an empty name is a usage error, not the folder ``.``."""
    if not text:
        raise argparse.ArgumentTypeError("the file name is empty")
    return text


def project_argument(text: str) -> str:
    """An argparse type for ``--project``: a project id as the blueprint's ``project`` takes
    one (the commands that call Google's APIs share it)."""
    import re

    from clusterprint.blueprint.model import PROJECT_PATTERN

    if not re.fullmatch(PROJECT_PATTERN, text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a project id")
    return text


def checked_blueprint(path: str) -> tuple[Blueprint | None, int]:
    """The valid blueprint in ``path`` and exit 0, or None and validate's exit status.

    Commands that need a valid blueprint print its findings to stderr exactly as
    ``validate`` prints them, warnings and the count line included, so their stdout
    stays their output.
    """
    from clusterprint.blueprint.validate import check_file

    checked = check_file(path)
    print_findings(checked.findings, sys.stderr)
    print_count(checked.findings, sys.stderr)
    return (checked.blueprint, 0) if checked.ok else (None, checked.exit_code)


def session_and_project(who: str, blueprint: Blueprint, project: str | None,
                        hint: str = "") -> tuple[Any, str] | None:
    """The Application Default Credentials' session and the project a command acts on (the
    flag's, else the blueprint's, else the credentials'); None once the reason is on stderr
    (the caller exits 2). ``hint`` follows the no-credentials line."""
    from clusterprint.build.compute import NoCredentials, authorized_session

    try:
        session, credentials_project = authorized_session()
    except NoCredentials as exc:
        print(f"{who}: {exc}{hint}", file=sys.stderr)
        return None
    project = project or blueprint.project or credentials_project
    if not project:
        print(f"{who}: no project: set `project` in the blueprint or pass --project",
              file=sys.stderr)
        return None
    return session, project


def print_findings(located: list[Located], stream: TextIO) -> None:
    """Each finding as its one line, the level word coloured when ``stream`` is a terminal."""
    from clusterprint.cli.terminal import colour_wanted, finding_line

    colour = colour_wanted(stream)
    for finding in located:
        print(finding_line(finding, colour), file=stream)


def print_count(located: list[Located], stream: TextIO) -> None:
    """The line that ends a list of findings, ``2 errors, 1 warning``; nothing for none."""
    from clusterprint.blueprint.findings import count_text

    text = count_text(f.finding for f in located)
    if text:
        print(text, file=stream)


def compute_api(who: str, project: str | None, blueprint: Blueprint,
                offline_hint: str = "") -> ComputeApi | None:
    """The Compute API of the project ``session_and_project`` finds, with the Application
    Default Credentials; None, having said why on stderr (``offline_hint`` follows the
    no-credentials line)."""
    from clusterprint.build.compute import ComputeApi, compute_url

    found = session_and_project(who, blueprint, project, offline_hint)
    if found is None:
        return None
    session, project = found
    return ComputeApi(session, project, compute_url())
