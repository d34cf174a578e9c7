"""run_config.json, the ConfigMap's payload, and the JSON writer that reproduces
AIPerf's `json.dumps(indent=2)` byte for byte (floats, key order).
"""

from __future__ import annotations

import json
import math
import zlib
from datetime import UTC, datetime
from itertools import chain
from typing import Any

from webhook.workloads.aiperf.env import _IPC_PATH, _PORTS, _snake, lookup
from webhook.workloads.aiperf.resources import RenderError
from webhook.workloads.aiperf.workers import _phases
from webhook.workloads.base import JsonText

_ORDER: dict[str, list[str]] = {
    "cfg": "models endpoint datasets phases artifacts slos tokenizer gpu_telemetry server_metrics network_latency otel "
    "mlflow wandb runtime logging metrics accuracy scenario unsafe_override".split(),
    "endpoint": "urls url_strategy type path api_key timeout streaming transport connection_reuse use_legacy_max_tokens "
    "use_server_token_count per_chunk_usage template headers extra download_video_content request_content_type "
    "session_header uuid_and_strip wait_for_model_timeout wait_for_model_interval wait_for_model_mode reset_kv_cache "
    "server_profiler".split(),
    "models": ["strategy", "items"],
    "model": ["name", "weight", "lora", "modalities", "tokenizer"],
    "dataset": "system_prompt system_prompt_file name type entries random_seed sampling prompts prefix_prompts turns "
    "turn_delay turn_delay_ratio images audio video rankings isl osl".split(),
    "prompts": "isl osl block_size batch_size cache_bust corpus sequence_distribution random_range_ratio "
    "random_corpus_style".split(),
    "phase": "name kind type exclude_from_results requests duration sessions concurrency concurrency_ramp "
    "prefill_concurrency prefill_ramp grace_period cancellation sla seamless timing_mode failed_request_threshold "
    "trajectory_start_min_ratio trajectory_start_max_ratio burst_phase_starts system_idle_gap_cap_seconds "
    "agentic_cache_warmup_duration agentic_warmup_grace_period rate rate_ramp rate_series smoothness".split(),
    "runtime": "ui workers record_processors service_run_type communication api_port api_host dataset_api_base_url "
    "workers_per_pod record_processors_per_pod workers_min stats_interval".split(),
    "artifacts": "dir prefix summary records raw trace slice_duration show_trace_timing user_files auto_plot "
    "plot_required export_outputs_json".split(),
    "distribution": ["value", "min", "max", "mean", "stddev", "type"],
}
_FLOATS = {
    "phase": {
        "duration",
        "grace_period",
        "failed_request_threshold",
        "system_idle_gap_cap_seconds",
        "agentic_cache_warmup_duration",
        "agentic_warmup_grace_period",
        "rate",
        "smoothness",
        "adaptive_sustain_duration",
        "adaptive_assessment_period",
        "adaptive_control_max",
    },
    "runtime": {"stats_interval"},
    "artifacts": {"slice_duration"},
    "model": {"weight"},
    "distribution": {"value", "min", "max", "mean", "stddev"},
}


def _ordered(d: dict[str, Any], kind: str) -> dict[str, Any]:
    """Snake-case keys in the model's field order (unknown keys keep their place after), floats coerced."""
    snake = {_snake(k): v for k, v in d.items() if v is not None}
    order = _ORDER.get(kind)
    if order is None:
        out = snake
    else:
        out = {k: snake[k] for k in order if k in snake}
        if len(out) < len(snake):
            for k, v in snake.items():
                if k not in out:
                    out[k] = v
    floats = _FLOATS.get(kind)
    if floats:
        for k in floats.intersection(out):
            v = out[k]
            if isinstance(v, int) and not isinstance(v, bool):
                out[k] = float(v)  # an existing key: its place is kept
    return out


def _distribution(v: Any) -> Any:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return {"value": float(v)}
    if isinstance(v, dict):
        return _ordered(v, "distribution")
    return v


def _models(b: dict[str, Any]) -> Any:
    m = b.get("models", b.get("model"))
    if isinstance(m, str):
        return {"items": [{"name": m}]}
    if isinstance(m, list):
        return {"items": [_ordered({"name": x} if isinstance(x, str) else x, "model") for x in m]}
    if isinstance(m, dict):
        out = _ordered(m, "models")
        if isinstance(out.get("items"), list):
            out["items"] = [_ordered({"name": x} if isinstance(x, str) else x, "model") for x in out["items"]]
        return out
    return m


def _phase(p: dict[str, Any]) -> dict[str, Any]:
    out = _ordered(p, "phase")
    name = out.get("name")
    if "kind" not in out and name in ("warmup", "profiling"):
        out["kind"] = name
    if out.get("kind") == "warmup" and "exclude_from_results" not in out:
        out["exclude_from_results"] = True
    return _ordered(out, "phase")


def _dataset(d: dict[str, Any]) -> dict[str, Any]:
    out = _ordered(d, "dataset")
    if isinstance(out.get("prompts"), dict):
        prompts = _ordered(out["prompts"], "prompts")
        for k in ("isl", "osl"):
            if k in prompts:
                prompts[k] = _distribution(prompts[k])
        out["prompts"] = prompts
    return out


def run_config_cfg(
    benchmark: dict[str, Any], job_id: str, namespace: str, pods: int, per_pod: int, rp_per_pod: int
) -> dict[str, Any]:
    """The `cfg` of run_config.json: BenchmarkConfig dumped with exclude_unset, field order kept."""
    b = {_snake(k): v for k, v in benchmark.items()}
    cfg: dict[str, Any] = {}
    if "models" in b or "model" in b:
        cfg["models"] = _models(b)
    if isinstance(b.get("endpoint"), dict):
        ep = _ordered(b["endpoint"], "endpoint")
        if "url" in ep and "urls" not in ep:
            ep["urls"] = [ep.pop("url")]
            ep = _ordered(ep, "endpoint")
        cfg["endpoint"] = ep
    datasets = b.get("datasets")
    if datasets is None and isinstance(b.get("dataset"), dict):
        datasets = [dict(b["dataset"], name=b["dataset"].get("name", "default"))]
    if isinstance(datasets, list):
        cfg["datasets"] = [_dataset(d) if isinstance(d, dict) else d for d in datasets]
    phases = _phases(b)
    if phases:
        cfg["phases"] = [_phase(p) for p, _ in phases]
    artifacts = _ordered(b.get("artifacts") or {}, "artifacts")
    artifacts["dir"] = "/results"
    cfg["artifacts"] = _ordered(artifacts, "artifacts")
    cfg["tokenizer"] = _ordered(b.get("tokenizer") or {}, "tokenizer")
    runtime = _ordered(b.get("runtime") or {}, "runtime")
    jobset = f"aiperf-{job_id}"
    runtime.update(
        {
            "service_run_type": "kubernetes",
            "ui": "simple",
            "api_port": _PORTS["API_SERVICE"],
            "api_host": "0.0.0.0",
            "dataset_api_base_url": f"http://{jobset}-controller-0-0.{jobset}.{namespace}.svc.cluster.local:"
            f"{_PORTS['API_SERVICE']}/api/dataset",
            "communication": {"type": "dual", "ipc_path": _IPC_PATH, "tcp_host": "0.0.0.0"},
            "workers_per_pod": per_pod,
            "workers": pods * per_pod,
            "record_processors_per_pod": rp_per_pod,
            "record_processors": rp_per_pod * pods,
        }
    )
    cfg["runtime"] = _ordered(runtime, "runtime")
    logging_cfg = _ordered(b.get("logging") or {}, "logging")
    logging_cfg.setdefault("level", "INFO")
    cfg["logging"] = logging_cfg
    for k, v in b.items():
        if k in ("model", "dataset", "warmup", "profiling") or k in cfg or v is None:
            continue
        cfg[k] = _ordered(v, k) if isinstance(v, dict) else v
    return {k: cfg[k] for k in _ORDER["cfg"] + [k for k in cfg if k not in _ORDER["cfg"]] if k in cfg}


def run_epoch(obj: dict[str, Any]) -> str:
    """The run epoch key (results_layout.epoch_key_from_body), from creationTimestamp and uid."""
    meta = obj.get("metadata") or {}
    ts = meta.get("creationTimestamp")
    try:
        dt = datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
    except ValueError:
        return str(int(datetime.now(UTC).timestamp()))
    seconds = int(dt.timestamp())
    if dt.microsecond:
        return f"{seconds}{dt.microsecond:06d}"
    uid = meta.get("uid")
    if not uid:
        return str(seconds)
    return f"{seconds}{zlib.crc32(str(uid).encode('utf-8')) % 1_000_000:06d}"


def run_config_json(
    spec: dict[str, Any], obj: dict[str, Any], job_id: str, namespace: str, pods: int, per_pod: int, rp: int
) -> str:
    """The exact text of run_config.json (orjson OPT_INDENT_2 == json.dumps(indent=2, ensure_ascii=False))."""
    return dumps_indent2(run_config_doc(spec, obj, job_id, namespace, pods, per_pod, rp))


def run_config_data(
    spec: dict[str, Any],
    obj: dict[str, Any],
    job_id: str,
    namespace: str,
    pods: int,
    per_pod: int,
    rp: int,
    *,
    key: str,
    limit: int,
    epoch: str | None = None,
) -> str | JsonText:
    """run_config.json as the ConfigMap's value under `key`: its text, or, when the ConfigMap would be
    over `limit` bytes (len(key) + the text's), a JsonText of the document and that exact size.
    Raises RenderError when the document nests deeper than the operator's orjson can write.

    The text is written only when it fits: over the limit the check reports the size and the
    largest parts, and a deeply nested document's indented text is depth × its size.
    ``epoch``: the run epoch key to write instead of :func:`run_epoch` of ``obj`` (the render cache's
    placeholder, webhook/workloads/render_cache.py)."""
    run = run_config_doc(spec, obj, job_id, namespace, pods, per_pod, rp, epoch=epoch)
    measured = _indent2_measure(run)  # (size, nesting) in one walk when the document is plain JSON
    deepest = measured[1] if measured is not None else nesting(run)
    if deepest > ORJSON_MAX_NESTING:
        raise RenderError(
            f"its run_config.json would nest {deepest} levels deep (at {_too_deep(run)}; cfg is spec.benchmark), and "
            "the orjson.dumps that "
            f'writes it stops at {ORJSON_MAX_NESTING} ("TypeError: Recursion limit reached"), so the operator cannot '
            "create the ConfigMap. Fix: nest that field less deeply"
        )
    if measured is not None and len(key.encode("utf-8")) + measured[0] > limit:
        return JsonText(run, measured[0], dumps_indent2)
    return dumps_indent2(run)


def run_config_doc(
    spec: dict[str, Any],
    obj: dict[str, Any],
    job_id: str,
    namespace: str,
    pods: int,
    per_pod: int,
    rp: int,
    *,
    epoch: str | None = None,
) -> dict[str, Any]:
    """The document run_config.json is the text of (``epoch``: as in :func:`run_config_data`)."""
    run: dict[str, Any] = {
        "benchmark_id": job_id,
        "cfg": run_config_cfg(spec.get("benchmark") or {}, job_id, namespace, pods, per_pod, rp),
        "trial": 0,
        "artifact_dir": "/results",
        "label": "",
    }
    seed = lookup(spec, "randomSeed")
    if seed is not None:
        run["random_seed"] = seed
    run["variables"] = dict(spec.get("variables") or {})
    if spec.get("plot") is not None:
        run["plot"] = spec["plot"]
    run["run_meta"] = {
        "epoch": run_epoch(obj) if epoch is None else epoch,
        "job_name": (obj.get("metadata") or {}).get("name", job_id),
        "namespace": namespace,
    }
    return run


class _NotPlain(Exception):
    """A value dumps_indent2 leaves to json.dumps (non-string key, unknown type, deep nesting)."""


_encode_str = json.encoder.encode_basestring  # the C encoder json.dumps(ensure_ascii=False) uses for strings


def _float_text(o: float) -> str:
    if o != o:
        return "NaN"
    if o == math.inf:
        return "Infinity"
    if o == -math.inf:
        return "-Infinity"
    return float.__repr__(o)


def _indent2(o: Any, out: list[str], nl: str) -> None:
    t = type(o)  # exact types first (a JSON document's containers), the isinstance chain for the rest
    if t is dict or (t is not list and isinstance(o, dict)):
        if not o:
            out.append("{}")
            return
        inner = nl + "  "
        sep = "{" + inner
        for k, v in o.items():
            if not isinstance(k, str):
                raise _NotPlain
            t = type(v)  # the common scalars inline: a call per scalar costs more than writing it
            if t is str:
                out.append(sep + _encode_str(k) + ": " + _encode_str(v))
            elif t is int:
                out.append(sep + _encode_str(k) + ": " + int.__repr__(v))
            else:
                out.append(sep + _encode_str(k) + ": ")
                _indent2(v, out, inner)
            sep = "," + inner
        out.append(nl + "}")
    elif t is list or isinstance(o, (list, tuple)):
        if not o:
            out.append("[]")
            return
        inner = nl + "  "
        sep = "[" + inner
        for v in o:
            t = type(v)
            if t is str:
                out.append(sep + _encode_str(v))
            elif t is int:
                out.append(sep + int.__repr__(v))
            else:
                out.append(sep)
                _indent2(v, out, inner)
            sep = "," + inner
        out.append(nl + "]")
    elif isinstance(o, str):
        out.append(_encode_str(o))
    elif o is None:
        out.append("null")
    elif o is True:
        out.append("true")
    elif o is False:
        out.append("false")
    elif isinstance(o, int):
        out.append(int.__repr__(o))
    elif isinstance(o, float):
        out.append(_float_text(o))
    else:
        raise _NotPlain


def dumps_indent2(obj: Any) -> str:
    """json.dumps(obj, indent=2, ensure_ascii=False), character for character, at a third of its cost:
    with an indent the stdlib falls back to its pure-Python encoder, and run_config.json is built
    on every request. Anything unusual goes to json.dumps itself."""
    out: list[str] = []
    try:
        _indent2(obj, out, "\n")
    except (_NotPlain, RecursionError):
        return json.dumps(obj, indent=2, ensure_ascii=False)
    return "".join(out)


#: compact JSON: the same strings, numbers and literals as dumps_indent2 writes (the C encoder's
#: string escaping and float repr), without the indent
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False)
#: the exact types of a plain JSON document's values
_PLAIN_TYPES = frozenset({dict, list, str, int, float, bool, type(None)})


def indent2_bytes(obj: Any) -> int | None:
    """len(dumps_indent2(obj).encode("utf-8")), computed without writing the indented text; None
    when `obj` is not plain JSON (dict and list containers, string keys, str/int/float/bool/None
    values, exact types) or its text cannot be encoded (a lone surrogate): those are left to writing it.

    The indented text is the compact one plus, for each non-empty container at depth d with n
    entries, a newline and 2(d + 1) spaces before each entry and a newline and 2d spaces before the
    closing bracket, and for each dict entry a space after its colon. The compact text is one C
    encoder call; the walk only counts entries, so the cost is linear in the document whatever its depth.
    """
    measured = _indent2_measure(obj)
    return None if measured is None else measured[0]


def _indent2_measure(obj: Any) -> tuple[int, int] | None:
    """(indent2_bytes(obj), nesting(obj)) in one walk, or None when indent2_bytes is None."""
    if type(obj) is not dict and type(obj) is not list:
        return None
    try:
        compact = _COMPACT.encode(obj)
    except (TypeError, ValueError, RecursionError):
        return None
    if compact.isascii():
        size = len(compact)
    else:
        try:
            size = len(compact.encode("utf-8"))
        except UnicodeEncodeError:
            return None
    # level by level, with C-speed iteration (map, chain, set): a deep document is a long chain of
    # small containers, and a Python loop per container would cost as much as the rest together
    level: list[Any] = [obj]
    depth = 0
    while level:
        dicts = [c for c in level if type(c) is dict]
        entries = sum(map(len, level))
        dict_entries = sum(map(len, dicts))
        nonempty = sum(map(bool, level))
        size += entries * (2 * depth + 3) + nonempty * (2 * depth + 1) + dict_entries
        if dict_entries and set(map(type, chain.from_iterable(dicts))) != {str}:
            return None
        values = list(
            chain(
                chain.from_iterable(map(dict.values, dicts)), chain.from_iterable(c for c in level if type(c) is list)
            )
        )
        if not set(map(type, values)) <= _PLAIN_TYPES:
            return None
        level = [v for v in values if type(v) is dict or type(v) is list]
        depth += 1
    return size, depth


#: containers orjson nests at most: the operator writes run_config.json with orjson.dumps
#: (aiperf/kubernetes/resources.py ConfigMapSpec.from_benchmark_run), which raises "TypeError:
#: Recursion limit reached" on a deeper document (orjson 3.x, measured on the oracle's 3.13.0)
ORJSON_MAX_NESTING = 254


def nesting(obj: Any) -> int:
    """How many containers deep `obj` nests (a flat dict is 1, a scalar 0), level by level at C speed."""
    level = [obj] if type(obj) is dict or type(obj) is list or isinstance(obj, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        values = chain.from_iterable(c.values() if isinstance(c, dict) else c for c in level)
        level = [v for v in values if isinstance(v, (dict, list))]
    return depth


def _too_deep(obj: Any) -> str:
    """The path (cfg.datasets[0]...) of the first container nested past ORJSON_MAX_NESTING, clipped."""
    stack: list[tuple[Any, str, int]] = [(obj, "", 1)]
    while stack:
        node, path, depth = stack.pop()
        if depth > ORJSON_MAX_NESTING:
            return path if len(path) <= 160 else f"{path[:60]}…{path[-80:]}"
        if isinstance(node, dict):
            children: Any = ((f"{path}.{k}" if path else str(k), v) for k, v in node.items())
        else:
            children = ((f"{path}[{i}]", v) for i, v in enumerate(node))
        stack.extend((v, p, depth + 1) for p, v in children if isinstance(v, (dict, list)))
    return "the document"
