"""The walks every review makes over its object: bounded_plain is size_problem and plain_json's
test in one walk, and evaluate() lets the adapter trust it only for that object."""

from __future__ import annotations

import random
from typing import Any

import pytest

from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.preflight import evaluate
from webhook.workloads import walks
from webhook.workloads.base import AdapterError
from webhook.workloads.walks import MAX_DEPTH, bounded_plain, plain_json, size_problem, verified_plain


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
BOUNDS = [(1000, 1000), (40, 1000), (1000, 3), (5, 2)]


@pytest.mark.parametrize(("max_values", "max_items"), BOUNDS)
def test_bounded_plain_answers_what_the_two_walks_answer(max_values: int, max_items: int) -> None:
    for obj in CASES:
        expected = (size_problem(obj, max_values=max_values, max_items=max_items), walks._is_plain_json(obj))
        got = bounded_plain(obj, max_values=max_values, max_items=max_items)
        assert got[0] == expected[0], obj
        if expected[0] is None:  # past a bound the object is not judged further: plainness unknown
            assert got[1] == expected[1], obj


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
