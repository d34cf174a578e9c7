"""AIPerfSweep → Workload: the sweep-controller pod plus one child AIPerfJob per variation and trial.

Follows AIPerf 0.13.0 without importing it:

- `operator/handlers/sweep/create.py` `handle`: what the operator refuses at create (spec
  invalid, over 200 variations or 10 trials, child names over the 35-character job id, an
  epoch the results layout cannot store, no image) and the sweep-controller JobSet,
  ServiceAccount and Role it provisions (`_create_sweep_controller_jobset`, `_provision_rbac`);
- `config/sweep/expand.py` `expand_sweep`: grid (sorted paths, cartesian product), zip
  (lockstep) and scenarios (deep merge, named lists merged by name) expansion, with the
  bare-name path aliases of `config/loader/dotted_path.py`;
- `sweep_controller/_naming.py`: child names `<sweep>-v<NN>[-t<N>]`, the trial suffix only
  when more than one trial runs (or convergence is set);
- `sweep_controller/k8s_executor.py` `_build_child_spec` / `_build_child_metadata`: a child is
  the parent spec without the sweep-only fields, with the variation's benchmark, variables and
  seed; it is rendered here by the AIPerfJob adapter (`webhook.workloads.aiperf.build`).

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
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import os
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from webhook.config import Settings
from webhook.workloads import aiperf
from webhook.workloads.aiperf.env import POD_SECURITY
from webhook.workloads.base import AdapterError, PodGroup, RuntimeLookup, Workload
from webhook.workloads.shape import mapping, plain_json, str_map, string

KIND = "AIPerfSweep"
MAX_SWEEP_VARIATIONS = 200  # sweep_controller/_naming.py
MAX_SWEEP_TRIALS = 10
MAX_CHILD_JOB_ID = aiperf.MAX_JOB_ID  # 35
EPOCH_RE = re.compile(r"\A\d{9,10}(\d{6})?\Z")  # aiperf/common/results_markers.py
CONTROLLER_GROUP = "controller"  # the replicatedJob of the sweep-controller JobSet

SWEEP_LABEL = "aiperf.nvidia.com/sweep"
SWEEP_UID_LABEL = "aiperf.nvidia.com/sweep-uid"
SWEEP_RUN_EPOCH_LABEL = "aiperf.nvidia.com/sweep-run-epoch"
VARIATION_INDEX_LABEL = "aiperf.nvidia.com/variation-index"
VARIATION_LABEL_LABEL = "aiperf.nvidia.com/variation-label"
TRIAL_INDEX_LABEL = "aiperf.nvidia.com/trial-index"

# k8s_executor._build_child_spec: parent fields a child never inherits
_NOT_INHERITED = frozenset(
    "sweep failurePolicy failure_policy cancel ttlSecondsAfterFinished ttl_seconds_after_finished childMetadata "
    "child_metadata multiRun multi_run plot variables randomSeed random_seed".split()
)
_SWEEP_TYPES = ("grid", "zip", "scenarios", "sobol", "latin_hypercube", "adaptive_search")
RUN_TIME_SAMPLED = ("sobol", "latin_hypercube", "adaptive_search")
_SCENARIO_KEYS = {"name", "variables", "benchmark", "values"}
_NON_SWEEPABLE = frozenset({"sweep", "multi_run", "random_seed"})
_PATH_ALIASES = {  # config/loader/dotted_path.py _SWEEP_PATH_ALIASES
    k: f"phases.profiling.{k}"
    for k in "concurrency prefill_concurrency rate requests duration sessions users smoothness grace_period "
    "concurrency_ramp prefill_ramp rate_ramp rate_series".split()
}
_DIST_KEYS = frozenset({"peaks", "points", "value", "median", "stddev"})

# common/endpoint_credentials.py: sweep axes that could carry a credential
_CREDENTIAL_SEGMENTS = frozenset(
    "apikey xapikey authorization proxyauthorization token apitoken authtoken accesstoken bearertoken idtoken "
    "refreshtoken secret clientsecret password passwd credential awsaccesskeyid signature ocpapimsubscriptionkey "
    "xgoogapikey xfunctionskey aegsaskey xamzsecuritytoken".split()
)
_CREDENTIAL_SUFFIXES = ("apikey", "apitoken", "authorization", "authtoken", "accesstoken", "bearertoken", "idtoken",
                        "refreshtoken", "clientsecret", "secret", "password", "passwd", "credential", "signature")  # fmt: skip
_CREDENTIAL_PREFIXES = ("apikey", "authorization", "clientsecret", "secret", "password", "passwd", "credential")


def _credential_path(path: str) -> bool:
    """endpoint_credentials._is_sweep_credential_path (the path test; values are not inspected)."""
    segs = [
        "".join(ch for ch in s.lower() if ch.isalnum()) for s in path.replace("[", ".").replace("]", "").split(".") if s
    ]
    if any(a == "endpoint" and b == "headers" for a, b in zip(segs, segs[1:])):
        return True
    return any(
        s in _CREDENTIAL_SEGMENTS or s.endswith(_CREDENTIAL_SUFFIXES) or s.startswith(_CREDENTIAL_PREFIXES)
        for s in segs
    )


def _first_credential_path(value: Any, path: str) -> str | None:
    if _credential_path(path):
        return path
    if isinstance(value, dict):
        for k, v in value.items():
            found = _first_credential_path(v, f"{path}.{k}" if path else str(k))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _first_credential_path(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def check_credential_axes(sweep: dict[str, Any]) -> None:
    """validate_kubernetes_sweep_credential_axes: no sweep axis may vary a credential."""
    candidates: list[tuple[str, Any]] = []
    params = sweep.get("parameters")
    if isinstance(params, dict):
        candidates += [(str(p), v) for p, v in params.items()]
    for key in ("searchSpace", "search_space", "dimensions"):
        for d in sweep.get(key) or [] if isinstance(sweep.get(key), list) else []:
            if isinstance(d, dict) and isinstance(d.get("path"), str):
                candidates.append((d["path"], d.get("choices", [])))
    runs = sweep.get("runs")
    if isinstance(runs, list):
        candidates += [(f"sweep.runs[{i}]", run) for i, run in enumerate(runs)]
    for path, values in candidates:
        found = _first_credential_path(values, path)
        if found is not None:
            raise SpecInvalid(
                f"Kubernetes sweeps cannot vary credential-bearing values; sweep path {found!r} is not supported. "
                "Keep endpoint credentials fixed and inject them through Secret-backed pod environment variables"
            )


# K8sEnvironment.SWEEP_CONTROLLER / RESULTS_SIDECAR defaults (aiperf/kubernetes/environment.py)
SWEEP_CONTROLLER_RESOURCES = ("75m", "512Mi")
RESULTS_SIDECAR_PORT = 9091


class SpecInvalid(ValueError):
    """What the operator's create handler refuses (`AIPerfSweep spec invalid: ...`)."""

    prefix = "AIPerfSweep spec invalid"


class ExpansionRejected(SpecInvalid):
    """What expand_sweep refuses (`AIPerfSweep sweep expansion rejected the spec: ...`)."""

    prefix = "AIPerfSweep sweep expansion rejected the spec"


@dataclass
class SweepChild:
    """One child AIPerfJob: a (variation, trial) cell the sweep controller creates."""

    name: str
    variation: int
    label: str
    trials: list[int]  # the trial indexes that share this render ([0] without a trial suffix)
    workload: Workload
    #: every trial's child name, e.g. ["s-v03-t0", "s-v03-t1"]
    names: list[str] = field(default_factory=list)

    @property
    def pods(self) -> int:
        return self.workload.total_pods

    @functools.cached_property
    def requests(self) -> tuple[int, Decimal, Decimal]:
        """(pods, CPU cores, memory bytes) requested in all: computed once, ranked and reported often."""
        return requests_of(self.workload)

    #: the run-config ConfigMap's payload size (measured before its data is released, see `build`)
    configmap_bytes: int = 0

    def describe(self) -> str:
        """`s-v03 (phases.profiling.concurrency=64)`: how messages name a child."""
        return f"{self.name} ({self.label})"


@dataclass
class SweepWorkload(Workload):
    """A Workload whose pod groups are the peak (controller + heaviest child) and which keeps every child."""

    children: list[SweepChild] = field(default_factory=list)
    #: variations the operator counts (samples / iterations for run-time sampled sweeps)
    variations: int = 0
    trials: int = 1
    sweep_type: str = "grid"
    #: "repeated" (trials outer, variations inner: the default) or "independent"
    iteration_order: str = "repeated"
    #: the controller's own derived objects (JobSet, ServiceAccount, Role, RoleBinding)
    controller_objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the child whose pods are the pod groups after the controller (None when nothing rendered)
    worst: SweepChild | None = None
    #: notes for plan/Sweep Children (e.g. "children sampled at run time")
    notes: list[str] = field(default_factory=list)
    #: pod group name → (the Workload whose controller creates those pods, its own group)
    _sources: dict[str, tuple[Workload, PodGroup]] = field(default_factory=dict)

    def run_order(self) -> list[tuple[str, SweepChild]]:
        """Every child run (name, its variation's child) in the order the controller creates them
        (orchestrator.py: repeated = trials outer, variations inner; independent = the reverse)."""
        if self.iteration_order == "independent":
            return [(n, c) for c in self.children for n in c.names]
        most = max((len(c.names) for c in self.children), default=0)
        return [(c.names[t], c) for t in range(most) for c in self.children if t < len(c.names)]

    def group_source(self, group: PodGroup) -> tuple[Workload, PodGroup]:
        """Who creates a group's pods: the child AIPerfJob (its JobSet) for a child group, else the sweep."""
        return self._sources.get(group.name, (self, group))


# ----------------------------------------------------------------------------- naming


def needs_trial_suffix(trials: int | None, has_convergence: bool) -> bool:
    return has_convergence or (trials or 1) > 1


def child_name_suffix_length(n_variations: int, max_total_runs: int, *, has_convergence: bool) -> int:
    var_digits = max(2, len(str(max(n_variations - 1, 0))))
    trials = max_total_runs // n_variations if n_variations else 1
    return 2 + var_digits + (3 if needs_trial_suffix(trials, has_convergence) else 0)


def child_name(sweep: str, variation: int, trial: int | None) -> str:
    suffix = f"-t{trial:01d}" if trial is not None else ""
    return f"{sweep}-v{variation:02d}{suffix}"


def sanitize_for_label(value: str) -> str:
    s = re.sub(r"[^a-z0-9._-]+", "-", value.lower())
    s = re.sub(r"^[^a-z0-9]+|[^a-z0-9]+$", "", s)[:63]
    return re.sub(r"^[^a-z0-9]+|[^a-z0-9]+$", "", s) or "v"


# ----------------------------------------------------------------------------- expansion (config/sweep/expand.py)


def _resolve_path(path: Any, mode: str) -> str:
    if not isinstance(path, str):
        raise SpecInvalid(f"{mode} sweep parameter key must be a string, got {type(path).__name__}: {path!r}")
    p = path if "." in path else _PATH_ALIASES.get(path, path)
    if not p:
        raise SpecInvalid(f"{mode} sweep parameter: dimension path must be a non-empty string.")
    if p.startswith(".") or p.endswith(".") or ".." in p:
        raise SpecInvalid(
            f"{mode} sweep parameter: dimension path {p!r} must not start or end with '.' or contain '..'."
        )
    first = p.split(".", 1)[0]
    if first in _NON_SWEEPABLE:
        raise SpecInvalid(
            f"{mode} sweep parameter: dimension path {p!r} targets non-sweepable top-level field {first!r}."
        )
    if first == "benchmark":
        raise SpecInvalid(
            f"{mode} sweep parameter: dimension path {p!r} must not include the redundant 'benchmark.' prefix "
            "(e.g. 'phases.profiling.rate' instead of 'benchmark.phases.profiling.rate')."
        )
    return p


def _classify(parameters: Any, mode: str) -> tuple[dict[str, list[Any]], set[str]]:
    if not isinstance(parameters, dict) or not parameters:
        raise SpecInvalid(f"{mode} sweep needs sweep.parameters: a mapping of dotted paths to value lists.")
    paths: dict[str, list[Any]] = {}
    envelope: set[str] = set()
    for path, values in parameters.items():
        if not isinstance(values, list) or not values:
            raise SpecInvalid(f"{mode} sweep parameter {path!r}: value list must be non-empty.")
        resolved = _resolve_path(path, mode)
        if resolved in paths:
            raise SpecInvalid(
                f"{mode} sweep parameter {path!r} resolves to {resolved!r}, which is already a parameter."
            )
        paths[resolved] = values
        if resolved.split(".", 1)[0] == "variables":
            envelope.add(resolved)
    return paths, envelope


def _named_list(obj: Any) -> bool:
    return (
        isinstance(obj, list) and bool(obj) and all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in obj)
    )


def _find_entry(items: list[dict[str, Any]], key: str, parent: str) -> dict[str, Any] | None:
    """expand._find_phase_or_recipe_alias: index, exact name, then the unique profiling phase."""
    if parent == "phases" and key.isdigit():
        i = int(key)
        return items[i] if 0 <= i < len(items) else None
    for item in items:
        if item.get("name") == key:
            return item
    if key != "profiling" or parent != "phases":
        return None
    kinds = [(i, i.get("kind") or (i.get("name") if i.get("name") in ("warmup", "profiling") else None)) for i in items]
    profiling = [i for i, k in kinds if k == "profiling"]
    legacy = [i for i, k in kinds if k is None and i.get("name") != "warmup"]
    if len(profiling) == 1:
        return profiling[0]
    if not profiling and len(legacy) == 1:
        return legacy[0]
    return None


def set_nested(data: dict[str, Any], path: str, value: Any) -> None:
    """expand._set_nested_value: dicts by key, lists of named dicts by name (phases.profiling.x)."""
    keys = path.split(".")
    cur: Any = data
    for i, key in enumerate(keys):
        parent = keys[i - 1] if i else ""
        last = i == len(keys) - 1
        if _named_list(cur):
            match = _find_entry(cur, key, parent)
            if match is None:
                names = [item.get("name") for item in cur]
                raise SpecInvalid(f"sweep path {path!r}: no entry named {key!r} found (existing: {names}).")
            if last:
                match[key] = value
                return
            cur = match
            continue
        if not isinstance(cur, dict):
            raise SpecInvalid(
                f"sweep path {path!r}: cannot {'assign' if last else 'descend'} into {type(cur).__name__} at segment "
                f"{'.'.join(keys[:i]) or '<root>'!r}; expected a dict or list-of-named-dicts."
            )
        if last:
            cur[key] = value
            return
        cur = cur.setdefault(key, {})


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> None:
    """expand._deep_merge: named lists merge by name; a distribution kind swap replaces."""
    for key, value in override.items():
        old = base.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            od, vd = set(old) & _DIST_KEYS, set(value) & _DIST_KEYS
            if od and vd and od != vd:
                base[key] = value
            else:
                deep_merge(old, value)
        elif isinstance(old, list) and isinstance(value, list) and _named_list(old) and _named_list(value):
            for item in value:
                hit = next((b for b in old if b.get("name") == item["name"]), None)
                if hit is None:
                    old.append(copy.deepcopy(item))
                else:
                    deep_merge(hit, item)
        else:
            base[key] = value


def _label_value(v: Any) -> str:
    """Python's str() of a YAML scalar, as the f-string in expand.py prints it."""
    if v is True:
        return "True"
    if v is False:
        return "False"
    if v is None:
        return "None"
    return str(v)


@dataclass
class Variation:
    index: int
    label: str
    envelope: dict[str, Any]  # {"benchmark": ..., "variables": ...}


def expand(sweep: dict[str, Any], envelope: dict[str, Any]) -> list[Variation]:
    """The variations of a grid / zip / scenarios sweep, in AIPerf's order (expand_sweep)."""
    kind = sweep.get("type", "grid")
    if kind in ("grid", "zip"):
        paths, env_paths = _classify(sweep.get("parameters"), kind)
        names = sorted(paths)
        lists = [paths[n] for n in names]
        if kind == "zip":
            lengths = {n: len(paths[n]) for n in names}
            if len(set(lengths.values())) > 1:
                raise SpecInvalid(f"zip sweep parameters must all have equal length; got {lengths!r}.")
            combos: Any = zip(*lists)
        else:
            combos = itertools.product(*lists)
        out = []
        for idx, combo in enumerate(combos):
            variant = copy.deepcopy(envelope)
            body = variant.setdefault("benchmark", {})
            for path, value in zip(names, combo):
                set_nested(variant if path in env_paths else body, path, value)
            out.append(Variation(idx, ", ".join(f"{n}={_label_value(v)}" for n, v in zip(names, combo)), variant))
        return out
    if kind == "scenarios":
        runs = sweep.get("runs")
        if not isinstance(runs, list) or not runs:
            raise SpecInvalid("scenarios sweep needs sweep.runs: a non-empty list of runs.")
        out = []
        for idx, run in enumerate(runs):
            if not isinstance(run, dict):
                raise SpecInvalid(f"sweep run [{idx}] must be a mapping.")
            unknown = set(run) - _SCENARIO_KEYS
            if unknown:
                raise SpecInvalid(
                    f"sweep run [{idx}]: unknown field(s) {sorted(unknown)!r}; allowed: {sorted(_SCENARIO_KEYS)}. "
                    "(Wrap body fields under `benchmark:` inside the run.)"
                )
            variant = copy.deepcopy(envelope)
            over = {k: copy.deepcopy(v) for k, v in run.items() if k not in ("name", "values")}
            bench = over.get("benchmark")
            if isinstance(bench, dict) and isinstance(bench.get("dataset"), dict) and "datasets" not in bench:
                _singular_dataset(bench, variant, idx)
            deep_merge(variant, over)
            out.append(Variation(idx, str(run.get("name", f"scenario_{idx}")), variant))
        return out
    return []


def _singular_dataset(bench: dict[str, Any], base: dict[str, Any], idx: int) -> None:
    """expand._normalize_scenario_dataset_form: a scenario's `dataset:` merges into the base's list."""
    original = bench.pop("dataset")
    base_bench = base.get("benchmark") or {}
    base_sets = base_bench.get("datasets") or []
    name = original.get("name")
    if name is None:
        if len(base_sets) == 1 and isinstance(base_sets[0], dict) and base_sets[0].get("name") is not None:
            name = base_sets[0]["name"]
        else:
            raise SpecInvalid(
                f"sweep run [{idx}]: scenario uses singular 'benchmark.dataset:'; add 'name:' to disambiguate."
            )
    bench["datasets"] = [{"name": name, **{k: v for k, v in original.items() if k != "name"}}]


def cheap_count(sweep: dict[str, Any]) -> int | None:
    """create._cheap_variation_count: the count without expanding (None when unknown)."""
    kind = sweep.get("type", "grid")
    params = sweep.get("parameters")
    if kind == "grid" and isinstance(params, dict) and params and all(isinstance(v, list) for v in params.values()):
        return math.prod(len(v) for v in params.values())
    if kind == "zip" and isinstance(params, dict) and params and all(isinstance(v, list) for v in params.values()):
        return len(next(iter(params.values())))
    if kind == "scenarios" and isinstance(sweep.get("runs"), list):
        return len(sweep["runs"])
    if kind in ("sobol", "latin_hypercube"):
        n = sweep.get("samples")
        return n if isinstance(n, int) and not isinstance(n, bool) else None
    if kind == "adaptive_search":
        n = sweep.get("maxIterations", sweep.get("max_iterations"))
        return n if isinstance(n, int) and not isinstance(n, bool) else None
    return None


# ----------------------------------------------------------------------------- the controller pod


def _get(d: dict[str, Any], camel: str, default: Any = None) -> Any:
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()
    return d.get(camel, d.get(snake, default))


def _res(cpu: str, memory: str, mode: str) -> dict[str, dict[str, str]]:
    """ResourceSettings.to_k8s_resources: burstable sets requests only."""
    req = {"cpu": cpu, "memory": memory}
    return {"requests": req} if mode == "burstable" else {"requests": req, "limits": dict(req)}


def controller_objects(
    spec: dict[str, Any], name: str, ns: str, uid: str, epoch: str, settings: Settings
) -> dict[str, dict[str, Any]]:
    """create._create_sweep_controller_jobset and _provision_rbac: the objects the operator provisions."""
    env = {**{k: v for k, v in os.environ.items() if k.startswith("AIPERF_")}, **(settings.aiperf_env or {})}
    image = spec.get("image")
    tmpl = _get(spec, "podTemplate") or {}
    mode = _get(spec, "resourceMode") or "burstable"
    sa = f"aiperf-sweep-controller-{name}"
    base_url = env.get("AIPERF_OPERATOR_BASE_URL", "http://aiperf-operator.aiperf-system:8081")
    ctl: dict[str, Any] = {
        "name": "sweep-controller",
        "image": image,
        "command": ["python", "-m", "aiperf.sweep_controller.main"],
        "env": [
            {"name": "AIPERF_SWEEP_NAME", "value": name},
            {"name": "AIPERF_SWEEP_NAMESPACE", "value": ns},
            {"name": "AIPERF_SWEEP_UID", "value": uid},
            {"name": "AIPERF_SWEEP_EPOCH", "value": epoch},
            {"name": "AIPERF_OPERATOR_MANAGED", "value": "1"},
            {"name": "AIPERF_RESULTS_DIR", "value": "/results"},
            {"name": "AIPERF_OPERATOR_BASE_URL", "value": base_url},
        ],
        "volumeMounts": [{"name": "results", "mountPath": "/results"}, {"name": "tmp", "mountPath": "/tmp"}],
    }
    reserved = {e["name"] for e in ctl["env"]}
    ctl["env"] += [e for e in (tmpl.get("env") or []) if isinstance(e, dict) and e.get("name") not in reserved]
    if tmpl.get("resources") is not None:
        ctl["resources"] = tmpl["resources"]
    elif mode != "none":
        ctl["resources"] = _res(
            env.get("AIPERF_K8S_SWEEP_CONTROLLER_CPU", SWEEP_CONTROLLER_RESOURCES[0]),
            env.get("AIPERF_K8S_SWEEP_CONTROLLER_MEMORY", SWEEP_CONTROLLER_RESOURCES[1]),
            mode,
        )
    security: dict[str, Any] = {
        "runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
    }  # fmt: skip
    over = tmpl.get("containerSecurityContext") or {}
    for k, v in over.items():
        if k == "capabilities" and isinstance(v, dict):
            security["capabilities"] = {**security["capabilities"], **v}
        elif not (k in ("privileged", "allowPrivilegeEscalation") and v):
            security[k] = v
    ctl["securityContext"] = security
    sidecar: dict[str, Any] = {
        "name": "results-sidecar",
        "image": image,
        "command": ["python", "-m", "aiperf.kubernetes.results_sidecar"],
        "env": [
            {"name": "AIPERF_RESULTS_DIR", "value": "/results"},
            {"name": "AIPERF_RESULTS_SIDECAR_PORT", "value": str(RESULTS_SIDECAR_PORT)},
            {
                "name": "AIPERF_RESULTS_SIDECAR_LOG_LEVEL",
                "value": env.get("AIPERF_K8S_RESULTS_SIDECAR_LOG_LEVEL", "info"),
            },
        ],
        "volumeMounts": [
            {"name": "results", "mountPath": "/results", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "ports": [{"containerPort": RESULTS_SIDECAR_PORT, "name": "results"}],
    }
    pull = _get(spec, "imagePullPolicy")
    if pull is not None:
        ctl["imagePullPolicy"] = sidecar["imagePullPolicy"] = pull
    if mode != "none":
        cpu, mem = aiperf.RESOURCE_DEFAULTS["RESULTS_SIDECAR"]
        sidecar["resources"] = _res(
            env.get("AIPERF_K8S_RESULTS_SIDECAR_CPU", cpu), env.get("AIPERF_K8S_RESULTS_SIDECAR_MEMORY", mem), mode
        )
    sidecar["securityContext"] = dict(security)
    pod_security = copy.deepcopy(POD_SECURITY)  # the operator's pod security context (aiperf/env.py)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "OnFailure",
        "serviceAccountName": sa,
        "containers": [ctl, sidecar],
        "volumes": [{"name": "results", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
        "securityContext": pod_security,
    }
    for key in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets", "priorityClassName", "runtimeClassName"):
        if tmpl.get(key) is not None:
            pod_spec[key] = tmpl[key]
    if tmpl.get("podSecurityContext"):
        pod_spec["securityContext"] = {**pod_security, **tmpl["podSecurityContext"]}
    owner = [
        {
            "apiVersion": aiperf.API_VERSION,
            "kind": KIND,
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    jobset = {
        "apiVersion": aiperf.JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": {"name": f"aiperf-{name}", "namespace": ns, "ownerReferences": owner},
        "spec": {
            "network": {"enableDNSHostnames": True},
            "replicatedJobs": [
                {"name": "controller", "replicas": 1,
                 "template": {"spec": {"completions": 1, "parallelism": 1, "template": {"spec": pod_spec}}}},
            ],
        },
    }  # fmt: skip
    rules = [
        {"apiGroups": ["aiperf.nvidia.com"], "resources": ["aiperfjobs", "aiperfjobs/status"],
         "verbs": ["create", "get", "list", "watch", "patch", "update", "delete"]},
        {"apiGroups": ["aiperf.nvidia.com"], "resources": ["aiperfsweeps", "aiperfsweeps/status"],
         "verbs": ["get", "patch", "update"], "resourceNames": [name]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    ]  # fmt: skip
    meta = {"name": sa, "namespace": ns, "ownerReferences": owner}
    return {
        "jobSet": jobset,
        "serviceAccount": {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        "role": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": dict(meta), "rules": rules},
        "roleBinding": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": dict(meta),
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
        },
    }


# ----------------------------------------------------------------------------- children


def _quantity(text: Any) -> Decimal:
    """A cheap request total for ranking children (exact parsing lives in the quota check)."""
    s = str(text or "0")
    units = {"m": Decimal("0.001"), "Ki": Decimal(1024), "Mi": Decimal(1024**2), "Gi": Decimal(1024**3), "k": Decimal(1000),
             "M": Decimal(10**6), "G": Decimal(10**9)}  # fmt: skip
    for u in ("Ki", "Mi", "Gi", "m", "k", "M", "G"):
        if s.endswith(u):
            try:
                return Decimal(s[: -len(u)]) * units[u]
            except ArithmeticError:
                return Decimal(0)
    try:
        return Decimal(s)
    except ArithmeticError:
        return Decimal(0)


def requests_of(wl: Workload) -> tuple[int, Decimal, Decimal]:
    """(pods, CPU cores, memory bytes) a Workload requests in all (containers' requests, init excluded)."""
    return _requests_of(wl)


def _requests_of(wl: Workload) -> tuple[int, Decimal, Decimal]:
    cpu = mem = Decimal(0)
    for g in wl.pod_groups:
        for c in g.containers(init=False):
            req = (c.get("resources") or {}).get("requests") or {}
            cpu += _quantity(req.get("cpu")) * g.pods
            mem += _quantity(req.get("memory")) * g.pods
    return wl.total_pods, cpu, mem


def configmap_bytes(wl: Workload) -> int:
    cm = wl.derived.get("configMap") or {}
    return sum(len(str(k).encode()) + len(str(v).encode()) for k, v in (cm.get("data") or {}).items())


def _rank(c: SweepChild) -> tuple[Any, ...]:
    return (*(-x for x in c.requests), -c.configmap_bytes, c.variation)


def worst_first(children: list[SweepChild]) -> list[SweepChild]:
    """Most workers (pods), then largest requests, then biggest ConfigMap, first."""
    return sorted(children, key=_rank)


def _release_configmap(c: SweepChild) -> None:
    """Drop a child's run-config text once its size is measured (the metadata stays)."""
    cm = c.workload.derived.get("configMap")
    if cm is not None and "data" in cm:
        c.workload.derived["configMap"] = {k: v for k, v in cm.items() if k != "data"}


def _child_obj(
    parent: dict[str, Any], spec: dict[str, Any], var: Variation, name: str, ns: str, labels: dict[str, str], seed: Any
) -> dict[str, Any]:
    child_spec = {k: v for k, v in spec.items() if k not in _NOT_INHERITED}
    child_spec["benchmark"] = var.envelope.get("benchmark") or {}
    variables = var.envelope.get("variables")
    if variables:
        child_spec["variables"] = variables
    if seed is not None:
        child_spec["randomSeed"] = seed
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels}
    pmeta = parent.get("metadata") or {}
    if pmeta.get("creationTimestamp"):  # a child exists only later; its epoch is not judged here
        meta["creationTimestamp"] = pmeta["creationTimestamp"]
    return {"apiVersion": aiperf.API_VERSION, "kind": "AIPerfJob", "metadata": meta, "spec": child_spec}


def build(
    obj: dict[str, Any],
    *,
    settings: Settings,
    runtime_lookup: RuntimeLookup | None = None,
    namespace: str | None = None,
) -> SweepWorkload:
    """The Workload for one AIPerfSweep. Raises AdapterError when it cannot be read as one."""
    plain_json(obj)
    meta = mapping(obj.get("metadata"), "metadata")
    name = string(meta.get("name"), "metadata.name") or ""
    ns = string(meta.get("namespace"), "metadata.namespace") or namespace or "default"
    str_map(meta.get("labels"), "metadata.labels")
    str_map(meta.get("annotations"), "metadata.annotations")
    uid = string(meta.get("uid"), "metadata.uid") or ""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise AdapterError("spec must be a mapping")
    wl = SweepWorkload(
        kind=KIND, api_version=str(obj.get("apiVersion") or aiperf.API_VERSION), name=name, namespace=ns, obj=obj
    )
    try:
        _build(wl, obj, spec, settings, uid)
    except SpecInvalid as exc:
        wl.render_errors.append(
            f"The AIPerf operator refuses this AIPerfSweep at create ({exc.prefix}: {exc}). "
            "Fix: correct the field the message names and apply again."
        )
    if wl.render_errors and not wl.pod_groups:
        wl.incomplete_reason = "the AIPerf operator cannot start this AIPerfSweep"
    return wl


def _build(wl: SweepWorkload, obj: dict[str, Any], spec: dict[str, Any], settings: Settings, uid: str) -> None:
    name, ns = wl.name, wl.namespace
    sweep = spec.get("sweep")
    if sweep is None:
        raise SpecInvalid(
            "AIPerfSweep.spec.sweep is required; set a `sweep:` block (grid or scenarios). For a single benchmark, use AIPerfJob"
        )
    if not isinstance(sweep, dict):
        raise AdapterError("spec.sweep must be a mapping")
    kind = sweep.get("type", "grid")
    if kind not in _SWEEP_TYPES:
        raise SpecInvalid(f"sweep.type {kind!r} is not one of {', '.join(_SWEEP_TYPES)}")
    wl.sweep_type = kind
    check_credential_axes(sweep)
    child_meta = mapping(_get(spec, "childMetadata"), "spec.childMetadata")
    extra_labels = str_map(child_meta.get("labels"), "spec.childMetadata.labels")
    str_map(child_meta.get("annotations"), "spec.childMetadata.annotations")
    multi = mapping(_get(spec, "multiRun"), "spec.multiRun")
    trials = _get(multi, "numRuns", 1)
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise SpecInvalid(f"multiRun.numRuns must be an integer >= 1, got {trials!r}")
    conv = _get(multi, "convergence")
    convergence = conv is not None
    min_runs = _get(conv, "minRuns", 2) if isinstance(conv, dict) else 2
    if convergence and isinstance(min_runs, int) and min_runs > trials:
        raise SpecInvalid(
            f"convergence.min_runs ({min_runs}) must be <= num_runs ({trials}). Either lower min_runs or raise num_runs"
        )
    wl.trials = trials
    order = _get(sweep, "iterationOrder", "repeated")  # _GridSweepBase: every type but adaptive_search
    wl.iteration_order = order if order in ("repeated", "independent") else "repeated"
    if convergence and kind != "adaptive_search" and order == "repeated":
        raise SpecInvalid(
            "iteration_order='repeated' (the default) is incompatible with adaptive trial convergence "
            "(multi_run.convergence). Use 'independent' instead: set spec.sweep.iterationOrder: independent"
        )

    # create._compute_cardinality: trials, then the cheap count, then the expansion
    if trials > MAX_SWEEP_TRIALS:
        wl.render_errors.append(
            f"AIPerfSweep multi_run.num_runs ({trials}) exceeds the {MAX_SWEEP_TRIALS}-trial child-name budget "
            f"(trial index 0..{MAX_SWEEP_TRIALS - 1}), so the AIPerf operator rejects the sweep. "
            f"Fix: set spec.multiRun.numRuns to at most {MAX_SWEEP_TRIALS}, or split the trials over several AIPerfSweeps."
        )
        return
    count = cheap_count(sweep)
    if count is not None and count > MAX_SWEEP_VARIATIONS:
        wl.variations = count
        wl.render_errors.append(_over_cap(count))
        return
    envelope: dict[str, Any] = {"benchmark": spec.get("benchmark") if isinstance(spec.get("benchmark"), dict) else {}}
    variables = spec.get("variables")
    if isinstance(variables, dict) and variables:
        envelope["variables"] = variables
    try:
        variations = expand(sweep, envelope)
    except SpecInvalid as exc:
        raise ExpansionRejected(str(exc)) from exc
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
        return
    max_runs = n_variations * trials
    suffix = child_name_suffix_length(n_variations, max_runs, has_convergence=convergence)
    allowed = MAX_CHILD_JOB_ID - suffix
    with_trial = needs_trial_suffix(trials, convergence)
    if len(name) > allowed:
        worst = f"-v{max(n_variations - 1, 0)}{'-t0' if with_trial else ''}"
        wl.render_errors.append(
            f"AIPerfSweep name '{name}' ({len(name)} chars) leaves no room for the child job_id suffix (worst case "
            f"'{worst}', {suffix} chars); the derived child name would exceed the {MAX_CHILD_JOB_ID}-char job_id cap, "
            f"so the AIPerf operator rejects the sweep. Fix: rename the AIPerfSweep to at most {allowed} characters "
            f"for this cardinality ({n_variations} variation(s) x {trials} trial(s))."
        )
        return
    epoch = aiperf.run_epoch(obj)  # results_layout.epoch_key_from_body (a pre-1970 time keeps its minus sign)
    if not EPOCH_RE.match(epoch):
        created = (obj.get("metadata") or {}).get("creationTimestamp")
        wl.render_errors.append(
            f"AIPerfSweep {ns}/{name} derived an unstorable run epoch {epoch!r} from metadata.creationTimestamp "
            f"{created!r} (it must be 9-10 decimal digits, optionally followed by a 6-digit suffix), so the AIPerf "
            "operator rejects it. Fix: remove metadata.creationTimestamp and create the AIPerfSweep again."
        )
        return
    image = spec.get("image")
    if not image:
        wl.render_errors.append(
            'AIPerfSweep has no spec.image: the AIPerf operator needs it for the sweep-controller pod ("image is '
            'required") and starts nothing. Fix: set spec.image, e.g. nvcr.io/nvidia/aiperf:0.13.0.'
        )
        return

    wl.controller_objects = controller_objects(spec, name, ns, uid, epoch, settings)
    js = wl.controller_objects["jobSet"]
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    controller = PodGroup(name=CONTROLLER_GROUP, pods=1, pod_spec=pod, role="sweep controller", queued=False)
    wl.managed_service_accounts.add(pod["serviceAccountName"])
    seed = _get(spec, "randomSeed")
    if seed is None and _get(multi, "setConsistentSeed", True) is not False:
        seed = 42  # AIPerfConfig._apply_consistent_seed_default: a sweep's workloads must be identical
    same_seed = bool(_get(sweep, "sameSeed", False))
    for var in variations:
        trial_ids: list[int | None] = list(range(trials)) if with_trial else [None]
        first = child_name(name, var.index, trial_ids[0])
        labels = {**extra_labels, SWEEP_LABEL: name, SWEEP_UID_LABEL: uid, SWEEP_RUN_EPOCH_LABEL: epoch,
                  VARIATION_INDEX_LABEL: f"{var.index:02d}", VARIATION_LABEL_LABEL: sanitize_for_label(var.label)}  # fmt: skip
        if with_trial:
            labels[TRIAL_INDEX_LABEL] = "0"
        child_seed = seed if seed is None or same_seed else seed + var.index if isinstance(seed, int) else seed
        child_obj = _child_obj(obj, spec, var, first, ns, labels, child_seed)
        try:
            cwl = aiperf.build(child_obj, settings=settings, namespace=ns)
        except AdapterError as exc:
            raise SpecInvalid(f"variation {var.index} ({var.label}): {exc}") from exc
        child = SweepChild(
            name=first,
            variation=var.index,
            label=var.label,
            trials=[t or 0 for t in trial_ids],
            workload=cwl,
            names=[child_name(name, var.index, t) for t in trial_ids],
            configmap_bytes=configmap_bytes(cwl),
        )
        wl.children.append(child)
        # 200 run-config texts can hold 200 x ~1 MiB: only the heaviest child so far keeps its data (every size is kept)
        if cwl.render_errors or not cwl.pod_groups:
            _release_configmap(child)
        elif wl.worst is None or _rank(child) < _rank(wl.worst):
            if wl.worst is not None:
                _release_configmap(wl.worst)
            wl.worst = child
        else:
            _release_configmap(child)
    # the peak's objects: the controller's JobSet and ServiceAccount, and the running child's JobSet and ConfigMap
    wl.derived = {"jobSet": js, "serviceAccount": wl.controller_objects["serviceAccount"]}
    wl.pod_groups = [controller]
    if wl.worst is not None:
        cwl = wl.worst.workload
        wl.queue_name = cwl.queue_name
        for key in ("jobSet", "configMap"):
            if key in cwl.derived:
                wl.derived["child" + key[0].upper() + key[1:]] = cwl.derived[key]
        for g in cwl.pod_groups:
            peak = PodGroup(name=f"v{wl.worst.variation:02d}-{g.name}", pods=g.pods, pod_spec=g.pod_spec,
                            pod_metadata=g.pod_metadata, role=f"{g.role} of child {wl.worst.name}")  # fmt: skip
            wl.pod_groups.append(peak)
            wl._sources[peak.name] = (cwl, g)


def _over_cap(n: int) -> str:
    return (
        f"AIPerfSweep expands to {n} variations, exceeding the {MAX_SWEEP_VARIATIONS}-variation child-name budget "
        f"(variation index 0..{MAX_SWEEP_VARIATIONS - 1}), so the AIPerf operator rejects the sweep. Fix: reduce the "
        f"sweep cardinality to at most {MAX_SWEEP_VARIATIONS} variations (fewer values per parameter), or split it "
        "into several AIPerfSweeps."
    )
