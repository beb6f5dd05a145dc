"""Every relative link in the Markdown pages leads somewhere: a file that exists, a heading.

The reference moved from one README into docs/, one page per subject; a link left pointing at
a section's old place, or at a file a later move renamed, fails here rather than in a
newcomer's browser. Anchors follow GitHub's rules for heading ids.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.support.paths import ROOT

#: Folders that hold no page of the project's own (build output, virtual environments,
#: caches, mutmut's copy of the tree).
SKIPPED = {".git", ".venv", ".venv-mutation", "out", "mutants", "build", "node_modules",
           ".pytest_cache", ".hypothesis", ".ruff_cache", "__pycache__", ".cache"}

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
#: ``[text](target)`` and ``![alt](target)``, the target up to a space (a title follows) or
#: the closing parenthesis; ``<target>`` for targets with spaces.
INLINE = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+\"[^\"]*\")?\s*\)")
#: ``[label]: target`` reference definitions.
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
CODE_SPAN = re.compile(r"(`+).+?\1")


def pages() -> list[Path]:
    """README.md, docs/*.md and every folder's Markdown file, sorted; there are always some."""
    found = sorted(p for p in ROOT.rglob("*.md")
                   if not SKIPPED.intersection(p.relative_to(ROOT).parts[:-1]))
    assert ROOT / "README.md" in found and any(p.parent == ROOT / "docs" for p in found)
    return found


def prose(text: str) -> list[str]:
    """The page's lines outside fenced code blocks (a fence's lines become empty)."""
    lines, fence = [], None
    for line in text.splitlines():
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * len(opened.group(1))
            lines.append("")
        elif fence is not None:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
            lines.append("")
        else:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's id for a heading: its text (code spans' and links' text kept), lowercased,
    everything but letters, digits, ``_``, ``-`` and spaces dropped, each space a hyphen."""
    text = re.sub(r"!?\[((?:[^\]\\]|\\.)*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading id on the page, a repeated heading's later ids ending -1, -2, ..."""
    seen: dict[str, int] = {}
    ids = set()
    for line in prose(page.read_text()):
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        ids.add(base if count == 0 else f"{base}-{count}")
    return ids


def links(page: Path) -> list[tuple[int, str]]:
    """``(line number, target)`` for every link outside code: inline, image and reference."""
    found = []
    for number, line in enumerate(prose(page.read_text()), 1):
        line = CODE_SPAN.sub("", line)
        targets = [m.group(1) for m in INLINE.finditer(line)]
        reference = REFERENCE.match(line)
        if reference:
            targets.append(reference.group(1))
        found += [(number, t[1:-1] if t.startswith("<") else t) for t in targets]
    return found


def relative(target: str) -> bool:
    """Whether the link is to this repository (not a URL with a scheme, not ``//host``)."""
    return not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//", target)


def test_slugs_follow_githubs_rules():
    assert slug("Your first cluster") == "your-first-cluster"
    assert slug("7. Tear it down") == "7-tear-it-down"
    assert slug("A first blueprint: `clusterprint new`") == "a-first-blueprint-clusterprint-new"
    assert slug("`clusterprint plan FILE [--json] [--policy]`") == \
        "clusterprint-plan-file---json---policy"
    assert slug("What is proven here, and what is not") == "what-is-proven-here-and-what-is-not"
    assert slug("Health checks (`slurm.health_checks.gpu`, `interval_s`)") == \
        "health-checks-slurmhealth_checksgpu-interval_s"
    assert slug("See [the docs](docs/README.md)") == "see-the-docs"


def test_headings_in_code_blocks_are_no_anchors(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n```yaml\n# not a heading\n```\n\n## Title\n\n"
                    "~~~\n[no](link.md)\n~~~\n[yes](other.md) `[no](code.md)`\n")
    assert anchors(page) == {"title", "title-1"}
    assert links(page) == [(12, "other.md")]


def broken(page: Path, root: Path = ROOT) -> list[str]:
    """One line per relative link on ``page`` that leads nowhere, naming line and target."""
    found = []
    for number, target in links(page):
        if not relative(target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / unquote(path)).resolve() if path else page
        where = f"{page.relative_to(root)}:{number}: {target}"
        if not file.exists():
            found.append(f"{where}: no such file")
        elif root not in (file, *file.parents):
            found.append(f"{where}: outside the repository")
        elif anchor and file.suffix == ".md" and unquote(anchor) not in anchors(file):
            found.append(f"{where}: no heading with id {anchor!r} in {file.relative_to(root)}")
    return found


def test_a_link_to_a_missing_file_or_heading_is_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/page.md").write_text("# Page\n\n## `plan FILE`\n")
    (tmp_path / "README.md").write_text(
        "# Top\n[ok](docs/page.md) [ok](docs/page.md#plan-file) [ok](#top) [ok](docs/)\n"
        "[web](https://example.com/x.md) [mail](mailto:a@b.c)\n"
        "[gone](docs/gone.md) [no heading](docs/page.md#plan) [no](#bottom)\n")
    assert broken(tmp_path / "README.md", tmp_path) == [
        "README.md:4: docs/gone.md: no such file",
        "README.md:4: docs/page.md#plan: no heading with id 'plan' in docs/page.md",
        "README.md:4: #bottom: no heading with id 'bottom' in README.md",
    ]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    problems = broken(page)
    assert not problems, "\n".join(problems)
