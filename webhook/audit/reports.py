"""The Policy Reports sink: one openreports.io/v1alpha1 `Report` per namespace, named
`preflight-webhook`, with one result per job x check.

Format: github.com/openreports/reports-api v0.2.1 (apis/openreports.io/v1alpha1/report_types.go;
the chart installs its CRDs). Field usage follows Kyverno v1.19.1's writer
(pkg/utils/report/results.go `ToPolicyReportResult`, `CalculateSummary`, `SortReportResults`):

    source      "preflight-webhook" (Kyverno: SourceKyverno), on the report and on each result
    policy      the check's name ("Secrets"); Kyverno: the policy's name
    result      pass | fail | warn | skip: what the webhook in enforce mode does (findings.py)
    message     the check's message: a fail says what, why and the fix, with real object names
    resources   the job (apiVersion, kind, namespace, name, uid); a sweep's child: the sweep
    timestamp   {seconds}: when this result last CHANGED (Kyverno: when it was evaluated)
    properties  enforce (deny|warn|audit|off), now (denied|warned|recorded|none in the current
                mode), status (the check's own), child (a sweep's child)
    summary     counts by result (CalculateSummary)

Why only openreports.io, not also wgpolicyk8s.io/v1alpha2 PolicyReport: docs/audit.md
("Why only openreports.io") gives the evidence. In short: Policy Reporter reads openreports.io since v3.2.0
(its go.mod requires github.com/openreports/reports-api; pkg/config/resolver.go starts an
openreports client whenever discovery serves the group), Kyverno names wgpolicyk8s.io the group it
will deprecate, and writing both would double every write.

Writes: a namespace's report is written only when its content changes (results, messages, summary;
not the time of a re-check), at most once per `debounce` seconds per namespace (changes that arrive
meanwhile go into the same write). A re-check that changes nothing writes nothing, so periodic
scans cost no writes. On start the existing report is read once and its timestamps are kept for the
results that did not change; after the first full scan, the reports of namespaces with no judged
job left are emptied (the reports are rebuilt from the controller's scan). The sink never deletes:
its ServiceAccount may get, list, create, update and patch reports, nothing else.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hashlib
import json
import logging
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from webhook.audit.client import background_requests
from webhook.audit.findings import Finding, findings
from webhook.audit.sink import JobRef, Judgement
from webhook.cluster.cache import META_LIST
from webhook.cluster.view import ApiError
from webhook.config import Settings

log = logging.getLogger(__name__)

GROUP = "openreports.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Report"
PLURAL = "reports"
#: the name of the report in each namespace (one per namespace)
NAME = "preflight-webhook"
SOURCE = "preflight-webhook"
CATEGORY = "Preflight"
MANAGED_BY = "app.kubernetes.io/managed-by"
#: the label on every report this sink owns; `report` and the clean-up on start select by it
LABELS = {MANAGED_BY: "preflight-webhook", "app.kubernetes.io/name": "preflight-webhook"}
SELECTOR = f"{MANAGED_BY}=preflight-webhook"

#: seconds a single report request may take
REQUEST_TIMEOUT = 10.0
#: the orphans' list (:meth:`ReportSink._empty_orphans`): metadata only, this many a page
LIST_PAGE = 500
#: reports built and written at once. A report's body is built before its requests wait for the
#: client's tokens: at the end of a scan 1,000 namespaces were due together, and up to 1,000 bodies
#: of ~280 results each could wait at once (bench/audit_scale.py measured 391 MiB RSS after a
#: 10,000-job scan before this bound, 353 MiB after it, on a machine loaded differently)
WRITERS = 4
#: a failed report write is retried after RETRY_BASE seconds, doubling each failure in a row, up to RETRY_MAX
RETRY_BASE = 1.0
RETRY_MAX = 300.0
#: what the controller says at start when it writes no report, by cause
NO_REPORTS_OFF = (
    "Policy Reports are off (audit.reports: false): the audit controller writes no openreports.io Report; "
    "its findings go to Events and metrics only"
)
NO_REPORTS_NOT_SERVED = (
    "Policy Reports: the openreports.io/v1alpha1 API is not served (its CRDs are not installed; the chart "
    "installs them unless audit.reports.installCRDs is false): the audit controller writes no Report; "
    "its findings go to Events and metrics only"
)


class Requester(Protocol):
    """The one call the sink needs (webhook.cluster.client.KubeClient.request; the audit
    controller's client allows its writes to the openreports.io group)."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        timeout: float,
        query: dict[str, Any] | None = None,
        body: Any = None,
        accept: str = "application/json",
    ) -> dict[str, Any]: ...


def collection_path(namespace: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"


def report_path(namespace: str, name: str = NAME) -> str:
    return f"{collection_path(namespace)}/{name}"


@dataclass(frozen=True, slots=True)
class Entry:
    """One result of the report: a job x check, before its timestamp is chosen."""

    job: JobRef
    finding: Finding

    def subject(self) -> dict[str, str]:
        """The job as an ObjectReference; a sweep's child is not an object yet: its sweep is."""
        ref = self.job.parent or self.job
        return {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
            "uid": ref.uid,
        }

    def result(self, seconds: int) -> dict[str, Any]:
        f = self.finding
        props = {"enforce": f.enforce or "none", "now": f.now, "status": f.status}
        if self.job.parent is not None:
            props["child"] = self.job.name
        out: dict[str, Any] = {
            "source": SOURCE,
            "policy": f.check,
            "category": CATEGORY,
            "result": f.result,
            "message": f.message,
            "resources": [self.subject()],
            "properties": props,
            "timestamp": {"seconds": seconds, "nanos": 0},
        }
        return out


def _content(result: dict[str, Any]) -> tuple[Any, ...]:
    """What makes a result different to its readers: everything but its timestamp."""
    subject = (result.get("resources") or [{}])[0]
    props = result.get("properties") or {}
    return (
        result.get("policy"),
        result.get("result"),
        result.get("message"),
        subject.get("uid"),
        subject.get("kind"),
        subject.get("name"),
        props.get("child"),
        props.get("enforce"),
        props.get("now"),
        props.get("status"),
    )


def _sort_key(result: dict[str, Any]) -> tuple[str, ...]:
    """Kyverno's SortReportResults order, subject first so one job's results stay together."""
    subject = (result.get("resources") or [{}])[0]
    props = result.get("properties") or {}
    return (
        str(subject.get("kind")),
        str(subject.get("name")),
        str(props.get("child", "")),
        str(result.get("policy")),
    )


def summary(results: list[dict[str, Any]]) -> dict[str, int]:
    """Kyverno's CalculateSummary: counts by result (error is never written, always 0)."""
    counts = {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}
    for r in results:
        if r.get("result") in counts:
            counts[r["result"]] += 1
    return counts


def build_report(
    namespace: str,
    entries: list[Entry],
    *,
    now: int,
    previous: dict[str, Any] | Kept | None = None,
    max_bytes: int = 0,
) -> dict[str, Any]:
    """The report for `namespace`, within `max_bytes` (default MAX_REPORT_BYTES) as JSON. A result whose content is the same as in `previous` keeps its
    timestamp (the time it last changed); a new or changed one gets `now`."""
    stamps = previous.stamps if isinstance(previous, Kept) else _stamps(previous)
    results = []
    for e in entries:
        r = e.result(now)
        seconds = stamps.get(_content_hash(r))
        if seconds is not None:
            r["timestamp"] = {"seconds": seconds, "nanos": 0}
        results.append(r)
    results.sort(key=_sort_key)
    report: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(LABELS)},
        "source": SOURCE,
        "scope": {"apiVersion": "v1", "kind": "Namespace", "name": namespace},
        "summary": summary(results),
        "results": results,
    }
    return _within(report, max_bytes or MAX_REPORT_BYTES)


#: a report is one etcd object: etcd stores at most 1.5 MiB by default (--max-request-bytes); keep a margin
MAX_REPORT_BYTES = 1_048_576
#: what is kept first when a namespace's results do not fit: what enforce would deny, then the warnings
KEEP_ORDER = ("fail", "warn", "skip", "pass")


def _within(report: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """The report within `max_bytes` as JSON. A namespace with thousands of jobs would not fit one
    object: whole statuses are kept in KEEP_ORDER (fail first; if even the fails do not fit, as many
    as fit) while they fit, the summary still counts every result, and `configuration.limits` says so, as openreports.io v1alpha1 defines it
    (Limits.maxResults, Limits.statusFilter: "the Report contains only those ... statuses")."""
    if len(json.dumps(report, separators=(",", ":"))) <= max_bytes:
        return report
    results = report["results"]
    kept: list[dict[str, Any]] = []
    whole: list[str] = []
    size = len(json.dumps({**report, "results": []}, separators=(",", ":"))) + 200  # + configuration
    for status in KEEP_ORDER:
        these = [r for r in results if r.get("result") == status]
        sizes = [len(json.dumps(r, separators=(",", ":"))) + 1 for r in these]
        if size + sum(sizes) <= max_bytes:
            kept += these
            size += sum(sizes)
            whole.append(status)
            continue
        if status == "fail":  # as many of what enforce would deny as one object holds
            for r, n in zip(these, sizes, strict=True):
                if size + n > max_bytes:
                    break
                kept.append(r)
                size += n
        break  # a status that does not fit whole is left out, so statusFilter says exactly what is in
    kept.sort(key=_sort_key)
    limits: dict[str, Any] = {"maxResults": len(kept)}
    if whole:
        limits["statusFilter"] = whole
    return {**report, "results": kept, "configuration": {"limits": limits}}


class Stamps:
    """hash of a result's content (:func:`_content_hash`) → the seconds of its timestamp, held small.

    The results of a report mostly share one or a few timestamps (those written together), so the
    hashes are grouped by timestamp, each group one sorted array of 8-byte ints. As a dict of Python
    ints, the 240,000 results of 10,000 jobs in 1,000 namespaces held 24.5 MiB (bench/audit_scale.py
    --census); as arrays they hold 2."""

    __slots__ = ("_groups",)

    def __init__(self, pairs: Iterable[tuple[int, int]] = ()) -> None:
        last: dict[int, int] = dict(pairs)  # a hash seen twice keeps its last time, as a dict would
        by_time: dict[int, list[int]] = {}
        for h, seconds in last.items():
            by_time.setdefault(seconds, []).append(h)
        self._groups = tuple((t, array("q", sorted(hs))) for t, hs in sorted(by_time.items()))

    def get(self, h: int) -> int | None:
        for seconds, hashes in self._groups:
            i = bisect.bisect_left(hashes, h)
            if i < len(hashes) and hashes[i] == h:
                return seconds
        return None

    def items(self) -> list[tuple[int, int]]:
        return [(h, seconds) for seconds, hashes in self._groups for h in hashes]

    def __len__(self) -> int:
        return sum(len(hashes) for _, hashes in self._groups)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stamps) and self._groups == other._groups

    def __hash__(self) -> int:
        return hash(tuple((t, bytes(hs)) for t, hs in self._groups))

    def __repr__(self) -> str:
        return f"Stamps({dict(self.items())!r})"


def _stamps(report: dict[str, Any] | None) -> Stamps:
    """hash of each result's content (:func:`_content`) → the seconds of its timestamp."""
    pairs = []
    for r in (report or {}).get("results") or []:
        ts = r.get("timestamp") if isinstance(r, dict) else None
        if isinstance(ts, dict) and isinstance(ts.get("seconds"), int):
            pairs.append((_content_hash(r), ts["seconds"]))
    return Stamps(pairs)


def _content_hash(result: dict[str, Any]) -> int:
    """A result's content (:func:`_content`) as one int; a value that cannot be hashed (a report
    someone else edited) by its repr. Only keys a timestamp: a collision costs a result's time."""
    content = _content(result)
    try:
        return hash(content)
    except TypeError:
        return hash(repr(content))


def _digest(report: dict[str, Any]) -> bytes:
    """What :func:`same_content` compares (results in order, timestamps aside; summary, source,
    configuration), as one SHA-256."""
    content = [
        [_content(r) for r in report.get("results") or [] if isinstance(r, dict)],
        report.get("summary"),
        report.get("source"),
        report.get("configuration"),
    ]
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).digest()


@dataclass(frozen=True, slots=True)
class Kept:
    """What the sink keeps of a report as the apiserver holds it: its resourceVersion (for the next
    update), the digest of its content (:func:`_digest`: is a write needed?) and the timestamps of its
    results by content (an unchanged result keeps its time). Not the report itself: at 10,000 jobs in
    1,000 namespaces the reports as parsed JSON were the largest part of the controller's memory
    (bench/audit_scale.py: 888 MiB RSS); this is a few bytes a result."""

    resource_version: str | None
    digest: bytes
    stamps: Stamps

    @classmethod
    def of(cls, report: dict[str, Any]) -> Kept:
        rv = (report.get("metadata") or {}).get("resourceVersion")
        return cls(rv if isinstance(rv, str) else None, _digest(report), _stamps(report))


def same_content(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Equal for a reader: the same results (timestamps aside), in the same order."""
    if a is None or b is None:
        return a is b
    ra = [_content(r) for r in a.get("results") or [] if isinstance(r, dict)]
    rb = [_content(r) for r in b.get("results") or [] if isinstance(r, dict)]
    return (
        ra == rb
        and a.get("summary") == b.get("summary")
        and a.get("source") == b.get("source")
        and a.get("configuration") == b.get("configuration")
    )


class ReportSink:
    """A FindingSink (webhook.audit.sink) that keeps one Report per namespace up to date."""

    def __init__(
        self,
        client: Requester,
        settings: Settings,
        *,
        debounce: float = 2.0,
        clock: Callable[[], float] | None = None,
        on_write: Callable[[str], None] | None = None,
        retry_base: float = RETRY_BASE,
    ) -> None:
        import time

        self.client = client
        self.settings = settings
        self.debounce = debounce
        self._clock = clock or time.time
        self._on_write = on_write or (lambda verb: None)
        #: namespace -> job uid (or parent uid + child name) -> the job and its findings (Entry objects
        #: are made when a report is built: 24 a job would be 240,000 objects at 10,000 jobs)
        self._entries: dict[str, dict[str, tuple[JobRef, tuple[Finding, ...]]]] = {}
        #: equal findings, and equal tuples of them, are one object (:meth:`_share`): at 10,000 jobs in
        #: 1,000 namespaces 240,000 findings held 1,000 distinct messages (bench/audit_scale.py --census)
        self._shared: dict[Any, Any] = {}
        #: namespace -> what is kept of its report as last read or written (None: there is none)
        self._remote: dict[str, Kept | None] = {}
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._writers = asyncio.Semaphore(WRITERS)
        #: writes taken out of _pending, waiting for a writer or being sent
        self._inflight: set[asyncio.Task[None]] = set()
        #: namespace -> its last write taken out of _pending: the next one waits for it (one write of a
        #: namespace at a time; two at once both POSTed, and one was refused with 409)
        self._writing: dict[str, asyncio.Task[None]] = {}
        #: namespaces whose pending write is a retry after a failure, and how many failed in a row
        self._retrying: set[str] = set()
        self._failures: dict[str, int] = {}
        self.retry_base = retry_base
        self._scanned = False
        #: writes sent, by verb (create, update): what the benchmark and the tests count
        self.writes: dict[str, int] = {"create": 0, "update": 0}

    # -- FindingSink -------------------------------------------------------------------------
    async def publish(self, judgement: Judgement) -> None:
        job = judgement.job
        new = self._share(findings(judgement.evaluation, self.settings))
        jobs = self._entries.setdefault(job.namespace, {})
        old = jobs.get(job.key)
        jobs[job.key] = (job, new)
        if old is None or old[1] != new:
            self._dirty(job.namespace)

    def _share(self, found: list[Finding]) -> tuple[Finding, ...]:
        """`found` as a tuple held once, of findings held once (equal ones from other jobs)."""
        shared = self._shared
        out = tuple(shared.setdefault(f, f) for f in found)
        return shared.setdefault(out, out)

    def _prune_shared(self) -> None:
        """Keep only what a job still holds (after each full scan: results that changed are gone)."""
        live: dict[Any, Any] = {}
        for jobs in self._entries.values():
            for _, found in jobs.values():
                live[found] = found
                for f in found:
                    live[f] = f
        self._shared = live

    async def forget(self, job: JobRef, why: str) -> None:
        jobs = self._entries.get(job.namespace, {})
        if jobs.pop(job.key, None) is not None:
            self._dirty(job.namespace)

    async def scan_done(self, judged: int, not_judged: dict[str, int]) -> None:
        self._prune_shared()
        if self._scanned:
            return
        self._scanned = True
        with background_requests():
            await self._empty_orphans()

    # -- writing -----------------------------------------------------------------------------
    def _dirty(self, namespace: str, delay: float | None = None) -> None:
        """Write the namespace's report after `delay` (default: the debounce window, which later
        changes join); a write already pending takes this change along, also while it waits for the
        namespace's write in flight or for a writer: a namespace has at most one write pending and
        one in flight, however often its jobs change (issue 33: Secret churn)."""
        if namespace not in self._pending:
            wait = self.debounce if delay is None else delay
            self._pending[namespace] = asyncio.create_task(self._flush_later(namespace, wait))

    async def _flush_later(self, namespace: str, delay: float) -> None:
        task = asyncio.current_task()
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            self._retrying.discard(namespace)
            before = self._writing.get(namespace)
            if task is not None:
                self._inflight.add(task)
                self._writing[namespace] = task
            if before is not None and not before.done():
                await asyncio.wait({before})  # its outcome is its own: a failure retries itself
            async with self._writers:
                # from here on the body is built from what the sink holds now: a later change needs a write of its own
                if self._pending.get(namespace) is task:
                    del self._pending[namespace]
                with background_requests():  # a judging read goes first (webhook/audit/client.py)
                    await self._flush_or_retry(namespace)
        finally:
            if self._pending.get(namespace) is task:
                del self._pending[namespace]
                self._retrying.discard(namespace)
            self._inflight.discard(task)
            if self._writing.get(namespace) is task:
                del self._writing[namespace]

    async def _flush_or_retry(self, namespace: str) -> None:
        try:
            await self.flush(namespace)
        except ApiError as exc:
            # never given up: the report would keep what it said before the change until the next
            # one. Retried with a doubling delay, as a controller's workqueue requeues a failed key
            # (client-go util/workqueue ItemExponentialFailureRateLimiter), capped at RETRY_MAX
            n = self._failures[namespace] = self._failures.get(namespace, 0) + 1
            retry = min(RETRY_MAX, self.retry_base * 2 ** (n - 1))
            log.warning(
                "cannot write the Report in namespace %s (%s); retrying in %.0fs", namespace, exc.message, retry,
                extra={"fields": {"namespace": namespace, "error": str(exc), "retry_seconds": retry}},
            )  # fmt: skip
            self._retrying.add(namespace)
            self._dirty(namespace, retry)
        else:
            self._failures.pop(namespace, None)

    async def idle(self) -> None:
        """Wait until every pending write was sent, or failed and waits for its retry (tests, shutdown)."""
        me = asyncio.current_task()
        while waiting := [t for ns, t in self._pending.items() if ns not in self._retrying] + [
            t for t in self._inflight if t is not me
        ]:
            await asyncio.gather(*waiting, return_exceptions=True)

    async def close(self) -> None:
        for task in [*self._pending.values(), *self._inflight]:
            task.cancel()
        for task in [*self._pending.values(), *self._inflight]:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def entries(self, namespace: str) -> list[Entry]:
        return [Entry(job, f) for job, found in self._entries.get(namespace, {}).values() for f in found]

    async def _read(self, namespace: str) -> Kept | None:
        try:
            return Kept.of(await self.client.request("GET", report_path(namespace), timeout=REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def flush(self, namespace: str) -> None:
        """Write the namespace's report if its content differs from what the apiserver holds."""
        if namespace not in self._remote:
            self._remote[namespace] = await self._read(namespace)
        for attempt in (1, 2):
            remote = self._remote[namespace]
            entries = self.entries(namespace)
            try:
                if not entries and remote is None:
                    return  # nothing judged here, and no report to empty
                desired = build_report(namespace, entries, now=int(self._clock()), previous=remote)
                if remote is not None and _digest(desired) == remote.digest:
                    return
                if remote is None:
                    written = await self.client.request(
                        "POST", collection_path(namespace), timeout=REQUEST_TIMEOUT, body=desired
                    )
                    self._count("create")
                else:
                    desired["metadata"]["resourceVersion"] = remote.resource_version
                    written = await self.client.request(
                        "PUT", report_path(namespace), timeout=REQUEST_TIMEOUT, body=desired
                    )
                    self._count("update")
                self._remote[namespace] = Kept.of(written)
                return
            except ApiError as exc:
                # 409: someone else changed it (or it exists already); 404: it was deleted meanwhile
                if exc.status not in (404, 409) or attempt == 2:
                    raise
                self._remote[namespace] = await self._read(namespace)

    def _count(self, verb: str) -> None:
        self.writes[verb] += 1
        self._on_write(verb)

    async def _empty_orphans(self) -> None:
        """After the first full scan: empty our reports in namespaces where no job is judged any more
        (the audit ServiceAccount may not delete: an empty report says "nothing judged here").

        Listed as metadata only (PartialObjectMetadataList), in pages of LIST_PAGE: the reports whole
        were ~190 KB each at 10,000 jobs in 1,000 namespaces, and one list of them all, parsed, raised
        the controller's peak RSS to 405 MiB (bench/audit_scale.py). An orphan is read whole when its
        write reads it (flush)."""
        orphans: list[str] = []
        cont: str | None = None
        while True:
            try:
                listed = await self.client.request(
                    "GET",
                    f"/apis/{GROUP}/{VERSION}/{PLURAL}",
                    timeout=REQUEST_TIMEOUT,
                    query={"labelSelector": SELECTOR, "limit": LIST_PAGE, "continue": cont},
                    accept=META_LIST,
                )
            except ApiError as exc:
                log.warning("cannot list the Reports", extra={"fields": {"error": str(exc)}})
                return
            for item in listed.get("items") or []:
                meta = item.get("metadata") or {}
                ns, name = meta.get("namespace"), meta.get("name")
                if name == NAME and isinstance(ns, str):
                    orphans.append(ns)
            cont = (listed.get("metadata") or {}).get("continue") or None
            if cont is None:
                break
        for ns in orphans:
            if self.entries(ns) or ns in self._pending:
                continue
            self._remote.pop(ns, None)  # read it whole now: its resourceVersion and content
            await self._flush_or_retry(ns)


async def reports_served(client: Requester) -> bool:
    """Whether the apiserver serves openreports.io/v1alpha1 reports (discovery, as Policy Reporter's
    pkg/config/resolver.go asks before it starts its openreports client)."""
    try:
        doc = await client.request("GET", f"/apis/{GROUP}/{VERSION}", timeout=REQUEST_TIMEOUT)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return any(r.get("name") == PLURAL for r in doc.get("resources") or [] if isinstance(r, dict))


async def open_report_sink(
    client: Requester,
    settings: Settings,
    *,
    enabled: bool = True,
    debounce: float = 2.0,
    on_write: Callable[[str], None] | None = None,
) -> ReportSink | None:
    """The Report sink, or None after saying clearly, at start, why no report will be written."""
    if not enabled:
        log.warning(NO_REPORTS_OFF)
        return None
    try:
        served = await reports_served(client)
    except ApiError as exc:
        log.warning("%s (discovery failed: %s)", NO_REPORTS_NOT_SERVED, exc)
        return None
    if not served:
        log.warning(NO_REPORTS_NOT_SERVED)
        return None
    log.info("Policy Reports: one openreports.io Report per namespace, named %s", NAME)
    return ReportSink(client, settings, debounce=debounce, on_write=on_write)
