"""The walks every review makes over its object: bounded_plain is the size bound (json_bytes against
maxBytes) and plain_json's test in one walk, and evaluate() lets the adapter trust it only for that object."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.preflight import evaluate
from webhook.workloads import walks
from webhook.workloads.base import AdapterError
from webhook.workloads.walks import MAX_DEPTH, bounded_plain, json_bytes, plain_json, verified_plain


def _random(rnd: random.Random, depth: int) -> Any:
    r = rnd.random()
    if depth > 0 and r < 0.45:
        key = rnd.choice([1, None, True]) if rnd.random() < 0.02 else rnd.choice("abcdefg") + str(rnd.randint(0, 9))
        return {key: _random(rnd, depth - 1)} | {f"k{i}": _random(rnd, depth - 1) for i in range(rnd.randint(0, 4))}
    if depth > 0 and r < 0.75:
        return [_random(rnd, depth - 1) for _ in range(rnd.randint(0, 4))]
    odd = [float("nan"), float("inf"), b"bytes", (1, 2), {1, 2}]
    return rnd.choice(odd) if rnd.random() < 0.03 else rnd.choice(["s", 1, -2, True, None, 1.5, 10**30])


def _nested(levels: int, leaf: Any) -> Any:
    out = leaf
    for i in range(levels):
        out = [out] if i % 2 else {"k": out}
    return out


CASES = [_random(random.Random(seed), random.Random(seed).randint(0, 7)) for seed in range(3000)] + [
    _nested(n, leaf) for n in range(MAX_DEPTH - 3, MAX_DEPTH + 3) for leaf in (1, [], {}, [1], {"a": 1}, float("nan"))
]
BOUNDS = [10**6, 400, 60, 10, 2]
#: strings whose JSON is longer than their characters (escapes, UTF-8), and long integers
WIDE = ["\u0001" * 40, "é" * 40, "\U0001f600" * 20, 10**40, -(10**25), [10**19, "\n" * 30]]


@pytest.mark.parametrize("max_bytes", BOUNDS)
def test_bounded_plain_answers_what_the_two_walks_answer(max_bytes: int) -> None:
    """Over max_bytes exactly when json_bytes is (the cheap bound never hides one); the size is json_bytes,
    or a lower bound still over max_bytes when there are more values than max_bytes of JSON can hold."""
    for obj in CASES + [{"spec": w} for w in WIDE]:
        size = json_bytes(obj)
        over = size is not None and size > max_bytes
        got_size, got_plain = bounded_plain(obj, max_bytes=max_bytes)
        assert (got_size is not None) is over, obj
        if got_size is None:
            assert got_plain is walks._is_plain_json(obj), obj
        else:
            assert size is not None and max_bytes < got_size <= size, obj


def test_an_aliased_billion_values_is_over_without_walking_them_all() -> None:
    level: list[Any] = ["x"] * 10
    for _ in range(9):  # shared references, as YAML aliases build them: 10^10 values as expanded
        level = [level] * 10
    size, plain = bounded_plain({"spec": level}, max_bytes=1_572_864)
    assert size is not None and size > 1_572_864 and plain is False


def test_json_bytes_is_the_compact_utf8_json() -> None:
    obj = {"a": ["é", 1, 2.5, None, True], "b": {"c": "\u0001"}}
    assert json_bytes(obj) == len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())
    assert json_bytes({"k": object()}) is not None  # a YAML-only value is measured as its text
    assert json_bytes({("t",): 1}) is None  # a key JSON cannot write


def test_a_container_deeper_than_aiperf_reads_is_refused_and_named() -> None:
    """AIPerf refuses a spec nested more than 256 levels (containers only, counted from the spec)."""
    assert MAX_DEPTH == 257
    plain_json({"spec": _nested(MAX_DEPTH, "leaf")})  # the deepest container is 257 below the object
    plain_json({"spec": _nested(MAX_DEPTH - 1, [])})
    for deeper in (_nested(MAX_DEPTH, []), _nested(MAX_DEPTH + 1, 1)):
        with pytest.raises(AdapterError, match="is nested more than 256 levels below spec, which the AIPerf operator"):
            plain_json({"spec": deeper})


def test_plain_json_trusts_the_walk_only_for_that_object_and_only_inside() -> None:
    bad = {"spec": {"x": float("nan")}}
    with verified_plain(bad):
        plain_json(bad)  # trusted: the caller's walk vouched for it
        with pytest.raises(AdapterError, match="must be a finite number"):
            plain_json({"spec": {"x": float("nan")}})  # another object
    with pytest.raises(AdapterError, match=r"spec\.x must be a finite number, not nan"):
        plain_json(bad)  # outside the block


async def test_an_object_that_is_not_plain_json_is_still_unreadable_through_evaluate() -> None:
    job = {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfJob",
        "metadata": {"name": "bench", "namespace": "team-a"},
        "spec": {"connectionsPerWorker": float("nan"), "benchmark": {}},
    }
    ev = await evaluate(job, settings=Settings(), deadline=Deadline(4.0), namespace="team-a")
    assert ev.unreadable == "spec.connectionsPerWorker must be a finite number, not nan"
    assert ev.decision.allowed is False
