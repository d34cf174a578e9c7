"""The fidelity matrix's pure parts (no cluster): the classification and the scenario table's shape."""

from __future__ import annotations

import pytest
import yaml

from e2e.fidelity.aiperf_scenarios import AIPERF_BOUND_SECONDS, AIPERF_SCENARIOS
from e2e.fidelity.run import BOUND_SECONDS, Outcome, Verdict, bound_of, classify, crashed_after_start
from e2e.fidelity.scenarios import KNOWN_LIMITATIONS, SCENARIOS, WORKLOAD_IMAGE
from e2e.harness.aiperf_manifests import tokenizer_configmap

ADMITTED = Verdict(True, "preflight", "")
DENIED = Verdict(False, "preflight", "TrainJob ... failed 1 preflight check")
REFUSED = Verdict(False, "apiserver", "admission webhook vtrainjob denied")


@pytest.mark.parametrize(
    ("verdict", "outcome", "known", "want"),
    [
        (ADMITTED, "runs", None, "ok"),
        (ADMITTED, "never-starts", None, "miss"),
        (ADMITTED, "fails", None, "miss"),
        (DENIED, "never-starts", None, "ok"),
        (DENIED, "fails", None, "ok"),
        (DENIED, "runs", None, "false-deny"),
        (REFUSED, "refused", None, "ok"),
        (DENIED, "runs", "no-gang", "known:no-gang"),
        (DENIED, "never-starts", "no-gang", "ok"),
    ],
)
def test_classify(verdict: Verdict, outcome: str, known: str | None, want: str) -> None:
    assert classify(verdict, Outcome(outcome, "", 0.0), known) == want


@pytest.mark.parametrize(
    ("res", "want"),
    [
        # the operator's words after a controller died mid-benchmark (the pods ran): run it again
        (("fails", "phase Failed: Controller container terminated before final export; recovered 1 file"), True),
        (("fails", "phase Failed: Controller container terminated before results were recoverable: Error"), True),
        # the operator refused the spec, or nothing started: the first outcome stands
        (("fails", "phase Failed: spec.benchmark.endpoint is required"), False),
        (("never-starts", "phase Pending at the bound"), False),
        (("runs", "phase Completed"), False),
    ],
)
def test_only_a_benchmark_that_died_after_it_started_runs_twice(res: tuple[str, str], want: bool) -> None:
    assert crashed_after_start(res) is want


def test_the_table() -> None:
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names)) >= 30
    for s in SCENARIOS:
        assert len(s.namespace) <= 63
        assert s.known is None or s.known in KNOWN_LIMITATIONS
        assert s.job_object()["metadata"]["namespace"] == s.namespace
        if s.kind == "TrainJob":
            assert s.job["spec"]["trainer"]["image"] == WORKLOAD_IMAGE
        else:
            assert s.kind == "AIPerfJob" and bound_of(s, BOUND_SECONDS) == AIPERF_BOUND_SECONDS, s.name
            assert s.prereqs[0] == tokenizer_configmap(), s.name  # the ConfigMap the job mounts
        objs = s.objects()
        assert objs[0]["kind"] == "Namespace" and objs[0]["metadata"]["labels"]["preflight-fidelity"] == "true"
        assert [o["metadata"]["namespace"] for o in objs[1 + len(s.cluster_prereqs) :]] == [s.namespace] * len(
            s.prereqs
        )


def test_the_aiperf_rows() -> None:
    assert [s.name for s in SCENARIOS[-len(AIPERF_SCENARIOS) :]] == [s.name for s in AIPERF_SCENARIOS]
    assert len(AIPERF_SCENARIOS) >= 9
    big = next(s for s in AIPERF_SCENARIOS if s.name == "aiperf-configmap-too-large")
    size = len(yaml.safe_dump(big.job_object()))
    assert 1 << 20 < size < 1_500_000, size  # the run_config ConfigMap passes 1 MiB; etcd takes the job
    long = next(s for s in AIPERF_SCENARIOS if s.name == "aiperf-name-too-long")
    assert len(long.job["metadata"]["name"]) == 40
