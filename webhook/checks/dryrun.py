"""Dry Run: would the apiserver accept what the job's controllers will create?

The JobSet the job becomes, and one representative Pod per distinct pod template, are POSTed with
`dryRun=All`, concurrently: every admission step runs (schema, Pod Security Admission,
LimitRange, ResourceQuota, other webhooks and policy engines) and nothing is stored.
The apiserver's own rejection text becomes the message. These are the only writes the
webhook ever sends. (A dry-run Pod is not one of our kinds: no recursion.)

The representative Pod is the first pod of the group's first Job exactly as the controllers
will create it, and the JobSet is owned by the job as its controller creates it
(webhook.models.dryrun_probe builds both, following the upstream controllers line by line).
A mutating webhook that refuses ends the apiserver's admission chain (k8s.io/apiserver
pkg/endpoints/handlers/create.go: mutating admission first; pkg/registry/generic/registry/store.go
Create: validation and validating admission after), so a webhook that looks up the probe's owner
would hide every later layer. Kueue v0.17.0's mjobset.kb.io and mpod.kb.io do
(pkg/controller/jobframework/reconciler.go FindAncestorJobManagedByKueue: "workload owner not
found"; JobSet v0.12.0's own mjobset.kb.io reads nothing). Such a probe is sent again as its twin
without the controller flag (dryrun_probe.twin_of), and the twin's answer is the verdict: every
later layer judged it. A rejection that only concerns the probe object (its ownerReference, an
absent owner, its name, or a twin refused in words about owners) is "cannot verify" (warn), never
a deny. What stays unverified is declared once (`DryRun.unverified`), not warned on each apply.
That a namespace's webhooks refuse such probes is remembered for TWIN_MEMO_SECONDS (per probe kind
and owner kind, webhook.models.dryrun_cache.TwinMemo): the next reviews send the twin at once, one
dry run per object instead of two.

Pod groups of one JobSet whose Job templates are the same content (e.g. two replicatedJobs of
one runtime that differ only in name and replicas) share one Pod dry run: their Pods differ only
in the group's name and counts in names and JobSet labels. The representative is the group
with the longest name (the longest pod, Job and label names, the ones a length rule rejects),
and findings name every group of the set ("Pod for a and b (same pod template)").

Each distinct object is dry-run at most once per review, all of them concurrently, and an
outcome is remembered for `dryRunCacheSeconds` keyed by the object's content and the
resourceVersions of the cached objects its admission reads (webhook.models.dryrun_cache):
a `kubectl apply --dry-run=server` followed by the real apply sends the dry runs once.
"""

from __future__ import annotations

import asyncio
import json
import re
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from webhook.checks.base import Check, CheckContext
from webhook.cluster.view import ClusterView
from webhook.deadline import REPORT_MARGIN, Deadline, wait_until
from webhook.kube import JOBSET_API_VERSION, ApiError, Permission
from webhook.models.context import heavy_turn
from webhook.models.dryrun_cache import TWIN_MEMO_SECONDS, DigestMemo, DryRunCache, TwinMemo, keyed, twin_key
from webhook.models.dryrun_probe import job_for, jobset_for, pod_for, twin_of
from webhook.results import CheckResult, Status
from webhook.workloads.admitted import Admission, kept_answer
from webhook.workloads.base import PodGroup, Workload
from webhook.workloads.render_cache import PerRender

#: how long a dry run asked again ahead of its outcome's expiry may take (a review's own calls are bounded by its deadline)
RENEW_SECONDS = 10.0
_RBAC_DENIED = re.compile(r"cannot create resource")
_WEBHOOK = re.compile(r'admission webhook "([^"]+)" denied the request')
#: words with which a policy says an owner is absent or unknown (next to "ownerReference")
_ABSENT = re.compile(r"not found|not exist|n't exist|must exist|unknown|\buid\b")


#: Kueue's words when the owner of a new JobSet, Job or Pod cannot be read (sigs.k8s.io/kueue v0.17.0
#: pkg/controller/jobframework/reconciler.go ErrWorkloadOwnerNotFound, from FindAncestorJobManagedByKueue)
KUEUE_OWNER_NOT_FOUND = "workload owner not found"
#: a twin's rejection that speaks of owners may be about the flag the twin lacks (words outside
#: quotes: the apiserver quotes names, and a pod of AIPerf's "controller" group is named so)
_OWNER_WORDS = re.compile(r"\bowner|\bcontroller\b", re.I)
_QUOTED = re.compile(r'"[^"\n]*"|\'[^\'\n]*\'')


def speaks_of_owners(text: str, names: Iterable[str] = ()) -> bool:
    """Whether a rejection's own words speak of owners or controllers: not the names it quotes, nor
    ``names`` (the object's own names, which a policy engine may write unquoted: Kyverno v1.19.1's
    `resource Pod/<ns>/<name> was blocked due to the following policies`, pkg/webhooks/utils/block.go)."""
    text = _QUOTED.sub("", text)
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        text = text.replace(name, "")
    return _OWNER_WORDS.search(text) is not None


def owner_refused(text: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference of ``body`` that a rejection refuses because that owner does not exist
    yet (or its uid is a placeholder), else None. Kueue's "workload owner not found" (its webhooks
    look the controller owner up), `<Kind> "<owner>" not found` (`jobs.batch "x" not found`,
    `trainjobs.trainer.kubeflow.org "x" not found`), the owner's placeholder uid, an ownerReference
    said to be absent or unknown, or `blockOwnerDeletion`. A policy that wants an ownerReference
    the probe has not ("pods need a ReplicaSet ownerReference") is about the job: None."""
    meta = body.get("metadata") or {}
    owners = [o for o in meta.get("ownerReferences") or [] if isinstance(o, dict)]
    lowered = text.lower()
    for o in owners:
        kind_of, name_of = str(o.get("kind")), str(o.get("name"))
        if (
            "blockownerdeletion" in lowered
            or str(o.get("uid")) in text
            or ("ownerreference" in lowered and _ABSENT.search(lowered))
            or re.search(rf'\b{re.escape(kind_of)}s?(\.[\w.-]+)?\s+"{re.escape(name_of)}"\s+not found', text, re.I)
            or (KUEUE_OWNER_NOT_FOUND in lowered and o.get("controller") is True)
        ):
            return o
    return None


def probe_only(text: str, status: int, kind: str, body: dict[str, Any]) -> str | None:
    """Why a rejection concerns only the probe object, not what the controllers will create
    (None when it concerns the job). The probe differs from the real object only in its owners,
    which do not exist yet, their placeholder uids, and its name: a refusal of its owner
    (`owner_refused`), or a 409 for the Pod's or the Job's name (a job judged again after it was
    stored, by the audit controller: its JobSet, suspended, already made its Jobs)."""
    o = owner_refused(text, body)
    if o is not None:
        return f'its ownerReference to {o.get("kind")} "{o.get("name")}", which exists only once the job runs'
    if kind in ("Pod", "Job") and status == 409:
        return f'its name "{(body.get("metadata") or {}).get("name")}" is taken'
    return None


def _limit_range_words(text: str) -> bool:
    """LimitRanger's "maximum cpu usage per Container is 2, but limit is 4" (plugin/pkg/admission/limitranger),
    found line by line with `in`: the regex `(maximum|minimum) .* usage per (Container|Pod)` it replaces
    rescanned the rest of a line from every "maximum " (2.4 s on a 100 KB message; bench/fuzz_parsers.py)."""
    for line in text.splitlines():
        tail = max(line.rfind(" usage per Container"), line.rfind(" usage per Pod"))
        if tail > 0 and any(0 <= line.find(word) <= tail - len(word) for word in ("maximum ", "minimum ")):
            return True
    return False


def fix_for(text: str, ns: str) -> str:
    """The likely fix for a rejection, from the apiserver's own words."""
    if "violates PodSecurity" in text:
        return (
            f'make the pod spec meet the Pod Security level of namespace "{ns}" (label pod-security.kubernetes.io/enforce), '
            "or ask an admin to relax it"
        )
    if "LimitRange" in text or _limit_range_words(text):
        return f'keep the containers\' resources within the LimitRange of namespace "{ns}" (kubectl describe limitrange -n {ns})'
    if "exceeded quota" in text or "failed quota" in text:
        return f"see Resource Quotas (kubectl describe resourcequota -n {ns})"
    if "serviceaccount" in text.lower() and "not found" in text:
        return "create the ServiceAccount (see Service Account)"
    m = _WEBHOOK.search(text)
    if m:
        return f'satisfy the policy of admission webhook "{m.group(1)}", or ask its owner for an exception'
    if "ValidatingAdmissionPolicy" in text:
        return "satisfy the ValidatingAdmissionPolicy named in the message"
    return "correct the spec as the message says"


#: one cache per cluster view (a view is one cluster; a test's fake view starts empty)
_CACHES: weakref.WeakKeyDictionary[Any, DryRunCache] = weakref.WeakKeyDictionary()
#: one twin memo per cluster view (webhook.models.dryrun_cache.TwinMemo)
_MEMOS: weakref.WeakKeyDictionary[Any, TwinMemo] = weakref.WeakKeyDictionary()

_Kept = TypeVar("_Kept", DryRunCache, TwinMemo)


def _per_view(table: weakref.WeakKeyDictionary[Any, _Kept], view: ClusterView, ttl: float, make: type[_Kept]) -> _Kept:
    """The view's entry of ``table``, made anew when its ttl changed (a fresh, unshared one if the view
    cannot be weakly referenced)."""
    try:
        kept = table.get(view)
        if kept is None or kept.ttl != ttl:
            kept = table[view] = make(ttl)
        return kept
    except TypeError:
        return make(ttl)


def cache_for(view: ClusterView, ttl: float) -> DryRunCache:
    """The view's dry-run cache."""
    return _per_view(_CACHES, view, ttl, DryRunCache)


def memo_for(view: ClusterView, cache_seconds: float) -> TwinMemo:
    """The view's twin memo: TWIN_MEMO_SECONDS, or nothing remembered when ``dryRunCacheSeconds``
    is 0 (every review then asks the apiserver everything anew)."""
    return _per_view(_MEMOS, view, TWIN_MEMO_SECONDS if cache_seconds > 0 else 0.0, TwinMemo)


def _rv(obj: dict[str, Any] | None) -> str:
    meta = (obj or {}).get("metadata") or {}
    return str(meta.get("resourceVersion") or meta.get("uid") or "") if obj is not None else "-"


def read_versions(view: ClusterView, ns: str, bodies: list[dict[str, Any]]) -> Iterator[tuple[str, ...]]:
    """(resource, name, resourceVersion) of the watched objects the apiserver's admission of
    ``bodies`` reads: the namespace (Pod Security labels, existence), its ResourceQuotas and
    LimitRanges, and every ServiceAccount and PriorityClass a pod names. "-" = absent."""
    yield ("namespaces", ns, _rv(view.get_cached("namespaces", None, ns)))
    for resource in ("resourcequotas", "limitranges"):
        for o in view.list_cached(resource, ns):
            yield (resource, str((o.get("metadata") or {}).get("name")), _rv(o))
    sas: set[str] = set()
    classes: set[str] = set()
    for body in bodies:
        for spec in _pod_specs(body):
            sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
            sas.add(str(sa))
            if isinstance(spec.get("priorityClassName"), str):
                classes.add(spec["priorityClassName"])
    for sa in sorted(sas):
        yield ("serviceaccounts", sa, _rv(view.get_cached("serviceaccounts", ns, sa)))
    if classes:
        by_name = {str((o.get("metadata") or {}).get("name")): o for o in view.list_cached("priorityclasses")}
        for c in sorted(classes):
            yield ("priorityclasses", c, _rv(by_name.get(c)))


def _pod_specs(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if body.get("kind") == "Pod":
        spec = body.get("spec")
        if isinstance(spec, dict):
            yield spec
        return
    if body.get("kind") == "Job":
        spec = (((body.get("spec") or {}).get("template") or {}).get("spec")) or None
        if isinstance(spec, dict):
            yield spec
        return
    for r in (body.get("spec") or {}).get("replicatedJobs") or []:
        spec = (((r.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")
        if isinstance(spec, dict):
            yield spec


def _subject(kind: str, name: str, groups: list[str] | None) -> str:
    """`JobSet "x"`, `Pod for node`, `Job for node`, or `Pod for a and b (same pod template)`."""
    if groups is None:
        return f'{kind} "{name}"'
    if len(groups) == 1:
        return f"{kind} for {groups[0]}"
    return f"{kind} for {', '.join(groups[:-1])} and {groups[-1]} (same {'pod' if kind == 'Pod' else kind} template)"


def _template_of(owner: Workload, group: PodGroup) -> tuple[Any, ...]:
    """What `pod_for` makes a group's Pod from, apart from the group's name and Job count: its
    replicatedJob's Job template and groupName, else (no such replicatedJob) its pod spec and metadata."""
    js = owner.derived.get("jobSet") or {}
    for r in (js.get("spec") or {}).get("replicatedJobs") or []:
        if isinstance(r, dict) and r.get("name") == group.name:
            return ("replicatedJob", r.get("groupName"), r.get("template"))
    return ("group", group.pod_spec, group.pod_metadata)


def _same_content(a: Any, b: Any) -> bool:
    """Equal as JSON (Python's == alone also equates 1, 1.0 and true)."""
    return a is b or (a == b and json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True))


def same_template(
    owned: list[tuple[PodGroup, Workload, PodGroup]],
) -> list[list[tuple[PodGroup, Workload, PodGroup]]]:
    """The (group, owner, owner's group) triples in sets whose Pods differ only in what names a
    group (its name in the pod's names and JobSet labels, its Job count): pod groups of one
    JobSet with the same Job template. One Pod is dry-run per set; sets keep the groups' order."""
    sets: list[tuple[int, tuple[Any, ...], list[tuple[PodGroup, Workload, PodGroup]]]] = []
    for triple in owned:
        _, owner, own_group = triple
        template = _template_of(owner, own_group)
        for owner_id, other, members in sets:
            if owner_id == id(owner) and _same_content(template, other):
                members.append(triple)
                break
        else:
            sets.append((id(owner), template, [triple]))
    return [members for _, _, members in sets]


#: the probes' body digests by render (DigestMemo), for every view: a digest does not depend on the cluster
DIGESTS = DigestMemo()


def _uid(job: Workload) -> str | None:
    """The job's metadata.uid: the apiserver's for the judged job, the stand-in of a sweep child
    (AIPerfSweep children are rendered with `placeholder_uid`); the key treats it as "this job"."""
    uid = (job.obj.get("metadata") or {}).get("uid")
    return uid if isinstance(uid, str) else None


class DryRun(Check):
    name = "Dry Run"
    needs_cluster = True
    heavy = True  # its bodies are the pod specs: started after the cheap checks have answered (engine)
    admits = True  # sets CheckContext.admission: the engine judges the pods as admitted (engine.judge_admitted)
    # a render seen before, its probes, digests and outcomes kept, is answered without a task; anything heavy
    # (building, hashing, sending) comes after a heavy_turn, which ends a kept-only run
    kept_reads = True
    local_capacity = True
    permissions = (
        Permission("create", "jobsets", "jobset.x-k8s.io"),
        Permission("create", "jobs", "batch"),
        Permission("create", "pods"),
    )
    apis = ("v1", "batch/v1", JOBSET_API_VERSION)
    unverified = (
        (
            "owner-controller-flag",
            "a rule on the controller flag of a JobSet's or Pod's ownerReference, on a cluster whose webhooks look the "
            "owner up (Kueue's mjobset.kb.io and mpod.kb.io): the dry-run object's owner does not exist yet, so the "
            "layers after such a webhook judge its twin without that flag",
        ),
        (
            "owner-state",
            "a rule that reads the job's, the JobSet's or the Job's stored state (the owners of the dry-run objects): "
            "they do not exist before the job is stored",
        ),
    )
    summary = (
        "The JobSet and, per distinct pod template, the first Pod as the Job controller creates it pass the apiserver's "
        "admission with dryRun=All (schema, Pod Security, LimitRange, quota, other webhooks and policies)."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        """Steps: build (`_plan`: the probes) → dispatch (`_dry_run`: each probe, then the twins of those refused
        for their owner) → classify (`_classify`: each probe's outcome) → message (`_message`)."""
        assert ctx.view is not None
        if not plan_kept(ctx.workload):
            await heavy_turn(ctx)  # building the probes is in proportion to the pod specs
        plan = plan_of(ctx.workload)
        if not plan.probes:
            return CheckResult(self.name, Status.SKIP, "Nothing to dry-run: the job derives no JobSet and no pods")
        sent = await _dry_run(ctx, ctx.view, plan)
        ctx.admission = _admission(plan.probes, sent)
        found = _Findings()
        for i, probe in enumerate(plan.probes):
            _classify(probe, i, sent, ctx.workload.namespace, found)
        return self._message(found)

    def _message(self, found: _Findings) -> CheckResult | list[CheckResult]:
        """FAIL with the rejections and WARN with what could not be verified, else PASS naming what was accepted."""
        out: list[CheckResult] = []
        if found.fails:
            out.append(CheckResult(self.name, Status.FAIL, " ".join(found.fails), details=found.fails))
        if found.unknown:  # reported next to the rejections, never instead of them
            out.append(CheckResult(self.name, Status.WARN, "; ".join(found.unknown), details=found.unknown))
        if out:
            return out
        objects = [a for a in found.accepted if a.startswith("JobSet")]
        names = [a for a in found.accepted if not a.startswith("JobSet")]
        job_groups = found.job_groups
        parts = objects + ([f"a Job of each replicatedJob ({', '.join(job_groups)})"] if job_groups else [])
        parts += [f"a pod of each group ({', '.join(names)})"] if names else []
        said = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
        return CheckResult(self.name, Status.PASS, f"The apiserver accepts (dryRun=All) {said}", details=found.twinned)


@dataclass(frozen=True)
class _Probe:
    """One object to dry-run: a JobSet the job becomes, or the Pod or Job of a set of pod groups."""

    api_version: str
    kind: str
    name: str
    #: the pod groups a Pod or Job stands for (None for a JobSet)
    groups: list[str] | None
    body: dict[str, Any]
    #: the uid of the job that owns it: the judged job, or the sweep child whose objects these are
    uid: str | None


@dataclass(frozen=True)
class _Plan:
    """The probes of one review (the JobSets, then the Pods, then the Jobs) and the render they come from."""

    probes: list[_Probe]
    #: the job's render when every probe is the job's own (a sweep child's probes: None)
    render_id: int | None

    def memo_keys(self, ns: str) -> list[tuple[Any, ...] | None]:
        """Each probe's DigestMemo key (without the twin flag); None: its digest is hashed each time."""
        rid = self.render_id
        return [
            None if rid is None else (rid, ns, p.kind, p.name, None if p.groups is None else tuple(p.groups))
            for p in self.probes
        ]


#: the plans kept (`plan_of`), the least recently used dropped first: an AIPerfJob's five probes are ~100 KB
PLAN_ENTRIES = 64
_PLANS: PerRender[_Plan] = PerRender(PLAN_ENTRIES, keep=lambda plan: plan.render_id is not None)


def plan_kept(wl: Workload) -> bool:
    """Whether `plan_of` answers from what it kept (nothing to build)."""
    return wl in _PLANS


def plan_of(wl: Workload) -> _Plan:
    """`_plan(wl)`, kept by the render (Workload.render_id) when every probe is the job's own: building an
    AIPerfJob's JobSet, two Pods and two Jobs cost 0.28 ms of CPU a review, as much as the rest of the Dry Run
    (issue 38, docs/benchmarks/vs-kyverno.md). The probes are a function of the render alone but for the job's
    own uid, which the apiserver draws anew for every create and the AIPerf operator copies into an env var:
    the kept probes carry the first create's, and everything that reads them treats that uid as "this job"
    (`body_digest`'s own_uid, which the probe's `uid` keeps equal to the uid its body holds), as the Dry Run
    cache already does for the outcomes it keeps. A sweep child's probes (render_id None) are built each time."""
    return _PLANS.get(wl, _plan)


def _plan(wl: Workload) -> _Plan:
    """The JobSet of the job and of each sweep child that creates pods, then per set of groups with the same pod
    template (same_template) the Pod of the group with the longest name, then the Jobs of those groups."""
    # who creates each group's pods: the job itself, or (AIPerfSweep) the child whose JobSet does
    source = getattr(wl, "group_source", None)
    owned = [(g, *(source(g) if source else (wl, g))) for g in wl.pod_groups]
    owners = list({id(o): o for o in [wl, *(o for _, o, _ in owned)]}.values())
    probes: list[_Probe] = []
    for owner in owners:
        js = jobset_for(owner)
        if js is not None:
            probes.append(
                _Probe(js["apiVersion"], "JobSet", js["metadata"].get("name", owner.name), None, js, _uid(owner))
            )
    jobs: list[_Probe] = []
    for members in same_template(owned):
        # the longest group name makes the longest pod, Job and label names: the one a length rule rejects
        _, owner, own_group = max(members, key=lambda m: len(m[2].name))
        pod = pod_for(owner, own_group)
        probes.append(_Probe("v1", "Pod", pod["metadata"]["name"], [g.name for g, _, _ in members], pod, _uid(owner)))
        job = job_for(owner, own_group)
        if job is not None:
            jobs.append(
                _Probe("batch/v1", "Job", job["metadata"]["name"], [g.name for g, _, _ in members], job, _uid(owner))
            )
    # the probes of a cached render of the job itself are the same for every review of it: their
    # digests are memoized by (render, probe) (DigestMemo); a sweep child's are hashed each time
    return _Plan(probes + jobs, wl.render_id if all(o is wl for o in owners) else None)


@dataclass
class _Sent:
    """What each probe was sent as and what came back, by probe index (an index missing from an outcome
    map: its dry run timed out; an outcome None: accepted)."""

    #: the probes this namespace's webhooks refused for their owner a moment ago (TwinMemo): sent as their
    #: twin at once, the remembered refusal standing for the first answer
    remembered: dict[int, ApiError]
    #: the twin's body of each probe sent as its twin (remembered, or refused for its owner)
    twins: dict[int, dict[str, Any]]
    outcomes: dict[int, BaseException | None] = field(default_factory=dict)
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)
    twin_outcomes: dict[int, BaseException | None] = field(default_factory=dict)
    twin_answers: dict[int, dict[str, Any]] = field(default_factory=dict)


async def _dry_run(ctx: CheckContext, view: ClusterView, plan: _Plan) -> _Sent:
    """Every probe dry-run, concurrently (as its twin at once when its refusal is remembered), then the
    twins of the probes a webhook refused for their owner (`_twin_the_refused`)."""
    ns = ctx.workload.namespace
    cache = cache_for(view, ctx.settings.dry_run_cache_seconds)
    # a probe that this namespace's webhooks refused for its owner a moment ago goes as its twin
    # at once (TwinMemo): the remembered refusal stands for the first answer
    memo = memo_for(view, ctx.settings.dry_run_cache_seconds)
    keys = [twin_key(ns, p.kind, p.body) for p in plan.probes]
    remembered = {i: r for i, k in enumerate(keys) if (r := memo.get(k)) is not None}
    sent = _Sent(remembered, {i: twin_of(plan.probes[i].body) for i in remembered})
    memo_keys = plan.memo_keys(ns)
    first = [
        (p.api_version, p.kind, sent.twins.get(i, p.body), p.uid, _twin_memo(memo_keys[i], i in sent.twins))
        for i, p in enumerate(plan.probes)
    ]
    outcomes = await _dry_run_all(view, cache, ns, first, ctx, sent.answers)
    sent.twin_answers.update((i, sent.answers.pop(i)) for i in remembered if i in sent.answers)
    sent.twin_outcomes.update((i, outcomes.pop(i)) for i in remembered if i in outcomes)
    outcomes.update(remembered)
    sent.outcomes = outcomes
    _twin_the_refused(plan.probes, sent, memo, keys)
    order = [i for i in sent.twins if i not in remembered]
    if order:
        got_answers: dict[int, dict[str, Any]] = {}
        twins = [(plan.probes[i], sent.twins[i], _twin_memo(memo_keys[i], True)) for i in order]
        got = await _dry_run_all(
            view, cache, ns, [(p.api_version, p.kind, twin, p.uid, key) for p, twin, key in twins], ctx, got_answers
        )
        sent.twin_outcomes.update((order[j], exc) for j, exc in got.items())
        sent.twin_answers.update((order[j], a) for j, a in got_answers.items())
    return sent


def _twin_the_refused(
    probes: list[_Probe], sent: _Sent, memo: TwinMemo, keys: list[tuple[str, str, str, str] | None]
) -> None:
    """The probes a webhook refused for an owner that exists only once the job is stored get their twin (no
    controller flag, so no owner lookup: judged by that webhook and every later layer), and the refusal is
    remembered (TwinMemo); a probe accepted with its controller flag is forgotten."""
    for i, probe in enumerate(probes):
        if i in sent.remembered:
            continue
        exc = sent.outcomes.get(i)
        if i in sent.outcomes and exc is None:
            memo.forget(keys[i])  # accepted with its controller flag: no owner lookup refuses it
        body = probe.body
        if (
            isinstance(exc, ApiError)
            and not exc.transient
            and not (exc.status == 409 and probe.kind == "JobSet")
            and not (exc.forbidden and _RBAC_DENIED.search(exc.message))
            and owner_refused(exc.message, body) is not None
            and any(isinstance(o, dict) and o.get("controller") for o in body["metadata"].get("ownerReferences") or [])
        ):
            sent.twins[i] = twin_of(body)
            memo.remember(keys[i], exc)


@dataclass
class _Findings:
    """What the probes' outcomes say, in the probes' order."""

    #: the rejections (FAIL)
    fails: list[str] = field(default_factory=list)
    #: what could not be verified (WARN, next to the rejections, never instead of them)
    unknown: list[str] = field(default_factory=list)
    #: the JobSets and the pod groups whose Pod was accepted
    accepted: list[str] = field(default_factory=list)
    #: the pod groups whose Job was accepted
    job_groups: list[str] = field(default_factory=list)
    #: the probes accepted as their twin (the PASS's details)
    twinned: list[str] = field(default_factory=list)

    def accept(self, probe: _Probe, subject: str) -> None:
        """The probe was accepted: its JobSet or its groups."""
        (self.job_groups if probe.kind == "Job" else self.accepted).extend(
            [subject] if probe.groups is None else probe.groups
        )


def _classify(probe: _Probe, i: int, sent: _Sent, ns: str, found: _Findings) -> None:
    """The finding on one probe: from its twin's outcome when it was sent as its twin, else from its own."""
    subject = _subject(probe.kind, probe.name, probe.groups)
    if i in sent.twins:
        if _settled_by_twin(probe, i, sent, subject, found):
            return
        exc, body = sent.twin_outcomes[i], sent.twins[i]
    elif i not in sent.outcomes:
        found.unknown.append(f"Could not dry-run the {subject} (timed out)")
        return
    else:
        exc, body = sent.outcomes[i], probe.body
    _judge(probe, subject, exc, body, ns, found)


def _settled_by_twin(probe: _Probe, i: int, sent: _Sent, subject: str, found: _Findings) -> bool:
    """The finding on a probe sent as its twin when the twin timed out, was accepted or was refused in
    words about owners (the flag it lacks); False: the twin's rejection is judged as the probe's."""
    first = sent.outcomes[i]
    assert isinstance(first, ApiError)
    who = _refuser(first.message)
    if i not in sent.twin_outcomes:
        found.unknown.append(f"Could not dry-run the {subject} without the owner lookup of {who} (timed out)")
        return True
    exc = sent.twin_outcomes[i]
    if exc is None:
        found.accept(probe, subject)
        found.twinned.append(
            f"{subject}: {who} looks up its owner, which exists only once the job runs; every later "
            "admission layer accepts its twin without the controller flag of its ownerReference"
        )
        return True
    if (
        isinstance(exc, ApiError)
        and not exc.transient
        and probe_only(exc.message, exc.status, probe.kind, sent.twins[i]) is None
        and speaks_of_owners(exc.message, _names_of(sent.twins[i]))
    ):
        text = exc.message.strip().rstrip(".")
        found.unknown.append(
            f"Cannot verify the {subject}: {who} looks up its owner, which exists only once the job runs, "
            f"and its twin without the controller flag of its ownerReference is refused: {text}"
        )
        return True
    return False


def _judge(
    probe: _Probe, subject: str, exc: BaseException | None, body: dict[str, Any], ns: str, found: _Findings
) -> None:
    """The finding on a dry run's outcome (of `body`: the probe or its twin): accepted, a rejection, or
    not verified (an error, a timeout, no permission, a rejection that concerns only the probe)."""
    kind = probe.kind
    if exc is None:
        found.accept(probe, subject)
    elif not isinstance(exc, ApiError):
        found.unknown.append(f"Could not dry-run the {subject}: {exc or type(exc).__name__}")
    elif exc.transient:
        found.unknown.append(f"Could not dry-run the {subject} (transient error): {exc.message}")
    elif exc.forbidden and _RBAC_DENIED.search(exc.message):
        found.unknown.append(f"Cannot verify the {subject} (not permitted to create {kind.lower()}s with dryRun)")
    elif exc.status == 409 and kind == "JobSet":
        found.accepted.append(f"{subject} (already exists)")
    elif (why := probe_only(exc.message, exc.status, kind, body)) is not None:
        text = exc.message.strip().rstrip(".")
        found.unknown.append(
            f"Cannot verify the {subject}: the rejection concerns only the dry-run probe ({why}): {text}"
        )
    else:
        text = exc.message.strip().rstrip(".")
        # what the layers before the refusal said (a mutating webhook naming itself, e.g. Kyverno's
        # emitWarning): the pod refused is the pod as they changed it (docs/mutations.md)
        said = f" The dry run warned: {'; '.join(_quoted(w) for w in exc.warnings)}." if exc.warnings else ""
        found.fails.append(f"{subject} rejected by the apiserver: {text}.{said} Fix: {fix_for(text, ns)}.")


def _admission(probes: list[_Probe], sent: _Sent) -> Admission:
    """The pod groups as admitted (for the engine, CheckContext.admission): each accepted Pod probe's answer
    (its twin's, when it was sent as its twin), and why the others were not seen."""
    pods: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    seen: list[str] = []
    unseen: list[str] = []
    for i, probe in enumerate(probes):
        groups = probe.groups
        if probe.kind != "Pod" or groups is None:
            continue
        done, answer, body = (
            (sent.twin_outcomes, sent.twin_answers.get(i), sent.twins[i])
            if i in sent.twins
            else (sent.outcomes, sent.answers.get(i), probe.body)
        )
        if i not in done:
            unseen.append(f"the {' and '.join(groups)} pods (their dry run timed out)")
            continue
        if done[i] is not None:
            unseen.append(f"the {' and '.join(groups)} pods (their dry run was not accepted)")
            continue
        seen.extend(groups)
        if answer is not None:
            pods.update((g, (body, answer)) for g in groups)
    return Admission(pods, seen, unseen)


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _twin_memo(memo_key: tuple[Any, ...] | None, twin: bool) -> tuple[Any, ...] | None:
    """The digest memo key of a probe sent as itself or as its twin."""
    return None if memo_key is None else (*memo_key, twin)


def _names_of(body: dict[str, Any]) -> list[str]:
    """The object's name and namespace and its owners' names: what a rejection may name unquoted."""
    meta = body.get("metadata") or {}
    owners = [o.get("name") for o in meta.get("ownerReferences") or [] if isinstance(o, dict)]
    return [str(n) for n in (meta.get("name"), meta.get("namespace"), *owners) if isinstance(n, str)]


def _refuser(text: str) -> str:
    """`admission webhook "mpod.kb.io"`, or "the apiserver" when the words name no webhook."""
    m = _WEBHOOK.search(text)
    return f'admission webhook "{m.group(1)}"' if m else "the apiserver"


@dataclass
class _Asker:
    """One review's dry runs of its objects in `ns`: within the review's deadline, or asked again in the
    background ahead of a kept outcome's expiry."""

    view: ClusterView
    ns: str
    ctx: CheckContext

    async def _ask(self, av: str, kind: str, body: dict[str, Any], deadline: Deadline) -> dict[str, Any] | None:
        return kept_answer(kind, body, await self.view.dry_run_create(av, kind, self.ns, body, deadline))

    def now(self, av: str, kind: str, body: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
        """The dry run this review waits for (the cache shares it with the reviews of the same content)."""
        return lambda: self._ask(av, kind, body, self.ctx.deadline)

    def renewal(self, av: str, kind: str, body: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
        """The same dry run asked again ahead of the kept outcome's expiry: it sends a body too, so it first waits
        for the turn a heavy part waits for, then goes on a deadline of its own (no review waits for it:
        webhook/models/dryrun_cache.py)."""
        turn = self.ctx.heavy_turn

        async def again() -> dict[str, Any] | None:
            if turn is not None:
                await turn()
            return await self._ask(av, kind, body, Deadline(RENEW_SECONDS))

        return again


async def _dry_run_all(
    view: ClusterView,
    cache: DryRunCache,
    ns: str,
    sent: list[tuple[str, str, dict[str, Any], str | None, tuple[Any, ...] | None]],
    ctx: CheckContext,
    answers: dict[int, dict[str, Any]] | None = None,
) -> dict[int, BaseException | None]:
    """The outcome of each (apiVersion, kind, body, owner uid, digest memo key) by index: None =
    accepted; an index missing = timed out. Kept outcomes are read at once; the others are asked
    concurrently. `answers`: filled with each accepted Pod that admission changed, as admitted
    (webhook.workloads.admitted.kept_answer), by index."""
    asker = _Asker(view, ns, ctx)
    outcomes: dict[int, BaseException | None] = {}
    tasks: dict[asyncio.Future[Any], int] = {}
    for i, (av, kind, body, own_uid, memo_key) in enumerate(sent):
        # what this object's admission reads, not the others': the same child's objects from
        # its sweep's review and from its own have the same key
        hashed = not DIGESTS.memoized(memo_key, own_uid)
        if hashed:
            await heavy_turn(ctx)  # hashing the body is in proportion to the pod spec
        key = keyed(DIGESTS.digest(memo_key, kind, ns, body, own_uid), read_versions(view, ns, [body]))
        kept = cache.settled_answer(key, asker.renewal(av, kind, body))
        if kept is not None:
            outcomes[i] = kept[0]
            if kept[1] is not None and answers is not None:
                answers[i] = kept[1]
        else:
            await heavy_turn(ctx)  # sending the body: serialized on this loop
            tasks[asyncio.ensure_future(cache.run(key, asker.now(av, kind, body)))] = i
        if hashed:
            # a digest of a large pod spec costs tens of milliseconds: the loop gets a turn between two
            # (the other reviews' reads are answered meanwhile); one from the memo costs nothing, and a
            # turn would only queue this review behind every other ready one (6.5 ms a review of the
            # sample AIPerfJob's five probes at 8 clients, docs/benchmarks/vs-kyverno.md)
            await asyncio.sleep(0)
    if tasks:
        pending = await wait_until(ctx.deadline, tasks.keys(), margin=REPORT_MARGIN)
        outcomes.update((i, t.exception()) for t, i in tasks.items() if t not in pending)
        if answers is not None:
            answers.update(
                (i, t.result())
                for t, i in tasks.items()
                if t not in pending and t.exception() is None and t.result() is not None
            )
    return outcomes


CHECKS = [DryRun()]
