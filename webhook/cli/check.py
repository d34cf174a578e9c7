"""`preflight-webhook check`: run the webhook's checks on manifests, before `kubectl apply`.

Same path as the server (adapter → engine → policy, via webhook.preflight.evaluate), and the
report renders the policy's Decision rather than the raw results, so the CLI and the webhook
never disagree: a failing check whose action (or mode, or the namespace's mode label) makes
the webhook warn is shown as a warning, a check the webhook would deny as FAILED. Exit
codes: 0 the webhook would admit every document (with or without warnings), 1 it would deny
one, 2 usage or input errors (unreadable file, a document that is not its kind, no cluster).
With `-o json` stdout carries only AIPerf's `{"passed","has_warnings","checks":[...]}`
(one object per checked document, a list when there are several); everything meant
for humans goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sys
from collections.abc import AsyncIterator
from typing import Any, TextIO

from webhook.checks import all_checks, check_names
from webhook.cli.args import add_manifest_argument
from webhook.cluster.view import ClusterView
from webhook.config import ConfigError, Settings, load_settings
from webhook.deadline import Deadline
from webhook.policy import AUDIT, DENY, WARN, Decision, Outcome
from webhook.results import CheckResult, PreflightResults, Status
from webhook.workloads.base import RuntimeLookup

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

SYMBOLS = {
    Status.PASS: "✓",
    Status.FAIL: "✗",
    Status.WARN: "!",
    Status.SKIP: "-",
    Status.INFO: "i",
}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "check",
        help="run the preflight checks on manifests (exit 0 ok, 1 a check failed, 2 bad input)",
        description=(
            "Run the webhook's checks on AIPerfJob and TrainJob manifests. TrainingRuntime and "
            "ClusterTrainingRuntime documents in the same input are used for their TrainJobs."
        ),
    )
    add_manifest_argument(p)
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format (default text)")
    p.add_argument("--offline", action="store_true", help="no cluster: run only the checks that need none")
    p.add_argument("--config", metavar="FILE", help="webhook config file (policy, publicRegistries, aiperfEnv, ...)")
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig for the cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    p.add_argument("-n", "--namespace", metavar="NS", help="namespace for documents that name none (default: default)")
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="time budget per document (default: the config's budgetSeconds)",
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args, sys.stdout, sys.stderr))
    except KeyboardInterrupt:  # pragma: no cover - interactive
        print("interrupted", file=sys.stderr)
        return EXIT_USAGE


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from webhook.manifests import load_documents, split_runtimes

    try:
        settings = load_settings(args.config, known_checks=check_names())
    except ConfigError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    timeout = args.timeout if args.timeout is not None else settings.budget_seconds
    if timeout <= 0:
        print("error: --timeout must be greater than 0", file=err)
        return EXIT_USAGE
    try:
        docs = load_documents(args.filename)
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    jobs, file_lookup = split_runtimes(docs)
    if not jobs:
        print("error: the input holds only training runtimes; give the TrainJob too", file=err)
        return EXIT_USAGE

    async with _cluster(args, settings, err) as opened:
        if opened is False:
            return EXIT_USAGE
        view: ClusterView | None = opened
        lookup = _lookup(file_lookup, view)
        return await _check_all(jobs, args, settings, view, lookup, timeout, out, err)


@contextlib.asynccontextmanager
async def _cluster(args: argparse.Namespace, settings: Settings, err: TextIO) -> AsyncIterator[Any]:
    """The live ClusterView (None offline; False when it cannot be opened, after saying why)."""
    if args.offline:
        yield None
        return
    from webhook.cluster.live import open_cluster_view

    try:
        view = await open_cluster_view(settings, kubeconfig=args.kubeconfig, checks=all_checks())
    except Exception as exc:  # any failure to reach the cluster is an input problem for the CLI
        text = str(exc) or type(exc).__name__
        print(f"error: cannot connect to the cluster: {text}. Fix: check --kubeconfig, or run with --offline", file=err)
        yield False
        return
    try:
        yield view
    finally:
        await view.close()


def _lookup(file_lookup: RuntimeLookup, view: ClusterView | None) -> RuntimeLookup:
    """Runtimes given in the input win; the cluster's cache answers for the rest."""
    if view is None:
        return file_lookup
    from webhook.preflight import view_runtime_lookup

    cluster_lookup = view_runtime_lookup(view)

    def lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return file_lookup(kind, namespace, name) or cluster_lookup(kind, namespace, name)

    return lookup


async def _check_all(
    jobs: list[dict[str, Any]],
    args: argparse.Namespace,
    settings: Settings,
    view: ClusterView | None,
    lookup: RuntimeLookup,
    timeout: float,
    out: TextIO,
    err: TextIO,
) -> int:
    from webhook.preflight import evaluate

    reports: list[dict[str, Any]] = []
    input_errors = 0
    any_failed = False
    for i, obj in enumerate(jobs):
        label = _label(obj, args.namespace, i)
        ev = await evaluate(
            obj,
            settings=settings,
            deadline=Deadline(timeout),
            view=view,
            runtime_lookup=lookup,
            namespace=args.namespace,
        )
        if ev.unreadable is not None:  # the input's mistake: said as one, not as a check report
            print(f"error: {label}: {ev.unreadable}", file=err)
            input_errors += 1
            continue
        if ev.decision.outcome is Outcome.UNHANDLED:
            print(
                f"note: {label}: kind {obj.get('kind')} is not checked by preflight-webhook (the webhook allows it untouched)",
                file=err,
            )
            continue
        shown = as_decided(ev.results, ev.decision)
        any_failed = any_failed or not ev.decision.allowed
        reports.append(shown.to_dict())
        if args.output == "text":  # a verdict on the whole object (Object Size) comes without a Workload
            ref = ev.workload.ref if ev.workload is not None else label
            _print_text(ref, shown, ev.decision.allowed, view is None, out)
    if args.output == "json" and reports:
        json.dump(reports[0] if len(reports) == 1 else reports, out, indent=2)
        out.write("\n")
    if not reports and not input_errors:
        print("error: no AIPerfJob or TrainJob found in the input", file=err)
        return EXIT_USAGE
    if input_errors:
        return EXIT_USAGE
    return EXIT_FAILED if any_failed else EXIT_OK


def _label(obj: dict[str, Any], namespace: str | None, index: int) -> str:
    meta: dict[str, Any] = m if isinstance(m := obj.get("metadata"), dict) else {}
    name = meta.get("name") or meta.get("generateName") or f"document {index + 1}"
    ns = meta.get("namespace") or namespace or "default"
    return f"{obj.get('kind', 'object')} {ns}/{name}"


def as_decided(results: PreflightResults, decision: Decision) -> PreflightResults:
    """The results as the webhook answers them: FAIL only where the decision denies; a failure
    the decision turns into a warning (action warn, mode warn, namespace label) or records for
    the audit log only is WARN, with a detail saying so. Rendering only: the verdict is the
    Decision's (webhook.policy.decide), never recomputed here."""
    mode = decision.audit_annotations.get("mode", "")
    out: list[CheckResult] = []
    for r, verdict in zip(results.checks, decision.verdicts or [""] * len(results.checks)):
        if verdict == DENY and r.status is not Status.FAIL:  # e.g. a timeout under timeoutAction deny
            r = dataclasses.replace(r, status=Status.FAIL)
        elif r.status is Status.FAIL and verdict in (WARN, AUDIT):
            why = (
                "the webhook admits it with this warning"
                if verdict == WARN
                else "the webhook admits it and records this in its audit annotations only"
            )
            cause = f"mode {mode}" if mode != "enforce" else f"the check's action is {verdict}"
            r = dataclasses.replace(r, status=Status.WARN, details=[*r.details, f"{why} ({cause})"])
        out.append(r)
    return PreflightResults(out)


def render_text(ref: str, results: PreflightResults, allowed: bool, offline: bool) -> str:
    """The human report for one document: header, one line per check, indented details and hints."""
    lines = [ref]
    width = max((len(r.name) for r in results.checks), default=0)
    for r in results.checks:
        lines.append(f"  {SYMBOLS[r.status]} {r.name.ljust(width)}  {r.message}")
        if r.status in (Status.FAIL, Status.WARN):
            lines.extend(f"      {d}" for d in r.details if d not in r.message)
        lines.extend(f"      hint: {h}" for h in r.hints)
    lines.append("  " + _summary(results, allowed, offline))
    return "\n".join(lines)


def _summary(results: PreflightResults, allowed: bool, offline: bool) -> str:
    counts = {s: len(results.by_status(s)) for s in Status}
    parts = [
        f"{counts[Status.PASS]} passed",
        f"{counts[Status.FAIL]} failed",
        f"{counts[Status.WARN]} warnings",
        f"{counts[Status.SKIP]} skipped",
    ]
    verdict = "FAILED" if not allowed else ("PASSED with warnings" if results.has_warnings else "PASSED")
    tail = "; the webhook would deny it" if not allowed else ""
    if offline and counts[Status.SKIP]:
        tail += "; cluster checks were skipped (offline)"
    return f"{verdict}: {', '.join(parts)}{tail}"


def _print_text(ref: str, results: PreflightResults, allowed: bool, offline: bool, out: TextIO) -> None:
    out.write(render_text(ref, results, allowed, offline) + "\n\n")


__all__ = ["add_parser", "run", "render_text", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "CheckResult"]
