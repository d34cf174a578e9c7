"""The layer contract, read from the imports of every module in webhook/.

    entry points (cli/)         wire everything together
      server (server, listener, admission, metrics; certmanager beside it; audit/ beside it)
        domain (preflight, engine, policy, manifests)
          checks/      (one family per module or package; no family imports another, base and common are shared)
            models/    (what the checks share, as pure logic: node shapes, provisioning, quota admission,
                        Kueue, the Pod Security port, DRA, NetworkPolicy, the dry-run probes)
              workloads/   cluster/   (side by side: neither imports the other)
                foundation (kube, config, results, deadline, quantity, tls): no project imports above it

A module may import its own layer and the layers its layer lists below; every import counts,
also one inside a function or under TYPE_CHECKING (a type is a dependency too). docs/development.md
("Architecture") draws the same picture. No import cycle among the webhook's modules, whether its
imports are at module level or inside a function.

Inside workloads/, each kind is a package of its own (aiperf, aiperf_sweep, trainjob): the shared
modules (base, shape, walks, podspec, the registry) never import a kind, and a kind imports another only
where it renders through it (an AIPerfSweep's children are AIPerfJobs). Inside a package listed in
PACKAGE_ORDER (the sweep, trainjob, certmanager, the Pod Security port, Volume Claims) the modules
import one way, in that order.
Around the package: webhook/ never imports the tests (tests/, e2e/) or bench/, and the e2e harness
(e2e/harness/) never imports an e2e test or tests/.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "webhook"
REPO = ROOT.parent
HARNESS = REPO / "e2e" / "harness"

FOUNDATION = "foundation"
#: module (or package prefix) → layer; the longest matching prefix wins
LAYER_OF = {
    "webhook": FOUNDATION,  # the package root (re-exports nothing above the foundation)
    "webhook.kube": FOUNDATION,
    # every private internal of a library the webhook reads (tests/test_compat.py): any layer may use it
    "webhook._compat": FOUNDATION,
    "webhook.imageref": FOUNDATION,
    # the registry client (the Image Pull check's): HTTP to registries, no cluster, no checks
    "webhook.registry": FOUNDATION,
    "webhook.config": FOUNDATION,
    "webhook.results": FOUNDATION,
    "webhook.deadline": FOUNDATION,
    "webhook.quantity": FOUNDATION,
    # typed views (TypedDicts) of the Kubernetes objects the checks read: no project imports
    "webhook.objects": FOUNDATION,
    # the apiserver's own limits on what it reads (request body, labels, annotations): numbers and rules
    "webhook.apilimits": FOUNDATION,
    "webhook.tls": FOUNDATION,
    # Kubernetes name rules (pure functions, no project imports): every layer may use them
    "webhook.cluster.names": FOUNDATION,
    # a CRD's structural schema as the apiserver validates it (the cel library, no project imports above it)
    "webhook.schema": FOUNDATION,
    # CEL compiled and run for the subsets evaluated here (schema rules, DRA selectors): the cel library only
    "webhook.celsubset": FOUNDATION,
    # the stdlib JSON decoder a slice at a time, and the cyclic collector kept out of a large decode (issue 33's
    # loop stall): no project imports
    "webhook.jsonslices": FOUNDATION,
    "webhook.heap": FOUNDATION,
    # answers kept for a TTL and read again ahead of their expiry while in use (asyncio only): the view's
    # on-demand reads and the Dry Run's outcomes
    "webhook.reused": FOUNDATION,
    "webhook.workloads": "workloads",
    "webhook.cluster": "cluster",
    "webhook.checks": "checks",
    "webhook.models": "models",
    "webhook.engine": "domain",
    "webhook.checkmemo": "domain",
    "webhook.policy": "domain",
    "webhook.preflight": "domain",
    "webhook.manifests": "domain",
    "webhook.server": "server",
    "webhook.listener": "server",
    "webhook.admission": "server",
    "webhook.metrics": "server",
    "webhook.certmanager": "certs",
    # the audit controller: beside the server, the same domain below it (one engine)
    "webhook.audit": "audit",
    "webhook.cli": "entry",
    "webhook.__main__": "entry",
}
#: layer → the layers it may import (besides itself)
MAY_IMPORT = {
    FOUNDATION: set(),
    "workloads": {FOUNDATION},
    "cluster": {FOUNDATION},
    "models": {FOUNDATION, "workloads", "cluster"},
    "checks": {FOUNDATION, "workloads", "cluster", "models"},
    "domain": {FOUNDATION, "workloads", "cluster", "models", "checks"},
    "server": {FOUNDATION, "workloads", "cluster", "models", "checks", "domain"},
    "certs": {FOUNDATION},
    "audit": {FOUNDATION, "workloads", "cluster", "models", "checks", "domain"},
    "entry": {FOUNDATION, "workloads", "cluster", "models", "checks", "domain", "server", "certs", "audit"},
}
#: what the checks and the models may know of the cluster layer: the ClusterView protocol, never the live view
CHECKS_SEE_OF_CLUSTER = {"webhook.cluster.view"}
#: the kind packages of workloads/, and the other kinds each may render through
KIND_PACKAGES = {
    "webhook.workloads.aiperf": set(),
    "webhook.workloads.aiperf_sweep": {"webhook.workloads.aiperf"},
    "webhook.workloads.trainjob": set(),
    "webhook.workloads.jobset": set(),
}
#: package → its modules, each importing only those before it (the package's __init__ re-exports all)
PACKAGE_ORDER = {
    "webhook.workloads.aiperf_sweep": [
        "spec", "naming", "credentials", "expansion", "controller", "workload", "children", "adapter",
    ],
    "webhook.workloads.trainjob": ["schema", "merge", "runtime", "plugins", "jobset", "adapter"],
    "webhook.certmanager": ["layout", "store", "rotation", "manager"],
    "webhook.models.podsecurity": [
        "helpers", "api", "checks_host", "checks_pod", "checks_privilege", "checks_profiles", "checks_users", "registry",
    ],
    "webhook.checks.storage": ["classes", "claims", "match", "check"],
    "webhook.models.dra": ["cel", "allocate"],
    "webhook.registry": ["keyring", "challenge", "platform", "address", "client"],
}  # fmt: skip


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


def _targets(path: Path) -> list[tuple[int, str]]:
    """Every absolute import of a file, `from pkg import name` resolved to `pkg.name` where that is a
    module or package in this repository (a relative import is reported as `.<module>`)."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                out.append((node.lineno, "." + (node.module or "")))
                continue
            assert node.module is not None
            for a in node.names:
                sub = REPO.joinpath(*f"{node.module}.{a.name}".split("."))
                is_module = sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file()
                out.append((node.lineno, f"{node.module}.{a.name}" if is_module else node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return out


def _imports(path: Path) -> list[tuple[int, str]]:
    """The imports of the package's own modules (what the layer contract reads)."""
    return [(line, t) for line, t in _targets(path) if t == "webhook" or t.startswith("webhook.")]


def _crossings(path: Path, group_of: Callable[[str], str | None]) -> Iterator[tuple[int, str, str | None, str]]:
    """(line, target, my group, its group) of every import of `path` into another group."""
    mine = group_of(_module_name(path))
    for line, target in _targets(path):
        theirs = group_of(target)
        if theirs is not None and theirs != mine:
            yield line, target, mine, theirs


MODULES = sorted(ROOT.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    missing = [_module_name(p) for p in MODULES if _layer(_module_name(p)) is None]
    assert missing == [], f"give these modules a layer in tests/test_layers.py LAYER_OF: {missing}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module_name(p))
def test_imports_follow_the_layers(path: Path) -> None:
    bad = []
    for line, target, mine, theirs in _crossings(path, _layer):
        if mine is None:
            continue
        if theirs not in MAY_IMPORT[mine]:
            bad.append(f"{path.relative_to(ROOT.parent)}:{line} ({mine}) imports {target} ({theirs})")
        elif mine in ("checks", "models") and theirs == "cluster" and target not in CHECKS_SEE_OF_CLUSTER:
            bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {mine} imports {target}; they see the ClusterView")
    assert bad == []


def test_the_contract_catches_an_upward_import(tmp_path: Path) -> None:
    # the reader itself: a cluster module importing a check is reported
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from webhook.checks import all_checks\n", encoding="utf-8")
    assert _imports(f) == [(2, "webhook.checks")]
    assert _layer("webhook.checks") not in MAY_IMPORT[_layer("webhook.cluster.live") or ""]
    assert _layer("webhook.workloads.aiperf") == "workloads" and _layer("webhook.newmodule") is None


# ----------------------------------------------------------------------------- inside workloads/, and around webhook/


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _kind(module: str) -> str | None:
    return next((k for k in KIND_PACKAGES if _under(module, k)), None)


WORKLOAD_MODULES = [p for p in MODULES if _under(_module_name(p), "webhook.workloads")]


@pytest.mark.parametrize("path", WORKLOAD_MODULES, ids=lambda p: _module_name(p))
def test_kinds_stay_apart(path: Path) -> None:
    bad = []
    for line, target, mine, theirs in _crossings(path, _kind):
        if mine is None:
            bad.append(
                f"{path.relative_to(REPO)}:{line}: the shared workload module {_module_name(path)} imports the kind {target}"
            )
        elif theirs not in KIND_PACKAGES[mine]:
            bad.append(f"{path.relative_to(REPO)}:{line}: the kind {mine} imports the kind {target}")
    assert bad == []


@pytest.mark.parametrize("package", sorted(PACKAGE_ORDER))
def test_a_package_imports_one_way(package: str) -> None:
    order = PACKAGE_ORDER[package]
    folder = REPO.joinpath(*package.split("."))
    found = sorted(p.stem if p.name != "__init__.py" else "" for p in folder.glob("*.py")) + sorted(
        p.parent.name for p in folder.glob("*/__init__.py")
    )
    assert sorted(m for m in found if m) == sorted(order), f"list the modules of {package} in PACKAGE_ORDER"
    bad = []
    for path in (p for p in MODULES if _under(_module_name(p), package) and _module_name(p) != package):
        me = _module_name(path)[len(package) + 1 :].split(".")[0]
        for line, target in _targets(path):
            if not _under(target, package) or target == package:
                continue
            theirs = target[len(package) + 1 :].split(".")[0]
            if theirs != me and order.index(theirs) > order.index(me):
                bad.append(f"{path.relative_to(REPO)}:{line}: {me} imports {theirs}, which comes after it")
    assert bad == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module_name(p))
def test_webhook_never_imports_the_tests(path: Path) -> None:
    bad = [
        f"{path.relative_to(REPO)}:{line} imports {target}"
        for line, target in _targets(path)
        if _under(target, "e2e") or _under(target, "tests") or _under(target, "bench")
    ]
    assert bad == []


@pytest.mark.parametrize("path", sorted(HARNESS.rglob("*.py")), ids=lambda p: p.name)
def test_the_harness_never_imports_a_test(path: Path) -> None:
    bad = [
        f"{path.relative_to(REPO)}:{line} imports {target}"
        for line, target in _targets(path)
        if target.startswith(".")
        or _under(target, "tests")
        or (_under(target, "e2e") and not _under(target, "e2e.harness"))
    ]
    assert bad == []


def test_the_reader_resolves_what_the_contracts_need(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text(
        "from webhook.workloads import aiperf\nfrom webhook.workloads import build_workload\n"
        "from e2e import conftest\nfrom . import x\nimport tests.fakeview\n",
        encoding="utf-8",
    )
    assert _targets(f) == [
        (1, "webhook.workloads.aiperf"),
        (2, "webhook.workloads"),
        (3, "e2e.conftest"),
        (4, "."),
        (5, "tests.fakeview"),
    ]
    assert _kind("webhook.workloads.aiperf_sweep.children") == "webhook.workloads.aiperf_sweep"
    assert (
        _kind("webhook.workloads.aiperf.env") == "webhook.workloads.aiperf" and _kind("webhook.workloads.shape") is None
    )


# ----------------------------------------------------------------------------- no check imports another, and no cycle

#: the modules of checks/ every check may import: what a check is (base), the helpers (common), the registry
CHECKS_SHARED = {"webhook.checks", "webhook.checks.base", "webhook.checks.common"}


def _family(module: str) -> str | None:
    """A check family: a module webhook/checks/X.py or a package webhook/checks/X/ (its modules may
    import each other); None outside checks/ and for what every check may import (CHECKS_SHARED)."""
    if not _under(module, "webhook.checks") or module in CHECKS_SHARED:
        return None
    return ".".join(module.split(".")[:3])


def _check_to_check(module: str, targets: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The imports of `module` into another check family (every one: module level, inside a function,
    under TYPE_CHECKING); the registry (webhook.checks) is the one module that imports every family."""
    mine = _family(module)
    if mine is None:
        return []
    return sorted({(line, t) for line, t in targets if (theirs := _family(t)) is not None and theirs != mine})


def _graph(paths: list[Path]) -> dict[str, set[str]]:
    """module → the webhook modules it imports (every import, module level or not). An import names its
    module only, not the packages above it: Python runs a package's __init__ first, but a package whose
    __init__ re-exports its modules would otherwise be a cycle with each of them."""
    names = {_module_name(p): p for p in paths}
    return {m: {t for _, t in _targets(p) if t in names and t != m} for m, p in names.items()}


def _cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(tuple(sorted(comp)))
    return sorted(found)


CHECK_MODULES = [p for p in MODULES if _family(_module_name(p)) is not None]


def test_no_check_imports_another_check_family() -> None:
    bad = []
    for path in CHECK_MODULES:
        me = _module_name(path)
        for line, target in _check_to_check(me, _targets(path)):
            bad.append(
                f"{path.relative_to(REPO)}:{line}: the check {me} imports {target}; move what they share to webhook/models/"
            )
    assert bad == []


def test_no_import_cycle() -> None:
    assert _cycles(_graph(MODULES)) == [], (
        "an import cycle among webhook modules (break it; no import inside a function to hide it)"
    )


def test_the_check_and_cycle_readers_catch_a_violation(tmp_path: Path) -> None:
    # a check importing another family is reported, also from inside a function and under TYPE_CHECKING
    f = tmp_path / "m.py"
    f.write_text(
        "from typing import TYPE_CHECKING\nfrom webhook.checks.base import Check\nfrom webhook.checks.common import plural\n"
        "from webhook.checks.storage.classes import pick\nfrom webhook.models import nodes\n"
        "if TYPE_CHECKING:\n    from webhook.checks.quotas import ResourceQuotas\n"
        "def f():\n    from webhook.checks import nodes\n",
        encoding="utf-8",
    )
    assert _check_to_check("webhook.checks.storage.check", _targets(f)) == [
        (7, "webhook.checks.quotas"),
        (9, "webhook.checks.nodes"),
    ]
    assert _check_to_check("webhook.checks", _targets(f)) == []  # the registry imports every family
    assert _family("webhook.checks.dra.check") == "webhook.checks.dra" and _family("webhook.models.nodes") is None
    # a cycle through a function-local import is a cycle; a package re-exporting its modules is not
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "p": {"p.x"}, "p.x": set(), "e": {"e"}}
    assert _cycles(g) == [("a", "b", "c")]
    assert _cycles({"x": {"y"}, "y": {"x"}, "z": {"x", "w"}, "w": {"z"}}) == [("w", "z"), ("x", "y")]


def _models_reexported(tree: ast.Module) -> list[str]:
    """The names a module imports from webhook.models and lists in its __all__ (a re-export)."""
    from_models = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and _under(node.module, "webhook.models")
        for a in node.names
    }
    listed: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            listed |= {e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)}
    return sorted(from_models & listed)


def test_no_check_reexports_a_model() -> None:
    # a check importing a model's names for others would hide where they live (and let a check reach another
    # check's models through it): importers name webhook.models
    bad = {
        str(p.relative_to(REPO)): names
        for p in CHECK_MODULES
        if (names := _models_reexported(ast.parse(p.read_text(encoding="utf-8"))))
    }
    assert bad == {}
    tree = ast.parse(
        "from webhook.models.quota import ZERO, project\nfrom webhook.kube import X\n__all__ = ['ZERO', 'X']\n"
    )
    assert _models_reexported(tree) == ["ZERO"]
