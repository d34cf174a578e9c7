"""Typed-field mutations of the sample AIPerfJob, with what AIPerf 0.13.0's converter does with each.

`MUTATIONS` maps a case name to (field path under `spec`, new value, AIPerf's verdict):
"rejects" when AIPerfJobSpecConverter / BenchmarkConfig refuse the spec (the adapter must
raise AdapterError), "accepts" when AIPerf renders it (the adapter must not refuse it: a
wrong refusal would block a user). tests/test_workload_aiperf_typed.py checks the adapter
against the recorded verdicts; tests/oracle/test_oracle_live.py checks the recorded
verdicts against AIPerf itself (PREFLIGHT_ORACLE_PYTHON).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

SAMPLE = Path(__file__).parent / "specs" / "sample.yaml"
DELETE = object()
#: the sample's benchmark without its phases (for the warmup/profiling shorthands)
BENCH = {
    "models": ["meta/llama-3.1-8b-instruct"],
    "endpoint": {"urls": ["http://llm.models.svc.cluster.local:8000"]},
    "datasets": [{"name": "main", "type": "synthetic", "entries": 100, "prompts": {"isl": 128, "osl": 64}}],
}

# name: (path under spec, value, AIPerf's verdict)
MUTATIONS: dict[str, tuple[tuple[Any, ...], Any, str]] = {
    # the examples
    "phase type 0": (("benchmark", "phases", 0, "type"), 0, "rejects"),
    "phase requests 'x'": (("benchmark", "phases", 0, "requests"), "x", "rejects"),
    "dataset entries 'x'": (("benchmark", "datasets", 0, "entries"), "x", "rejects"),
    "endpoint urls 'x'": (("benchmark", "endpoint", "urls"), "x", "rejects"),
    "models {}": (("benchmark", "models"), {}, "rejects"),
    # phases
    "phase type 'bogus'": (("benchmark", "phases", 0, "type"), "bogus", "rejects"),
    "phase without type": (("benchmark", "phases", 0, "type"), DELETE, "rejects"),
    "phase type poisson": (
        ("benchmark", "phases", 0),
        {"name": "profiling", "type": "poisson", "rate": 5, "requests": 10},
        "accepts",
    ),
    "phase concurrency 'x'": (("benchmark", "phases", 0, "concurrency"), "x", "rejects"),
    "phase concurrency 1.5": (("benchmark", "phases", 0, "concurrency"), 1.5, "rejects"),
    "phase concurrency '5'": (("benchmark", "phases", 0, "concurrency"), "5", "accepts"),
    "phase concurrency 4.0": (("benchmark", "phases", 0, "concurrency"), 4.0, "accepts"),
    "phase requests true": (("benchmark", "phases", 0, "requests"), True, "accepts"),
    "phase requests '20'": (("benchmark", "phases", 0, "requests"), "20", "accepts"),
    "phase requests [1]": (("benchmark", "phases", 0, "requests"), [1], "rejects"),
    "phase sessions 'x'": (("benchmark", "phases", 0, "sessions"), "x", "rejects"),
    "phase duration 'x'": (("benchmark", "phases", 0, "duration"), "x", "rejects"),
    "phase duration '30s'": (("benchmark", "phases", 0, "duration"), "30s", "accepts"),
    "phase duration 30": (("benchmark", "phases", 0, "duration"), 30, "accepts"),
    "phase gracePeriod 'soon'": (("benchmark", "phases", 0, "gracePeriod"), "soon", "rejects"),
    "phase gracePeriod 'inf'": (
        ("benchmark", "phases", 0),
        {"name": "profiling", "type": "concurrency", "concurrency": 10, "duration": "30s", "gracePeriod": "inf"},
        "accepts",
    ),
    "phase seamless 'maybe'": (("benchmark", "phases", 0, "seamless"), "maybe", "rejects"),
    "phase seamless 'no'": (("benchmark", "phases", 0, "seamless"), "no", "accepts"),
    "phases as a map": (("benchmark", "phases"), {"profiling": {"type": "concurrency", "concurrency": 10}}, "rejects"),
    "phases as one phase": (("benchmark", "phases"), {"type": "concurrency", "concurrency": 10}, "rejects"),
    "profiling shorthand": (
        ("benchmark",),
        {**BENCH, "profiling": {"type": "concurrency", "concurrency": 10, "requests": 5}},
        "accepts",
    ),
    "profiling shorthand without type": (
        ("benchmark",),
        {**BENCH, "profiling": {"concurrency": 10, "requests": 5}},
        "rejects",
    ),
    # datasets
    "dataset type 0": (("benchmark", "datasets", 0, "type"), 0, "rejects"),
    "dataset type 'bogus'": (("benchmark", "datasets", 0, "type"), "bogus", "rejects"),
    "dataset entries '100'": (("benchmark", "datasets", 0, "entries"), "100", "accepts"),
    "dataset entries 1.5": (("benchmark", "datasets", 0, "entries"), 1.5, "rejects"),
    "dataset prompts isl 'x'": (("benchmark", "datasets", 0, "prompts", "isl"), "x", "rejects"),
    "dataset prompts isl mean": (("benchmark", "datasets", 0, "prompts", "isl"), {"mean": 128, "stddev": 8}, "accepts"),
    # endpoint
    "endpoint urls []": (("benchmark", "endpoint", "urls"), [], "rejects"),
    "endpoint urls [5]": (("benchmark", "endpoint", "urls"), [5], "rejects"),
    "endpoint type 0": (("benchmark", "endpoint", "type"), 0, "rejects"),
    "endpoint type 'bogus'": (("benchmark", "endpoint", "type"), "bogus", "rejects"),
    "endpoint type completions": (("benchmark", "endpoint", "type"), "completions", "accepts"),
    "endpoint streaming 'x'": (("benchmark", "endpoint", "streaming"), "x", "rejects"),
    "endpoint streaming 'true'": (("benchmark", "endpoint", "streaming"), "true", "accepts"),
    "endpoint timeout 'x'": (("benchmark", "endpoint", "timeout"), "x", "rejects"),
    # models
    "models []": (("benchmark", "models"), [], "rejects"),
    "models 5": (("benchmark", "models"), 5, "rejects"),
    "models [{}]": (("benchmark", "models"), [{}], "rejects"),
    "models [{name: 5}]": (("benchmark", "models"), [{"name": 5}], "rejects"),
    "models 'one'": (("benchmark", "models"), "meta/llama-3.1-8b-instruct", "accepts"),
    "models {items: [a]}": (("benchmark", "models"), {"items": [{"name": "a"}]}, "accepts"),
    # top level
    "timeoutSeconds 'x'": (("timeoutSeconds",), "x", "rejects"),
    "timeoutSeconds '60'": (("timeoutSeconds",), "60", "accepts"),
    "randomSeed 'x'": (("randomSeed",), "x", "rejects"),
    "randomSeed 7": (("randomSeed",), 7, "accepts"),
    "connectionsPerWorker 'x'": (("connectionsPerWorker",), "x", "rejects"),
    "runtime workers 'x'": (("benchmark", "runtime"), {"workers": "x"}, "rejects"),
    # what AIPerfConfig requires (the operator's ConfigValid step refuses the job without it)
    "benchmark without datasets": (("benchmark", "datasets"), DELETE, "rejects"),
    "datasets []": (("benchmark", "datasets"), [], "rejects"),
    "datasets null": (("benchmark", "datasets"), None, "rejects"),
    "dataset shorthand": (
        ("benchmark",),
        {
            **{k: v for k, v in BENCH.items() if k != "datasets"},
            "dataset": BENCH["datasets"][0],
            "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 10, "requests": 5}],
        },
        "accepts",
    ),
    "dataset with datasets": (
        ("benchmark",),
        {
            **BENCH,
            "dataset": BENCH["datasets"][0],
            "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 10, "requests": 5}],
        },
        "rejects",
    ),
    "benchmark without phases": (("benchmark", "phases"), DELETE, "rejects"),
    "phases []": (("benchmark", "phases"), [], "rejects"),
    "profiling with phases": (
        ("benchmark",),
        {
            **BENCH,
            "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 10, "requests": 5}],
            "profiling": {"type": "concurrency", "concurrency": 10, "requests": 5},
        },
        "rejects",
    ),
    "warmup with phases": (
        ("benchmark",),
        {
            **BENCH,
            "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 10, "requests": 5}],
            "warmup": {"type": "concurrency", "concurrency": 1, "requests": 2},
        },
        "rejects",
    ),
    "warmup without profiling": (
        ("benchmark",),
        {**BENCH, "warmup": {"type": "concurrency", "concurrency": 1, "requests": 2}},
        "rejects",
    ),
    "warmup and profiling shorthands": (
        ("benchmark",),
        {
            **BENCH,
            "warmup": {"type": "concurrency", "concurrency": 1, "requests": 2},
            "profiling": {"type": "concurrency", "concurrency": 10, "requests": 5},
        },
        "accepts",
    ),
    "benchmark without endpoint": (("benchmark", "endpoint"), DELETE, "rejects"),
    "endpoint null": (("benchmark", "endpoint"), None, "rejects"),
    "endpoint {}": (("benchmark", "endpoint"), {}, "rejects"),
    "endpoint url shorthand": (
        ("benchmark", "endpoint"),
        {"url": "http://llm.models.svc.cluster.local:8000"},
        "accepts",
    ),
    "benchmark without models": (("benchmark", "models"), DELETE, "rejects"),
    "model shorthand": (
        ("benchmark",),
        {
            **{k: v for k, v in BENCH.items() if k != "models"},
            "model": "meta/llama-3.1-8b-instruct",
            "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 10, "requests": 5}],
        },
        "accepts",
    ),
}


def mutated(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """The sample AIPerfJob with spec.<path> set to `value` (DELETE removes it)."""
    obj = yaml.safe_load(SAMPLE.read_text())
    node: Any = obj["spec"]
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = copy.deepcopy(value)
    return obj
