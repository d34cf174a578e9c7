"""Which Kueue queue a job goes to, and its LocalQueue and ClusterQueue from the caches.

The queue is the job's (label `kueue.x-k8s.io/queue-name`, AIPerf `scheduling.queueName`),
else for AIPerfJobs the operator's default, else the namespace's LocalQueue `default` if it
exists (Kueue's LocalQueue defaulting).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webhook.kube import QUEUE_LABEL
from webhook.models.apis import KUEUE_API
from webhook.models.context import CheckContext
from webhook.workloads.base import Workload

GROUP = "kueue.x-k8s.io"
AIPERF_DEFAULT_QUEUE_ENV = "AIPERF_K8S_JOBSET_KUEUE_DEFAULT_QUEUE_NAME"


@dataclass
class Queue:
    name: str
    #: where the name comes from, for messages and fixes
    source: str
    implicit: bool = False


def requested_queue(wl: Workload, settings: Any) -> Queue | None:
    """The queue the job explicitly asks for (or the AIPerf operator's configured default)."""
    labels = (wl.obj.get("metadata") or {}).get("labels") or {}
    if isinstance(labels.get(QUEUE_LABEL), str) and labels[QUEUE_LABEL]:
        return Queue(labels[QUEUE_LABEL], f"label {QUEUE_LABEL}")
    field = wl.facts.queue_field  # a field of the kind's own that names the queue (KindFacts)
    named: Any = wl.obj
    for key in field.split(".") if field else ():
        named = (named if isinstance(named, dict) else {}).get(key)
    if field and isinstance(named, str) and named:
        return Queue(named, field)
    if wl.queue_name:
        return Queue(wl.queue_name, "the job's queue name")
    if wl.facts.default_queue:
        default = settings.kueue.default_queue_name or settings.aiperf_env.get(AIPERF_DEFAULT_QUEUE_ENV)
        if default:
            return Queue(default, "the AIPerf operator's default queue (kueue.defaultQueueName)")
    return None


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def _cond_text(c: dict[str, Any]) -> str:
    reason, msg = c.get("reason") or "", (c.get("message") or "").strip().rstrip(".")
    return f"{reason}: {msg}" if reason and msg else (reason or msg or "no reason given")


def selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector; `{}` matches everything."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key", ""), e.get("operator"), list(e.get("values") or [])
        if op == "In" and not (key in labels and labels[key] in values):
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def selector_text(selector: dict[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    for e in selector.get("matchExpressions") or []:
        vals = e.get("values") or []
        parts.append(f"{e.get('key')} {e.get('operator')}" + (f" ({', '.join(map(str, vals))})" if vals else ""))
    return ", ".join(parts) or "{}"


@dataclass
class Resolved:
    cluster_queue: dict[str, Any]


def find_queue(ctx: CheckContext) -> tuple[Queue | None, str | None]:
    """(queue, skip reason). The queue is None with a reason when there is nothing to check."""
    assert ctx.view is not None
    wl = ctx.workload
    q = requested_queue(wl, ctx.settings)
    if q is not None:
        return q, None
    if not ctx.view.served(KUEUE_API):
        return None, f"Kueue is not installed ({KUEUE_API} is not served) and the job names no queue"
    if ctx.view.get_cached("localqueues", wl.namespace, "default") is not None:
        return Queue("default", f'Kueue\'s default LocalQueue of namespace "{wl.namespace}"', implicit=True), None
    return (
        None,
        f'The job names no Kueue queue ({QUEUE_LABEL}) and namespace "{wl.namespace}" has no LocalQueue "default"',
    )


def resolve_queue(ctx: CheckContext) -> tuple[Resolved | None, str | None]:
    """For the follow-up checks: the LocalQueue and ClusterQueue, or why to skip."""
    assert ctx.view is not None
    q, reason = find_queue(ctx)
    if q is None:
        return None, reason
    if not ctx.view.served(KUEUE_API):
        return None, "Kueue is not installed (see Kueue Queue)"
    lq = ctx.view.get_cached("localqueues", ctx.workload.namespace, q.name)
    if lq is None:
        return None, f'LocalQueue "{q.name}" does not exist (see Kueue Queue)'
    cq_name = (lq.get("spec") or {}).get("clusterQueue") or ""
    cq = ctx.view.get_cached("clusterqueues", None, cq_name) if cq_name else None
    if cq is None:
        return None, f'ClusterQueue "{cq_name}" does not exist (see Kueue Queue)'
    return Resolved(cq), None
