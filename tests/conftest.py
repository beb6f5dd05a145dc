"""Fixtures shared across the test folders, and the tiers every test falls in.

Each test gets exactly one tier marker (registered in pyproject.toml, ``--strict-markers``):
``slurm`` for tests/slurm (real daemons, as root), ``pulumi`` for tests/components and
tests/policy (the program under Pulumi's mocks), ``sandbox`` for a test that asks for the
``sandbox`` fixture (it boots scripts in namespaces of its own or runs a program as another
user: root), and ``unit`` for everything else, which runs as any user:
``make test-fast`` is lint and ``pytest -m unit``.

Under xdist (``make test`` runs ``-n``), ``--dist loadgroup`` keeps the tests of one
``xdist_group`` on one worker; see ``SHARED`` for what shares one and ``FIRST`` for the order.
Everything else is safe on any worker: the boot sandbox, the fakes and the daemons take temp
folders and ports of their own (port 80 of the metadata fake is in a network namespace per
test), and each worker is a process with its own module state.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import slurm_root
from tests.support.metadata_fake import FakeMetadata
from tests.support.paths import MUTATION, ROOT

#: Tier markers by the folder a test module is in (relative to the repository).
FOLDER_TIERS = {"tests/slurm": "slurm", "tests/components": "pulumi", "tests/policy": "pulumi"}
#: Tiers whose tests must run on one worker, by the xdist group that says why: the real-Slurm
#: tests take their ports from ``free_port()``, which binds a free port and lets it go for a
#: daemon to take, so two workers could be handed the same one between the two; one worker
#: also starts the session's munged and MariaDB once, not once per worker.
SHARED = {"slurm": "slurm-daemons"}
#: The tier that runs first: its tests wait on daemons for minutes, so under xdist its worker
#: starts them while the others take every other tier, and no worker waits alone at the end.
FIRST = "slurm"

# mutmut's coverage pass (`make mutation`) runs the tests in its own process with
# MUTANT_UNDER_TEST=stats, which it also keeps in that process; a program the tests start
# (the CLI, a node program) would inherit it and look for mutmut's configuration in its own
# folder. Those processes run the code unmutated instead.
if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    del os.environ["MUTANT_UNDER_TEST"]


@pytest.fixture(autouse=True)
def shipped_programs_unmutated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `make mutation` the renderer ships the node programs as written, from the copy
    the Makefile keeps in mutation/pristine/: mutmut's copies of them, several MB each with
    every mutant, would not fit a metadata value. Their mutants are judged by the tests that
    import or run them (tests/clusterprint/node), not by what a rendered script embeds."""
    if not MUTATION:
        return
    from clusterprint.render import node_programs

    def pristine(module, shebang: bool = False) -> str:
        name = module.__name__.rsplit(".", 1)[-1]
        text = (ROOT / "mutation" / "pristine" / "node" / f"{name}.py").read_text("utf-8")
        return (node_programs.SHEBANG if shebang and not text.startswith("#!") else "") + text
    monkeypatch.setattr(node_programs, "module_text", pristine)


def pytest_terminal_summary(terminalreporter) -> None:
    """The Slurm release the real-daemon tests ran, for the CI log (which ``-q`` keeps, where
    it drops the header), when any ran."""
    reports = [r for kept in terminalreporter.stats.values() for r in kept]
    if any("slurm" in getattr(r, "keywords", {}) for r in reports):
        terminalreporter.write_line("real-daemon tests: " + (slurm_root.missing() or (
            f"Slurm {slurm_root.slurm_version()} from {slurm_root.SLURM_ROOT}")))


def tier_of(item: pytest.Item) -> str:
    """The one tier of a test: its folder's, else sandbox if it asks for root, else unit."""
    folder = Path(item.path).resolve().relative_to(ROOT).as_posix()
    for prefix, tier in FOLDER_TIERS.items():
        if folder.startswith(prefix + "/"):
            return tier
    return "sandbox" if "sandbox" in getattr(item, "fixturenames", ()) else "unit"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its tier (and its xdist group, where it shares something), and
    put the ``FIRST`` tier first, the others in the order they were collected."""
    tiers = {}
    for item in items:
        tier = tiers[item.nodeid] = tier_of(item)
        item.add_marker(tier)
        if tier in SHARED:
            item.add_marker(pytest.mark.xdist_group(SHARED[tier]))
    items.sort(key=lambda item: tiers[item.nodeid] != FIRST)


@pytest.fixture(scope="session")
def sandbox() -> None:
    """Root and unshare, for a test that boots rendered scripts in namespaces of its own or
    runs a program as another user: asking for it puts the test in the ``sandbox`` tier, out
    of the unprivileged unit tier."""
    assert os.geteuid() == 0 and shutil.which("unshare"), "these tests need root and unshare"


@pytest.fixture
def fake_metadata() -> Iterator[FakeMetadata]:
    """A fake metadata server on 127.0.0.1 that waits for changes; stopped after the test."""
    fake = FakeMetadata()
    yield fake
    fake.stop()
