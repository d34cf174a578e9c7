"""The pods as admission creates them, against the real kube-apiserver v1.37.2 (issue 35).

Real MutatingAdmissionPolicies (admissionregistration.k8s.io/v1, served and enabled by default in
v1.37.2) change the pods of a JobSet: one fills in limits, one adds a sidecar. The Dry Run check's
answer from the apiserver is the pod after them, and the other checks judge that pod
(webhook/engine.py judge_admitted). Each verdict is then proven by creating the pods for real: no
scheduler or kubelet is needed, ResourceQuota admission charges (or refuses) a pod when it is created.

- limits filled under a limits quota: the template sets requests only, which the quota alone would
  refuse; the policy fills the limits, the apiserver creates the pods: admitted (was a false deny).
- a sidecar added by admission pushes a 2-pod gang over a requests quota: denied, and the message
  says the sidecar was set by admission; the apiserver refuses the second pod.
- an env var from a Secret that does not exist, added by admission: denied by Secrets (the
  apiserver creates such a pod; its kubelet could never start it: CreateContainerConfigError).
- the layer, where the apiserver's answer names it: a Kyverno ClusterPolicy ``mutate`` rule with
  ``emitWarning`` (Kyverno v1.19.1's admission controller out of cluster against this control plane,
  e2e/harness/kyverno.py) says so in a ``Warning`` header, which ``plan --cluster`` lists after the
  changes and a refusal quotes; a MutatingAdmissionPolicy says nothing (the tests above: "set by
  admission" alone).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
import yaml

from e2e.fidelity.mutation_scenarios import kyverno_sidecar
from e2e.fidelity.run import kyverno_installed
from e2e.harness.controlplane import ControlPlane
from e2e.harness.kyverno import Kyverno
from e2e.harness.vap import mutate_policy
from e2e.test_quota_live import _quota, _used, _wait_cached
from webhook.checks import all_checks
from webhook.cluster.live import LiveClusterView
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.engine import ADMITTED
from webhook.preflight import evaluate
from webhook.results import Status
from webhook.workloads.admitted import changes

IMAGE = "registry.k8s.io/pause:3.10"
LABEL = "e2e-admitted"

FILL_LIMITS = (
    "Object{spec: Object.spec{containers: object.spec.containers.filter(c, !has(c.resources) || "
    "!has(c.resources.limits)).map(c, Object.spec.containers{name: c.name, resources: "
    'Object.spec.containers.resources{limits: {"cpu": "500m", "memory": "1Gi"}}})}}'
)
ADD_SIDECAR = (
    f'Object{{spec: Object.spec{{containers: [Object.spec.containers{{name: "proxy", image: "{IMAGE}", '
    'resources: Object.spec.containers.resources{requests: {"cpu": "500m"}}}]}}'
)
#: a JSONPatch: an ApplyConfiguration may not set secretKeyRef, an atomic struct
SECRET_ENV = (
    '[JSONPatch{op: "add", path: "/spec/containers/0/env", value: [Object.spec.containers.env{name: "TOKEN", '
    "valueFrom: Object.spec.containers.env.valueFrom{secretKeyRef: "
    'Object.spec.containers.env.valueFrom.secretKeyRef{name: "e2e-token", key: "token"}}}]}]'
)
#: each policy acts in the namespaces labelled LABEL=<its value>
POLICIES = [
    *mutate_policy("e2e-fill-limits", FILL_LIMITS, namespace_labels={LABEL: "fill-limits"}),
    *mutate_policy("e2e-add-sidecar", ADD_SIDECAR, namespace_labels={LABEL: "sidecar"}),
    *mutate_policy("e2e-secret-env", SECRET_ENV, namespace_labels={LABEL: "secret-env"}, patch_type="JSONPatch"),
]


def _pod_spec(requests: dict[str, str]) -> dict[str, Any]:
    return {
        "restartPolicy": "Never",
        "containers": [{"name": "node", "image": IMAGE, "resources": {"requests": requests}}],
    }


def _jobset(ns: str, name: str, pods: int, requests: dict[str, str]) -> dict[str, Any]:
    """A JobSet of one replicatedJob whose Job runs `pods` pods at once (a gang)."""
    job = {"parallelism": pods, "completions": pods, "template": {"spec": _pod_spec(requests)}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": job}}]},
    }


def _admits(cp: ControlPlane, ns: str, requests: dict[str, str]) -> None:
    """Until the namespace's policy mutates a dry-run pod: the apiserver loads policies from its informer."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "e2e-admits", "namespace": ns},
        "spec": _pod_spec(requests),
    }
    for _ in range(150):
        # check=False: until the policy is loaded, a quota that needs what it fills refuses the pod
        out = cp.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod), check=False)
        if out.returncode == 0 and changes(pod, json.loads(out.stdout)):
            return
        time.sleep(0.2)  # a poll on the condition above, bounded
    raise AssertionError(f"no MutatingAdmissionPolicy acts in namespace {ns} after 30 s")


@pytest.fixture(scope="module")
def policies(control_plane: ControlPlane) -> Any:
    cp = control_plane
    cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": POLICIES}))
    yield cp
    for d in POLICIES:
        cp.kubectl("delete", d["kind"].lower(), d["metadata"]["name"], "--ignore-not-found")


@pytest.fixture
async def view(open_view: Any) -> LiveClusterView:
    return await open_view()


def _namespace(cp: ControlPlane, ns: str, policy: str) -> None:
    cp.ensure_namespace(ns)
    cp.kubectl("label", "namespace", ns, f"{LABEL}={policy}", "--overwrite")


CHECKS = ("Resource Quotas", "Secrets", "Dry Run")


async def _judge(view: LiveClusterView, obj: dict[str, Any]) -> Any:
    checks = [c for c in all_checks() if c.name in CHECKS]
    settings = Settings(dryRunCacheSeconds=0)
    return await evaluate(obj, settings=settings, deadline=Deadline(10), view=view, checks=checks)


def _create_pods(cp: ControlPlane, ns: str, name: str, requests: dict[str, str], n: int) -> list[Any]:
    """Create the gang's pods for real, one by one: the apiserver's own answer to each."""
    out = []
    for i in range(n):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{i}", "namespace": ns},
            "spec": _pod_spec(requests),
        }
        out.append(cp.kubectl("create", "-f", "-", input=json.dumps(pod), check=False))
    return out


async def test_limits_filled_by_a_mutating_policy_under_a_limits_quota_are_admitted(
    policies: ControlPlane, view: LiveClusterView
) -> None:
    cp, ns, name = policies, "chk-admit-limits", "fill-limits-job"
    _namespace(cp, ns, "fill-limits")
    _quota(cp, ns, "limits", {"limits.cpu": "4", "limits.memory": "8Gi"})
    await _wait_cached(view, "resourcequotas", ns, {"limits"})
    requests = {"cpu": "250m", "memory": "256Mi"}
    _admits(cp, ns, requests)

    ev = await _judge(view, _jobset(ns, name, 2, requests))
    by = {r.name: r for r in ev.results.checks}
    assert ev.decision.allowed, ev.decision
    assert (by["Resource Quotas"].status, by["Resource Quotas"].message) == (
        Status.PASS,
        f'The job fits 1 ResourceQuota in namespace "{ns}": limits',
    )
    assert by["Resource Quotas"].details == [
        'ResourceQuota "limits": limits.cpu 1 of 4 (used 0 + job 1)',
        'ResourceQuota "limits": limits.memory 2Gi of 8Gi (used 0 + job 2Gi)',
    ]
    assert by["Dry Run"].status is Status.PASS
    assert by["Dry Run"].details[-1] == (
        "Admission changes the pods, and the other checks judged them as admitted: the node pods: "
        'limits.cpu 500m on container "node", set by admission; limits.memory 1Gi on container "node", set by admission'
    )
    # the apiserver agrees: it creates both pods, and charges the limits the policy filled in
    assert [r.returncode for r in _create_pods(cp, ns, name, requests, 2)] == [0, 0]
    assert _used(cp, ns, "limits") == {"limits.cpu": 1, "limits.memory": 2 * 2**30}


async def test_a_sidecar_added_by_a_mutating_policy_that_pushes_the_gang_over_a_quota_is_denied(
    policies: ControlPlane, view: LiveClusterView
) -> None:
    cp, ns, name = policies, "chk-admit-sidecar", "sidecar-job"
    _namespace(cp, ns, "sidecar")
    _quota(cp, ns, "cpu", {"requests.cpu": "2"})
    await _wait_cached(view, "resourcequotas", ns, {"cpu"})
    requests = {"cpu": "750m"}
    _admits(cp, ns, requests)

    ev = await _judge(view, _jobset(ns, name, 2, requests))
    by = {r.name: r for r in ev.results.checks}
    assert not ev.decision.allowed
    assert (by["Resource Quotas"].status, by["Resource Quotas"].message) == (
        Status.FAIL,
        'ResourceQuota "cpu": requests.cpu would be 2500m (used 0 + job 2500m) but hard is 2. Fix: raise hard '
        f"requests.cpu to at least 2500m (kubectl edit resourcequota cpu -n {ns}), or reduce the job's pods or "
        f'requests. {ADMITTED}: the node pods: container "proxy" added (requests cpu 500m), set by admission.',
    )
    # the apiserver agrees: the first pod (1250m with its sidecar) fits, the second does not
    first, second = _create_pods(cp, ns, name, requests, 2)
    assert first.returncode == 0
    assert second.returncode != 0 and "exceeded quota: cpu" in second.stderr


async def test_an_env_from_a_missing_secret_added_by_a_mutating_policy_is_denied(
    policies: ControlPlane, view: LiveClusterView
) -> None:
    cp, ns, name = policies, "chk-admit-secret", "secret-env-job"
    _namespace(cp, ns, "secret-env")
    requests = {"cpu": "100m"}
    _admits(cp, ns, requests)

    ev = await _judge(view, _jobset(ns, name, 2, requests))
    by = {r.name: r for r in ev.results.checks}
    assert not ev.decision.allowed
    assert (by["Secrets"].status, by["Secrets"].message) == (
        Status.FAIL,
        f'Secret "e2e-token" not found in namespace "{ns}" (referenced by env TOKEN of container node). Fix: kubectl '
        f'create secret generic e2e-token -n {ns} --from-literal=token=… {ADMITTED}: the node pods: env "TOKEN" added '
        'to container "node", set by admission.',
    )
    # the apiserver creates the pod all the same (the kubelet is the one that cannot start it)
    (created,) = _create_pods(cp, ns, name, requests, 1)
    assert created.returncode == 0
    got = json.loads(cp.kubectl("get", "pod", f"{name}-0", "-n", ns, "-o", "json").stdout)
    assert got["spec"]["containers"][0]["env"] == [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "e2e-token", "key": "token"}}}
    ]


def test_plan_against_the_cluster_lists_what_admission_changes_per_pod_group(
    policies: ControlPlane, tmp_path: Any
) -> None:
    """`preflight-webhook plan --cluster` (webhook/cli/plan.py): per pod group, what the cluster's admission changes."""
    cp, ns = policies, "chk-admit-plan"
    _namespace(cp, ns, "fill-limits")
    requests = {"cpu": "250m"}
    _admits(cp, ns, requests)
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(_jobset(ns, "plan-job", 2, requests)))

    def plan(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "webhook", "plan", "--cluster", "--kubeconfig", str(cp.kubeconfig), *args]
        return subprocess.run([*argv, "-f", str(job)], capture_output=True, text=True, timeout=120)

    text = plan()
    assert text.returncode == 0, text.stderr
    assert (
        '  admission changes the node pods: limits.cpu 500m on container "node", set by admission; '
        'limits.memory 1Gi on container "node", set by admission'
    ) in text.stdout.splitlines()
    got = json.loads(plan("-o", "json").stdout)
    assert got["admission"] == {
        "changed": {
            "node": [
                'limits.cpu 500m on container "node", set by admission',
                'limits.memory 1Gi on container "node", set by admission',
            ]
        },
        "unseen": None,
    }


#: the Kyverno ClusterPolicy adding the sidecar, acting in the namespaces labelled kyverno_label(KYVERNO_SLUG)
KYVERNO_SLUG = "e2e-sidecar"


@pytest.fixture(scope="module")
def kyverno(control_plane: ControlPlane) -> Any:
    """Kyverno's admission controller and its sidecar ClusterPolicy (e2e/fidelity/mutation_scenarios.py
    kyverno_sidecar: emitWarning, Pods only), removed afterwards (its webhook configurations with it)."""
    if not kyverno_installed():  # as the fidelity matrix's Kyverno rows (e2e/fidelity/run.py)
        pytest.skip("Kyverno is not built (`e2e/build.sh kyverno`; make conformance builds it, make test does not)")
    cp = control_plane
    policy = kyverno_sidecar(KYVERNO_SLUG)
    with Kyverno(cp) as ky:
        cp.kubectl("apply", "-f", "-", input=json.dumps(policy))
        ky.wait_policies([policy["metadata"]["name"]])
        yield cp
        cp.kubectl("delete", "clusterpolicy.kyverno.io", policy["metadata"]["name"], "--ignore-not-found")


def _kyverno_namespace(cp: ControlPlane, ns: str) -> None:
    from e2e.fidelity.kyverno_scenarios import kyverno_label

    cp.ensure_namespace(ns)
    ((key, value),) = kyverno_label(KYVERNO_SLUG).items()
    cp.kubectl("label", "namespace", ns, f"{key}={value}", "--overwrite")


def _said(ns: str, pod: str) -> str:
    """Kyverno's warning for its rule applied to `pod` (kyverno pkg/webhooks/utils/warning.go,
    pkg/engine/handlers/mutation/common.go buildSuccessMessage)."""
    return f"policy fx-{KYVERNO_SLUG}.add-sidecar: mutated Pod/{pod} in namespace {ns}"


def test_plan_names_the_layer_that_names_itself_in_a_warning(kyverno: ControlPlane, tmp_path: Any) -> None:
    """The apiserver passes a mutating webhook's warnings on (k8s.io/apiserver
    pkg/admission/plugin/webhook/mutating/dispatcher.go warning.AddWarning): `plan --cluster` lists them
    after the changes of the pod they came with."""
    cp, ns = kyverno, "chk-admit-kyverno"
    _kyverno_namespace(cp, ns)
    requests = {"cpu": "100m"}
    _admits(cp, ns, requests)  # Kyverno's namespace informer has the label: it mutates
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(_jobset(ns, "plan-job", 2, requests)))
    argv = [sys.executable, "-m", "webhook", "plan", "--cluster", "--kubeconfig", str(cp.kubeconfig)]
    out = subprocess.run([*argv, "-o", "json", "-f", str(job)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)["admission"]
    (probe,) = {w.split("mutated Pod/")[1].split(" ")[0] for w in got["changed"]["node"] if "mutated Pod/" in w}
    assert got == {
        "changed": {
            "node": [
                'container "proxy" added (requests cpu 500m, memory 32Mi), set by admission',
                f'the dry run warned: "{_said(ns, probe)}"',
            ]
        },
        "unseen": None,
    }


async def test_a_refusal_after_a_layer_that_names_itself_quotes_it(
    kyverno: ControlPlane, view: LiveClusterView
) -> None:
    """The sidecar pushes each pod over a requests quota: the apiserver refuses the Dry Run's pod (ResourceQuota
    admission runs after every mutating layer), and its answer still carries Kyverno's warning, which the
    Dry Run's denial quotes. The apiserver refuses the real pod the same way."""
    cp, ns, name = kyverno, "chk-admit-kyverno-quota", "kyverno-job"
    _kyverno_namespace(cp, ns)
    requests = {"cpu": "100m"}
    _admits(cp, ns, requests)
    _quota(cp, ns, "cpu", {"requests.cpu": "250m"})
    await _wait_cached(view, "resourcequotas", ns, {"cpu"})

    ev = await _judge(view, _jobset(ns, name, 2, requests))
    by = {r.name: r for r in ev.results.checks}
    assert not ev.decision.allowed
    dry = by["Dry Run"]
    assert dry.status is Status.FAIL
    assert "exceeded quota: cpu, requested: requests.cpu=600m" in dry.message
    assert f'The dry run warned: "{_said(ns, f"{name}-node-0-0-dryrn")}". Fix: ' in dry.message, dry.message
    (created,) = _create_pods(cp, ns, name, requests, 1)
    assert created.returncode != 0 and "exceeded quota: cpu" in created.stderr
