"""Pod Security against the real kube-apiserver: its PodSecurity admission is the judge.

* A namespace labelled `pod-security.kubernetes.io/enforce=restricted`: a TrainJob whose runtime's
  pod sets no securityContext is denied through kubectl with the Pod Security check's exact text;
  one whose runtime's pod is compliant is admitted.
* The apiserver's own verdict on a real Pod of the same spec (created for real: Pod Security
  admission runs on the bare control plane, nothing schedules the pod) agrees: the pod of the
  denied job is refused with the very reasons the check gave, the compliant one is created.
* A table of pod specs (every level, pinned versions, the hostNetwork port defaulting, a warn
  label, user-namespace pods and the v1.37 sysctls, whose verdicts differ between v1.34 and
  v1.35+ apiservers) created for real in labelled namespaces: the check, run on the live cluster
  view, gives the apiserver's verdict and its words for each, at whatever version the control
  plane runs (PREFLIGHT_KUBERNETES_VERSION).

The Dry Run check is off for this webhook: on the bare control plane its dry-run Pod meets
Pod Security too and would deny as well; on a cluster with JobSet's and Kueue's webhooks it is
blinded (docs/checks/admission.md, Pod Security), which is why this check exists.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane
from e2e.harness.live import live_evaluate, result_of
from e2e.harness.runner import RunningWebhook, warnings_of
from e2e.harness.runner import stored as exists
from e2e.harness.trainer_manifests import train_job
from webhook.checks.base import CheckContext
from webhook.checks.podsecurity import PodSecurity
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.results import Status
from webhook.workloads.base import PodGroup, Workload

HOOK = "preflight.webhook.io"
SELECT = {"e2e-psa": "true"}
ENFORCE = "pod-security.kubernetes.io/enforce"
RESTRICTED_NS = "e2e-psa-restricted"
#: namespace -> its Pod Security labels
NAMESPACES: dict[str, dict[str, str]] = {
    RESTRICTED_NS: {ENFORCE: "restricted"},
    "e2e-psa-baseline": {ENFORCE: "baseline"},
    "e2e-psa-restricted-v124": {ENFORCE: "restricted", "pod-security.kubernetes.io/enforce-version": "v1.24"},
    "e2e-psa-restricted-v134": {ENFORCE: "restricted", "pod-security.kubernetes.io/enforce-version": "v1.34"},
    "e2e-psa-baseline-v133": {ENFORCE: "baseline", "pod-security.kubernetes.io/enforce-version": "v1.33"},
    "e2e-psa-warn": {ENFORCE: "baseline", "pod-security.kubernetes.io/warn": "restricted"},
}
COMPLIANT_SC = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _runtime(name: str, security_context: dict[str, Any] | None) -> dict[str, Any]:
    node: dict[str, Any] = {
        "name": "node",
        "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
    }
    if security_context:
        node["securityContext"] = security_context
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [node]}}}}}
                    ]
                }
            },
        },
    }


def _trainjob(name: str, runtime: str) -> dict[str, Any]:
    return train_job(name, runtime, namespace=RESTRICTED_NS, image="ghcr.io/acme/mnist-ft:1.0.0", num_nodes=2)


@pytest.fixture(scope="module")
def psa_cluster(control_plane: ControlPlane) -> ControlPlane:
    cp = control_plane
    for ns, labels in NAMESPACES.items():
        cp.ensure_namespace(ns)
        cp.kubectl("label", "namespace", ns, *[f"{k}={v}" for k, v in {**SELECT, **labels}.items()], "--overwrite")
    cp.apply([_runtime("psa-plain", None), _runtime("psa-compliant", COMPLIANT_SC)])
    return cp


@pytest.fixture(scope="module")
def psa_hook(psa_cluster: ControlPlane) -> Iterator[RunningWebhook]:
    with RunningWebhook(
        psa_cluster,
        vwc_name="preflight-webhook-psa",
        config={"mode": "enforce", "checks": {"Dry Run": "off"}},
        namespace_selector={"matchLabels": SELECT},
        probe_namespace="e2e-psa-baseline",
    ) as hook:
        yield hook


def _apply(cp: ControlPlane, obj: dict[str, Any]) -> Any:
    return cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj, sort_keys=False), check=False)


PLAIN_DETAIL = (
    'allowPrivilegeEscalation != false (container "node" must set securityContext.allowPrivilegeEscalation=false), '
    'unrestricted capabilities (container "node" must set securityContext.capabilities.drop=["ALL"]), '
    'runAsNonRoot != true (pod or container "node" must set securityContext.runAsNonRoot=true), '
    'seccompProfile (pod or container "node" must set securityContext.seccompProfile.type to "RuntimeDefault" or '
    '"Localhost")'
)


def test_violating_trainjob_is_denied_with_the_exact_text(psa_hook: RunningWebhook) -> None:
    cp = psa_hook.cp
    proc = _apply(cp, _trainjob("psa-violating", "psa-plain"))
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    message = (
        f'TrainJob "psa-violating" in namespace "{RESTRICTED_NS}" failed 1 preflight check:\n'
        f'[Pod Security] Pod Security "restricted:latest" of namespace "{RESTRICTED_NS}" (label '
        f"pod-security.kubernetes.io/enforce=restricted) forbids the node pods: {PLAIN_DETAIL}; the Job controller "
        "cannot create them (FailedCreate) and the job never starts. Fix: give the node pod template "
        'allowPrivilegeEscalation: false in each container\'s securityContext; capabilities.drop: ["ALL"] in each '
        "container's securityContext (add only NET_BIND_SERVICE); runAsNonRoot: true in the pod's securityContext "
        "(and false in no container); seccompProfile.type: RuntimeDefault in the pod's securityContext (or have an "
        f'admin relax pod-security.kubernetes.io/enforce on namespace "{RESTRICTED_NS}"). Assumed: the cluster\'s '
        f'PodSecurity configuration exempts none of namespace "{RESTRICTED_NS}", the pods\' creator '
        '"system:serviceaccount:kube-system:job-controller" (podSecurity settings).'
    )
    assert proc.stderr == (
        f'Error from server (Forbidden): error when creating "STDIN": admission webhook "{HOOK}" denied the request: '
        f"{message}\n"
    )
    assert not exists(cp, _trainjob("psa-violating", "psa-plain"))


def test_compliant_trainjob_is_admitted(psa_hook: RunningWebhook) -> None:
    cp = psa_hook.cp
    proc = _apply(cp, _trainjob("psa-compliant", "psa-compliant"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "trainjob.trainer.kubeflow.org/psa-compliant created\n"
    assert not [w for w in warnings_of(proc.stderr) if "[Pod Security]" in w]
    assert exists(cp, _trainjob("psa-compliant", "psa-compliant"))


def _create_pod(cp: ControlPlane, ns: str, name: str, meta: dict[str, Any], spec: dict[str, Any]) -> tuple[bool, str]:
    """Create the pod for real: (created, the apiserver's Pod Security text: the forbidden detail or a warning)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **{k: v for k, v in meta.items() if k in ("labels", "annotations")},
            "name": name,
            "namespace": ns,
        },
        "spec": spec,
    }
    proc = cp.kubectl("create", "-f", "-", input=yaml.safe_dump(pod, sort_keys=False), check=False)
    if proc.returncode == 0:
        cp.kubectl("delete", "pod", name, "-n", ns, "--wait=false")  # never scheduled: deleted at once
        warned = re.findall(r'^Warning: would violate PodSecurity "[^"]+": (.*)$', proc.stderr, re.M)
        return True, warned[0] if warned else ""
    m = re.search(r'is forbidden: violates PodSecurity "[^"]+": (.*)$', proc.stderr.strip())
    assert m, proc.stderr  # a 422 would be a bad test case, not a Pod Security verdict
    return False, m.group(1)


async def test_the_apiserver_refuses_the_denied_jobs_pod_with_the_same_reasons(
    psa_hook: RunningWebhook, open_view: Any
) -> None:
    view = await open_view()
    for runtime, want_created in (("psa-plain", False), ("psa-compliant", True)):
        ev = await live_evaluate(_trainjob(f"psa-real-{runtime}", runtime), view, Settings())
        assert ev.workload is not None
        [group] = ev.workload.pod_groups
        ours = result_of(ev, "Pod Security")
        created, text = _create_pod(
            psa_hook.cp, RESTRICTED_NS, f"psa-real-{runtime}", group.pod_metadata, group.pod_spec
        )
        assert created is want_created, text
        if created:
            assert ours.status is Status.PASS, ours.message
        else:
            assert ours.status is Status.FAIL
            assert text == PLAIN_DETAIL
            assert f"forbids the node pods: {text};" in ours.message


#: restricted but for runAsNonRoot
ROOT_SC = {k: v for k, v in COMPLIANT_SC.items() if k != "runAsNonRoot"}


def _c(**sc: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "main", "image": "busybox:1.36"}
    if sc:
        c["securityContext"] = sc
    return c


#: (namespace, pod spec): each created for real and judged by the check on the live view
POD_CASES: list[tuple[str, dict[str, Any]]] = [
    ("e2e-psa-baseline", {"containers": [_c()]}),
    ("e2e-psa-baseline", {"containers": [_c(privileged=True)]}),
    ("e2e-psa-baseline", {"hostNetwork": True, "containers": [{**_c(), "ports": [{"containerPort": 8080}]}]}),
    (
        "e2e-psa-baseline",
        {"containers": [_c()], "volumes": [{"name": "host", "hostPath": {"path": "/var/log"}}]},
    ),
    (
        "e2e-psa-baseline",
        {
            "containers": [_c()],
            "securityContext": {
                "sysctls": [
                    {"name": "kernel.msgmax", "value": "65536"},
                    {"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"},
                ]
            },
        },
    ),
    ("e2e-psa-baseline", {"containers": [_c(capabilities={"add": ["SYS_ADMIN", "CHOWN"]})]}),
    ("e2e-psa-baseline", {"containers": [_c(seccompProfile={"type": "Unconfined"})]}),
    ("e2e-psa-baseline", {"containers": [_c(seLinuxOptions={"type": "spc_t"})]}),
    ("e2e-psa-baseline", {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}, "containers": [_c()]}),
    (
        "e2e-psa-baseline",
        {"containers": [{**_c(), "livenessProbe": {"httpGet": {"port": 8080, "host": "10.0.0.1"}}}]},
    ),
    (
        "e2e-psa-baseline-v133",
        {"containers": [{**_c(), "livenessProbe": {"httpGet": {"port": 8080, "host": "10.0.0.1"}}}]},
    ),
    ("e2e-psa-restricted", {"containers": [_c(**COMPLIANT_SC)]}),
    ("e2e-psa-restricted", {"containers": [_c(**{**COMPLIANT_SC, "runAsUser": 0})]}),
    (
        "e2e-psa-restricted",
        {"containers": [_c(**{**COMPLIANT_SC, "capabilities": {"drop": ["ALL"], "add": ["NET_RAW"]}})]},
    ),
    (
        "e2e-psa-restricted",
        {
            "containers": [_c(**COMPLIANT_SC)],
            "volumes": [{"name": "shared", "nfs": {"server": "nfs.example", "path": "/"}}],
        },
    ),
    ("e2e-psa-restricted", {"os": {"name": "windows"}, "containers": [_c(runAsNonRoot=True)]}),
    ("e2e-psa-restricted-v124", {"os": {"name": "windows"}, "containers": [_c(runAsNonRoot=True)]}),
    ("e2e-psa-restricted-v124", {"containers": [_c(**{**COMPLIANT_SC, "runAsUser": 0})]}),
    ("e2e-psa-warn", {"containers": [_c()]}),
    ("e2e-psa-warn", {"containers": [_c(privileged=True)]}),
    # user namespaces: v1.34 (gate off, its default) refuses all four; v1.35+ relaxes runAsNonRoot, runAsUser
    # and baseline procMount from policy v1.35, but not restricted procMount nor a policy pinned at v1.34
    ("e2e-psa-baseline", {"hostUsers": False, "containers": [_c(procMount="Unmasked")]}),
    ("e2e-psa-restricted", {"hostUsers": False, "containers": [_c(**{**ROOT_SC, "runAsUser": 0})]}),
    ("e2e-psa-restricted-v134", {"hostUsers": False, "containers": [_c(**{**ROOT_SC, "runAsUser": 0})]}),
    ("e2e-psa-restricted", {"hostUsers": False, "containers": [_c(**{**COMPLIANT_SC, "procMount": "Unmasked"})]}),
    # allowed at baseline from v1.37
    (
        "e2e-psa-baseline",
        {
            "containers": [_c()],
            "securityContext": {"sysctls": [{"name": "net.ipv4.tcp_slow_start_after_idle", "value": "0"}]},
        },
    ),
]


async def test_the_check_gives_the_apiservers_verdict_for_each_pod(psa_cluster: ControlPlane, open_view: Any) -> None:
    view = await open_view()
    tally = {"created": 0, "warned": 0, "forbidden": 0}
    for i, (ns, spec) in enumerate(POD_CASES):
        wl = Workload(
            kind="TrainJob",
            api_version="trainer.kubeflow.org/v1alpha1",
            name=f"case-{i}",
            namespace=ns,
            obj={},
            pod_groups=[PodGroup("p", 1, copy.deepcopy(spec))],
        )
        out = await PodSecurity().run(CheckContext(workload=wl, deadline=Deadline(10), settings=Settings(), view=view))
        results = out if isinstance(out, list) else [out]
        created, text = _create_pod(psa_cluster, ns, f"psa-case-{i}", {}, spec)
        verdict = results[0]
        where = f"case {i} in {ns}: {spec}"
        if created:
            assert verdict.status is Status.PASS, (where, verdict.message)
            infos = [r for r in results if r.status is Status.INFO]
            if text:  # the apiserver warned (warn label): our info says the same
                assert len(infos) == 1 and f"would warn about the p pods: {text}; they are created anyway" in (
                    infos[0].message
                ), (where, text, infos)
            else:
                assert not infos, (where, infos)
        else:
            assert verdict.status is Status.FAIL, (where, verdict.message, text)
            assert f"forbids the p pods: {text};" in verdict.message, (where, text, verdict.message)
        tally["forbidden" if not created else "warned" if text else "created"] += 1
    # both verdicts and the warning are reached: created are the plain pod at baseline, the probe host at
    # baseline v1.33 (that check is v1.34's), the compliant pod and the Windows pod at restricted latest
    # (Linux-only checks skip Windows pods from v1.25; at v1.24 the same pod is refused); from v1.35 the
    # user-namespace pods at baseline and restricted latest, from v1.37 the new sysctl
    version = view.server_version()
    assert version is not None
    created = 4 + 2 * (version[1] >= 35) + (version[1] >= 37)
    assert tally == {"created": created, "warned": 1, "forbidden": len(POD_CASES) - 1 - created}, tally
