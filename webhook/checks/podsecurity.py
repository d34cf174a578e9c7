"""Pod Security: the job's pods meet the Pod Security level their namespace enforces.

The Job controller creates the job's pods long after the apply; a namespace labelled
`pod-security.kubernetes.io/enforce=restricted` refuses every one that violates the level
(`FailedCreate: ... violates PodSecurity "restricted:latest": ...`) and the job never starts.
The Dry Run check would see that too, but on a cluster with JobSet's and Kueue's webhooks its
dry-run objects (owned by a TrainJob and a Job that do not exist yet) are refused for that
reason first, so it can only say "cannot verify" (docs/fidelity.md, scenario
pod-security-restricted-violating). This check judges each pod group itself, as kube-apiserver's
PodSecurity admission will:

* k8s.io/pod-security-admission `admission/admission.go` `ValidatePod` / `EvaluatePod`: exempt
  namespaces and users first, then the namespace's policy (`PolicyToEvaluate`), a fully
  privileged policy admits everything, an exempt runtimeClassName admits the pod, else the
  enforce level decides (`violates PodSecurity "<level>:<version>": <detail>`); warn and audit
  never refuse a pod (and, for pods the Job controller creates, nobody sees their warnings);
* `webhook/models/podsecurity/`: the levels, versions and every check of `policy/`;
* k8s.io/kubernetes `pkg/apis/core/v1/defaults.go` `SetDefaults_Pod`: the one defaulting that
  changes what Pod Security reads (with hostNetwork, a port's hostPort defaults to its
  containerPort), applied first because admission sees the defaulted pod;
* `plugin/pkg/admission/security/podsecurity/admission.go`: the evaluator is
  `policy.NewEvaluator(policy.DefaultChecks())` (v1.35+: `..., emulationVersion)`) of the
  apiserver's own version, so a version label newer than the apiserver is judged by the
  apiserver's newest rules, and the apiserver's version picks the library generation: up to
  v1.34, k8s.io/pod-security-admission v0.34.4, whose user-namespace relaxation is the
  UserNamespacesPodSecurityStandards gate (`InspectFeatureGates`); from v1.35, v0.35+ (ported
  from v0.37.2), where `hostUsers: false` pods are always relaxed at policy versions 1.35 and
  later and never below (`podSecurity.relaxForUserNamespaces` then has no effect).

What is not readable from the cluster (the AdmissionConfiguration's defaults and exemptions,
who creates the pods, the UserNamespacesPodSecurityStandards gate of a v1.34 or older apiserver)
comes from the `podSecurity` settings, and a verdict says what it assumed. An apiserver newer
than the rules ported here (v1.37), or of unknown version, turns a violation into a warning.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from webhook.checks.base import Check, CheckContext
from webhook.checks.common import cached, with_stale
from webhook.config import PodSecuritySettings
from webhook.models.podsecurity import (
    AUDIT_LABEL,
    AUDIT_VERSION_LABEL,
    ENFORCE_LABEL,
    ENFORCE_VERSION_LABEL,
    LIBRARY,
    MAX_VERSION,
    MODULE,
    PRIVILEGED,
    WARN_LABEL,
    WARN_VERSION_LABEL,
    LevelVersion,
    Policy,
    Result,
    Version,
    evaluate_pod,
    failing,
    forbidden_detail,
    parse_version,
    policy_to_evaluate,
)
from webhook.objects import ContainerListKey, ObjectMeta, PodSpec
from webhook.results import CheckResult, Status
from webhook.workloads.base import PodGroup

NAME = "Pod Security"

#: what to change for each upstream check id, in the Fix of a violation
FIXES = {
    "allowPrivilegeEscalation": "allowPrivilegeEscalation: false in each container's securityContext",
    "appArmorProfile": "AppArmor profile type RuntimeDefault or Localhost (or none)",
    "capabilities_baseline": "no capability in capabilities.add beyond the baseline's defaults",
    "capabilities_restricted": 'capabilities.drop: ["ALL"] in each container\'s securityContext (add only '
    "NET_BIND_SERVICE)",
    "hostNamespaces": "no hostNetwork, hostPID or hostIPC",
    "hostPathVolumes": "no hostPath volumes",
    "hostPorts": "no hostPort",
    "hostProbesAndHostLifecycle": "no host in probes and lifecycle handlers",
    "privileged": "no securityContext.privileged: true",
    "procMount": "no securityContext.procMount other than Default",
    "procMount_restricted": "no securityContext.procMount other than Default",
    "restrictedVolumes": "only configMap, csi, downwardAPI, emptyDir, ephemeral, image, persistentVolumeClaim, "
    "projected and secret volumes",
    "runAsNonRoot": "runAsNonRoot: true in the pod's securityContext (and false in no container)",
    "runAsUser": "no runAsUser: 0",
    "seLinuxOptions": "no seLinuxOptions user or role, and an allowed type",
    "seccompProfile_baseline": "no seccomp profile Unconfined",
    "seccompProfile_restricted": "seccompProfile.type: RuntimeDefault in the pod's securityContext",
    "sysctls": "only the sysctls the level allows",
    "windowsHostProcess": "no windowsOptions.hostProcess: true",
}


def defaults_policy(ps: PodSecuritySettings) -> Policy:
    """admission/api/helpers.go ToPolicy of the configured defaults (validated by config.py)."""
    d = ps.defaults

    def lv(level: str, version: str) -> LevelVersion:
        return LevelVersion(level, parse_version(version)[0])

    return Policy(lv(d.enforce, d.enforce_version), lv(d.audit, d.audit_version), lv(d.warn, d.warn_version))


def as_created(spec: PodSpec) -> PodSpec:
    """pkg/apis/core/v1/defaults.go SetDefaults_Pod (defaultHostNetworkPorts): with hostNetwork, a
    container port's hostPort 0 becomes its containerPort. The one pod defaulting Pod Security reads."""
    if spec.get("hostNetwork") is not True:
        return spec
    out = spec.copy()
    keys: tuple[ContainerListKey, ...] = ("containers", "initContainers")
    for key in keys:
        items = out.get(key)
        if not isinstance(items, list):
            continue
        out[key] = items = copy.deepcopy(items)
        for c in items:
            ports = c.get("ports") if isinstance(c, dict) else None
            for p in ports if isinstance(ports, list) else []:
                if isinstance(p, dict) and not p.get("hostPort"):
                    p["hostPort"] = p.get("containerPort", 0)
    return out


def _source(labels: dict[str, str], label: str, version_label: str, mode: str) -> str:
    """Where a mode's level came from, for messages."""
    if label in labels:
        where = f"label {label}={labels[label]}"
        if version_label in labels:
            where += f", {version_label.rsplit('/', 1)[1]}={labels[version_label]}"
        return where
    if version_label in labels:
        return f"label {version_label}={labels[version_label]}; level: the default podSecurity.defaults.{mode}"
    return f"no {label} label: the default podSecurity.defaults.{mode}"


def _label_errors(errs: list[str]) -> str:
    if not errs:
        return ""
    return (
        " Invalid labels, read as Pod Security reads them (an enforce level as restricted, a version as latest): "
        + "; ".join(errs)
    )


class PodSecurity(Check):
    name = NAME
    synchronous = True  # reads only the Workload and the cached namespace
    needs_cluster = True
    local_capacity = True  # a MultiKueue TrainJob's pods are created in another cluster
    permissions = cached("namespaces")
    apis = ("v1",)
    summary = "The pods meet the Pod Security level their namespace enforces (k8s.io/pod-security-admission)."

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        """Steps, as admission/admission.go ValidatePod reads them: the exempt namespaces and users
        (`_exemption`) → the namespace's policy (`_Namespace.read`: PolicyToEvaluate; a fully privileged
        policy admits everything) → each group evaluated (`_judge`) → message (`_message`)."""
        assert ctx.view is not None
        ns = ctx.workload.namespace
        ps = ctx.settings.pod_security
        exempt = _exemption(ns, ps)
        if exempt is not None:
            return exempt
        nso = ctx.view.get_cached("namespaces", None, ns)
        if nso is None:
            return with_stale(
                CheckResult(
                    NAME,
                    Status.WARN,
                    f'Cannot verify Pod Security: namespace "{ns}" is not in the cache (its labels decide the level)',
                ),
                ctx,
                "namespaces",
            )
        nsp = _Namespace.read(ns, nso, ps)
        policy = nsp.policy
        if not nsp.errs and policy.fully_privileged():
            return with_stale(
                CheckResult(
                    NAME,
                    Status.PASS,
                    f'Namespace "{ns}" enforces Pod Security "{policy.enforce}" ({nsp.enforce_src}): every pod is '
                    "admitted",
                ),
                ctx,
                "namespaces",
            )
        return _message(ctx, nsp, self._judge(ctx, nsp))

    def _judge(self, ctx: CheckContext, nsp: _Namespace) -> _Judged:
        """Each group with pods, its runtimeClassName not exempt, evaluated at the enforce level (admission.go
        EvaluatePod): a violation is a finding; a pod admitted is also evaluated at the warn and audit levels."""
        ps = ctx.settings.pod_security
        groups = [g for g in ctx.workload.pod_groups if g.pods > 0]
        exempt_rc = [g for g in groups if _runtime_class(g) in ps.exemptions.runtime_classes]
        judged = [g for g in groups if g not in exempt_rc]
        enforce, doubt = self._effective(ctx, nsp.policy.enforce)
        # the relaxation is read by the v0.34 generation only (apiservers <= v1.34)
        ev = _Evaluator(ps.relax_for_user_namespaces, _library(ctx))
        out = _Judged(judged, exempt_rc, doubt, _assumed(nsp.name, ps, judged))
        for g in judged:
            spec = as_created(g.pod_spec)
            meta = g.pod_metadata if isinstance(g.pod_metadata, dict) else {}
            bad = ev.failing(enforce, meta, spec)
            if bad:
                out.findings.append(self._finding(nsp.name, nsp.policy.enforce, nsp.enforce_src, g, bad))
                continue
            out.notes.extend(self._warned(ctx, nsp, g, ev, meta, spec))
        return out

    def _warned(
        self,
        ctx: CheckContext,
        nsp: _Namespace,
        g: PodGroup,
        ev: _Evaluator,
        meta: ObjectMeta,
        spec: PodSpec,
    ) -> list[str]:
        """What the warn and audit levels say of a group the enforce level admits: they never refuse a pod."""
        notes: list[str] = []
        policy = nsp.policy
        for mode, lv, label, vlabel, effect in (
            ("warn", policy.warn, WARN_LABEL, WARN_VERSION_LABEL, "would warn about"),
            ("audit", policy.audit, AUDIT_LABEL, AUDIT_VERSION_LABEL, "would annotate the audit events of"),
        ):
            if lv.level == PRIVILEGED:
                continue
            eff, _ = self._effective(ctx, lv)
            other = ev.failing(eff, meta, spec)
            if other:
                notes.append(
                    f'Pod Security "{lv}" of namespace "{nsp.name}" ({_source(nsp.labels, label, vlabel, mode)}) '
                    f"{effect} the {g.name} pods: {forbidden_detail(other)}; they are created anyway"
                )
        return notes

    @staticmethod
    def _effective(ctx: CheckContext, lv: LevelVersion) -> tuple[LevelVersion, str]:
        """The level and version the apiserver's evaluator uses, and why that may be uncertain ("" if not).

        Its evaluator knows the checks up to its own version: a newer version (or latest) is judged
        by those. The rules here stop at MAX_VERSION (the module ported); past it, unknown."""
        assert ctx.view is not None
        server = ctx.view.server_version()
        if server is None:
            return lv, f"the apiserver's version is unknown; judged by the rules of {MODULE}"
        sv = Version(server[0], server[1])
        version = sv if sv.older(lv.version) else lv.version
        if MAX_VERSION.older(version):
            return (
                LevelVersion(lv.level, MAX_VERSION),
                f"judged by the {MAX_VERSION} rules of {MODULE}; the apiserver is {sv}, whose rules may differ",
            )
        return LevelVersion(lv.level, version), ""

    @staticmethod
    def _finding(ns: str, lv: LevelVersion, src: str, g: PodGroup, bad: list[Result]) -> tuple[str, str]:
        fixes = list(dict.fromkeys(FIXES.get(r.check, "correct the fields named") for r in bad))
        line = (
            f'Pod Security "{lv}" of namespace "{ns}" ({src}) forbids the {g.name} pods: {forbidden_detail(bad)}; '
            "the Job controller cannot create them (FailedCreate) and the job never starts"
        )
        fix = (
            f"give the {g.name} pod template " + "; ".join(fixes) + f" (or have an admin relax {ENFORCE_LABEL} "
            f'on namespace "{ns}")'
        )
        return line, fix


def _exemption(ns: str, ps: PodSecuritySettings) -> CheckResult | None:
    """admission.go: an exempt namespace, or an exempt user creating the pods, admits them unjudged."""
    if ns in ps.exemptions.namespaces:
        return CheckResult(
            NAME,
            Status.PASS,
            f'Namespace "{ns}" is exempt from Pod Security (podSecurity.exemptions.namespaces): its pods are '
            "not judged",
        )
    if ps.pod_creator in ps.exemptions.usernames:
        return CheckResult(
            NAME,
            Status.PASS,
            f'The Job controller\'s user "{ps.pod_creator}" is exempt from Pod Security '
            "(podSecurity.exemptions.usernames): the pods it creates are not judged",
        )
    return None


@dataclass(frozen=True)
class _Namespace:
    """The namespace's Pod Security policy as admission reads it (admission.go PolicyToEvaluate)."""

    name: str
    labels: dict[str, str]
    policy: Policy
    #: the invalid labels (read as Pod Security reads them)
    errs: list[str]
    #: where the enforce level came from, for messages
    enforce_src: str

    @classmethod
    def read(cls, ns: str, nso: dict[str, Any], ps: PodSecuritySettings) -> _Namespace:
        """The policy of namespace object `nso`: its labels over the configured defaults."""
        raw = (nso.get("metadata") or {}).get("labels") or {}
        labels = {str(k): str(val) for k, val in raw.items()} if isinstance(raw, dict) else {}
        policy, errs = policy_to_evaluate(labels, defaults_policy(ps))
        return cls(ns, labels, policy, errs, _source(labels, ENFORCE_LABEL, ENFORCE_VERSION_LABEL, "enforce"))


@dataclass(frozen=True)
class _Evaluator:
    """The apiserver's evaluator: its library generation and the user-namespace relaxation setting."""

    relax: bool
    library: int

    def failing(self, lv: LevelVersion, meta: ObjectMeta, spec: PodSpec) -> list[Result]:
        """The checks of level `lv` the pod fails."""
        return failing(evaluate_pod(lv, meta, spec, relax_user_namespaces=self.relax, library=self.library))


@dataclass
class _Judged:
    """The groups judged at the enforce level and what their evaluation found."""

    judged: list[PodGroup]
    #: the groups not judged: their runtimeClassName is exempt
    exempt_rc: list[PodGroup]
    #: why the verdict may be uncertain ("" if not): a violation is then a warning
    doubt: str
    #: what the verdict took from the settings (_assumed)
    assumed: str
    #: (line, fix) per group the enforce level refuses
    findings: list[tuple[str, str]] = field(default_factory=list)
    #: what the warn and audit levels say of the groups admitted
    notes: list[str] = field(default_factory=list)


def _message(ctx: CheckContext, nsp: _Namespace, j: _Judged) -> CheckResult | list[CheckResult]:
    """FAIL (WARN when in doubt) with each group refused, else PASS naming the groups admitted; INFO with the
    warn and audit levels' notes."""
    errs, assumed = nsp.errs, j.assumed
    out: list[CheckResult] = []
    if j.findings:
        why = f" ({j.doubt})" if j.doubt else ""
        lines = [f"{line}{why}. Fix: {fix}." for line, fix in j.findings]
        message = " ".join(lines) + f" Assumed: {assumed}.{_label_errors(errs)}"
        out.append(
            CheckResult(
                NAME,
                Status.WARN if j.doubt else Status.FAIL,
                message,
                details=[*lines, f"assumed: {assumed}"] + ([f"label errors: {'; '.join(errs)}"] if errs else []),
            )
        )
    else:
        names = ", ".join(g.name for g in j.judged) or "none"
        text = (
            f'Pod Security "{nsp.policy.enforce}" of namespace "{nsp.name}" ({nsp.enforce_src}) admits the pods of '
            f"{names}"
        )
        if j.exempt_rc:
            text += "; not judged (exempt runtimeClassName): " + ", ".join(
                f"{g.name} ({_runtime_class(g)})" for g in j.exempt_rc
            )
        if j.doubt:
            text += f" ({j.doubt})"
        out.append(CheckResult(NAME, Status.PASS, text + _label_errors(errs), details=[f"assumed: {assumed}"] + errs))
    if j.notes:
        out.append(CheckResult(NAME, Status.INFO, " ".join(j.notes), details=j.notes))
    for r in out:
        with_stale(r, ctx, "namespaces")
    return out if len(out) > 1 else out[0]


def _library(ctx: CheckContext) -> int:
    """The minor of the k8s.io/pod-security-admission module the apiserver judges with: its own (v1.<minor>
    builds v0.<minor>); the newest ported when unknown (the verdict then only warns)."""
    assert ctx.view is not None
    server = ctx.view.server_version()
    return LIBRARY if server is None or server[0] != 1 else server[1]


def _runtime_class(g: PodGroup) -> str:
    rc = g.pod_spec.get("runtimeClassName")
    return rc if isinstance(rc, str) else ""


def _assumed(ns: str, ps: PodSecuritySettings, groups: list[PodGroup]) -> str:
    """What the verdict took from the settings instead of the cluster's AdmissionConfiguration."""
    rcs = sorted({rc for g in groups if (rc := _runtime_class(g))})
    parts = [f'namespace "{ns}"', f'the pods\' creator "{ps.pod_creator}"']
    if rcs:
        parts.append("runtime class " + ", ".join(f'"{rc}"' for rc in rcs))
    return "the cluster's PodSecurity configuration exempts none of " + ", ".join(parts) + " (podSecurity settings)"


CHECKS = [PodSecurity()]
