"""A JobSet applied directly, judged, then run on the real node: the verdict against the outcome.

JobSet v0.12.0, Trainer v2.3.0 and Kueue v0.17.0 in their default configuration on the real node
(e2e/harness/stack.py). For each JobSet the webhook's whole path runs in process on a live view
(adapter, checks, policy), then the same JobSet is created with no webhook in the way and the
cluster says what happens to it:

* a good JobSet: admitted with no warning; JobSet's controller runs it to Completed;
* one that reads a missing Secret: denied by Secrets with the fix; created anyway, its pods wait in
  CreateContainerConfigError and it never completes;
* one whose pods a ValidatingAdmissionPolicy refuses: denied by Dry Run with the policy's words
  (its Pod probe, behind Kueue's webhooks); created anyway, the Job controller never creates a pod
  (FailedCreate with the same words).

Marked ``node``.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.fidelity import scenarios_base
from e2e.harness.controlplane import ControlPlane
from e2e.harness.live import live_evaluate
from e2e.harness.stack import WORKLOAD_IMAGE, SharedStack, Stack, forbidden_env_policy
from webhook.checks import all_checks
from webhook.cluster.live import open_cluster_view
from webhook.config import Settings

pytestmark = pytest.mark.node

NS = "jobset-node"
POLICY = "e2e-jobset-no-forbidden-env"
SETTINGS = Settings.model_validate({"mode": "enforce", "secretTtlSeconds": 0, "publicRegistries": ["localhost"]})
VAP = forbidden_env_policy(POLICY, "preflight-e2e/jobset-node")


def jobset(name: str, env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "trainer", "image": WORKLOAD_IMAGE, "resources": {"requests": {"cpu": "10m"}}}
    if env:
        container["env"] = env
    return scenarios_base.jobset(name, NS, container, run_once=True)


@pytest.fixture(scope="module")
def stack(shared_stack: SharedStack) -> Iterator[Stack]:
    """The shared node (e2e/conftest.py), with this module's policy and namespace, deleted afterwards."""
    with shared_stack.borrowed(namespaces=[NS], objects=VAP) as st:
        st.cp.apply(VAP)
        st.namespace(NS, {"preflight-e2e/jobset-node": "true"})
        yield st


async def _evaluate(stack: Stack, obj: dict[str, Any]) -> Any:
    view = await open_cluster_view(SETTINGS, kubeconfig=str(stack.cp.kubeconfig), checks=all_checks(), wait_seconds=60)
    try:
        assert await view.wait_synced(60), view.ready_reason
        return await live_evaluate(obj, view, SETTINGS)
    finally:
        await view.close()


def _get(cp: ControlPlane, *args: str) -> dict[str, Any]:
    out = cp.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 and out.stdout else {}


def _wait(what: str, cond: Any, timeout: float = 240.0) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(1.0)  # polling the real cluster for a condition, with a deadline
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def _condition(cp: ControlPlane, name: str, ctype: str) -> bool:
    js = _get(cp, "jobset", name, "-n", NS)
    return any(
        c.get("type") == ctype and c.get("status") == "True" for c in (js.get("status") or {}).get("conditions") or []
    )


async def test_a_good_jobset_is_admitted_and_completes(stack: Stack) -> None:
    obj = jobset("good-js")
    ev = await _evaluate(stack, obj)
    assert ev.decision.allowed, ev.decision.message
    assert ev.decision.warnings == []
    cp = stack.cp
    cp.apply(copy.deepcopy(obj))
    _wait("JobSet good-js Completed", lambda: _condition(cp, "good-js", "Completed"))


async def test_a_missing_secret_is_denied_and_really_never_starts(stack: Stack) -> None:
    obj = jobset("nosecret-js", env=[{"name": "T", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}])
    ev = await _evaluate(stack, obj)
    assert not ev.decision.allowed
    assert f'Secret "absent" not found in namespace "{NS}"' in (ev.decision.message or "")
    cp = stack.cp
    cp.apply(copy.deepcopy(obj))

    def config_error() -> list[str]:
        pods = _get(cp, "pods", "-n", NS, "-l", "jobset.sigs.k8s.io/jobset-name=nosecret-js").get("items", [])
        return [
            (cs.get("state") or {}).get("waiting", {}).get("reason", "")
            for p in pods
            for cs in (p.get("status") or {}).get("containerStatuses") or []
            if (cs.get("state") or {}).get("waiting", {}).get("reason") == "CreateContainerConfigError"
        ]

    assert _wait("a pod of nosecret-js in CreateContainerConfigError", config_error)
    assert not _condition(cp, "nosecret-js", "Completed")


async def test_a_policy_on_its_pods_is_denied_by_dry_run_and_really_creates_no_pod(stack: Stack) -> None:
    obj = jobset("forbidden-js", env=[{"name": "FORBIDDEN", "value": "1"}])
    ev = await _evaluate(stack, obj)
    assert not ev.decision.allowed
    dry = [r for r in ev.results.checks if r.name == "Dry Run"]
    assert dry and dry[0].message.startswith("Pod for workers rejected by the apiserver: "), dry
    assert f"ValidatingAdmissionPolicy '{POLICY}'" in dry[0].message
    assert "pods may not set the env var FORBIDDEN" in dry[0].message
    # Dry Run did not send the JobSet itself: the apiserver admits it with this very request
    assert 'JobSet "forbidden-js"' not in dry[0].message
    cp = stack.cp
    cp.apply(copy.deepcopy(obj))

    def failed_create() -> list[str]:
        """The Job controller's FailedCreate messages once one carries the policy's words.

        The first create can be refused by Kueue's mpod.kb.io instead ("Job.batch ... not found"):
        its cached client has not seen the just-created Job yet. The Job controller retries with
        backoff, and the retry reaches the policy (CI 2026-12-02 saw only the first refusals).
        """
        events = _get(cp, "events", "-n", NS, "--field-selector", "reason=FailedCreate").get("items", [])
        messages = [e["message"] for e in events if "forbidden-js" in (e.get("involvedObject") or {}).get("name", "")]
        return messages if any("pods may not set the env var FORBIDDEN" in m for m in messages) else []

    messages = _wait("FailedCreate with the policy's words on a Job of forbidden-js", failed_create)
    assert any("pods may not set the env var FORBIDDEN" in m for m in messages), messages
    assert _get(cp, "pods", "-n", NS, "-l", "jobset.sigs.k8s.io/jobset-name=forbidden-js").get("items") == []
