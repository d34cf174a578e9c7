"""No function in webhook/ is over 60 lines (issue 37, item 4: linear steps).

A function's length is its `def` line to its last line (ast: end_lineno - lineno + 1; its
decorators are not counted), nested functions and methods each on their own. The functions
still over the limit are listed in ALLOWED with their length when listed; the list only
shrinks: a listed function now within the limit, renamed or moved fails the test until its
line is removed (a move from webhook/checks/ to webhook/models/ updates its key).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 60

#: the functions still over LIMIT (`path::Class.function`: length when listed), all in the checks and the
#: models under them, to be split into named steps; never add one
ALLOWED: dict[str, int] = {}


def function_lengths(package: Path, base: Path) -> dict[str, int]:
    """`path::qualname` (path relative to `base`) → lines, for every function and method under `package`."""
    out: dict[str, int] = {}

    def walk(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                out[f"{path}::{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                walk(child, path, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, path, prefix + child.name + ".")
            else:
                walk(child, path, prefix)

    for file in sorted(package.rglob("*.py")):
        walk(ast.parse(file.read_text(encoding="utf-8"), str(file)), file.relative_to(base).as_posix(), "")
    return out


def over_limit(package: Path, base: Path) -> dict[str, int]:
    """The functions under `package` longer than LIMIT lines."""
    return {k: n for k, n in function_lengths(package, base).items() if n > LIMIT}


def test_no_function_in_webhook_is_over_60_lines() -> None:
    over = over_limit(ROOT / "webhook", ROOT)
    new = {k: n for k, n in sorted(over.items()) if k not in ALLOWED}
    assert not new, (
        f"over {LIMIT} lines: split each into named steps (a one-line docstring each saying what it decides): "
        + ", ".join(f"{k} ({n})" for k, n in new.items())
    )


def test_the_allowlist_only_shrinks() -> None:
    lengths = function_lengths(ROOT / "webhook", ROOT)
    done = sorted(k for k in ALLOWED if lengths.get(k, 0) <= LIMIT)
    assert not done, f"within {LIMIT} lines now, or gone (renamed, moved): remove from ALLOWED: {', '.join(done)}"


def _write(path: Path, body_lines: int, decorated: bool = False) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(body_lines - 1))
    head = "@staticmethod\n" if decorated else ""
    path.write_text(f"{head}def f() -> None:\n{body}\n")


@pytest.mark.parametrize(
    ("lines", "decorated", "over"),
    [(LIMIT, False, False), (LIMIT + 1, False, True), (LIMIT, True, False)],
)
def test_the_length_is_the_def_line_to_the_last(tmp_path: Path, lines: int, decorated: bool, over: bool) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    _write(pkg / "mod.py", lines, decorated)
    assert function_lengths(pkg, tmp_path) == {"pkg/mod.py::f": lines}
    assert bool(over_limit(pkg, tmp_path)) is over


def test_a_long_method_or_nested_function_is_found(tmp_path: Path) -> None:
    body = "\n".join(f"            y{i} = {i}" for i in range(LIMIT))
    (tmp_path / "m.py").write_text(f"class C:\n    def run(self) -> None:\n        def inner() -> None:\n{body}\n")
    assert over_limit(tmp_path, tmp_path) == {"m.py::C.run": LIMIT + 2, "m.py::C.run.inner": LIMIT + 1}
