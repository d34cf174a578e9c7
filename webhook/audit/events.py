"""The Events sink: `PreflightFailed` / `PreflightPassed` on the job, only when its result changes.

Where users look: `kubectl describe` lists a resource's Events through core/v1
(k8s.io/kubectl/pkg/describe/describe.go `searchEvents`: CoreV1().Events with an
involvedObject field selector) and so does `kubectl events` (pkg/cmd/events/events.go). Events
written through events.k8s.io/v1 are the same stored objects, but the core/v1 recorder
(k8s.io/client-go/tools/record/event.go, `makeEvent`: name `<object>.<unix nanos in hex>`,
involvedObject, source.component, firstTimestamp = lastTimestamp, count 1) is what both commands
read without conversion, so that is the shape written here.

- `PreflightFailed` (Warning): the job fails checks; the message is the webhook's own text: the
  Decision's denial (`<Kind> "name" in namespace "ns" failed N preflight checks:` then one
  `[Check] what, why. Fix: ...` line per check), or under warn/audit mode the same lines for
  the failed checks the mode lets through.
- `PreflightPassed` (Normal): a job this controller reported as failed passes again.
- Nothing else: a job that passes at its first judgement, and a result that did not change
  (the periodic re-check), write nothing.

No duplicates after a restart or a change of leader: the previous state of every job is read
back from the cluster when this controller starts leading, i.e. the latest Event of this
component (reportingComponent) on each job uid, its reason and message. Events expire after the
apiserver's --event-ttl (1 h by default); a job still failing after that gets its
PreflightFailed again, which is what a user reading `kubectl describe` then needs.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from typing import Any
from urllib.parse import quote

from webhook.audit.sink import JobRef, Judgement
from webhook.kube import ApiError
from webhook.results import Status

log = logging.getLogger(__name__)

COMPONENT = "preflight-webhook-audit"
FAILED, PASSED = "PreflightFailed", "PreflightPassed"
#: events.k8s.io/v1 refuses a note over 1 kB; a core/v1 message is kept within the same bound
MESSAGE_MAX = 1024


def failure_text(j: Judgement) -> str | None:
    """The webhook's text for the job's failures, or None when it fails no check.

    Denied (enforce): the Decision's message, as `kubectl apply` shows it. Allowed while checks
    fail (warn, audit, or a check's warn/audit action): the same header and lines for those checks."""
    d = j.evaluation.decision
    if not d.allowed and d.message:
        return d.message
    results = j.evaluation.results.checks
    failed = [
        r for i, r in enumerate(results)
        if r.status is Status.FAIL and (i >= len(d.verdicts) or d.verdicts[i] in ("deny", "warn", "audit"))
    ]  # fmt: skip
    if not failed:
        return None
    wl = j.evaluation.workload
    subject = (
        f'{j.job.kind} "{j.job.name}" in namespace "{j.job.namespace}"'
        if wl is None
        else (f'{wl.kind} "{wl.name}" in namespace "{wl.namespace}"')
    )
    n = len(failed)
    lines = "\n".join(f"[{r.name}] {' '.join(r.message.split())}" for r in failed)
    return f"{subject} failed {n} preflight check{'s' if n != 1 else ''}:\n{lines}"


def clip_message(text: str, limit: int = MESSAGE_MAX) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode("utf-8", "ignore") + "…"


def state_of(text: str | None) -> tuple[str, str]:
    """(reason, message) the job's Event would carry for this result."""
    return (PASSED, "") if text is None else (FAILED, clip_message(text))


def event_to_write(previous: tuple[str, str] | None, current: tuple[str, str]) -> tuple[str, str] | None:
    """Pure dedup: the Event to write now, or None.

    previous: the last (reason, message) written for the job (None: never any)."""
    reason, message = current
    if reason == FAILED:
        return None if previous == current else current
    if previous is not None and previous[0] == FAILED:  # fixed: good again
        return (PASSED, "")
    return None


def _ts(e: dict[str, Any]) -> str:
    return str(e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp") or "")


def latest_states(events: list[dict[str, Any]], component: str = COMPONENT) -> dict[str, tuple[str, str]]:
    """Per involved object uid, the (reason, message) of this component's latest preflight Event."""
    best: dict[str, tuple[str, tuple[str, str]]] = {}
    for e in events:
        if not isinstance(e, dict) or e.get("reason") not in (FAILED, PASSED):
            continue
        if (e.get("reportingComponent") or (e.get("source") or {}).get("component")) != component:
            continue
        uid = (e.get("involvedObject") or {}).get("uid")
        if not isinstance(uid, str) or not uid:
            continue
        ts = _ts(e)
        cur = best.get(uid)
        if cur is None or ts >= cur[0]:
            msg = "" if e["reason"] == PASSED else str(e.get("message") or "")
            best[uid] = (ts, (e["reason"], msg))
    return {uid: state for uid, (_, state) in best.items()}


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class EventSink:
    """FindingSink writing core/v1 Events; see the module docstring."""

    def __init__(self, client: Any, *, instance: str, component: str = COMPONENT) -> None:
        self.client = client
        self.component = component
        self.instance = instance
        self.last: dict[str, tuple[str, str]] = {}
        self.written = 0

    async def resync(self) -> None:
        """Read back the last Event of every job (called when this controller starts leading)."""
        items: list[dict[str, Any]] = []
        cont: str | None = None
        while True:
            try:
                doc = await self.client.request(
                    "GET", "/api/v1/events",
                    query={"fieldSelector": f"source={self.component}", "limit": 500, "continue": cont},
                    timeout=30.0, kind="LIST events",
                )  # fmt: skip
            except ApiError as exc:
                log.warning("events: cannot read back earlier Events (%s); duplicates are possible", exc.message)
                return
            items.extend(i for i in doc.get("items") or [] if isinstance(i, dict))
            cont = (doc.get("metadata") or {}).get("continue") or None
            if not cont:
                break
        self.last = latest_states(items, self.component)
        log.info("events: read back the last preflight Event of %d jobs", len(self.last))

    async def publish(self, judgement: Judgement) -> None:
        target = judgement.job.parent or judgement.job
        current = state_of(failure_text(judgement))
        write = event_to_write(self.last.get(target.uid), current)
        if write is None:  # unchanged, or a first judgement that passes
            return
        if await self._write(target, *write):
            self.last[target.uid] = write

    async def forget(self, job: JobRef, why: str) -> None:
        if why == "deleted":
            self.last.pop(job.uid, None)

    async def scan_done(self, judged: int, not_judged: dict[str, int]) -> None:
        return None

    async def _write(self, job: JobRef, reason: str, message: str) -> bool:
        now = _now()
        ts = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        name = f"{job.name}.{int(now.timestamp() * 1e9):x}{secrets.token_hex(2)}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name[:253], "namespace": job.namespace},
            "involvedObject": {
                "apiVersion": job.api_version, "kind": job.kind, "name": job.name,
                "namespace": job.namespace, "uid": job.uid,
            },
            "reason": reason,
            "message": message or f"{job.kind} {job.name} passes its preflight checks again",
            "type": "Warning" if reason == FAILED else "Normal",
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "action": "Preflight",
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "count": 1,
        }  # fmt: skip
        try:
            await self.client.request(
                "POST", f"/api/v1/namespaces/{quote(job.namespace, safe='')}/events",
                body=body, timeout=10.0, kind="POST event",
            )  # fmt: skip
        except ApiError as exc:
            log.warning("events: cannot write %s on %s %s/%s: %s", reason, job.kind, job.namespace, job.name,
                        exc.message)  # fmt: skip
            return False
        self.written += 1
        log.info("events: %s on %s %s/%s", reason, job.kind, job.namespace, job.name)
        return True
