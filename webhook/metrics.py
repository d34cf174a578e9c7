"""Prometheus metrics in a registry of our own (no process-global state, one per server).

Labels are bounded and carry no object content: kind (a handled kind or "other"),
operation, decision, check name and check status. Nothing a user typed into an
object (names, namespaces, messages, secret names) ever becomes a label.
"""

from __future__ import annotations

import bisect
import itertools
import math
import time
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any, cast

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from webhook._compat import prometheus_created_series
from webhook.policy import Outcome
from webhook.results import CheckResult
from webhook.workloads import render_cache

#: 1 ms .. 30 s: the apiserver's own timeout range ends at 30 s
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

#: the budget is at most 30 s (budgetSeconds' ceiling); half-second steps show the ?timeout= it came from
BUDGET_BUCKETS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 30.0)

OTHER_KIND = "other"


#: how prometheus-client writes a bound (`0.001`, `30.0`, `+Inf`); untyped upstream
_go_float = cast(Callable[[float], str], floatToGoString)


class _Series:
    __slots__ = ("counts", "sum", "created")

    def __init__(self, buckets: int) -> None:
        self.counts = [0.0] * buckets
        self.sum = 0.0
        self.created = time.time()


def _label(value: str) -> str:
    """A label value as written: an enum member (Status) by its value; observed as the member, since
    reading `.value` per observation costs more than the observation."""
    return str(value.value) if isinstance(value, Enum) else value


class LoopHistogram(Collector):
    """A labelled histogram observed and read on the event loop's thread only.

    prometheus-client's Histogram takes a lock for the sum and one for the bucket on every
    observation; a review makes ~20 (one per check) and the locks cost more than the checks
    that skip. Here an observation adds two numbers. /metrics shows exactly what the
    prometheus-client Histogram would (cumulative `_bucket`s up to +Inf, `_count`, `_sum`,
    `_created`, same names and labels): samples are built from the plain counts on collect.
    """

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...], buckets: Iterable[float]) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self.bounds = [float(b) for b in buckets] + [math.inf]
        self._les = [_go_float(b) for b in self.bounds]
        self._series: dict[tuple[str, ...], _Series] = {}

    def observe(self, labels: tuple[str, ...], amount: float) -> None:
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = _Series(len(self.bounds))
        series.counts[bisect.bisect_left(self.bounds, amount)] += 1.0  # the first bound >= amount
        series.sum += amount

    def describe(self) -> Iterable[Metric]:
        yield HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        created = prometheus_created_series()  # PROMETHEUS_DISABLE_CREATED_SERIES
        for key, series in list(self._series.items()):
            labels = [_label(v) for v in key]
            family.add_metric(labels, list(zip(self._les, itertools.accumulate(series.counts))), series.sum)
            if created:
                family.add_sample(self.name + "_created", dict(zip(self.labelnames, labels)), series.created)
        yield family


class Metrics:
    def __init__(
        self,
        known_kinds: Iterable[str] = (),
        registry: CollectorRegistry | None = None,
        unverified: Iterable[tuple[str, str]] = (),
    ) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.known_kinds = frozenset(known_kinds)
        # registered in this order, the order /metrics shows them in
        self._add_review_metrics()
        self._add_certificate_metrics()
        self._add_unverified(unverified)
        self.registry.register(_RenderCacheCollector())
        # labelled children, looked up once: prometheus-client's labels() costs more than the increment
        self._request_children: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    def _add_review_metrics(self) -> None:
        """The admission requests: answered, their latency, each check's, the budget, those in flight."""
        self.requests = Counter(
            "preflight_webhook_requests",
            "Admission requests answered, by kind, operation and decision.",
            ["kind", "operation", "decision"],
            registry=self.registry,
        )
        self.request_latency = Histogram(
            "preflight_webhook_request_duration_seconds",
            "Time from receiving an admission request to the answer, by kind and operation.",
            ["kind", "operation"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.check_latency = LoopHistogram(
            "preflight_webhook_check_duration_seconds",
            "Time one check took, by check name and result status.",
            ("check", "status"),
            LATENCY_BUCKETS,
        )
        self.registry.register(self.check_latency)
        self.budget = Histogram(
            "preflight_webhook_budget_seconds",
            "Time budget given to one admission request: budgetSeconds, shortened by the apiserver's ?timeout= minus the safety margin.",
            buckets=BUDGET_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "preflight_webhook_requests_in_flight",
            "Admission requests being worked on now.",
            registry=self.registry,
        )

    def _add_certificate_metrics(self) -> None:
        """The serving certificate: its expiry, its reloads by result (both at 0 from the start)."""
        self.cert_expiry = Gauge(
            "preflight_webhook_certificate_expiry_timestamp_seconds",
            "Unix time at which the serving certificate expires.",
            registry=self.registry,
        )
        self.cert_reloads = Counter(
            "preflight_webhook_certificate_reloads",
            "Serving certificate reloads, by result (ok | error).",
            ["result"],
            registry=self.registry,
        )
        # both results exist from the start (at 0): increase() needs a sample before the first error,
        # or the first failed reload never raises PreflightWebhookCertificateReloadFailing
        for result in ("ok", "error"):
            self.cert_reloads.labels(result)

    def _add_unverified(self, unverified: Iterable[tuple[str, str]]) -> None:
        """What a check cannot verify on any cluster, by design: one series at 1 each."""
        self.unverified = Gauge(
            "preflight_webhook_check_unverified",
            "1 for each thing a check cannot verify on any cluster, by design (check, what: ids of ours; "
            "the words are at /capabilities and in docs/checks.md).",
            ["check", "what"],
            registry=self.registry,
        )
        for check, what in unverified:
            self.unverified.labels(check, what).set(1)

    def kind_label(self, kind: str) -> str:
        """A handled kind keeps its name; anything else is "other" (bounded cardinality)."""
        return kind if kind in self.known_kinds else OTHER_KIND

    def observe_request(self, kind: str, operation: str, decision: Outcome, seconds: float) -> None:
        key = (kind, operation, decision)
        children = self._request_children.get(key)
        if children is None:
            k = self.kind_label(kind)
            op = operation if operation in ("CREATE", "UPDATE", "DELETE", "CONNECT") else ""
            children = (self.requests.labels(k, op, decision), self.request_latency.labels(k, op))
            if len(self._request_children) < 4096:  # kind is client-supplied: bound the cache
                self._request_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def observe_checks(self, results: Iterable[CheckResult]) -> None:
        observe = self.check_latency.observe
        for r in results:
            if r.duration_ms is not None:  # check names and statuses are ours: a bounded set
                observe((r.name, r.status), r.duration_ms / 1000.0)  # Status: written as its value

    def track_caches(self, ages: Callable[[], Iterable[tuple[str, float | None]]]) -> None:
        """Export the watch caches' state, read at scrape time: `ages()` gives (resource, seconds since
        the cache was last known in sync, None while never synced) for each cached resource."""
        self.registry.register(_CacheCollector(ages))

    def track_connections(self, counts: Callable[[], dict[str, int]]) -> None:
        """Export the listener's connections by result, read at scrape time (_ConnectionsCollector)."""
        self.registry.register(_ConnectionsCollector(counts))

    def render(self) -> tuple[bytes, str]:
        """(body, content type) for GET /metrics."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _CacheCollector(Collector):
    """preflight_webhook_cache_synced{resource} and preflight_webhook_cache_age_seconds{resource}: resource
    names are ours (the cached resources of webhook.cluster), a bounded set."""

    def __init__(self, ages: Callable[[], Iterable[tuple[str, float | None]]]) -> None:
        self.ages = ages

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        synced = GaugeMetricFamily(
            "preflight_webhook_cache_synced",
            "1 once the watch cache of a resource has completed its first list (it stays 1 through later outages).",
            labels=["resource"],
        )
        age = GaugeMetricFamily(
            "preflight_webhook_cache_age_seconds",
            "Seconds since the watch cache of a resource was last known in sync (only for synced caches); "
            "checks report data older than cacheStaleSeconds as stale.",
            labels=["resource"],
        )
        for resource, seconds in sorted(self.ages()):
            synced.add_metric([resource], 0.0 if seconds is None else 1.0)
            if seconds is not None:
                age.add_metric([resource], seconds)
        yield synced
        yield age


class _ConnectionsCollector(Collector):
    """preflight_webhook_connections_total{result}: connections the listener accepted, refused (no slot), closed
    to make room (evicted) or cut for a missed head or body bound (timed_out), read at scrape time from
    `counts` (webhook/listener.py WebhookServer.connection_counts).

    Each accepted connection is a TLS handshake. The apiserver speaks HTTP/1.1 to this listener and keeps
    at most 25 idle connections per webhook host (k8s.io/client-go transport/cache.go idleConnsPerHost): more
    requests at once than that open new connections, closed again once they idle, so a steady rise here
    under a steady load is handshakes paid per review (docs/benchmarks/vs-kyverno.md)."""

    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self.counts = counts

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            "preflight_webhook_connections",
            "Connections by result: accepted, refused (no slot), evicted (closed to make room), timed_out "
            "(a head or body bound missed).",
            labels=["result"],
        )
        for result, n in self.counts().items():
            family.add_metric([result], float(n))
        yield family


class _RenderCacheCollector(Collector):
    """preflight_webhook_render_cache_total{result="hit"|"miss"}: renders served from the process's render
    cache (webhook/workloads/render_cache.py) and renders made, read at scrape time."""

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        hits, misses = render_cache.stats()
        family = CounterMetricFamily(
            "preflight_webhook_render_cache",
            "Job renders (adapter runs) by result: hit (the same content and inputs were rendered before) or miss.",
            labels=["result"],
        )
        family.add_metric(["hit"], float(hits))
        family.add_metric(["miss"], float(misses))
        yield family
