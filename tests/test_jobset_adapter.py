"""A JobSet applied directly is a Workload like any other kind (webhook/workloads/jobset/)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.models.dryrun_probe import jobset_for, pod_for
from webhook.policy import Outcome
from webhook.preflight import evaluate
from webhook.workloads import build_workload, known_kinds
from webhook.workloads.base import AdapterError
from webhook.workloads.jobset import owned_by_a_judged_job, pods_per_job


def jobset(**spec: Any) -> dict[str, Any]:
    rj = {
        "name": "workers",
        "replicas": 2,
        "template": {
            "spec": {
                "parallelism": 4,
                "completions": 4,
                "template": {
                    "metadata": {"labels": {"app": "ddp"}},
                    "spec": {"containers": [{"name": "trainer", "image": "registry.example/trainer:v1"}]},
                },
            }
        },
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "ddp", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "team-a-q"}},
        "spec": {"replicatedJobs": [rj], **spec},
    }


def build(obj: dict[str, Any]) -> Any:
    return build_workload(obj, settings=Settings())


def test_jobset_is_a_known_kind() -> None:
    assert "JobSet" in known_kinds()


def test_pod_groups_queue_and_facts() -> None:
    wl = build(jobset())
    assert (wl.kind, wl.name, wl.namespace, wl.queue_name) == ("JobSet", "ddp", "team-a", "team-a-q")
    [g] = wl.pod_groups
    assert (g.name, g.pods, g.role, g.pod_metadata) == ("workers", 8, "workers", {"labels": {"app": "ddp"}})
    assert g.pod_spec["containers"][0]["image"] == "registry.example/trainer:v1"
    assert wl.facts.controllers == ("JobSet",)
    assert (
        wl.facts.pod_field.format(field="tolerations")
        == "spec.replicatedJobs[].template.spec.template.spec.tolerations"
    )


@pytest.mark.parametrize(
    ("job_spec", "pods"),
    [
        ({}, 1),  # SetDefaults_Job: parallelism 1, completions 1
        ({"parallelism": 3}, 3),
        ({"parallelism": 4, "completions": 2}, 2),  # never more active than completions left
        ({"completions": 5}, 1),  # parallelism defaults to 1
        ({"parallelism": 0}, 0),
    ],
)
def test_pods_per_job_follow_the_job_api(job_spec: dict[str, Any], pods: int) -> None:
    assert pods_per_job(job_spec, "spec") == pods


def test_dependencies_and_replicas_default() -> None:
    obj = jobset()
    second = copy.deepcopy(obj["spec"]["replicatedJobs"][0])
    second.update(name="eval", dependsOn=[{"name": "workers", "status": "Complete"}])
    del second["replicas"]
    obj["spec"]["replicatedJobs"].append(second)
    wl = build(obj)
    assert [(g.name, g.pods, g.depends_on) for g in wl.pod_groups] == [
        ("workers", 8, []),
        ("eval", 4, [("workers", "Complete")]),
    ]


def test_the_derived_jobset_is_the_object_as_jobsets_webhook_defaults_it() -> None:
    obj = jobset()
    wl = build(obj)
    js = wl.derived["jobSet"]
    assert js["spec"]["successPolicy"] == {"operator": "All"}
    assert js["spec"]["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert js["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    job = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["completionMode"] == "Indexed"
    assert job["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert "successPolicy" not in obj["spec"]  # the applied object is not changed


def test_user_values_are_kept() -> None:
    obj = jobset(network={"enableDNSHostnames": False})
    obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    js = build(obj).derived["jobSet"]
    assert js["spec"]["network"] == {"enableDNSHostnames": False, "publishNotReadyAddresses": True}
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"] == "Never"


@pytest.mark.parametrize(
    ("api_version", "kind", "controller", "skipped"),
    [
        ("trainer.kubeflow.org/v1alpha1", "TrainJob", True, True),
        ("aiperf.nvidia.com/v1alpha1", "AIPerfJob", True, True),
        ("aiperf.nvidia.com/v1alpha1", "AIPerfSweep", True, True),
        # not its controller: Dry Run's twin of a TrainJob's JobSet (dryrun_probe.twin_of), judged in the job's review
        ("trainer.kubeflow.org/v1alpha1", "TrainJob", False, True),
        ("aiperf.nvidia.com/v1alpha1", "AIPerfJob", False, True),
        ("example.com/v1", "Launcher", True, False),  # an owner this webhook does not judge
    ],
)
def test_a_jobset_a_judged_job_owns_is_not_judged_again(
    api_version: str, kind: str, controller: bool, skipped: bool
) -> None:
    obj = jobset()
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": api_version, "kind": kind, "name": "ddp", "uid": "u1", "controller": controller}
    ]
    assert owned_by_a_judged_job(obj) is skipped
    assert (build(obj) is None) is skipped


async def test_an_owned_jobset_is_allowed_untouched() -> None:
    obj = jobset()
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "x", "uid": "u", "controller": True}
    ]
    ev = await evaluate(obj, settings=Settings(), deadline=Deadline(5.0))
    assert ev.decision.allowed and ev.decision.outcome is Outcome.UNHANDLED


def test_multikueue_jobset_has_no_local_controller() -> None:
    wl = build(jobset(managedBy="kueue.x-k8s.io/multikueue"))
    assert wl.managed_by == "kueue.x-k8s.io/multikueue" and wl.facts.controllers == ()


def test_dry_run_probes_its_pods_not_the_jobset_itself() -> None:
    """The apiserver is admitting this very JobSet: a probe of it would only repeat that (and call
    this webhook again). Its Jobs and Pods are what other layers have not seen yet."""
    wl = build(jobset())
    assert jobset_for(wl) is None
    pod = pod_for(wl, wl.pod_groups[0])
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "ddp"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda o: o["spec"].update(replicatedJobs=[]), "spec.replicatedJobs must list at least one replicatedJob"),
        (lambda o: o["spec"].update(replicatedJobs="x"), "spec.replicatedJobs must be a list, not str"),
        (
            lambda o: o["spec"]["replicatedJobs"][0].update(replicas=-1),
            "spec.replicatedJobs[0].replicas must be an integer from 0 to 2147483647, not -1",
        ),
        (
            lambda o: o["spec"]["replicatedJobs"][0]["template"]["spec"].update(parallelism="4"),
            "spec.replicatedJobs[0].template.spec.parallelism must be an integer, not str",
        ),
    ],
)
def test_a_malformed_jobset_names_the_field(mutate: Any, message: str) -> None:
    obj = jobset()
    mutate(obj)
    with pytest.raises(AdapterError) as err:
        build(obj)
    assert str(err.value) == message
