"""Write a first blueprint: a wizard on a terminal, or the same questions answered by flags.

Asks the cluster's name and project, the machine type and node count, how to get the VMs
(on demand, spot, flex-start or a reservation), the region and zone (only those where the
machine type exists), /home, Lustre scratch, a bucket, and where to write the file. Each
question has a flag. With every needed flag (--name, --project, --machine-type, --count,
one of --on-demand/--spot/--flex-start/--reservation, --zone) it never prompts and takes
the default answer for the rest; without them it asks on the terminal, or, when stdin is
not one, says which flags it needs. The file is validated before it is written, and never
replaces an existing file without --force.

Exit status: 0 written, 1 the blueprint made does not validate (the validator's lines on
stderr; nothing written), 2 usage error: needed flags missing without a terminal, a flag
refused, or the file exists (without --force) or cannot be written; 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from clusterprint.cli.main import EXIT_USAGE
from clusterprint.facts import zones

#: The questions without a default: a run that lacks any of them has to ask.
NEEDED = (
    ("name", "--name NAME"),
    ("project", "--project ID"),
    ("machine_type", "--machine-type TYPE"),
    ("count", "--count N"),
    ("provisioning", "one of --on-demand, --spot, --flex-start, --reservation NAME"),
    ("zone", "--zone ZONE"),
)
#: Each answer's flag, as messages name it.
FLAGS = {
    "name": "--name", "project": "--project", "machine_type": "--machine-type",
    "count": "--count", "provisioning": "--on-demand/--spot/--flex-start",
    "reservation": "--reservation", "region": "--region", "zone": "--zone", "home": "--home",
    "home_tier": "--home-tier", "home_size": "--home-size", "lustre": "--lustre/--no-lustre",
    "lustre_tier": "--lustre-tier", "lustre_size": "--lustre-size",
    "use_bucket": "--bucket/--no-bucket", "bucket": "--bucket", "out": "--out",
}
#: Why a flag given can go unused: the answers it depends on rule it out.
UNUSED_BECAUSE = {
    "home_tier": "/home is on Lustre", "home_size": "/home is on Lustre",
    "lustre": "/home is on Lustre, which is the scratch space too",
    "lustre_tier": "there is no Lustre (--no-lustre)", "lustre_size": "there is no Lustre",
}
#: Selects with more choices than this are typed, with completion, instead of picked.
MAX_PICKED = 9


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per question, and --force."""
    cluster = parser.add_argument_group("the cluster")
    cluster.add_argument("--name", help="cluster name: prefixes every resource")
    from clusterprint.cli.wizard import OFFERED

    cluster.add_argument("--project", metavar="ID", help="Google Cloud project id")
    cluster.add_argument("--machine-type", dest="machine_type", metavar="TYPE",
                         help="compute node machine type: " + ", ".join(OFFERED))
    cluster.add_argument("--count", metavar="N", help="compute nodes kept up")
    how = cluster.add_mutually_exclusive_group()
    for flag, help_text in (("on-demand", "on-demand VMs: no commitment"),
                            ("spot", "spot VMs: cheaper; Compute Engine can stop them"),
                            ("flex-start", "flex-start VMs: they start once capacity is found")):
        how.add_argument(f"--{flag}", dest="provisioning", action="store_const", const=flag,
                         help=help_text)
    how.add_argument("--reservation", metavar="NAME",
                     help="consume this reservation: NAME or projects/P/reservations/NAME")
    cluster.add_argument("--region", help="region (follows from --zone when left out)")
    cluster.add_argument("--zone", help=f"zone; only zones where the machine type exists "
                                        f"({zones.MACHINE_ZONES_SOURCE})")
    storage = parser.add_argument_group("storage (each has a default)")
    storage.add_argument("--home", help="what /home is on: filestore (default) or lustre")
    storage.add_argument("--home-tier", dest="home_tier", metavar="TIER",
                         help="Filestore tier of /home (default ZONAL)")
    storage.add_argument("--home-size", dest="home_size", metavar="GIB",
                         help="Filestore size in GiB (default: the tier's least)")
    scratch = storage.add_mutually_exclusive_group()
    scratch.add_argument("--lustre", action="store_true", default=None,
                         help="add Managed Lustre scratch at /lustre")
    scratch.add_argument("--no-lustre", dest="lustre", action="store_false",
                         help="no Lustre scratch (the default)")
    storage.add_argument("--lustre-tier", dest="lustre_tier", metavar="MBPS",
                         help="Lustre performance tier: 125, 250, 500 (default) or 1000")
    storage.add_argument("--lustre-size", dest="lustre_size", metavar="GIB",
                         help="Lustre size in GiB (default: the tier's least)")
    bucket = storage.add_mutually_exclusive_group()
    bucket.add_argument("--bucket", metavar="NAME",
                        help="create this Cloud Storage bucket and mount it at /gcs/NAME")
    bucket.add_argument("--no-bucket", dest="use_bucket", action="store_false", default=None,
                        help="no bucket (the default)")
    output = parser.add_argument_group("output")
    output.add_argument("--out", metavar="FILE",
                        help="where to write the blueprint (default NAME.yaml)")
    output.add_argument("--force", action="store_true", help="replace FILE if it exists")


def run(args: argparse.Namespace) -> int:
    """Gather the answers, build the blueprint, validate it and write it."""
    from clusterprint.blueprint.validate import check_text
    from clusterprint.cli.wizard import blueprint_text, gather

    if args.reservation is not None:
        args.provisioning = "reservation"
    if args.bucket is not None:
        args.use_bucket = True
    missing = [flag for key, flag in NEEDED if getattr(args, key) is None]
    if missing and not sys.stdin.isatty():
        print("clusterprint new: stdin is not a terminal, so nothing can be asked; give "
              "these flags: " + "; ".join(missing), file=sys.stderr)
        return EXIT_USAGE
    ask = Prompts(args) if missing else FlagAnswers(args)
    try:
        answers = gather(ask)
        out = ask.text("out", "Write the blueprint to", out_problem(args.force),
                       default=f"{answers.name}.yaml")
        ask.finish()
    except FlagsRefused as exc:
        for line in exc.lines:
            print(f"clusterprint new: {line}", file=sys.stderr)
        return EXIT_USAGE
    except EOFError:
        print("clusterprint new: input ended before every question was answered",
              file=sys.stderr)
        return EXIT_USAGE
    path = Path(out).expanduser()
    text = blueprint_text(answers, out, *modeline_schema(path))
    checked = check_text(out, text)
    for line in checked.lines():
        print(line, file=sys.stderr)
    if not checked.ok:
        print(f"clusterprint new: {out} not written: the blueprint made from these answers "
              f"does not validate (the lines above say why)", file=sys.stderr)
        return 1
    try:
        write_atomically(path, text, replace=args.force)
    except FileExistsError:
        print(f"clusterprint new: {out} exists; add --force to replace it", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"clusterprint new: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{out}: written; next: clusterprint validate {out}, clusterprint plan {out}",
          file=sys.stderr)
    return 0


class FlagsRefused(Exception):
    """Flag values the wizard cannot take, one message each, all of them at once."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


class FlagAnswers:
    """Answers from flags alone: a question without its flag takes its default.

    A refused value is recorded and replaced by the default (or kept, where there is none)
    so that the remaining questions are still checked: every refusal shows in one run.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.refused: list[str] = []
        self.asked: set[str] = set()

    def given(self, key: str) -> bool:
        """Whether the flag for ``key`` was given."""
        return getattr(self.args, key, None) is not None

    def _flag(self, key: str, problem: str | None, value: str, default: str | None) -> str:
        self.asked.add(key)
        if problem is None:
            return value
        self.refused.append(f"{FLAGS[key]} {value}: {problem}")
        return value if default is None else default

    def text(self, key: str, message: str, check, default: str | None = None) -> str | None:
        """The flag's value once ``check`` passes it, else the default."""
        if not self.given(key):
            self.asked.add(key)
            return default
        value = str(getattr(self.args, key))
        return self._flag(key, check(value), value, default)

    def choice(self, key: str, message: str, choices: Sequence[tuple[str, str]],
               default: str | None = None, check=None) -> str | None:
        """The flag's value when it is one of ``choices`` (or passes ``check``)."""
        if not self.given(key):
            self.asked.add(key)
            return default
        value = str(getattr(self.args, key))
        values = [v for v, _ in choices]
        problem = check(value) if check else (
            None if value in values else f"choose one of {', '.join(values)}")
        return self._flag(key, problem, value, default)

    def confirm(self, key: str, message: str, default: bool) -> bool:
        """The flag's yes or no, else the default."""
        self.asked.add(key)
        return bool(getattr(self.args, key)) if self.given(key) else default

    def finish(self) -> None:
        """Raise FlagsRefused for every refused value and every flag that went unused."""
        unused = [f"{FLAGS[key]} does not apply: {UNUSED_BECAUSE.get(key, 'not asked')}"
                  for key in FLAGS if self.given(key) and key not in self.asked]
        if self.refused or unused:
            raise FlagsRefused(self.refused + unused)


class Prompts(FlagAnswers):
    """Answers from flags where given, and from questions on the terminal for the rest."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        import questionary  # only here: validate and the flag form never load it

        self.questionary = questionary

    def _before_asking(self, key: str) -> None:
        # A refused flag stops the wizard before the person answers anything more.
        if self.refused:
            raise FlagsRefused(self.refused)
        self.asked.add(key)

    @staticmethod
    def _validator(check):
        return lambda text: check(text) or True

    def text(self, key: str, message: str, check, default: str | None = None) -> str | None:
        """Ask for text until ``check`` passes it."""
        if self.given(key):
            return super().text(key, message, check, default)
        self._before_asking(key)
        return self.questionary.text(message, default=default or "",
                                     validate=self._validator(check)).unsafe_ask()

    def choice(self, key: str, message: str, choices: Sequence[tuple[str, str]],
               default: str | None = None, check=None) -> str | None:
        """Pick one of ``choices`` by its number, or type it where there are many."""
        if self.given(key):
            return super().choice(key, message, choices, default, check)
        self._before_asking(key)
        values = [v for v, _ in choices]
        if len(values) == 1:
            return values[0]
        if len(values) > MAX_PICKED:
            return self.questionary.autocomplete(
                f"{message} (type; Tab completes)", choices=values,
                default=default or "", validate=lambda text: text in values or (
                    f"not one of the {len(values)} offered; Tab lists them")).unsafe_ask()
        return self.questionary.select(
            message, use_shortcuts=True, default=default,
            choices=[self.questionary.Choice(title, value=v) for v, title in choices],
        ).unsafe_ask()

    def confirm(self, key: str, message: str, default: bool) -> bool:
        """Ask yes or no."""
        if self.given(key):
            return super().confirm(key, message, default)
        self._before_asking(key)
        return self.questionary.confirm(message, default=default).unsafe_ask()


def out_problem(force: bool):
    """The check of the file to write: a .yaml name in a folder that exists, and new."""
    def check(text: str) -> str | None:
        path = Path(text).expanduser()
        if path.suffix not in (".yaml", ".yml"):
            return f"{text!r} is not a .yaml or .yml file name"
        if path.is_dir():
            return f"{text} is a folder"
        if not path.parent.is_dir():
            return f"folder {path.parent} does not exist"
        if path.exists() and not force:
            return f"{text} exists; choose another file or add --force to replace it"
        return None
    return check


def modeline_schema(path: Path) -> tuple[str, str | None]:
    """The schema for the file's modeline, and a note saying how to get one where none exists.

    The schema ships in the source tree, not in the installed package. A file inside that
    tree points at it relative to itself, as blueprints/ do; one outside at its absolute path;
    an installed clusterprint at a copy the user writes next to the file.
    """
    root = Path(__file__).resolve().parents[3]
    schema = root / "schemas" / "blueprint.schema.json"
    if not schema.is_file():
        return "blueprint.schema.json", ("write it next to this file: clusterprint schema > "
                                         "blueprint.schema.json")
    folder = path.resolve().parent
    return (os.path.relpath(schema, folder) if folder.is_relative_to(root) else str(schema)), None


def write_atomically(path: Path, text: str, replace: bool) -> None:
    """Write ``text`` to ``path`` all at once: a reader sees no file or the whole file.

    The text goes to a temporary file beside ``path`` first; it then takes the name by a
    hard link, which fails if the name exists (so nothing is ever replaced by a race), or
    by a rename with ``replace``.
    """
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        if replace:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
