"""The AIPerf 0.13.0 operator on the real node (e2e/harness/aiperf_stack.py): up, a short real
benchmark against the stand-in runs to the operator's ``Completed``, and a job the operator's own
preflight refuses (its Secret missing) ends ``Failed`` with the operator's message.

One node, CoreDNS and JobSet (e2e/harness/stack.py) for the module. Marked ``node``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest
import yaml

from e2e.harness import aiperf_stack as A
from e2e.harness.stack import Stack, running_stack

pytestmark = pytest.mark.node

NAMESPACE = "aiperf-e2e"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with running_stack(components=("jobset",), runtimes=False, aiperf=True) as st:
        st.namespace(NAMESPACE)
        A.ensure_tokenizer(st.cp, NAMESPACE)
        yield st


def test_the_operator_runs_from_the_wheel(stack: Stack) -> None:
    cp = stack.cp
    dep = json.loads(cp.kubectl("get", "deploy", A.OPERATOR_NAME, "-n", A.OPERATOR_NAMESPACE, "-o", "json").stdout)
    assert dep["status"].get("readyReplicas") == 1, dep["status"]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:4] == ["kopf", "run", "-m", "aiperf.operator.main"]
    assert container["image"] == "localhost/preflight/aiperf:0.13.0"
    assert stack.aiperf is not None
    assert "kopf" in stack.aiperf.operator_log(400).lower()


def test_a_good_aiperfjob_completes(stack: Stack) -> None:
    cp = stack.cp
    cp.kubectl("create", "-f", "-", input=yaml.safe_dump(A.good_aiperfjob("bench", NAMESPACE)))
    out = A.wait_aiperfjob(cp, NAMESPACE, "bench", timeout=600)
    print(f"AIPerfJob bench: {out.phase} after {out.seconds:.0f}s", file=sys.stderr)
    assert out.phase == "Completed" and out.kind == "runs", (
        out.detail() + "\n" + A.container_logs(cp, NAMESPACE, "bench")
    )
    assert out.condition("Complete") == "True", out.detail()
    assert out.condition("PreflightPassed") == "True", out.detail()
    assert out.condition("ResultsAvailable") == "True", out.detail()  # fetched from the controller
    # the operator says Completed once it has the results; the JobSet then ends on its own
    after = A.wait_aiperfjob(cp, NAMESPACE, "bench", timeout=180, until=lambda o: o.jobset != "")
    print(f"JobSet aiperf-bench {after.jobset!r} {after.seconds:.0f}s after; pods {after.pods}", file=sys.stderr)
    assert after.jobset.startswith("Completed") or after.jobset == "absent", after.detail()


def test_the_operator_refuses_a_job_whose_secret_is_missing(stack: Stack) -> None:
    cp = stack.cp
    env = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]
    cp.kubectl("create", "-f", "-", input=yaml.safe_dump(A.good_aiperfjob("no-secret", NAMESPACE, env=env)))
    out = A.wait_aiperfjob(cp, NAMESPACE, "no-secret", timeout=180)
    print(f"AIPerfJob no-secret: {out.phase} after {out.seconds:.0f}s", file=sys.stderr)
    assert out.phase == "Failed" and out.kind == "fails", out.detail()
    pre = out.conditions.get("PreflightPassed") or {}
    assert pre.get("status") == "False" and pre.get("reason") == "PreflightFailed", out.detail()
    # the operator's own text (aiperf/operator/preflight/_workload.py, handlers/create.py)
    assert f"Secrets: Secret(s) not found: hf-token. Create with: kubectl create secret -n {NAMESPACE}" in str(
        pre.get("message")
    ), out.detail()
    assert out.pods == {}, out.detail()  # refused before anything was rendered
