"""AIPerfSweep: the operator's create-time refusals, the sweep-controller pod, the children as
AIPerf expands and names them, and the per-child checks (Sweep Children, Sweep Child Quotas)."""

from __future__ import annotations

import asyncio

import pytest

from tests.fakeview import FakeView, meta, run_check, run_check_all
from webhook.checks.sweep import SweepChildQuotas, SweepChildren
from webhook.config import Settings
from webhook.results import Status
from webhook.workloads import build_workload
from webhook.workloads.aiperf_sweep import (
    build,
    child_name_suffix_length,
    deep_merge,
    expand,
)


def sweep_obj(name: str = "conc", values: list | None = None, **spec_extra) -> dict:
    spec = {
        "image": "nvcr.io/nvidia/aiperf:0.13.0",
        "connectionsPerWorker": 100,
        "benchmark": {
            "models": ["m"],
            "endpoint": {"urls": ["http://llm:8000"]},
            "datasets": [{"name": "main", "type": "synthetic", "entries": 10, "prompts": {"isl": 128, "osl": 64}}],
            "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 100, "requests": 100}],
            "runtime": {"workersPerPod": 1},
        },
        "sweep": {"type": "grid", "parameters": {"concurrency": values or [100 * i for i in range(1, 11)]}},
    }
    spec.update(spec_extra)
    return {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfSweep",
        "metadata": {"name": name, "namespace": "team-a", "uid": "u-1", "creationTimestamp": "2026-01-02T03:04:05Z"},
        "spec": spec,
    }


S = Settings()


def test_registered_adapter_builds_children_and_the_peak():
    wl = build_workload(sweep_obj(), settings=S)
    assert wl.kind == "AIPerfSweep" and not wl.render_errors
    assert [c.name for c in wl.children] == [f"conc-v{i:02d}" for i in range(10)]
    assert wl.children[6].label == "phases.profiling.concurrency=700"
    assert [(g.name, g.pods) for g in wl.children[6].workload.pod_groups] == [("controller", 1), ("workers", 7)]
    # what runs at once: the sweep controller and the heaviest child
    assert [(g.name, g.pods) for g in wl.pod_groups] == [("controller", 1), ("v09-controller", 1), ("v09-workers", 10)]
    assert wl.worst.name == "conc-v09"


def test_child_is_the_parent_spec_with_the_variation_and_sweep_labels():
    wl = build(sweep_obj(multiRun={"numRuns": 2}, childMetadata={"labels": {"team": "a"}}), settings=S)
    child = wl.children[2]
    assert child.names == ["conc-v02-t0", "conc-v02-t1"]
    obj = child.workload.obj
    assert "sweep" not in obj["spec"] and "multiRun" not in obj["spec"]
    assert obj["spec"]["benchmark"]["phases"][0]["concurrency"] == 300
    assert obj["metadata"]["labels"] == {
        "team": "a",
        "aiperf.nvidia.com/sweep": "conc",
        "aiperf.nvidia.com/sweep-uid": "u-1",
        "aiperf.nvidia.com/sweep-run-epoch": "1767323045369788",
        "aiperf.nvidia.com/variation-index": "02",
        "aiperf.nvidia.com/variation-label": "phases.profiling.concurrency-300",
        "aiperf.nvidia.com/trial-index": "0",
    }


def test_sweep_controller_pod_and_rbac_as_the_operator_provisions_them():
    wl = build(
        sweep_obj(podTemplate={"imagePullSecrets": [{"name": "ngc"}], "env": [{"name": "HTTP_PROXY", "value": "p"}]}),
        settings=S,
    )
    ctl = wl.pod_groups[0]
    assert ctl.role == "sweep controller"
    spec = ctl.pod_spec
    assert spec["serviceAccountName"] == "aiperf-sweep-controller-conc"
    assert spec["imagePullSecrets"] == [{"name": "ngc"}]
    c, sidecar = spec["containers"]
    assert c["command"] == ["python", "-m", "aiperf.sweep_controller.main"]
    assert c["resources"] == {"requests": {"cpu": "75m", "memory": "512Mi"}}  # burstable: requests only
    assert {"name": "HTTP_PROXY", "value": "p"} in c["env"]
    assert sidecar["name"] == "results-sidecar"
    assert wl.managed_service_accounts == {"aiperf-sweep-controller-conc"}
    assert wl.controller_objects["role"]["rules"][1]["resourceNames"] == ["conc"]
    assert wl.derived["jobSet"]["metadata"]["name"] == "aiperf-conc"


def test_sweep_controller_reads_the_operators_env_case_insensitively(monkeypatch):
    """AIPerf's K8sEnvironment and OperatorEnvironment are pydantic-settings classes, which read env
    names case-insensitively: so does the sweep controller, as the AIPerfJob renderer (aiperf.Env)."""
    monkeypatch.setenv("aiperf_k8s_sweep_controller_cpu", "2")
    monkeypatch.setenv("Aiperf_K8s_Results_Sidecar_Memory", "1Gi")
    monkeypatch.setenv("aiperf_operator_base_url", "http://op:1")
    monkeypatch.setenv("aiperf_k8s_results_sidecar_log_level", "debug")
    c, sidecar = build(sweep_obj(), settings=S).pod_groups[0].pod_spec["containers"]
    assert c["resources"] == {"requests": {"cpu": "2", "memory": "512Mi"}}
    assert {"name": "AIPERF_OPERATOR_BASE_URL", "value": "http://op:1"} in c["env"]
    assert sidecar["resources"] == {"requests": {"cpu": "25m", "memory": "1Gi"}}
    assert {"name": "AIPERF_RESULTS_SIDECAR_LOG_LEVEL", "value": "debug"} in sidecar["env"]
    # Settings.aiperfEnv still wins over the process's environment
    over = Settings(aiperfEnv={"AIPERF_K8S_SWEEP_CONTROLLER_CPU": "3"})
    c, _ = build(sweep_obj(), settings=over).pod_groups[0].pod_spec["containers"]
    assert c["resources"] == {"requests": {"cpu": "3", "memory": "512Mi"}}


async def test_sweep_controller_keeps_the_hardened_capabilities_when_the_template_gives_none():
    """build_security_context merges podTemplate.containerSecurityContext.capabilities only when it is a
    mapping: a null one leaves `drop: [ALL]`, so a restricted namespace admits the controller pod."""
    from webhook.checks.podsecurity import PodSecurity

    wl = build(
        sweep_obj(podTemplate={"containerSecurityContext": {"capabilities": None, "runAsUser": 2000}}), settings=S
    )
    assert not wl.render_errors
    for c in wl.pod_groups[0].pod_spec["containers"]:
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert c["securityContext"]["runAsUser"] == 2000
    view = FakeView(
        {
            "namespaces": [
                {"metadata": {"name": "team-a", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
            ]
        }
    )
    [r] = await run_check_all(PodSecurity(), wl, view)
    assert r.status is Status.PASS, r.message


def test_over_the_variation_cap_is_refused_with_the_fix():
    wl = build(sweep_obj(values=list(range(1, 202))), settings=S)
    assert wl.render_errors == [
        "AIPerfSweep expands to 201 variations, exceeding the 200-variation child-name budget (variation index "
        "0..199), so the AIPerf operator rejects the sweep. Fix: reduce the sweep cardinality to at most 200 "
        "variations (fewer values per parameter), or split it into several AIPerfSweeps."
    ]
    assert wl.incomplete_reason and not wl.children


def test_two_hundred_variations_are_accepted():
    wl = build(sweep_obj(values=list(range(1, 201))), settings=S)
    assert not wl.render_errors and len(wl.children) == 200 and wl.children[-1].name == "conc-v199"


def test_over_the_trial_cap_is_refused():
    wl = build(sweep_obj(multiRun={"numRuns": 11}), settings=S)
    assert wl.render_errors == [
        "AIPerfSweep multi_run.num_runs (11) exceeds the 10-trial child-name budget (trial index 0..9), so the "
        "AIPerf operator rejects the sweep. Fix: set spec.multiRun.numRuns to at most 10, or split the trials over "
        "several AIPerfSweeps."
    ]


def test_child_names_over_the_cap_are_refused_with_the_allowed_length():
    assert child_name_suffix_length(10, 10, has_convergence=False) == 4
    ok = build(sweep_obj(name="a" * 31), settings=S)
    assert not ok.render_errors
    wl = build(sweep_obj(name="a" * 32), settings=S)
    assert wl.render_errors == [
        f"AIPerfSweep name '{'a' * 32}' (32 chars) leaves no room for the child job_id suffix (worst case '-v9', 4 "
        "chars); the derived child name would exceed the 35-char job_id cap, so the AIPerf operator rejects the "
        "sweep. Fix: rename the AIPerfSweep to at most 31 characters for this cardinality (10 variation(s) x 1 trial(s))."
    ]
    # convergence always adds the trial suffix (needs_trial_suffix)
    obj = sweep_obj(name="a" * 31, multiRun={"numRuns": 1, "convergence": {"metric": "x", "minRuns": 1}})
    obj["spec"]["sweep"]["iterationOrder"] = "independent"
    wl = build(obj, settings=S)
    assert "worst case '-v9-t0', 7 chars" in wl.render_errors[0] and "at most 28 characters" in wl.render_errors[0]
    # convergence needs min_runs (default 2) <= num_runs, as AIPerf's MultiRunConfig validates
    obj = sweep_obj(multiRun={"numRuns": 3, "convergence": {"metric": "x"}})
    assert build(obj, settings=S).render_errors == [
        "The AIPerf operator refuses this AIPerfSweep at create (AIPerfSweep spec invalid: iteration_order='repeated' "
        "(the default) is incompatible with adaptive trial convergence (multi_run.convergence). Use 'independent' "
        "instead: set spec.sweep.iterationOrder: independent). Fix: correct the field the message names and apply again."
    ]
    obj = sweep_obj(multiRun={"numRuns": 1, "convergence": {"metric": "x"}})
    obj["spec"]["sweep"]["iterationOrder"] = "independent"
    wl = build(obj, settings=S)
    assert wl.render_errors == [
        "The AIPerf operator refuses this AIPerfSweep at create (AIPerfSweep spec invalid: convergence.min_runs (2) "
        "must be <= num_runs (1). Either lower min_runs or raise num_runs). Fix: correct the field the message names "
        "and apply again."
    ]


def test_an_unstorable_epoch_and_a_missing_image_are_refused():
    obj = sweep_obj()
    obj["metadata"]["creationTimestamp"] = "1969-04-25T18:22:03Z"
    wl = build(obj, settings=S)
    assert wl.render_errors == [
        "AIPerfSweep team-a/conc derived an unstorable run epoch '-21620277369788' from metadata.creationTimestamp "
        "'1969-04-25T18:22:03Z' (it must be 9-10 decimal digits, optionally followed by a 6-digit suffix), so the "
        "AIPerf operator rejects it. Fix: remove metadata.creationTimestamp and create the AIPerfSweep again."
    ]
    obj = sweep_obj()
    del obj["spec"]["image"]
    assert build(obj, settings=S).render_errors == [
        'AIPerfSweep has no spec.image: the AIPerf operator needs it for the sweep-controller pod ("image is '
        'required") and starts nothing. Fix: set spec.image, e.g. nvcr.io/nvidia/aiperf:0.13.0.'
    ]


@pytest.mark.parametrize(
    "sweep, want",
    [
        (None, "AIPerfSweep.spec.sweep is required"),
        (
            {"type": "zip", "parameters": {"concurrency": [1, 2], "requests": [1]}},
            "zip sweep parameters must all have equal length",
        ),
        ({"type": "grid", "parameters": {"benchmark.phases.profiling.rate": [1]}}, "redundant 'benchmark.' prefix"),
        ({"type": "grid", "parameters": {"phases.nosuch.rate": [1]}}, "no entry named 'nosuch' found"),
        ({"type": "scenarios", "runs": [{"name": "a", "bogus": 1}]}, "sweep run [0]: unknown field(s) ['bogus']"),
        ({"type": "grid", "parameters": {"concurrency": []}}, "value list must be non-empty"),
        (
            {"type": "grid", "parameters": {"endpoint.apiKey": ["a", "b"]}},
            "Kubernetes sweeps cannot vary credential-bearing values; sweep path 'endpoint.apiKey' is not supported. Keep "
            "endpoint credentials fixed and inject them through Secret-backed pod environment variables",
        ),
    ],
)
def test_spec_invalid_is_refused_as_the_operator_does(sweep, want):
    obj = sweep_obj()
    if sweep is None:
        del obj["spec"]["sweep"]
    else:
        obj["spec"]["sweep"] = sweep
    wl = build(obj, settings=S)
    assert len(wl.render_errors) == 1 and want in wl.render_errors[0]
    assert wl.render_errors[0].startswith("The AIPerf operator refuses this AIPerfSweep at create (AIPerfSweep ")


def test_scenarios_merge_named_lists_and_take_the_run_name_as_label():
    obj = sweep_obj()
    obj["spec"]["sweep"] = {"type": "scenarios", "runs": [
        {"name": "small", "benchmark": {"phases": [{"name": "profiling", "concurrency": 200}]}},
        {"benchmark": {"phases": [{"name": "warmup", "type": "concurrency", "concurrency": 1, "requests": 5}]}},
    ]}  # fmt: skip
    wl = build(obj, settings=S)
    assert [c.label for c in wl.children] == ["small", "scenario_1"]
    phases = wl.children[0].workload.obj["spec"]["benchmark"]["phases"]
    assert phases == [{"name": "profiling", "type": "concurrency", "concurrency": 200, "requests": 100}]
    assert [p["name"] for p in wl.children[1].workload.obj["spec"]["benchmark"]["phases"]] == ["profiling", "warmup"]


def test_grid_sorts_paths_and_labels_like_expand_sweep():
    out = expand({"type": "grid", "parameters": {"requests": [1, 2], "concurrency": [5]}},
                 {"benchmark": {"phases": [{"name": "profiling"}]}})  # fmt: skip
    assert [v.label for v in out] == [
        "phases.profiling.concurrency=5, phases.profiling.requests=1",
        "phases.profiling.concurrency=5, phases.profiling.requests=2",
    ]


def test_deep_merge_replaces_a_distribution_of_another_kind():
    base = {"isl": {"mean": 1, "stddev": 2}, "keep": 1}
    deep_merge(base, {"isl": {"value": 3}})
    assert base == {"isl": {"value": 3}, "keep": 1}


def test_run_time_sampled_sweeps_count_their_budget_and_judge_the_base():
    obj = sweep_obj()
    obj["spec"]["sweep"] = {
        "type": "sobol",
        "samples": 16,
        "dimensions": [{"path": "concurrency", "low": 1, "high": 9}],
    }
    wl = build(obj, settings=S)
    assert wl.variations == 16 and len(wl.children) == 1 and wl.children[0].label == "base"
    r = asyncio.run(run_check(SweepChildren(), wl, None))
    assert (r.status, r.message) == (
        Status.WARN,
        "Cannot verify the 16 child AIPerfJob(s) of this sobol sweep: their values are drawn at run time, so only the "
        "base template was judged. Fix: check the extremes of the sampled ranges with a grid sweep first",
    )
    obj["spec"]["sweep"]["samples"] = 300
    assert "expands to 300 variations" in build(obj, settings=S).render_errors[0]


def test_trials_share_one_render():
    wl = build(sweep_obj(values=[100, 200], multiRun={"numRuns": 3}), settings=S)
    assert len(wl.children) == 2 and wl.children[1].names == ["conc-v01-t0", "conc-v01-t1", "conc-v01-t2"]


# --- checks ---------------------------------------------------------------------------------


async def test_sweep_children_names_the_children_the_operator_cannot_render():
    obj = sweep_obj(values=[100, 200])
    obj["spec"]["sweep"]["parameters"] = {"runtime.workersPerPod": [10, 2000], "concurrency": [100000]}
    wl = build(obj, settings=S)
    r = await run_check(SweepChildren(), wl, None)
    assert r.status is Status.FAIL
    assert r.message == (
        "1 of 2 children of AIPerfSweep conc would be refused by the AIPerf operator when it renders them: conc-v01 "
        "(phases.profiling.concurrency=100000, runtime.workersPerPod=2000); conc-v01: The AIPerf operator would refuse "
        "to render this job: each worker pod would hold 2001 containers (1 worker-pod-manager + 1000 worker(s) + 1000 "
        "record processor(s)), about 2 KB each, so the JobSet cannot fit the apiserver's 1.5 MiB object limit. "
        "Fix: change or remove the values of spec.sweep that produce these children."
    )


async def test_sweep_children_names_children_whose_configmap_is_too_big():
    obj = sweep_obj(values=[100])
    obj["spec"]["variables"] = {"blob": "x"}
    obj["spec"]["sweep"]["parameters"] = {"variables.blob": ["small", "y" * 1_100_000]}
    wl = build(obj, settings=S)
    r = await run_check(SweepChildren(), wl, None)
    assert r.status is Status.FAIL
    assert "1 of 2 children of AIPerfSweep conc would carry a run-config ConfigMap over 1 MiB: conc-v01 (" in r.message
    assert 'ConfigMap "aiperf-conc-v01-config" would be 107' in r.message


async def test_sweep_children_pass_says_what_runs_at_once():
    r = await run_check(SweepChildren(), build(sweep_obj(), settings=S), None)
    assert r.status is Status.PASS
    assert r.message.startswith(
        "10 variation(s) x 1 trial(s) = 10 child AIPerfJob(s), run one at a time; heaviest conc-v09 "
        "(phases.profiling.concurrency=1000): 11 pod(s)"
    )


def _quota(hard: dict, used: dict | None = None) -> dict:
    return {
        "metadata": meta("team-quota", "team-a"),
        "spec": {"hard": hard},
        "status": {"hard": hard, "used": used or {}},
    }


async def test_the_seventh_child_that_breaks_the_quota_is_named():
    view = FakeView({"resourcequotas": [_quota({"pods": "8"})]})
    r = await run_check(SweepChildQuotas(), build(sweep_obj(), settings=S), view)
    assert r.status is Status.FAIL
    assert r.message == (
        '4 of 10 children of AIPerfSweep conc would not fit ResourceQuota "team-quota" next to the sweep-controller '
        "pod (children run one at a time; the first to fail is conc-v06 (phases.profiling.concurrency=700)): "
        "conc-v09 (phases.profiling.concurrency=1000), conc-v08 (phases.profiling.concurrency=900), conc-v07 "
        "(phases.profiling.concurrency=800), conc-v06 (phases.profiling.concurrency=700); worst conc-v09: pods "
        "would be 12 (used 0 + controller and child 12) but hard is 8. Fix: raise hard (kubectl edit resourcequota "
        "team-quota -n team-a), or remove those values from spec.sweep so every child fits."
    )


async def test_children_that_fit_pass():
    view = FakeView({"resourcequotas": [_quota({"pods": "20"})]})
    r = await run_check(SweepChildQuotas(), build(sweep_obj(), settings=S), view)
    assert r.status is Status.PASS and "All 10 rendered children fit" in r.message


# --- plan -----------------------------------------------------------------------------------


def test_plan_lists_the_controller_and_every_child(tmp_path, capsys):
    import argparse
    import json

    import yaml

    from webhook.cli import plan as cmd_plan

    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep_obj(values=[100, 300], multiRun={"numRuns": 2})))
    code = cmd_plan.run(argparse.Namespace(filename=str(path), output="json", config=None))
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [g["name"] for g in out["podGroups"]] == ["controller", "v01-controller", "v01-workers"]
    assert out["references"]["configMaps"] == []
    sw = out["sweep"]
    assert sw["variations"] == 2 and sw["trials"] == 2 and sw["heaviestChild"] == "conc-v01-t0"
    assert sw["controllerObjects"] == {
        "jobSet": "aiperf-conc", "serviceAccount": "aiperf-sweep-controller-conc",
        "role": "aiperf-sweep-controller-conc", "roleBinding": "aiperf-sweep-controller-conc",
    }  # fmt: skip
    c = sw["children"][1]
    assert (c["name"], c["names"], c["label"]) == (
        "conc-v01-t0",
        ["conc-v01-t0", "conc-v01-t1"],
        "phases.profiling.concurrency=300",
    )
    assert [(g["name"], g["replicas"]) for g in c["podGroups"]] == [("controller", 1), ("workers", 3)]
    assert c["requests"]["pods"] == 4 and c["configMapBytes"] > 0

    code = cmd_plan.run(argparse.Namespace(filename=str(path), output="text", config=None))
    text = capsys.readouterr().out
    assert "  grid sweep: 2 variation(s) x 2 trial(s), 4 child AIPerfJob(s), one child at a time" in text
    assert (
        "    child conc-v01-t0 (+1 trial(s)) [phases.profiling.concurrency=300]: 1 controller, 3 workers; requests cpu="
        in text
    )


def test_aiperfjob_with_sweep_points_to_aiperfsweep():
    from webhook.workloads.aiperf import build as build_job

    obj = sweep_obj()
    obj["kind"] = "AIPerfJob"
    wl = build_job(obj, settings=S)
    assert wl.render_errors[-1] == (
        "A single Kubernetes benchmark run cannot include `sweep`, so the AIPerf operator rejects this AIPerfJob. "
        "Fix: submit it as kind: AIPerfSweep (same spec: every variation becomes a child AIPerfJob), or remove spec.sweep."
    )


async def test_dry_run_probes_child_pods_as_the_child_jobset_creates_them():
    from webhook.checks.dryrun import DryRun

    view = FakeView()
    r = await run_check(DryRun(), build(sweep_obj(values=[100, 300]), settings=S), view)
    assert r.status is Status.PASS
    sent = {(kind, body["metadata"]["name"]): body for _, kind, _, body in view.dry_runs}
    assert ("JobSet", "aiperf-conc") in sent and ("JobSet", "aiperf-conc-v01") in sent
    ctl = sent[("Pod", "aiperf-conc-controller-0-0-dryrn")]
    # the operator creates the sweep controller's ServiceAccount just before its JobSet: probed as the default one
    assert "serviceAccountName" not in ctl["spec"]
    child = sent[("Pod", "aiperf-conc-v01-workers-0-0-dryrn")]
    assert child["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "aiperf-conc-v01"


async def test_kueue_capacity_counts_the_child_not_the_unqueued_sweep_controller():
    from webhook.checks.kueue.capacity import KueueCapacity

    wl = build(sweep_obj(values=[100], scheduling={"queueName": "lq"}), settings=S)
    assert wl.queue_name == "lq" and [g.queued for g in wl.pod_groups] == [False, True, True]
    cq = {"metadata": meta("cq"), "spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "10"}, {"name": "memory", "nominalQuota": "100Gi"}]}]}]},
        "status": {"conditions": [{"type": "Active", "status": "True"}]}}  # fmt: skip
    lq = {"metadata": meta("lq", "team-a"), "spec": {"clusterQueue": "cq"},
          "status": {"conditions": [{"type": "Active", "status": "True"}]}}  # fmt: skip
    view = FakeView(
        {"localqueues": [lq], "clusterqueues": [cq]},
        served={"v1", "kueue.x-k8s.io/v1beta2", "jobset.x-k8s.io/v1alpha2"},
    )
    r = await run_check(KueueCapacity(), wl, view)
    # the child's controller (450m, 1792Mi) and worker pod (3350m, 6Gi); the sweep controller's 100m is not queued
    assert r.message == 'The job (cpu 3800m, memory 7936Mi) fits ClusterQueue "cq" now'


def test_only_the_heaviest_child_keeps_its_run_config_text():
    wl = build(sweep_obj(values=[100, 900, 300]), settings=S)
    assert wl.worst.name == "conc-v01"
    for c in wl.children:
        cm = c.workload.derived["configMap"]
        assert cm["metadata"]["name"] == f"aiperf-{c.name}-config" and c.configmap_bytes > 1000
        assert ("data" in cm) is (c is wl.worst)
    assert wl.derived["childConfigMap"]["data"]["run_config.json"]


async def test_children_kept_until_the_sweep_is_deleted_hit_a_count_quota_mid_run():
    view = FakeView(
        {
            "resourcequotas": [
                _quota({"count/aiperfjobs.aiperf.nvidia.com": "12"}, {"count/aiperfjobs.aiperf.nvidia.com": "2"})
            ]
        }
    )
    wl = build(sweep_obj(values=[100, 200, 300, 400, 500, 600], multiRun={"numRuns": 2}), settings=S)
    # repeated order (the default): t0 of every variation, then t1: run 11 is conc-v04-t1
    assert [n for n, _ in wl.run_order()][:7] == ["conc-v00-t0", "conc-v01-t0", "conc-v02-t0", "conc-v03-t0",
                                                  "conc-v04-t0", "conc-v05-t0", "conc-v00-t1"]  # fmt: skip
    r = await run_check(SweepChildQuotas(), wl, view)
    assert r.status is Status.FAIL
    assert r.message == (
        'ResourceQuota "team-quota": count/aiperfjobs.aiperf.nvidia.com would reach 14 by the last of the 12 child runs '
        "of AIPerfSweep conc (each child AIPerfJob stays until the AIPerfSweep is deleted) but hard is 12 (used 2), so "
        "the apiserver refuses child conc-v04-t1 (phases.profiling.concurrency=500), run 11 of 12, and the sweep stops "
        "there. Fix: raise hard count/aiperfjobs.aiperf.nvidia.com to at least 14 (kubectl edit resourcequota "
        "team-quota -n team-a), or reduce the variations or spec.multiRun.numRuns."
    )


def test_child_seeds_follow_the_consistent_seed_default():
    seeds = [
        c.workload.obj["spec"]["randomSeed"] for c in build(sweep_obj(values=[100, 200, 300]), settings=S).children
    ]
    assert seeds == [42, 43, 44]  # AIPerfConfig fills 42 for a sweep; variation N gets base + N
    obj = sweep_obj(values=[100, 200], randomSeed=7)
    obj["spec"]["sweep"]["sameSeed"] = True
    assert [c.workload.obj["spec"]["randomSeed"] for c in build(obj, settings=S).children] == [7, 7]
    obj = sweep_obj(values=[100, 200], multiRun={"numRuns": 1, "setConsistentSeed": False})
    assert ["randomSeed" in c.workload.obj["spec"] for c in build(obj, settings=S).children] == [False, False]


def test_children_are_ranked_by_their_exact_requests() -> None:
    # the ranking reads quantities as Kubernetes does (every suffix), and one it would refuse counts 0
    from decimal import Decimal

    from webhook.workloads.aiperf_sweep import requests_of
    from webhook.workloads.base import PodGroup, Workload

    def wl(cpu: object, memory: object) -> Workload:
        container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        init = {"name": "i", "resources": {"requests": {"cpu": "64", "memory": "1Ei"}}}
        spec = {"containers": [container], "initContainers": [init]}
        return Workload("AIPerfJob", "v1", "j", "ns", {}, pod_groups=[PodGroup("workers", 3, spec)])

    assert requests_of(wl("250m", "1Ti")) == (3, Decimal("0.75"), 3 * Decimal(2) ** 40)
    assert requests_of(wl(2, "1.5T")) == (3, Decimal(6), Decimal("4.5e12"))
    assert requests_of(wl("five", None)) == (3, Decimal(0), Decimal(0))


def test_the_peak_groups_name_who_creates_their_pods():
    # the controller's pods come from the sweep's own JobSet, a child group's from the child AIPerfJob
    wl = build(sweep_obj(), settings=S)
    ctl, child_ctl, child_workers = wl.pod_groups
    assert wl.group_source(ctl) == (wl, ctl)
    owner, group = wl.group_source(child_workers)
    assert (owner.kind, owner.name, group.name) == ("AIPerfJob", "conc-v09", "workers")
    assert wl.group_source(child_ctl)[1].name == "controller"
    # any other job creates its groups' pods itself
    job = build_workload(wl.children[0].workload.obj, settings=S)
    assert [job.group_source(g) == (job, g) for g in job.pod_groups] == [True, True]
