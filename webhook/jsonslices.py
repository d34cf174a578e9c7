"""json.loads a slice at a time: the same document, no C call over more than WINDOW characters.

CPython's JSON decoder (Modules/_json.c, `scan_once_unicode`) reads a whole document in one C call
that holds the interpreter lock: 50-160 ms for the largest reviews (bench/large.py --stall: values-max,
784,000 numbers; records-deep, 216,000 dicts), and the event loop waits that long even when the decode
runs in a worker thread. :func:`loads_sliced` gives the same document from calls of the same C scanner
(`json.decoder.JSONDecoder.scan_once`) over slices of the text, with a few Python steps between them, at
which the interpreter hands the lock to the loop:

* a container that closes within a window (FIRST_WINDOW characters, then WINDOW) is read in one call on
  that window: a value the scanner reads to its closing bracket within a prefix of the text is the value it
  reads in the whole text;
* a longer one is read member by member, and its members in runs: the text from a member's start to a
  comma WINDOW/2 to WINDOW characters on, in brackets of the container's kind, is read in one call. The
  run is kept only when the call read exactly that text: a comma inside a string leaves the string open, a
  comma inside a nested container leaves it open, and a comma past the container's end closes it early;
  each of these is an error or a shorter read, and then 2, 4, 8, ... members are read one at a time
  before the next run. The comma looked for is one followed by what the first member starts with (`,{` in
  a list of maps), which a comma inside a member seldom is;
* anything else (a text the scanner refuses, more than MAX_STEPS steps, windows and runs read in vain
  for more than twice the text, a recursion too deep) ends in `json.loads` of the whole body: the same
  error, or the same document in one call as before.
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable
from typing import Any

#: the most characters one C call reads (~2 ms of the scanner on this machine)
WINDOW = 64 * 1024
#: a container is first tried in a window this short, so a small one costs a short copy
FIRST_WINDOW = 1024
#: the Python steps (a member, or a run of members) before the whole body is left to json.loads
MAX_STEPS = 50_000

#: the C scanner where CPython has it (json.scanner.c_make_scanner), and the C string reader (json.decoder)
_SCAN: Callable[[str, int], tuple[Any, int]] = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]
_STRING: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_WS = re.compile(r"[ \t\n\r]*")
#: the comma before a member starting as the first did: a string, a map, a list, a number, a literal
_NEXT = {
    '"': re.compile(r',[ \t\n\r]*"'),
    "{": re.compile(r",[ \t\n\r]*\{"),
    "[": re.compile(r",[ \t\n\r]*\["),
}
_ANY = re.compile(r",")


class _GiveUp(Exception):
    """More steps than MAX_STEPS: json.loads reads the body instead."""


def loads_sliced(
    body: bytes, *, window: int = WINDOW, first_window: int = FIRST_WINDOW, max_steps: int = MAX_STEPS
) -> Any:
    """json.loads(body), read a slice at a time (see the module). Raises what json.loads raises."""
    try:
        text = body.decode(json.detect_encoding(body), "surrogatepass")  # as json.loads decodes bytes
        return _Reader(text, window, first_window, max_steps).document()
    except (_GiveUp, ValueError, StopIteration, RecursionError, IndexError):
        return json.loads(body)


class _Reader:
    def __init__(self, s: str, window: int, first_window: int, max_steps: int, max_waste: float = 2.0) -> None:
        self.s, self.n = s, len(s)
        self.window, self.first_window = window, first_window
        self.steps = max_steps
        #: characters the scanner may still read in vain (windows too short, runs refused): twice the text
        self.waste = max_waste * self.n

    def wasted(self, chars: int) -> None:
        self.waste -= chars
        if self.waste < 0:
            raise _GiveUp

    def ws(self, i: int) -> int:
        return _WS.match(self.s, i).end()  # type: ignore[union-attr]  # `[...]*` always matches

    def document(self) -> Any:
        value, end = self.value(self.ws(0))
        if self.ws(end) != self.n:
            raise ValueError("extra data")
        return value

    def value(self, i: int) -> tuple[Any, int]:
        s = self.s
        c = s[i : i + 1]
        if c != "{" and c != "[":
            return _SCAN(s, i)  # a scalar: at most its own length
        for w in (self.first_window, self.window):
            if self.n - i <= w:
                return _SCAN(s, i)  # what is left fits one window
            try:
                v, e = _SCAN(s[i : i + w], 0)
                return v, i + e
            except (StopIteration, ValueError):
                self.wasted(w)  # longer than the window (or not JSON: found out below)
        return self.members(i, c)

    def members(self, i: int, opening: str) -> tuple[Any, int]:
        """The container opening at i, longer than a window: its members, in runs where they can be."""
        s = self.s
        closing = "}" if opening == "{" else "]"
        out: Any = {} if opening == "{" else []
        i = self.ws(i + 1)
        if s[i : i + 1] == closing:
            return out, i + 1
        nxt = _NEXT.get(s[i : i + 1], _ANY) if opening == "[" else _NEXT['"']
        refused = singles = 0  # runs refused in a row; members to read one by one before the next try
        while True:
            self.steps -= 1
            if self.steps < 0:
                raise _GiveUp
            run = None if singles else self.run(i, opening, closing, nxt)
            if run is not None:
                got, i = run
                if opening == "{":
                    out.update(got)
                else:
                    out.extend(got)
                refused = 0
                continue
            if singles:
                singles -= 1
            else:  # refused: back off, 2, 4, 8, ... members (where commas inside the members are common)
                refused += 1
                singles = 2 ** min(refused, 12)
            if opening == "{":
                if s[i : i + 1] != '"':
                    raise ValueError("expecting a property name")
                key, e = _STRING(s, i + 1)
                e = self.ws(e)
                if s[e : e + 1] != ":":
                    raise ValueError("expecting ':'")
                v, e = self.value(self.ws(e + 1))
                out[key] = v
            else:
                v, e = self.value(i)
                out.append(v)
            e = self.ws(e)
            c = s[e : e + 1]
            if c == ",":
                i = self.ws(e + 1)
            elif c == closing:
                return out, e + 1
            else:
                raise ValueError(f"expecting ',' or {closing!r}")

    def run(self, i: int, opening: str, closing: str, nxt: re.Pattern[str]) -> tuple[Any, int] | None:
        """(the members from i to a comma WINDOW/2 to WINDOW characters on, the start of the next), or None."""
        lo, hi = i + self.window // 2, min(i + self.window, self.n)
        if lo >= hi:
            return None
        m = nxt.search(self.s, lo, hi)
        if m is None:
            return None
        text = opening + self.s[i : m.start()] + closing
        try:
            got, e = _SCAN(text, 0)
        except (StopIteration, ValueError):
            got, e = None, -1
        if e != len(text):  # refused, or the container closed before the comma: the comma is past its end
            self.wasted(len(text))
            return None
        return got, self.ws(m.start() + 1)


__all__ = ["FIRST_WINDOW", "MAX_STEPS", "WINDOW", "loads_sliced"]
