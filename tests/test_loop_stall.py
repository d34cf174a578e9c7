"""What held the event loop during a large review (issue 33: "loop stall ≤ 100 ms for any single request").

bench/large.py --stall measured it; these tests pin the three causes down without timing anything:

* a body of many containers set off full collections of the cyclic garbage collector inside `json.loads`
  (one C call that holds the interpreter lock for the walk of every tracked object): it is decoded with the
  collector paused and its containers frozen (webhook.heap);
* ConfigMap Size measured the largest parts of a run config over 1 MiB on the event loop: it does so in a
  worker thread, and the loop runs meanwhile;
* one C-encoder call over a list of 784,000 numbers: the encoder is called a slice at a time;
* one C-decoder call over the whole body: the body is read a slice at a time (webhook.jsonslices).
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook import heap, jsonslices
from webhook.admission import AdmissionReview
from webhook.checks import configmap
from webhook.checks.base import CheckContext
from webhook.checks.configmap import ConfigMapSize, largest_parts
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.results import Status
from webhook.server import read_review
from webhook.workloads.base import Workload

KEY = "run_config.json"


@pytest.fixture
def thawed() -> Any:
    """gc.freeze() is process-wide: hand the frozen objects back to the collector after the test."""
    yield
    gc.unfreeze()


def _deep_records(n: int, depth: int = 40) -> list[Any]:
    out = []
    for i in range(n):
        node: Any = f"p{i}"
        for _ in range(depth):
            node = {"n": node}
        out.append(node)
    return out


def _collections_during(body: bytes, *, untracked: bool) -> tuple[Any, list[int]]:
    """(json.loads(body), through heap.loads_untracked or not; the generation of every collection the
    collector ran while the decoder ran)."""
    seen: list[int] = []
    inside = threading.Event()

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and inside.is_set():
            seen.append(info["generation"])

    def watched(b: bytes) -> Any:
        inside.set()
        try:
            return json.loads(b)
        finally:
            inside.clear()

    gc.callbacks.append(watch)
    try:
        return (heap.loads_untracked(watched, body) if untracked else watched(body)), seen
    finally:
        gc.callbacks.remove(watch)


def test_a_body_of_many_containers_is_decoded_without_a_collection_and_then_frozen(thawed: Any) -> None:
    body = json.dumps({"records": _deep_records(2_000)}).encode()  # ~82,000 dicts
    assert heap.containers_at_most(body) > heap.MANY_CONTAINERS
    assert gc.isenabled()
    # as it was: the collector runs inside the decoder, again and again (a full collection walks the process)
    doc, seen = _collections_during(body, untracked=False)
    assert seen, "json.loads of ~82,000 dicts set off no collection: the test no longer shows the cause"
    del doc
    frozen = gc.get_freeze_count()
    doc, seen = _collections_during(body, untracked=True)
    assert seen == []
    assert gc.isenabled()  # given back
    assert gc.get_freeze_count() - frozen >= 80_000  # the document left the generations' counts
    assert doc == json.loads(body)


def test_a_body_of_few_containers_is_decoded_as_it_is() -> None:
    frozen = gc.get_freeze_count()
    assert heap.loads_untracked(json.loads, b'{"a": [1, 2, {"b": 3}]}') == {"a": [1, 2, {"b": 3}]}
    assert gc.get_freeze_count() == frozen


def test_a_decoder_that_raises_gives_the_collector_back(thawed: Any) -> None:
    body = b"[" + b"{}," * 30_000 + b"x]"
    with pytest.raises(ValueError):
        heap.loads_untracked(json.loads, body)
    assert gc.isenabled()


def test_what_reviews_in_flight_hold_sets_off_no_young_collection_once_tuned() -> None:
    """Issue 38: ~5,000 containers alive at once (what 32 reviews in flight hold: a render is thousands)
    set off collections at CPython's threshold of 700 and none at the webhook's, which keeps the
    older generations' thresholds."""
    seen: list[int] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    before = gc.get_threshold()
    try:
        for young, collected in ((700, True), (heap.YOUNG_THRESHOLD, False)):
            assert heap.tune_collector(young)[1:] == before[1:]
            gc.collect()  # every generation's count back to zero
            seen.clear()
            gc.callbacks.append(watch)
            try:
                held = [{"spec": {"containers": [{"name": f"c{i}", "env": [{"name": "A"}]}]}} for i in range(1_200)]
            finally:
                gc.callbacks.remove(watch)
            assert bool(seen) is collected, (young, seen)
            assert gc.get_threshold() == (young, *before[1:])
            del held
    finally:
        gc.set_threshold(*before)


def test_serve_gives_the_young_generation_room_after_its_start_up(thawed: Any) -> None:
    from webhook.cli.serve import _freeze_startup_objects

    before = gc.get_threshold()
    try:
        _freeze_startup_objects()
        assert gc.get_threshold() == (heap.YOUNG_THRESHOLD, *before[1:])
    finally:
        gc.set_threshold(*before)


def _review_body(obj: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "aiperf.nvidia.com", "version": "v1alpha1", "kind": "AIPerfJob"},
                "resource": {"group": "aiperf.nvidia.com", "version": "v1alpha1", "resource": "aiperfjobs"},
                "operation": "CREATE",
                "object": obj,
            },
        }
    ).encode()


async def test_a_large_review_is_decoded_in_a_worker_thread_with_the_collector_paused(thawed: Any) -> None:
    obj = {"apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": "AIPerfJob", "spec": {"r": _deep_records(1_000)}}
    body = _review_body(obj)
    seen: list[tuple[bool, bool]] = []

    def loads(b: bytes) -> Any:
        seen.append((threading.current_thread() is threading.main_thread(), gc.isenabled()))
        return json.loads(b)

    review = await read_review(body, loads, off_loop=True)
    assert isinstance(review, AdmissionReview) and review.request.object == obj
    assert seen == [(False, False)]  # not on the loop's thread, no collection inside it
    assert gc.isenabled()
    seen.clear()
    await read_review(body, loads, off_loop=False)  # a small body: on the loop, as before
    assert seen == [(True, True)]


def _configmap(doc: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "demo-config"},
        "data": {KEY: json.dumps(doc)},
    }


async def test_configmap_size_measures_the_largest_parts_while_the_loop_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parts are measured in a worker thread: the measuring waits until a task on the loop has run three
    times. On the loop, it would wait in vain (the loop cannot run a task while one of its own blocks)."""
    ticks = 0
    ticked = threading.Event()

    async def ticker() -> None:
        nonlocal ticks
        while ticks < 3:
            await asyncio.sleep(0)
            ticks += 1
        ticked.set()

    measured: list[bool] = []

    def parts(cm: dict[str, Any], top: int = 3) -> list[tuple[str, int]]:
        measured.append(ticked.wait(timeout=10))
        return largest_parts(cm, top)

    monkeypatch.setattr(configmap, "largest_parts", parts)
    cm = _configmap({"benchmark": {"prompts": "x" * (1 << 20)}})
    wl = Workload("AIPerfJob", "aiperf.nvidia.com/v1alpha1", "demo", "ns", {}, derived={"configMap": cm})
    task = asyncio.ensure_future(ticker())
    r = await ConfigMapSize().run(CheckContext(workload=wl, deadline=Deadline(30), settings=Settings()))
    await task
    assert measured == [True]
    assert r.status is Status.FAIL
    assert "largest parts: benchmark.prompts (1024.0 KiB)" in r.message


async def test_configmap_size_still_fails_when_the_parts_are_not_measured_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()

    def parts(cm: dict[str, Any], top: int = 3) -> list[tuple[str, int]]:
        release.wait(timeout=10)
        return []

    monkeypatch.setattr(configmap, "largest_parts", parts)
    cm = _configmap({"benchmark": {"prompts": "x" * (1 << 20)}})
    wl = Workload("AIPerfJob", "aiperf.nvidia.com/v1alpha1", "demo", "ns", {}, derived={"configMap": cm})
    try:
        r = await ConfigMapSize().run(CheckContext(workload=wl, deadline=Deadline(0), settings=Settings()))
    finally:
        release.set()
    assert r.status is Status.FAIL
    assert "largest parts: not measured within the time left." in r.message
    assert r.details == []


class _Recording:
    """configmap._COMPACT, recording the length of every list or map one call encodes."""

    def __init__(self) -> None:
        self.inner = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False)
        self.lengths: list[int] = []

    def encode(self, node: Any) -> str:
        if isinstance(node, (list, dict)):
            self.lengths.append(len(node))
        return self.inner.encode(node)


@pytest.mark.parametrize(
    "doc",
    [
        {"variables": {"v": [0] * 50_000}},
        {"variables": {"v": {f"k{i}": "é" * (i % 3) for i in range(20_000)}}},
        {"a": [[1, {"b": "ü"}]] * 9_000, "c": list(range(10_000))},
    ],
    ids=["numbers", "map", "mixed"],
)
def test_long_lists_and_maps_are_encoded_a_slice_at_a_time(monkeypatch: pytest.MonkeyPatch, doc: Any) -> None:
    want = largest_parts(_configmap(doc))
    rec = _Recording()
    monkeypatch.setattr(configmap, "_COMPACT", rec)
    assert largest_parts(_configmap(doc)) == want  # the same figures
    assert rec.lengths and max(rec.lengths) <= configmap._ENCODE_SLICE
    for node in (doc, [0] * 9_000, {"é": list(range(5_000)), "x": "y"}, [], {}):
        text = rec.inner.encode(node)
        assert configmap._encoded(node) == (len(text), len(text.encode("utf-8")))


# --------------------------------------------------------------------------- json.loads a slice at a time

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from(list('ab,:{}[]"\\ é\n') + ["\ud800", "😀"]), max_size=12),
    lambda children: (
        st.lists(children, max_size=8)
        | st.dictionaries(st.text(alphabet=st.sampled_from(list('k,"{[ é')), max_size=4), children, max_size=8)
    ),
    max_leaves=60,
)
_LAYOUTS = [{"separators": (",", ":")}, {}, {"indent": 1}, {"ensure_ascii": False}]


def _reader(text: str, window: int, first: int) -> Any:
    """The slices' reading alone (no json.loads of the whole to fall back on): raises where it cannot read."""
    return jsonslices._Reader(text, window, first, max_steps=10**9, max_waste=10**9).document()


@settings(max_examples=150, deadline=None)
@given(value=_json_values, layout=st.sampled_from(_LAYOUTS), window=st.sampled_from([8, 16, 64]))
def test_the_slices_read_the_document_json_loads_reads(value: Any, layout: dict[str, Any], window: int) -> None:
    body = json.dumps(value, **layout).encode("utf-8", "surrogatepass")
    want = json.loads(body)
    assert repr(_reader(body.decode("utf-8", "surrogatepass"), window, window // 4)) == repr(want)
    assert repr(jsonslices.loads_sliced(body, window=window, first_window=window // 4)) == repr(want)


@settings(max_examples=150, deadline=None)
@given(
    value=_json_values,
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(list('{}[],:"0 x\\'))), min_size=1, max_size=3),
)
def test_a_broken_body_raises_what_json_loads_raises(value: Any, edits: list[tuple[int, str]]) -> None:
    body = bytearray(json.dumps(value).encode("utf-8", "surrogatepass"))
    for at, char in edits:
        body[at % len(body)] = ord(char)

    def outcome(decode: Any) -> tuple[str, str]:
        try:
            return "ok", repr(decode(bytes(body)))
        except Exception as exc:  # the type and the text are what is compared
            return type(exc).__name__, str(exc)

    assert outcome(lambda b: jsonslices.loads_sliced(b, window=16, first_window=4)) == outcome(json.loads)


def test_no_call_of_the_c_scanner_reads_more_than_a_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shapes of bench/large.py, small: a long list of numbers, of maps, of records nested deep, a long map."""
    doc = {
        "numbers": [0] * 40_000,
        "env": [{"name": f"E{i}", "value": "x,y"} for i in range(4_000)],
        "records": _deep_records(300, depth=20),
        "labels": {f"l{i}": "v" for i in range(6_000)},
    }
    body = json.dumps(doc, separators=(",", ":")).encode()
    spans: list[int] = []
    scan = jsonslices._SCAN

    def recording(text: str, idx: int) -> Any:
        value, end = scan(text, idx)
        spans.append(end - idx)
        return value, end

    monkeypatch.setattr(jsonslices, "_SCAN", recording)
    assert _reader(body.decode(), 4096, 256) == doc
    assert max(spans) <= 4096
    assert len(spans) < 400  # in runs of members, not one call per number


def test_runs_the_members_refuse_back_off_within_the_waste_allowed() -> None:
    """Members with the run's comma inside them (`,{` in every element): the runs are refused, and the reader
    backs off to members one by one rather than read the text in vain again and again (at most twice it,
    else json.loads reads the whole)."""
    doc = [{"a": [{"b": i}, {"c": "x" * (i % 50)}]} for i in range(20_000)]
    text = json.dumps(doc, separators=(",", ":"))
    reader = jsonslices._Reader(text, 4096, 256, max_steps=10**9)
    assert reader.document() == doc
    assert reader.waste >= 0
