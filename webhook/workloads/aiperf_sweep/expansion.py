"""The variations of a sweep: AIPerf 0.13.0's `config/sweep/expand.py` `expand_sweep`.

Grid (sorted paths, cartesian product), zip (lockstep) and scenarios (deep merge, named lists
merged by name), with the bare-name path aliases of `config/loader/dotted_path.py`, and the
operator's cheap count (`create._cheap_variation_count`) that bounds a sweep before expanding it.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass
from typing import Any

from webhook.workloads.aiperf_sweep.spec import SpecInvalid

_SCENARIO_KEYS = {"name", "variables", "benchmark", "values"}
_NON_SWEEPABLE = frozenset({"sweep", "multi_run", "random_seed"})
_PATH_ALIASES = {  # config/loader/dotted_path.py _SWEEP_PATH_ALIASES
    k: f"phases.profiling.{k}"
    for k in "concurrency prefill_concurrency rate requests duration sessions users smoothness grace_period "
    "concurrency_ramp prefill_ramp rate_ramp rate_series".split()
}
_DIST_KEYS = frozenset({"peaks", "points", "value", "median", "stddev"})


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
    """expand._set_nested_value: dicts by key, lists of named dicts by name (phases.profiling.x), on
    `data` (a variation's own top-level dict), copying only the containers on `path`.

    The rest stays shared with the sweep's envelope, read-only: 200 variations of a 500 KB benchmark
    held 200 deep copies (100 MB and seconds of CPU) for one changed number each."""
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
            own = dict(match)
            cur[next(j for j, item in enumerate(cur) if item is match)] = own
            if last:
                own[key] = value
                return
            cur = own
            continue
        if not isinstance(cur, dict):
            raise SpecInvalid(
                f"sweep path {path!r}: cannot {'assign' if last else 'descend'} into {type(cur).__name__} at segment "
                f"{'.'.join(keys[:i]) or '<root>'!r}; expected a dict or list-of-named-dicts."
            )
        if last:
            cur[key] = value
            return
        nxt = cur.setdefault(key, {})
        if isinstance(nxt, (dict, list)):
            nxt = cur[key] = type(nxt)(nxt)  # this variation's own copy of the next container on the path
        cur = nxt


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """deep_merge(copy.deepcopy(base), override)'s result, sharing what the override leaves as it was."""
    out = dict(base)
    for key, value in override.items():
        old = out.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            od, vd = set(old) & _DIST_KEYS, set(value) & _DIST_KEYS
            out[key] = value if od and vd and od != vd else merged(old, value)
        elif isinstance(old, list) and isinstance(value, list) and _named_list(old) and _named_list(value):
            items = list(old)
            for item in value:
                j = next((j for j, b in enumerate(items) if b.get("name") == item["name"]), None)
                if j is None:
                    items.append(copy.deepcopy(item))
                else:
                    items[j] = merged(items[j], item)
            out[key] = items
        else:
            out[key] = value
    return out


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
        return _expand_parameters(sweep, envelope, kind)
    if kind == "scenarios":
        return _expand_scenarios(sweep, envelope)
    return []


def _expand_parameters(sweep: dict[str, Any], envelope: dict[str, Any], kind: str) -> list[Variation]:
    """expand._expand_grid_sweep / _expand_zip_sweep: paths sorted, their cartesian product (grid) or their
    values in lockstep (zip); the label is `path=value, ...`."""
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
        # each variation owns the containers its values change; the rest is the envelope's, shared
        variant = dict(envelope)
        body = variant.setdefault("benchmark", {})
        if isinstance(body, (dict, list)):
            body = variant["benchmark"] = type(body)(body)
        for path, value in zip(names, combo):
            set_nested(variant if path in env_paths else body, path, value)
        out.append(Variation(idx, ", ".join(f"{n}={_label_value(v)}" for n, v in zip(names, combo)), variant))
    return out


def _expand_scenarios(sweep: dict[str, Any], envelope: dict[str, Any]) -> list[Variation]:
    """expand._expand_scenario_sweep: each run deep-merged over the base; the label is the run's name."""
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
        over = {k: copy.deepcopy(v) for k, v in run.items() if k not in ("name", "values")}
        bench = over.get("benchmark")
        if isinstance(bench, dict) and isinstance(bench.get("dataset"), dict) and "datasets" not in bench:
            _singular_dataset(bench, envelope, idx)
        # the run merged over the envelope, sharing what it does not change (a deep copy per run held
        # as many copies of the base benchmark as there are runs)
        variant = merged(envelope, over)
        out.append(Variation(idx, str(run.get("name", f"scenario_{idx}")), variant))
    return out


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
