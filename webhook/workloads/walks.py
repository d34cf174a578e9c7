"""The walks every review makes over its object: the size bound and the plain-JSON test.

`size_problem` bounds the object before any rendering (webhook.preflight), `plain_json` is the
adapters' first read (string keys, finite numbers, no YAML-only types, bounded depth), and
`bounded_plain` answers both in one walk, which `verified_plain` lets plain_json trust for that
object. The messages name field paths as webhook.workloads.shape does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from webhook.workloads.base import AdapterError
from webhook.workloads.shape import _SHOWN, at, json_type

MAX_DEPTH = 100  # real objects nest ~30 levels; bounds every recursive reader after this check


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


def bounded_plain(obj: Any, *, max_values: int, max_items: int) -> tuple[str | None, bool]:
    """(size_problem(obj, ...), whether plain_json(obj) passes) in one walk over the object.

    Every review walks its object for both (the size bound before rendering, plain JSON in the
    adapter); together they cost one walk. When the object is not plain JSON the answer's first
    part comes from size_problem itself, and the adapter's plain_json names the problem."""
    if not isinstance(obj, (dict, list)):
        return None, _plain_scalar(obj)
    stack: list[tuple[Any, int]] = [(obj, 0)]
    finite = math.isfinite
    count = 0
    while stack:
        value, depth = stack.pop()
        size = len(value)
        count += size
        if size > max_items or count > max_values:
            return _size_problem_text(obj, max_values, max_items), False
        deeper = depth + 1
        if deeper > MAX_DEPTH and value:
            return size_problem(obj, max_values=max_values, max_items=max_items), False
        if type(value) is dict or isinstance(value, dict):
            for key in value:
                if not isinstance(key, str):
                    return size_problem(obj, max_values=max_values, max_items=max_items), False
            values: Iterable[Any] = value.values()
        else:
            values = value
        for v in values:
            t = type(v)
            if t is str or t is int or t is bool or v is None:
                continue
            if t is dict or t is list or isinstance(v, (dict, list)):
                stack.append((v, deeper))
            elif t is float:
                if not finite(v):
                    return size_problem(obj, max_values=max_values, max_items=max_items), False
            elif not _plain_scalar(v):
                return size_problem(obj, max_values=max_values, max_items=max_items), False
    return None, True


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
        deeper = depth + 1
        if isinstance(value, dict):
            if deeper > MAX_DEPTH and value:
                return False
            for key, v in value.items():
                if not isinstance(key, str):
                    return False
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
        else:
            if deeper > MAX_DEPTH and value:
                return False
            for v in value:
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
        if depth > MAX_DEPTH:
            raise AdapterError(f"{path} is nested more than {MAX_DEPTH} levels deep")
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


# ----------------------------------------------------------------------------- size bound

#: how a too-long list or map is named in the answer, by its last key
_NOUNS = {
    "models": "models",
    "items": "models",
    "datasets": "datasets",
    "phases": "phases",
    "urls": "endpoint URLs",
    "env": "env entries",
    "envFrom": "envFrom entries",
    "volumes": "volumes",
    "volumeMounts": "volume mounts",
    "containers": "containers",
    "initContainers": "init containers",
    "labels": "labels",
    "annotations": "annotations",
    "tolerations": "tolerations",
    "imagePullSecrets": "image pull secrets",
}
_PATH_DEPTH = 8  # paths are spelled out this deep; deeper values are counted under their ancestor's path
_PART_DEPTH = 3  # the "largest part" is reported at this depth (spec.benchmark.models)


def size_problem(obj: Any, *, max_values: int, max_items: int) -> str | None:
    """Why `obj` is too large to check, or None: a bound checked before any rendering.

    Counts every JSON value and looks at the length of every list and map, iteratively and
    stopping at the first bound crossed, so its own cost is bounded by `max_values` whatever
    the object's size. The text is the verdict's body: `too large to check: 280000 models in
    spec.benchmark.models (limit 1000). Fix: ...`.
    """
    if not isinstance(obj, (dict, list)) or not _over_limits(obj, max_values, max_items):
        return None
    return _size_problem_text(obj, max_values, max_items)


def _over_limits(obj: dict[str, Any] | list[Any], max_values: int, max_items: int) -> bool:
    """Whether `_size_problem_text` finds a bound crossed: the same walk without paths (it runs on
    every request; the paths are only needed to name the part that crossed it)."""
    stack: list[Any] = [obj]
    count = 0
    while stack:
        value = stack.pop()
        size = len(value)
        if size > max_items:
            return True
        count += size
        if count > max_values:
            return True
        for v in value.values() if type(value) is dict or isinstance(value, dict) else value:
            t = type(v)  # scalars (most values) first, by exact type
            if t is str or t is int or t is bool or v is None or t is float:
                continue
            if t is dict or t is list or isinstance(v, (dict, list)):
                stack.append(v)
    return False


def _size_problem_text(obj: dict[str, Any] | list[Any], max_values: int, max_items: int) -> str | None:
    """size_problem's text: the first bound crossed, named by its field path."""
    stack: list[tuple[Any, str, int, str]] = [(obj, "", 0, "")]
    count = 0
    parts: dict[str, int] = {}
    while stack:
        value, path, depth, part = stack.pop()
        size = len(value)
        if size > max_items:
            field = path.rsplit(".", 1)[-1].split("[", 1)[0]
            where = path or "the object"
            noun = f"{_NOUNS[field]} in {where}" if field in _NOUNS and path.endswith(field) else f"entries in {where}"
            return (
                f"too large to check: {size} {noun} (limit {max_items}). Fix: keep {where} to at most {max_items} "
                "entries (split a benchmark over several jobs), or ask the webhook's operator to raise objectLimits.maxItems"
            )
        count += size
        if part:
            parts[part] = parts.get(part, 0) + size
        if count > max_values:
            largest: tuple[str, int] = max(parts.items(), key=lambda kv: kv[1]) if parts else ("the object", count)
            return (
                f"too large to check: more than {max_values} JSON values (limit {max_values}; the largest part is "
                f"{largest[0]} with {largest[1]}). Fix: remove what the job does not need from {largest[0]}, or ask "
                "the webhook's operator to raise objectLimits.maxValues"
            )
        deeper = depth + 1
        items: Iterable[tuple[Any, Any]] = value.items() if isinstance(value, dict) else enumerate(value)
        for key, v in items:
            if isinstance(v, (dict, list)):
                # a YAML key need not be a string (`1:`, `null:`): named as text, never a crash
                named = key if isinstance(key, str) or type(key) is int else str(key)
                child = at(path, named) if deeper <= _PATH_DEPTH else path
                stack.append((v, child, deeper, child if deeper == _PART_DEPTH else part))
    return None
