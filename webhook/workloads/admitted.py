"""The pods as admission creates them: what the apiserver's mutating layers changed, and the Workload
whose pod groups are those pods.

The Dry Run check POSTs one representative Pod per distinct pod template with dryRun=All; the
apiserver answers with the object after every mutating layer (k8s.io/apiserver
pkg/endpoints/handlers/create.go: mutating admission, then the registry's Create with its strategy's
defaults; nothing is stored). `changes` compares what was sent with that answer and keeps what can
move a verdict: containers added or removed, images rewritten, resources filled, env, volumes and
mounts added, nodeSelector, affinity, tolerations, imagePullSecrets and other pod fields set, labels
and annotations added. It leaves out what every pod gets from the apiserver itself and no check
judges: the v1 defaults (pkg/apis/core/v1/defaults.go: dnsPolicy, restartPolicy,
terminationGracePeriodSeconds, schedulerName, enableServiceLinks, an empty securityContext, requests
defaulted to limits), the ServiceAccount plugin's token volume `kube-api-access-*` and its mounts
(plugin/pkg/admission/serviceaccount/admission.go), DefaultTolerationSeconds' not-ready/unreachable
tolerations (plugin/pkg/admission/defaulttolerationseconds), and Priority's `priority` and
`preemptionPolicy` (plugin/pkg/admission/priority). It leaves out, too, the label JobSet's own pod
webhook puts on every JobSet pod: `jobset.sigs.k8s.io/priority=<spec.priority>` (jobset v0.12.0
pkg/webhooks/pod_webhook.go Default, for exclusive placement; pkg/constants/constants.go PriorityKey),
when its value is the pod's admitted priority: the job's own stack sets it, on the real pods too.

Who made a change: the apiserver does not say in the answer. Its field manager records the fields
of the request under the request's manager *before* mutating admission runs (create.go:
`scope.FieldManager.UpdateNoErrors(...)` then `mutatingAdmission.Admit`), and a
MutatingAdmissionPolicy's patches are applied to the object without a manager of their own
(staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/mutating/dispatcher.go dispatchOne:
`versionedAttributes.UpdateObject`; fieldmanager/admission.go only resets managedFields that
admission left invalid). The `mutated` annotations of mutating webhooks go to the audit log only.
So a change is named "set by admission", except a resource equal to the default of the namespace's
LimitRange (LimitRanger, plugin/pkg/admission/limitranger), named by that LimitRange.

What the answer does carry is the `Warning` headers: each warning a mutating webhook returns
(staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go: `warning.AddWarning(ctx,
"", w)`, without the webhook's name) and a ValidatingAdmissionPolicy's `Warn`. A layer that names itself
there is named: Kyverno with `emitWarning: true` says `policy <policy>.<rule>: mutated Pod/<name> in
namespace <ns>` for each mutate rule it applied (kyverno pkg/webhooks/utils/warning.go). The same headers
carry the apiserver's own warnings on the pod (pkg/api/pod/warnings.go, e.g. a duplicate port name), so
they are said to be what the dry run warned, not what a mutating layer said. The warnings of
a changed pod are listed after its changes, as they were said (`the dry run warned: "..."`); they are
not tied to one change, since a warning need not say what it changed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.kube import WARNINGS_KEY
from webhook.objects import ObjectMeta, PodSpec, as_pod_spec
from webhook.quantity import parse_quantity
from webhook.workloads.base import PodGroup, Workload

#: the ServiceAccount admission plugin's projected token volume (and its mounts): `kube-api-access-<5>`
SA_TOKEN_VOLUME = "kube-api-access-"
#: DefaultTolerationSeconds' tolerations (operator Exists, effect NoExecute, 300 s by default)
DEFAULT_TOLERATION_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
#: pod spec fields the apiserver defaults on every pod (v1 defaults, Priority admission, the ServiceAccount
#: plugin): (field, its default or None for any value). A field set to its default is no mutation.
POD_DEFAULTS: dict[str, Any] = {
    "dnsPolicy": "ClusterFirst",
    "restartPolicy": "Always",
    "terminationGracePeriodSeconds": 30,
    "schedulerName": "default-scheduler",
    "enableServiceLinks": True,
    "securityContext": {},
    "serviceAccountName": "default",
    "serviceAccount": "default",
    "priority": None,
    "preemptionPolicy": None,
}
#: JobSet's pod webhook records the pod's priority under this label on every JobSet pod (see the docstring)
JOBSET_PRIORITY_LABEL = "jobset.sigs.k8s.io/priority"
#: the annotation JobSet's pod webhook reads to know a pod is a JobSet's (jobset.JobSetNameKey)
JOBSET_NAME_KEY = "jobset.sigs.k8s.io/jobset-name"
#: pod spec fields compared one by one below (not as a whole)
_WALKED = {"containers", "initContainers", "volumes", "tolerations", "nodeSelector", "imagePullSecrets", "hostname"}
#: the text said of a change whose layer the apiserver does not report
BY_ADMISSION = "admission"


@dataclass(frozen=True)
class Change:
    """One thing admission changed in a pod: its field path, what users read, and who set it."""

    #: the field, e.g. `spec.containers[main].resources.limits.cpu`
    path: str
    #: e.g. `limits.cpu 500m on container "main"`, `container "istio-proxy" added (requests cpu 100m)`
    text: str
    #: `admission` or `LimitRange "defaults"`; empty for what admission said rather than changed (its warnings)
    by: str = BY_ADMISSION

    def said(self) -> str:
        """`limits.cpu 500m on container "main", set by admission`."""
        return f"{self.text}, set by {self.by}" if self.by else self.text


#: the path of the Change that carries a dry run's warnings
WARNED = "warnings"


def warned(answer: Mapping[str, Any]) -> list[Change]:
    """The admission layers' warnings on a dry run's answer (webhook.kube.WARNINGS_KEY), as one Change:
    `the dry run warned: "policy add-sidecar.proxy: mutated Pod/x in namespace y"`; none when it has none."""
    said = [w for w in answer.get(WARNINGS_KEY) or () if isinstance(w, str)]
    if not said:
        return []
    return [Change(WARNED, "the dry run warned: " + "; ".join(json.dumps(w, ensure_ascii=False) for w in said), "")]


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _same_quantity(a: Any, b: Any) -> bool:
    if a == b:
        return True
    try:
        return parse_quantity(a) == parse_quantity(b)
    except (ValueError, TypeError):
        return False


def _named(items: Any) -> dict[str, dict[str, Any]]:
    return {str(i.get("name")): i for i in items or [] if isinstance(i, dict)} if isinstance(items, list) else {}


def _resources_text(container: Mapping[str, Any]) -> str:
    res = container.get("resources") or {}
    parts = []
    for which in ("requests", "limits"):
        values = res.get(which) or {}
        if isinstance(values, dict) and values:
            parts.append(f"{which} " + ", ".join(f"{k} {v}" for k, v in sorted(values.items())))
    return f" ({'; '.join(parts)})" if parts else ""


def _limit_range_default(
    limit_ranges: Iterable[Mapping[str, Any]], which: str, resource: str, value: Any
) -> str | None:
    """The LimitRange whose Container default (limits) or defaultRequest (requests) is `value`, by name."""
    key = "default" if which == "limits" else "defaultRequest"
    for lr in limit_ranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            if isinstance(item, dict) and item.get("type") == "Container":
                d = (item.get(key) or {}).get(resource)
                if d is not None and _same_quantity(d, value):
                    return f'LimitRange "{(lr.get("metadata") or {}).get("name")}"'
    return None


def _default_toleration(t: Any) -> bool:
    return (
        isinstance(t, dict)
        and t.get("key") in DEFAULT_TOLERATION_KEYS
        and t.get("operator") == "Exists"
        and t.get("effect") == "NoExecute"
    )


def _toleration_text(t: Mapping[str, Any]) -> str:
    key = t.get("key") or "*"
    value = f"={t['value']}" if t.get("value") else ""
    effect = f":{t['effect']}" if t.get("effect") else ""
    return f"{key}{value}{effect}"


def _container_changes(
    kind: str, sent: Mapping[str, Any], got: Mapping[str, Any], limit_ranges: list[Mapping[str, Any]]
) -> list[Change]:
    out: list[Change] = []
    before, after = _named(sent.get(kind)), _named(got.get(kind))
    what = "init container" if kind == "initContainers" else "container"
    for name, c in after.items():
        at = f"spec.{kind}[{name}]"
        old = before.get(name)
        if old is None:
            out.append(Change(at, f'{what} "{name}" added{_resources_text(c)}'))
            continue
        if c.get("image") != old.get("image"):
            out.append(Change(f"{at}.image", f'image of {what} "{name}" rewritten to "{c.get("image")}"'))
        old_res, new_res = old.get("resources") or {}, c.get("resources") or {}
        for which in ("limits", "requests"):
            was, now = old_res.get(which) or {}, new_res.get(which) or {}
            for resource, value in sorted(now.items() if isinstance(now, dict) else []):
                prior = was.get(resource) if isinstance(was, dict) else None
                if prior is not None and _same_quantity(prior, value):
                    continue
                limits = new_res.get("limits")
                limit = limits.get(resource) if isinstance(limits, dict) else None
                if which == "requests" and prior is None and limit is not None and _same_quantity(limit, value):
                    # v1 defaults: requests default to limits (pkg/apis/core/v1/defaults.go), also to a limit a
                    # MutatingAdmissionPolicy set (dispatcher.go dispatchOne defaults the patched object)
                    continue
                by = _limit_range_default(limit_ranges, which, resource, value) if prior is None else None
                out.append(
                    Change(
                        f"{at}.resources.{which}.{resource}",
                        f'{which}.{resource} {value} on {what} "{name}"',
                        by or BY_ADMISSION,
                    )
                )
        for field, label in (("env", "env"), ("volumeMounts", "volumeMount")):
            was_named, now_named = _named(old.get(field)), _named(c.get(field))
            for n in now_named:
                if n not in was_named and not n.startswith(SA_TOKEN_VOLUME):
                    out.append(Change(f"{at}.{field}[{n}]", f'{label} "{n}" added to {what} "{name}"'))
        sc_old, sc_new = old.get("securityContext") or {}, c.get("securityContext") or {}
        if sc_new != sc_old:
            out.append(Change(f"{at}.securityContext", f'securityContext of {what} "{name}" set to {_short(sc_new)}'))
    for name in before:
        if name not in after:
            out.append(Change(f"spec.{kind}[{name}]", f'{what} "{name}" removed'))
    return out


def _jobset_priority(admitted: Mapping[str, Any]) -> dict[str, str]:
    """The label JobSet's pod webhook sets on `admitted` if it is a JobSet pod with a priority, else none."""
    meta = admitted.get("metadata") or {}
    priority = (admitted.get("spec") or {}).get("priority")
    if JOBSET_NAME_KEY not in (meta.get("annotations") or {}) or not isinstance(priority, int):
        return {}
    return {JOBSET_PRIORITY_LABEL: str(priority)}


def changes(
    sent: Mapping[str, Any], admitted: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()
) -> list[Change]:
    """What admission changed in a Pod: `sent` is the dry-run body, `admitted` the apiserver's answer.
    `limit_ranges`: the namespace's LimitRanges, to name LimitRanger's defaults."""
    lrs = list(limit_ranges)
    out: list[Change] = []
    s_meta, a_meta = sent.get("metadata") or {}, admitted.get("metadata") or {}
    stack_own = _jobset_priority(admitted)
    for field, label in (("labels", "label"), ("annotations", "annotation")):
        was, now = s_meta.get(field) or {}, a_meta.get(field) or {}
        for k, v in sorted(now.items()):
            added_by_stack = field == "labels" and k not in was and stack_own.get(k) == v
            if was.get(k) != v and not added_by_stack:
                out.append(
                    Change(f"metadata.{field}[{k}]", f"{label} {k}={v} {'added' if k not in was else 'changed'}")
                )
    spec, got = sent.get("spec") or {}, admitted.get("spec") or {}
    out += _container_changes("initContainers", spec, got, lrs)
    out += _container_changes("containers", spec, got, lrs)
    was_sel, now_sel = spec.get("nodeSelector") or {}, got.get("nodeSelector") or {}
    for k, v in sorted(now_sel.items()):
        if was_sel.get(k) != v:
            out.append(Change(f"spec.nodeSelector[{k}]", f"nodeSelector {k}={v} added"))
    was_tol = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
    for t in got.get("tolerations") or []:
        if isinstance(t, dict) and t not in was_tol and not _default_toleration(t):
            out.append(Change("spec.tolerations", f"toleration {_toleration_text(t)} added"))
    for n, v in _named(got.get("volumes")).items():
        if n not in _named(spec.get("volumes")) and not n.startswith(SA_TOKEN_VOLUME):
            kinds = [k for k in v if k != "name"]
            out.append(Change(f"spec.volumes[{n}]", f'volume "{n}" ({", ".join(kinds) or "?"}) added'))
    for n in _named(got.get("imagePullSecrets")):
        if n not in _named(spec.get("imagePullSecrets")):
            out.append(Change("spec.imagePullSecrets", f'imagePullSecret "{n}" added'))
    for field in sorted(set(got) - _WALKED):
        value, was_value = got[field], spec.get(field)
        if value == was_value:
            continue
        if was_value is None and field in POD_DEFAULTS and POD_DEFAULTS[field] in (None, value):
            continue
        if field == "serviceAccount" and value == got.get("serviceAccountName"):
            continue  # the deprecated alias, defaulted from serviceAccountName
        out.append(Change(f"spec.{field}", f"{field} set to {_short(value)}"))
    return out


def judged_spec(sent: Mapping[str, Any], admitted: Mapping[str, Any], template: Mapping[str, Any]) -> dict[str, Any]:
    """The pod spec the checks judge: the admitted one, less what `changes` leaves out as the apiserver's own
    (the ServiceAccount token volume and mounts, DefaultTolerationSeconds' tolerations) and less what the
    dry-run probe alone carries (its hostname, the pod index's env var: as in `template`)."""
    spec = copy.deepcopy(dict(admitted.get("spec") or {}))
    sent_spec = sent.get("spec") or {}
    sent_vols = _named(sent_spec.get("volumes"))
    if isinstance(spec.get("volumes"), list):
        spec["volumes"] = [
            v for v in spec["volumes"]
            if not (isinstance(v, dict) and str(v.get("name", "")).startswith(SA_TOKEN_VOLUME) and v.get("name") not in sent_vols)
        ]  # fmt: skip
    sent_tol = sent_spec.get("tolerations") or []
    if isinstance(spec.get("tolerations"), list):
        spec["tolerations"] = [t for t in spec["tolerations"] if t in sent_tol or not _default_toleration(t)]
        if not spec["tolerations"] and "tolerations" not in template:
            del spec["tolerations"]
    if "hostname" in template:
        spec["hostname"] = template["hostname"]
    else:
        spec.pop("hostname", None)
    tmpl_containers = {**_named(template.get("initContainers")), **_named(template.get("containers"))}
    for kind in ("initContainers", "containers"):
        for c in spec.get(kind) or []:
            if not isinstance(c, dict):
                continue
            mounts = c.get("volumeMounts")
            if isinstance(mounts, list):
                c["volumeMounts"] = [m for m in mounts if not str(m.get("name", "")).startswith(SA_TOKEN_VOLUME)]
                if not c["volumeMounts"]:
                    del c["volumeMounts"]
            original = tmpl_containers.get(str(c.get("name")))
            if original is not None and isinstance(c.get("env"), list):
                own = _named(original.get("env"))
                sent_env = {
                    n for sc in (sent_spec.get(kind) or []) if isinstance(sc, dict) and sc.get("name") == c.get("name")
                    for n in _named(sc.get("env"))
                }  # fmt: skip
                # the probe's own additions (the Job controller's JOB_COMPLETION_INDEX): as in the template
                c["env"] = [e for e in c["env"] if e.get("name") in own or e.get("name") not in sent_env]
                if not c["env"] and "env" not in original:
                    del c["env"]
    return spec


@dataclass
class AdmittedGroup:
    """One pod group as admission creates its pods: the judged spec and metadata, and what changed."""

    spec: PodSpec
    metadata: ObjectMeta
    changes: list[Change]


def admitted_group(
    group: PodGroup,
    sent: Mapping[str, Any],
    admitted: Mapping[str, Any],
    limit_ranges: Iterable[Mapping[str, Any]] = (),
) -> AdmittedGroup:
    """The group's pods as admitted: unchanged (the template) when admission changed nothing that matters."""
    found = changes(sent, admitted, limit_ranges)
    if not found:
        return AdmittedGroup(group.pod_spec, group.pod_metadata, [])
    found += warned(admitted)
    meta = copy.deepcopy(group.pod_metadata or {})
    a_meta, s_meta = admitted.get("metadata") or {}, sent.get("metadata") or {}
    fields: tuple[Literal["labels", "annotations"], ...] = ("labels", "annotations")
    for field in fields:
        added = {k: v for k, v in (a_meta.get(field) or {}).items() if (s_meta.get(field) or {}).get(k) != v}
        if added:
            meta[field] = {**(meta.get(field) or {}), **added}
    return AdmittedGroup(as_pod_spec(judged_spec(sent, admitted, group.pod_spec)), meta, found)


def admitted_workload(wl: Workload, groups: Mapping[str, AdmittedGroup]) -> Workload:
    """A copy of `wl` whose pod groups named in `groups` are their pods as admitted (the rest as written).
    A shallow copy: everything else (derived objects, a sweep's children and sources) is the same, but
    for its render_id: it is not the render's Workload."""
    out = copy.copy(wl)
    out.render_id = None  # not that render: its pods are these (the check memo, webhook/checkmemo.py, keys by it)
    out.pod_groups = [
        PodGroup(
            name=g.name, pods=g.pods, pod_spec=a.spec, pod_metadata=a.metadata, role=g.role,
            depends_on=list(g.depends_on), queued=g.queued,
        )
        if (a := groups.get(g.name)) is not None and a.changes
        else g
        for g in wl.pod_groups
    ]  # fmt: skip
    return out


def summary(groups: Mapping[str, AdmittedGroup]) -> list[str]:
    """One line per group admission changed: `the workers pods: limits.cpu 500m on container "main", set by admission`."""
    return [f"the {name} pods: " + "; ".join(c.said() for c in a.changes) for name, a in groups.items() if a.changes]


def kept_answer(kind: str, sent: Mapping[str, Any], answer: Any) -> dict[str, Any] | None:
    """What the Dry Run keeps of an accepted dry run (in its cache, as long as the outcome): a Pod that
    admission changed, without its status; None for anything else (no change: the template is the pod)."""
    if kind != "Pod" or not isinstance(answer, dict) or not changes(sent, answer):
        return None
    return {k: v for k, v in answer.items() if k != "status"}


@dataclass
class Admission:
    """What the Dry Run learnt of the pods as admission creates them (CheckContext.admission), for the engine.

    `pods`: pod group name → (the dry-run Pod sent, the Pod as admitted) for every group whose
    representative Pod was accepted and changed by admission; `unseen`: why the other groups' pods were
    not seen as admitted (timed out, refused, not permitted), one line each; `seen`: the groups whose
    Pod was accepted (changed or not)."""

    pods: dict[str, tuple[dict[str, Any], dict[str, Any]]]
    seen: list[str]
    unseen: list[str]
