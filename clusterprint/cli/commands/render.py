"""Render what the nodes of a blueprint's cluster run, into a folder.

Writes slurm.conf, gres.conf, cgroup.conf, slurmdbd.conf, plugstack.conf (clusters with
GPUs), scripts/<role>.sh (controller, login, compute-<nodeset>), the health check and
remediation programs with their configs under scripts/, jobs/ (the NCCL proof job per GPU
partition) and recipes/ into DIR, all at once: on any error nothing is left half-written.
DIR also gets a ``.clusterprint-render`` marker listing those files. ``--force`` replaces
only a folder holding such a marker and nothing but the files it lists, so it can never
delete a user's own files; the current folder, an ancestor of it, ``/``, the home folder
and a folder holding the blueprint are refused even when empty.

Exit status: 0 written, 1 invalid blueprint (the validator's lines on stderr),
2 usage error, unreadable file, or DIR refused or not written (the reason on stderr;
nothing touched), 3 --force could not finish after changing something: the new render
is in DIR but the one it replaced could not be removed, or neither could be put at DIR;
what is left of the old one is renamed DIR.previous (the message says what, where, why).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clusterprint.cli.commands import file_argument
from clusterprint.cli.main import EXIT_USAGE

#: Exit status when --force changed something it could not finish (the message says what).
EXIT_LEFT_OVER = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """render FILE --out DIR [--force]."""
    parser.add_argument("file", metavar="FILE", type=file_argument,
                        help="blueprint file (.yaml or .json)")
    parser.add_argument("--out", required=True, metavar="DIR", type=Path,
                        help="folder to write into; must be absent or empty, never the "
                             "current folder, an ancestor of it, / or home")
    parser.add_argument("--force", action="store_true",
                        help="replace DIR when an earlier render wrote it (it holds "
                             ".clusterprint-render and only the files that lists)")


def run(args: argparse.Namespace) -> int:
    """Check the blueprint, render it and write the folder."""
    from clusterprint.cli.commands import checked_blueprint
    from clusterprint.render import rendered_files
    from clusterprint.render.output import OutputExists, RenderLeftOver, write_tree

    blueprint, status = checked_blueprint(args.file)
    if blueprint is None:
        return status
    files = rendered_files(blueprint)
    try:
        write_tree(files, args.out, replace=args.force, source=Path(args.file))
    except OutputExists as exc:
        print(f"clusterprint render: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RenderLeftOver as exc:
        print(f"clusterprint render: {exc}", file=sys.stderr)
        return EXIT_LEFT_OVER
    except OSError as exc:
        print(f"clusterprint render: cannot write {args.out}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_USAGE
    print(f"{args.out}: wrote {len(files)} files", file=sys.stderr)
    return 0
