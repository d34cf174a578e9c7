"""Kubernetes resource quantities, parsed exactly (Decimal) with the apiserver's grammar.

Every check that adds, compares or prints CPU, memory or GPU amounts goes through this
module so that `0.5`, `500m` and `5e-1` are the same number everywhere, and sums are
exact (no float drift between what we say and what the apiserver computes).

Grammar (k8s.io/apimachinery/pkg/api/resource):

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedInteger> | "E" <signedInteger>
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

__all__ = [
    "parse_quantity",
    "format_quantity",
    "format_cpu",
    "format_memory",
    "parse_resources",
    "add",
    "sum",
    "scale",
    "container_resources",
    "pod_resources",
    "is_extended_resource",
]

_BINARY: dict[str, int] = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL: dict[str, int] = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

_QUANTITY = re.compile(
    r"""^(?P<sign>[+-])?
        (?P<number>[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)
        (?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)
          |[eE](?P<exp>[+-]?[0-9]+)
          |(?P<decimal>[numkMGTPE]?))$""",
    re.VERBOSE,
)

# resources Kubernetes itself understands; anything else with a domain is "extended"
_NATIVE = {"cpu", "memory", "ephemeral-storage", "storage", "pods"}


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """The exact value of a Kubernetes quantity. Raises ValueError naming the bad input.

    YAML numbers (`cpu: 2`, `cpu: 0.5`) are accepted as Kubernetes accepts them.
    """
    if isinstance(value, bool):
        raise ValueError(f"quantity {value!r} is a boolean, not a number")
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"quantity {value!r} is not finite")
        return value
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"quantity {value!r} is not finite")
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise ValueError(f"quantity {value!r} must be a string or a number, not {type(value).__name__}")
    return _parse_string(value)


@functools.lru_cache(maxsize=4096)
def _parse_string(value: str) -> Decimal:
    """parse_quantity of a string, memoized: every check re-reads the same few strings on every
    request ("500m", "2Gi"), and Decimal results are immutable. Errors are not cached (raised anew)."""
    m = _QUANTITY.match(value)
    if m is None:
        raise ValueError(f"quantity {value!r} does not match the Kubernetes quantity format (e.g. 500m, 2, 1.5Gi, 1e3)")
    try:
        number = Decimal(m.group("number"))
    except InvalidOperation:  # pragma: no cover - the regex already vetted it
        raise ValueError(f"quantity {value!r} has an invalid number") from None
    if m.group("sign") == "-":
        number = -number
    if m.group("binary"):
        return number * (Decimal(1024) ** _BINARY[m.group("binary")])
    if m.group("exp") is not None:
        exp = int(m.group("exp"))
        if abs(exp) > 1000:
            raise ValueError(f"quantity {value!r} has an exponent out of range")
        return number.scaleb(exp)
    return number.scaleb(_DECIMAL[m.group("decimal") or ""])


def _with_decimal_suffix(d: Decimal, allow_big: bool) -> str:
    """Shortest exact decimal-SI form: the largest suffix that keeps an integer."""
    if d == 0:
        return "0"
    order = ["E", "P", "T", "G", "M", "k", ""] if allow_big else [""]
    for suffix in order + ["m", "u", "n"]:
        scaled = d.scaleb(-_DECIMAL[suffix])
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    # finer than a nanounit: Kubernetes rounds up to 1n
    return f"{int(d.scaleb(9).to_integral_value(rounding=ROUND_CEILING))}n"


def format_cpu(d: Decimal) -> str:
    """CPU as kubectl shows it: whole cores ("4") or millicores ("3350m")."""
    if d == d.to_integral_value():
        return str(int(d))
    return _with_decimal_suffix(d, allow_big=False)


def format_memory(d: Decimal) -> str:
    """Bytes in the largest exact unit: binary first ("6Gi"), then decimal ("500M"), else bytes."""
    if d == 0:
        return "0"
    if d == d.to_integral_value():
        n = int(d)
        for suffix, power in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
            unit = 1024**power
            if n % unit == 0:
                return f"{n // unit}{suffix}"
        return _with_decimal_suffix(d, allow_big=True)
    return _with_decimal_suffix(d, allow_big=False)


def format_quantity(d: Decimal, resource: str = "") -> str:
    """A quantity in the form users write for `resource` (cpu → "3350m", memory → "6Gi")."""
    if resource == "cpu":
        return format_cpu(d)
    if resource in ("memory", "ephemeral-storage", "storage") or resource.startswith("hugepages-"):
        return format_memory(d)
    if d == d.to_integral_value():
        return str(int(d))
    return _with_decimal_suffix(d, allow_big=False)


def parse_resources(resources: Mapping[str, Any] | None) -> dict[str, Decimal]:
    """`{"cpu": "500m"}` → `{"cpu": Decimal("0.5")}`. Raises ValueError naming the resource."""
    out: dict[str, Decimal] = {}
    for name, raw in (resources or {}).items():
        try:
            out[str(name)] = parse_quantity(raw)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    return out


def add(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """Per-resource sum of two resource lists."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, Decimal(0)) + v
    return out


def sum(items: Iterable[Mapping[str, Decimal]]) -> dict[str, Decimal]:
    """Per-resource sum of many resource lists."""
    out: dict[str, Decimal] = {}
    for item in items:
        out = add(out, item)
    return out


def maximum(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """Per-resource maximum (how init containers combine with the app containers)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = max(out.get(k, v), v)
    return out


def scale(a: Mapping[str, Decimal], n: int | Decimal) -> dict[str, Decimal]:
    """Every resource multiplied by `n` (e.g. per-pod totals × pods)."""
    return {k: v * n for k, v in a.items()}


def container_resources(container: Mapping[str, Any], which: str = "requests") -> dict[str, Decimal]:
    """A container's requests or limits. Requests default to limits, as the apiserver defaults them."""
    res = container.get("resources") or {}
    limits = parse_resources(res.get("limits"))
    if which == "limits":
        return limits
    requests = parse_resources(res.get("requests"))
    for k, v in limits.items():
        requests.setdefault(k, v)
    return requests


def pod_resources(pod_spec: Mapping[str, Any], which: str = "requests") -> dict[str, Decimal]:
    """Per-pod effective requests or limits, with the scheduler's rule for init containers.

    effective = max(sum(app containers) + sum(sidecars), max over init containers of
    (init + sidecars started before it)) + overhead. Sidecars are init containers with
    restartPolicy Always. As k8s.io/component-helpers resource.PodRequests/PodLimits: the
    overhead is added to every request, but only to the limits that are set and non-zero.
    """
    app = sum(container_resources(c, which) for c in pod_spec.get("containers") or [])
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for c in pod_spec.get("initContainers") or []:
        r = container_resources(c, which)
        if c.get("restartPolicy") == "Always":
            sidecars = add(sidecars, r)
            init_peak = maximum(init_peak, sidecars)
        else:
            init_peak = maximum(init_peak, add(sidecars, r))
    total = maximum(add(app, sidecars), init_peak)
    overhead = parse_resources(pod_spec.get("overhead"))
    if not overhead:
        return total
    if which == "limits":  # component-helpers PodLimits: overhead only on limits that are set, non-zero
        return {k: v + overhead[k] if k in overhead and v != 0 else v for k, v in total.items()}
    return add(total, overhead)


@functools.lru_cache(maxsize=1024)  # asked for every resource of every container on every request
def is_extended_resource(name: str) -> bool:
    """nvidia.com/gpu, amd.com/gpu, … : names outside the kubernetes.io domain with a prefix."""
    if name in _NATIVE or name.startswith("hugepages-") or name.startswith("requests."):
        return False
    if "/" not in name:
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))
