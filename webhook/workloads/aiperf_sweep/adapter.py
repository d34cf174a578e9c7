"""`build`: one AIPerfSweep to a SweepWorkload, in the order of AIPerf 0.13.0's
`operator/handlers/sweep/create.py` `handle`.

What the handler raises as `spec invalid` (and what the expansion rejects) ends the build with
one refusal; the later refusals (trial and variation caps, the child-name budget, the run
epoch, the image) are render errors the operator reports the same way. Each is a `Job Render`
FAIL with the fix.
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Any

from webhook.config import Settings
from webhook.workloads import aiperf
from webhook.workloads.aiperf import lookup
from webhook.workloads.aiperf_sweep.children import ChildPlan, render_children
from webhook.workloads.aiperf_sweep.controller import CONTROLLER_GROUP, controller_objects
from webhook.workloads.aiperf_sweep.credentials import check_credential_axes
from webhook.workloads.aiperf_sweep.expansion import Variation, cheap_count, expand
from webhook.workloads.aiperf_sweep.naming import (
    MAX_CHILD_JOB_ID,
    MAX_SWEEP_TRIALS,
    MAX_SWEEP_VARIATIONS,
    child_name_suffix_length,
    needs_trial_suffix,
)
from webhook.workloads.aiperf_sweep.spec import (
    KIND,
    RUN_TIME_SAMPLED,
    SWEEP_TYPES,
    ExpansionRejected,
    SpecInvalid,
)
from webhook.workloads.aiperf_sweep.workload import SweepWorkload
from webhook.workloads.base import AdapterError, PodGroup, RuntimeLookup
from webhook.workloads.shape import mapping, str_map

EPOCH_RE = re.compile(r"\A\d{9,10}(\d{6})?\Z")  # aiperf/common/results_markers.py
#: AIPerfConfig._apply_consistent_seed_default: a sweep's workloads must be identical
CONSISTENT_SEED = 42
#: an AIPerfJob's, but for what the sweep itself is not: its JobSet is the sweep controller's (named
#: as the sweep), its queue is its children's, and its Fix for resources is on its children
FACTS = replace(aiperf.FACTS, jobset_prefix="", queue_field="", default_queue=False, resources_hint=())


def build(
    obj: dict[str, Any],
    *,
    settings: Settings,
    runtime_lookup: RuntimeLookup | None = None,
    namespace: str | None = None,
) -> SweepWorkload:
    """The Workload for one AIPerfSweep. Raises AdapterError when it cannot be read as one."""
    name, ns, _, uid = aiperf.read_metadata(obj, namespace)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise AdapterError("spec must be a mapping")
    wl = SweepWorkload(
        kind=KIND,
        api_version=str(obj.get("apiVersion") or aiperf.API_VERSION),
        name=name,
        namespace=ns,
        obj=obj,
        facts=FACTS,
    )
    try:
        _build(wl, obj, spec, settings, uid or "")
    except SpecInvalid as exc:
        wl.render_errors.append(
            f"The AIPerf operator refuses this AIPerfSweep at create ({exc.prefix}: {exc}). "
            "Fix: correct the field the message names and apply again."
        )
    if wl.render_errors and not wl.pod_groups:
        wl.incomplete_reason = "the AIPerf operator cannot start this AIPerfSweep"
    return wl


def _build(wl: SweepWorkload, obj: dict[str, Any], spec: dict[str, Any], settings: Settings, uid: str) -> None:
    """create.handle, step by step: read the sweep and its runs, count and expand the variations,
    refuse what cannot start, then the controller's objects, the children and the peak."""
    sweep = _sweep_block(spec)
    wl.sweep_type = sweep.get("type", "grid")
    check_credential_axes(sweep)
    extra_labels = _child_labels(spec)
    multi, convergence = _multi_run(wl, spec, sweep)
    variations = _variations(wl, spec, sweep)
    if variations is None:
        return
    with_trial = needs_trial_suffix(wl.trials, convergence)
    epoch = aiperf.run_epoch(obj)  # results_layout.epoch_key_from_body (a pre-1970 time keeps its minus sign)
    refusal = _name_refusal(wl, convergence, with_trial) or _epoch_refusal(wl, obj, epoch) or _image_refusal(spec)
    if refusal is not None:
        wl.render_errors.append(refusal)
        return
    wl.controller_objects = controller_objects(spec, wl.name, wl.namespace, uid, epoch, settings)
    pod = wl.controller_objects["jobSet"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    controller = PodGroup(name=CONTROLLER_GROUP, pods=1, pod_spec=pod, role="sweep controller", queued=False)
    wl.managed_service_accounts.add(pod["serviceAccountName"])
    seed = lookup(spec, "randomSeed")
    if seed is None and lookup(multi, "setConsistentSeed", True) is not False:
        seed = CONSISTENT_SEED
    plan = ChildPlan(
        parent=obj,
        spec=spec,
        sweep=wl.name,
        namespace=wl.namespace,
        uid=uid,
        epoch=epoch,
        extra_labels=extra_labels,
        trials=wl.trials,
        with_trial=with_trial,
        seed=seed,
        same_seed=bool(lookup(sweep, "sameSeed", False)),
    )
    render_children(wl, plan, variations, settings)
    wl.set_peak(controller)


def _sweep_block(spec: dict[str, Any]) -> dict[str, Any]:
    """spec.sweep: present, a mapping, of a known type."""
    sweep = spec.get("sweep")
    if sweep is None:
        raise SpecInvalid(
            "AIPerfSweep.spec.sweep is required; set a `sweep:` block (grid or scenarios). For a single benchmark, use AIPerfJob"
        )
    if not isinstance(sweep, dict):
        raise AdapterError("spec.sweep must be a mapping")
    kind = sweep.get("type", "grid")
    if kind not in SWEEP_TYPES:
        raise SpecInvalid(f"sweep.type {kind!r} is not one of {', '.join(SWEEP_TYPES)}")
    return sweep


def _child_labels(spec: dict[str, Any]) -> dict[str, str]:
    """spec.childMetadata: its labels go onto every child (its annotations are only shape-checked)."""
    child_meta = mapping(lookup(spec, "childMetadata"), "spec.childMetadata")
    extra_labels = str_map(child_meta.get("labels"), "spec.childMetadata.labels")
    str_map(child_meta.get("annotations"), "spec.childMetadata.annotations")
    return extra_labels


def _multi_run(wl: SweepWorkload, spec: dict[str, Any], sweep: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """spec.multiRun (trials, convergence) and sweep.iterationOrder into `wl.trials` and
    `wl.iteration_order`; returns multiRun and whether convergence is set."""
    multi = mapping(lookup(spec, "multiRun"), "spec.multiRun")
    trials = lookup(multi, "numRuns", 1)
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise SpecInvalid(f"multiRun.numRuns must be an integer >= 1, got {trials!r}")
    conv = lookup(multi, "convergence")
    convergence = conv is not None
    min_runs = lookup(conv, "minRuns", 2) if isinstance(conv, dict) else 2
    if convergence and isinstance(min_runs, int) and min_runs > trials:
        raise SpecInvalid(
            f"convergence.min_runs ({min_runs}) must be <= num_runs ({trials}). Either lower min_runs or raise num_runs"
        )
    wl.trials = trials
    order = lookup(sweep, "iterationOrder", "repeated")  # _GridSweepBase: every type but adaptive_search
    wl.iteration_order = order if order in ("repeated", "independent") else "repeated"
    if convergence and wl.sweep_type != "adaptive_search" and order == "repeated":
        raise SpecInvalid(
            "iteration_order='repeated' (the default) is incompatible with adaptive trial convergence "
            "(multi_run.convergence). Use 'independent' instead: set spec.sweep.iterationOrder: independent"
        )
    return multi, convergence


def _variations(wl: SweepWorkload, spec: dict[str, Any], sweep: dict[str, Any]) -> list[Variation] | None:
    """create._compute_cardinality: trials, then the cheap count, then the expansion; sets
    `wl.variations`. None when a cap refuses the sweep (the refusal is in `wl.render_errors`)."""
    trials = wl.trials
    if trials > MAX_SWEEP_TRIALS:
        wl.render_errors.append(
            f"AIPerfSweep multi_run.num_runs ({trials}) exceeds the {MAX_SWEEP_TRIALS}-trial child-name budget "
            f"(trial index 0..{MAX_SWEEP_TRIALS - 1}), so the AIPerf operator rejects the sweep. "
            f"Fix: set spec.multiRun.numRuns to at most {MAX_SWEEP_TRIALS}, or split the trials over several AIPerfSweeps."
        )
        return None
    count = cheap_count(sweep)
    if count is not None and count > MAX_SWEEP_VARIATIONS:
        wl.variations = count
        wl.render_errors.append(_over_cap(count))
        return None
    envelope: dict[str, Any] = {"benchmark": spec.get("benchmark") if isinstance(spec.get("benchmark"), dict) else {}}
    variables = spec.get("variables")
    if isinstance(variables, dict) and variables:
        envelope["variables"] = variables
    try:
        variations = expand(sweep, envelope)
    except SpecInvalid as exc:
        raise ExpansionRejected(str(exc)) from exc
    kind = wl.sweep_type
    if kind in RUN_TIME_SAMPLED:
        wl.notes.append(
            f"a {kind} sweep draws its {count} variation(s) at run time; each child is judged as the base template"
        )
        variations = [Variation(0, "base", copy.deepcopy(envelope))]
        n_variations = count or 1
    else:
        n_variations = len(variations)
    wl.variations = n_variations
    if n_variations > MAX_SWEEP_VARIATIONS:
        wl.render_errors.append(_over_cap(n_variations))
        return None
    return variations


def _name_refusal(wl: SweepWorkload, convergence: bool, with_trial: bool) -> str | None:
    """The child names `<sweep>-v<NN>[-t<N>]` must fit the 35-character job id."""
    name, n_variations, trials = wl.name, wl.variations, wl.trials
    suffix = child_name_suffix_length(n_variations, n_variations * trials, has_convergence=convergence)
    allowed = MAX_CHILD_JOB_ID - suffix
    if len(name) <= allowed:
        return None
    worst = f"-v{max(n_variations - 1, 0)}{'-t0' if with_trial else ''}"
    return (
        f"AIPerfSweep name '{name}' ({len(name)} chars) leaves no room for the child job_id suffix (worst case "
        f"'{worst}', {suffix} chars); the derived child name would exceed the {MAX_CHILD_JOB_ID}-char job_id cap, "
        f"so the AIPerf operator rejects the sweep. Fix: rename the AIPerfSweep to at most {allowed} characters "
        f"for this cardinality ({n_variations} variation(s) x {trials} trial(s))."
    )


def _epoch_refusal(wl: SweepWorkload, obj: dict[str, Any], epoch: str) -> str | None:
    """The run epoch must be one the results layout can store."""
    if EPOCH_RE.match(epoch):
        return None
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    return (
        f"AIPerfSweep {wl.namespace}/{wl.name} derived an unstorable run epoch {epoch!r} from metadata.creationTimestamp "
        f"{created!r} (it must be 9-10 decimal digits, optionally followed by a 6-digit suffix), so the AIPerf "
        "operator rejects it. Fix: remove metadata.creationTimestamp and create the AIPerfSweep again."
    )


def _image_refusal(spec: dict[str, Any]) -> str | None:
    """The sweep-controller pod runs spec.image."""
    if spec.get("image"):
        return None
    return (
        'AIPerfSweep has no spec.image: the AIPerf operator needs it for the sweep-controller pod ("image is '
        'required") and starts nothing. Fix: set spec.image, e.g. nvcr.io/nvidia/aiperf:0.13.0.'
    )


def _over_cap(n: int) -> str:
    return (
        f"AIPerfSweep expands to {n} variations, exceeding the {MAX_SWEEP_VARIATIONS}-variation child-name budget "
        f"(variation index 0..{MAX_SWEEP_VARIATIONS - 1}), so the AIPerf operator rejects the sweep. Fix: reduce the "
        f"sweep cardinality to at most {MAX_SWEEP_VARIATIONS} variations (fewer values per parameter), or split it "
        "into several AIPerfSweeps."
    )
