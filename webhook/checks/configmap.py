"""ConfigMap Size: the AIPerfJob's run-config ConfigMap must fit 1 MiB.

The AIPerf operator serialises the whole benchmark (inline datasets and prompts
included) into one ConfigMap key, `run_config.json`, and refuses to render it when
Σ len(key)+len(value) exceeds 1 MiB (its own measure, which counts key bytes and is
therefore slightly stricter than the apiserver's). AIPerf reports that with a wrong
message after admission; we say the real size and which part of the spec to shrink.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import heapq
import itertools
import json
from typing import Any

from webhook.checks.base import AIPERFJOB, Check, CheckContext
from webhook.checks.common import kib
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.kube import CONFIGMAP_MAX_BYTES
from webhook.models.context import needs_a_task
from webhook.results import CheckResult, Status
from webhook.workloads.base import JsonText, text_bytes

NAME = "ConfigMap Size"
__all__ = ["CONFIGMAP_MAX_BYTES", "NAME", "ConfigMapSize", "largest_parts", "payload_bytes"]
_TOP_N = 3


def payload_bytes(configmap: dict[str, Any]) -> int:
    """Σ UTF-8 len(key) + len(value) over data, and key + decoded bytes over binaryData (a value the
    adapter left unwritten, a JsonText, counts the size it measured)."""
    total = 0
    for key, value in (configmap.get("data") or {}).items():
        total += len(str(key).encode("utf-8")) + text_bytes(value)
    for key, value in (configmap.get("binaryData") or {}).items():
        total += len(str(key).encode("utf-8"))
        try:
            total += len(base64.b64decode(str(value), validate=True))
        except (binascii.Error, ValueError):
            total += len(str(value).encode("utf-8"))
    return total


def largest_parts(configmap: dict[str, Any], top: int = _TOP_N) -> list[tuple[str, int]]:
    """The biggest fields of the payload (JSON paths into each key), largest first.

    Descends into the JSON of each data value while one child holds most of the bytes,
    so the answer points at `benchmark.datasets[0].prompts`, not just `run_config.json`.
    Linear in the payload: each level ranks its children by their length as compact JSON (one
    C-encoder call per container, the length of a scalar's text) and measures only the top ones.
    """
    found: list[tuple[str, int]] = []
    for key, value in (configmap.get("data") or {}).items():
        if isinstance(value, JsonText):  # the document of a text the adapter did not write: what json.loads gives
            doc = value.doc
        else:
            try:
                doc = json.loads(value)
            except (TypeError, ValueError, RecursionError):
                found.append((str(key), len(str(value).encode("utf-8"))))
                continue
        measured: dict[int, tuple[int, int]] = {}
        _, doc_bytes = _measure(doc, 0, measured)
        parts = _walk(doc, "", depth=0, size=doc_bytes, measured=measured)
        found.extend((path or str(key), size) for path, size in parts)
    for key, value in (configmap.get("binaryData") or {}).items():
        found.append((str(key), len(str(value))))
    found.sort(key=lambda kv: -kv[1])
    total = payload_bytes(configmap) or 1
    # the biggest part always; the others only when they matter (>= 5% of the payload)
    return [kv for i, kv in enumerate(found[:top]) if i == 0 or kv[1] * 20 >= total]


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False)


#: a list or map longer than this is encoded a slice at a time: one C-encoder call over 784,000 numbers held
#: the interpreter lock 100-230 ms (bench/large.py --stall values-max), every other thread's and the loop's too
_ENCODE_SLICE = 4096


def _encoded(node: Any) -> tuple[int, int]:
    """(characters, UTF-8 bytes) of `node` as compact JSON, at most _ENCODE_SLICE children per C-encoder call.

    A list's text is its slices' texts without their brackets, joined by commas, in brackets (a map's the
    same with braces), so the figures are those of one call over the whole."""
    t = type(node)
    if (t is list or t is dict) and len(node) > _ENCODE_SLICE:
        if t is list:
            pieces: Any = (node[i : i + _ENCODE_SLICE] for i in range(0, len(node), _ENCODE_SLICE))
        else:
            items = iter(node.items())
            pieces = iter(lambda: dict(itertools.islice(items, _ENCODE_SLICE)), {})
        chars = nbytes = 1  # the brackets, less the one comma too many
        for piece in pieces:
            c, b = _encoded(piece)
            chars += c - 1  # its brackets out, one comma in
            nbytes += b - 1
        return chars, nbytes
    text = _COMPACT.encode(node)
    return len(text), len(text) if text.isascii() else len(text.encode("utf-8"))


def _size(node: Any) -> int:
    """Bytes of `node` as compact JSON (UTF-8)."""
    return _encoded(node)[1]


def _measure(node: Any, depth: int, out: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(characters, UTF-8 bytes) of `node` as compact JSON, recording those of every container _walk
    may rank in `out` (by id): one pass over the document instead of one C-encoder call per level
    of the walk over the same bytes (a deeply nested record was encoded six times over).

    A container's figures are the sum of its children's plus its brackets, commas, keys and colons;
    one below _walk's depth, one too long to be ranked, or one of scalars only is encoded whole."""
    t = type(node)
    if t is not dict and t is not list:
        return _encoded(node)
    values: Any = node.values() if t is dict else node
    if (
        depth >= _WALK_DEPTH
        or (depth and len(node) > _RANKED_MAX)
        or not any(type(v) is dict or type(v) is list for v in values)
        or (t is dict and not all(type(k) is str for k in node))
    ):
        out[id(node)] = found = _encoded(node)
        return found
    chars = nbytes = 2 + max(len(node) - 1, 0)  # brackets and commas
    if t is dict:
        keys = "".join(map(_encode_str, node))  # quoted keys; a colon each
        chars += len(keys) + len(node)
        nbytes += (len(keys) if keys.isascii() else len(keys.encode("utf-8"))) + len(node)
    for v in values:
        c, b = _measure(v, depth + 1, out)
        chars += c
        nbytes += b
    out[id(node)] = (chars, nbytes)
    return chars, nbytes


_encode_str = json.encoder.encode_basestring  # the C encoder's strings (ensure_ascii=False)
_WALK_DEPTH = 8  # _walk ranks the children of containers down to this depth


def _rank(node: Any, measured: dict[int, tuple[int, int]]) -> int:
    """Characters of `node` as compact JSON, give or take a string's escapes: the order of siblings."""
    t = type(node)
    if t is str:
        return len(node) + 2
    if t is dict or t is list:
        found = measured.get(id(node))
        return found[0] if found is not None else _encoded(node)[0]
    return len(str(node))


def _sized(node: Any, measured: dict[int, tuple[int, int]]) -> int:
    """_size(node), from _measure's figures when it recorded them."""
    found = measured.get(id(node)) if type(node) is dict or type(node) is list else None
    return found[1] if found is not None else _size(node)


#: children ranked at most per container; a longer one is reported as one part
_RANKED_MAX = 4096


def _walk(node: Any, path: str, depth: int, size: int, measured: dict[int, tuple[int, int]]) -> list[tuple[str, int]]:
    """Follow the child holding over half of its parent's `size` bytes; stop where no child dominates."""
    if depth >= _WALK_DEPTH or not isinstance(node, (dict, list)) or not node:
        return [(path, size)]
    if len(node) > _RANKED_MAX and path:
        # a long list or map is named as a whole: ranking 784,000 numbers one by one took 5 s of a review
        # (bench/large.py --stall values-max); its path is the fix's pointer either way
        return [(path, size)]
    if isinstance(node, dict):
        children: Any = ((f"{path}.{k}" if path else str(k), v) for k, v in node.items())
    else:
        children = ((f"{path}[{i}]", v) for i, v in enumerate(node))
    ranked = heapq.nlargest(_TOP_N, ((_rank(v, measured), -i, p, v) for i, (p, v) in enumerate(children)))
    sized = sorted(((p, v, _sized(v, measured)) for _, _, p, v in ranked), key=lambda t: -t[2])
    top_path, top_value, top_size = sized[0]
    if top_size * 2 <= size or not path and not isinstance(top_value, (dict, list)):
        return [(path, size)] if path else [(p, s) for p, _, s in sized[:_TOP_N]]
    return _walk(top_value, top_path, depth + 1, top_size, measured) + [(p, s) for p, _, s in sized[1:_TOP_N]]


async def _parts_off_loop(configmap: dict[str, Any], deadline: Deadline) -> list[tuple[str, int]] | None:
    """largest_parts(configmap) in a worker thread, waited for at most half the time left; None when not done by then.

    Its walk is Python in proportion to the payload (a run config of records nested 247 deep: ~150 ms, all of it
    on the event loop while this check was synchronous), which lets the loop run between the interpreter's
    switches, and its C-encoder calls are a slice each (_ENCODE_SLICE)."""
    work = asyncio.to_thread(largest_parts, configmap)
    try:
        return await asyncio.wait_for(work, timeout=max(0.0, deadline.remaining() / 2))
    except TimeoutError:
        return None  # the thread ends on its own; the size alone is the verdict


class ConfigMapSize(Check):
    name = NAME
    # reads only the Workload; not `synchronous` because the largest parts of a ConfigMap over the limit are
    # measured in a worker thread (_parts_off_loop): a ConfigMap within the limit is answered in the review's
    # task (kept_reads), one over it as a task of its own
    kept_reads = True
    kinds = frozenset({AIPERFJOB})
    summary = "The AIPerfJob's run-config ConfigMap fits the 1 MiB ConfigMap limit."

    def shares_reads(self, settings: Settings) -> bool:
        """It sends no request at all (the audit controller's cheap pass runs it on every job)."""
        return True

    async def run(self, ctx: CheckContext) -> CheckResult:
        cm = ctx.workload.derived.get("configMap")
        if not cm:
            return CheckResult(self.name, Status.SKIP, "Skipped: the job derives no ConfigMap")
        cm_name = (cm.get("metadata") or {}).get("name") or f"{ctx.workload.name}-config"
        size = payload_bytes(cm)
        if size <= CONFIGMAP_MAX_BYTES:
            return CheckResult(
                self.name,
                Status.PASS,
                f'ConfigMap "{cm_name}" is {kib(size)} of the 1024 KiB limit',
            )
        needs_a_task(ctx, "the largest parts, measured in a worker thread")
        parts = await _parts_off_loop(cm, ctx.deadline)
        if parts is None:
            parts, biggest = [], "not measured within the time left"
        else:
            biggest = ", ".join(f"{p} ({kib(s)})" for p, s in parts)
        message = (
            f'ConfigMap "{cm_name}" that the AIPerf operator renders from this spec would be {kib(size)} '
            f"({size} bytes), over the 1024 KiB (1 MiB) ConfigMap limit, so the operator cannot start the benchmark; "
            f"largest parts: {biggest}. "
            "Fix: shrink the spec: reference datasets by file or URL instead of inlining them, "
            "shorten inline prompts or input payloads, or split the run into several jobs"
        )
        details = [f"{p}: {s} bytes" for p, s in parts]
        return CheckResult(self.name, Status.FAIL, message, details=details)


CHECKS = [ConfigMapSize()]
