"""Leader election through a coordination.k8s.io/v1 Lease: only the leader judges and writes.

Follows client-go `tools/leaderelection/leaderelection.go` (`tryAcquireOrRenew`, `renew`,
`acquire`) with `resourcelock/leaselock.go` (`LeaseSpecToLeaderElectionRecord`):

- the record is the Lease's spec: holderIdentity, leaseDurationSeconds, acquireTime, renewTime,
  leaseTransitions;
- a candidate takes the Lease only when it is free (no holder) or expired, and "expired" is
  judged on the candidate's own clock: the time it last *observed* the record change plus
  leaseDurationSeconds (never the renewTime written by another machine's clock);
- the holder renews every retryPeriod; a renewal keeps acquireTime and leaseTransitions, a
  takeover sets acquireTime and adds one transition;
- every write is an update with the resourceVersion read (optimistic concurrency), so of two
  candidates that race only one wins (409 Conflict for the other);
- the holder that cannot renew within renewDeadline stops leading (it may no longer be the only
  one); on a clean stop it releases the Lease (ReleaseOnCancel: holderIdentity emptied,
  leaseDurationSeconds 1) so a successor need not wait for the expiry.

`decide` is the pure part (tested on its own); `LeaderElector` does the I/O.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from webhook.kube import ApiError

log = logging.getLogger(__name__)

MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"  # metav1.MicroTime (RFC3339 with microseconds)


def micro_time(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime(MICRO)


@dataclass(frozen=True)
class Record:
    """The leader election record (client-go LeaderElectionRecord), as stored in Lease.spec."""

    holder: str = ""
    duration: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def from_spec(cls, spec: Any) -> Record:
        spec = spec if isinstance(spec, dict) else {}

        def s(k: str) -> str | None:
            v = spec.get(k)
            return v if isinstance(v, str) else None

        dur, tr = spec.get("leaseDurationSeconds"), spec.get("leaseTransitions")
        return cls(
            holder=s("holderIdentity") or "",
            duration=dur if isinstance(dur, int) else 0,
            acquire_time=s("acquireTime"),
            renew_time=s("renewTime"),
            transitions=tr if isinstance(tr, int) else 0,
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.duration,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time:
            spec["renewTime"] = self.renew_time
        return spec


def decide(
    observed: Record | None, *, me: str, duration: int, now_wall: str, now: float, observed_at: float
) -> Record | None:
    """What to write, or None when another holder's Lease is still valid (tryAcquireOrRenew).

    `observed`: the record read now (None: no Lease yet). `observed_at`: the monotonic time this
    candidate first saw that exact record; `now`: the monotonic time now."""
    if observed is None:
        return Record(me, duration, now_wall, now_wall, 0)
    if observed.holder and observed.holder != me:
        valid_for = observed.duration if observed.duration > 0 else duration
        if observed_at + valid_for > now:
            return None  # held by another, not expired on our clock
    if observed.holder == me:
        return Record(me, duration, observed.acquire_time or now_wall, now_wall, observed.transitions)
    return Record(me, duration, now_wall, now_wall, observed.transitions + 1)


class LeaderElector:
    """Runs the election against the apiserver; `is_leader` and the callbacks say who leads."""

    def __init__(
        self,
        client: Any,  # KubeClient-like: request(method, path, timeout=, body=, kind=)
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_started: Callable[[], Any] | None = None,
        on_stopped: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.client = client
        self.namespace, self.name, self.identity = namespace, name, identity
        self.duration = max(1, int(lease_duration))
        self.renew_deadline, self.retry_period = renew_deadline, retry_period
        self.on_started, self.on_stopped = on_started, on_stopped
        self._clock, self._wall = clock, wall
        self.is_leader = False
        self._observed: Record | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0
        self.leader_changed = asyncio.Event()

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{quote(self.namespace, safe='')}/leases"

    async def try_acquire_or_renew(self) -> bool:
        """One round of tryAcquireOrRenew: True when this candidate holds the Lease after it."""
        lease: dict[str, Any] | None
        try:
            lease = await self.client.request(
                "GET", f"{self.path}/{quote(self.name, safe='')}", timeout=self.renew_deadline, kind="GET lease"
            )
        except ApiError as exc:
            if exc.status != 404:
                log.warning("leader election: cannot read Lease %s/%s: %s", self.namespace, self.name, exc.message)
                return False
            lease = None
        now = self._clock()
        record = None if lease is None else Record.from_spec(lease.get("spec"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        want = decide(
            record,
            me=self.identity,
            duration=self.duration,
            now_wall=micro_time(self._wall()),
            now=now,
            observed_at=self._observed_at,
        )
        if want is None:
            return False
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": want.to_spec(),
        }
        try:
            if lease is None:
                await self.client.request("POST", self.path, body=body, timeout=self.renew_deadline, kind="POST lease")
            else:
                body["metadata"]["resourceVersion"] = (lease.get("metadata") or {}).get("resourceVersion")
                await self.client.request(
                    "PUT", f"{self.path}/{quote(self.name, safe='')}", body=body,
                    timeout=self.renew_deadline, kind="PUT lease",
                )  # fmt: skip
        except ApiError as exc:
            if exc.status not in (409, 422):  # 409: another candidate wrote first (AlreadyExists / Conflict)
                log.warning("leader election: cannot write Lease %s/%s: %s", self.namespace, self.name, exc.message)
            return False
        self._observed, self._observed_at = want, self._clock()
        return True

    async def run(self) -> None:
        """Acquire, lead while renewals succeed within renewDeadline, then try again; forever."""
        try:
            while True:
                ok = await self.try_acquire_or_renew()
                now = self._clock()
                if ok:
                    self._last_renew = now
                    if not self.is_leader:
                        self._set(True)
                elif self.is_leader and now - self._last_renew > self.renew_deadline:
                    log.error("leader election: lost the Lease %s/%s (no renewal within %.0fs)",
                              self.namespace, self.name, self.renew_deadline)  # fmt: skip
                    self._set(False)
                elif self.is_leader and self._observed is not None and self._observed.holder not in ("", self.identity):
                    self._set(False)  # someone else holds it now
                await asyncio.sleep(self.retry_period)
        finally:
            if self.is_leader:
                self._set(False)

    def _set(self, leader: bool) -> None:
        self.is_leader = leader
        log.info("leader election: %s the Lease %s/%s as %s", "holding" if leader else "not holding",
                 self.namespace, self.name, self.identity)  # fmt: skip
        self.leader_changed.set()
        cb = self.on_started if leader else self.on_stopped
        if cb is not None:
            cb()

    async def release(self) -> None:
        """Give the Lease up (ReleaseOnCancel): emptied holder, 1 s duration; only if we still hold it."""
        path = f"{self.path}/{quote(self.name, safe='')}"
        try:
            lease = await self.client.request("GET", path, timeout=5.0, kind="GET lease")
            rec = Record.from_spec(lease.get("spec"))
            if rec.holder != self.identity:
                return
            now = micro_time(self._wall())
            spec = Record("", 1, now, now, rec.transitions).to_spec()
            body = {**lease, "spec": spec}
            await self.client.request("PUT", path, body=body, timeout=5.0, kind="PUT lease")
        except ApiError as exc:
            log.warning("leader election: cannot release the Lease: %s", exc.message)
