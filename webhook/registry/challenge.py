"""WWW-Authenticate challenges, parsed as distribution's client parses them.

Follows github.com/distribution/distribution/v3 internal/client/auth/challenge/authchallenge.go
(`parseAuthHeader`, `parseValueAndParams`): a scheme token, then comma-separated key=value
parameters whose values are tokens or quoted strings (backslash escapes). The scheme is compared
case-insensitively, parameter names are lowercased. The OCI distribution spec's token flow
("Bearer realm=…,service=…,scope=…") and Basic are the two schemes a registry answers with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: a header longer than this is not read (a registry's is under a few hundred bytes)
HEADER_MAX = 8192
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


@dataclass(frozen=True)
class Challenge:
    scheme: str  # lowercased: "bearer", "basic", ...
    params: dict[str, str] = field(default_factory=dict)


def _skip_space(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t":
        i += 1
    return i


def _token(s: str, i: int) -> tuple[str, int]:
    j = i
    while j < len(s) and s[j] in _TOKEN_CHARS:
        j += 1
    return s[i:j], j


def _quoted(s: str, i: int) -> tuple[str, int] | None:
    """A quoted string starting at s[i] == '"': its text and the index after the closing quote."""
    out: list[str] = []
    j = i + 1
    while j < len(s):
        c = s[j]
        if c == '"':
            return "".join(out), j + 1
        if c == "\\" and j + 1 < len(s):
            j += 1
            c = s[j]
        out.append(c)
        j += 1
    return None


def parse(header: str) -> list[Challenge]:
    """Every challenge of one WWW-Authenticate header value; a malformed tail is dropped."""
    if len(header) > HEADER_MAX:
        return []
    out: list[Challenge] = []
    i = 0
    s = header
    while True:
        i = _skip_space(s, i)
        scheme, i = _token(s, i)
        if not scheme:
            return out
        params: dict[str, str] = {}
        while True:
            i = _skip_space(s, i)
            start = i
            key, i = _token(s, i)
            if not key:
                break
            i = _skip_space(s, i)
            if i >= len(s) or s[i] != "=":
                i = start  # not a parameter: the next challenge's scheme
                break
            i = _skip_space(s, i + 1)
            if i < len(s) and s[i] == '"':
                q = _quoted(s, i)
                if q is None:
                    out.append(Challenge(scheme.lower(), params))
                    return out
                value, i = q
            else:
                value, i = _token(s, i)
            params[key.lower()] = value
            i = _skip_space(s, i)
            if i < len(s) and s[i] == ",":
                i += 1
                continue
            break
        out.append(Challenge(scheme.lower(), params))
        i = _skip_space(s, i)
        if i < len(s) and s[i] == ",":
            i += 1
        if i >= len(s):
            return out
