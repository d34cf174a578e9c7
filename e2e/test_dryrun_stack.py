"""Dry Run on the real stack (issue 19): JobSet v0.12.0, Trainer v2.3.0 and Kueue v0.17.0 in their
default configuration, their real controllers and webhooks on the real node (e2e/harness/stack.py).

Kueue's mutating webhooks mjobset.kb.io, mjob.kb.io and mpod.kb.io refuse the dry-run JobSet, Jobs and Pods for
their controller owners, which exist only once the job is stored ("workload owner not found":
pkg/controller/jobframework/reconciler.go FindAncestorJobManagedByKueue). A refusing mutating
webhook stops the apiserver's admission chain (k8s.io/apiserver pkg/endpoints/handlers/create.go:
mutating admission, then the strategy's validation and validating admission in
pkg/registry/generic/registry/store.go Create), so the check sends each such object's twin
without the controller flag and reads every later layer's answer from it:

* a good TrainJob: Dry Run passes with no warning, and its details say which webhook looked
  the owner up (the twins were needed: the stack really refuses the first probes);
* a ValidatingAdmissionPolicy on Pods (a layer behind Kueue's webhook) refusing the job's pods:
  the TrainJob is denied with that policy's words; its passing twin is admitted with no warning.

The webhook's whole path runs in process (adapter, checks, policy) on a live view of the node's
apiserver. Marked ``node``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.fidelity.scenarios import trainjob
from e2e.harness.live import live_evaluate, result_of
from e2e.harness.stack import SharedStack, Stack, forbidden_env_policy
from webhook.checks import all_checks
from webhook.checks.dryrun import DryRun
from webhook.cluster.live import open_cluster_view
from webhook.config import Settings
from webhook.results import Status

pytestmark = pytest.mark.node

NS = "dryrun-stack"
POLICY = "e2e-no-forbidden-env"
#: a ValidatingAdmissionPolicy on Pods, bound to the namespaces labelled preflight-e2e/no-forbidden-env
VAP = forbidden_env_policy(POLICY, "preflight-e2e/no-forbidden-env")


@pytest.fixture(scope="module")
def stack(shared_stack: SharedStack) -> Iterator[Stack]:
    """The shared node (e2e/conftest.py), with this module's policy and namespace, deleted afterwards."""
    with shared_stack.borrowed(namespaces=[NS], objects=VAP) as st:
        st.cp.apply(VAP)
        st.namespace(NS, {"preflight-e2e/no-forbidden-env": "true"})
        _wait_enforced(st)
        yield st


def _direct_pod() -> dict[str, Any]:
    """A plain pod in NS with the env var the policy forbids."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "direct", "namespace": NS},
        "spec": {"containers": [{"name": "c", "image": "x", "env": [{"name": "FORBIDDEN", "value": "1"}]}]},
    }


def _wait_enforced(st: Stack, timeout: float = 60.0) -> None:
    """Until the apiserver enforces the new policy: its admission plugin takes a created
    ValidatingAdmissionPolicy and binding up from its informers, after the create returns
    (k8s.io/apiserver pkg/admission/plugin/policy/generic), so a dry run sent right after the apply
    may pass it by; seen in make conformance. A condition wait: a plain pod's server-side dry run."""
    deadline = time.monotonic() + timeout
    while True:
        out = st.cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(_direct_pod()), check=False)
        if "pods may not set the env var FORBIDDEN" in out.stderr:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"the policy {POLICY} was not enforced within {timeout:.0f}s: {out.stderr or out.stdout}")


def _job(name: str, **kw: Any) -> dict[str, Any]:
    job = trainjob(name, **kw)
    job["metadata"]["namespace"] = NS
    return job


async def _evaluate(stack: Stack, job: dict[str, Any]) -> Any:
    view = await open_cluster_view(
        Settings(), kubeconfig=str(stack.cp.kubeconfig), checks=all_checks(), wait_seconds=60
    )
    try:
        assert await view.wait_synced(60), view.ready_reason
        # what Dry Run cannot verify is said at /capabilities (and at start-up, and in a metric), not on an apply
        (dry_run,) = [c for c in view.capabilities() if c["check"] == "Dry Run"]
        assert dry_run["value"] == "yes", dry_run
        assert dry_run["unverified"] == "; ".join(text for _, text in DryRun.unverified)
        return await live_evaluate(job, view)
    finally:
        await view.close()


async def test_a_good_trainjob_gets_no_dry_run_warning(stack: Stack) -> None:
    ev = await _evaluate(stack, _job("good", env=[{"name": "ALLOWED", "value": "1"}]))
    r = result_of(ev, "Dry Run")
    assert (r.status, r.message) == (
        Status.PASS,
        'The apiserver accepts (dryRun=All) JobSet "good", a Job of each replicatedJob (node) and a pod of each group '
        "(node)",
    )
    # Kueue's webhooks did refuse the first probes for their owners: the twins answered
    assert r.details == [
        f'{subject}: admission webhook "{hook}" looks up its owner, which exists only once the job runs; '
        "every later admission layer accepts its twin without the controller flag of its ownerReference"
        for subject, hook in (
            ('JobSet "good"', "mjobset.kb.io"),
            ("Pod for node", "mpod.kb.io"),
            ("Job for node", "mjob.kb.io"),
        )
    ]
    assert ev.decision.allowed
    assert not [w for w in ev.decision.warnings if w.startswith("[Dry Run]")], ev.decision.warnings


async def test_a_policy_on_pods_behind_kueues_webhook_denies_with_its_words(stack: Stack) -> None:
    ev = await _evaluate(stack, _job("bad", env=[{"name": "FORBIDDEN", "value": "1"}]))
    r = result_of(ev, "Dry Run")
    assert r.status is Status.FAIL, (r.message, r.details)
    assert r.message == (
        'Pod for node rejected by the apiserver: pods "bad-node-0-0-dryrn" is forbidden: '
        f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: "
        "pods may not set the env var FORBIDDEN. Fix: satisfy the ValidatingAdmissionPolicy named in the message."
    )
    assert not ev.decision.allowed
    assert f"ValidatingAdmissionPolicy '{POLICY}'" in (ev.decision.message or "")
    # the policy's own answer for a plain pod with that env var, as kubectl gets it
    out = stack.cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(_direct_pod()), check=False)
    assert out.returncode != 0
    assert "pods may not set the env var FORBIDDEN" in out.stderr, out.stderr
