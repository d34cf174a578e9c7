"""Dry Run sends its dry runs once for the most common pair: `kubectl apply --dry-run=server`
followed by the real apply of the same TrainJob (webhook.models.dryrun_cache), and one Pod per
distinct pod template (pod groups with the same Job template share one).

Counted at the apiserver: its audit log records every create of jobsets and pods, the dry
runs included (their requestURI carries dryRun=All).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from e2e.conftest import SAMPLES_DIR
from e2e.harness.controlplane import ControlPlane
from e2e.harness.runner import RunningWebhook
from e2e.harness.runner import stored as exists

#: a namespaced runtime whose replicatedJobs `aux-a` and `aux-bb` hold the same Job template
TWIN_RUNTIME = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: e2e-twin-aux, namespace: demo-train}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
            spec:
              template:
                spec:
                  containers:
                    - {name: node, image: "pytorch/pytorch:2.7.1", resources: {requests: {cpu: "1", memory: 1Gi}}}
"""
_AUX = """
        - name: {name}
          template:
            spec:
              template:
                spec:
                  containers:
                    - {{name: aux, image: "busybox:1.37", resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}}}
"""
TWIN_RUNTIME += _AUX.format(name="aux-a") + _AUX.format(name="aux-bb")


@pytest.fixture(scope="module")
def webhook_setup(samples_cluster: ControlPlane) -> None:
    """The twin runtime, before the webhook starts (its runtime cache lists it then)."""
    samples_cluster.kubectl("apply", "-f", "-", input=TWIN_RUNTIME)


def dry_run_creates(cp: ControlPlane, ns: str, prefix: str) -> list[tuple[str, str]]:
    """(resource, name) of every dryRun=All create of jobsets and pods whose name contains ``prefix``."""
    return [
        (ref.get("resource"), ref.get("name"))
        for e in cp.audit_events()
        if e.get("stage") == "ResponseComplete"
        and e.get("verb") == "create"
        and "dryRun=All" in (e.get("requestURI") or "")
        and (ref := e.get("objectRef") or {}).get("resource") in ("jobsets", "pods")
        and ref.get("namespace") == ns
        and prefix in str(ref.get("name") or "")
    ]


@pytest.mark.parametrize("sample", ["trainjob-good", "aiperfjob-good"])
def test_dry_run_then_apply_dry_runs_once(
    samples_cluster: ControlPlane, sample_webhook: RunningWebhook, sample: str
) -> None:
    """The second apply carries a new metadata.uid (the AIPerfJob's containers get it in env): still one dry run."""
    cp = samples_cluster
    job: dict[str, Any] = yaml.safe_load((SAMPLES_DIR / f"{sample}.yaml").read_text())
    name, ns = f"e2e-dryrun-once-{sample.split('-')[0]}", job["metadata"]["namespace"]
    job["metadata"]["name"] = name
    manifest = yaml.safe_dump(job, sort_keys=False)
    reviews0 = sample_webhook.requests_total()
    try:
        first = cp.kubectl("apply", "-f", "-", "--dry-run=server", input=manifest, check=False)
        assert first.returncode == 0, first.stderr
        after_first = dry_run_creates(cp, ns, name)
        second = cp.kubectl("apply", "-f", "-", input=manifest, check=False)
        assert second.returncode == 0, second.stderr
        assert exists(cp, job)
        # both applies were reviewed, the second one from the cache: no new dry run at the apiserver
        assert sample_webhook.requests_total() - reviews0 == 2
        # the first apply: the JobSet once, a Pod per pod group once, none twice
        resources = [r for r, _ in after_first]
        assert resources.count("jobsets") == 1 and resources.count("pods") >= 1, after_first
        assert len(set(after_first)) == len(after_first), after_first
        assert dry_run_creates(cp, ns, name) == after_first
    finally:
        cp.kubectl("delete", job["kind"].lower(), name, "-n", ns, "--ignore-not-found", check=False)


def test_groups_with_one_pod_template_send_one_pod(
    samples_cluster: ControlPlane, sample_webhook: RunningWebhook
) -> None:
    """aux-a and aux-bb differ only in name: the apiserver sees the JobSet, node's Pod and one aux Pod
    (aux-bb's: the longer name), and accepts them."""
    cp = samples_cluster
    name, ns = "e2e-dryrun-twins", "demo-train"
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"runtimeRef": {"kind": "TrainingRuntime", "name": "e2e-twin-aux"}, "trainer": {"numNodes": 1}},
    }
    reviews0 = sample_webhook.requests_total()
    done = cp.kubectl("apply", "-f", "-", "--dry-run=server", input=yaml.safe_dump(job), check=False)
    assert done.returncode == 0, done.stderr
    assert sample_webhook.requests_total() - reviews0 == 1
    assert sorted(dry_run_creates(cp, ns, name)) == [
        ("jobsets", name),
        ("pods", f"{name}-aux-bb-0-0-dryrn"),
        ("pods", f"{name}-node-0-0-dryrn"),
    ]


def test_the_child_a_sweep_dry_ran_is_not_dry_run_again_when_the_controller_creates_it(
    samples_cluster: ControlPlane, sample_webhook: RunningWebhook
) -> None:
    """The sweep's review dry-runs its heaviest child's JobSet and Pods; the sweep controller then creates that
    child (AIPerf 0.13.0 sweep_controller/k8s_executor.py `_build_child_spec`, `_build_child_metadata`: the sweep's
    labels, two annotations and an ownerReference to the sweep, its own new uid): the child's review finds the
    outcomes in the cache, so the apiserver sees them once."""
    from webhook.config import Settings
    from webhook.workloads.aiperf_sweep import build

    cp = samples_cluster
    sweep: dict[str, Any] = yaml.safe_load((SAMPLES_DIR / "aiperfsweep-good.yaml").read_text())
    name, ns = "e2e-dr-sweep", sweep["metadata"]["namespace"]
    sweep["metadata"]["name"] = name
    try:
        done = cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(sweep), check=False)
        assert done.returncode == 0, done.stderr
        child_runs = dry_run_creates(cp, ns, f"{name}-v")
        (jobset,) = {n for r, n in child_runs if r == "jobsets"}  # the operator names it aiperf-<job>
        child = jobset.removeprefix("aiperf-")
        stored = yaml.safe_load(cp.kubectl("get", "aiperfsweep", name, "-n", ns, "-o", "yaml").stdout)
        # the child as the controller writes it: the adapter's own child object, plus what it adds
        wl = build(stored, settings=Settings(), namespace=ns)
        (mine,) = [c for c in wl.children if c.name == child]
        obj = dict(mine.workload.obj)
        meta = {k: v for k, v in obj["metadata"].items() if k not in ("creationTimestamp", "uid")}
        meta["annotations"] = {"aiperf.nvidia.com/run-identity": "e2e", "aiperf.nvidia.com/variation-values": "{}"}
        meta["ownerReferences"] = [
            {"apiVersion": sweep["apiVersion"], "kind": "AIPerfSweep", "name": name,
             "uid": stored["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        ]  # fmt: skip
        obj["metadata"] = meta
        done = cp.kubectl("apply", "-f", "-", "--dry-run=server", input=yaml.safe_dump(obj), check=False)
        assert done.returncode == 0, done.stderr
        assert dry_run_creates(cp, ns, f"{name}-v") == child_runs
    finally:
        cp.kubectl("delete", "aiperfsweep", name, "-n", ns, "--ignore-not-found", check=False)
