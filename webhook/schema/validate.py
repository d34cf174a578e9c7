"""The apiserver's create path for a custom resource, offline: pruning, defaulting, validation (see the package doc).

Upstream, k8s.io/kubernetes v1.37.2 staging/src/k8s.io/apiextensions-apiserver:
- pkg/apiserver/schema/pruning/algorithm.go: unknown fields (apiVersion, kind, metadata kept at the root; an
  `x-kubernetes-embedded-resource` keeps them too; `x-kubernetes-preserve-unknown-fields` keeps the rest);
- pkg/apiserver/schema/defaulting/algorithm.go and prunenulls.go: defaults of absent properties, and a null
  dropped where the property is not nullable and has no default;
- pkg/apiserver/validation/validation.go kubeOpenAPIResultToFieldErrors: how kube-openapi's errors
  (k8s.io/kube-openapi pkg/validation/errors/schema.go wording, `spec.x in body must be of type integer:
  "string"`) become field errors;
- pkg/apiserver/schema/listtype/validation.go: `x-kubernetes-list-type` map and set duplicates;
- pkg/registry/customresource/strategy.go and validator.go: the order, and the status of a kind with a status
  subresource reset on create (never validated).
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import Any

from webhook.schema.errors import (
    DUPLICATE,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    TYPE_INVALID,
    FieldError,
    SchemaVerdict,
    num,
)
from webhook.schema.rules import run_rules


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    from webhook.schema.crds_data import DATA

    return json.loads(DATA)


def known(api_version: str, kind: str) -> bool:
    return f"{api_version}/{kind}" in _data()["kinds"]


def known_kinds() -> list[str]:
    """`group/version/Kind` of every schema held."""
    return list(_data()["kinds"])


def source() -> str:
    from webhook.schema.crds_data import SOURCE

    return SOURCE


# ---- ObjectMeta (pkg/apiserver/schema/objectmeta; k8s.io/apimachinery pkg/api/validation/objectmeta.go) -------

_OBJECT_META_FIELDS = {
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
}

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_QUALIFIED_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _subdomain_errors(value: str, unit: str = "characters") -> list[str]:
    out = []
    if len(value) > 253:
        out.append(f"must be no more than 253 {unit}")
    if not _DNS1123_SUBDOMAIN.match(value):
        out.append(_SUBDOMAIN_MSG)
    return out


def _qualified_name_errors(value: str, what: str = "a qualified name") -> list[str]:
    """k8s.io/apimachinery pkg/util/validation IsQualifiedName."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        out = []
    elif len(parts) == 2:
        prefix, name = parts
        out = (
            ["prefix part must be non-empty"]
            if not prefix
            else [f"prefix part {m}" for m in _subdomain_errors(prefix, "bytes")]
        )
    else:
        return [
            f"{what} {_QUALIFIED_MSG.removeprefix('name part ')} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    if not name:
        out.append("name part must be non-empty")
    elif len(name) > 63:
        out.append("name part must be no more than 63 bytes")
    if not _QUALIFIED_NAME.match(name):  # an empty name part fails the pattern too
        out.append(_QUALIFIED_MSG)
    return out


def _metadata_errors(meta: Any) -> list[FieldError]:
    """ValidateObjectMetaAccessor for a custom resource (NameIsDNSSubdomain), labels and annotation keys."""
    if not isinstance(meta, dict):
        return []
    out: list[FieldError] = []
    name, generate = meta.get("name"), meta.get("generateName")
    if not name and not generate:
        out.append(FieldError("metadata.name", REQUIRED, detail="name or generateName is required"))
    if isinstance(generate, str) and generate:
        # a prefix: validated as a name with a trailing dash masked (NameIsDNSSubdomain(prefix=true))
        for m in _subdomain_errors(generate[:-1] + "a" if generate.endswith("-") else generate):
            out.append(FieldError("metadata.generateName", INVALID, generate, m))
    if isinstance(name, str) and name:
        for m in _subdomain_errors(name):
            out.append(FieldError("metadata.name", INVALID, name, m))
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for k, v in labels.items():
            for m in _qualified_name_errors(str(k), "a valid label key"):
                out.append(FieldError("metadata.labels", INVALID, k, m))
            if isinstance(v, str):
                if len(v) > 63:
                    out.append(FieldError("metadata.labels", INVALID, v, "must be no more than 63 bytes"))
                if not _LABEL_VALUE.match(v):
                    out.append(FieldError("metadata.labels", INVALID, v, _LABEL_VALUE_MSG))
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for k in annotations:
            for m in _qualified_name_errors(str(k).lower()):
                out.append(FieldError("metadata.annotations", INVALID, k, m))
    return out


# ---- pruning: the unknown fields ----------------------------------------------------------------------------


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _unknown(x: Any, s: dict[str, Any] | None, path: str, out: list[str], root: bool = False) -> None:
    """pruning/algorithm.go prune with ReturnPruned: the paths of the fields the schema does not declare."""
    if s is None:
        return
    if isinstance(x, dict):
        props: dict[str, Any] = s.get("properties") or {}
        additional = s.get("additionalProperties")
        preserve = bool(s.get("x-kubernetes-preserve-unknown-fields"))
        embedded = root or bool(s.get("x-kubernetes-embedded-resource"))
        for k, v in x.items():
            p = _child(path, k)
            if embedded and k in ("apiVersion", "kind") and k not in props:
                continue
            if embedded and k == "metadata":
                if isinstance(v, dict):
                    out.extend(_child(p, m) for m in v if m not in _OBJECT_META_FIELDS)
                continue
            if k in props:
                _unknown(v, props[k], p, out)
            elif isinstance(additional, dict):
                _unknown(v, additional, p, out)
            elif additional is True or preserve:
                continue
            else:
                out.append(p)
    elif isinstance(x, list):
        items = s.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(x):
                _unknown(v, items, f"{path}[{i}]", out)


# ---- defaulting and null pruning ----------------------------------------------------------------------------


def _default(x: Any, s: dict[str, Any] | None) -> None:
    """defaulting/algorithm.go Default and prunenulls.go PruneNonNullableNullsWithoutDefaults, in place."""
    if s is None:
        return
    if isinstance(x, dict):
        props: dict[str, Any] = s.get("properties") or {}
        for k, ps in props.items():
            if k in x and x[k] is None and not ps.get("nullable"):
                if "default" in ps:
                    x[k] = json.loads(json.dumps(ps["default"]))
                else:
                    del x[k]
            elif k not in x and "default" in ps:
                x[k] = json.loads(json.dumps(ps["default"]))
        additional = s.get("additionalProperties")
        if isinstance(additional, dict) and not additional.get("nullable") and "default" not in additional:
            for k in [k for k, v in x.items() if v is None and k not in props]:
                del x[k]
        for k, v in x.items():
            if k in props:
                _default(v, props[k])
            elif isinstance(additional, dict):
                _default(v, additional)
    elif isinstance(x, list):
        items = s.get("items")
        if isinstance(items, dict):
            for v in x:
                _default(v, items)


# ---- kube-openapi validation --------------------------------------------------------------------------------


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _is_type(v: Any, t: str) -> bool:
    actual = _json_type(v)
    if t == "number":
        return actual in ("integer", "number")
    if t == "integer" and actual == "number":
        return float(v).is_integer()
    return actual == t


def _body(path: str) -> str:
    """kube-openapi names the root `body`... and a field `spec.x in body`."""
    return f"{path} in body" if path else "body"


#: the integer formats kube-openapi checks (pkg/validation/validate/type.go, formats.go): their ranges
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _type_error(path: str, v: Any, types: list[str], actual: str | None = None) -> FieldError:
    t = actual or _json_type(v)
    return FieldError(path or "<nil>", TYPE_INVALID, t, f'{_body(path)} must be of type {",".join(types)}: "{t}"')


def _validate(x: Any, s: dict[str, Any], path: str, errs: list[FieldError], root: bool = False) -> None:
    if x is None:
        if s.get("nullable"):
            return
    int_or_string = bool(s.get("x-kubernetes-int-or-string"))
    types = ["integer", "string"] if int_or_string else ([s["type"]] if s.get("type") else [])
    if s.get("type") == "integer" and s.get("format") in _INT_RANGES and _json_type(x) == "number":
        if not float(x).is_integer():  # kube-openapi's format check of an integer: its words, not the type's
            fmt = s["format"]
            errs.append(_type_error(path, x, [fmt], actual="float64"))
            errs.append(
                FieldError("<nil>", INVALID, "", f"Checked value must be of type integer with format {fmt} in {path}")
            )
            return
    if types and not any(_is_type(x, t) for t in types):
        errs.append(_type_error(path, x, types))
        if int_or_string and s.get("anyOf"):  # kube-openapi's anyOf then names the first branch too
            errs.append(FieldError("<nil>", INVALID, "", f'"{path}" must validate at least one schema (anyOf)'))
            first = s["anyOf"][0]
            if first.get("type"):
                errs.append(_type_error(path, x, [first["type"]]))
            if first.get("type") == "integer" and _json_type(x) == "number":
                detail = f"Checked value must be of type integer (default format) in {path}"
                errs.append(FieldError("<nil>", INVALID, "", detail))
        _enum(x, s, path, errs)  # the enum validator runs beside the type's; the others need the type
        return
    _enum(x, s, path, errs)
    if isinstance(x, str):
        _string(x, s, path, errs)
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        _number(x, s, path, errs)
    elif isinstance(x, list):
        _array(x, s, path, errs)
    elif isinstance(x, dict):
        _object(x, s, path, errs, root)


def _enum(x: Any, s: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    if "enum" in s and x not in s["enum"]:
        values = [v if isinstance(v, str) else json.dumps(v) for v in s["enum"]]
        supported = ", ".join(json.dumps(v) for v in values)
        errs.append(FieldError(path, NOT_SUPPORTED, x, f"supported values: {supported}"))


def _string(x: str, s: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    n = len(x)  # kube-openapi counts characters (utf8.RuneCountInString)
    if "maxLength" in s and n > s["maxLength"]:
        errs.append(FieldError(path, TOO_LONG, x, f"may not be more than {s['maxLength']} bytes"))
    if "minLength" in s and n < s["minLength"]:
        errs.append(FieldError(path, INVALID, x, f"{_body(path)} should be at least {s['minLength']} chars long"))
    if "pattern" in s and not _pattern(s["pattern"]).search(x):
        errs.append(FieldError(path, INVALID, x, f"{_body(path)} should match '{s['pattern']}'"))


@lru_cache(maxsize=256)
def _pattern(p: str) -> re.Pattern[str]:
    return re.compile(p)


def _number(x: float, s: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    bounds = _INT_RANGES.get(str(s.get("format"))) if s.get("type") == "integer" else None
    if bounds is not None and not bounds[0] <= x <= bounds[1]:
        detail = f"Checked value must be of type integer with format {s['format']} in {path}"
        errs.append(FieldError("<nil>", INVALID, "", detail))
    if "maximum" in s:
        m = s["maximum"]
        if (s.get("exclusiveMaximum") and x >= m) or x > m:
            op = "less than" if s.get("exclusiveMaximum") else "less than or equal to"
            errs.append(FieldError(path, INVALID, x, f"{_body(path)} should be {op} {num(m)}"))
    if "minimum" in s:
        m = s["minimum"]
        if (s.get("exclusiveMinimum") and x <= m) or x < m:
            op = "greater than" if s.get("exclusiveMinimum") else "greater than or equal to"
            errs.append(FieldError(path, INVALID, x, f"{_body(path)} should be {op} {num(m)}"))
    if "multipleOf" in s and s["multipleOf"] and not math.isclose(x / s["multipleOf"], round(x / s["multipleOf"])):
        errs.append(FieldError(path, INVALID, x, f"{_body(path)} should be a multiple of {num(s['multipleOf'])}"))


def _array(x: list[Any], s: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    if "maxItems" in s and len(x) > s["maxItems"]:
        errs.append(FieldError(path, TOO_MANY, len(x), f"must have at most {s['maxItems']} items"))
    if "minItems" in s and len(x) < s["minItems"]:
        errs.append(FieldError(path, INVALID, x, f"{_body(path)} should have at least {s['minItems']} items"))
    items = s.get("items")
    if isinstance(items, dict):
        for i, v in enumerate(x):
            _validate(v, items, f"{path}[{i}]", errs)


def _object(x: dict[str, Any], s: dict[str, Any], path: str, errs: list[FieldError], root: bool) -> None:
    if "maxProperties" in s and len(x) > s["maxProperties"]:
        errs.append(FieldError(path, TOO_MANY, len(x), f"must have at most {s['maxProperties']} items"))
    if "minProperties" in s and len(x) < s["minProperties"]:
        errs.append(FieldError(path, INVALID, x, f"{_body(path)} should have at least {s['minProperties']} properties"))
    props: dict[str, Any] = s.get("properties") or {}
    for k in s.get("required") or []:
        if k not in x:
            errs.append(FieldError(_child(path, k), REQUIRED))
    additional = s.get("additionalProperties")
    for k, v in x.items():
        if root and k == "metadata":
            continue  # ObjectMeta is validated as such (_metadata_errors), its schema is `type: object`
        if k in props:
            _validate(v, props[k], _child(path, k), errs)
        elif isinstance(additional, dict):
            _validate(v, additional, _child(path, k), errs)


# ---- list types (listtype/validation.go) ----------------------------------------------------------------------


def _list_types(x: Any, s: dict[str, Any] | None, path: str, errs: list[FieldError]) -> None:
    if s is None:
        return
    if isinstance(x, dict):
        props: dict[str, Any] = s.get("properties") or {}
        additional = s.get("additionalProperties")
        for k, v in x.items():
            if k in props:
                _list_types(v, props[k], _child(path, k), errs)
            elif isinstance(additional, dict):
                _list_types(v, additional, _child(path, k), errs)
    elif isinstance(x, list):
        list_type = s.get("x-kubernetes-list-type")
        if list_type == "map":
            keys = s.get("x-kubernetes-list-map-keys") or []
            seen: set[str] = set()
            for i, v in enumerate(x):
                if not isinstance(v, dict):
                    errs.append(
                        FieldError(f"{path}[{i}]", INVALID, v, "must be an object for an array of list-type map")
                    )
                    continue
                key = {k: v[k] for k in keys if k in v}
                text = json.dumps(key, sort_keys=True)
                if text in seen:
                    errs.append(FieldError(f"{path}[{i}]", DUPLICATE, key))
                seen.add(text)
        elif list_type == "set":
            seen_values: list[Any] = []
            for i, v in enumerate(x):
                if v in seen_values:
                    errs.append(FieldError(f"{path}[{i}]", DUPLICATE, v))
                seen_values.append(v)
        items = s.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(x):
                _list_types(v, items, f"{path}[{i}]", errs)


# ---- the create path ----------------------------------------------------------------------------------------


def validate(obj: dict[str, Any]) -> SchemaVerdict | None:
    """The apiserver's answer to a create of `obj` (None: no CRD of the project's for its apiVersion and kind)."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    entry = _data()["kinds"].get(f"{api_version}/{kind}")
    if entry is None:
        return None
    schema: dict[str, Any] = _data()["schemas"][entry["schema"]]
    verdict = SchemaVerdict(kind, api_version)
    x = json.loads(json.dumps(obj))  # the apiserver's own copy, defaulted in place
    if entry["status"]:
        x.pop("status", None)  # PrepareForCreate resets the status of a kind with the status subresource
    _unknown(x, schema, "", verdict.unknown, root=True)
    if verdict.unknown:
        verdict.unknown.sort()
        return verdict
    _default(x, schema)
    meta = x.get("metadata")
    if (
        isinstance(meta, dict)
        and not meta.get("name")
        and isinstance(meta.get("generateName"), str)
        and meta["generateName"]
    ):
        # the registry generates the name before validating (k8s.io/apiserver pkg/storage/names SimpleNameGenerator:
        # the prefix cut to 58 characters, then 5 random ones; `xxxxx` stands for them here)
        meta["name"] = meta["generateName"][:58] + "xxxxx"
    verdict.errors += _metadata_errors(meta)
    _validate(x, schema, "", verdict.errors, root=True)
    _list_types(x, schema, "", verdict.errors)
    # strategy.go hasBlockingErr: these types of error keep the rules from running
    blocking = any(e.kind in (NOT_SUPPORTED, REQUIRED, TOO_LONG, TOO_MANY, TYPE_INVALID) for e in verdict.errors)
    run_rules(x, schema, verdict, skip=blocking)
    return verdict
