"""Wrong-typed AIPerfJob fields: the adapter refuses exactly what AIPerf 0.13.0 refuses.

The verdicts in tests/oracle/mutations.py were recorded from AIPerf's own converter and are
re-checked against it by tests/oracle/test_oracle_live.py.
"""

from __future__ import annotations

import pytest

from tests.oracle.mutations import MUTATIONS, mutated
from webhook.config import Settings
from webhook.workloads.aiperf import build
from webhook.workloads.base import AdapterError


@pytest.mark.parametrize("case", sorted(MUTATIONS))
def test_the_adapter_agrees_with_aiperf_on_typed_fields(case: str) -> None:
    path, value, verdict = MUTATIONS[case]
    obj = mutated(path, value)
    if verdict == "rejects":
        with pytest.raises(AdapterError):
            build(obj, settings=Settings())
    else:
        wl = build(obj, settings=Settings())
        assert not wl.render_errors, wl.render_errors


@pytest.mark.parametrize(("case", "message"), [
    ("phase type 0", "spec.benchmark.phases[0].type must be concurrency, constant, gamma, poisson, fixed_schedule or user_centric, not int"),
    ("phase requests 'x'", "spec.benchmark.phases[0].requests must be an integer, not str"),
    ("dataset entries 'x'", "spec.benchmark.datasets[0].entries must be an integer, not str"),
    ("endpoint urls 'x'", "spec.benchmark.endpoint.urls must be a list of URLs, not str"),
    ("models {}", "spec.benchmark.models.items is required (the list of models)"),
    ("phase duration 'x'", "spec.benchmark.phases[0].duration must be a duration such as 30, \"30s\", \"5m\" or \"2h\", not 'x'"),
    ("models []", "spec.benchmark.models must name at least one model"),
    ("benchmark without datasets", "spec.benchmark.datasets is required: at least one dataset (- name: main, type: synthetic, ...), or spec.benchmark.dataset for one"),
    ("datasets []", "spec.benchmark.datasets must list at least one dataset"),
    ("dataset with datasets", "spec.benchmark.dataset cannot be used with spec.benchmark.datasets: spec.benchmark.dataset is one dataset, spec.benchmark.datasets the list of named datasets"),
    ("benchmark without phases", "spec.benchmark.phases is required: at least one phase (- name: profiling, type: concurrency, ...), or spec.benchmark.profiling for one"),
    ("phases []", "spec.benchmark.phases must list at least one phase"),
    ("profiling with phases", "spec.benchmark.profiling cannot be used with spec.benchmark.phases: the shorthands are for one profiling phase (and a warmup)"),
    ("warmup without profiling", "spec.benchmark.warmup requires spec.benchmark.profiling: a warmup without a profiling phase would produce no results"),
    ("benchmark without endpoint", "spec.benchmark.endpoint is required: the server to benchmark (spec.benchmark.endpoint.urls)"),
    ("endpoint {}", "spec.benchmark.endpoint.urls is required (or spec.benchmark.endpoint.url): the server's URLs"),
    ("benchmark without models", "spec.benchmark.models is required (or spec.benchmark.model): the model(s) to benchmark"),
])  # fmt: skip
def test_the_refusal_names_the_field_and_the_type(case: str, message: str) -> None:
    path, value, _ = MUTATIONS[case]
    with pytest.raises(AdapterError) as exc:
        build(mutated(path, value), settings=Settings())
    assert str(exc.value) == message
