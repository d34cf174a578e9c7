"""Name Length: every status and its exact wording, on JobSet's own naming rule."""

from webhook.checks.base import CheckContext
from webhook.checks.names import NameLength
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.models.jobset_names import jobset_name, replicated_jobs
from webhook.results import Status
from webhook.workloads.aiperf import FACTS as AIPERF_FACTS
from webhook.workloads.base import PodGroup, Workload


def jobset(name: str, *rjobs: tuple[str, int, int]) -> dict:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [
                {
                    "name": n,
                    "replicas": r,
                    "template": {"spec": {"parallelism": c, "completions": c, "completionMode": "Indexed"}},
                }
                for n, r, c in rjobs
            ]
        },
    }


def trainjob(name: str, *groups: tuple[str, int], derived: bool = True) -> Workload:
    pgs = [PodGroup(g, pods, {"containers": [{"name": "node"}]}) for g, pods in groups]
    d = {"jobSet": jobset(name, *[(g, 1, pods) for g, pods in groups])} if derived else {}
    return Workload("TrainJob", "trainer.kubeflow.org/v1alpha1", name, "team-a", {}, pod_groups=pgs, derived=d)


def aiperf(name: str, worker_pods: int) -> Workload:
    js = jobset(f"aiperf-{name}", ("controller", 1, 1), ("workers", worker_pods, 1))
    pgs = [PodGroup("controller", 1, {}), PodGroup("workers", worker_pods, {})]
    return Workload(
        "AIPerfJob", "aiperf.nvidia.com/v1alpha1", name, "bench", {}, pod_groups=pgs, derived={"jobSet": js}
    )


async def run(workload: Workload):
    return await NameLength().run(CheckContext(workload=workload, deadline=Deadline(5), settings=Settings()))


async def test_pass_reports_longest_name_and_allowed_length():
    r = await run(trainjob("llama-ft", ("node", 4)))
    assert (r.status, r.message) == (
        Status.PASS,
        'Longest derived name is 23 of 63 characters ("llama-ft-node-0-3-xxxxx"); metadata.name may be up to 48 characters',
    )


async def test_dataset_initializer_limits_trainjob_names_to_33_characters():
    ok = await run(trainjob("a" * 33, ("dataset-initializer", 1), ("node", 4)))
    assert ok.status is Status.PASS
    assert ok.message.endswith("metadata.name may be up to 33 characters")
    r = await run(trainjob("a" * 34, ("dataset-initializer", 1), ("node", 4)))
    pod = "a" * 34 + "-dataset-initializer-0-0-xxxxx"
    assert (r.status, r.message) == (
        Status.FAIL,
        f'metadata.name "{"a" * 34}" (34 characters) is too long: JobSet would name pods of replicatedJob '
        f'"dataset-initializer" like "{pod}" (64 characters, over the 63 allowed) and rejects the job. '
        "Fix: use a metadata.name of at most 33 characters",
    )
    assert r.details == [f"pod {pod} (64 characters)"]


async def test_pod_index_digits_count():
    # 10 pods → podIdx 9 (1 digit); 11 pods → podIdx 10 (2 digits)
    assert (await run(trainjob("n" * 48, ("node", 10)))).status is Status.PASS
    r = await run(trainjob("n" * 48, ("node", 11)))
    assert r.status is Status.FAIL
    assert r.message.endswith("Fix: use a metadata.name of at most 47 characters")


async def test_aiperf_uses_prefix_and_job_index_of_worker_replicas():
    # AIPerf: JobSet aiperf-<name>; workers are `replicas` Jobs of one pod each, so the
    # controller pod (aiperf-<name>-controller-0-0-xxxxx) is the longest below 1000 worker pods
    r = await run(aiperf("b" * 35, 10))
    assert (r.status, r.message) == (
        Status.PASS,
        f'Longest derived name is 63 of 63 characters ("aiperf-{"b" * 35}-controller-0-0-xxxxx"); '
        "metadata.name may be up to 35 characters",
    )
    r = await run(aiperf("b" * 36, 10))
    assert r.status is Status.FAIL
    assert r.message.startswith(
        f'metadata.name "{"b" * 36}" (36 characters) is too long: JobSet would name pods of replicatedJob "controller"'
    )
    assert r.message.endswith("Fix: use a metadata.name of at most 35 characters")


async def test_job_index_comes_from_replicas():
    w = aiperf("w", 1000)
    assert replicated_jobs(w) == [("controller", 1, 1), ("workers", 1000, 1)]
    r = await run(aiperf("w" * 35, 100000))  # aiperf-<35>-workers-99999-0-xxxxx = 64
    assert r.status is Status.FAIL
    assert (
        'pods of replicatedJob "workers" like "aiperf-' + "w" * 35 + '-workers-99999-0-xxxxx" (64 characters'
        in r.message
    )


async def test_several_replicated_jobs_over_the_limit_are_named():
    r = await run(trainjob("c" * 40, ("dataset-initializer", 1), ("model-initializer", 1), ("node", 2)))
    assert r.status is Status.FAIL
    assert 'pods of replicatedJobs "dataset-initializer", "model-initializer" like' in r.message


async def test_name_that_is_no_dns1035_label_fails():
    r = await run(aiperf("my.job", 1))
    assert (r.status, r.message) == (
        Status.FAIL,
        'Job name "aiperf-my.job-controller-0" that JobSet derives from metadata.name "my.job" is not a valid DNS-1035 label: '
        "it may contain only lowercase letters, digits and '-', and must end with a letter or digit, so JobSet rejects the job. "
        "Fix: use a metadata.name of lowercase letters, digits and '-' that starts with a letter",
    )


async def test_name_starting_with_a_digit_fails():
    r = await run(trainjob("1job", ("node", 1)))
    assert r.status is Status.FAIL
    assert "is not a valid DNS-1035 label: it must start with a lowercase letter" in r.message


async def test_without_derived_jobset_pod_groups_are_used():
    w = trainjob("llama-ft", ("node", 4), derived=False)
    assert jobset_name(w) == "llama-ft"
    assert replicated_jobs(w) == [("node", 1, 4)]
    assert (
        jobset_name(Workload("AIPerfJob", "v", "x", "ns", {}, facts=AIPERF_FACTS)) == "aiperf-x"
    )  # its adapter sets them
    assert (await run(w)).status is Status.PASS


async def test_skip_when_no_jobs():
    r = await run(Workload("TrainJob", "v", "x", "ns", {}))
    assert (r.status, r.message) == (Status.SKIP, "Skipped: the job derives no Jobs")


async def test_on_the_rendered_aiperf_jobset_sample():
    import json
    from pathlib import Path

    js = json.loads((Path(__file__).parent / "oracle" / "samples" / "aiperf-rendered-jobset.json").read_text())
    w = Workload("AIPerfJob", "aiperf.nvidia.com/v1alpha1", "demo", "bench", {}, derived={"jobSet": js})
    assert replicated_jobs(w) == [("controller", 1, 1), ("workers", 2, 1)]
    r = await run(w)
    assert (r.status, r.message) == (
        Status.PASS,
        'Longest derived name is 32 of 63 characters ("aiperf-demo-controller-0-0-xxxxx"); metadata.name may be up to 35 characters',
    )


async def test_on_the_aiperfjob_sample_through_the_adapter():
    from pathlib import Path

    import yaml

    from webhook.workloads import build_workload

    obj = yaml.safe_load((Path(__file__).parent / "oracle" / "samples" / "aiperfjob.yaml").read_text())
    r = await run(build_workload(obj, settings=Settings()))
    assert r.message == (
        'Longest derived name is 39 of 63 characters ("aiperf-llama-sweep-controller-0-0-xxxxx"); '
        "metadata.name may be up to 35 characters"
    )
