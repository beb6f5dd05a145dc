"""Check blueprint files and print every problem in one run.

Each problem is one line on stdout: FILE:LINE:COL: error: KEY.PATH: message (hint).
Warnings print the same way with `warning:` and do not fail. A valid file says
`FILE: ok` on stderr; when there are problems a count line ends stderr: "2 errors,
1 warning". On a terminal `error` and `warning` are coloured; never in a pipe, a file,
the JSON form, or with NO_COLOR set or TERM=dumb.

Exit status: 0 valid (warnings allowed), 1 invalid, 2 usage error or unreadable file
(2 too when stdout cannot be written, as on a full disk; the reason on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys

from clusterprint.cli.commands import file_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """validate FILE... [--format text|json] [--quiet]."""
    parser.add_argument("files", nargs="+", metavar="FILE", type=file_argument,
                        help="blueprint files (.yaml or .json)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text: one line per problem (default); json: a list of findings")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print errors only, not warnings, the ok lines or the count")


def run(args: argparse.Namespace) -> int:
    """Validate each file; the exit status is the worst file's."""
    from clusterprint.blueprint.validate import check_file, printable
    from clusterprint.cli.commands import print_count, print_findings

    results = [check_file(f) for f in args.files]
    located = [f for r in results for f in r.findings
               if not (args.quiet and f.finding.severity == "warning")]
    if args.format == "json":
        json.dump([f.as_json() for f in located], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_findings(located, sys.stdout)
        if not args.quiet:
            for result in results:
                if result.ok:
                    print(printable(f"{result.file}: ok"), file=sys.stderr)
            print_count(located, sys.stderr)
    return max(r.exit_code for r in results)
