"""The audit controller's metrics (prometheus_client, a registry of its own, as webhook/metrics.py).

    preflight_audit_findings{namespace,kind,check,result}   findings now (result as in the reports:
                                                            pass | fail | warn | skip, what enforce does)
    preflight_audit_jobs_watched{state}                     jobs judged now (partial: request checks not run
                                                            yet), and the ones the last full
                                                            scan did not judge, by reason (running, ...)
    preflight_audit_scan_duration_seconds                   full scans (histogram)
    preflight_audit_last_full_scan_timestamp_seconds        when the last full scan ended (unix time)
    preflight_audit_report_writes_total{verb}               Report writes: create | update

Labels carry no object content beyond the namespace (the brief asks findings by namespace; a
namespace name is chosen by the cluster's administrators, not by a job's author) and the check
name, kind and result, all bounded. Job names and messages never become labels.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from webhook.audit.findings import findings
from webhook.audit.sink import JobRef, Judgement
from webhook.config import Settings

#: a scan of 10k jobs is the benchmark's target (<= 60 s); 0.1 s .. 10 min
SCAN_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
#: distinct findings tuples kept for sharing between jobs (AuditMetrics.publish)
FOUND_CACHE = 4096


class _Findings(Collector):
    """Counts the current findings at scrape time from the sink's state (no per-series bookkeeping)."""

    def __init__(self, source: Callable[[], Counter[tuple[str, str, str, str]]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "preflight_audit_findings",
            "Findings now, by namespace, job kind, check and result (what the webhook in enforce mode does)",
            labels=["namespace", "kind", "check", "result"],
        )
        for (ns, kind, check, result), n in sorted(self._source().items()):
            family.add_metric([ns, kind, check, result], n)
        yield family


class AuditMetrics:
    """A FindingSink that only counts. `scan_started()` is called by the controller when a full scan begins."""

    def __init__(self, settings: Settings, registry: CollectorRegistry | None = None) -> None:
        self.settings = settings
        self.registry = registry or CollectorRegistry()
        #: job key -> (namespace, kind, [(check, result)])
        self._jobs: dict[str, tuple[str, str, tuple[tuple[str, str], ...]]] = {}
        #: each distinct findings tuple once (`publish`)
        self._found: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
        self._not_judged: dict[str, int] = {}
        #: the jobs whose last judgement is partial (the checks that send requests have not run yet)
        self._partial: set[str] = set()
        self._scan_start: float | None = time.monotonic()
        self.registry.register(_Findings(self._counts))
        self.jobs_watched = Gauge(
            "preflight_audit_jobs_watched",
            "Jobs judged now (state=judged; state=partial: of those, the ones the checks that send requests have not judged yet) and the ones the last full scan did not judge, by reason",
            ["state"],
            registry=self.registry,
        )
        self.jobs_watched.labels("judged").set_function(lambda: float(len(self._jobs)))
        self.jobs_watched.labels("partial").set_function(lambda: float(len(self._partial)))
        self.scan_duration = Histogram(
            "preflight_audit_scan_duration_seconds",
            "Duration of a full scan of the jobs that have not started",
            buckets=SCAN_BUCKETS,
            registry=self.registry,
        )
        self.last_full_scan = Gauge(
            "preflight_audit_last_full_scan_timestamp_seconds",
            "When the last full scan ended (unix time; 0 before the first)",
            registry=self.registry,
        )
        self.report_writes = PromCounter(
            "preflight_audit_report_writes",
            "Policy Report writes sent to the apiserver, by verb (create, update)",
            ["verb"],
            registry=self.registry,
        )
        for verb in ("create", "update"):
            self.report_writes.labels(verb)

    def _counts(self) -> Counter[tuple[str, str, str, str]]:
        out: Counter[tuple[str, str, str, str]] = Counter()
        for ns, kind, results in self._jobs.values():
            for check, result in results:
                out[(ns, kind, check, result)] += 1
        return out

    def count_write(self, verb: str) -> None:
        """ReportSink's on_write."""
        self.report_writes.labels(verb).inc()

    def scan_started(self) -> None:
        self._scan_start = time.monotonic()

    # -- FindingSink -------------------------------------------------------------------------
    async def publish(self, judgement: Judgement) -> None:
        job = judgement.job
        kind = (job.parent or job).kind
        found = tuple((f.check, f.result) for f in findings(judgement.evaluation, self.settings))
        # most jobs have the same findings: they share one tuple (bounded: the cache starts over when full)
        if len(self._found) >= FOUND_CACHE:
            self._found.clear()
        self._jobs[job.key] = (job.namespace, kind, self._found.setdefault(found, found))
        if judgement.complete:
            self._partial.discard(job.key)
        else:
            self._partial.add(job.key)

    async def forget(self, job: JobRef, why: str) -> None:
        self._jobs.pop(job.key, None)
        self._partial.discard(job.key)

    async def scan_done(self, judged: int, not_judged: dict[str, int]) -> None:
        if self._scan_start is not None:
            self.scan_duration.observe(time.monotonic() - self._scan_start)
            self._scan_start = None
        self.last_full_scan.set(time.time())
        for state in set(self._not_judged) - set(not_judged):
            self.jobs_watched.labels(state).set(0)
        for state, n in not_judged.items():
            self.jobs_watched.labels(state).set(n)
        self._not_judged = dict(not_judged)
