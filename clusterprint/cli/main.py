"""The ``clusterprint`` command: validate, new, schema, render, plan, diff, image, preflight
and status.

Each command lives in ``clusterprint.cli.commands.<name>`` with ``add_arguments`` and
``run``; this module imports only the one being run, so ``validate`` never pays for
Pulumi's import time.
"""

from __future__ import annotations

import argparse
import errno
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
    "image": "build the node images a blueprint boots (`image build`), or list them offline",
    "preflight": "check the project before `pulumi up`: APIs, roles, quota, reservations, images",
    "status": "show a deployed cluster's VMs: created, booting (the step), ready, failed",
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
    parser = _Parser(
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
    """Entry point of the console script; returns the exit status.

    stdout is guarded from the start, so ``--help`` and ``--version`` (printed while the
    arguments are parsed, then SystemExit) fail on a full disk or a closed stdout exactly
    as a command's output does.
    """
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    known = chosen if chosen in COMMANDS else None
    stdout = sys.stdout
    sys.stdout = _GuardedStdout(stdout)
    try:
        try:
            return _parse_and_run(build_parser(known), argv)
        except SystemExit:
            sys.stdout.flush()  # what --help printed must be written before exit 0
            raise
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader left (`| head`): the result is unknown, so never report success.
        _discard_stdout(stdout)
        return EXIT_BROKEN_PIPE
    except OutputNotWritten as exc:
        _discard_stdout(stdout)
        reason = exc.error.strerror or str(exc.error)
        who = f"clusterprint {known}" if known else "clusterprint"
        print(f"{who}: cannot write the output: {reason}", file=sys.stderr)
        return EXIT_UNWRITTEN
    finally:
        sys.stdout = stdout


def _parse_and_run(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    status = _command_module(args.command).run(args)
    sys.stdout.flush()  # a failed write must fail here, not in the interpreter's exit
    return status


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose writes to stdout (help, version) can fail.

    argparse drops every OSError of its own writes, so ``clusterprint --version >
    /dev/full`` would exit 0 having printed nothing; a write to stdout here raises as any
    other output does. Its sub-parsers are of this class too (argparse's default).
    """

    def _print_message(self, message: str, file=None) -> None:
        if message and file is sys.stdout:
            file.write(message)
        else:
            super()._print_message(message, file)


class OutputNotWritten(Exception):
    """stdout refused a write (a full disk): told apart from the errors of files read."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _GuardedStdout:
    """stdout whose write errors become OutputNotWritten; everything else passes through.

    A process started with stdout closed has ``sys.stdout`` None: that stream is one that
    refuses every write, as a write to the closed descriptor would.
    """

    def __init__(self, stream) -> None:
        self._stream = _ClosedStdout() if stream is None else stream

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


class _ClosedStdout:
    """What stands for stdout when the process was started without one (``>&-``)."""

    def write(self, text: str) -> int:
        """Refuse, as the closed descriptor does."""
        raise OSError(errno.EBADF, "stdout is closed")

    def flush(self) -> None:
        """Nothing was written, so nothing is left to flush."""

    def isatty(self) -> bool:
        """Never a terminal: no colour."""
        return False

    def fileno(self) -> int:
        """There is no descriptor to point elsewhere."""
        raise ValueError("stdout is closed")


def _discard_stdout(stream) -> None:
    """Point stdout at /dev/null so the interpreter's final flush of what is left stays quiet."""
    if stream is None:  # started with stdout closed: nothing was buffered
        return
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # a stream without a descriptor holds nothing to flush
        return
    os.dup2(os.open(os.devnull, os.O_WRONLY), fd)

