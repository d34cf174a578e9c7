"""`x-kubernetes-validations` rules, evaluated where the project's CEL library can evaluate them.

The apiserver runs each rule with `self` bound to the value at the rule's schema node, after defaulting
(k8s.io/apiextensions-apiserver pkg/apiserver/schema/cel/validation.go Validator.Validate): a rule that
answers false is a field error at that node (or at the rule's `fieldPath`), `Invalid value` with the value
for a scalar and without it for an object or a list, its `message` (or `failed rule: <rule>`). At the root,
`self.metadata` holds only `name` and `generateName` (pkg/apiserver/schema/cel/model). A rule that reads
`oldSelf` is a transition rule: it applies to updates only, never to a create. When the schema itself failed,
the apiserver runs no rule and says so (`<nil>: Invalid value: null: some validation rules were not checked
because the object was invalid; ...`).

The project evaluates CEL with the `cel` package (common-expression-language, already a dependency for DRA
selectors: webhook/models/dra/cel.py). It has CEL's standard macros and operators but none of Kubernetes' CEL
libraries (k8s.io/apiserver pkg/cel/library: quantity, url, ip, cidr, lists, regex, format, semver, the
extended strings of cel-go ext). So a rule is evaluated only when every function it calls is in
`EVALUATED_FUNCTIONS`; any other rule, a `messageExpression`, a rule that does not parse here, and a rule whose
evaluation fails at run time (a field it reads is absent, a type the library sees differently) is named as
not evaluated: never reported as a failure.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from webhook.celsubset import compile_within, run
from webhook.schema.errors import INVALID, OMIT, FieldError

if TYPE_CHECKING:
    from webhook.schema.errors import SchemaVerdict

#: the functions (as the `cel` package names them) whose meaning is the same as in the apiserver's CEL
EVALUATED_FUNCTIONS = frozenset(
    {
        "_&&_", "_||_", "!_", "_?_:_", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_",
        "@in", "@not_strictly_false", "_[_]", "_+_", "_-_", "_*_", "_/_", "_%_", "-_",
        "size", "startsWith", "endsWith", "contains", "matches", "has",
    }
)  # fmt: skip

NOT_CHECKED = (
    "some validation rules were not checked because the object was invalid; correct the existing errors to "
    "complete validation"
)

_REASONS = {
    "FieldValueForbidden": ("Forbidden", "FieldValueForbidden"),
    "FieldValueRequired": ("Required value", "FieldValueRequired"),
    "FieldValueDuplicate": ("Duplicate value", "FieldValueDuplicate"),
}


@lru_cache(maxsize=256)
def _compiled(rule: str) -> tuple[Any, str]:
    """(program, "") or (None, why the rule is not evaluated here)."""
    got = compile_within(rule, EVALUATED_FUNCTIONS)
    if got.unparsed:
        return None, "it does not parse with the project's CEL library"
    if got.outside:
        return None, f"it calls {', '.join(got.outside)}, a Kubernetes CEL library function"
    return got.program, ""


def _reads_old_self(rule: str) -> bool:
    import re

    return re.search(r"\boldSelf\b", rule) is not None


def has_rules(s: Any) -> bool:
    """Whether a schema declares any x-kubernetes-validations rule (the apiserver builds a CEL validator then)."""
    if isinstance(s, dict):
        if s.get("x-kubernetes-validations"):
            return True
        return any(has_rules(v) for k, v in s.items() if k not in ("default", "enum", "required"))
    if isinstance(s, list):
        return any(has_rules(v) for v in s)
    return False


#: id of a schema of crds_data (loaded once, never freed) → whether it declares rules
_WITH_RULES: dict[int, bool] = {}


def run_rules(x: dict[str, Any], schema: dict[str, Any], verdict: SchemaVerdict, skip: bool) -> None:
    """Evaluate the rules of `schema` over the defaulted object `x` into `verdict` (errors, counts, names)."""
    if id(schema) not in _WITH_RULES:
        _WITH_RULES[id(schema)] = has_rules(schema)
    if not _WITH_RULES[id(schema)]:
        return
    if skip:
        verdict.rules_not_checked = True
        verdict.errors.append(FieldError("<nil>", INVALID, None, NOT_CHECKED))
        return
    _walk(x, schema, "", verdict, root=True)


def _self_value(x: Any, root: bool) -> Any:
    if root and isinstance(x, dict):
        meta: dict[str, Any] = m if isinstance(m := x.get("metadata"), dict) else {}
        kept = {k: meta[k] for k in ("name", "generateName") if k in meta}
        return {**x, "metadata": kept}
    return x


def _walk(x: Any, s: dict[str, Any] | None, path: str, verdict: SchemaVerdict, root: bool = False) -> None:
    if s is None or x is None:
        return
    for r in s.get("x-kubernetes-validations") or []:
        _run(r, _self_value(x, root), path, verdict)
    if isinstance(x, dict):
        props: dict[str, Any] = s.get("properties") or {}
        additional = s.get("additionalProperties")
        for k, v in x.items():
            if root and k == "metadata":
                continue
            p = f"{path}.{k}" if path else k
            if k in props:
                _walk(v, props[k], p, verdict)
            elif isinstance(additional, dict):
                _walk(v, additional, p, verdict)
    elif isinstance(x, list) and isinstance(s.get("items"), dict):
        for i, v in enumerate(x):
            _walk(v, s["items"], f"{path}[{i}]", verdict)


def _run(r: dict[str, Any], value: Any, path: str, verdict: SchemaVerdict) -> None:
    rule = str(r.get("rule", ""))
    where = path or "<root>"
    if _reads_old_self(rule):
        verdict.transition_rules += 1
        return
    program, why = _compiled(rule)
    if program is None:
        verdict.not_evaluated.append(f"{where}: {rule} ({why})")
        return
    try:
        answer = run(program, self=value)
    except Exception as e:  # an absent field, a type the library sees otherwise: the apiserver may differ
        verdict.not_evaluated.append(f"{where}: {rule} (its evaluation failed here: {e})")
        return
    if not isinstance(answer, bool):
        verdict.not_evaluated.append(f"{where}: {rule} (it gave {type(answer).__name__}, not a bool, here)")
        return
    verdict.rules_evaluated += 1
    if answer:
        return
    if r.get("messageExpression") and not r.get("message"):
        message = f"failed rule: {rule}"  # the apiserver's fallback; the expression itself is not evaluated here
        verdict.not_evaluated.append(f"{where}: messageExpression {r['messageExpression']} (shown as the rule)")
    else:
        message = str(r.get("message") or f"failed rule: {rule}")
    at = path
    if r.get("fieldPath"):
        at = f"{path}{r['fieldPath']}" if path else str(r["fieldPath"]).lstrip(".")
    kind = _REASONS.get(str(r.get("reason", "")), INVALID)
    shown = value if isinstance(value, (str, int, float, bool)) and not r.get("fieldPath") else _omit()
    verdict.errors.append(FieldError(at or "<nil>", kind, shown, message))


def _omit() -> Any:
    return OMIT
