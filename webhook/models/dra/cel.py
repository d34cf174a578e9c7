"""DRA device selectors in CEL: a documented subset, evaluated with the `cel` library.

Kubernetes evaluates a selector (a DeviceClass's or a request's `selectors[].cel.expression`)
against one device as k8s.io/dynamic-resource-allocation cel/compile.go DeviceMatches does:
the variable `device` holds `driver` (string), `attributes` and `capacity`, each a map from a
domain to a map from an attribute ID to its value. An attribute named without a domain is in the
driver's domain (parseQualifiedName). A domain the device does not have reads as an empty map
(newStringInterfaceMapWithDefault), so `"model" in device.attributes["other.example.com"]` is
false while `device.attributes["other.example.com"].model` is a runtime error ("no such key").

The `cel` package (common-expression-language, the Rust `cel` crate's bindings) has none of the
Kubernetes CEL libraries (quantity, semver, lists, regex extensions...). What it evaluates here, the
subset, is exactly:

- the variables `device.driver`, `device.attributes[...]` (string, int and bool attributes);
- literals, `==` `!=` `<` `<=` `>` `>=`, `&&` `||` `!`, `?:`, `in`, `has()`, `+ - * / %`, `[]`;
- the string functions `size`, `startsWith`, `endsWith`, `contains`, `matches`.

Anything else answers None, "cannot verify", and the check warns instead of judging: a function
outside the list (`quantity`, `semver`, `isGreaterThan`, `compareTo`, `lowerAscii`, macros such as
`exists`), any use of `device.capacity` (its values are Quantities) or of
`device.allowMultipleAllocations`, a version or list attribute the expression names, and a runtime
error (the allocator aborts the whole scheduling attempt with "CEL runtime error" then:
allocator_stable.go selectorsMatch, which this module never turns into a deny).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from webhook.celsubset import compile_within, run

__all__ = ["SUBSET_FUNCTIONS", "outside_subset", "device_matches", "device_vars", "reads", "matches_grouped"]

#: the functions (as the `cel` package names them) the subset allows
SUBSET_FUNCTIONS = frozenset(
    {
        "_&&_", "_||_", "!_", "_?_:_", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_",
        "@in", "_[_]", "_+_", "_-_", "_*_", "_/_", "_%_", "-_",
        "size", "startsWith", "endsWith", "contains", "matches", "has",
    }
)  # fmt: skip
_OUTSIDE_NAMES = re.compile(r"\b(capacity|allowMultipleAllocations)\b")
_STRING_LITERAL = re.compile(r"\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)'")


@lru_cache(maxsize=512)
def _compiled(expression: str) -> tuple[Any, str]:
    """(program, "") or (None, why it is outside the subset)."""
    if _OUTSIDE_NAMES.search(expression):
        return None, "it reads device capacity"
    got = compile_within(expression, SUBSET_FUNCTIONS)
    if got.unparsed:
        return None, "it does not parse here"
    if got.outside:
        return None, f"it calls {', '.join(got.outside)}"
    return got.program, ""


def outside_subset(expression: str) -> str:
    """Why `expression` cannot be evaluated here ("" when it can)."""
    return _compiled(expression)[1]


def _literals(expression: str) -> set[str]:
    return {a or b for a, b in _STRING_LITERAL.findall(expression)}


def device_vars(driver: str, attributes: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The `device.attributes` map of compile.go (domain → id → value) and the qualified names of the
    attributes the subset cannot hold (version and list values)."""
    out: dict[str, dict[str, Any]] = {}
    unheld: set[str] = set()
    for name, attr in attributes.items():
        domain, _, ident = name.rpartition("/")
        domain = domain or driver
        if not isinstance(attr, dict):
            continue
        for kind in ("string", "int", "bool"):
            if kind in attr:
                value = attr[kind]
                out.setdefault(domain, {})[ident] = int(value) if kind == "int" else value
                break
        else:
            unheld.add(ident)
    return out, unheld


def device_matches(expression: str, driver: str, attributes: dict[str, Any]) -> bool | None:
    """True/False as Kubernetes decides for a device of `driver` with `attributes` (the ResourceSlice's
    map), None when this cannot be known here (see the module docstring)."""
    program, why = _compiled(expression)
    if program is None:
        return None
    attrs, unheld = device_vars(driver, attributes)
    literals = _literals(expression)
    if unheld & literals or any(re.search(rf"\.{re.escape(u)}\b", expression) for u in unheld):
        return None
    for lit in literals:  # a domain the device lacks reads as an empty map (compile.go)
        attrs.setdefault(lit, {})
    try:
        result = run(program, device={"driver": driver, "attributes": attrs})
    except Exception:  # a runtime error: the allocator aborts the attempt, never a verdict here
        return None
    return result if isinstance(result, bool) else None


# ----------------------------------------------------------------------------- devices alike, judged once
#
# A cluster's 40,000 devices come in few kinds: a selector reads two or three attributes (type,
# productName), and the devices that agree on those get the same answer. `matches_grouped` keys the
# answer by (expression, driver, the attributes the expression names), so a review evaluates CEL
# once per kind of device instead of once per device (bench/scale.py --in-process; the tests compare
# it with `device_matches` on generated devices and selectors).

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEVICE = re.compile(r"\bdevice\b")
#: `device.driver`, or `device.attributes[<literal>]` followed by `.name` or `[`: one named attribute
_NAMED_USE = re.compile(r"""device\s*\.\s*(?:driver\b|attributes\s*\[\s*(?:"[^"\\]*"|'[^'\\]*')\s*\]\s*(?:\.|\[))""")
#: `<literal> in device.attributes[<literal>]`: whether one named attribute is there
#: (the literal begins an operand: `x + "a" in m` tests a computed key)
_IN_USE = re.compile(r"""(?:^|[(&|!?:,])\s*(?:"[^"\\]*"|'[^'\\]*')\s+in\s+$""")
_GROUPED: dict[tuple[str, str, tuple[Any, ...]], bool | None] = {}
#: answers kept at most (a review of the scale benchmark's cluster needs a few dozen)
GROUPED_MAX = 8192


@lru_cache(maxsize=512)
def reads(expression: str) -> frozenset[str] | None:
    """The words (identifiers and string literals) of an expression that reads device attributes only
    by name; None when it may read a whole domain map (`size(device.attributes[d])`, a map compared,
    a computed key) or spells a name with an escape, so that every attribute counts."""
    if "\\" in expression:
        return None
    for m in _DEVICE.finditer(expression):
        if _NAMED_USE.match(expression, m.start()):
            continue
        rest = re.match(r"""device\s*\.\s*attributes\s*\[\s*(?:"[^"\\]*"|'[^'\\]*')\s*\]""", expression[m.start() :])
        if rest and _IN_USE.search(expression[: m.start()]):
            continue
        return None
    return frozenset(_WORD.findall(expression)) | _literals(expression)


def _key(attributes: dict[str, Any], named: frozenset[str] | None) -> tuple[Any, ...] | None:
    out: list[Any] = []
    for name, attr in attributes.items():
        if named is not None and name.rpartition("/")[2] not in named and name not in named:
            continue
        if not isinstance(attr, dict):
            out.append((name, repr(attr)))
            continue
        out.append((name, tuple((k, v if isinstance(v, (str, int, bool)) else repr(v)) for k, v in attr.items())))
    return tuple(out)


def matches_grouped(expression: str, driver: str, attributes: dict[str, Any]) -> bool | None:
    """:func:`device_matches`, answered once for all devices of `driver` whose attributes named by the
    expression are the same (the expression cannot tell them apart)."""
    key = (expression, driver, _key(attributes, reads(expression)) or ())
    try:
        return _GROUPED[key]
    except KeyError:
        pass
    m = device_matches(expression, driver, attributes)
    if len(_GROUPED) >= GROUPED_MAX:
        _GROUPED.clear()
    _GROUPED[key] = m
    return m
