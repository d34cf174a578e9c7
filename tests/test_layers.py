"""The layer contract, read from the imports of every module in webhook/.

    entry points (cli/)         wire everything together
      server (server, admission, metrics)
        domain (preflight, engine, policy, manifests)
          checks/
            workloads/   cluster/   (side by side: neither imports the other)
              foundation (kube, config, results, deadline, quantity, tls): no project imports above it

A module may import its own layer and the layers its layer lists below; every import counts,
also one inside a function or under TYPE_CHECKING (a type is a dependency too). docs/development.md
("Architecture") draws the same picture.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "webhook"

FOUNDATION = "foundation"
#: module (or package prefix) → layer; the longest matching prefix wins
LAYER_OF = {
    "webhook": FOUNDATION,  # the package root (re-exports nothing above the foundation)
    "webhook.kube": FOUNDATION,
    "webhook.config": FOUNDATION,
    "webhook.results": FOUNDATION,
    "webhook.deadline": FOUNDATION,
    "webhook.quantity": FOUNDATION,
    "webhook.tls": FOUNDATION,
    # Kubernetes name rules (pure functions, no project imports): every layer may use them
    "webhook.cluster.names": FOUNDATION,
    "webhook.workloads": "workloads",
    "webhook.cluster": "cluster",
    "webhook.checks": "checks",
    "webhook.engine": "domain",
    "webhook.policy": "domain",
    "webhook.preflight": "domain",
    "webhook.manifests": "domain",
    "webhook.server": "server",
    "webhook.listener": "server",
    "webhook.admission": "server",
    "webhook.metrics": "server",
    "webhook.certmanager": "certs",
    "webhook.cli": "entry",
    "webhook.__main__": "entry",
}
#: layer → the layers it may import (besides itself)
MAY_IMPORT = {
    FOUNDATION: set(),
    "workloads": {FOUNDATION},
    "cluster": {FOUNDATION},
    "checks": {FOUNDATION, "workloads", "cluster"},
    "domain": {FOUNDATION, "workloads", "cluster", "checks"},
    "server": {FOUNDATION, "workloads", "cluster", "checks", "domain"},
    "certs": {FOUNDATION},
    "entry": {FOUNDATION, "workloads", "cluster", "checks", "domain", "server", "certs"},
}
#: what the checks may know of the cluster layer: the ClusterView protocol, never the live view
CHECKS_SEE_OF_CLUSTER = {"webhook.cluster.view"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> str | None:
    best = None
    for prefix, layer in LAYER_OF.items():
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    if best is None or (best[0] == "webhook" and module != "webhook"):
        return None
    return best[1]


def _imports(path: Path) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "webhook":  # `from webhook import quantity`: the submodules named
                out += [(node.lineno, f"webhook.{a.name}") for a in node.names]
            elif node.module.startswith("webhook."):
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("webhook")]
    return out


MODULES = sorted(ROOT.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    missing = [_module_name(p) for p in MODULES if _layer(_module_name(p)) is None]
    assert missing == [], f"give these modules a layer in tests/test_layers.py LAYER_OF: {missing}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module_name(p))
def test_imports_follow_the_layers(path: Path) -> None:
    me = _module_name(path)
    mine = _layer(me)
    bad = []
    for line, target in _imports(path):
        theirs = _layer(target)
        if theirs is None or theirs == mine:
            continue
        if theirs not in MAY_IMPORT[mine]:
            bad.append(f"{path.relative_to(ROOT.parent)}:{line} ({mine}) imports {target} ({theirs})")
        elif mine == "checks" and theirs == "cluster" and target not in CHECKS_SEE_OF_CLUSTER:
            bad.append(f"{path.relative_to(ROOT.parent)}:{line}: a check imports {target}; checks see the ClusterView")
    assert bad == []


def test_the_contract_catches_an_upward_import(tmp_path: Path) -> None:
    # the reader itself: a cluster module importing a check is reported
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from webhook.checks import all_checks\n", encoding="utf-8")
    assert _imports(f) == [(2, "webhook.checks")]
    assert _layer("webhook.checks") not in MAY_IMPORT[_layer("webhook.cluster.live") or ""]
    assert _layer("webhook.workloads.aiperf") == "workloads" and _layer("webhook.newmodule") is None
