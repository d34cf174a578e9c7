"""`preflight-webhook check`: run the webhook's checks on manifests, before `kubectl apply`.

Same path as the server (adapter → engine → policy, via webhook.preflight.evaluate), and the
report renders the policy's Decision rather than the raw results, so the CLI and the webhook
never disagree: a failing check whose action (or mode, or the namespace's mode label) makes
the webhook warn is shown as a warning, a check the webhook would deny as FAILED. Exit
codes: 0 the webhook would admit every document (with or without warnings), 1 it would deny
one, 2 usage or input errors (unreadable file, a document that is not its kind, no cluster).

Input: any number of -f (files, directories with -R, - for stdin, e.g. `kustomize build` or
`helm template` output); objects of kinds the webhook does not check are counted and skipped.
Output (webhook.cli.formats renders it): text, json (AIPerf's `{"passed","has_warnings","checks":[...]}`,
one object per document, a list when there are several), junit, sarif, github (workflow
commands). In every format an input error is part of the report too (a `Manifest` check that
failed, an <error>, a SARIF result, an ::error), besides the `error:` line on stderr. The
summary line ends text and github output; for json, junit and sarif, stdout carries only
the document, and the summary goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import sys
from collections.abc import AsyncIterator
from typing import Any, TextIO

from webhook.checks import all_checks
from webhook.cli.args import add_manifest_argument
from webhook.cli.formats import FORMATS, ErrorEntry, JobEntry, Report, skipped_text
from webhook.cli.session import live_view, settings_and_budget
from webhook.cluster.view import ClusterView
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.manifests import Located
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
    add_manifest_argument(p, many=True)
    p.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default="text",
        help="output format: text (default), json (AIPerf's shape), junit (JUnit XML), sarif (SARIF 2.1.0, "
        "for code scanning), github (GitHub Actions annotations)",
    )
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
    from webhook.manifests import expand_paths, locate_file, split_runtimes

    loaded = settings_and_budget(args, err)
    if loaded is None:
        return EXIT_USAGE
    settings, timeout = loaded
    if args.filename.count("-") > 1:
        print("error: -f - (stdin) can be given once", file=err)
        return EXIT_USAGE
    files = expand_paths(args.filename, args.recursive)
    report = Report(files=len(files))
    located = [d for f in files for d in locate_file(f)]
    _, file_lookup = split_runtimes([d.obj for d in located if d.obj is not None])
    items = [d for d in located if d.obj is None or _is_job(d.obj)]
    if not any(d.obj is not None for d in items) and not any(d.error for d in items):
        print("error: the input holds only training runtimes; give the TrainJob too", file=err)
        return EXIT_USAGE

    async with _cluster(args, settings, err) as opened:
        if opened is False:
            return EXIT_USAGE
        view: ClusterView | None = opened
        lookup = _lookup(file_lookup, view)
        return await _check_all(items, report, args, settings, view, lookup, timeout, out, err)


def _is_job(obj: dict[str, Any]) -> bool:
    """Everything but the runtimes given beside the jobs (split_runtimes' lookup answers with those)."""
    from webhook.manifests import RUNTIME_KINDS

    return not (obj.get("kind") in RUNTIME_KINDS and str(obj.get("apiVersion", "")).startswith("trainer.kubeflow.org/"))


@contextlib.asynccontextmanager
async def _cluster(args: argparse.Namespace, settings: Settings, err: TextIO) -> AsyncIterator[Any]:
    """The live ClusterView (None offline; False when it cannot be opened, after saying why)."""
    if args.offline:
        yield None
        return
    async with live_view(settings, args.kubeconfig, err, fix="check --kubeconfig, or run with --offline") as view:
        yield False if view is None else view


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
    items: list[Located],
    report: Report,
    args: argparse.Namespace,
    settings: Settings,
    view: ClusterView | None,
    lookup: RuntimeLookup,
    timeout: float,
    out: TextIO,
    err: TextIO,
) -> int:
    from webhook.preflight import evaluate

    for i, d in enumerate(items):
        if d.obj is None:
            message = d.error or "unreadable"
            print(f"error: {message}", file=err)
            report.entries.append(ErrorEntry(d.source, d.line, f"{d.source}:{d.line}" if d.line else d.source, message))
            continue
        obj = d.obj
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
            report.entries.append(ErrorEntry(d.source, d.line, label, f"{label}: {ev.unreadable}"))
            continue
        if ev.decision.outcome is Outcome.UNHANDLED:  # the webhook allows it untouched: counted, not checked
            report.skipped[str(obj.get("kind"))] += 1
            continue
        shown = as_decided(ev.results, ev.decision)
        # a verdict on the whole object (Object Size) comes without a Workload
        ref = ev.workload.ref if ev.workload is not None else label
        report.entries.append(JobEntry(d.source, d.line, ref, shown, ev.decision.allowed))
        if args.output == "text":
            _print_text(ref, shown, ev.decision.allowed, view is None, out)
    if not report.entries:
        tail = f"; {skipped_text(report.skipped)}" if report.skipped else ""
        print(f"error: no AIPerfJob or TrainJob found in the input{tail}", file=err)
        return EXIT_USAGE
    _render(report, args.output, out, err)
    if report.errors:
        return EXIT_USAGE
    return EXIT_FAILED if any(not j.allowed for j in report.jobs) else EXIT_OK


def _render(report: Report, fmt: str, out: TextIO, err: TextIO) -> None:
    from webhook.cli import formats as rp

    if fmt == "text":
        if report.jobs:  # an input error alone is said on stderr, as always
            out.write(rp.summary(report) + "\n")
        return
    if fmt == "github":
        out.write(rp.render_github(report))
        out.write(rp.summary(report) + "\n")
        return
    if fmt == "json":
        out.write(rp.render_json(report))
    elif fmt == "junit":
        out.write(rp.render_junit(report))
    else:
        out.write(rp.render_sarif(report, {c.name: c.summary for c in all_checks()}))
    print(rp.summary(report), file=err)


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
