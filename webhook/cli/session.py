"""What `check` and `report` both do before they judge: read the --config and the --timeout budget,
and open the live ClusterView (--kubeconfig). Declared once, so their errors read the same."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import yaml

from webhook.checks import all_checks, check_names
from webhook.config import ConfigError, Settings, load_settings

if TYPE_CHECKING:
    from webhook.cluster.live import LiveClusterView


def settings_and_budget(args: argparse.Namespace, err: TextIO) -> tuple[Settings, float] | None:
    """The settings of --config and the time budget per job (--timeout, else the config's
    budgetSeconds); None after saying on `err` what is wrong and how to fix it."""
    try:
        settings = load_settings(args.config, known_checks=check_names())
    except ConfigError as exc:
        print(f"error: {exc}", file=err)
        return None
    timeout = args.timeout if args.timeout is not None else settings.budget_seconds
    if timeout <= 0:
        print(
            f"error: --timeout must be greater than 0 (got {timeout:g}): it is each job's time budget in "
            "seconds. Fix: give e.g. --timeout 10, or leave it out to use the config's budgetSeconds",
            file=err,
        )
        return None
    return settings, timeout


def _names(entries: Any) -> list[str]:
    """The names of a kubeconfig's `contexts`, `clusters` or `users` list."""
    if not isinstance(entries, list):
        return []
    return [str(e["name"]) for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)]


def kubeconfig_problem(kubeconfig: str | None, context: str | None) -> str | None:
    """Why the kubeconfig (--kubeconfig, else $KUBECONFIG, a list of files, else ~/.kube/config) cannot give
    `context` (or its current-context), in one line ending with its fix; None when it can, or when the
    in-cluster config is used (no --kubeconfig and no --context, in a pod). The kubernetes client's own
    errors ("Expected key current-context") do not say which file or what to do."""
    if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    fix = "Fix: give a kubeconfig with --kubeconfig FILE (or $KUBECONFIG)"
    if kubeconfig is not None:
        paths, named = [kubeconfig], f"--kubeconfig {kubeconfig}"
    elif os.environ.get("KUBECONFIG"):
        paths = [p for p in os.environ["KUBECONFIG"].split(os.pathsep) if p]
        named = f"$KUBECONFIG ({os.environ['KUBECONFIG']})"
    else:
        home = str(Path.home() / ".kube" / "config")
        paths, named = [home], home
    docs = _kubeconfig_docs(paths, fix)
    if isinstance(docs, str):
        return docs
    if not docs:
        missing = "does not exist" if len(paths) == 1 else "names no file that exists"
        unset = " and $KUBECONFIG is not set" if kubeconfig is None and not os.environ.get("KUBECONFIG") else ""
        return f"no kubeconfig: {named} {missing}{unset}. {fix}"
    where = docs[0][0] if len(docs) == 1 else named
    contexts = [n for _, d in docs for n in _names(d.get("contexts"))]
    known = f" (it has: {', '.join(contexts)})" if contexts else " (it has none)"
    current = next((str(d["current-context"]) for _, d in docs if d.get("current-context")), None)
    chosen = context or current
    if not chosen:
        return f"the kubeconfig {where} has no current-context. Fix: give --context NAME{known}"
    if chosen not in contexts:
        how = "--context" if context else "its current-context"
        return f"the kubeconfig {where} has no context {chosen!r}, named by {how}{known}. Fix: give --context NAME"
    return _context_refs_problem(docs, where, chosen)


def _kubeconfig_docs(paths: list[str], fix: str) -> list[tuple[str, dict[str, Any]]] | str:
    """(path, document) of each kubeconfig file of `paths` that exists and is not empty; or why one of them
    cannot be read as a kubeconfig, ending with `fix`."""
    docs: list[tuple[str, dict[str, Any]]] = []
    for path in paths:
        p = Path(path)
        if not p.is_file():
            continue
        try:
            doc = yaml.safe_load(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            return f"cannot read the kubeconfig {path}: {getattr(exc, 'strerror', None) or exc}. {fix}"
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            return f"the kubeconfig {path} is not valid YAML{where}. {fix}"
        if doc is None:
            continue
        if not isinstance(doc, dict):
            return f"the kubeconfig {path} is not a kubeconfig (a mapping with clusters, users and contexts). {fix}"
        docs.append((path, doc))
    return docs


def _context_refs_problem(docs: list[tuple[str, dict[str, Any]]], where: str, chosen: str) -> str | None:
    """Why context `chosen` cannot be used: it names no cluster, or a cluster or user the kubeconfig lacks; else None."""
    entry = next(e for _, d in docs for e in d.get("contexts") or [] if isinstance(e, dict) and e.get("name") == chosen)
    spec: dict[str, Any] = c if isinstance(c := entry.get("context"), dict) else {}
    for field, plural in (("cluster", "clusters"), ("user", "users")):
        name = spec.get(field)
        names = [n for _, d in docs for n in _names(d.get(plural))]
        if field == "cluster" and not name:
            return f"the kubeconfig {where}: context {chosen!r} names no cluster. Fix: kubectl config set-context"
        if name and name not in names:
            return (
                f"the kubeconfig {where}: context {chosen!r} names {field} {name!r}, which is not in its {plural}. "
                f"Fix: kubectl config set-context {chosen} --{field}=NAME"
            )
    return None


@contextlib.asynccontextmanager
async def live_view(
    settings: Settings, kubeconfig: str | None, err: TextIO, fix: str = "check --kubeconfig", context: str | None = None
) -> AsyncIterator[LiveClusterView | None]:
    """The live ClusterView, closed on exit; None when it cannot be opened, after saying why on
    `err` with `fix` (any failure to reach the cluster is an input problem for the CLI)."""
    from webhook.cluster.live import open_cluster_view

    # the client logs a WARNING for a kubeconfig file it does not find, beside the error said here
    logging.getLogger("kubernetes_asyncio.config").setLevel(logging.ERROR)
    try:
        view = await open_cluster_view(settings, kubeconfig=kubeconfig, checks=all_checks(), context=context)
    except Exception as exc:
        print(f"error: cannot connect to the cluster: {str(exc) or type(exc).__name__}. Fix: {fix}", file=err)
        yield None
        return
    try:
        yield view
    finally:
        await view.close()
