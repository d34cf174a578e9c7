"""run_config.json's size without its text: the same verdict and words as writing it.

A deeply nested inline dataset makes run_config.json depth × its size (AIPerf's 2-space indent
grows with the depth), so the adapter measures the indented text arithmetically and writes it
only when the ConfigMap fits 1 MiB. These tests hold the measure to the text, byte for byte, on
generated documents, and the ConfigMap Size verdict to the one the written text gives.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.checks.base import CheckContext
from webhook.checks.configmap import CONFIGMAP_MAX_BYTES, ConfigMapSize, largest_parts, payload_bytes
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.workloads.aiperf import CONFIGMAP_KEY, build, dumps_indent2, indent2_bytes
from webhook.workloads.base import JsonText, Workload

SAMPLE = Path(__file__).parent / "oracle" / "specs" / "sample.yaml"
_TEXTS = ["", "a", "plain text", "é ü ñ", "日本語", "emoji 🎉", 'quote " back \\ slash', "tab\tnl\n", "\x00\x1f\x7f"]


def _scalar(rng: random.Random) -> Any:
    return rng.choice(
        [
            lambda: rng.choice(_TEXTS) * rng.randint(1, 3),
            lambda: rng.randint(-(10**30), 10**30),
            lambda: rng.randint(-5, 5),
            lambda: rng.uniform(-1e6, 1e6),
            lambda: rng.choice([0.1, 1e-7, 1e22, -0.0, 3.0]),
            lambda: rng.choice([True, False, None]),
        ]
    )()


def _doc(rng: random.Random, depth: int, budget: list[int]) -> Any:
    """A random JSON document: mixed containers (empty ones too), nested up to `depth`."""
    budget[0] -= 1
    if depth == 0 or budget[0] <= 0 or rng.random() < 0.25:
        return _scalar(rng)
    n = rng.choice([0, 1, 1, 2, 3, 5])
    if rng.random() < 0.5:
        return {rng.choice(_TEXTS) + str(i): _doc(rng, depth - 1, budget) for i in range(n)}
    return [_doc(rng, depth - 1, budget) for _ in range(n)]


def _nested(depth: int, leaf: Any) -> Any:
    node = leaf
    for i in range(depth):
        node = {"n": node} if i % 3 else [node, i]
    return node


@pytest.mark.parametrize("seed", range(300))
def test_indent2_bytes_is_the_written_texts_size(seed: int) -> None:
    rng = random.Random(seed)
    doc = {"cfg": _doc(rng, rng.choice([2, 6, 20, 60]), [400])}
    assert indent2_bytes(doc) == len(dumps_indent2(doc).encode("utf-8"))


@pytest.mark.parametrize("depth", [0, 1, 2, 7, 100, 256, 400])
def test_indent2_bytes_at_every_depth(depth: int) -> None:
    for leaf in ["p", {}, [], {"k": "é"}, [1.5, None, True]]:
        doc = {"records": [_nested(depth, leaf), _nested(depth // 2, leaf)]}
        assert indent2_bytes(doc) == len(dumps_indent2(doc).encode("utf-8"))


def test_what_is_not_plain_json_is_left_to_the_text() -> None:
    assert indent2_bytes({1: "a"}) is None  # json.dumps writes "1": dumps_indent2's fallback does
    assert indent2_bytes({"a": (1, 2)}) is None
    assert indent2_bytes({"a": {"b": object()}}) is None
    assert indent2_bytes({"a": "\ud800"}) is None  # a lone surrogate cannot be encoded
    assert indent2_bytes("a") is None


def _deep_job(records: int, depth: int, text: str = "p") -> dict[str, Any]:
    """The sample AIPerfJob with `records` multi-turn records, each nested `depth` levels."""
    obj = yaml.safe_load(SAMPLE.read_text())
    obj["spec"]["benchmark"]["datasets"] = [
        {
            "name": "main",
            "type": "file",
            "format": "multi_turn",
            "records": [{"turns": [_nested(depth, f"{text}{i}")]} for i in range(records)],
        }
    ]
    return obj


def _written(wl: Workload) -> Workload:
    """`wl` with its ConfigMap's run_config.json written as text, as the adapter did before."""
    out = copy.copy(wl)
    cm = copy.deepcopy(wl.derived["configMap"])
    value = cm["data"][CONFIGMAP_KEY]
    cm["data"][CONFIGMAP_KEY] = str(value)
    out.derived = dict(wl.derived, configMap=cm)
    return out


async def _verdict(wl: Workload) -> tuple[str, str, list[str]]:
    r = await ConfigMapSize().run(CheckContext(workload=wl, view=None, deadline=Deadline(30), settings=Settings()))
    return r.status.value, r.message, r.details


@pytest.mark.parametrize(
    ("records", "depth", "text"),
    [
        (1, 0, "p"),
        (40, 10, "p"),
        (3, 240, "p"),  # deep, under 1 MiB
        (8, 240, "p"),  # deep, over 1 MiB: the text is not written
        (60, 247, "é"),  # non-ASCII, as deep as the operator writes, far over
        (2000, 3, "x" * 400),  # wide, over
        (1600, 3, "x" * 400),  # wide, just under (~985 KiB)
    ],
)
async def test_the_configmap_verdict_is_the_written_texts(records: int, depth: int, text: str) -> None:
    wl = build(_deep_job(records, depth, text), settings=Settings())
    value = wl.derived["configMap"]["data"][CONFIGMAP_KEY]
    written = _written(wl)
    size = payload_bytes(written.derived["configMap"])
    assert payload_bytes(wl.derived["configMap"]) == size
    assert isinstance(value, JsonText) == (size > CONFIGMAP_MAX_BYTES)
    assert largest_parts(wl.derived["configMap"]) == largest_parts(written.derived["configMap"])
    assert await _verdict(wl) == await _verdict(written)


async def test_at_the_limit_the_text_is_written() -> None:
    """A ConfigMap of exactly 1 MiB passes and carries its text; one byte more does not."""
    base = build(_deep_job(1, 0, ""), settings=Settings())
    fixed = payload_bytes(base.derived["configMap"])
    pad = CONFIGMAP_MAX_BYTES - fixed + 1  # the base record is "0"
    for extra, written in ((0, True), (1, False)):
        obj = _deep_job(1, 0, "x" * (pad + extra))
        obj["spec"]["benchmark"]["datasets"][0]["records"][0]["turns"][0] = "x" * (pad + extra)
        wl = build(obj, settings=Settings())
        value = wl.derived["configMap"]["data"][CONFIGMAP_KEY]
        assert isinstance(value, str) is written, extra
        assert payload_bytes(wl.derived["configMap"]) == CONFIGMAP_MAX_BYTES + extra
        assert json.loads(str(value))["cfg"]["datasets"][0]["records"][0]["turns"][0] == "x" * (pad + extra)


async def test_a_record_nested_past_what_the_operators_orjson_writes_is_a_render_error() -> None:
    """The operator writes run_config.json with orjson.dumps, which stops at 254 nested containers;
    a multi-turn record's turn sits 7 containers below the document (run, cfg, datasets, [0], records,
    record, turns), so 247 levels in it fit and 248 do not (tests/oracle/test_large_oracle.py)."""
    fits = build(_deep_job(1, 247), settings=Settings())
    assert not fits.render_errors and fits.derived["configMap"]
    wl = build(_deep_job(1, 248), settings=Settings())
    assert not wl.derived
    assert wl.incomplete_reason == "the AIPerf operator cannot render this AIPerfJob"
    (error,) = wl.render_errors
    assert error.startswith(
        "The AIPerf operator would refuse to render this job: its run_config.json would nest 255 levels deep "
        "(at cfg.datasets[0].records[0].turns[0].n[0].n.n[0].n.n[0].n.n[0…n.n[0].n.n[0]."
    )
    assert error.endswith(
        '; cfg is spec.benchmark), and the orjson.dumps that writes it stops at 254 ("TypeError: Recursion limit '
        'reached"), so the operator cannot create the ConfigMap. Fix: nest that field less deeply'
    )


# ------------------------------------------------------------------ largest_parts, measured in one pass

_ENC = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False)


def _reference_walk(node: Any, path: str, depth: int, size: int) -> list[tuple[str, int]]:
    """largest_parts' walk as 8e75b7e and abdeb9b wrote it: one encoder call per ranked container."""

    def nbytes(v: Any) -> int:
        return len(_ENC.encode(v).encode("utf-8"))

    def rank(v: Any) -> int:
        if type(v) is str:
            return len(v) + 2
        return len(_ENC.encode(v)) if type(v) is dict or type(v) is list else len(str(v))

    if depth >= 8 or not isinstance(node, (dict, list)) or not node or (len(node) > 4096 and path):
        return [(path, size)]
    if isinstance(node, dict):
        children = [(f"{path}.{k}" if path else str(k), v) for k, v in node.items()]
    else:
        children = [(f"{path}[{i}]", v) for i, v in enumerate(node)]
    ranked = sorted(((rank(v), -i, p, v) for i, (p, v) in enumerate(children)), key=lambda t: (t[0], t[1]))[-3:][::-1]
    sized = sorted(((p, v, nbytes(v)) for _, _, p, v in ranked), key=lambda t: -t[2])
    top_path, top_value, top_size = sized[0]
    if top_size * 2 <= size or not path and not isinstance(top_value, (dict, list)):
        return [(path, size)] if path else [(p, s) for p, _, s in sized[:3]]
    return _reference_walk(top_value, top_path, depth + 1, top_size) + [(p, s) for p, _, s in sized[1:3]]


@pytest.mark.parametrize("seed", range(200))
def test_largest_parts_measured_in_one_pass_is_the_per_container_walks(seed: int) -> None:
    rng = random.Random(seed)
    doc: dict[str, Any] = {
        "a": _doc(rng, 10, [300]),
        "b": [_doc(rng, 5, [100]) for _ in range(rng.randint(0, 6))],
        "ключ": {"é": [_doc(rng, 9, [50]), _nested(rng.randint(0, 40), "z" * rng.randint(0, 9))]},
    }
    if seed % 20 == 0:
        doc["long"] = [{"k": i} for i in range(5000)] + [[1]]  # past the 4096 ranked: named as one part
    want = _reference_walk(doc, "", 0, len(_ENC.encode(doc).encode("utf-8")))
    got = largest_parts({"data": {"run_config.json": dumps_indent2(doc)}}, top=100)
    assert got == sorted(want, key=lambda kv: -kv[1])[: len(got)]
