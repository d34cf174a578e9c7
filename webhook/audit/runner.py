"""One running audit controller: its connection, cluster view, sinks, watches and election.

`AuditRun.start` is what `preflight-webhook audit` runs and what the e2e tests start in process
(several of them, to see that only the leader writes)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from webhook.audit.client import AuditClient
from webhook.audit.controller import AuditController, watch_connections
from webhook.audit.events import EventSink
from webhook.audit.lease import LeaderElector
from webhook.audit.metrics import AuditMetrics
from webhook.audit.reports import open_report_sink
from webhook.audit.sink import FindingSink
from webhook.checks.base import Check
from webhook.cluster.client import load_configuration
from webhook.cluster.live import LiveClusterView
from webhook.cluster.reads import own_namespace
from webhook.config import Settings
from webhook.models.kueue.wait import AUDIT_PENDING_PAGES

log = logging.getLogger(__name__)

#: requests the leader election's own client may have in flight (a GET and a PUT of the Lease)
ELECTION_CONCURRENCY = 2


def fresh_reads(settings: Settings) -> Settings:
    """The controller learns of a change by a watch and judges at once: a Secret's keys, a Service's
    EndpointSlices or a dry run reused from before the change would hide it, so nothing is reused."""
    return settings.model_copy(
        update={"secret_ttl_seconds": 0.0, "endpoint_slice_ttl_seconds": 0.0, "dry_run_cache_seconds": 0.0}
    )


def _audit_view(
    settings: Settings, client: AuditClient, checks: Sequence[Check], discovery_refresh_seconds: float
) -> LiveClusterView:
    """The controller's cluster view: its caches frozen as serve's (cache.freeze_heap), and more pages of
    a paged read (a waiting job's position past Kueue's first page of pending workloads), each one a
    request paced by audit.qps like every read here; the webhook reads one (its deadline)."""
    view = LiveClusterView(
        settings, client, checks=checks, discovery_refresh_seconds=discovery_refresh_seconds, freeze_after_lists=True
    )
    view.max_pages = AUDIT_PENDING_PAGES
    return view


class AuditRun:
    def __init__(
        self,
        controller: AuditController,
        elector: LeaderElector,
        events: EventSink,
        view: LiveClusterView,
        metrics: AuditMetrics,
    ) -> None:
        self.controller, self.elector, self.events, self.view = controller, elector, events, view
        self.metrics = metrics
        self._election: asyncio.Task[None] | None = None
        self._stopped = False

    @classmethod
    async def start(
        cls,
        settings: Settings,
        *,
        kubeconfig: str | None,
        identity: str,
        checks: Sequence[Check],
        extra_sinks: Sequence[FindingSink] = (),
        sync_timeout: float = 60.0,
        discovery_refresh_seconds: float = 60.0,
    ) -> AuditRun:
        """`discovery_refresh_seconds`: how soon a kind whose CRD is installed later is watched."""
        a = settings.audit
        settings = fresh_reads(settings)
        cfg = await load_configuration(kubeconfig)
        client = AuditClient(
            cfg, settings.api_concurrency, qps=a.qps, burst=a.burst, watches=watch_connections(settings)
        )
        view = _audit_view(settings, client, checks, discovery_refresh_seconds)
        await view.start(sync_timeout)
        await view.wait_synced(sync_timeout)
        events = EventSink(client, settings, instance=identity)
        metrics = AuditMetrics(settings)
        sinks: list[FindingSink] = [events]
        report = await open_report_sink(
            client, settings, enabled=a.reports, debounce=a.debounce_seconds, on_write=metrics.count_write
        )
        if report is not None:
            sinks.append(report)
        controller = AuditController(settings, view, checks=checks, sinks=[*sinks, metrics, *extra_sinks])
        controller.start_watches()
        controller.watch_discovery()
        if not await controller.wait_synced(sync_timeout):
            log.warning("audit: not every watch synced within %.0fs; judging what is known", sync_timeout)
        # the election's own client, as controller-runtime's leader election builds its own clients from
        # the config (pkg/leaderelection/leader_election.go `NewResourceLock`): its own token bucket,
        # slots and connections. On the scan's client a renewal queued behind a full scan's requests
        # (1,000 Report writes after a cheap pass of 10,000 jobs) and the leader lost its Lease.
        election = AuditClient(await load_configuration(kubeconfig), ELECTION_CONCURRENCY, qps=a.qps, burst=a.burst)
        elector = LeaderElector(
            election,
            namespace=a.lease_namespace or own_namespace() or "default",
            name=a.lease_name,
            identity=identity,
            lease_duration=a.lease_duration_seconds,
            renew_deadline=a.renew_deadline_seconds,
            retry_period=a.retry_period_seconds,
            on_started=controller.start_leading,
            on_stopped=controller.stop_leading,
        )
        run = cls(controller, elector, events, view, metrics)
        run._election = asyncio.ensure_future(elector.run())
        log.info("audit: started as %s (Lease %s/%s)", identity, elector.namespace, elector.name)
        return run

    async def stop(self, *, release: bool = True) -> None:
        """Stop judging, release the Lease (unless `release` is False: a crash), close everything. Once."""
        if self._stopped:
            return
        self._stopped = True
        if self._election is not None:
            self._election.cancel()
            await asyncio.gather(self._election, return_exceptions=True)
        await self.controller.close()
        for sink in self.controller.sinks:
            close = getattr(sink, "close", None)
            if close is not None:
                await close()
        if release:
            await self.elector.release()
        await self.elector.client.close()
        await self.view.close()

    def __repr__(self) -> str:  # pragma: no cover
        return f"AuditRun({self.elector.identity!r}, leader={self.controller.is_leader})"

    @property
    def stats(self) -> dict[str, Any]:
        return {"leader": self.controller.is_leader, "evaluations": dict(self.controller.evaluations)}
