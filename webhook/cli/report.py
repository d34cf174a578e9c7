"""`preflight-webhook report`: what fails if you switch the webhook to enforce? (read-only)

Reads the Policy Reports the audit controller writes (openreports.io/v1alpha1 `Report` named
`preflight-webhook`, one per namespace; webhook/audit/reports.py). Where there are none (the
controller is off, the CRDs are not installed, or it has not scanned that namespace yet) it computes
the same findings live from the kubeconfig: it lists the jobs the audit controller judges (its kinds,
and only the ones that have not started: webhook/audit/jobs.py) and runs each through the webhook's own path (`webhook.preflight.evaluate` with the live ClusterView, as
`check` and `serve` do), then asks the domain what enforce mode would do
(`webhook.audit.findings`). It never writes.

Exit codes: 0 no job would be denied, 1 at least one would be denied in enforce mode, 2 usage or
cluster errors. `-o json` prints one JSON document on stdout; notes go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from webhook.audit.jobs import JUDGED, RUNNING, job_kinds
from webhook.cli.session import live_view, settings_and_budget
from webhook.config import Settings

if TYPE_CHECKING:
    from webhook.cluster.view import ClusterView

EXIT_OK, EXIT_DENIED, EXIT_USAGE = 0, 1, 2

#: a message is cut to this in the table (json and the report keep it whole)
TABLE_MESSAGE = 160

EPILOG = """\
Where the answer comes from:
  reports  the audit controller's Policy Reports (kubectl get reports.openreports.io -A), kept
           up to date as jobs and what they read change; only jobs that have not started are in them
  live     no report found: the jobs that have not started are judged now, with your credentials,
           exactly as the webhook would judge them on kubectl apply (--live forces this)

Results (what the webhook in enforce mode does with each finding):
  fail     enforce would DENY the job for this check
  warn     enforce admits it with a warning (a check whose action is warn, or one that cannot verify)
  pass     nothing to report;  skip: the check did not apply or is off

Examples:
  preflight-webhook report -A                 every namespace; exit 1 if enforce would deny a job
  preflight-webhook report -n team-a -o json  one namespace, as JSON
  preflight-webhook report -A --all           also the passing and skipped checks

The rollout this answers, step by step (audit, read the reports, warn, enforce): docs/rollout.md
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "report",
        help="what fails if you switch to enforce? the audit findings per job (read-only)",
        description=(
            "Show, per job and check, what the webhook in enforce mode would deny: read from the audit\n"
            "controller's Policy Reports, or computed live from the kubeconfig when there are none.\n"
            "Read-only. Exit 0 nothing would be denied, 1 something would, 2 usage or cluster errors."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", metavar="NS", help="the namespace to report on (default: default)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="report on every namespace")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format (default table)")
    p.add_argument("--all", action="store_true", help="also show passing and skipped checks (table)")
    p.add_argument("--live", action="store_true", help="ignore the reports: judge the jobs now, from the kubeconfig")
    p.add_argument("--config", metavar="FILE", help="webhook config file (the live judgement uses its policy)")
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="time budget per job when live (default: budgetSeconds)"
    )
    p.set_defaults(func=run)
    return p


@dataclass
class Row:
    namespace: str
    kind: str
    name: str
    check: str
    result: str
    message: str
    child: str = ""
    #: the verdict in enforce mode and in the current mode (report properties)
    enforce: str = ""
    now: str = ""


@dataclass
class Answer:
    source: str  # "reports" | "live"
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def denied_jobs(self) -> list[tuple[str, str, str, str]]:
        seen: dict[tuple[str, str, str, str], None] = {}
        for r in self.rows:
            if r.result == "fail":
                seen[(r.namespace, r.kind, r.name, r.child)] = None
        return list(seen)

    def jobs(self) -> list[tuple[str, str, str, str]]:
        return list(dict.fromkeys((r.namespace, r.kind, r.name, r.child) for r in self.rows))


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args, sys.stdout, sys.stderr))
    except KeyboardInterrupt:  # pragma: no cover - interactive
        return EXIT_USAGE


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    loaded = settings_and_budget(args, err)
    if loaded is None:
        return EXIT_USAGE
    settings, timeout = loaded
    namespace = None if args.all_namespaces else (args.namespace or "default")
    from webhook.cluster.client import KubeClient, load_configuration
    from webhook.cluster.view import ApiError

    try:
        client = KubeClient(await load_configuration(args.kubeconfig), settings.api_concurrency)
    except Exception as exc:  # a kubeconfig that cannot be read is the caller's input problem
        print(f"error: cannot read the kubeconfig: {exc or type(exc).__name__}. Fix: check --kubeconfig", file=err)
        return EXIT_USAGE
    try:
        answer = None if args.live else await read_reports(client, namespace)
        if answer is None:
            answer = await compute_live(args, settings, namespace, timeout, err)
    except ApiError as exc:
        print(f"error: cannot read from the cluster: {exc}. Fix: check --kubeconfig and your permissions", file=err)
        return EXIT_USAGE
    finally:
        await client.close()
    if answer is None:
        return EXIT_USAGE
    for note in answer.notes:
        print(f"note: {note}", file=err)
    if args.output == "json":
        json.dump(to_json(answer, namespace), out, indent=2)
        out.write("\n")
    else:
        out.write(render_table(answer, namespace, show_all=args.all))
    return EXIT_DENIED if answer.denied_jobs() else EXIT_OK


async def read_reports(client: Any, namespace: str | None) -> Answer | None:
    """The rows of the audit controller's reports, or None when there is none to read."""
    from webhook.audit.reports import GROUP, NAME, PLURAL, SELECTOR, VERSION, report_path
    from webhook.cluster.view import ApiError

    try:
        if namespace is None:
            listed = await client.request(
                "GET", f"/apis/{GROUP}/{VERSION}/{PLURAL}", timeout=30.0, query={"labelSelector": SELECTOR}
            )
            reports = [r for r in listed.get("items") or [] if (r.get("metadata") or {}).get("name") == NAME]
        else:
            reports = [await client.request("GET", report_path(namespace), timeout=30.0)]
    except ApiError as exc:
        if exc.status == 404:  # no such report, or the openreports.io API is not served
            return None
        if exc.status == 403:
            return None  # not permitted to read the reports: judge live with what the caller may read
        raise
    if not reports:
        return None
    answer = Answer("reports")
    for report in reports:
        answer.rows.extend(rows_of_report(report))
        limits = (report.get("configuration") or {}).get("limits") or {}
        if limits:
            ns = (report.get("metadata") or {}).get("namespace")
            total = sum(v for v in (report.get("summary") or {}).values() if isinstance(v, int))
            answer.notes.append(
                f"the report of namespace {ns} holds {limits.get('maxResults')} of its {total} results "
                f"(too many for one object; kept: {', '.join(limits.get('statusFilter') or ['fail'])}); "
                "its summary counts them all"
            )
    return answer


def rows_of_report(report: dict[str, Any]) -> list[Row]:
    ns = str((report.get("metadata") or {}).get("namespace") or "")
    rows = []
    for r in report.get("results") or []:
        if not isinstance(r, dict):
            continue
        subject = (r.get("resources") or [{}])[0]
        props = r.get("properties") or {}
        rows.append(
            Row(
                namespace=str(subject.get("namespace") or ns),
                kind=str(subject.get("kind") or ""),
                name=str(subject.get("name") or ""),
                check=str(r.get("policy") or ""),
                result=str(r.get("result") or ""),
                message=str(r.get("message") or ""),
                child=str(props.get("child") or ""),
                enforce=str(props.get("enforce") or ""),
                now=str(props.get("now") or ""),
            )
        )
    return rows


async def compute_live(
    args: argparse.Namespace, settings: Settings, namespace: str | None, timeout: float, err: TextIO
) -> Answer | None:
    """Every job listed, judged now through webhook.preflight.evaluate with the live ClusterView."""
    async with live_view(settings, args.kubeconfig, err) as view:
        if view is None:
            return None
        answer = Answer("live")
        answer.notes.append(
            "no Policy Report found"
            + (f" in namespace {namespace}" if namespace else "")
            + ": judging the jobs that have not started now, as the webhook would on kubectl apply"
            if not args.live
            else "judging the jobs that have not started now (--live)"
        )
        skipped: dict[str, int] = {}
        aiperfjobs: list[dict[str, Any]] = []  # listed first (job_kinds): a sweep's created children
        for jk in job_kinds():
            listed = await _list(view.client, jk.group, jk.version, jk.resource, namespace, answer)
            if jk.resource == "aiperfjobs":
                aiperfjobs = listed
            for obj in listed:
                if jk.skipped(obj):
                    continue  # a JobSet a judged job owns: its owner is the job
                obj.setdefault("apiVersion", jk.api_version)
                obj.setdefault("kind", jk.kind)
                state, _ = await _state(view.client, jk.resource, obj)
                state, targets = _targets(state, jk.resource, obj, aiperfjobs, settings)
                if state != JUDGED:
                    skipped[state] = skipped.get(state, 0) + 1
                    continue
                for target, child in targets:
                    await _judge_live(answer, obj, target, child, settings, view, timeout)
    if skipped:
        answer.notes.append(
            "not judged (started jobs already met the cluster): "
            + ", ".join(f"{n} {state}" for state, n in sorted(skipped.items()))
        )
    return answer


def _targets(
    state: str, resource: str, obj: dict[str, Any], aiperfjobs: list[dict[str, Any]], settings: Settings
) -> tuple[str, list[tuple[dict[str, Any], str]]]:
    """(the job's state, what is judged of it: the job, or each child a sweep's controller creates later,
    as the controller judges (webhook/audit/sweeps.py); a sweep with every child created runs)."""
    from webhook.audit.sweeps import remaining_children

    targets: list[tuple[dict[str, Any], str]] = [(obj, "")]
    if state == JUDGED and resource == "aiperfsweeps":
        ns = (obj.get("metadata") or {}).get("namespace")
        mine = [j for j in aiperfjobs if (j.get("metadata") or {}).get("namespace") == ns]
        children = remaining_children(obj, mine, settings)
        if children == []:
            state = RUNNING
        elif children is not None:
            targets = [(c.obj, c.name) for c in children]
    return state, targets


async def _judge_live(
    answer: Answer,
    obj: dict[str, Any],
    target: dict[str, Any],
    child: str,
    settings: Settings,
    view: ClusterView,
    timeout: float,
) -> None:
    """Judge `target` (the job `obj`, or one of its sweep's children) now; one row per finding."""
    from webhook.audit.findings import findings
    from webhook.deadline import Deadline
    from webhook.preflight import evaluate

    meta = obj.get("metadata") or {}
    ev = await evaluate(target, settings=settings, deadline=Deadline(timeout), view=view)
    for f in findings(ev, settings):
        answer.rows.append(
            Row(
                namespace=str(meta.get("namespace") or ""),
                kind=str(obj["kind"]),
                name=str(meta.get("name") or ""),
                check=f.check,
                result=f.result,
                message=f.message,
                enforce=f.enforce or "none",
                now=f.now,
                child=child,
            )
        )


async def _list(
    client: Any, group: str, version: str, resource: str, namespace: str | None, answer: Answer
) -> list[dict[str, Any]]:
    from webhook.cluster.view import ApiError

    base = f"/apis/{group}/{version}"
    path = f"{base}/{resource}" if namespace is None else f"{base}/namespaces/{namespace}/{resource}"
    try:
        listed = await client.request("GET", path, timeout=30.0)
    except ApiError as exc:
        if exc.status == 404:
            return []  # the kind is not served here
        if exc.status == 403:
            answer.notes.append(f"not permitted to list {resource}: they are not in this answer")
            return []
        raise
    return [o for o in listed.get("items") or [] if isinstance(o, dict)]


async def _state(client: Any, resource: str, obj: dict[str, Any]) -> tuple[str, str]:
    """Whether the audit controller judges `obj` (webhook/audit/jobs.py): the same rules, read live."""
    from webhook.audit.controller import JOBSETS, WORKLOADS
    from webhook.audit.jobs import Related, kind_by_resource, owned_by, uid_of
    from webhook.cluster.view import ApiError
    from webhook.workloads.kinds import READS_JOBSET, READS_WORKLOADS

    kind = kind_by_resource(resource)
    if kind is None or kind.state is None:
        return JUDGED, ""
    meta = obj.get("metadata") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    jobset: dict[str, Any] | None = None
    workloads: list[dict[str, Any]] = []
    try:
        if READS_JOBSET in kind.reads:
            jobset = await client.request(
                "GET",
                f"/apis/{JOBSETS.group}/{JOBSETS.version}/namespaces/{ns}/{JOBSETS.resource}/{name}",
                timeout=30.0,
            )
    except ApiError as exc:
        if exc.status not in (404, 403):
            raise
    try:
        if READS_WORKLOADS in kind.reads:
            listed = await client.request(
                "GET", f"/apis/{WORKLOADS.group}/{WORKLOADS.version}/namespaces/{ns}/{WORKLOADS.resource}", timeout=30.0
            )
            workloads = [w for w in listed.get("items") or [] if isinstance(w, dict)]
    except ApiError as exc:
        if exc.status not in (404, 403):
            raise
    uid = uid_of(obj)
    return kind.state(obj, Related(jobset, tuple(w for w in workloads if owned_by(w, uid))))


def _job_label(kind: str, name: str, child: str) -> str:
    return f"{kind}/{name}" + (f" (child {child})" if child else "")


def render_table(answer: Answer, namespace: str | None, *, show_all: bool = False) -> str:
    """One row per finding to act on (fail, warn; --all: every one), then the answer in one line."""
    shown = [r for r in answer.rows if show_all or r.result in ("fail", "warn")]
    order = {"fail": 0, "warn": 1, "pass": 2, "skip": 3}
    shown.sort(key=lambda r: (r.namespace, r.kind, r.name, r.child, order.get(r.result, 4), r.check))
    header = ("NAMESPACE", "JOB", "CHECK", "ENFORCE", "MESSAGE")
    table = [
        (
            r.namespace,
            _job_label(r.kind, r.name, r.child),
            r.check,
            {"fail": "DENY", "warn": "warn", "pass": "pass", "skip": "skip"}.get(r.result, r.result),
            r.message if len(r.message) <= TABLE_MESSAGE else r.message[: TABLE_MESSAGE - 1] + "…",
        )
        for r in shown
    ]
    lines = []
    if table:
        widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header[:-1])]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
        lines.append(fmt.format(*header))
        lines.extend(fmt.format(*row) for row in table)
    where = "in every namespace" if namespace is None else f"in namespace {namespace}"
    denied, jobs = answer.denied_jobs(), answer.jobs()
    source = "the audit controller's Policy Reports" if answer.source == "reports" else "a live check now"
    if not jobs:
        lines.append(f"No judged job {where} (from {source}).")
    elif denied:
        lines.append(
            f"{len(denied)} of {len(jobs)} job(s) {where} would be DENIED if the webhook enforced "
            f"(from {source}); fix them before you switch to enforce."
        )
    else:
        lines.append(f"No job {where} would be denied if the webhook enforced: {len(jobs)} judged (from {source}).")
    return "\n".join(lines) + "\n"


def to_json(answer: Answer, namespace: str | None) -> dict[str, Any]:
    jobs: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for r in answer.rows:
        key = (r.namespace, r.kind, r.name, r.child)
        job = jobs.setdefault(
            key,
            {"namespace": r.namespace, "kind": r.kind, "name": r.name, "wouldBeDenied": False, "findings": []},
        )
        if r.child:
            job["child"] = r.child
        job["findings"].append({"check": r.check, "result": r.result, "message": r.message, "enforce": r.enforce})
        job["wouldBeDenied"] = job["wouldBeDenied"] or r.result == "fail"
    return {
        "source": answer.source,
        "namespace": namespace,
        "wouldBeDenied": len(answer.denied_jobs()),
        "jobs": list(jobs.values()),
    }
