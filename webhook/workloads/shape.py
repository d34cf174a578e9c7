"""Typed reads of user-supplied JSON: a wrong shape is an AdapterError naming the field path.

Adapters read objects nobody has validated yet (the webhook runs before the CRD's own
controller does), so every read of a field goes through these helpers instead of a bare
`.get()`. A message reads like a pydantic error, path first:
`spec.benchmark.models[0] must be a string or a mapping, not list`
(the type named as Python names it: list, dict, str, int, float, bool; null for null).

`null` counts as absent everywhere (as in Kubernetes JSON), so the helpers return the
empty value for it. `clean(value, schema, path)` validates a whole subtree against a small
declarative schema (used for the PodSpec parts in webhook.workloads.podspec); unknown
keys are left alone, the apiserver judges those.
"""

from __future__ import annotations

import copy
import re
import sys
from dataclasses import dataclass
from typing import Any

from webhook import quantity
from webhook.workloads.base import AdapterError

_DIGITS = re.compile(r"\s*+[+-]?+[0-9]{1,18}+\s*+")  # possessive: no backtracking over a long run
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
_SHOWN = 40  # longest value quoted back in a message


def json_type(value: Any) -> str:
    """The type of a value as messages name it: Python's name (as `type(x).__name__`), `null` for None."""
    return "null" if value is None else type(value).__name__


def shown(value: Any) -> str:
    """A short quote of a scalar for enum/format errors; never for free text like env values."""
    text = value if isinstance(value, str) else json_type(value)
    if isinstance(value, str):
        return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")
    return text


def wrong(path: str, expected: str, value: Any) -> AdapterError:
    """`<path> must be <expected>, not <type>`: `spec.trainer must be a mapping, not str`."""
    return AdapterError(f"{path} must be {expected}, not {json_type(value)}")


def copy_json(value: Any) -> Any:
    """copy.deepcopy for JSON data at a fraction of its cost (no memo); anything else goes to deepcopy."""
    t = type(value)
    if t is dict:
        return {k: copy_json(v) for k, v in value.items()}
    if t is list:
        return [copy_json(v) for v in value]
    if t is str or t is int or t is float or t is bool or value is None:
        return value
    return copy.deepcopy(value)


def at(path: str, key: str | int) -> str:
    """The path of a child: `spec` + `benchmark` → `spec.benchmark`; + 0 → `spec.benchmark[0]`."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def mapping(value: Any, path: str) -> dict[str, Any]:
    """A JSON object ({} when absent)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise wrong(path, "a mapping", value)
    return value


def listing(value: Any, path: str) -> list[Any]:
    """A JSON array ([] when absent)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise wrong(path, "a list", value)
    return value


def string(value: Any, path: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise wrong(path, "a string", value)


def boolean(value: Any, path: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise wrong(path, "a boolean", value)


def number(value: Any, path: str) -> int | float | None:
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    raise wrong(path, "a number", value)


def integer(
    value: Any, path: str, *, lax: bool = False, minimum: int = INT32_MIN, maximum: int = INT32_MAX
) -> int | None:
    """An integer within [minimum, maximum] (int32 by default, as Kubernetes fields are).

    `lax` accepts what pydantic's lax mode does for AIPerf's models: integral floats and
    numeric strings.
    """
    if value is None:
        return None
    out: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        out = value
    elif lax and isinstance(value, float) and value.is_integer():
        out = int(value)
    elif lax and isinstance(value, str) and _DIGITS.fullmatch(value):
        out = int(value)
    if out is None:
        raise wrong(path, "an integer", value)
    if not minimum <= out <= maximum:
        raise AdapterError(f"{path} must be an integer from {minimum} to {maximum}, not {out}")
    return out


def str_map(value: Any, path: str) -> dict[str, str]:
    """A mapping of strings to strings (labels, annotations, nodeSelector), null values dropped."""
    return clean(value, MapOf("string"), path)


def read_metadata(obj: dict[str, Any], namespace: str | None) -> tuple[str, str, dict[str, str], str | None]:
    """(name, namespace, labels, uid) of a job's metadata, once its fields have Kubernetes' shapes (the
    annotations too: the skip annotation is read from them); the namespace defaults to the request's,
    then "default". Raises AdapterError naming the field."""
    meta = mapping(obj.get("metadata"), "metadata")
    name = string(meta.get("name"), "metadata.name") or ""
    ns = string(meta.get("namespace"), "metadata.namespace") or namespace or "default"
    labels = str_map(meta.get("labels"), "metadata.labels")
    str_map(meta.get("annotations"), "metadata.annotations")
    return name, ns, labels, string(meta.get("uid"), "metadata.uid")


def one_of(value: Any, path: str, allowed: tuple[str, ...]) -> str | None:
    """A string from a fixed set."""
    if value is None:
        return None
    if isinstance(value, str) and value in allowed:
        return value
    choices = ", ".join(allowed[:-1]) + f" or {allowed[-1]}"
    if isinstance(value, str):
        raise AdapterError(f"{path} must be {choices}, not {shown(value)}")
    raise wrong(path, choices, value)


def quantity_value(value: Any, path: str) -> None:
    """A Kubernetes quantity: a string like "500m" or "2Gi", or a JSON number."""
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            quantity.parse_quantity(value)
            return
        except ValueError:
            pass
        if not isinstance(value, str):  # nan/inf cannot come from JSON, but be exact
            raise AdapterError(f"{path} must be a finite quantity")
        raise AdapterError(f'{path} must be a Kubernetes quantity such as "500m", "2" or "1Gi", not {shown(value)}')
    raise wrong(path, 'a quantity (a string such as "500m" or a number)', value)


# ----------------------------------------------------------------------------- schemas


@dataclass(frozen=True)
class ListOf:
    item: Schema


@dataclass(frozen=True)
class MapOf:
    value: Schema


# "string" | "integer" (int32) | "int64" | "boolean" | "quantity" | "int-or-string" | "any" | ListOf | MapOf | {field: Schema}
Schema = str | ListOf | MapOf | dict[str, Any]


def clean(value: Any, schema: Schema, path: str) -> Any:
    """`value` validated against `schema`, as a copy without null struct fields.

    Raises AdapterError at the first wrong shape. A null field or map value means absent
    (and "delete" in a strategic merge patch) and is dropped, so readers never meet
    `"resources": null`; list items may not be null. Keys the schema does not name are kept as given.

    Runs on every request over every PodSpec: a first pass builds no field paths; only
    when it meets a wrong shape does the second pass run to name the path.
    """
    try:
        return _clean_fast(value, schema)
    except AdapterError:
        pass
    return _clean_explain(value, schema, path)


_STRING = sys.intern("string")
_ANY = sys.intern("any")


def _clean_fast(value: Any, schema: Schema) -> Any:
    """_clean_explain without paths (its errors carry none; clean() re-runs to name them)."""
    if type(schema) is dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise AdapterError("")
        out: dict[str, Any] = {}
        for k, v in value.items():
            if v is None:
                continue
            sub = schema.get(k)
            if sub is None or sub is _ANY or (sub is _STRING and type(v) is str):
                out[k] = v  # unknown keys as given; strings and "any" need no call (most leaves)
            else:
                out[k] = _clean_fast(v, sub)
        return out
    if type(schema) is str:
        if schema == "string":
            if value is None or isinstance(value, str):
                return value
            raise AdapterError("")
        if schema == "any":
            return value
        # the other leaves, for their common values (anything else: _clean_explain decides)
        t = type(value)
        if schema == "quantity" and t is str:
            try:
                quantity.parse_quantity(value)  # memoized per string
            except ValueError:
                raise AdapterError("") from None
            return value
        if schema == "integer" and t is int and INT32_MIN <= value <= INT32_MAX:
            return value
        if schema == "boolean" and t is bool:
            return value
    elif isinstance(schema, ListOf):
        if value is None:
            return []
        if not isinstance(value, list):
            raise AdapterError("")
        item = schema.item
        items = []
        for v in value:
            if v is None:
                raise AdapterError("")
            items.append(_clean_fast(v, item))
        return items
    elif isinstance(schema, MapOf):
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise AdapterError("")
        inner = schema.value
        return {k: _clean_fast(v, inner) for k, v in value.items() if v is not None}
    return _clean_explain(value, schema, "")


def _clean_explain(value: Any, schema: Schema, path: str) -> Any:
    """clean() with the field path of every value at hand, for the error message."""
    if schema == "any":
        return value
    if isinstance(schema, dict):
        return {
            k: _clean_explain(v, schema[k], at(path, k)) if k in schema else v
            for k, v in mapping(value, path).items()
            if v is not None
        }
    if isinstance(schema, ListOf):
        return [_item(v, schema.item, at(path, i)) for i, v in enumerate(listing(value, path))]
    if isinstance(schema, MapOf):
        return {
            k: _clean_explain(v, schema.value, at(path, k)) for k, v in mapping(value, path).items() if v is not None
        }
    if schema == "string":
        return string(value, path)
    if schema == "integer":
        return integer(value, path)
    if schema == "int64":
        return integer(value, path, minimum=-(2**63), maximum=2**63 - 1)
    if schema == "boolean":
        return boolean(value, path)
    if schema == "quantity":
        quantity_value(value, path)
        return value
    if schema == "int-or-string":
        if isinstance(value, int) and not isinstance(value, bool):
            return integer(value, path)
        if not isinstance(value, str):
            raise wrong(path, "an integer or a string", value)
        return value
    raise TypeError(f"unknown schema {schema!r}")  # pragma: no cover - a schema typo


def _item(value: Any, schema: Schema, path: str) -> Any:
    if value is None:
        raise wrong(path, _describe(schema), value)
    return _clean_explain(value, schema, path)


def _describe(schema: Schema) -> str:
    if isinstance(schema, (dict, MapOf)):
        return "a mapping"
    if isinstance(schema, ListOf):
        return "a list"
    names = {
        "string": "a string",
        "integer": "an integer",
        "int64": "an integer",
        "boolean": "a boolean",
        "int-or-string": "an integer or a string",
    }
    return names.get(str(schema), "a quantity")
