"""`preflight-webhook check`: run the webhook's checks on manifests, before `kubectl apply`.

Same path as the server (adapter → engine → policy, via webhook.preflight.evaluate), and the
report renders the policy's Decision rather than the raw results, so the CLI and the webhook
never disagree: a failing check whose action (or mode, or the namespace's mode label) makes
the webhook warn is shown as a warning, a check the webhook would deny as FAILED. Exit
codes: 0 the webhook would admit every document (with or without warnings; with `--fail-on warn`,
without), 1 it would deny one (or, with `--fail-on warn`, warn of one), 2 usage or input errors
(unreadable file, a document that is not its kind, no cluster; with `--fail-on-empty`, no job).

Offline, each job (and each TrainingRuntime given beside them) is first validated against its CRD's schema as
kube-apiserver would validate a create (webhook.cli.schema_check over webhook.schema): the `CRD Schema` result,
a failure the webhook's policy cannot change. A job whose results are all skips is NOT CHECKED, a warning.

Input: any number of -f (files, directories with -R, - for stdin, e.g. `kustomize build` or
`helm template` output); objects of kinds the webhook does not check are counted and skipped,
and so are the paths a directory holds that are not manifests (webhook.manifests.walk_inputs). An
input with no job is an empty report, exit 0.
Output (webhook.cli.formats renders it): text, json (an array; AIPerf's `passed`, `has_warnings`,
`checks` in each entry, and where the job is), junit, sarif, github (workflow commands). In every
format an input error is part of the report too (a `Manifest` check that failed, an <error>, a SARIF
result, an ::error), besides the `error:` line on stderr. The summary line ends text and github
output; for json, junit and sarif, stdout carries only the document, and the summary goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import sys
from collections.abc import AsyncIterator
from typing import Any, TextIO

from webhook.checks import all_checks
from webhook.cli.args import add_manifest_argument
from webhook.cli.formats import FORMATS, ErrorEntry, JobEntry, Report, Subject, skipped_text, visible
from webhook.cli.schema_check import NOTHING_CHECKED, SCHEMA_CHECK, SCHEMA_SUMMARY, schema_result
from webhook.cli.session import kubeconfig_problem, live_view, settings_and_budget
from webhook.cluster.view import ClusterView
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.manifests import NOT_OBJECT, Located
from webhook.policy import AUDIT, DENY, WARN, Decision, Outcome
from webhook.results import CheckResult, PreflightResults, Status
from webhook.workloads import known_kinds
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


def kinds_text(conjunction: str = "and") -> str:
    """`AIPerfJob, AIPerfSweep, TrainJob and JobSet`: the kinds an adapter judges (webhook.workloads)."""
    kinds = known_kinds()
    return f"{', '.join(kinds[:-1])} {conjunction} {kinds[-1]}" if len(kinds) > 1 else "".join(kinds)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "check",
        help="run the preflight checks on manifests (exit 0 ok, 1 a check failed, 2 bad input)",
        description=(
            f"Run the webhook's checks on {kinds_text()} manifests. TrainingRuntime and "
            "ClusterTrainingRuntime documents in the same input are used for their TrainJobs; objects of "
            "other kinds are counted and skipped. An input with no job gives an empty report and exit 0 "
            "(--fail-on-empty: exit 2)."
        ),
    )
    add_manifest_argument(p, many=True)
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="in the directories given with -f, pass over the files and directories GLOB matches (fnmatch: * "
        "also matches /; matched against the name, the path below the -f directory and the path as shown); "
        "repeatable",
    )
    p.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default="text",
        help="output format: text (default), json (an array, one entry per job: "
        "docs/schemas/check-report.v1.schema.json), junit (JUnit XML), sarif (SARIF 2.1.0, "
        "for code scanning), github (GitHub Actions annotations)",
    )
    p.add_argument(
        "--fail-on",
        choices=("fail", "warn"),
        default="fail",
        help="exit 1 when the webhook would deny a job (fail, the default), or also when it would admit one "
        "with warnings (warn)",
    )
    p.add_argument(
        "--fail-on-empty",
        action="store_true",
        help=f"exit 2 when the input holds no {kinds_text('or')} (default: an empty report, exit 0)",
    )
    p.add_argument("--offline", action="store_true", help="no cluster: run only the checks that need none")
    p.add_argument("--config", metavar="FILE", help="webhook config file (policy, publicRegistries, aiperfEnv, ...)")
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig for the cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    p.add_argument("--context", metavar="NAME", help="the kubeconfig context to use (default: its current-context)")
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
    from webhook.manifests import is_manifest, locate_file, split_runtimes, walk_inputs

    loaded = settings_and_budget(args, err)
    if loaded is None:
        return EXIT_USAGE
    settings, timeout = loaded
    if args.filename.count("-") > 1:
        print("error: -f - (stdin) can be given once", file=err)
        return EXIT_USAGE
    inputs = walk_inputs(args.filename, args.recursive, args.exclude)
    report = Report(skipped_paths=inputs.skipped)
    located: list[Located] = []
    for path, walked in inputs.files:
        found = locate_file(path)
        if walked and not is_manifest(found):  # a workflow, a config file: not ours to judge
            report.skipped_paths[NOT_OBJECT] += 1
            continue
        report.files += 1
        located += found
    for link in inputs.dangling:  # as kubectl -R, which fails to open it: said, never passed over
        located.append(Located(link, 0, error=f"{link}: a symbolic link to {_target(link)}, which does not exist"))
    _, file_lookup = split_runtimes([d.obj for d in located if d.obj is not None])
    items = []
    for d in located:
        if d.obj is None or _is_job(d.obj):
            items.append(d)
        elif args.offline and (entry := _refused_runtime(d, args.namespace)) is not None:
            report.entries.append(entry)  # the apiserver would refuse it: said, as a job's failure is
            if args.output == "text":
                out.write(render_text(entry.label, entry.results, False, True) + "\n\n")
        else:  # a runtime: used for the TrainJobs beside it, not itself checked
            report.skipped[str(d.obj.get("kind"))] += 1
    if not any(d.obj is not None for d in items):  # nothing to judge: no cluster needed
        await _check_all(items, report, args, settings, None, file_lookup, timeout, out, err)
        return _finish(report, args, out, err)

    async with _cluster(args, settings, err) as opened:
        if opened is False:
            return EXIT_USAGE
        view: ClusterView | None = opened
        lookup = _lookup(file_lookup, view)
        await _check_all(items, report, args, settings, view, lookup, timeout, out, err)
    return _finish(report, args, out, err)


def _refused_runtime(d: Located, namespace: str | None) -> JobEntry | None:
    """A (Cluster)TrainingRuntime its CRD's schema refuses, as an entry with that one failed check (offline);
    None for one the apiserver would accept (it stays counted with the skipped kinds)."""
    assert d.obj is not None
    result = schema_result(d.obj)
    if result.status is not Status.FAIL:
        return None
    label = _label(d.obj, namespace, d.document - 1 if d.document else 0)
    subject = _subject(d.obj, namespace)
    return JobEntry(d.source, d.line, label, PreflightResults([result]), False, subject, d.document)


def _target(link: str) -> str:
    try:
        return repr(os.readlink(link))
    except OSError:  # pragma: no cover - removed meanwhile
        return "a path"


def _finish(report: Report, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Render the report (an empty one too: every format stays valid for its reader) and choose the exit code."""
    empty = not report.entries  # (an input error alone is said as one)
    if empty:
        tail = f"; {skipped_text(report.skipped)}" if report.skipped else ""
        level = "error" if args.fail_on_empty else "note"
        print(visible(f"{level}: no {kinds_text('or')} found in the input{tail}"), file=err)
    _render(report, args.output, out, err)
    if report.errors or (empty and args.fail_on_empty):
        return EXIT_USAGE
    if any(not j.allowed for j in report.jobs):
        return EXIT_FAILED
    if args.fail_on == "warn" and any(j.warned for j in report.jobs):
        return EXIT_FAILED
    return EXIT_OK


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
    problem = kubeconfig_problem(args.kubeconfig, args.context)
    if problem is not None:
        print(f"error: {problem}, or run with --offline", file=err)
        yield False
        return
    fix = "check --kubeconfig and --context, or run with --offline"
    async with live_view(settings, args.kubeconfig, err, fix=fix, context=args.context) as view:
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
) -> None:
    from webhook.preflight import evaluate

    for i, d in enumerate(items):
        if d.obj is None:
            message = d.error or "unreadable"
            print(f"error: {visible(message)}", file=err)
            where = f"{d.source}:{d.line}" if d.line else d.source
            report.entries.append(ErrorEntry(d.source, d.line, where, message, document=d.document))
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
            print(f"error: {visible(label)}: {visible(ev.unreadable)}", file=err)
            subject = _subject(obj, args.namespace)
            report.entries.append(ErrorEntry(d.source, d.line, label, f"{label}: {ev.unreadable}", subject, d.document))
            continue
        if ev.decision.outcome is Outcome.UNHANDLED:  # the webhook allows it untouched: counted, not checked
            report.skipped[str(obj.get("kind"))] += 1
            continue
        shown = as_decided(ev.results, ev.decision)
        granted = [s for s in ev.skips if s.granted]
        # a check the annotation skips is named where it would have been (the engine leaves it out)
        shown.checks = _in_report_order(shown.checks, [CheckResult(s.check, Status.SKIP, s.message) for s in granted])
        notes = [n for n in ev.notes if n not in {s.note for s in granted}]
        allowed = ev.decision.allowed
        schema = schema_result(obj) if view is None else None
        if schema is not None:  # offline: what the apiserver would answer first (online, Dry Run asks it)
            shown.checks.insert(0, schema)
            allowed = allowed and schema.status is not Status.FAIL
        if allowed and not any(r.status is not Status.SKIP for r in shown.checks):
            notes.append(NOTHING_CHECKED)  # never PASSED: a warning in every format
        # a verdict on the whole object (Object Size) comes without a Workload
        wl = ev.workload
        ref = wl.ref if wl is not None else label
        subject = Subject(wl.api_version, wl.kind, wl.namespace, wl.name) if wl else _subject(obj, args.namespace)
        entry = JobEntry(d.source, d.line, ref, shown, allowed, subject, d.document, ev.skips, notes)
        report.entries.append(entry)
        if args.output == "text":
            out.write(render_text(ref, shown, allowed, view is None, notes) + "\n\n")


def _in_report_order(results: list[CheckResult], more: list[CheckResult]) -> list[CheckResult]:
    """`results` with `more` each placed where its check runs (all_checks' order)."""
    order = {c.name: i for i, c in enumerate(all_checks())}
    out = list(results)
    for r in more:
        at = next((i for i, x in enumerate(out) if order.get(x.name, len(order)) > order.get(r.name, len(order))), None)
        out.insert(len(out) if at is None else at, r)
    return out


def _render(report: Report, fmt: str, out: TextIO, err: TextIO) -> None:
    from webhook.cli import formats as rp

    if fmt == "text":
        if report.jobs or not report.errors:  # an input error alone is said on stderr, as always
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
        out.write(rp.render_sarif(report, {SCHEMA_CHECK: SCHEMA_SUMMARY} | {c.name: c.summary for c in all_checks()}))
    print(rp.summary(report), file=err)


def _subject(obj: dict[str, Any], namespace: str | None) -> Subject:
    """The object's identity as written (for a verdict given without a Workload)."""
    meta: dict[str, Any] = m if isinstance(m := obj.get("metadata"), dict) else {}

    def text(v: Any) -> str | None:
        return v if isinstance(v, str) and v else None

    ns = text(meta.get("namespace")) or namespace or "default"
    name = text(meta.get("name")) or text(meta.get("generateName"))
    return Subject(text(obj.get("apiVersion")), text(obj.get("kind")), ns, name)


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


def render_text(
    ref: str, results: PreflightResults, allowed: bool, offline: bool, notes: list[str] | None = None
) -> str:
    """The human report for one document: header, one line per check, indented details and hints, a `!`
    line per override notice the webhook warns of (a refused skip). The object's text is made `visible`."""
    notes = notes or []
    lines = [visible(ref)]
    width = max((len(r.name) for r in results.checks), default=0)
    for r in results.checks:
        lines.append(f"  {SYMBOLS[r.status]} {visible(r.name).ljust(width)}  {visible(r.message)}")
        if r.status in (Status.FAIL, Status.WARN):
            lines.extend(f"      {visible(d)}" for d in r.details if d not in r.message)
        lines.extend(f"      hint: {visible(h)}" for h in r.hints)
    lines.extend(f"  {SYMBOLS[Status.WARN]} {visible(n)}" for n in notes)
    lines.append("  " + _summary(results, allowed, offline, len(notes)))
    return "\n".join(lines)


def _summary(results: PreflightResults, allowed: bool, offline: bool, notes: int = 0) -> str:
    """`notes`: the override notices the webhook warns of, counted with the warnings."""
    counts = {s: len(results.by_status(s)) for s in Status}
    parts = [
        f"{counts[Status.PASS]} passed",
        f"{counts[Status.FAIL]} failed",
        f"{counts[Status.WARN] + notes} warnings",
        f"{counts[Status.SKIP]} skipped",
    ]
    warned = results.has_warnings or notes > 0
    verdict = "FAILED" if not allowed else ("PASSED with warnings" if warned else "PASSED")
    if allowed and not any(r.status is not Status.SKIP for r in results.checks):
        verdict = "NOT CHECKED"  # only skips: never PASSED (its warning is NOTHING_CHECKED)
    refused = any(r.name == SCHEMA_CHECK and r.status is Status.FAIL for r in results.checks)
    tail = "" if allowed else ("; kube-apiserver would refuse it" if refused else "; the webhook would deny it")
    if offline and counts[Status.SKIP]:
        tail += "; cluster checks were skipped (offline)"
    return f"{verdict}: {', '.join(parts)}{tail}"


__all__ = ["add_parser", "run", "render_text", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "CheckResult"]
