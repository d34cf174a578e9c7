"""admission.k8s.io/v1 AdmissionReview: parse the request envelope, build the response.

The envelope is handled in one place (kopf's `_core/engines/admission.py` is the model):
handlers receive a validated `AdmissionRequest` and return plain data; the HTTP layer
only renders. `object` and `oldObject` stay plain dicts (the hot path never copies a
Kubernetes object into a model). Unknown envelope fields are ignored, as the apiserver
may add fields in later versions.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from webhook.policy import Decision

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]

#: at most this many field errors are named in a 400 message
_MAX_ERRORS = 5


class ReviewError(ValueError):
    """The body is not a usable AdmissionReview; the message names what is wrong (HTTP 400)."""


class _Envelope(BaseModel):
    # strict: the apiserver sends booleans as booleans; `dryRun: "yes"` or `1` is a client's mistake
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=False, strict=True)


class GroupVersionKind(_Envelope):
    group: str = ""
    version: str
    kind: str


class GroupVersionResource(_Envelope):
    group: str = ""
    version: str
    resource: str


class UserInfo(_Envelope):
    username: str = ""
    uid: str = ""
    groups: list[str] = Field(default_factory=list)
    extra: dict[str, list[str]] = Field(default_factory=dict)


class AdmissionRequest(_Envelope):
    uid: str = Field(min_length=1)
    kind: GroupVersionKind
    resource: GroupVersionResource
    sub_resource: str | None = Field(None, alias="subResource")
    request_kind: GroupVersionKind | None = Field(None, alias="requestKind")
    request_resource: GroupVersionResource | None = Field(None, alias="requestResource")
    request_sub_resource: str | None = Field(None, alias="requestSubResource")
    name: str = ""
    namespace: str = ""
    operation: Operation
    user_info: UserInfo = Field(default_factory=UserInfo, alias="userInfo")
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = Field(None, alias="oldObject")
    dry_run: bool = Field(False, alias="dryRun")
    options: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _object_for_writes(self) -> AdmissionRequest:
        # CREATE and UPDATE always carry the object; without it there is nothing to check
        if self.operation in ("CREATE", "UPDATE") and self.object is None:
            raise ValueError(f"request.object is required for operation {self.operation}")
        # the object is judged by the adapter of request.kind's kind: one that says it is another
        # kind would be allowed unchecked (no adapter) or judged as what it is not
        want = f"{self.kind.group}/{self.kind.version}" if self.kind.group else self.kind.version
        for field, obj in (("object", self.object), ("oldObject", self.old_object)):
            if obj is None:
                continue
            api_version, kind = obj.get("apiVersion"), obj.get("kind")
            if isinstance(api_version, str) and isinstance(kind, str) and (api_version, kind) != (want, self.kind.kind):
                raise ValueError(
                    f"request.{field} is a {_clip(api_version)} {_clip(kind)}, but request.kind says {want} {self.kind.kind}"
                )
        return self


class AdmissionReview(_Envelope):
    api_version: Literal["admission.k8s.io/v1"] = Field(alias="apiVersion")
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


def _clip(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _describe(exc: ValidationError) -> str:
    parts: list[str] = []
    errors = exc.errors(include_url=False, include_input=False)
    for err in errors[:_MAX_ERRORS]:
        msg = err["msg"]
        if err["type"] in ("model_type", "model_attributes_type", "dict_type"):
            msg = "Input should be a JSON object"
        if err["type"] == "value_error":  # our own validators: the message already names the field
            parts.append(msg.removeprefix("Value error, "))
        else:
            parts.append(f"{_field_path(tuple(err['loc']))}: {msg}")
    if len(errors) > _MAX_ERRORS:
        parts.append(f"and {len(errors) - _MAX_ERRORS} more")
    return "; ".join(parts)


def parse_review(data: Any) -> AdmissionReview:
    """Validate decoded JSON as an AdmissionReview v1. Raises ReviewError naming the field path."""
    if not isinstance(data, dict):
        raise ReviewError(f"not an AdmissionReview: the body is a JSON {_json_type(data)}, not an object")
    try:
        return AdmissionReview.model_validate(data)
    except ValidationError as exc:
        raise ReviewError(f"not an AdmissionReview {API_VERSION}: {_describe(exc)}") from None


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def parse_review_bytes(body: bytes, loads: Any = json.loads) -> AdmissionReview:
    """Decode and validate a request body. Raises ReviewError for invalid JSON too."""
    if not body:
        raise ReviewError("the request body is empty; expected an AdmissionReview JSON object")
    try:
        data = loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ReviewError(f"the request body is not valid JSON: {_short(str(exc))}") from None
    if _MAYBE_SURROGATE.search(body):  # rare: only then walk the strings
        _no_lone_surrogates(data)
    return parse_review(data)


# `\ud800`-`\udfff` escapes (valid pairs too: the walk tells them apart) and raw UTF-8-encoded
# surrogates, which json.loads decodes with surrogatepass
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\xed[\xa0-\xbf]")


def _no_lone_surrogates(data: Any) -> None:
    """A lone UTF-16 surrogate parses into a str that cannot be encoded again: every answer that
    echoed it (a name in a message) would fail. It is the client's mistake: ReviewError (400)."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                child = f"{path}.{k}" if path else str(k)
                _encodable(k, f"a key in {path or 'the body'}")
                stack.append((v, child))
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, str):
            _encodable(value, f"the string at {path}")


def _encodable(text: str, where: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise ReviewError(
            f"the request body is not valid Unicode: a lone UTF-16 surrogate (\\u{ord(bad):04x}) in {_clip(where)}"
        ) from None


# --------------------------------------------------------------------------- the body before parsing


def estimate_values(data: bytes) -> int:
    """An upper bound on the JSON values `data` parses into, at memchr speed (no parse).

    Every value after the first of an array or object follows a comma, and every first
    value opens a container, so values ≤ commas + brackets + 1. Commas and brackets inside
    strings only make the estimate larger, never smaller.
    """
    return data.count(b",") + data.count(b"[") + data.count(b"{") + 1


_HEAD = 8192  # the apiserver writes every envelope field before `object` (Go field order)
_UID = re.compile(rb'"request"\s*:\s*\{\s*"uid"\s*:\s*"([^"\\]{1,256})"')
_FIELDS = {
    "operation": re.compile(rb'"operation"\s*:\s*"([A-Z]{1,16})"'),
    "name": re.compile(rb'"name"\s*:\s*"([^"\\]{0,253})"'),
    "namespace": re.compile(rb'"namespace"\s*:\s*"([^"\\]{0,63})"'),
    "kind": re.compile(
        rb'"request"\s*:\s*\{\s*"uid"\s*:\s*"[^"]*"\s*,\s*"kind"\s*:\s*\{[^{}]*?"kind"\s*:\s*"([^"\\]{1,63})"'
    ),
}


def peek_envelope(body: bytes) -> dict[str, str] | None:
    """uid, operation, kind, name and namespace of an AdmissionReview read from its head, without parsing it.

    For a body too large to parse: the apiserver (Go's encoding/json, struct field order)
    writes `{"kind":"AdmissionReview","apiVersion":...,"request":{"uid":...,"kind":{...},
    ...,"name":...,"namespace":...,"operation":...,"userInfo":...,"object":...}}`, so these
    fields come before the object. None when the uid is not where the apiserver puts it.
    """
    head = body[:_HEAD]
    m = _UID.search(head)
    if m is None:
        return None
    out = {"uid": m.group(1).decode("utf-8", "replace")}
    # name, namespace and operation come before userInfo; past it, a "name" is the object's content
    cut = head.find(b'"userInfo"')
    envelope = head[:cut] if cut > 0 else head
    for key, rx in _FIELDS.items():
        found = rx.search(envelope)
        out[key] = found.group(1).decode("utf-8", "replace") if found else ""
    return out


def split_old_object(body: bytes) -> tuple[bytes, bytes]:
    """(the body up to `"oldObject":`, the rest): the apiserver writes oldObject after object.

    A key spelled `"oldObject":` can only appear unescaped as a key, never inside a string,
    so the last one is request.oldObject (or a key nested in it).
    """
    i = body.rfind(b'"oldObject":')
    return (body, b"") if i < 0 else (body[:i], body[i:])


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def review_response(
    uid: str,
    *,
    allowed: bool,
    message: str | None = None,
    warnings: list[str] | None = None,
    audit_annotations: dict[str, str] | None = None,
    code: int = 403,
) -> dict[str, Any]:
    """The AdmissionReview answer: uid echoed; a denial carries status code 403 and the message."""
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed:
        response["status"] = {
            "code": code,
            "status": "Failure",
            "reason": "Forbidden" if code == 403 else "BadRequest" if code == 400 else "",
            "message": message or "denied by preflight-webhook",
        }
    if warnings:
        response["warnings"] = list(warnings)
    if audit_annotations:
        response["auditAnnotations"] = dict(audit_annotations)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def response_from_decision(uid: str, decision: Decision) -> dict[str, Any]:
    return review_response(
        uid,
        allowed=decision.allowed,
        message=decision.message,
        warnings=decision.warnings,
        audit_annotations=decision.audit_annotations,
    )


__all__ = [
    "AdmissionRequest",
    "AdmissionReview",
    "GroupVersionKind",
    "GroupVersionResource",
    "ReviewError",
    "UserInfo",
    "parse_review",
    "parse_review_bytes",
    "response_from_decision",
    "review_response",
]
