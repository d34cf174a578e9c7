"""The walks every review makes over its object: its size as JSON and the plain-JSON test.

`json_bytes` measures the object as the apiserver stores it (compact JSON), checked against etcd's
object limit before any rendering (webhook.preflight); `plain_json` is the adapters' first read
(string keys, finite numbers, no YAML-only types, bounded depth), and `bounded_plain` answers both
in one walk, which `verified_plain` lets plain_json trust for that object. The messages name field
paths as webhook.workloads.shape does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from webhook.workloads.base import AdapterError
from webhook.workloads.shape import _SHOWN, at, json_type

#: containers nested deeper than this below the object are refused: AIPerf 0.13.0's converter refuses a
#: spec nested more than 256 levels (config/loader/core.py _MAX_CONFIG_NESTING_DEPTH, counted from the
#: spec, which is one level below the object), and no Kubernetes schema nests as deep. It also bounds
#: every recursive reader after this check (Python's recursion limit is 1000).
MAX_DEPTH = 257


def plain_json(obj: Any) -> None:
    """The object is plain JSON: string keys, finite numbers, no YAML-only types, bounded depth.

    The webhook's parser guarantees most of this; the CLI's YAML loader does not (`1:` keys,
    unquoted dates, `.nan`), and the stdlib JSON parser accepts NaN. Iterative, so a deep
    object is an AdapterError rather than a RecursionError. A first pass builds no paths
    (it runs on every request); only when it finds a problem does the second name it.
    """
    if _VERIFIED_PLAIN.get() is obj:  # the caller's bounded_plain walk already found it plain
        return
    if not _is_plain_json(obj):
        _plain_json_error(obj)


#: the object a bounded_plain walk has just found plain JSON, while `verified_plain(obj)` holds
#: (in this task only): plain_json skips it instead of walking it again
_VERIFIED_PLAIN: ContextVar[Any] = ContextVar("verified_plain", default=None)


@contextmanager
def verified_plain(obj: Any) -> Iterator[None]:
    """Within the block, plain_json(obj) trusts a bounded_plain walk of `obj` (None: trusts nothing).
    preflight.evaluate holds it around the adapter only, with nothing between the walk and the
    adapter that could change the object."""
    token = _VERIFIED_PLAIN.set(obj)
    try:
        yield
    finally:
        _VERIFIED_PLAIN.reset(token)


def is_plain(obj: Any) -> bool:
    """plain_json's answer as a boolean (trusting a verified_plain walk of `obj` the same way)."""
    return _VERIFIED_PLAIN.get() is obj or _is_plain_json(obj)


def bounded_plain(obj: Any, *, max_bytes: int) -> tuple[int | None, bool]:
    """(the object's size as JSON when it is over `max_bytes`, else None; whether plain_json(obj) passes),
    in one walk over the object.

    Every review walks its object for both (the size bound before rendering, plain JSON in the
    adapter). The walk sums the strings' lengths and counts the values, which bounds the JSON from
    above (a character is at most 6 bytes as JSON, `\\u001f`; a value's number, quotes and separators at
    most 26 unless it is a longer integer, whose digits are counted); only an object whose bound
    is over `max_bytes` is measured exactly (json_bytes), so a small object costs no serialization."""
    if not isinstance(obj, (dict, list)):
        return _over(obj, max_bytes), _plain_scalar(obj)
    stack: list[tuple[Any, int]] = [(obj, 0)]
    finite = math.isfinite
    count = chars = 0
    most = max_bytes // 2 + 1  # values max_bytes of JSON can hold (`0,` each)
    while stack:
        value, depth = stack.pop()
        count += len(value)
        if count > most:  # over for sure; YAML aliases (the CLI) can share one list a billion times over
            return 2 * count - 1, False  # not judged further (the verdict is Object Size)
        if depth > MAX_DEPTH:
            return _over(obj, max_bytes), False
        deeper = depth + 1
        if type(value) is dict or isinstance(value, dict):
            for key in value:
                if type(key) is not str:
                    if not isinstance(key, str):
                        return _over(obj, max_bytes), False
                chars += len(key)
            values: Iterable[Any] = value.values()
        else:
            values = value
        for v in values:
            t = type(v)
            if t is str:
                chars += len(v)
            elif t is int:
                if not -_LONG_INT < v < _LONG_INT:
                    chars += len(str(v)) if v.bit_length() < 10_000 else max_bytes  # str() refuses 4300+ digits
            elif t is bool or v is None:
                continue
            elif t is dict or t is list or isinstance(v, (dict, list)):
                stack.append((v, deeper))
            elif t is float:
                if not finite(v):
                    return _over(obj, max_bytes), False
            elif not _plain_scalar(v):
                return _over(obj, max_bytes), False
    if 6 * chars + 26 * count + 2 <= max_bytes:
        return None, True
    return _over(obj, max_bytes), True


_LONG_INT = 10**20  # an integer inside this has at most 21 characters as JSON


def _over(obj: Any, max_bytes: int) -> int | None:
    """json_bytes(obj) when it is over max_bytes, else None."""
    size = json_bytes(obj)
    return size if size is not None and size > max_bytes else None


#: compact JSON, as the apiserver stores a custom resource; a YAML-only value (a date) as its text
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False, default=str)


def json_bytes(obj: Any) -> int | None:
    """Bytes of `obj` as compact JSON (UTF-8), or None when it cannot be written as JSON (a key that is
    not a string, number, boolean or null; nesting past Python's recursion limit)."""
    try:
        text = _COMPACT.encode(obj)
    except (TypeError, ValueError, RecursionError):
        return None
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _is_plain_json(obj: Any) -> bool:
    """What _plain_json_error accepts, without building a path for every node.

    Only containers go on the stack; scalars are judged where they are met (most values
    are scalars: a stack entry per scalar cost more than the judgement)."""
    if not isinstance(obj, (dict, list)):
        return _plain_scalar(obj)
    stack: list[tuple[Any, int]] = [(obj, 0)]
    finite = math.isfinite
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return False
        deeper = depth + 1
        if isinstance(value, dict):
            for key in value:
                if not isinstance(key, str):
                    return False
            value = value.values()
        for v in value:  # an object's values or an array's items, judged alike
            t = type(v)
            if t is str or t is int or t is bool or v is None:
                continue
            if t is dict or t is list or isinstance(v, (dict, list)):
                stack.append((v, deeper))
            elif t is float:
                if not finite(v):
                    return False
            elif not _plain_scalar(v):
                return False
    return True


def _plain_scalar(value: Any) -> bool:
    """A JSON scalar: string, finite number, boolean or null."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (str, int))


def _plain_json_error(obj: Any) -> None:
    """Raises the AdapterError naming the first problem plain_json finds (depth-first, last key first)."""
    stack: list[tuple[Any, str, int]] = [(obj, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH and isinstance(value, (dict, list)):
            raise AdapterError(
                f"{_clipped(path)} is nested more than {MAX_DEPTH - 1} levels below spec, which the AIPerf operator "
                f'refuses ("Configuration nested too deeply (>{MAX_DEPTH - 1} levels)") and no Kubernetes schema allows'
            )
        if isinstance(value, dict):
            for key, v in value.items():
                if not isinstance(key, str):
                    raise AdapterError(
                        f"{path or 'the object'} must have string keys, not {json_type(key)} {repr(key)[:_SHOWN]}"
                    )
                stack.append((v, at(path, key), depth + 1))
        elif isinstance(value, list):
            stack.extend((v, at(path, i), depth + 1) for i, v in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise AdapterError(f"{path} must be a finite number, not {value}")
        elif value is not None and not isinstance(value, (str, int, float)):
            raise AdapterError(
                f"{path} must be a JSON value (string, number, boolean, list or mapping), not {json_type(value)}"
            )


def _clipped(path: str) -> str:
    """A field path short enough for a message: its head and its tail."""
    return path if len(path) <= 160 else f"{path[:60]}…{path[-80:]}"
