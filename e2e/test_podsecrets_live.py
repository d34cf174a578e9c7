"""Dry Run's representative Pod and the Secrets rules, against the real kube-apiserver.

- The apiserver accepts a dry-run (and a real) Pod whose controller ownerReference names a
  Job that does not exist (the garbage collector acts later, not admission).
- A ValidatingAdmissionPolicy "no bare pods" (a pod needs a controller ownerReference) does
  not deny a good TrainJob or AIPerfJob through Dry Run: the probe is the pod the Job
  controller creates. It does deny a bare pod, which is what the probe used to be.
- A policy that refuses a pod because its owner Job is not found is about the probe only:
  Dry Run warns "cannot verify" and does not deny.
- A missing imagePullSecret warns (the kubelet pulls anonymously) unless the image is on a
  registry listed in privateRegistries; a CSI nodePublishSecretRef to a missing Secret denies;
  a Secret volume no container mounts is never read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane
from e2e.harness.live import live_evaluate, result_of
from e2e.harness.vap import deny_policy
from webhook.config import Settings
from webhook.kube import placeholder_uid
from webhook.models.dryrun_probe import pod_for
from webhook.results import Status
from webhook.workloads import build_workload

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "tests" / "oracle" / "samples"
RUNTIME = "ps-torch"
CSI_RUNTIME = "ps-torch-csi"


def _runtime(name: str = RUNTIME, *, csi: bool = False) -> dict[str, Any]:
    rt = yaml.safe_load((SAMPLES / "clustertrainingruntime.yaml").read_text())
    rt["metadata"]["name"] = name
    rt["spec"]["mlPolicy"]["torch"] = {}  # the sample's numProcPerNode is not in Trainer v2.3's CRD schema
    if csi:
        node = rt["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
        node["containers"][0]["volumeMounts"] = [{"name": "vault", "mountPath": "/vault", "readOnly": True}]
        node["volumes"] = [
            {"name": "vault", "csi": {"driver": "secrets-store.csi.k8s.io", "readOnly": True,
                                      "volumeAttributes": {"secretProviderClass": "vault"},
                                      "nodePublishSecretRef": {"name": "vault-creds"}}},
            {"name": "spare", "secret": {"secretName": "spare-tls"}},  # mounted by no container
        ]  # fmt: skip
    return rt


def _trainjob(ns: str, *, runtime: str = RUNTIME, pull_secret: bool = False) -> dict[str, Any]:
    """The oracle sample without Kueue, env Secrets or nodeSelector; optionally its pull Secret patch."""
    tj = yaml.safe_load((SAMPLES / "trainjob.yaml").read_text())
    tj["metadata"]["namespace"] = ns
    tj["metadata"]["labels"] = {}
    tj["spec"]["runtimeRef"]["name"] = runtime
    tj["spec"]["trainer"].pop("env", None)
    tj["spec"]["initializer"]["model"].pop("secretRef", None)
    if pull_secret:
        patch = tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        patch["template"]["spec"]["template"]["spec"].pop("nodeSelector")
    else:
        tj["spec"].pop("runtimePatches")
    return tj


def _aiperfjob(ns: str) -> dict[str, Any]:
    job = yaml.safe_load((ROOT / "e2e" / "samples" / "aiperfjob-good.yaml").read_text())
    job["metadata"]["namespace"] = ns
    return job


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> ControlPlane:
    control_plane.apply([_runtime(), _runtime(CSI_RUNTIME, csi=True)])
    return control_plane


# --- policies ----------------------------------------------------------------------------------


def _policy(name: str, label: str, validation: dict[str, Any]) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy on pod CREATE and its Deny binding for namespaces labelled `label`=true."""
    return deny_policy(name, resource="pods", validation=validation, namespace_labels={label: "true"})


NO_BARE_PODS = {
    "expression": "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller)",
    "message": "bare pods are not allowed: a pod needs a controller ownerReference",
}
#: a policy engine that looks the owning Job up and refuses when it is not there (the probe's never is)
OWNER_MUST_EXIST = {
    "expression": "!has(object.metadata.ownerReferences) || !object.metadata.ownerReferences.exists(r, r.kind == 'Job')",
    "messageExpression": "'Job \"' + object.metadata.ownerReferences.filter(r, r.kind == 'Job')[0].name + '\" not found'",
}


def _bare_pod(ns: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}  # fmt: skip


def _owned_pod(ns: str, name: str = "owned") -> dict[str, Any]:
    pod = _bare_pod(ns)
    pod["metadata"]["name"] = name
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "no-such-job",
                                           "uid": placeholder_uid("Job", ns, "no-such-job"), "controller": True}]  # fmt: skip
    return pod


def _dry_run(cp: ControlPlane, obj: dict[str, Any]) -> tuple[bool, str]:
    out = cp.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(obj), check=False)
    return out.returncode == 0, out.stdout if out.returncode == 0 else out.stderr


def _wait_for_policy(cp: ControlPlane, ns: str, pod: dict[str, Any], text: str) -> None:
    """Poll with a dry-run create until the new policy answers (the admission plugin follows informers)."""
    for _ in range(200):
        ok, out = _dry_run(cp, pod)
        if not ok and text in out:
            return
    raise AssertionError(f"policy never denied the pod in {ns}: {out}")


@pytest.fixture
def policy(cluster: ControlPlane) -> Iterator[Any]:
    """Factory: `policy(name, ns, validation, probe_pod, text)` installs a policy for `ns` and waits for it."""
    installed: list[str] = []

    def install(name: str, ns: str, validation: dict[str, Any], probe: dict[str, Any], text: str) -> None:
        label = f"e2e.preflight/{name}"
        cluster.ensure_namespace(ns)
        cluster.kubectl("label", "namespace", ns, f"{label}=true", "--overwrite")
        cluster.apply(_policy(name, label, validation))
        installed.append(name)
        _wait_for_policy(cluster, ns, probe, text)

    yield install
    for name in installed:
        cluster.kubectl("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", name,
                        "--ignore-not-found", "--wait=false", check=False)  # fmt: skip


# --- Dry Run -----------------------------------------------------------------------------------


async def test_a_pod_owned_by_an_absent_job_is_accepted(cluster: ControlPlane) -> None:
    """ownerReferences to objects that do not exist are allowed on create; only the garbage collector reacts, later."""
    ns = "ps-owner"
    cluster.ensure_namespace(ns)
    ok, out = _dry_run(cluster, _owned_pod(ns))
    assert ok, out
    assert json.loads(out)["metadata"]["ownerReferences"][0]["name"] == "no-such-job"
    # the probe exactly as Dry Run sends it
    wl = build_workload(_trainjob(ns), settings=Settings(), runtime_lookup=lambda kind, namespace, name: _runtime())
    assert wl is not None
    node = next(g for g in wl.pod_groups if g.name == "node")
    ok, out = _dry_run(cluster, pod_for(wl, node))
    assert ok, out
    created = json.loads(out)
    assert created["metadata"]["name"] == "llama-ft-node-0-0-dryrn"
    assert created["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    assert (created["spec"]["hostname"], created["spec"]["subdomain"]) == ("llama-ft-node-0-0", "llama-ft")
    # and not only in a dry run: a real create with an absent owner is stored too
    real = _owned_pod(ns, "owned-for-real")
    cluster.kubectl("create", "-f", "-", input=json.dumps(real))
    try:
        got = json.loads(cluster.kubectl("get", "pod", "owned-for-real", "-n", ns, "-o", "json").stdout)
        assert got["metadata"]["ownerReferences"][0]["kind"] == "Job"
    finally:
        cluster.kubectl("delete", "pod", "owned-for-real", "-n", ns, "--ignore-not-found", "--wait=false")
    assert cluster.kubectl("get", "pods", "-n", ns, "-o", "name").stdout.strip() in ("", "pod/owned-for-real")


async def test_no_bare_pods_policy_does_not_deny_good_jobs(cluster: ControlPlane, open_view: Any, policy: Any) -> None:
    ns = "ps-no-bare-pods"
    policy("ps-no-bare-pods", ns, NO_BARE_PODS, _bare_pod(ns), "bare pods are not allowed")
    cluster.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "llm", "namespace": ns},
                   "spec": {"ports": [{"port": 8000}]}})  # fmt: skip
    # the cluster really refuses a bare pod (what the probe was before), and accepts a Job's pod
    ok, out = _dry_run(cluster, _bare_pod(ns))
    assert not ok and "bare pods are not allowed: a pod needs a controller ownerReference" in out
    assert _dry_run(cluster, _owned_pod(ns))[0]

    view = await open_view()
    ev = await live_evaluate(_trainjob(ns), view)
    r = result_of(ev, "Dry Run")
    assert (r.status, r.message) == (
        Status.PASS,
        'The apiserver accepts (dryRun=All) JobSet "llama-ft", a Job of each replicatedJob (model-initializer, node) '
        "and a pod of each group (model-initializer, node)",
    )
    assert "Dry Run" not in ev.decision.denied_checks

    aiperf = _aiperfjob(ns)
    aiperf["spec"]["benchmark"]["endpoint"]["urls"] = [f"http://llm.{ns}.svc.cluster.local:8000"]
    ev = await live_evaluate(aiperf, view)
    r = result_of(ev, "Dry Run")
    assert (r.status, r.message) == (
        Status.PASS,
        'The apiserver accepts (dryRun=All) JobSet "aiperf-llama-bench", a Job of each replicatedJob (controller, '
        "workers) and a pod of each group (controller, workers)",
    )
    assert "Dry Run" not in ev.decision.denied_checks
    assert cluster.kubectl("get", "pods,jobs,jobsets", "-n", ns, "-o", "name").stdout.strip() == ""  # nothing written


async def test_a_policy_refusing_the_absent_owner_only_warns(
    cluster: ControlPlane, open_view: Any, policy: Any
) -> None:
    ns = "ps-owner-exists"
    policy("ps-owner-exists", ns, OWNER_MUST_EXIST, _owned_pod(ns), 'Job "no-such-job" not found')
    view = await open_view()
    ev = await live_evaluate(_trainjob(ns), view)
    r = result_of(ev, "Dry Run")
    assert r.status is Status.WARN
    assert r.details == [
        f"Cannot verify the Pod for {group}: the rejection concerns only the dry-run probe (its ownerReference to "
        f'Job "llama-ft-{group}-0", which exists only once the job runs): pods "llama-ft-{group}-0-0-dryrn" is forbidden: '
        f"ValidatingAdmissionPolicy 'ps-owner-exists' "
        f"with binding 'ps-owner-exists' denied request: Job \"llama-ft-{group}-0\" not found"
        for group in ("model-initializer", "node")
    ] + [
        # the pods could not be seen as admission creates them, said once (engine.UNSEEN)
        "The verdict read the pod templates as written, not the pods as admission creates them (mutating webhooks "
        "and policies, LimitRanger and the apiserver's other mutating plugins): the model-initializer pods (their "
        "dry run was not accepted); the node pods (their dry run was not accepted)"
    ]
    assert "Dry Run" not in ev.decision.denied_checks
    assert any(w.startswith("[Dry Run] Cannot verify the Pod for model-initializer") for w in ev.decision.warnings)


# --- Secrets -----------------------------------------------------------------------------------


async def test_missing_pull_secret_warns_unless_the_registry_is_private(cluster: ControlPlane, open_view: Any) -> None:
    ns = "ps-pull"
    cluster.ensure_namespace(ns)
    view = await open_view()
    tj = _trainjob(ns, pull_secret=True)
    ev = await live_evaluate(tj, view)
    r = result_of(ev, "Secrets")
    assert (r.status, r.message) == (
        Status.WARN,
        f'Secret "ghcr-pull" not found in namespace "{ns}" (referenced by imagePullSecrets of the node pods); '
        "the kubelet pulls without it, which works only for public images. "
        f"Fix: kubectl create secret docker-registry ghcr-pull -n {ns} --docker-server=<registry> "
        "--docker-username=<user> --docker-password=…",
    )
    assert "Secrets" not in ev.decision.denied_checks
    assert any(
        w.startswith(f'[Secrets] Secret "ghcr-pull" not found in namespace "{ns}"') for w in ev.decision.warnings
    )

    settings = Settings(privateRegistries=["ghcr.io/acme"])
    ev = await live_evaluate(tj, view, settings)
    r = result_of(ev, "Secrets")
    assert (r.status, r.message) == (
        Status.FAIL,
        f'Secret "ghcr-pull" not found in namespace "{ns}" (referenced by imagePullSecrets of the node pods); '
        'private registry "ghcr.io/acme" needs it for image "ghcr.io/acme/llama-ft:1.4.2". '
        f"Fix: kubectl create secret docker-registry ghcr-pull -n {ns} --docker-server=ghcr.io "
        "--docker-username=<user> --docker-password=…",
    )
    assert not ev.decision.allowed and "Secrets" in ev.decision.denied_checks


async def test_csi_node_publish_secret_ref_to_a_missing_secret_denies(cluster: ControlPlane, open_view: Any) -> None:
    ns = "ps-csi"
    cluster.ensure_namespace(ns)
    view = await open_view()
    tj = _trainjob(ns, runtime=CSI_RUNTIME)
    ev = await live_evaluate(tj, view)
    r = result_of(ev, "Secrets")
    assert (r.status, r.message) == (
        Status.FAIL,
        f'Secret "vault-creds" not found in namespace "{ns}" (referenced by volume vault of the node pods). '
        f"Fix: kubectl create secret generic vault-creds -n {ns} --from-literal=<key>=…",
    )
    assert not ev.decision.allowed and "Secrets" in ev.decision.denied_checks
    # the apiserver itself has no objection to the pod: only the kubelet's mount would fail
    assert result_of(ev, "Dry Run").status is Status.PASS

    cluster.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "vault-creds", "namespace": ns},
                   "stringData": {"token": "never-shown"}})  # fmt: skip
    view = await open_view(Settings(secretTtlSeconds=0))
    ev = await live_evaluate(tj, view)
    r = result_of(ev, "Secrets")
    assert (r.status, r.message, r.details) == (
        Status.PASS,
        "1 Secret exists with the keys used: vault-creds",
        ['Secret "spare-tls" is not read: volume spare is mounted by no container'],
    )
    assert "never-shown" not in json.dumps(ev.results.to_dict())
