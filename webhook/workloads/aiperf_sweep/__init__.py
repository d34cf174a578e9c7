"""AIPerfSweep → Workload: the sweep-controller pod plus one child AIPerfJob per variation and trial.

Follows AIPerf 0.13.0 without importing it, one module per upstream seam:

- `adapter` (`build`) and `spec`: `operator/handlers/sweep/create.py` `handle`, what the operator
  refuses at create (spec invalid, over 200 variations or 10 trials, child names over the
  35-character job id, an epoch the results layout cannot store, no image), in its order;
- `credentials`: `common/endpoint_credentials.py`, no sweep axis may vary a credential;
- `controller`: the sweep-controller JobSet, ServiceAccount, Role and RoleBinding the handler
  provisions (`_create_sweep_controller_jobset`, `_provision_rbac`);
- `expansion`: `config/sweep/expand.py` `expand_sweep`, grid (sorted paths, cartesian product),
  zip (lockstep) and scenarios (deep merge, named lists merged by name), with the bare-name path
  aliases of `config/loader/dotted_path.py`;
- `naming`: `sweep_controller/_naming.py`, child names `<sweep>-v<NN>[-t<N>]`, the trial suffix
  only when more than one trial runs (or convergence is set);
- `children`: `sweep_controller/k8s_executor.py` `_build_child_spec` / `_build_child_metadata`, a
  child is the parent spec without the sweep-only fields, with the variation's benchmark,
  variables and seed; it is rendered by the AIPerfJob adapter (`webhook.workloads.aiperf.build`);
- `workload`: `SweepWorkload`, `SweepChild` and how children are ranked.

Children never overlap: `orchestrator/orchestrator.py` awaits `executor.execute(run)` (which
waits for the child's terminal phase) before it starts the next one, in every iteration
order, and nothing in the spec makes them parallel. So what runs at once is the
sweep-controller pod plus one child, and the Workload's pod groups are exactly that peak:
the controller group plus the groups of the heaviest child (most pods, then most CPU and
memory requested). Every child stays in `SweepWorkload.children` for the per-child checks
(Sweep Children: render, names, ConfigMap size, quota per child).

Trials of one variation differ only in name and seed, so each variation is rendered once
and its trials share that render. Sobol / latin-hypercube samples and adaptive-search
iterations are drawn at run time (scipy, BoTorch): their children are judged as the base
template, and the variation count is the sample / iteration budget the operator itself uses.

Every public name is importable from `webhook.workloads.aiperf_sweep`.
"""

from __future__ import annotations

from typing import Any

from webhook.workloads import aiperf
from webhook.workloads.aiperf_sweep.adapter import EPOCH_RE, FACTS, build
from webhook.workloads.aiperf_sweep.children import (
    SWEEP_LABEL,
    SWEEP_RUN_EPOCH_LABEL,
    SWEEP_UID_LABEL,
    TRIAL_INDEX_LABEL,
    VARIATION_INDEX_LABEL,
    VARIATION_LABEL_LABEL,
    ChildPlan,
    render_children,
)
from webhook.workloads.aiperf_sweep.controller import (
    CONTROLLER_GROUP,
    RESULTS_SIDECAR_PORT,
    SWEEP_CONTROLLER_RESOURCES,
    controller_objects,
)
from webhook.workloads.aiperf_sweep.credentials import check_credential_axes
from webhook.workloads.aiperf_sweep.expansion import Variation, cheap_count, deep_merge, expand, set_nested
from webhook.workloads.aiperf_sweep.naming import (
    MAX_CHILD_JOB_ID,
    MAX_SWEEP_TRIALS,
    MAX_SWEEP_VARIATIONS,
    child_name,
    child_name_suffix_length,
    needs_trial_suffix,
    sanitize_for_label,
)
from webhook.workloads.aiperf_sweep.spec import KIND, RUN_TIME_SAMPLED, SWEEP_TYPES, ExpansionRejected, SpecInvalid
from webhook.workloads.aiperf_sweep.workload import (
    SweepChild,
    SweepWorkload,
    configmap_bytes,
    requests_of,
    worst_first,
)
from webhook.workloads.kinds import FINISHED, JUDGED, RUNNING, KindSpec, Related, phase_of

#: AIPerf 0.13.0 `sweep_controller/child_rollup.py` TERMINAL_PHASES (PARENT_TERMINAL_PHASES and the rollup's Completed)
SWEEP_TERMINAL = frozenset({"Succeeded", "Failed", "Cancelled", "PartiallyFailed", "Completed"})


def sweep_state(obj: dict[str, Any], related: Related | None = None) -> tuple[str, str]:
    """Whether an AIPerfSweep ran: judged until every child exists (the audit controller judges each child
    its sweep controller has not created yet: webhook/audit/sweeps.py). Its phases (AIPerf 0.13.0
    `operator/handlers/sweep/create.py` Pending, `sweep_controller/status_writer.py` Running, the
    rollup's Aggregating): `Aggregating` means every child ran; SWEEP_TERMINAL are finished."""
    phase = phase_of(obj)
    if phase in SWEEP_TERMINAL:
        return FINISHED, f"phase {phase}"
    if phase == "Aggregating":
        return RUNNING, "phase Aggregating: every child ran"
    return JUDGED, "remaining children" if phase else "phase not set"


KIND_SPEC = KindSpec(
    kind=KIND,
    group=aiperf.KIND_SPEC.group,
    version=aiperf.KIND_SPEC.version,
    plural="aiperfsweeps",
    adapter=build,
    state=sweep_state,
    owns_jobsets=True,
    renders_many=True,
)

__all__ = [
    "CONTROLLER_GROUP",
    "EPOCH_RE",
    "FACTS",
    "KIND",
    "KIND_SPEC",
    "MAX_CHILD_JOB_ID",
    "MAX_SWEEP_TRIALS",
    "MAX_SWEEP_VARIATIONS",
    "RESULTS_SIDECAR_PORT",
    "RUN_TIME_SAMPLED",
    "SWEEP_CONTROLLER_RESOURCES",
    "SWEEP_LABEL",
    "SWEEP_TERMINAL",
    "SWEEP_RUN_EPOCH_LABEL",
    "SWEEP_TYPES",
    "SWEEP_UID_LABEL",
    "TRIAL_INDEX_LABEL",
    "VARIATION_INDEX_LABEL",
    "VARIATION_LABEL_LABEL",
    "ChildPlan",
    "ExpansionRejected",
    "SpecInvalid",
    "SweepChild",
    "SweepWorkload",
    "Variation",
    "build",
    "cheap_count",
    "check_credential_axes",
    "child_name",
    "child_name_suffix_length",
    "configmap_bytes",
    "controller_objects",
    "deep_merge",
    "expand",
    "needs_trial_suffix",
    "render_children",
    "requests_of",
    "sanitize_for_label",
    "set_nested",
    "sweep_state",
    "worst_first",
]
