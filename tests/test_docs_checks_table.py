"""docs/checks.md's table is generated from the check classes (docs/gen-checks-table.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "docs" / "gen-checks-table.py"


def _generator() -> object:
    spec = importlib.util.spec_from_file_location("gen_checks_table", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_is_up_to_date() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_every_registered_check_has_a_row_and_a_section() -> None:
    from webhook.checks import all_checks

    doc = (ROOT / "docs" / "checks.md").read_text(encoding="utf-8")
    gen = _generator()
    for c in all_checks():
        assert f"| [{c.name}](#{gen._anchor(c.name)}) |" in doc, c.name  # type: ignore[attr-defined]
        assert f"## {c.name}\n" in doc, f"docs/checks.md has no section for {c.name}"


def test_reads_are_summarised_as_rbac_says() -> None:
    from webhook.kube import Permission

    gen = _generator()
    perms = [Permission("list", "nodes"), Permission("watch", "nodes"), Permission("get", "secrets")]
    assert gen._reads(perms) == "cached nodes; get secrets"  # type: ignore[attr-defined]
    assert gen._reads([Permission("create", "pods")]) == "create pods (dryRun=All)"  # type: ignore[attr-defined]
    assert gen._anchor("Per-Node Schedulability") == "per-node-schedulability"  # type: ignore[attr-defined]
