"""Compare two blueprints or saved plans: what would be created, updated, replaced, deleted.

OLD and NEW are blueprint files (.yaml, .yml, .json) or plans saved with
`clusterprint plan --json` (recognised by their top-level "resources" key), each read
once, so either may be a pipe (`<(git show main:bp.yaml)`).
Resources match by (type, name); each changed input is listed old -> new, and a
change to an input the provider cannot update in place makes a replacement (the
table in clusterprint/preview/replacements.py names its source for each type). It then
says how the changes reach the VMs already running (clusterprint/preview/rollout.py):
the Slurm files live, other VM metadata at the next boot, a nodeset's new template only
on recreated VMs (with the command for each). This is an offline estimate;
`pulumi preview --diff` on the real stack is the authority.

Exit status: 0 nothing data-bearing is replaced or deleted; 3 a Filestore instance,
Lustre instance or bucket (or a managed cluster holding them) would be replaced or
deleted (data loss), unless --allow-data-loss (then 0, still flagged); 1 invalid
blueprint or unreadable plan (any JSON that is not what `plan --json` writes, such as a
Terraform state, is refused); 2 usage error or stdout that cannot be written (a full disk).
"""

from __future__ import annotations

import argparse
import json
import sys

from clusterprint.cli.commands import file_argument, print_count, print_findings

#: Exit status when a data-bearing resource would be replaced or deleted.
EXIT_DATA_LOSS = 3
EXIT_BAD_INPUT = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """diff OLD NEW [--json | --format text|json|markdown] [--allow-data-loss]."""
    parser.add_argument("old", metavar="OLD", type=file_argument,
                        help="blueprint or saved plan (before)")
    parser.add_argument("new", metavar="NEW", type=file_argument,
                        help="blueprint or saved plan (after)")
    # One or the other: with both, whichever came last would win without a word.
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                      help="text (default), json (machine-readable), markdown (a PR comment)")
    form.add_argument("--json", dest="format", action="store_const", const="json",
                      help="same as --format json")
    parser.add_argument("--allow-data-loss", action="store_true",
                        help="exit 0 even when Filestore, Lustre or a bucket would be "
                             "replaced or deleted (still flagged in the output)")


def run(args: argparse.Namespace) -> int:
    """Load both sides, diff them, print the chosen form; the exit status flags data loss."""
    from clusterprint.preview.diff import DiffInputError, diff_plans, load_plan
    from clusterprint.preview.diff_report import markdown_report, text_report

    try:
        old, new = load_plan(args.old), load_plan(args.new)
    except DiffInputError as exc:
        if exc.findings:
            print_findings(exc.findings, sys.stderr)
            print_count(exc.findings, sys.stderr)
        else:
            print(exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    diff = diff_plans(old, new)
    if args.format == "json":
        data = diff.as_json()
        data["allowDataLoss"] = args.allow_data_loss
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    else:
        report = markdown_report if args.format == "markdown" else text_report
        sys.stdout.write(report(diff, args.old, args.new, args.allow_data_loss))
    return EXIT_DATA_LOSS if diff.data_loss and not args.allow_data_loss else 0
