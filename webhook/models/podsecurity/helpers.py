"""What every check shares: the pod read as Go's encoding/json fills corev1.Pod (an absent, null or
wrongly typed field is the zero value / a nil pointer), `policy/visitor.go` (init containers,
containers, ephemeral containers, in that order), `policy/helpers.go` (`joinQuote`, `pluralize`,
`relaxPolicyForUserNamespacePod`), fmt's %q, and `policy/checks.go`'s CheckResult.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from webhook.objects import ObjectMeta, PodSpec

# ----------------------------------------------------------------------------- Go-like reads


def _d(x: Any) -> dict[str, Any] | None:
    """A pointer to a struct: None for absent, null or not an object."""
    return x if isinstance(x, dict) else None


def _l(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _s(x: Any) -> str:
    return x if isinstance(x, str) else ""


def _bp(x: Any) -> bool | None:
    """A *bool."""
    return x if isinstance(x, bool) else None


def _i(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else 0


def _ip(x: Any) -> int | None:
    """An *int64."""
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _sc(c: dict[str, Any]) -> dict[str, Any] | None:
    return _d(c.get("securityContext"))


def _containers(spec: Spec) -> Iterator[dict[str, Any]]:
    """policy/visitor.go visitContainers: init containers, containers, ephemeral containers."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in _l(spec.get(key)):
            yield c if isinstance(c, dict) else {}


def _name(c: dict[str, Any]) -> str:
    return _s(c.get("name"))


def join_quote(items: list[str]) -> str:
    """policy/helpers.go joinQuote."""
    return '"' + '", "'.join(items) + '"' if items else ""


def pluralize(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v"}


def go_quote(s: str) -> str:
    """fmt's %q of a string (strconv.Quote): Go escapes, printable runes kept."""
    out = ['"']
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():  # Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols, ASCII space
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


class Result(NamedTuple):
    """policy.CheckResult, with the id of the check that gave it."""

    check: str
    allowed: bool
    reason: str = ""
    detail: str = ""


_OK = Result("", True)

Meta = ObjectMeta
Spec = PodSpec
CheckFn = Callable[[Meta, Spec, bool], Result]


def _volumes(spec: Spec) -> Iterator[dict[str, Any]]:
    for vol in _l(spec.get("volumes")):
        yield vol if isinstance(vol, dict) else {}


def _annotations(meta: Meta) -> dict[str, str]:
    raw = _d(meta.get("annotations")) or {}
    return {str(k): val for k, val in raw.items() if isinstance(val, str)}


def _relax_userns(spec: Spec, relax: bool) -> bool:
    """helpers.go relaxPolicyForUserNamespacePod: hostUsers is false (v0.34.4: and the gate is on)."""
    return relax and _bp(spec.get("hostUsers")) is False


def relaxed_for_userns(check: CheckFn, *, gated: bool) -> CheckFn:
    """`check`, allowed outright for a pod with hostUsers: false (helpers.go relaxPolicyForUserNamespacePod).

    gated: the v0.34.4 form, relaxed only when the opt-in switch (`relax`) is on; otherwise the v0.35+
    form (runAsNonRoot1_35, runAsUser1_35, procMount1_35baseline), always relaxed.
    """

    def relaxed(meta: Meta, spec: Spec, relax: bool) -> Result:
        if _relax_userns(spec, relax if gated else True):
            return _OK
        return check(meta, spec, relax)

    return relaxed


def _windows(spec: Spec) -> bool:
    os_ = _d(spec.get("os"))
    return os_ is not None and _s(os_.get("name")) == "windows"
