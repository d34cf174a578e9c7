"""bench/: each script answers one question, says it in its docstring and `--help`, and has a
smoke mode that writes nothing (issue 24). Timing is not asserted: the figures are the scripts' job."""

from __future__ import annotations

import ast
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if 'if __name__ == "__main__"' in p.read_text())
#: what the others import; not entry points of a question
HELPERS = {"common.py", "loadgen.py", "noop_server.py"}
#: fast enough for the unit suite (a few seconds each)
QUICK = ["audit_reports.py", "fuzz_parsers.py"]


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_every_entry_point_is_a_question_in_its_docstring() -> None:
    entry = [p for p in SCRIPTS if p.name not in HELPERS]
    assert entry, "no bench scripts found"
    for path in entry:
        doc = ast.get_docstring(ast.parse(path.read_text()))
        assert doc, f"{path.name} has no docstring"
        assert doc.splitlines()[0].rstrip().endswith("?"), f"{path.name}: the first line asks its question"


def test_the_makefile_runs_every_entry_point() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for path in SCRIPTS:
        if path.name not in HELPERS:
            assert f"bench/{path.name}" in makefile, f"make bench / bench-cluster does not run {path.name}"


@pytest.mark.parametrize("script", [p.name for p in SCRIPTS])
def test_help_explains(script: str) -> None:
    proc = _run(f"bench/{script}", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:") and len(proc.stdout.splitlines()) > 3


def _docs_digest() -> str:
    h = hashlib.sha256()
    for p in sorted((ROOT / "docs").rglob("*.md")):
        h.update(p.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("script", QUICK)
def test_quick_mode_runs_and_writes_nothing(script: str) -> None:
    before = _docs_digest()
    proc = _run(f"bench/{script}", "--quick")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "|" in proc.stdout  # its table
    assert _docs_digest() == before
