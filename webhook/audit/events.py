"""The Events sink: `PreflightFailed` / `PreflightPassed` on the job, only when its result changes.

Where users look: `kubectl describe` lists a resource's Events through core/v1
(k8s.io/kubectl/pkg/describe/describe.go `searchEvents`: CoreV1().Events with an
involvedObject field selector) and so does `kubectl events` (pkg/cmd/events/events.go). Events
written through events.k8s.io/v1 are the same stored objects, but the core/v1 recorder
(k8s.io/client-go/tools/record/event.go, `makeEvent`: name `<object>.<unix nanos in hex>`,
involvedObject, source.component, firstTimestamp = lastTimestamp, count 1) is what both commands
read without conversion, so that is the shape written here.

- `PreflightFailed` (Warning): `enforce` would deny the job; the message is the webhook's own
  denial (`<Kind> "name" in namespace "ns" failed N preflight checks:` then one
  `[Check] what, why. Fix: ...` line per check), the one `kubectl apply` shows in enforce mode,
  also while the job's mode is warn or audit (then it says what a switch to enforce refuses).
- `PreflightPassed` (Normal): a job this controller reported as failed passes again.
- `PreflightWaiting` (Normal): the job waits in its Kueue queue (Kueue Capacity's warning on a
  job whose Workload is pending, webhook/models/kueue/wait.py), with what blocks it and its
  position; written again only when what blocks it changes, never when only the position moves
  (no Event storm on a busy queue). Its own sequence: it neither replaces nor repeats the
  PreflightFailed/PreflightPassed state.
- Nothing else: a job that passes at its first judgement, and a result that did not change
  (the periodic re-check), write nothing; nor does a partial judgement (the cheap pass of a full
  scan, before the checks that send requests ran: `Judgement.complete` is False), so an Event
  never flips on half the facts.

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
from webhook.config import Settings
from webhook.kube import ApiError
from webhook.policy import decide
from webhook.preflight import OBJECT_SIZE
from webhook.results import Status

log = logging.getLogger(__name__)

COMPONENT = "preflight-webhook-audit"
FAILED, PASSED = "PreflightFailed", "PreflightPassed"
WAITING = "PreflightWaiting"
#: the check whose details say what blocks a waiting job and where it stands (models/kueue/wait.py)
KUEUE_CAPACITY = "Kueue Capacity"
BLOCKING, POSITION = "blocking: ", "position: "
#: events.k8s.io/v1 refuses a note over 1 kB; a core/v1 message is kept within the same bound
MESSAGE_MAX = 1024


def failure_text(j: Judgement, settings: Settings) -> str | None:
    """The webhook's text for what `enforce` would deny of the job, or None when it would admit it.

    Denied now (enforce): the Decision's message, as `kubectl apply` showed it. Admitted now (warn or
    audit mode, the namespace's label): the denial the domain gives the same results in enforce mode
    (`webhook.policy.decide`, as webhook/audit/findings.py asks it for the reports), so the Events say
    what a switch to enforce would refuse. A check whose action is warn, audit or off never makes a
    job fail here, as it never denies in enforce."""
    d = j.evaluation.decision
    job = j.job
    if not d.allowed and job.parent is None:
        return d.message or None
    ev = j.evaluation
    if not any(r.status is Status.FAIL or r.timed_out for r in ev.results.checks):
        return None
    local = settings
    if any(r.name == OBJECT_SIZE for r in ev.results.checks):
        local = settings.model_copy(update={"checks": {**settings.checks, OBJECT_SIZE: settings.object_limits.action}})
    wl = ev.workload
    subject = (
        f'{wl.kind} "{wl.name}" in namespace "{wl.namespace}"'
        if wl is not None
        else f'{job.kind} "{job.name}" in namespace "{job.namespace}"'
    )
    if job.parent is not None:  # not created yet: the Event goes on its sweep and names it
        subject = (
            f'{job.kind} "{job.name}", which {job.parent.kind} "{job.parent.name}" creates later, '
            f'in namespace "{job.namespace}"'
        )
    enforce = decide(ev.results, settings=local, mode="enforce", subject=subject)
    return None if enforce.allowed else (enforce.message or None)


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


def waiting_of(j: Judgement) -> tuple[str, str] | None:
    """(what blocks the job, the PreflightWaiting message) when Kueue Capacity says it waits, else None."""
    for r in j.evaluation.results.checks:
        if r.name != KUEUE_CAPACITY or r.status is not Status.WARN:
            continue
        blocking = next((d[len(BLOCKING) :] for d in r.details if d.startswith(BLOCKING)), "")
        if not blocking:
            return None
        position = next((d[len(POSITION) :] for d in r.details if d.startswith(POSITION)), "")
        where = f" (position {position})" if position else ""
        return blocking, clip_message(f"{j.job.kind} {j.job.name} waits: {blocking}{where}. {r.message}")
    return None


def blocking_of(message: str) -> str:
    """What blocks the job, read back from a PreflightWaiting message (`waiting_of`)."""
    _, _, rest = message.partition(" waits: ")
    return rest.split(" (position ", 1)[0].split(". ", 1)[0]


def waiting_to_write(previous: str | None, current: tuple[str, str] | None) -> str | None:
    """Pure dedup: the PreflightWaiting message to write now, or None. `previous`: what blocked the
    job at its last PreflightWaiting (None: none, or it stopped waiting since). Only a change of what
    blocks it writes one; a position that moves does not."""
    if current is None or current[0] == previous:
        return None
    return current[1]


def _ts(e: dict[str, Any]) -> str:
    return str(e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp") or "")


def job_key(job: JobRef) -> str:
    """Whose Events are one sequence: a job's uid; a sweep's child: the sweep's uid and the child's name."""
    return job.uid if job.parent is None else f"{job.parent.uid}/{job.name}"


def latest_states(
    events: list[dict[str, Any]], component: str = COMPONENT, reasons: tuple[str, ...] = (FAILED, PASSED)
) -> dict[str, tuple[str, str]]:
    """Per job (`job_key`: the involved object's uid, and the `related` child's name for a sweep's
    child), the (reason, message) of this component's latest preflight Event of `reasons`."""
    best: dict[str, tuple[str, tuple[str, str]]] = {}
    for e in events:
        if not isinstance(e, dict) or e.get("reason") not in reasons:
            continue
        if (e.get("reportingComponent") or (e.get("source") or {}).get("component")) != component:
            continue
        uid = (e.get("involvedObject") or {}).get("uid")
        if not isinstance(uid, str) or not uid:
            continue
        child = (e.get("related") or {}).get("name")
        if isinstance(child, str) and child:
            uid = f"{uid}/{child}"
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

    def __init__(self, client: Any, settings: Settings, *, instance: str, component: str = COMPONENT) -> None:
        self.client = client
        self.settings = settings
        self.component = component
        self.instance = instance
        self.last: dict[str, tuple[str, str]] = {}
        #: per job (`job_key`), what blocked it at its last PreflightWaiting, while it still waits
        self.waiting: dict[str, str] = {}
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
        self.waiting = {k: blocking_of(m) for k, (_, m) in latest_states(items, self.component, (WAITING,)).items()}
        log.info("events: read back the last preflight Event of %d jobs", len(self.last))

    async def publish(self, judgement: Judgement) -> None:
        if not judgement.complete:  # an Event is written only from a complete judgement
            return
        job = judgement.job
        waiting = waiting_of(judgement)
        if waiting is None:
            self.waiting.pop(job_key(job), None)
        elif (note := waiting_to_write(self.waiting.get(job_key(job)), waiting)) is not None:
            if await self._write(job, WAITING, note):
                self.waiting[job_key(job)] = waiting[0]
        current = state_of(failure_text(judgement, self.settings))
        write = event_to_write(self.last.get(job_key(job)), current)
        if write is None:  # unchanged, or a first judgement that passes
            return
        if await self._write(job, *write):
            self.last[job_key(job)] = write

    async def forget(self, job: JobRef, why: str) -> None:
        self.waiting.pop(job_key(job), None)  # started, finished or deleted: it waits no more
        if why == "deleted":
            self.last.pop(job_key(job), None)

    async def scan_done(self, judged: int, not_judged: dict[str, int]) -> None:
        return None

    async def _write(self, job: JobRef, reason: str, message: str) -> bool:
        """One Event on the job; a sweep's child: on its sweep, the child as `related` (core/v1
        Event.related, "optional secondary object"), since the child does not exist yet."""
        target = job.parent or job
        now = _now()
        ts = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        name = f"{target.name}.{int(now.timestamp() * 1e9):x}{secrets.token_hex(2)}"
        passed = f"{job.kind} {job.name} passes its preflight checks again"
        if job.parent is not None:
            passed = f"{job.kind} {job.name}, which {target.kind} {target.name} creates later, passes its preflight checks again"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name[:253], "namespace": target.namespace},
            "involvedObject": {
                "apiVersion": target.api_version, "kind": target.kind, "name": target.name,
                "namespace": target.namespace, "uid": target.uid,
            },
            "reason": reason,
            "message": message or passed,
            "type": "Warning" if reason == FAILED else "Normal",  # PreflightWaiting: Normal
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "action": "Preflight",
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "count": 1,
        }  # fmt: skip
        if job.parent is not None:
            body["related"] = {"apiVersion": job.api_version, "kind": job.kind, "name": job.name,
                               "namespace": job.namespace}  # fmt: skip
        try:
            await self.client.request(
                "POST", f"/api/v1/namespaces/{quote(target.namespace, safe='')}/events",
                body=body, timeout=10.0, kind="POST event",
            )  # fmt: skip
        except ApiError as exc:
            log.warning("events: cannot write %s on %s %s/%s: %s", reason, job.kind, job.namespace, job.name,
                        exc.message)  # fmt: skip
            return False
        self.written += 1
        log.info("events: %s on %s %s/%s", reason, job.kind, job.namespace, job.name)
        return True
