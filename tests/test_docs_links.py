"""Every relative link and anchor in the repository's Markdown resolves (issue 24, issue 37).

Anchors follow GitHub's heading slugs: lower case, punctuation dropped (hyphens and
underscores kept), spaces turned into hyphens, `-1`, `-2`… for repeated headings.
Links inside code (fenced blocks, inline spans) are not links and are skipped.

Code, charts and pages also name a section in text: `docs/sizing.md, "Large objects"` or
`docs/x.md#anchor`. Those must resolve too, so a page split (issue 37: docs/development.md
into harness.md and kubernetes-versions.md) cannot leave a docstring pointing at nothing.
A quoted section is a heading of that file, or the start of one ("Sizing" for "Sizing: …").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


_SKIP_DIRS = {".git", ".venv", ".demo", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def _tracked(suffixes: tuple[str, ...]) -> list[Path]:
    out = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT).parts
        if any(part in _SKIP_DIRS or part.endswith(".egg-info") for part in rel[:-1]):
            continue
        if path.is_file() and (path.name.endswith(suffixes) or path.name in suffixes):
            out.append(path)
    return sorted(out)


def docs() -> list[Path]:
    """README.md, CHANGELOG.md, docs/**/*.md, then every other Markdown file (charts/, e2e/, certs/)."""
    first = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return first + [p for p in _tracked((".md",)) if p not in first]


def slug(heading: str) -> str:
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text())):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    out.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", path.read_text()))
    return out


def links(path: Path) -> list[str]:
    text = _CODE.sub("", _FENCE.sub("", path.read_text()))
    return [t for t in _LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def broken(path: Path) -> list[str]:
    problems = []
    for target in links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading #{anchor} in {dest.name}")
    return problems


# `docs/x.md, "Section"` (also `docs/x.md's "Section"`, `docs/x.md "Section"`, across a comment's line
# break) and `docs/x.md#anchor`, in code, charts and pages.
_SECTION_REF = re.compile(
    r"""\b(docs/[\w/.-]+\.md)(?:,|'s)?[ \t]*(?:\n[ \t]*(?:#+|//|\*)?[ \t]*)?["\u201c]([^"\u201d\n]+)["\u201d]"""
)
_ANCHOR_REF = re.compile(r"\b(docs/[\w/.-]+\.md)#([\w-]+)")
_SOURCES = (".py", ".sh", ".md", ".yaml", ".tpl", ".toml", ".txt", "Makefile", "Dockerfile")
# Generated lists of test ids, the changelog (history: it names pages as they were), and the
# two doc tests whose examples name made-up pages.
_NOT_SOURCES = {
    "e2e/tiers-before.txt",
    "CHANGELOG.md",
    "docs/test-tiers.md",
    "tests/test_docs_links.py",
    "tests/test_docs_style.py",
}
# References known broken, each waiting for its fix (none now);
# test_pending_references_are_still_broken fails once one resolves, so the entry is removed.
PENDING: set[tuple[str, str, str]] = set()


def headings(path: Path) -> list[str]:
    return [re.sub(r"[`*]", "", h).strip().lower() for h in _HEADING.findall(_FENCE.sub("", path.read_text()))]


def names_a_heading(section: str, heads: list[str]) -> bool:
    want = re.sub(r"[`*]", "", section).replace("\\'", "'").strip().lower()
    return any(h == want or h.startswith(want + ":") or h.startswith(want + " ") for h in heads)


def section_refs(text: str) -> list[tuple[str, str]]:
    """The (page, section or #anchor) pairs a text names."""
    found = [(m.group(1), m.group(2)) for m in _SECTION_REF.finditer(text)]
    return found + [(m.group(1), "#" + m.group(2)) for m in _ANCHOR_REF.finditer(text)]


def broken_refs(text: str) -> list[tuple[str, str]]:
    problems = []
    for page, section in section_refs(text):
        dest = ROOT / page
        if not dest.exists():
            problems.append((page, section))
        elif section.startswith("#"):
            if section[1:] not in anchors(dest):
                problems.append((page, section))
        elif not names_a_heading(section, headings(dest)):
            problems.append((page, section))
    return problems


def sources() -> list[Path]:
    return [p for p in _tracked(_SOURCES) if str(p.relative_to(ROOT)) not in _NOT_SOURCES]


def test_section_references_are_found() -> None:
    text = (
        'a (docs/sizing.md, "Large objects") b docs/benchmarks.md#profiling c\n# docs/development.md,\n# "Test tiers"\n'
    )
    assert section_refs(text) == [
        ("docs/sizing.md", "Large objects"),
        ("docs/development.md", "Test tiers"),
        ("docs/benchmarks.md", "#profiling"),
    ]
    assert broken_refs(text) == []
    gone = 'docs/development.md, "Timings" and docs/development.md#timings and docs/gone.md, "X"'
    assert broken_refs(gone) == [
        ("docs/development.md", "Timings"),
        ("docs/gone.md", "X"),
        ("docs/development.md", "#timings"),
    ]


def test_section_references_resolve() -> None:
    problems = []
    for path in sources():
        rel = str(path.relative_to(ROOT))
        for page, section in broken_refs(path.read_text(errors="replace")):
            if (rel, page, section) not in PENDING:
                problems.append(f"{rel}: {page} {section!r}")
    assert problems == []


def test_pending_references_are_still_broken() -> None:
    for rel, page, section in PENDING:
        assert (page, section) in broken_refs((ROOT / rel).read_text()), f"{rel} is fixed: remove it from PENDING"


def test_slugs_follow_github() -> None:
    assert slug("Secrets: on-demand reads with a short TTL, never a watch") == (
        "secrets-on-demand-reads-with-a-short-ttl-never-a-watch"
    )
    assert slug("The kubectl end-to-end tests (`e2e/test_webhook_kubectl.py`)") == (
        "the-kubectl-end-to-end-tests-e2etest_webhook_kubectlpy"
    )


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(
        "# Top\n\n[ok](#top) [gone](b.md) [bad](a.md#nowhere) `[code](x.md)` [web](https://x.invalid)\n"
    )
    assert broken(tmp_path / "a.md") == ["b.md: no such file", "a.md#nowhere: no heading #nowhere in a.md"]


@pytest.mark.parametrize("doc", docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    assert broken(doc) == []
