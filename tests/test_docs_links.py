"""Every relative link and anchor in README.md, CHANGELOG.md and docs/**/*.md resolves (issue 24).

Anchors follow GitHub's heading slugs: lower case, punctuation dropped (hyphens and
underscores kept), spaces turned into hyphens, `-1`, `-2`… for repeated headings.
Links inside code (fenced blocks, inline spans) are not links and are skipped.
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


def docs() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


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
