"""AIPerfSweep through AIPerf 0.13.0's own code (run with the oracle venv's python).

    python tests/oracle/sweep_oracle.py CASES.json   → one JSON line {case: result}
    python tests/oracle/sweep_oracle.py --golden      → tests/oracle/golden/sweeps.json (summaries)

Per case, the create handler's steps (`operator/handlers/sweep/create.py` handle: validate_sweep_spec,
_compute_cardinality, _reject_overlong_child_names, _reject_unstorable_epoch, the image check) and the
sweep-controller JobSet it creates; then the plan the sweep controller builds
(`sweep_controller/plan_builder.build_plan_from_sweep`: expand_sweep), every child's name, labels and
spec (`K8sChildJobExecutor._build_child_spec` / `_build_child_metadata`, the orchestrator's
`derive_id` and `resolve_run_seed`), and, for up to RENDERED children, the JobSet AIPerf's
AIPerfJob renderer makes of that child (the steps of tests/oracle/generate.py render_one).
kopf (which the oracle venv does not install) is replaced by a stub with its two error types.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the stand-in uid of a child (webhook)
from webhook.workloads.aiperf_sweep.children import child_uid

RENDERED = 8  # children rendered per sweep: the first and last four


def _stub_kopf() -> None:
    kopf = types.ModuleType("kopf")

    class PermanentError(Exception):
        pass

    class TemporaryError(Exception):
        def __init__(self, msg: str = "", delay: Any = None) -> None:
            super().__init__(msg)

    class Patch(dict):
        def __init__(self) -> None:
            super().__init__()
            self.status: dict[str, Any] = {}

    kopf.PermanentError, kopf.TemporaryError, kopf.Patch = PermanentError, TemporaryError, Patch  # type: ignore[attr-defined]
    kopf.event = lambda *a, **k: None  # type: ignore[attr-defined]
    sys.modules["kopf"] = kopf


def _refusal(body: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """(the create handler's refusal text, the sweep-controller JobSet it would create)."""
    import kopf
    from aiperf.common.endpoint_credentials import (
        validate_kubernetes_credential_transport,
        validate_kubernetes_sweep_credential_axes,
    )
    from aiperf.config.loader import ConfigurationError
    from aiperf.kubernetes.spec_converter import validate_sweep_spec
    from aiperf.operator.handlers.sweep import create
    from aiperf.operator.results_layout import epoch_key_from_body
    from pydantic import ValidationError

    spec, name, ns = body["spec"], body["metadata"]["name"], body["metadata"]["namespace"]
    try:
        validated = validate_sweep_spec(spec)
        validate_kubernetes_credential_transport(validated.benchmark.endpoint, validated.pod_template.env)
        validate_kubernetes_sweep_credential_axes(validated.sweep)
    except (ConfigurationError, ValidationError, ValueError) as e:
        return f"AIPerfSweep spec invalid: {e}", None
    sweep_input: dict[str, Any] = {
        "benchmark": validated.benchmark.model_dump(by_alias=True, exclude_none=True, exclude_unset=True)
    }
    if validated.sweep is not None:
        sweep_input["sweep"] = validated.sweep.model_dump(by_alias=True)
    if validated.variables:
        sweep_input["variables"] = validated.variables
    if validated.random_seed is not None:
        sweep_input["random_seed"] = validated.random_seed
    conv = bool(validated.multi_run is not None and validated.multi_run.convergence is not None)
    try:
        n, runs = create._compute_cardinality(validated, sweep_input)
        create._reject_overlong_child_names(name, n, runs, has_convergence=conv)
        epoch = epoch_key_from_body(body)
        create._reject_unstorable_epoch(name, ns, body, epoch)
    except kopf.PermanentError as e:
        return str(e), None
    captured: dict[str, Any] = {}

    async def capture(custom: Any, **kw: Any) -> None:
        captured["jobSet"] = kw["body"]

    @contextlib.asynccontextmanager
    async def no_client() -> Any:
        yield None

    import aiperf.kubernetes.client as client_mod

    create._create_or_skip_409_custom = capture  # type: ignore[assignment]
    client_mod.k8s_client = no_client  # type: ignore[assignment]
    template = validated.model_dump(
        exclude={"sweep", "multi_run", "failure_policy", "cancel", "ttl_seconds_after_finished", "variables", "random_seed"},
        by_alias=True, exclude_none=True, exclude_unset=True,
    )  # fmt: skip
    try:
        asyncio.run(create._create_sweep_controller_jobset(
            name=name, namespace=ns, sweep_uid=body["metadata"]["uid"], epoch=epoch, template_spec=template,
            resource_mode=validated.resource_mode,
        ))  # fmt: skip
    except kopf.PermanentError as e:
        return str(e), None
    return None, captured.get("jobSet")


def _render_child(body: dict[str, Any]) -> dict[str, Any]:
    from aiperf.config.user_files import RunMeta
    from aiperf.kubernetes.resources import KubernetesDeployment
    from aiperf.kubernetes.spec_converter import AIPerfJobSpecConverter, apply_worker_config, build_benchmark_run
    from aiperf.operator.results_layout import epoch_key_from_body

    name, ns = body["metadata"]["name"], body["metadata"]["namespace"]
    try:
        conv = AIPerfJobSpecConverter(body["spec"], name, ns, job_id=name)
        config, dc = conv.to_aiperf_config(), conv.to_deployment_config()
        pods = apply_worker_config(config, conv.calculate_workers(dc))
        run = build_benchmark_run(
            run_config=config.model_dump(mode="python", exclude_unset=True, exclude_none=True, context={"include_secrets": True}),
            run_id=name, namespace=ns, run_meta=RunMeta(epoch=epoch_key_from_body(body), job_name=name, namespace=ns),
        )  # fmt: skip
        dep = KubernetesDeployment(job_id=name, namespace=ns, worker_replicas=pods, config=config, run=run, deployment=dc,
                                   job_uid=body["metadata"].get("uid"))  # fmt: skip
        run_config = json.loads(dep.get_configmap_spec().to_k8s_manifest()["data"]["run_config.json"])
        return {"jobSet": dep.get_jobset_spec().to_k8s_manifest(),
                "runConfig": {k: run_config.get(k) for k in ("random_seed", "variables")}}  # fmt: skip
    except ValueError as exc:
        return {"error": str(exc)}


def one(body: dict[str, Any]) -> dict[str, Any]:
    from aiperf.config.resolution.plan import BenchmarkRun
    from aiperf.orchestrator.orchestrator import resolve_run_seed
    from aiperf.sweep_controller._naming import needs_trial_suffix
    from aiperf.sweep_controller.k8s_executor import K8sChildJobExecutor
    from aiperf.sweep_controller.plan_builder import build_plan_from_sweep

    refusal, jobset = _refusal(body)
    if refusal is not None:
        return {"refusal": refusal}
    plan = build_plan_from_sweep(body)
    spec = body["spec"]
    mr = spec.get("multiRun") or {}
    epoch = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"][3][
        "value"
    ]
    ex = K8sChildJobExecutor(None, body, with_trial_suffix=needs_trial_suffix(mr.get("numRuns"), mr.get("convergence") is not None),
                             sweep_run_epoch=epoch)  # fmt: skip
    children = []
    n = len(plan.configs)
    for i, (cfg, var) in enumerate(zip(plan.configs, plan.variations)):
        for trial in range(plan.trials):
            run = BenchmarkRun(
                benchmark_id=ex.derive_id(plan, i, trial), sweep_id=plan.sweep_id, cfg=cfg, variation=var, trial=trial,
                label=f"trial_{trial:04d}", artifact_dir=Path("/results"), random_seed=resolve_run_seed(plan, var, trial),
                variables=dict(plan.variables),
            )  # fmt: skip
            meta = ex._build_child_metadata(run, run.benchmark_id)
            child = {"name": meta["name"], "variation": i, "trial": trial, "label": var.label, "labels": meta["labels"]}
            if trial == 0 and (i < RENDERED // 2 or i >= n - RENDERED // 2):
                cspec = ex._build_child_spec(run)
                # a created child has the apiserver's uid (its containers get it as AIPERF_JOB_UID);
                # the webhook renders children with a stand-in for it, given to AIPerf here as well
                cbody = {"apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": "AIPerfJob",
                         "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                                      "uid": child_uid(meta["namespace"], meta["name"]),
                                      "creationTimestamp": body["metadata"].get("creationTimestamp")},
                         "spec": cspec}  # fmt: skip
                child.update(_render_child(cbody))
            children.append(child)
    return {"jobSet": jobset, "variations": n, "trials": plan.trials, "children": children}


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """What the golden keeps: refusals whole; children without their full JobSets (pod groups only)."""
    if "jobSet" not in result:
        return result
    out = {k: v for k, v in result.items() if k != "children"}
    out["children"] = []
    for i, ch in enumerate(result["children"]):
        # labels differ only by index and label after the first few children: kept for three
        c = {k: v for k, v in ch.items() if k != "jobSet" and (k != "labels" or i < 3)}
        if "jobSet" in ch:
            c["podGroups"] = pod_groups(ch["jobSet"])
        out["children"].append(c)
    return out


def pod_groups(jobset: dict[str, Any]) -> list[Any]:
    """[replicatedJob, replicas, [(container, resources)]] of a JobSet: what a child runs."""
    return [
        [rj["name"], rj["replicas"],
         [[c["name"], c.get("resources")] for c in rj["template"]["spec"]["template"]["spec"]["containers"]]]
        for rj in jobset["spec"]["replicatedJobs"]
    ]  # fmt: skip


def main() -> int:
    _stub_kopf()
    if sys.argv[1] == "--golden":
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from tests.oracle.sweeps import cases as generated

        golden = {case: summary(one(body)) for case, body in sorted(generated().items())}
        path = Path(__file__).resolve().parent / "golden" / "sweeps.json"
        lines = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True, separators=(',', ':'))}" for k, v in golden.items()]
        path.write_text("{\n" + ",\n".join(lines) + "\n}\n")  # one case per line
        print(f"wrote {path} ({len(golden)} cases)")
        return 0
    cases = json.loads(Path(sys.argv[1]).read_text())
    out = {}
    for case, body in cases.items():
        try:
            out[case] = one(body)
        except Exception as exc:
            out[case] = {"crash": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
