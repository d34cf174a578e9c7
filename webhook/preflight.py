"""The single path from an object to a decision, shared by the server and the CLI.

object ─► adapter ─► Workload ─► engine (checks) ─► policy ─► Decision
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import copy
import sys
from dataclasses import dataclass, field
from typing import Any

from webhook.checkmemo import CheckMemo
from webhook.checks import all_checks
from webhook.checks.base import Check
from webhook.checks.render import JobRender
from webhook.cluster.view import ClusterView
from webhook.config import Settings
from webhook.deadline import Deadline, rendering_within
from webhook.engine import applicable, run_checks, so_far, timed_out_result
from webhook.policy import Decision, Outcome, decide, unreadable, unreadable_before
from webhook.results import CheckResult, PreflightResults, Status
from webhook.workloads import adapter_for, build_workload
from webhook.workloads.base import AdapterError, RuntimeLookup, Workload
from webhook.workloads.walks import bounded_plain, verified_plain

MODES = ("enforce", "warn", "audit")
#: the name the verdict on an object over etcd's object limit is reported under (objectLimits)
OBJECT_SIZE = "Object Size"
#: the name a whole evaluation that ran past the deadline is reported under (timeoutAction)
EVALUATION = "Preflight"


@dataclass
class Progress:
    """How far one evaluation got, for a caller whose own timeout may end it (the server): once the
    Workload is built, its checks, and each check's results as they come in."""

    workload: Workload | None = None
    checks: list[Check] = field(default_factory=list)
    found: dict[str, list[CheckResult]] = field(default_factory=dict)
    mode: str | None = None
    notes: list[str] = field(default_factory=list)
    #: the worker thread rendering a large object (evaluate's off_loop): it may outlive a review cut short
    running: concurrent.futures.Future[Any] | None = None


#: the worker threads that render large objects (evaluate's off_loop); their futures outlive a cancelled
#: wait, so the server holds a large review's memory share until its render has really ended
_RENDERERS = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="render")


@dataclass(frozen=True)
class SkipRequest:
    """A check the object's skip annotation (skipAnnotation) names: `granted` when skippableChecks allows it
    (the check was not run), else refused (it ran); `message` says which, for the CLI's reports."""

    check: str
    granted: bool
    message: str
    #: its line among the Evaluation's notes (the webhook's warnings and audit annotations)
    note: str = ""


@dataclass
class Evaluation:
    workload: Workload | None
    results: PreflightResults
    decision: Decision
    notes: list[str] = field(default_factory=list)
    #: why the adapter could not read the object as its kind (denied in enforce mode; outside it a
    #: Job Render finding under the mode), else None
    unreadable: str | None = None
    #: the checks the skip annotation names, granted or refused, in its order (each also one of `notes`)
    skips: list[SkipRequest] = field(default_factory=list)


def view_runtime_lookup(view: ClusterView) -> RuntimeLookup:
    def lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if kind == "TrainingRuntime":
            return view.get_cached("trainingruntimes", namespace, name)
        return view.get_cached("clustertrainingruntimes", None, name)

    return lookup


def _spec_of(obj: dict[str, Any] | None) -> Any:
    return None if not isinstance(obj, dict) else obj.get("spec")


def _subject(wl: Workload) -> str:
    return f'{wl.kind} "{wl.name}" in namespace "{wl.namespace}"'


def _raw_subject(obj: dict[str, Any], namespace: str | None) -> tuple[str, str]:
    """(`Kind "name" in namespace "ns"`, ns) read defensively: for verdicts given before the adapter ran."""
    obj = obj if isinstance(obj, dict) else {}
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}

    def text(v: Any) -> str:
        return v if isinstance(v, str) else ""

    kind = text(obj.get("kind")) or "object"
    name = text(meta.get("name")) or text(meta.get("generateName")) or "<unnamed>"
    ns = text(meta.get("namespace")) or namespace or "default"
    return f'{kind} "{name}" in namespace "{ns}"', ns


def _namespace_mode(view: ClusterView | None, namespace: str, settings: Settings) -> tuple[str | None, list[str]]:
    if view is None or not namespace:
        return None, []
    ns = view.get_cached("namespaces", None, namespace) or {}
    value = ((ns.get("metadata") or {}).get("labels") or {}).get(settings.namespace_mode_label)
    if value in MODES and value != settings.mode:
        return value, [f"mode {value} for namespace {namespace} (label {settings.namespace_mode_label})"]
    return None, []


def _single_verdict(
    result: CheckResult,
    action: str,
    *,
    settings: Settings,
    obj: dict[str, Any],
    view: ClusterView | None,
    namespace: str | None,
    preexisting: bool = False,
) -> Evaluation:
    """A decision on one finding about the whole object, under `action` (not a registered check's)."""
    subject, ns = _raw_subject(obj, namespace)
    mode, notes = _namespace_mode(view, ns, settings)
    local = settings.model_copy(update={"checks": {**settings.checks, result.name: action}})
    results = PreflightResults([result])
    decision = decide(
        results, settings=local, mode=mode, subject=subject,
        preexisting={result.name} if preexisting else set(), notes=notes,
    )  # fmt: skip
    return Evaluation(None, results, decision, notes)


def too_large(obj: Any, settings: Settings) -> str | None:
    """The Object Size finding for `obj` (over objectLimits.maxBytes as JSON), or None."""
    size, _ = bounded_plain(obj, max_bytes=settings.object_limits.max_bytes)  # bounded, even on aliased YAML
    return None if size is None else oversize_text(size, settings)


def oversize_problem(size: int, settings: Settings) -> str | None:
    """The Object Size finding for an object of `size` bytes as JSON, or None when it is within the limit.

    The one text for the webhook (which measures the body before parsing it) and the CLI (which
    measures the object it read): etcd stores at most objectLimits.maxBytes (its --max-request-bytes)."""
    return None if size <= settings.object_limits.max_bytes else oversize_text(size, settings)


def oversize_text(size: int, settings: Settings) -> str:
    """oversize_problem's text for an object of `size` bytes as JSON."""
    limit = settings.object_limits.max_bytes
    default = " by default" if limit == ETCD_MAX_REQUEST_BYTES else ""
    return (
        f"the object is {_mib(size)} as JSON, over the {_mib(limit)} etcd stores{default} "
        "(its --max-request-bytes; objectLimits.maxBytes), so the apiserver cannot store it and no controller "
        "would ever see it. Fix: remove what the job does not need (inline data belongs in a ConfigMap, a volume "
        "or a URL)"
    )


#: etcd's default --max-request-bytes (1.5 MiB): the largest object the apiserver can store by default
ETCD_MAX_REQUEST_BYTES = 1_572_864


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def too_large_evaluation(
    problem: str,
    *,
    settings: Settings,
    obj: dict[str, Any],
    view: ClusterView | None = None,
    namespace: str | None = None,
    preexisting: bool = False,
) -> Evaluation:
    """The Object Size verdict under objectLimits.action (`obj` only names the subject).

    `preexisting`: an UPDATE whose old object was as large (ratchet: never blocks the fix)."""
    result = CheckResult(OBJECT_SIZE, Status.FAIL, problem, duration_ms=0.0)
    action = settings.object_limits.action
    return _single_verdict(
        result, action, settings=settings, obj=obj, view=view, namespace=namespace, preexisting=preexisting
    )


def busy_evaluation(
    obj: dict[str, Any],
    message: str,
    *,
    settings: Settings,
    view: ClusterView | None = None,
    namespace: str | None = None,
) -> Evaluation:
    """The verdict on an object the server could not start judging within its budget (too many large
    reviews at once): not verified, so timeoutAction decides (`obj` only names the subject)."""
    result = CheckResult(EVALUATION, Status.WARN, message, duration_ms=0.0, timed_out=True)
    return _single_verdict(result, settings.timeout_action, settings=settings, obj=obj, view=view, namespace=namespace)


def timed_out_evaluation(
    obj: dict[str, Any],
    *,
    settings: Settings,
    deadline: Deadline,
    view: ClusterView | None = None,
    namespace: str | None = None,
) -> Evaluation:
    """The evaluation of an object whose judging ran past the deadline: timeoutAction decides.

    Whatever layer noticed the deadline (a check, the engine, or the server's outer timeout
    around the whole evaluation), the configured timeout action is the verdict, never an
    internal error that fails open.
    """
    result = timed_out_result(EVALUATION, deadline.budget)
    result.duration_ms = deadline.elapsed() * 1000.0
    return _single_verdict(result, settings.timeout_action, settings=settings, obj=obj, view=view, namespace=namespace)


def cut_short_evaluation(
    progress: Progress,
    obj: dict[str, Any],
    *,
    settings: Settings,
    deadline: Deadline,
    view: ClusterView | None = None,
    namespace: str | None = None,
) -> Evaluation:
    """The evaluation of an object whose judging the caller's own timeout ended: the failures found by
    then deny as usual, and every check not finished is reported by name as timed out (timeoutAction).
    Before the Workload existed nothing was found: the whole evaluation is timed out.

    An UPDATE cut short here is judged without the ratchet's second run (a failure found denies; the
    fix is to apply again when the cluster answers in time)."""
    wl = progress.workload
    if wl is None:
        return timed_out_evaluation(obj, settings=settings, deadline=deadline, view=view, namespace=namespace)
    results = so_far(progress.checks, progress.found, deadline)
    decision = decide(results, settings=settings, mode=progress.mode, subject=_subject(wl), notes=progress.notes)
    return Evaluation(wl, results, decision, progress.notes)


def _overrides(
    wl: Workload, settings: Settings, view: ClusterView | None
) -> tuple[str | None, set[str], list[str], list[SkipRequest]]:
    """(mode override, checks to skip, notes, the checks the annotation names, granted or refused) from
    the namespace label and the object annotation.

    Runs on the Workload, so metadata has already been validated by the adapter."""
    requests: list[SkipRequest] = []
    namespace, obj = wl.namespace, wl.obj
    notes: list[str] = []
    mode: str | None = None
    if view is not None and namespace:
        ns = view.get_cached("namespaces", None, namespace) or {}
        value = ((ns.get("metadata") or {}).get("labels") or {}).get(settings.namespace_mode_label)
        if value in MODES and value != settings.mode:
            mode = value
            notes.append(f"mode {value} for namespace {namespace} (label {settings.namespace_mode_label})")
    skip: set[str] = set()
    ann = ((obj.get("metadata") or {}).get("annotations") or {}).get(settings.skip_annotation)
    if isinstance(ann, str) and ann.strip():
        for name in (n.strip() for n in ann.split(",")):
            if not name:
                continue
            if name in settings.skippable_checks:
                skip.add(name)
                notes.append(f"check {name!r} skipped by annotation {settings.skip_annotation}")
                message = f"Skipped: annotation {settings.skip_annotation} (in skippableChecks)"
                requests.append(SkipRequest(name, True, message, notes[-1]))
            else:
                notes.append(f"annotation {settings.skip_annotation} cannot skip {name!r}: not in skippableChecks")
                requests.append(SkipRequest(name, False, notes[-1], notes[-1]))
    return mode, skip, notes, requests


async def evaluate(
    obj: dict[str, Any],
    *,
    settings: Settings,
    deadline: Deadline,
    view: ClusterView | None = None,
    operation: str = "CREATE",
    old_obj: dict[str, Any] | None = None,
    runtime_lookup: RuntimeLookup | None = None,
    namespace: str | None = None,
    checks: list[Check] | None = None,
    off_loop: bool = False,
    within_limit: bool = False,
    progress: Progress | None = None,
    memo: CheckMemo | None = None,
) -> Evaluation:
    """Evaluate one object. One its adapter cannot read as its kind is denied (`unreadable`).

    `off_loop` (the server sets it for a large body): the walk and the adapter, pure CPU in
    proportion to the object, run in a worker thread, so the event loop keeps answering /healthz
    and the other reviews meanwhile (the interpreter hands it the GIL every few milliseconds), and
    the server's deadline can cut the wait (docs/sizing.md, "Large objects").
    `within_limit` (the server): the object's JSON, as the apiserver wrote it, was measured within
    objectLimits.maxBytes before parsing, so it is not serialized again to be measured (one C call
    that held the interpreter lock 127 ms at 750 KiB, in a worker thread too).

    UPDATE is ratcheted: a spec that did not change passes without checks, and a check
    that already failed on the old object never blocks (it becomes a warning), so a user
    can always cancel, suspend or fix a job.

    `memo` (the server's): the synchronous checks' results kept for the same render while every cache
    they read is unchanged (webhook/checkmemo.py).

    Steps: build (`_build`: the Workload, or the Object Size / unreadable verdict) → dispatch
    (`_dispatch`: the engine runs the checks) → classify (`_failing_before`: the ratchet; policy.decide)
    → message (the Decision policy wrote).
    """
    req = _Request(
        obj, settings, deadline, view, operation, old_obj, namespace, off_loop, within_limit, progress,
        checks=all_checks() if checks is None else checks,
        runtime_lookup=view_runtime_lookup(view) if runtime_lookup is None and view is not None else runtime_lookup,
        memo=memo,
    )  # fmt: skip
    if req.updating and _spec_of(old_obj) == _spec_of(obj):
        # status, labels, finalizers: nothing the checks judge changed
        return Evaluation(None, PreflightResults(), Decision(allowed=True, outcome=Outcome.ALLOWED))
    try:
        problem, wl = await _build(req)
        if problem is not None:
            return _oversized(req, problem)
    except AdapterError as exc:
        return _unreadable_evaluation(req, exc)
    if wl is None:
        return Evaluation(None, PreflightResults(), Decision(allowed=True, outcome=Outcome.UNHANDLED))
    mode, skip, notes, requests = _overrides(wl, settings, view)
    results = await _dispatch(req, wl, skip, mode, notes)
    preexisting = await _failing_before(req, results, skip)
    decision = decide(results, settings=settings, mode=mode, subject=_subject(wl), preexisting=preexisting, notes=notes)
    return Evaluation(wl, results, decision, notes, skips=requests)


@dataclass(frozen=True)
class _Request:
    """evaluate's arguments, for its steps (build, dispatch, the ratchet), `runtime_lookup` and `checks` resolved."""

    obj: dict[str, Any]
    settings: Settings
    deadline: Deadline
    view: ClusterView | None
    operation: str
    old_obj: dict[str, Any] | None
    namespace: str | None
    off_loop: bool
    within_limit: bool
    progress: Progress | None
    checks: list[Check]
    runtime_lookup: RuntimeLookup | None
    memo: CheckMemo | None = None

    @property
    def updating(self) -> bool:
        """An UPDATE with an old object to ratchet against."""
        return self.operation == "UPDATE" and isinstance(self.old_obj, dict)

    def build(self, o: dict[str, Any]) -> Workload | None:
        """The Workload of `o` (None: no adapter for its kind); AdapterError when it cannot be read as its kind."""
        return build_workload(o, settings=self.settings, runtime_lookup=self.runtime_lookup, namespace=self.namespace)


async def _build(req: _Request) -> tuple[str | None, Workload | None]:
    """(the Object Size problem, or None; the Workload), in a worker thread when `off_loop`.

    AdapterError when it cannot be read."""
    api_version, kind = req.obj.get("apiVersion"), req.obj.get("kind")
    known = isinstance(api_version, str) and isinstance(kind, str) and adapter_for(api_version, kind) is not None

    def read() -> tuple[str | None, Workload | None]:
        """(the Object Size problem, or None; the Workload). AdapterError when it cannot be read."""
        plain = False
        if known:
            # the size bound (etcd's) and the adapter's plain-JSON check in one walk
            limit = sys.maxsize if req.within_limit else req.settings.object_limits.max_bytes
            size, plain = bounded_plain(req.obj, max_bytes=limit)
            problem = None if size is None else oversize_problem(size, req.settings)
            if problem is not None:  # before any rendering
                return problem, None
        # nothing changes obj between the walk and the adapter; the adapter may leave out what it cannot
        # render within its share of the deadline (a sweep's later children: named "not verified")
        with verified_plain(req.obj if plain else None), rendering_within(req.deadline):
            return None, req.build(req.obj)

    if not req.off_loop:
        return read()
    running = _RENDERERS.submit(contextvars.copy_context().run, read)
    if req.progress is not None:
        req.progress.running = running
    return await asyncio.wrap_future(running)


def _oversized(req: _Request, problem: str) -> Evaluation:
    """The Object Size verdict; an UPDATE of an object already stored that large is ratcheted."""
    # ratchet: an object already stored that large (etcd's limit raised, then lowered) can still be fixed
    pre = req.updating and too_large(req.old_obj, req.settings) is not None
    return too_large_evaluation(
        problem, settings=req.settings, obj=req.obj, view=req.view, namespace=req.namespace, preexisting=pre
    )


def _unreadable_evaluation(req: _Request, exc: AdapterError) -> Evaluation:
    """The verdict on an object its adapter cannot read: denied in enforce mode, a Job Render finding outside it,
    never blocking an UPDATE of an object stored before this webhook could judge it."""
    obj, settings = req.obj, req.settings
    if req.updating and isinstance(req.old_obj, dict) and _unreadable(req.build, req.old_obj):
        # stored before this webhook could judge it: never block the fix or the cancel
        return Evaluation(None, PreflightResults(), unreadable_before(str(exc)), unreadable=str(exc))
    subject, ns = _raw_subject(obj, req.namespace)
    kind = k if isinstance(obj, dict) and isinstance(k := obj.get("kind"), str) else "object"
    mode, _ = _namespace_mode(req.view, ns, settings)
    if (mode or settings.mode) != "enforce":
        # warn and audit never deny (docs/configuration.md `mode`): the same finding, as Job Render's
        text = unreadable(subject, kind, str(exc)).message or str(exc)
        found = CheckResult(JobRender.name, Status.FAIL, text, duration_ms=0.0)
        ev = _single_verdict(found, "deny", settings=settings, obj=obj, view=req.view, namespace=req.namespace)
        ev.unreadable = str(exc)
        return ev
    return Evaluation(None, PreflightResults(), unreadable(subject, kind, str(exc)), unreadable=str(exc))


async def _dispatch(
    req: _Request, wl: Workload, skip: set[str], mode: str | None, notes: list[str]
) -> PreflightResults:
    """Run the checks that apply to `wl` (not skipped), reporting them to `progress` as they come in."""
    todo = applicable(req.checks, wl, req.settings, skip)
    so_far_found: dict[str, list[CheckResult]] | None = None
    if req.progress is not None:
        req.progress.workload, req.progress.checks, req.progress.mode, req.progress.notes = wl, todo, mode, notes
        so_far_found = req.progress.found
    return await run_checks(
        wl, todo, settings=req.settings, deadline=req.deadline, view=req.view, found=so_far_found, memo=req.memo
    )


async def _failing_before(req: _Request, results: PreflightResults, skip: set[str]) -> set[str]:
    """The ratchet: the checks failing now that already failed on an UPDATE's old object (they never block)."""
    if not req.updating or not isinstance(req.old_obj, dict):
        return set()
    failing_now = {r.name for r in results.checks if r.status is Status.FAIL}
    if not failing_now:
        return set()
    try:
        old_wl = req.build(copy.deepcopy(req.old_obj))
    except AdapterError:
        old_wl = None
    if old_wl is None:
        return failing_now  # the old object cannot even be read: never block the fix
    old_checks = [c for c in applicable(req.checks, old_wl, req.settings, skip) if c.name in failing_now]
    old_results = await run_checks(old_wl, old_checks, settings=req.settings, deadline=req.deadline, view=req.view)
    return {r.name for r in old_results.checks if r.status is Status.FAIL}


def _unreadable(build: Any, obj: dict[str, Any]) -> bool:
    try:
        build(obj)
    except AdapterError:
        return True
    return False
