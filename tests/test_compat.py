"""webhook/_compat.py: one test per private internal it relies on, and no private read anywhere else.

Each test fails with the internal's name, the upstream file that defines it and what reads it, so an
upgrade that drops one says so here first (constraints.txt holds the versions these passed on).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import importlib.metadata
import inspect
import os
import platform
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from prometheus_client import disable_created_metrics, enable_created_metrics
from prometheus_client import metrics as prometheus_metrics

from webhook import _compat
from webhook.listener import _Connection

WEBHOOK = Path(__file__).resolve().parent.parent / "webhook"


def _gone(internal: str, upstream: str, reader: str, dist: str) -> str:
    version = importlib.metadata.version(dist) if dist != "python" else platform.python_version()
    return (
        f"{internal} ({upstream}) is gone or changed in {dist} {version}; {reader} relies on it through "
        "webhook/_compat.py: adapt _compat, or pin the last version that has it in constraints.txt"
    )


def _params(func: Any) -> list[str]:
    return [p for p in inspect.signature(func).parameters if p != "self"]


def test_aiohttp_request_handler_keeps_the_hooks_the_listener_overrides() -> None:
    why = _gone("RequestHandler's hooks", "aiohttp/web_protocol.py", "webhook/listener.py _Connection", "aiohttp")
    for name, params in _compat.RequestHandlerHooks.items():
        assert _params(getattr(_compat.RequestHandler, name, None) or (lambda: None)) == params, f"{name}: {why}"
        assert _params(getattr(_Connection, name)) == params, f"_Connection.{name} overrides another shape"
    for name in ("force_close", "transport"):
        assert hasattr(_compat.RequestHandler, name), f"{name}: {why}"
    first = inspect.signature(_compat.RequestHandler.__init__).parameters
    assert list(first)[1] == "manager" and first["loop"].kind is inspect.Parameter.KEYWORD_ONLY, why
    assert _compat.RequestHandler is web.RequestHandler, why  # the class aiohttp.web serves with


async def test_aiohttp_server_keeps_the_protocol_kwargs() -> None:
    async def ok(request: web.BaseRequest) -> web.StreamResponse:
        return web.Response()

    why = _gone("web.Server._kwargs", "aiohttp/web_server.py", "webhook/listener.py WebhookServer.start", "aiohttp")
    server = web.Server(ok, keepalive_timeout=7.5)
    assert isinstance(getattr(server, "_kwargs", None), dict), why
    kwargs = _compat.server_protocol_kwargs(server)
    assert kwargs["keepalive_timeout"] == 7.5, why
    # what the listener's factory builds: aiohttp's protocol with exactly those arguments, on this loop
    loop = asyncio.get_running_loop()
    handler = _compat.RequestHandler(server, loop=loop, **kwargs)
    assert handler._loop is loop, why  # the timers of _Connection._arm run on it


def test_prometheus_client_keeps_use_created() -> None:
    why = _gone(
        "prometheus_client.metrics._use_created",
        "prometheus_client/metrics.py",
        "webhook/metrics.py LoopHistogram",
        "prometheus-client",
    )
    assert isinstance(getattr(prometheus_metrics, "_use_created", None), bool), why
    before = prometheus_metrics._use_created
    try:
        disable_created_metrics()
        assert _compat.prometheus_created_series() is False, why
        enable_created_metrics()
        assert _compat.prometheus_created_series() is True, why
    finally:
        prometheus_metrics._use_created = before


def test_os_environ_keeps_its_data(monkeypatch: pytest.MonkeyPatch) -> None:
    why = _gone(
        "os.environ._data",
        "CPython Lib/os.py _Environ",
        "render_cache._environ and aiperf env._aiperf_environ",
        "python",
    )
    assert isinstance(getattr(os.environ, "_data", None), dict), why
    before = _compat.environ_key()
    assert before is not None and before == _compat.environ_key(), why
    assert _compat.environ_key() is before  # unchanged: one object for every holder (the render cache's entries)
    monkeypatch.setenv("PREFLIGHT_COMPAT_PROBE", "1")
    changed = _compat.environ_key()
    assert changed != before, why  # a change of the environment changes the key
    monkeypatch.delenv("PREFLIGHT_COMPAT_PROBE")
    assert _compat.environ_key() == before and _compat.environ_key() is not changed


def test_pyyaml_keeps_its_libyaml_parser() -> None:
    why = _gone("yaml._yaml.CParser", "PyYAML yaml/_yaml.pyx", "webhook/manifests.py", "PyYAML")
    assert yaml.__with_libyaml__, (
        "PyYAML was installed without libyaml: webhook/manifests.py falls back to the pure-Python parser"
    )
    assert _compat.LIBYAML and _compat.YamlEventParser.__module__ == "yaml._yaml", why
    parser = _compat.YamlEventParser("a: [1, 2]\n")
    kinds = []
    while parser.check_event():
        kinds.append(type(parser.get_event()).__name__)
    assert kinds[:3] == ["StreamStartEvent", "DocumentStartEvent", "MappingStartEvent"], why
    assert kinds[-1] == "StreamEndEvent", why


def test_argparse_keeps_its_actions() -> None:
    why = _gone("ArgumentParser._actions", "CPython Lib/argparse.py", "webhook/cli/__init__.py", "python")
    p = argparse.ArgumentParser()
    p.add_argument("--log-level")
    assert isinstance(getattr(p, "_actions", None), list), why
    assert _compat.parser_dests(p) == {"help", "log_level"}, why


# ----------------------------------------------------------------------------- no private read elsewhere

#: namedtuple's public API, spelled with an underscore so as not to clash with field names
PUBLIC_UNDERSCORED = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORED


def _defined_here(trees: list[ast.Module]) -> set[str]:
    """Every private name webhook/ defines: functions, classes, variables, attributes it assigns, slots,
    parameters and import aliases."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[-1])
            elif isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__slots__" for t in node.targets):
                names.update(c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant))
    return {n for n in names if _private(n)}


def _in_annotations(tree: ast.Module) -> set[int]:
    """The nodes inside annotations: never evaluated (every module has `from __future__ import annotations`),
    so a private type there (typeshed's `argparse._SubParsersAction`) is no read at run time."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            roots.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            roots.append(node.returns)
    return {id(n) for root in roots for n in ast.walk(root)}


def _private_reads(tree: ast.Module, ours: set[str]) -> list[str]:
    found = []
    typing_only = _in_annotations(tree)
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "__future__" or node.module.split(".")[0] == "webhook":
                continue
            if any(_private(part) for part in node.module.split(".")) or any(_private(a.name) for a in node.names):
                found.append(f"{node.lineno}: from {node.module} import {', '.join(a.name for a in node.names)}")
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in ours:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and node.args[1].value not in ours
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _scan(root: Path) -> dict[str, list[str]]:
    compat = root / "_compat.py"
    files = {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(root.rglob("*.py")) if p != compat}
    ours = _defined_here(list(files.values()))  # what _compat.py reads is not ours
    out = {}
    for path, tree in files.items():
        if found := _private_reads(tree, ours):
            out[str(path.relative_to(root.parent))] = found
    return out


def test_only_compat_reads_another_librarys_private_names() -> None:
    assert _scan(WEBHOOK) == {}, "move these reads behind webhook/_compat.py, with a test in this file"


def test_the_scan_catches_a_private_read(tmp_path: Path) -> None:
    pkg = tmp_path / "webhook"
    pkg.mkdir()
    (pkg / "_compat.py").write_text("import os\nDATA = os.environ._data\n", encoding="utf-8")
    (pkg / "ours.py").write_text("class A:\n    def __init__(self):\n        self._mine = 1\n", encoding="utf-8")
    (pkg / "a.py").write_text(
        "import os\nfrom yaml._yaml import CParser\nfrom aiohttp import web\n"
        "def f(server, a, p: argparse._SubParsersAction) -> argparse._SubParsersAction:\n"
        "    return server._kwargs, a._mine, getattr(os.environ, '_data', None), p._actions, a._replace(x=1)\n",
        encoding="utf-8",
    )
    assert _scan(pkg) == {
        "webhook/a.py": [
            "2: from yaml._yaml import CParser",
            "5: server._kwargs",
            "5: getattr(os.environ, '_data', None)",
            "5: p._actions",
        ]
    }


def test_the_kind_packages_import_without_aiohttp_or_prometheus_client() -> None:
    """The oracles run the kind packages in AIPerf's own venv, which has neither (tests/oracle/setup.sh):
    _compat imports them where they are read."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('aiohttp', 'prometheus_client'):\n"
        "            raise ImportError(f'blocked: {name}')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import webhook.workloads.aiperf_sweep.children, webhook._compat\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'prometheus_client')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
