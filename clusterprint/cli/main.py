"""The ``clusterprint`` command: validate, new, schema, render, plan and diff.

Each command lives in ``clusterprint.cli.commands.<name>`` with ``add_arguments`` and
``run``; this module imports only the one being run, so ``validate`` never pays for
Pulumi's import time.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from clusterprint.cli.version import version

#: Command name -> one-line help. The module ``clusterprint.cli.commands.<name>`` implements it.
COMMANDS = {
    "validate": "check blueprint files and print every problem, one per line",
    "new": "write a first blueprint: a wizard on a terminal, or the same questions as flags",
    "schema": "print the blueprint JSON Schema (the one committed in schemas/)",
    "render": "write slurm.conf, gres.conf, cgroup.conf and node scripts for a blueprint",
    "plan": "list the resources `pulumi up` would create, offline under Pulumi's mocks",
    "diff": "compare two blueprints or saved plans: create, update, replace, delete",
}

#: Exit status for usage errors and unreadable files (argparse's own choice too).
EXIT_USAGE = 2
#: Exit status when the reader of stdout goes away, as for a process killed by SIGPIPE.
EXIT_BROKEN_PIPE = 141
#: Exit status when stdout cannot take the output (a full disk, ``> /dev/full``).
EXIT_UNWRITTEN = EXIT_USAGE

DESCRIPTION = """\
Slurm GPU training clusters on Google Cloud from one blueprint.

Write a blueprint (see blueprints/), check it offline with `validate`, review what
`plan` and `diff` say, then run `pulumi up` with the project's Pulumi.yaml.
"""


def _command_module(name: str):
    module_name = name.replace("-", "_")
    return importlib.import_module(f"clusterprint.cli.commands.{module_name}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; only the command ``only`` loads its module and arguments.

    With no command chosen (``clusterprint --help``) no command module is imported: the
    top-level help needs only the names, and stays fast and independent of Pulumi.
    """
    parser = argparse.ArgumentParser(
        prog="clusterprint", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"clusterprint {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        if name != only:
            sub.add_parser(name, help=help_text)
            continue
        module = _command_module(name)
        command = sub.add_parser(name, help=help_text, description=module.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in COMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    stdout = sys.stdout
    sys.stdout = _GuardedStdout(stdout)
    try:
        status = _command_module(args.command).run(args)
        sys.stdout.flush()  # a failed write must fail here, not in the interpreter's exit
        return status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader left (`| head`): the result is unknown, so never report success.
        _discard_stdout(stdout)
        return EXIT_BROKEN_PIPE
    except OutputNotWritten as exc:
        _discard_stdout(stdout)
        reason = exc.error.strerror or str(exc.error)
        print(f"clusterprint {args.command}: cannot write the output: {reason}", file=sys.stderr)
        return EXIT_UNWRITTEN
    finally:
        sys.stdout = stdout


class OutputNotWritten(Exception):
    """stdout refused a write (a full disk): told apart from the errors of files read."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _GuardedStdout:
    """stdout whose write errors become OutputNotWritten; everything else passes through."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write, or say that stdout itself failed."""
        return self._guarded(self._stream.write, text)

    def flush(self) -> None:
        """Flush, or say that stdout itself failed."""
        self._guarded(self._stream.flush)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)

    @staticmethod
    def _guarded(call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputNotWritten(exc) from None


def _discard_stdout(stream) -> None:
    """Point stdout at /dev/null so the interpreter's final flush of what is left stays quiet."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # a stream without a descriptor holds nothing to flush
        return
    os.dup2(os.open(os.devnull, os.O_WRONLY), fd)

