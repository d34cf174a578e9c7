"""The fidelity matrix's pure parts (no cluster): the classification and the scenario table's shape."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yaml

from e2e.fidelity.aiperf_scenarios import AIPERF_BOUND_SECONDS, AIPERF_SCENARIOS
from e2e.fidelity.dra_scenarios import DEVICES as DRA_DEVICES
from e2e.fidelity.dra_scenarios import DRA_SCENARIOS, needs_dra
from e2e.fidelity.imagepull_scenarios import (
    PULL_PASSWORD,
    PULL_USER,
    REGISTRY_PLACEHOLDER,
    foreign_arch,
    needs_registry,
)
from e2e.fidelity.jobset_scenarios import JOBSET_SCENARIOS
from e2e.fidelity.run import (
    AFTER_HELD,
    BOUND_SECONDS,
    JOBSET_LABEL,
    WHILE_HELD,
    ClusterQueueWatch,
    Outcome,
    QueueOrder,
    Verdict,
    _aiperfjob_outcome,
    _jobset_outcome,
    bound_of,
    classify,
    clip,
    crashed_after_start,
    select,
    with_registry,
)
from e2e.fidelity.scenarios import KNOWN_LIMITATIONS, SCENARIOS, WORKLOAD_IMAGE, by_name
from e2e.harness.aiperf_manifests import tokenizer_configmap
from e2e.harness.controlplane import ControlPlane
from e2e.harness.registry import PUSHED_LABEL, pushed_config

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
        # the benchmark finished; the operator's fetch of its results lost the race with shutdown
        (
            (
                "fails",
                "phase Failed: Failed to fetch results; PreflightHasWarnings (NoWarnings): No preflight warnings; "
                "ResultsAvailable (ResultsFetchFailed): Failed to fetch results; Complete (JobFailed): Job failed",
            ),
            True,
        ),
        # the operator found the job's own endpoint unreachable before the run (aiperf-endpoint-no-ready,
        # CI's words): the job is at fault, every run dies the same way; the first outcome stands
        (
            (
                "fails",
                "phase Failed: Controller container terminated before final export; recovered 1 partial "
                "checkpoint file(s); EndpointReachable (EndpointUnreachable): Endpoint "
                "http://llm.fx-aiperf-endpoint-no-ready.svc.cluster.local:8000 unreachable: Unexpected error: ",
            ),
            False,
        ),
        # every pod started, the benchmark was not done at the bound (CI: startup probes failing on the
        # loaded node): run it again, the last run is the outcome
        (
            (
                "never-starts",
                "pods started, benchmark not done: phase Running at the bound; pods {'c-0': 'Running', "
                "'w-0': 'Running'}; JobSet -; event Unhealthy on Pod: Startup probe failed",
            ),
            True,
        ),
        # the JobSet failed from a Job failure after its pods started (CI, three matrix runs in a row:
        # the controller killed by its startup probe on the loaded node): run it again
        (
            (
                "fails",
                "pods started, then failed: phase Failed: jobset failed due to one or more job failures "
                "(first failed job: aiperf-bench-controller-0); Complete (JobFailed): Job failed",
            ),
            True,
        ),
        # the operator refused the spec, or nothing started: the first outcome stands
        (("fails", "phase Failed: spec.benchmark.endpoint is required"), False),
        (("never-starts", "phase Pending at the bound"), False),
        (("never-starts", "phase Running at the bound; pods {'c-0': 'Pending'}; JobSet -"), False),
        (("runs", "phase Completed"), False),
    ],
)
def test_only_a_benchmark_that_died_after_it_started_runs_twice(res: tuple[str, str], want: bool) -> None:
    assert crashed_after_start(res) is want


def _phased_pod(name: str, phase: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": phase}}


def test_an_aiperfjob_whose_pods_all_started_but_not_done_at_the_bound_runs_again() -> None:
    job = {"metadata": {"name": "b", "namespace": "n"}, "status": {"phase": "Running"}}
    running = [_phased_pod("c-0", "Running"), _phased_pod("w-0", "Running")]
    assert _aiperfjob_outcome(job, running, None, last=False, events=[]) is None  # not yet at the bound
    res = _aiperfjob_outcome(job, running, None, last=True, events=[])
    assert res is not None and res[0] == "never-starts" and crashed_after_start(res)
    held = _aiperfjob_outcome(
        job, [_phased_pod("c-0", "Running"), _phased_pod("w-0", "Pending")], None, last=True, events=[]
    )
    assert held is not None and held[0] == "never-starts" and not crashed_after_start(held)
    assert not crashed_after_start(_aiperfjob_outcome(job, [], None, last=True, events=[]) or ("", ""))


def test_the_table() -> None:
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names)) >= 60
    for s in SCENARIOS:
        assert len(s.namespace) <= 63
        assert s.known is None or s.known in KNOWN_LIMITATIONS
        assert s.job_object()["metadata"]["namespace"] == s.namespace
        if s.kind == "TrainJob":
            # the workload image, loaded into containerd; the Image Pull rows pull it from the registry
            image = s.job["spec"]["trainer"]["image"]
            assert image == WORKLOAD_IMAGE or image.startswith(f"{REGISTRY_PLACEHOLDER}/fidelity/workload:"), s.name
        elif s.kind == "JobSet":
            assert bound_of(s, BOUND_SECONDS) == BOUND_SECONDS, s.name
            for rj in s.job["spec"]["replicatedJobs"]:
                assert [c["image"] for c in rj["template"]["spec"]["template"]["spec"]["containers"]] == [
                    WORKLOAD_IMAGE
                ]
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


# --------------------------------------------------------------------------- a JobSet's outcome


def _js(*conditions: tuple[str, str, str]) -> dict:  # type: ignore[type-arg]
    return {
        "metadata": {"name": "js"},
        "status": {"conditions": [{"type": t, "status": st, "reason": "R", "message": m} for t, st, m in conditions]},
    }


def _pod(phase: str, waiting: str | None = None) -> dict:  # type: ignore[type-arg]
    status: dict = {"phase": phase}  # type: ignore[type-arg]
    if waiting:
        status["containerStatuses"] = [
            {"name": "worker", "state": {"waiting": {"reason": waiting, "message": "couldn't find key hf_token"}}}
        ]
    return {"metadata": {"labels": {JOBSET_LABEL: "js"}}, "status": status}


def test_a_completed_jobset_runs_and_a_failed_one_fails_before_the_bound() -> None:
    assert _jobset_outcome(_js(("Completed", "True", "jobset completed successfully")), [], False, []) == (
        "runs",
        "Completed: jobset completed successfully",
    )
    assert _jobset_outcome(_js(("Failed", "True", "jobset failed")), [], False, []) == (
        "fails",
        "Failed (R): jobset failed",
    )
    # a condition that is False says nothing yet
    assert _jobset_outcome(_js(("Completed", "False", "")), [_pod("Running")], False, []) is None


def test_a_jobset_at_the_bound_runs_if_its_pods_do_and_else_never_starts_with_what_holds_it() -> None:
    assert _jobset_outcome(_js(), [_pod("Running"), _pod("Pending")], True, []) == (
        "runs",
        "1/2 pods Running or Succeeded, not Completed at the bound",
    )
    kind, detail = _jobset_outcome(_js(), [_pod("Pending", "CreateContainerConfigError")], True, []) or ("", "")
    assert kind == "never-starts"
    assert detail == "container worker CreateContainerConfigError: couldn't find key hf_token"
    event = {
        "type": "Warning",
        "reason": "FailedCreate",
        "message": "pods may not set the env var FORBIDDEN",
        "involvedObject": {"kind": "Job"},
    }
    assert _jobset_outcome({}, [], True, [event]) == (
        "never-starts",
        "no pod created; event FailedCreate on Job: pods may not set the env var FORBIDDEN",
    )


def test_the_jobset_rows() -> None:
    names = [s.name for s in JOBSET_SCENARIOS]
    assert [s.name for s in select("jobset")] == [s.name for s in SCENARIOS if "jobset" in s.name]
    assert set(names) <= {s.name for s in SCENARIOS}
    assert {s.kind for s in JOBSET_SCENARIOS} == {"JobSet"}
    assert "good-jobset" in names and "jobset-secret-key-missing" in names
    # every rule row has its passing twin in a namespace with the same labels and policies
    for bad in (n for n in names if n.endswith("-violating")):
        twin = bad.removesuffix("-violating") + "-compliant"
        assert twin in names, bad
        b, g = (next(s for s in JOBSET_SCENARIOS if s.name == n) for n in (bad, twin))
        assert b.namespace_labels == g.namespace_labels and b.cluster_prereqs == g.cluster_prereqs


# --------------------------------------------------------------------------- the DRA rows


def test_the_dra_rows_need_the_plugin_and_only_they_do() -> None:
    names = [s.name for s in DRA_SCENARIOS]
    assert {"good-dra-trainjob", "good-dra-aiperf"} <= set(names) and len(names) >= 5
    assert all("dra" in n for n in names)  # `python -m e2e.fidelity.run -k dra` selects them all
    assert needs_dra(DRA_SCENARIOS) and all(needs_dra([s]) for s in DRA_SCENARIOS)
    assert not needs_dra([s for s in SCENARIOS if s not in DRA_SCENARIOS])
    # the runnable rows fit the plugin's devices all at once (a TrainJob pod, the AIPerfJob's 2 pods);
    # the "too many" row asks more than the node has
    assert 1 + 2 <= DRA_DEVICES
    many = next(s for s in DRA_SCENARIOS if s.name == "dra-trainjob-too-many")
    assert many.prereqs[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] > DRA_DEVICES
    for s in DRA_SCENARIOS:
        tmpl = next(o for o in s.prereqs if o["kind"] == "ResourceClaimTemplate")
        assert tmpl["metadata"]["name"] == "gpu", s.name


def test_the_image_pull_rows_get_the_registry_address_in_their_job_and_pull_secret() -> None:
    """The runner writes the registry's address where the Image Pull rows name the placeholder (the
    image and the pull Secret's auths), and starts the registry only for a selection holding them."""
    rows = select("image-pull")
    assert [s.name for s in rows] == [
        "image-pull-tag-missing",
        "image-pull-tag-present",
        "image-pull-no-credentials",
        "image-pull-wrong-credentials",
        "image-pull-index-foreign-platform",
        "image-pull-index-node-platform",
    ]
    assert needs_registry(rows) and not needs_registry(select("quota"))
    s = with_registry(rows[0], "10.244.0.1:5443")
    assert s.job["spec"]["trainer"]["image"] == "10.244.0.1:5443/fidelity/workload:9.9"
    (sec,) = s.prereqs
    auths = json.loads(sec["stringData"][".dockerconfigjson"])["auths"]
    assert list(auths) == ["10.244.0.1:5443"] and sec["type"] == "kubernetes.io/dockerconfigjson"
    assert REGISTRY_PLACEHOLDER in json.dumps(rows[0].job)  # the table itself is left as it is


def test_the_credential_rows_pull_tags_no_other_row_pulls_and_the_wrong_secret_has_a_wrong_password() -> None:
    """A tag pulled by one row is on the node for the next (imagePullPolicy IfNotPresent): the rows
    without the right credentials name tags of their own."""
    rows = {s.name: s for s in select("image-pull")}
    images = [s.job["spec"]["trainer"]["image"] for s in rows.values()]
    assert len(set(images)) == len(images)
    assert (
        "imagePullSecrets" not in json.dumps(rows["image-pull-no-credentials"].job)
        and not rows["image-pull-no-credentials"].prereqs
    )
    (sec,) = rows["image-pull-wrong-credentials"].prereqs
    (entry,) = json.loads(sec["stringData"][".dockerconfigjson"])["auths"].values()
    assert entry["username"] == PULL_USER and entry["password"] not in ("", PULL_PASSWORD)
    assert foreign_arch("amd64") == "s390x" and foreign_arch("s390x") == "ppc64le"


def test_clip_keeps_the_start_and_the_cause_at_the_end() -> None:
    err = 'failed to pull and unpack image "x": ' + "failed to resolve reference: " * 20 + "401 Unauthorized"
    out = clip(err)
    assert len(out) == 240 and out.startswith("failed to pull and unpack image") and out.endswith("401 Unauthorized")
    assert " … " in out and clip("short") == "short"


def _failed_job() -> dict[str, Any]:
    msg = "jobset failed due to one or more job failures (first failed job: aiperf-b-controller-0)"
    return {
        "metadata": {"name": "b", "namespace": "n"},
        "status": {
            "phase": "Failed",
            "error": msg,
            "conditions": [{"type": "Complete", "status": "False", "reason": "JobFailed", "message": "Job failed"}],
        },
    }


def _pod_with(name: str, phase: str, **container: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": phase, "containerStatuses": [{"name": "c", **container}]}}


def test_an_aiperfjob_whose_jobset_failed_after_its_pods_started_runs_again_and_says_how_they_ended() -> None:
    killed = _pod_with(
        "c-0",
        "Failed",
        state={"terminated": {"reason": "Error", "exitCode": 137, "startedAt": "2026-12-02T10:00:00Z"}},
    )
    probe = {
        "type": "Warning",
        "reason": "Unhealthy",
        "message": "Startup probe failed: dial tcp 10.0.0.5:9090: connect: connection refused",
        "involvedObject": {"kind": "Pod", "name": "c-0"},
    }
    res = _aiperfjob_outcome(_failed_job(), [killed], None, last=False, events=[probe])
    assert res == (
        "fails",
        "pods started, then failed: phase Failed: jobset failed due to one or more job failures "
        "(first failed job: aiperf-b-controller-0); Complete (JobFailed): Job failed; "
        "containers: c-0/c Error exit 137; event Unhealthy on Pod: Startup probe failed: "
        "dial tcp 10.0.0.5:9090: connect: connection refused",
    )
    assert crashed_after_start(res)
    # a failed Job's pods may be gone by the time the runner looks: the Job failure is the evidence
    gone = _aiperfjob_outcome(_failed_job(), [], None, last=False, events=[])
    assert gone is not None and gone[1].startswith("pods started, then failed: ") and crashed_after_start(gone)


@pytest.mark.parametrize(
    "container",
    [
        {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "pull access denied"}}},
        {"state": {"waiting": {"reason": "CreateContainerConfigError", "message": "key x not found"}}},
        {"state": {"terminated": {"reason": "StartError", "exitCode": 128}}},
    ],
)
def test_an_aiperfjob_with_a_container_that_never_ran_is_not_run_again(container: dict[str, Any]) -> None:
    """A pod that never ran a container fails the same way every run: the first outcome stands."""
    res = _aiperfjob_outcome(_failed_job(), [_pod_with("w-0", "Pending", **container)], None, last=False, events=[])
    assert res is not None and res[0] == "fails" and not crashed_after_start(res)


def test_an_aiperfjob_with_a_pod_never_created_is_not_started_at_the_bound() -> None:
    """CI, aiperf-pods-quota: a pods quota of 1 refused the controller pod, the worker ran; the
    JobSet's replicatedJobs ask for 2 pods at once, so the job did not start and runs no more."""
    jobset = {
        "spec": {
            "replicatedJobs": [
                {"name": "controller", "replicas": 1, "template": {"spec": {"parallelism": 1}}},
                {"name": "workers", "template": {"spec": {}}},
            ]
        }
    }
    job = {"metadata": {"name": "b", "namespace": "n"}, "status": {"phase": "Initializing"}}
    one = _aiperfjob_outcome(job, [_phased_pod("w-0", "Running")], jobset, last=True, events=[])
    assert one is not None and one[0] == "never-starts" and not crashed_after_start(one)
    both = [_phased_pod("c-0", "Running"), _phased_pod("w-0", "Running")]
    res = _aiperfjob_outcome(job, both, jobset, last=True, events=[])
    assert res is not None and res[1].startswith("pods started, benchmark not done") and crashed_after_start(res)


WAIT_WARNING = '[Kueue Capacity] TrainJob "train" will wait in ClusterQueue "cq": it needs cpu 100m, 0 free now'
WARNED = Verdict(True, "preflight", "", [WAIT_WARNING])


@pytest.mark.parametrize(
    ("verdict", "admission", "want"),
    [
        (ADMITTED, WHILE_HELD, "ok"),
        (WARNED, AFTER_HELD, "ok"),
        (WARNED, WHILE_HELD, "wrong-wait"),  # warned, and Kueue admitted it at once: noise
        (ADMITTED, AFTER_HELD, "wrong-wait"),  # not warned, and it waited
        (Verdict(True, "preflight", "", ["[Kueue Capacity] other"]), AFTER_HELD, "wrong-wait"),
        (WARNED, "", "ok"),  # no order seen (no before jobs): nothing to compare
    ],
)
def test_a_job_behind_a_held_queue_is_warned_that_it_will_wait_exactly_when_it_does(
    verdict: Verdict, admission: str, want: str
) -> None:
    assert classify(verdict, Outcome("runs", "", 0.0, admission), None) == want


def _wl(owner: str, *conditions: tuple[str, str, str], cq: str = "fx-cq", kind: str = "TrainJob") -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": t, "status": st, "message": m} for t, st, m in conditions]}
    if any(t == "Admitted" and st == "True" for t, st, _ in conditions):
        status["admission"] = {"clusterQueue": cq}
    meta = {"name": f"trainjob-{owner}-x", "ownerReferences": [{"kind": kind, "name": owner}]}
    return {"metadata": meta, "status": status}


def _cq(borrowed: str = "0", reserving: int = 1, name: str = "fx-cq") -> dict[str, Any]:
    """A version of a ClusterQueue as the watch reads it (ClusterQueueWatch)."""
    res = [{"name": "cpu", "total": "200m", "borrowed": borrowed}, {"name": "memory", "total": "128Mi"}]
    status = {"reservingWorkloads": reserving, "flavorsReservation": [{"name": "fx-default", "resources": res}]}
    return {"metadata": {"name": name}, "status": status}


PENDING = ("QuotaReserved", "False", "couldn't assign flavors to pod set node: insufficient unused quota for cpu")
ADMITTED_WL = (("QuotaReserved", "True", ""), ("Admitted", "True", ""))


def test_the_runner_sees_a_job_kept_pending_behind_the_before_jobs_then_admitted_after_they_end() -> None:
    s = by_name()["kueue-waits-behind-running"]
    order = QueueOrder(s, created=100.0)
    hold = _wl("hold", *ADMITTED_WL)
    assert not order.see([hold], 101.0)  # Kueue has not made the job's Workload yet
    assert not order.see([hold, _wl("train")], 102.0)  # made, not tried yet
    assert order.see([hold, _wl("train", PENDING)], 104.0)  # kept pending: end the before jobs
    order.released = 104.0
    assert not order.see([hold, _wl("train", PENDING)], 106.0)
    assert [order.gone] == [None]  # not yet gone
    assert not order.see([_wl("train", PENDING)], 108.0)
    assert order.gone == 108.0
    order.see([_wl("train", *ADMITTED_WL)], 110.0)
    assert order.admission == AFTER_HELD
    assert order.text() == (
        'Kueue kept it pending while TrainJob "hold" held the queue (couldn\'t assign flavors to pod set node: '
        'insufficient unused quota for cpu); the runner ended TrainJob "hold" at +4 s, gone at +8 s; '
        "Kueue admitted it at +10 s"
    )


def test_the_runner_sees_a_job_admitted_while_the_before_jobs_hold_the_queue_and_what_it_borrows() -> None:
    s = by_name()["kueue-borrows-beside-running"]
    order = QueueOrder(s, created=50.0)
    hold = _wl("hold", *ADMITTED_WL)
    assert not order.see([hold, _wl("train", *ADMITTED_WL)], 53.0)
    assert order.admission == WHILE_HELD and order.released is None
    assert (order.cq, order.holders) == ("fx-cq", 1)
    # the watch's versions: the holder alone (no borrowing), another queue borrowing, then the job's
    # ClusterQueue reserving for both and borrowing; the poll that saw the admission read none of it
    order.take_borrowing(
        [(49.0, _cq()), (52.0, _cq("1", reserving=3, name="other")), (54.0, _cq("100m", reserving=2)), (58.0, _cq())]
    )
    assert order.text() == (
        'Kueue admitted it at +3 s while TrainJob "hold" held the queue, its ClusterQueue borrowing cpu 100m '
        'of flavor "fx-default" from its cohort'
    )
    never = QueueOrder(s, created=0.0)
    never.see([hold, _wl("train")], 1.0)
    assert never.admission == ""


def test_only_what_the_queue_borrowed_for_the_job_while_the_before_jobs_held_it_counts() -> None:
    s = by_name()["kueue-waits-behind-running"]
    hold = _wl("hold", *ADMITTED_WL)
    alone = QueueOrder(s, created=0.0)
    alone.see([hold, _wl("train", *ADMITTED_WL)], 2.0)
    alone.take_borrowing([(1.0, _cq("100m", reserving=1))])  # the holder's own borrowing, not the job's
    assert alone.borrowed == ""
    ended = QueueOrder(s, created=0.0)
    assert ended.see([hold, _wl("train", PENDING)], 2.0)
    ended.released = 2.0
    ended.see([_wl("train", *ADMITTED_WL)], 6.0)
    ended.take_borrowing([(7.0, _cq("100m", reserving=2))])  # after the runner ended them
    assert ended.borrowed == "" and ended.admission == AFTER_HELD


def test_the_cluster_queue_watch_reads_each_version_kubectl_prints(tmp_path: Path) -> None:
    """kubectl get -w -o json prints whole objects, indented, one after another: each is a version."""
    script = tmp_path / "kubectl"
    versions = [_cq(), _cq("100m", reserving=2)]
    script.write_text("#!/bin/sh\ncat <<'EOF'\n" + "".join(json.dumps(v, indent=4) + "\n" for v in versions)
                      + "EOF\nexec sleep 600\n")  # fmt: skip
    script.chmod(0o755)
    cp = SimpleNamespace(kubectl_path=script, kubeconfig=tmp_path / "kubeconfig")
    with ClusterQueueWatch(cast(ControlPlane, cp)) as watch:
        assert watch.listed(2)
        assert [v for _, v in watch.versions()] == versions


def test_the_rows_with_jobs_that_hold_their_queue_first() -> None:
    held = [s for s in SCENARIOS if s.before]
    assert [s.name for s in held] == [
        "kueue-fits-beside-running",
        "kueue-waits-behind-running",
        "kueue-borrows-beside-running",
    ]
    for s in held:
        queue = s.job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
        for obj in s.before_objects():
            assert obj["kind"] == "TrainJob" and obj["metadata"]["namespace"] == s.namespace
            assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == queue
            assert obj["metadata"]["name"] != s.job["metadata"]["name"]
            env = {e["name"]: e["value"] for e in obj["spec"]["trainer"]["env"]}
            assert float(env["WORKLOAD_SLEEP_SECONDS"]) > bound_of(s, BOUND_SECONDS)  # held until ended
    # a row declares the words of its warnings only for the checks it declares
    for s in SCENARIOS:
        assert [w[1 : w.index("]")] for w in s.says] == ([*s.warns] if s.says else [])


def test_the_registry_copy_of_an_archive_has_an_image_id_of_its_own() -> None:
    """push_docker_archive's config: the archive's platform, layers and labels, one label more, so
    another digest (the image ID containerd reports), which the kubelet's pull records key on."""
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ["/pause"], "Labels": {"io.buildah.version": "1.28.2"}},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "a" * 64]},
    }
    raw = json.dumps(config).encode()
    pushed = json.loads(pushed_config(raw, "fidelity/workload"))
    assert pushed["config"]["Labels"] == {"io.buildah.version": "1.28.2", PUSHED_LABEL: "fidelity/workload"}
    assert {k: v for k, v in pushed.items() if k != "config"} == {k: v for k, v in config.items() if k != "config"}
    assert pushed["config"]["Entrypoint"] == ["/pause"]
    assert json.loads(pushed_config(json.dumps({"os": "linux", "config": {"Labels": None}}).encode(), "r"))[
        "config"
    ] == {"Labels": {PUSHED_LABEL: "r"}}
