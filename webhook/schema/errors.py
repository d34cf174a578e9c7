"""A finding of the apiserver's create path, as it renders one: k8s.io/apimachinery pkg/util/validation/field
errors.go (the ErrorType names, field.Error.ErrorBody and Error()), and the verdict on a whole create
(validate.py builds it; rules.py adds the x-kubernetes-validations findings to it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: field.ErrorType names (k8s.io/apimachinery pkg/util/validation/field/errors.go) and their StatusCause reasons
REQUIRED = ("Required value", "FieldValueRequired")
INVALID = ("Invalid value", "FieldValueInvalid")
TYPE_INVALID = ("Invalid value", "FieldValueTypeInvalid")
NOT_SUPPORTED = ("Unsupported value", "FieldValueNotSupported")
DUPLICATE = ("Duplicate value", "FieldValueDuplicate")
TOO_LONG = ("Too long", "FieldValueTooLong")
TOO_MANY = ("Too many", "FieldValueTooMany")

OMIT = object()  # field.Error's omitValue: the body is the type alone


def go_value(v: Any) -> str:
    """A bad value as field.Error.ErrorBody prints it: strings quoted, numbers and booleans bare, null, else JSON."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return num(v)
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def num(v: float | int) -> str:
    """A number as Go's %v prints a float64 limit (`1`, `0.5`)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e21:
        return str(int(v))
    return str(v)


@dataclass(frozen=True)
class FieldError:
    """One field.Error: `path` ("<nil>" for none), its type and StatusCause reason, and the rendered line."""

    path: str
    kind: tuple[str, str]
    value: Any = OMIT
    detail: str = ""

    @property
    def reason(self) -> str:
        return self.kind[1]

    @property
    def body(self) -> str:
        """field.Error.ErrorBody: the StatusCause's message."""
        if self.kind in (REQUIRED, TOO_LONG) or self.value is OMIT:
            s = self.kind[0]
        else:
            s = f"{self.kind[0]}: {go_value(self.value)}"
        return f"{s}: {self.detail}" if self.detail else s

    def __str__(self) -> str:
        return f"{self.path}: {self.body}"


@dataclass
class SchemaVerdict:
    """What the apiserver would answer a create of the object with."""

    kind: str  # `TrainJob`
    version: str  # `trainer.kubeflow.org/v1alpha1`
    #: strict decoding: the unknown fields' paths (`spec.trainr`); when any, `errors` is empty (never reached)
    unknown: list[str] = field(default_factory=list)
    errors: list[FieldError] = field(default_factory=list)
    #: x-kubernetes-validations rules evaluated (and passed or failed)
    rules_evaluated: int = 0
    #: rules not evaluated: `path: rule (why)`
    not_evaluated: list[str] = field(default_factory=list)
    #: rules that apply to updates only (they read oldSelf)
    transition_rules: int = 0
    #: the rules were not run because the schema failed (the apiserver's own note)
    rules_not_checked: bool = False

    @property
    def ok(self) -> bool:
        return not self.unknown and not self.errors

    def decoding_error(self) -> str:
        fields = ", ".join(f'unknown field "{p}"' for p in self.unknown)
        v = self.version.rsplit("/", 1)[-1]
        return f'{self.kind} in version "{v}" cannot be handled as a {self.kind}: strict decoding error: {fields}'

    def lines(self) -> list[str]:
        """The apiserver's findings, one line each (its `* ` list)."""
        return [self.decoding_error()] if self.unknown else [str(e) for e in self.errors]
