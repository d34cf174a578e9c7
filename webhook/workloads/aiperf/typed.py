"""Shape checks: the typed fields AIPerf 0.13.0's models refuse, and what the operator
refuses before rendering (phase names, a job id that is not a DNS label).
"""

from __future__ import annotations

import re
from typing import Any

from webhook.workloads.aiperf.env import _SCHEDULING_KEYS, _SPEC_KEYS, lookup
from webhook.workloads.aiperf.jobset import _key, _no_unknown, _pod_template
from webhook.workloads.aiperf.workers import _phases
from webhook.workloads.base import AdapterError
from webhook.workloads.shape import (
    at,
    boolean,
    integer,
    listing,
    mapping,
    one_of,
    string,
    wrong,
)

# --- typed fields AIPerf 0.13.0's models refuse (aiperf/config/{phases,dataset,endpoint,models}.py), in
# pydantic's lax mode: what AIPerf accepts is never refused here (a wrong verdict must not block a user)
PHASE_TYPES = ("concurrency", "constant", "gamma", "poisson", "fixed_schedule", "user_centric")  # PhaseConfig union
DATASET_TYPES = ("synthetic", "file", "public")  # DatasetType (case-insensitive)
ENDPOINT_TYPES = (
    "audio_transcription chat cohere_rankings completions responses messages chat_embeddings embeddings "
    "hf_tei_rankings huggingface_generate image_generation image_edit video_generation image_retrieval "
    "nim_embeddings nim_rankings solido_rag raw template"
).split()  # EndpointType
_PHASE_INTS = ("requests", "sessions", "concurrency", "prefillConcurrency")
_PHASE_DURATIONS = ("duration", "gracePeriod")  # aiperf/config/loader/duration.py
_PHASE_FLOATS = ("rate", "failedRequestThreshold", "smoothness")
_PHASE_BOOLS = ("excludeFromResults", "seamless", "burstPhaseStarts")
# possessive (++, *+, ?+): a long run of digits or spaces is never walked back (bench/fuzz_parsers.py)
_DURATION = re.compile(r"^(\d++(?:\.\d++)?+)\s*+(s|sec|m|min|h|hr|hour)?$", re.IGNORECASE)
_LAX_TRUE_FALSE = {"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"}


def _lax_int(value: Any, path: str) -> None:
    """pydantic's lax int: an int, a bool, an integral float, or a string of digits."""
    if value is None or isinstance(value, (int, bool)) or (isinstance(value, float) and value.is_integer()):
        return
    if isinstance(value, str) and re.fullmatch(r"\s*+[+-]?+\d++\s*+", value):
        return
    raise wrong(path, "an integer", value)


def _lax_float(value: Any, path: str) -> None:
    """pydantic's lax float: a number, a bool, or a string that reads as a number."""
    if value is None or isinstance(value, (int, float, bool)):
        return
    if isinstance(value, str):
        try:
            float(value)
            return
        except ValueError:
            pass
    raise wrong(path, "a number", value)


def _lax_bool(value: Any, path: str) -> None:
    """pydantic's lax bool: true/false, 0/1, or one of its strings (yes, no, on, off, ...)."""
    if value is None or isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return
    if isinstance(value, str) and value.strip().lower() in _LAX_TRUE_FALSE:
        return
    raise wrong(path, "a boolean", value)


def _duration(value: Any, path: str) -> None:
    """A number of seconds or a string such as "30s", "5m", "2h", "inf" (AIPerf's _parse_duration)."""
    if value is None or isinstance(value, (int, float)):
        return
    if isinstance(value, str) and (value.strip().lower() in ("inf", "infinity") or _DURATION.match(value.strip())):
        return
    if isinstance(value, str):
        raise AdapterError(f'{path} must be a duration such as 30, "30s", "5m" or "2h", not {value[:40]!r}')
    raise wrong(path, 'a duration (a number of seconds or a string such as "30s")', value)


def _enum(value: Any, path: str, allowed: tuple[str, ...] | list[str], *, required: bool = False) -> None:
    if value is None:
        if required:
            raise AdapterError(f"{path} is required: one of {', '.join(allowed)}")
        return
    if isinstance(value, str) and value.lower() in allowed:
        return
    choices = ", ".join(allowed[:-1]) + f" or {allowed[-1]}"
    if isinstance(value, str):
        raise AdapterError(f"{path} must be {choices}, not {value[:40]!r}")
    raise wrong(path, choices, value)


def _field(d: dict[str, Any], camel: str, path: str) -> tuple[Any, str]:
    """(value, its path); an absent field's path is never shown (every check passes null), so not built."""
    key = _key(d, camel)
    value = d.get(key)
    return value, (path if value is None else at(path, key))


def _check_models(models: Any, path: str) -> None:
    """ModelsAdvanced: a name, a non-empty list of names or {name: ...} items, or {items: [...]}."""
    if isinstance(models, str):
        return
    if isinstance(models, dict):
        if models.get("items") is None:
            raise AdapterError(f"{at(path, 'items')} is required (the list of models)")
        path = at(path, "items")
        models = listing(models.get("items"), path)
    elif not isinstance(models, list):
        raise wrong(path, "a string, a list or a mapping", models)
    if not models:
        raise AdapterError(f"{path} must name at least one model")
    for i, item in enumerate(models):
        if isinstance(item, dict):
            name = item.get("name")
            if name is None:
                raise AdapterError(f"{at(at(path, i), 'name')} is required")
            string(name, at(at(path, i), "name"))
        elif not isinstance(item, str):
            raise wrong(at(path, i), "a string or a mapping", item)


def _check_phase(phase: dict[str, Any], ppath: str) -> None:
    _enum(phase.get("type"), at(ppath, "type"), PHASE_TYPES, required=True)
    for camel in _PHASE_INTS:
        _lax_int(*_field(phase, camel, ppath))
    for camel in _PHASE_DURATIONS:
        _duration(*_field(phase, camel, ppath))
    for camel in _PHASE_FLOATS:
        _lax_float(*_field(phase, camel, ppath))
    for camel in _PHASE_BOOLS:
        _lax_bool(*_field(phase, camel, ppath))


def _check_endpoint(endpoint: dict[str, Any], ep_path: str) -> None:
    urls = endpoint.get("urls")
    upath = at(ep_path, "urls")
    if urls is not None:
        if not isinstance(urls, list):
            raise wrong(upath, "a list of URLs", urls)
        if not urls:
            raise AdapterError(f"{upath} must list at least one URL")
        for i, url in enumerate(urls):
            if not isinstance(url, str):
                raise wrong(at(upath, i), "a string", url)
    string(endpoint.get("url"), at(ep_path, "url"))
    _enum(endpoint.get("type"), at(ep_path, "type"), ENDPOINT_TYPES)
    _lax_bool(endpoint.get("streaming"), at(ep_path, "streaming"))
    _lax_float(*_field(endpoint, "timeout", ep_path))


def _present(bench: dict[str, Any], key: str) -> bool:
    return bench.get(key) is not None


def _check_required(bench: dict[str, Any], path: str) -> None:
    """What AIPerf 0.13.0's AIPerfConfig requires of a benchmark once its shorthands (`model`,
    `dataset`, `warmup`/`profiling`) are normalized: models, an endpoint with URLs, at least one
    dataset and at least one phase, the shorthands not mixed with the lists they stand for. The
    operator's ConfigValid step refuses a spec that misses one (the job ends Failed); recorded
    against AIPerf itself in tests/oracle/mutations.py."""
    if not (_present(bench, "models") or _present(bench, "model")):
        raise AdapterError(f"{at(path, 'models')} is required (or {at(path, 'model')}): the model(s) to benchmark")
    ep_path = at(path, "endpoint")
    if not _present(bench, "endpoint"):
        raise AdapterError(f"{ep_path} is required: the server to benchmark ({at(ep_path, 'urls')})")
    endpoint = bench["endpoint"]
    if isinstance(endpoint, dict) and not (_present(endpoint, "urls") or _present(endpoint, "url")):
        raise AdapterError(f"{at(ep_path, 'urls')} is required (or {at(ep_path, 'url')}): the server's URLs")
    ds, one = at(path, "datasets"), at(path, "dataset")
    if _present(bench, "datasets") and _present(bench, "dataset"):
        raise AdapterError(f"{one} cannot be used with {ds}: {one} is one dataset, {ds} the list of named datasets")
    if not (_present(bench, "datasets") or _present(bench, "dataset")):
        raise AdapterError(
            f"{ds} is required: at least one dataset (- name: main, type: synthetic, ...), or {one} for one"
        )
    if isinstance(bench["datasets"] if _present(bench, "datasets") else None, list) and not bench["datasets"]:
        raise AdapterError(f"{ds} must list at least one dataset")
    ph, prof, warm = at(path, "phases"), at(path, "profiling"), at(path, "warmup")
    shorthand = _present(bench, "profiling") or _present(bench, "warmup")
    if _present(bench, "phases") and shorthand:
        used = prof if _present(bench, "profiling") else warm
        raise AdapterError(
            f"{used} cannot be used with {ph}: the shorthands are for one profiling phase (and a warmup)"
        )
    if _present(bench, "warmup") and not _present(bench, "profiling"):
        raise AdapterError(f"{warm} requires {prof}: a warmup without a profiling phase would produce no results")
    if not (_present(bench, "phases") or shorthand):
        raise AdapterError(
            f"{ph} is required: at least one phase (- name: profiling, type: concurrency, ...), or {prof} for one"
        )
    if isinstance(bench.get("phases"), list) and not bench["phases"]:
        raise AdapterError(f"{ph} must list at least one phase")


def _check_benchmark(bench: dict[str, Any], path: str = "spec.benchmark") -> None:
    """The parts of BenchmarkConfig this adapter and the checks read, each at its field path,
    then what it requires (a wrong shape is named before a missing field)."""
    for key in ("models", "model"):
        if bench.get(key) is not None:
            _check_models(bench[key], at(path, key))
    ep_path = at(path, "endpoint")
    _check_endpoint(mapping(bench.get("endpoint"), ep_path), ep_path)
    datasets = [
        (d, at(at(path, "datasets"), i)) for i, d in enumerate(listing(bench.get("datasets"), at(path, "datasets")))
    ]
    if bench.get("dataset") is not None:
        datasets.append((bench["dataset"], at(path, "dataset")))
    for d, dpath in datasets:
        if not isinstance(d, dict):
            raise wrong(dpath, "a mapping", d)
        string(d.get("name"), at(dpath, "name"))
        _enum(d.get("type"), at(dpath, "type"), DATASET_TYPES)
        _lax_int(d.get("entries"), at(dpath, "entries"))
        prompts = mapping(d.get("prompts"), at(dpath, "prompts"))
        for key in ("isl", "osl"):  # a number or a distribution mapping (aiperf/config/distributions.py)
            v, vpath = prompts.get(key), at(at(dpath, "prompts"), key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, dict))):
                raise wrong(vpath, "a number or a distribution mapping", v)
    for phase, ppath in _phases(bench, path):
        string(phase.get("name"), at(ppath, "name"))
        string(phase.get("kind"), at(ppath, "kind"))
        _check_phase(phase, ppath)
    for key in ("runtime", "artifacts", "tokenizer", "logging"):
        mapping(bench.get(key), at(path, key))
    _check_required(bench, path)


def check_shape(spec: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec, its pod template) once every field the adapter reads has the shape AIPerf's model gives it."""
    if not isinstance(spec, dict):  # the one field where null is not "absent": a job needs a spec
        raise wrong("spec", "a mapping", spec)
    _no_unknown(spec, _SPEC_KEYS, "spec", "spec fields")
    if spec.get("benchmark") is None:
        raise AdapterError("spec.benchmark is required")
    _check_benchmark(mapping(spec["benchmark"], "spec.benchmark"))
    template = _pod_template(spec)
    sched_path = at("spec", _key(spec, "scheduling"))
    sched = mapping(lookup(spec, "scheduling"), sched_path)
    _no_unknown(sched, _SCHEDULING_KEYS, sched_path, "fields")
    for field in _SCHEDULING_KEYS:
        string(lookup(sched, field), at(sched_path, _key(sched, field)))
    one_of(lookup(spec, "resourceMode"), at("spec", _key(spec, "resourceMode")), ("guaranteed", "burstable", "none"))
    string(lookup(spec, "imagePullPolicy"), at("spec", _key(spec, "imagePullPolicy")))
    image = spec.get("image")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise AdapterError("spec.image must be a non-empty string")
    mapping(spec.get("variables"), "spec.variables")
    _lax_float(*_field(spec, "timeoutSeconds", "spec"))
    _lax_int(*_field(spec, "randomSeed", "spec"))
    boolean(lookup(spec, "keepFailedPods"), at("spec", _key(spec, "keepFailedPods")))
    integer(lookup(spec, "ttlSecondsAfterFinished"), at("spec", _key(spec, "ttlSecondsAfterFinished")), minimum=0)
    return spec, template


def phase_errors(benchmark: dict[str, Any]) -> list[str]:
    """The operator's refusal of a phase with neither a canonical name nor a kind, one line each."""
    errors = []
    for p, _ in _phases(benchmark):
        name = p.get("name")
        if name not in ("warmup", "profiling") and not p.get("kind"):
            errors.append(
                f"Phase '{name}': kind is required for non-canonical phase names, so the AIPerf operator rejects the "
                f"config. Fix: set kind: profiling (or warmup) on phase '{name}', or name it profiling/warmup."
            )
    return errors
