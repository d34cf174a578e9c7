"""Reading manifests from a file or stdin for the CLI (`check`, `plan`).

Multi-document YAML or JSON (a JSON object, a JSON list, or a `kind: List`). Offline,
TrainingRuntime / ClusterTrainingRuntime documents in the same input stand in for the
cluster: `split_runtimes` turns them into the adapters' runtime lookup.
"""

from __future__ import annotations

import fnmatch
import io
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook._compat import LIBYAML, YamlEventParser
from webhook.apilimits import MAX_REQUEST_BODY_BYTES, SHOWN_PROBLEMS, metadata_problems
from webhook.workloads.base import RuntimeLookup
from webhook.workloads.walks import bounded_plain

# libyaml's parser and composer, when PyYAML was built with it; the pure-Python ones otherwise
_EventParser = YamlEventParser
_CSafeLoader: Any = yaml.CSafeLoader if LIBYAML else None

__all__ = [
    "load_documents",
    "split_runtimes",
    "RUNTIME_KINDS",
    "Located",
    "locate_file",
    "expand_paths",
    "walk_inputs",
    "Inputs",
    "is_manifest",
]

RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")

#: the most one object (a document, or an item of a List) may be as compact JSON: the apiserver reads no
#: larger request body (webhook.apilimits), so the webhook never sees a larger object
MAX_OBJECT_BYTES = MAX_REQUEST_BODY_BYTES

#: a document may expand (YAML aliases included) to at most this many values; the checks
#: themselves stop at objectLimits (10000 by default), this only keeps the loader itself bounded
MAX_EXPANDED_VALUES = 1_000_000


class _TooBig(ValueError):
    pass


def _children(n: yaml.Node) -> list[yaml.Node]:
    if isinstance(n, yaml.MappingNode):
        return [c for pair in n.value for c in pair]
    if isinstance(n, yaml.SequenceNode):
        return list(n.value)
    return []


def _distinct_nodes(node: yaml.Node) -> int:
    """Nodes in the graph under `node`, each once (as written: an alias adds none)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.extend(_children(n))
    return len(seen)


def _expanded_size(node: yaml.Node, limit: int) -> int:
    """Values in `node` as constructed, aliases expanded, counted over the node graph (each
    distinct node once), so a billion laughs is measured without being expanded. Over `limit`, the
    message says what the document holds: YAML aliases are blamed only when the values written
    out are within the limit and their expansion is not."""
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        n, done = stack.pop()
        key = id(n)
        if key in size:
            continue
        children = _children(n)
        if done:
            open_.discard(key)
            size[key] = total = 1 + sum(size[id(c)] for c in children)
            if total > limit:
                written = _distinct_nodes(node)
                if written > limit:
                    raise _TooBig(
                        f"it holds more than {limit} values (keys, values and list items), more than "
                        "preflight-webhook reads in one document. Fix: split it into smaller objects"
                    )
                raise _TooBig(
                    f"YAML aliases expand it to more than {limit} values ({written} written out). Fix: write the "
                    "repeated values with fewer aliases"
                )
            continue
        open_.add(key)
        stack.append((n, True))
        for c in children:
            if id(c) in open_:
                raise _TooBig("YAML aliases expand it to a recursive alias (a value that contains itself)")
            if id(c) not in size:
                stack.append((c, False))
    return size[id(node)]


class _BoundedLoader(yaml.SafeLoader):
    """yaml.SafeLoader that measures each document before constructing it (alias expansion bounded)."""

    def compose_document(self) -> yaml.Node | None:
        node = super().compose_document()
        if node is not None:
            _expanded_size(node, MAX_EXPANDED_VALUES)
        return node


_FastLoader: Any = None
if _CSafeLoader is not None:

    class _BoundedCLoader(_CSafeLoader):  # type: ignore[misc]
        """The same on libyaml's composer (its marks count the loader's text from 0)."""

        def get_node(self) -> yaml.Node | None:
            node: yaml.Node | None = super().get_node()
            if node is not None:
                _expanded_size(node, MAX_EXPANDED_VALUES)
            return node

    _FastLoader = _BoundedCLoader


@dataclass(frozen=True)
class Located:
    """One Kubernetes object read from a file (or the reason a document could not be read), with
    where it starts: the file as named on the command line, and the 1-based line of the document's
    first node (the line after its `---`), so CI output (SARIF, annotations) can point at it."""

    source: str
    line: int
    obj: dict[str, Any] | None = None
    #: why this document (or, from `line` on, the rest of the file) could not be read
    error: str | None = None
    #: the 1-based number of the document in its file (the items of a `kind: List` share their document's);
    #: 0 when the error is the file's as a whole
    document: int = field(default=0, compare=False)
    #: the error is that the document is not a Kubernetes object (no apiVersion and kind, not a mapping, an
    #: empty input): a file found in a directory whose every document is so is not a manifest (NOT_OBJECT)
    not_object: bool = field(default=False, compare=False)


def _line(node: yaml.Node | None, default: int, offset: int = 0) -> int:
    return node.start_mark.line + 1 + offset if node is not None else default


def _items_node(node: yaml.Node | None) -> yaml.Node | None:
    """The `items:` sequence node of a `kind: List` mapping node."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "items":
                return value
    return None


def _size_text(n: int) -> str:
    """3 MiB, 256 KiB, or bytes."""
    if n % 2**20 == 0:
        return f"{n >> 20} MiB"
    return f"{n >> 10} KiB" if n % 2**10 == 0 else f"{n:,} bytes"


def _where(source: str, index: int, line: int) -> str:
    return f"{source}: document {index + 1} (line {line})"


def _over_text(source: str, index: int, line: int, measured: str, passed: str = "", aliased: bool = False) -> str:
    """The refusal of an object the apiserver would not read (its request body limit)."""
    aliases = "; every YAML alias is sent as a whole copy of its anchor" if aliased else ""
    return (
        f"{_where(source, index, line)} is refused: {measured}, over the {_size_text(MAX_OBJECT_BYTES)} "
        f"({MAX_OBJECT_BYTES:,} bytes) the apiserver reads of a request body (k8s.io/apiserver MaxRequestBodyBytes), "
        f"so it would answer 413 Request Entity Too Large before any webhook sees the object{passed}. Fix: remove "
        f"what the job does not need (inline data belongs in a ConfigMap, a volume or a URL){aliases}"
    )


def _metadata_text(source: str, index: int, line: int, problems: list[str]) -> str:
    """The refusal of an object whose labels or annotations the apiserver's ObjectMeta validation refuses."""
    shown = "; ".join(problems[:SHOWN_PROBLEMS])
    more = f" (and {len(problems) - SHOWN_PROBLEMS} more)" if len(problems) > SHOWN_PROBLEMS else ""
    fixes = []
    if any(p.startswith("metadata.labels") for p in problems):
        fixes.append(
            "a label key is an optional DNS subdomain prefix and '/' then a name of at most 63 characters, "
            "a label value at most 63 characters (alphanumerics, '-', '_' and '.')"
        )
    if any("Too long" in p for p in problems):
        fixes.append("keep large data out of annotations (a ConfigMap, a volume or a URL)")
    elif any(p.startswith("metadata.annotations key") for p in problems):
        fixes.append("an annotation key is written as a label key")
    return (
        f"{_where(source, index, line)} is refused: the apiserver validates metadata before any webhook sees the "
        f"object, and would refuse {shown}{more}. Fix: {'; '.join(fixes)}"
    )


def _object_problem(obj: dict[str, Any], source: str, index: int, line: int) -> str | None:
    """Why the apiserver would refuse `obj` before any webhook sees it (body size, labels, annotations)."""
    size, _ = bounded_plain(obj, max_bytes=MAX_OBJECT_BYTES)
    if size is not None:
        return _over_text(source, index, line, f"it is {size:,} bytes as JSON")
    problems = metadata_problems(obj)
    return _metadata_text(source, index, line, problems) if problems else None


def _flatten(
    doc: Any, source: str, index: int, node: yaml.Node | None = None, line: int = 1, offset: int = 0
) -> list[Located]:
    """The objects of a document (a list's items, a List's items), each with its line: its node's line
    plus `offset` (the lines before the loader's text), or `line`."""
    line = _line(node, line, offset)
    if isinstance(doc, list):
        children = node.value if isinstance(node, yaml.SequenceNode) else [None] * len(doc)
        out: list[Located] = []
        for item, child in zip(doc, children):
            out += _flatten(item, source, index, child, line, offset)
        return out
    if not isinstance(doc, dict):
        return [
            Located(
                source,
                line,
                error=f"{source}: document {index + 1} is a {type(doc).__name__}, not a Kubernetes object "
                "(a mapping with apiVersion and kind)",
                document=index + 1,
                not_object=True,
            )
        ]
    if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        return _flatten(doc["items"], source, index, _items_node(node), line, offset)
    if not isinstance(doc.get("apiVersion"), str) or not isinstance(doc.get("kind"), str):
        missing = [k for k in ("apiVersion", "kind") if not isinstance(doc.get(k), str)]
        return [
            Located(
                source,
                line,
                error=f"{source}: document {index + 1} has no {' and no '.join(missing)}",
                document=index + 1,
                not_object=True,
            )
        ]
    problem = _object_problem(doc, source, index, line)
    if problem is not None:
        return [Located(source, line, error=problem, document=index + 1)]
    return [Located(source, line, doc, document=index + 1)]


# --------------------------------------------------------------------------- reading the input, line by line


class _Undecodable(ValueError):
    def __init__(self, message: str, at: int) -> None:
        super().__init__(message)
        #: where in the line (bytes) decoding failed
        self.at = at


def _breaks(raw: bytes) -> int:
    """Line breaks in `raw` as YAML counts them (the loader's line numbers): LF, CR LF, CR, NEL, LS, PS."""
    n = raw.count(b"\n") + raw.count(b"\r") - raw.count(b"\r\n")
    if not raw.isascii():
        n += raw.count(b"\xc2\x85") + raw.count(b"\xe2\x80\xa8") + raw.count(b"\xe2\x80\xa9")
    return n


def _decode(raw: bytes, offset: int) -> str:
    """A line as text, newlines as Python's text files read them (CR LF and CR as LF)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Undecodable(f"not UTF-8 text ({exc.reason} at byte {offset + exc.start})", exc.start) from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


#: bytes read from the input at a time
_CHUNK = 1 << 20
#: where a line may start that separates documents (`---`, `...`, a directive): what skipping looks for
_CANDIDATES = (b"\n---", b"\n...", b"\n%")


class _Lines:
    """The input's raw lines, one at a time, read in chunks, with the line number (as YAML counts) and
    byte offset of the next one; only the lines a document needs are decoded, and `skip` passes over
    the lines of a refused document without looking at each."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self._read = read
        self._buf = b""
        self._pos = 0
        self._eof = False
        #: YAML lines before the next line (the loader's 0-based line number of its first character)
        self.line = 0
        self.offset = 0

    @classmethod
    def of_text(cls, text: str) -> _Lines:
        return cls(io.BytesIO(text.encode("utf-8", "surrogatepass")).read)

    def _fill(self) -> bool:
        """Read another chunk; False at the end of the input."""
        if self._eof:
            return False
        more = self._read(_CHUNK)
        if not more:
            self._eof = True
            return False
        self._buf = self._buf[self._pos :] + more
        self._pos = 0
        return True

    def _end(self, start: int) -> int | None:
        """Where the line starting at `start` ends (after its newline); None when there is none."""
        while True:
            nl = self._buf.find(b"\n", start)
            if nl >= 0:
                return nl + 1
            shift = self._pos
            if not self._fill():
                return len(self._buf) if start < len(self._buf) else None
            start -= shift

    def peek(self, i: int = 0) -> bytes | None:
        """The line `i` lines ahead (0: the next), not taken; None past the end."""
        rel = prev = 0  # relative to the next line: reading more shifts the buffer
        for _ in range(i + 1):
            end = self._end(self._pos + rel)
            if end is None:
                return None
            prev, rel = rel, end - self._pos
        return self._buf[self._pos + prev : self._pos + rel]

    def take(self) -> tuple[bytes, int]:
        """(the next line, its byte offset); call after peek() answered a line."""
        end = self._end(self._pos)
        assert end is not None
        raw = self._buf[self._pos : end]
        self._pos = end
        offset = self.offset
        self.line += _breaks(raw)
        self.offset += len(raw)
        return raw, offset

    def run(self, limit: int) -> tuple[bytes, int] | None:
        """(whole lines from the next one, about `limit` bytes, none of which could separate documents; their
        byte offset), taken; None when the next line may be one (the caller looks at it line by line)."""
        if self._pos >= len(self._buf) and not self._fill():
            return None
        if self._buf[self._pos : self._pos + 1] in (b"-", b".", b"%"):
            return None
        cap = self._pos + limit
        hits = [h for h in (self._buf.find(c, self._pos, cap) for c in _CANDIDATES) if h >= 0]
        stop: int | None
        if hits:
            stop = min(hits) + 1
        else:
            last = self._buf.rfind(b"\n", self._pos, cap)
            stop = last + 1 if last >= 0 else self._end(self._pos)
        if stop is None:
            return None
        raw = self._buf[self._pos : stop]
        offset = self.offset
        self._pos = stop
        self.line += _breaks(raw)
        self.offset += len(raw)
        return raw, offset

    def skip(self) -> None:
        """Pass over lines up to the next one that could separate documents (`---`, `...` or `%` at
        column 0), counting their line breaks, without splitting them."""
        while True:
            if self._pos >= len(self._buf) and not self._fill():
                return
            if self._buf[self._pos : self._pos + 1] in (b"-", b".", b"%"):
                return  # the next line itself may be one: the caller looks at it
            hits = [h for h in (self._buf.find(c, self._pos) for c in _CANDIDATES) if h >= 0]
            if hits:
                stop = min(hits) + 1
            else:  # keep the last (partial) line: a candidate may start in the next chunk
                last = self._buf.rfind(b"\n", self._pos)
                stop = last + 1 if last >= 0 else self._pos
            self.line += _breaks(self._buf[self._pos : stop])
            self.offset += stop - self._pos
            self._pos = stop
            if hits or not self._fill():
                return

    def starts_json(self) -> bool:
        """The input's first character that is not white space is `{` or `[` (read as JSON first)."""
        i = 0
        while (raw := self.peek(i)) is not None:
            try:
                head = _decode(raw, 0).lstrip()
            except _Undecodable:
                return False
            if head:
                return head.startswith(("{", "["))
            i += 1
        return False

    def rest_or_none(self) -> str | None:
        """`rest`, or None when the input stops being UTF-8 (nothing more is read then)."""
        try:
            return self.rest()
        except _Undecodable:
            return None

    def rest(self) -> str:
        """Every remaining line, as one text (JSON is parsed whole)."""
        parts = []
        while self.peek() is not None:
            raw, offset = self.take()
            parts.append(_decode(raw, offset))
        return "".join(parts)


def _marker(raw: bytes, marker: bytes) -> bool:
    """`raw` is a document marker line (`---` or `...` at column 0, then white space or the end)."""
    return raw.startswith(marker) and raw[3:4] in (b"", b" ", b"\t", b"\r", b"\n")


class _Piece:
    """One YAML document's lines, read on demand: from the input's current line up to the next line that
    starts a document once this one has begun (`---` at column 0, or a directive after its `...`). YAML
    forbids a `---` or `...` line inside any scalar (c-forbidden, YAML 1.2 section 9.1.4), so such a line
    always separates documents: each piece is measured and read on its own, and one the apiserver would
    refuse is passed over in chunks, never parsed whole. (A piece that YAML cannot read alone is read
    again with the rest of the input, as one stream: `_yaml_located`.) What the measure has read is kept
    for the loader (`text`) until `drop`. `read` is the file-like face the YAML parser pulls lines through."""

    name = "<document>"

    def __init__(self, lines: _Lines) -> None:
        self._lines = lines
        #: the loader's 0-based line number of the piece's first line
        self.start = lines.line
        self._parts: list[str] = []
        self._keep = True
        self._begun = False
        self._ended = False
        self._done = False
        #: the input stopped being UTF-8 here (the message); the piece ends there
        self.error: str | None = None
        self.error_line = 0

    def _next(self) -> tuple[bytes, int] | None:
        if self._done:
            return None
        raw = self._lines.peek()
        doc_start = raw is not None and _marker(raw, b"---")
        directive = raw is not None and raw.startswith(b"%")
        if raw is None or (self._begun and doc_start) or (self._ended and directive):
            self._done = True
            return None
        if _marker(raw, b"..."):
            self._ended = self._begun
        elif doc_start or (not directive and raw.strip() and not raw.lstrip().startswith(b"#")):
            self._begun = True
        return self._lines.take()

    def read(self, size: int = -1) -> str:
        line = self._lines.line
        got = self._lines.run(max(size, 4096)) if self._begun and not self._done else None
        if got is None:
            got = self._next()
        if got is None:
            return ""
        try:
            text = _decode(*got)
        except _Undecodable as exc:
            self.error, self.error_line, self._done = str(exc), line + _breaks(got[0][: exc.at]) + 1, True
            return ""
        if self._keep:
            self._parts.append(text)
        return text

    def drain(self) -> None:
        """Read to the piece's end (kept unless dropped; a dropped piece is not even decoded, and its
        lines are passed over in chunks up to the next that could end it)."""
        while True:
            if self._keep:
                if not self.read() and (self._done or self.error):
                    return
            elif self._next() is None:
                return
            else:
                self._lines.skip()

    def drop(self) -> None:
        self._keep = False
        self._parts = []

    def text(self) -> str:
        return "".join(self._parts)


# --------------------------------------------------------------------------- measuring before loading

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
#: a plain scalar's smallest JSON, by the tag YAML resolves it to (a number: 1 digit)
_PLAIN_BYTES = {"tag:yaml.org,2002:null": 4, "tag:yaml.org,2002:bool": 4, "tag:yaml.org,2002:timestamp": 12}
_RESOLVER = yaml.resolver.Resolver()
#: the first characters of the plain scalars YAML may resolve to something else than a string
_IMPLICIT_FIRST = frozenset(k for k in yaml.resolver.Resolver.yaml_implicit_resolvers if k)
_SCALAR, _ALIAS = yaml.ScalarEvent, yaml.AliasEvent
_START_MAP, _START_SEQ = yaml.MappingStartEvent, yaml.SequenceStartEvent
_END_MAP, _END_SEQ, _END_DOC = yaml.MappingEndEvent, yaml.SequenceEndEvent, yaml.DocumentEndEvent
_SIMPLE_KEY = re.compile(r"[A-Za-z0-9_./-]{1,63}")


class _Unmeasurable(Exception):
    """The parser met what the loader will name better (an undefined alias): no verdict from the measure."""


@dataclass
class _Refusal:
    """A document (or a List's item) more than MAX_OBJECT_BYTES as JSON, found before loading it."""

    doc: int  # documents of the piece before this one
    line: int  # 1-based line where the refused object starts
    passed: int  # 1-based line where the measure passed the limit
    where: str  # `entry 150,001 of metadata.labels`
    aliased: bool
    recursive: bool = False


class _Frame:
    """An open mapping or list while measuring: where it began (`total` then), its anchor, its entries so
    far and the current key (for the path in the message), whether a `<<` value is next or is this one
    (`hides`: merged keys are not counted), and whether it is a List's `items` (its items are units)."""

    __slots__ = ("is_map", "start", "anchor", "n", "key", "want_key", "merge", "hides", "items")

    def __init__(self, is_map: bool, start: int, anchor: str | None, hides: bool, items: bool) -> None:
        self.is_map = is_map
        self.start = start
        self.anchor = anchor
        self.n = 0
        self.key: str | int | None = None
        self.want_key = True
        self.merge = False
        self.hides = hides
        self.items = items


class _Doc:
    """One document's state while measuring: bytes so far (merged content not counted), the depth of `<<`
    values being read (not counted), the current item (`unit_start`: `total` when it began, -1: not in one),
    the bytes of the items already read, the root (line, a mapping?, its kind; `whole`: one object, not a
    List), whether an alias counted, each anchor's size and the anchors still open, the open frames."""

    __slots__ = (
        "total", "hidden", "unit_start", "unit_line", "items_done", "whole", "top_kind",
        "root_line", "root_map", "aliased", "anchors", "open_anchors", "stack",
    )  # fmt: skip

    def __init__(self) -> None:
        self.total = 0
        self.hidden = 0
        self.unit_start = -1
        self.unit_line = 0
        self.items_done = 0
        self.whole = False
        self.top_kind: str | None = None
        self.root_line = 0
        self.root_map = False
        self.aliased = False
        self.anchors: dict[str, int] = {}
        self.open_anchors: set[str] = set()
        self.stack: list[_Frame] = []


def _scalar_bytes(ev: Any) -> tuple[int, bool]:
    """(the least the scalar takes as compact JSON, whether it is a merge key `<<`)."""
    value: str = ev.value
    tag = ev.tag
    if tag is None and not ev.style and ev.implicit[0] and (not value or value[0] in _IMPLICIT_FIRST):
        tag = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
        if tag == _MERGE_TAG:
            return 0, True
    if tag is not None and tag != "!" and tag != _STR_TAG:
        return _PLAIN_BYTES.get(tag, 1), False
    n = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    return n + 2 + value.count('"') + value.count("\\") + value.count("\n"), False


def _line_of(ev: Any) -> int:
    """The 0-based line where a parser event starts."""
    return int(ev.start_mark.line)


def _key_text(key: str | int | None) -> str:
    if isinstance(key, int):
        return f"[{key}]"
    if key is None:
        return "?"
    return key if _SIMPLE_KEY.fullmatch(key) else repr(key if len(key) <= 40 else key[:40] + "...")


class _Meter:
    """Bytes of each document of a piece as compact JSON, counted from the parser's events (no node, no
    object is built), up to the limit: a lower bound (a number counts 1, a merged mapping 0, escapes
    only for quotes, backslashes and newlines), so an object found over it is over it for sure. YAML
    aliases count as what they expand to (each anchor's size is kept), as the apiserver would receive
    them. The units are what kubectl sends one by one: the document, or each item of a top-level list
    or of a `kind: List`'s `items`. A key written twice in a mapping counts twice (YAML keeps the last):
    the bound holds for documents without duplicate keys."""

    def __init__(self, limit: int, offset: int) -> None:
        self.limit = limit
        self.offset = offset

    def run(self, parser: Any) -> _Refusal | None:
        doc = -1
        while True:
            ev = parser.get_event()
            if ev is None or isinstance(ev, yaml.StreamEndEvent):
                return None
            if isinstance(ev, yaml.DocumentStartEvent):
                doc += 1
                refusal = self._document(parser, doc)
                if refusal is not None:
                    return refusal

    def _document(self, parser: Any, doc: int) -> _Refusal | None:
        """The refusal of document `doc` (the first unit found over the limit), or None: each event closes a
        node (`_close`), ends the document, or is a node placed (`_place`), sized (`_size`) and counted (`_count`)."""
        st = _Doc()
        get = parser.get_event
        while True:
            ev: Any = get()
            cls = ev.__class__
            if cls is _END_MAP or cls is _END_SEQ:
                self._close(st)
                continue
            if cls is _END_DOC:
                if st.root_map and st.top_kind != "List" and st.total > self.limit:
                    return self._refusal(doc, st.root_line, ev, st.stack, st.aliased)
                return None
            parent, sep, hide, is_key = self._place(st, ev)
            if cls is _ALIAS and ev.anchor in st.open_anchors:
                return self._refusal(doc, st.root_line, ev, st.stack, st.aliased, recursive=True)
            size, merge, opens = self._size(st, ev, cls)
            if is_key:
                assert parent is not None
                if merge:
                    parent.merge = True
                    continue
                sep = 2 if parent.n else 1  # `,` and `:`
                parent.n += 1
                parent.key = ev.value if cls is _SCALAR else None
            elif parent is not None and len(st.stack) == 1 and parent.key == "kind" and cls is _SCALAR:
                st.top_kind = ev.value
                st.whole = st.root_map and st.top_kind != "List"
            refusal = self._count(st, doc, ev, cls, parent, sep, size, hide=hide, opens=opens)
            if refusal is not None:
                return refusal

    def _close(self, st: _Doc) -> None:
        """A mapping or list ends: its anchor's size is known, a `<<` value ends, an item ends."""
        frame = st.stack.pop()
        if frame.anchor is not None:
            st.anchors[frame.anchor] = st.total - frame.start
            st.open_anchors.discard(frame.anchor)
        if frame.hides:
            st.hidden -= 1
        if st.unit_start >= 0 and self._is_unit(st.stack, st.root_map):
            st.items_done += st.total - st.unit_start
            st.unit_start = -1

    @staticmethod
    def _place(st: _Doc, ev: Any) -> tuple[_Frame | None, int, bool, bool]:
        """Where a node sits in its parent: (the parent, its separator's bytes, whether it is a `<<` value (not
        counted), whether it is a key); the root's line is kept."""
        if not st.stack:
            st.root_line = _line_of(ev)
            return None, 0, False, False
        parent = st.stack[-1]
        if not parent.is_map:
            sep = 1 if parent.n else 0
            parent.key = parent.n
            parent.n += 1
            return parent, sep, False, False
        if parent.want_key:
            parent.want_key = False
            return parent, 0, False, True
        parent.want_key = True
        if parent.merge:
            parent.merge = False
            return parent, 0, True, False
        return parent, 0, False, False

    @staticmethod
    def _size(st: _Doc, ev: Any, cls: Any) -> tuple[int, bool, bool]:
        """(the node's bytes, whether it is a merge key `<<`, whether it opens a mapping or a list); an alias
        counts as what its anchor expands to (_Unmeasurable: an anchor not seen)."""
        if cls is _SCALAR:
            size, merge = _scalar_bytes(ev)
            if ev.anchor is not None:
                st.anchors[ev.anchor] = size
            return size, merge, False
        if cls is _ALIAS:
            if ev.anchor not in st.anchors:
                raise _Unmeasurable()
            size = st.anchors[ev.anchor]
            st.aliased = st.aliased or size > 0
            return size, False, False
        return 2, False, True  # a mapping or a list opens

    def _count(
        self,
        st: _Doc,
        doc: int,
        ev: Any,
        cls: Any,
        parent: _Frame | None,
        sep: int,
        size: int,
        *,
        hide: bool,
        opens: bool,
    ) -> _Refusal | None:
        """Count a placed node's bytes (a scalar item is its own unit; a mapping or list opens its frame), then
        the checks: the current item, the rest of the document, the whole (not a List)."""
        limit = self.limit
        if not opens and not st.hidden and not hide and self._is_unit(st.stack, st.root_map):
            # an item that is a scalar or an alias (a list of the same anchored object): its own unit
            st.total += sep + size
            st.items_done += sep + size
            return self._refusal(doc, _line_of(ev), ev, st.stack, st.aliased) if size > limit else None
        if opens:
            self._open(st, ev, cls, parent, sep, hide)
            sep = 0
        elif hide:
            return None
        if st.hidden:
            return None
        st.total += sep + size
        if st.unit_start >= 0:
            if st.total - st.unit_start > limit:
                return self._refusal(doc, st.unit_line, ev, st.stack, st.aliased)
            outside = st.unit_start - st.items_done
        else:
            outside = st.total - st.items_done
        if outside > limit or (st.whole and st.total > limit):
            return self._refusal(doc, st.root_line, ev, st.stack, st.aliased)
        return None

    def _open(self, st: _Doc, ev: Any, cls: Any, parent: _Frame | None, sep: int, hide: bool) -> None:
        """A mapping or list opens: the root's type, a `<<` value begins, an item begins, its frame."""
        if parent is None:
            st.root_map = cls is _START_MAP
        if hide:
            st.hidden += 1
        if not st.hidden:
            st.total += sep
            if self._is_unit(st.stack, st.root_map):
                st.unit_start, st.unit_line = st.total, _line_of(ev)
        items = (
            parent is not None and len(st.stack) == 1 and st.root_map and parent.key == "items" and cls is _START_SEQ
        )
        st.stack.append(_Frame(cls is _START_MAP, st.total, ev.anchor, hide, items))
        if ev.anchor is not None:
            st.open_anchors.add(ev.anchor)

    @staticmethod
    def _is_unit(stack: list[_Frame], root_map: bool) -> bool:
        """A node opening (or closing) at this depth is an item kubectl sends on its own."""
        if len(stack) == 1 and not stack[0].is_map:
            return True
        return len(stack) == 2 and root_map and stack[1].items

    def _refusal(
        self, doc: int, line: int, ev: Any, stack: list[_Frame], aliased: bool, recursive: bool = False
    ) -> _Refusal:
        if stack:
            inner = stack[-1]
            path = "".join(
                (_key_text(f.key) if isinstance(f.key, int) or i == 0 else "." + _key_text(f.key))
                for i, f in enumerate(stack[:-1])
            )
            where = f"entry {inner.n:,} of {path or 'the document'}"
        else:
            where = "in its single value"
        return _Refusal(doc, line + self.offset + 1, _line_of(ev) + self.offset + 1, where, aliased, recursive)


def _measure(piece: _Piece, limit: int) -> _Refusal | None:
    """The piece's first document over `limit` as JSON, found from the parser's events as the piece's
    lines are read; None when none is (or the YAML is invalid: the loader says why, in its words)."""
    parser = _EventParser(piece)
    try:
        return _Meter(limit, piece.start).run(parser)
    except (yaml.YAMLError, _Unmeasurable, RecursionError):
        return None
    finally:
        parser.dispose()


def _refused_text(source: str, index: int, r: _Refusal) -> str:
    where = _where(source, index, r.line)
    if r.recursive:
        return (
            f"{where} is refused: a YAML alias at line {r.passed} refers to a value that contains it (a recursive "
            "alias), which has no JSON form. Fix: write the value out, or alias a value that is complete"
        )
    measured = f"it is more than {_size_text(MAX_OBJECT_BYTES)} as JSON" + (
        " once its YAML aliases are expanded" if r.aliased else ""
    )
    return _over_text(
        source, index, r.line, measured, f"; the limit is passed at line {r.passed}, {r.where}", r.aliased
    )


# --------------------------------------------------------------------------- loading


def _compose(
    text: str, offset: int, source: str, index: int, max_docs: int | None = None
) -> tuple[list[Located], int, str | None]:
    """(the objects of a piece's text, the document count after it, why reading must stop there: a
    document YAML cannot read ends the stream, with a Located error at the line where reading stopped:
    `yaml` for invalid YAML, `bound` for a bound of the loader's; None to go on).

    libyaml's composer reads it when PyYAML has it (several times faster); when it finds the text invalid,
    PyYAML's own reads it again, so the message and its line are PyYAML's as they always were."""
    if _FastLoader is not None and _libyaml_reads_alike(text):
        fast = _fast_load(text, offset, source, index, max_docs)
        if fast is not None:
            return fast
    loader = _BoundedLoader(text)
    loader.line = offset  # the piece's lines are numbered as in the whole input
    try:
        return _load(loader, offset, source, index, max_docs)
    finally:
        loader.dispose()


#: line breaks PyYAML counts and libyaml does not always
_UNICODE_BREAKS = ("\x85", "\u2028", "\u2029")


def _libyaml_reads_alike(text: str) -> bool:
    """No construct where libyaml and PyYAML are known to differ (found by comparing them on random
    multi-document input): a tab (libyaml accepts one where PyYAML wants a space, after `:`, `,` or
    `---`), Unicode line breaks."""
    if "\t" in text:
        return False
    return text.isascii() or not any(b in text for b in _UNICODE_BREAKS)


def _fast_load(
    text: str, offset: int, source: str, index: int, max_docs: int | None
) -> tuple[list[Located], int, None] | None:
    """_compose on libyaml's composer: None when it cannot read the text, or the loader's bound is met (then
    PyYAML's own loader reads it again, for its messages and lines)."""
    out: list[Located] = []
    loader = _FastLoader(text)
    read = 0
    try:
        while max_docs is None or read < max_docs:
            if not loader.check_node():  # (its peek_event cannot be mixed with its composer)
                break
            node = loader.get_node()
            doc = loader.construct_document(node) if node is not None else None
            if doc is not None:
                out += _flatten(doc, source, index, node, offset=offset)
            index += 1
            read += 1
    except Exception:  # invalid YAML (libyaml's composer may fail with an UnboundLocalError), a bound
        return None
    finally:
        loader.dispose()
    return out, index, None


def _load(
    loader: _BoundedLoader, offset: int, source: str, index: int, max_docs: int | None
) -> tuple[list[Located], int, str | None]:
    """_compose with PyYAML's loader, its marks counting from the piece's first line (`offset`)."""
    out: list[Located] = []
    read = 0
    while max_docs is None or read < max_docs:
        line = offset + 1
        try:
            if not loader.check_node():
                break
            line = loader.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
            node = loader.get_node()
            doc = loader.construct_document(node) if node is not None else None
        except _TooBig as exc:
            out.append(
                Located(source, line, error=f"{source}: document {index + 1} is refused: {exc}", document=index + 1)
            )
            return out, index + 1, "bound"
        except RecursionError:
            out.append(
                Located(
                    source,
                    line,
                    error=f"{source}: document {index + 1} is nested too deeply to read "
                    "(more levels than Python's recursion limit)",
                    document=index + 1,
                )
            )
            return out, index + 1, "bound"
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            out.append(
                Located(
                    source,
                    mark.line + 1 if mark is not None else line,
                    error=f"{source}: document {index + 1} is not valid YAML{where}: {problem}",
                    document=index + 1,
                )
            )
            return out, index + 1, "yaml"
        if doc is not None:  # an empty document between `---` separators
            out += _flatten(doc, source, index, node)
        index += 1
        read += 1
    return out, index, None


def _yaml_located(lines: _Lines, source: str) -> list[Located]:
    """The documents of a YAML stream, each with its line, read one piece (document) at a time: each is
    measured from the parser's events first, and one over the apiserver's request limit is refused
    without being loaded; an unreadable document ends the stream (YAML cannot resume after a syntax
    error) with a Located error at the line where reading stopped."""
    out: list[Located] = []
    index = 0
    while lines.peek() is not None:
        piece = _Piece(lines)
        refusal = _measure(piece, MAX_OBJECT_BYTES)
        if refusal is not None:
            if refusal.doc:  # documents before it in the same piece (a separator YAML reads where we do not)
                located, index, _ = _compose(piece.text(), piece.start, source, index, max_docs=refusal.doc)
                out += [d for d in located if d.error is None]
            piece.drop()
            piece.drain()
            out.append(Located(source, refusal.line, error=_refused_text(source, index, refusal), document=index + 1))
            index += 1
        else:
            piece.drain()
        if piece.error is not None:
            out.append(Located(source, piece.error_line, error=f"{source}: {piece.error}"))
            return out
        if refusal is not None:
            continue
        before = index
        located, index, stop = _compose(piece.text(), piece.start, source, index)
        if stop == "yaml" and lines.peek() is not None:
            # YAML cannot read the piece alone, and the input goes on: read the rest with it, as one stream
            # (an unclosed quote is then reported at the `---` that ends it, or a `%` line was its text)
            rest = lines.rest_or_none()
            if rest is not None:
                located, index, stop = _compose(piece.text() + rest, piece.start, source, before)
                stop = stop or "end"
        out += located
        if stop:
            return out
    return out


def _nothing(source: str) -> Located:
    """The error of an input that holds no document at all (empty, or only comments)."""
    return Located(source, 1, error=f"{source}: no Kubernetes objects found", not_object=True)


def _locate(lines: _Lines, source: str) -> list[Located]:
    """Every object of the input (YAML stream or JSON) with its line, and a Located error for each
    document that cannot be read."""
    if not lines.starts_json():
        out = _yaml_located(lines, source)
        return out or [_nothing(source)]
    try:
        text = lines.rest()
    except _Undecodable as exc:
        return [Located(source, 0, error=f"{source}: {exc}")]
    stripped = text.lstrip()
    try:
        docs: list[Any] = [json.loads(text)]
    except json.JSONDecodeError as exc:
        # YAML is a superset of JSON-ish flow style; only report JSON errors if YAML fails too
        located = _yaml_located(_Lines.of_text(text), source)
        if any(d.error for d in located):
            return [
                Located(
                    source,
                    exc.lineno,
                    error=f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                    document=1,
                )
            ]
        return located or [_nothing(source)]
    except RecursionError:
        return [
            Located(
                source,
                1,
                error=f"{source}: document 1 is nested too deeply to read (more levels than Python's recursion limit)",
                document=1,
            )
        ]
    first = len(text) - len(stripped)
    out = _flatten(docs[0], source, 0, line=text.count("\n", 0, first) + 1)
    return out or [_nothing(source)]


def locate_documents(text: str, source: str = "input") -> list[Located]:
    """Every object in `text` (YAML stream or JSON) with its line, and a Located error for each
    document that cannot be read; never raises."""
    return _locate(_Lines.of_text(text), source)


def parse_documents(text: str, source: str = "input") -> list[dict[str, Any]]:
    """The Kubernetes objects in `text` (YAML stream or JSON). Raises ValueError naming the document."""
    return _objects(locate_documents(text, source))


def _objects(located: list[Located]) -> list[dict[str, Any]]:
    for d in located:
        if d.error is not None:
            raise ValueError(d.error)
    return [d.obj for d in located if d.obj is not None]


def load_documents(path_or_dash: str) -> list[dict[str, Any]]:
    """Every object in the file (or stdin for `-`). Raises ValueError with a clear message."""
    return _objects(locate_file(path_or_dash))


#: what a directory is searched for, as kubectl does (k8s.io/cli-runtime pkg/resource/visitor.go,
#: FileExtensions = []string{".json", ".yaml", ".yml"}); a file named on the command line is read whatever its name
MANIFEST_SUFFIXES = (".json", ".yaml", ".yml")


#: why a path found in a directory is not read (the Summary counts each): a directory whose name starts with
#: `.` (.git, .github: never manifests), a Helm chart's templates/ and values*.yaml (Go templates and their
#: inputs, not objects: `helm template` renders them), a path an --exclude glob matches, and a file none of
#: whose documents is a Kubernetes object (no apiVersion and kind: a workflow, a config file)
HIDDEN, CHART, EXCLUDED, NOT_OBJECT = "hidden directory", "Helm chart file", "excluded", "not a Kubernetes manifest"


@dataclass
class Inputs:
    """What the -f arguments name, in order: each file to read (`walked`: found in a directory, so it may turn
    out not to be a manifest), the paths passed over by reason, and the symbolic links whose target is missing."""

    files: list[tuple[str, bool]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    dangling: list[str] = field(default_factory=list)


def _excluded(rel: str, shown: str, name: str, exclude: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(x, g) for g in exclude for x in (rel, shown, name))


def _is_chart_file(rel_in_chart: str) -> bool:
    """A path, relative to a chart's directory, that helm reads rather than kubectl: its templates (with
    their tests), Chart.yaml, its values files and their schema. Its crds/ are manifests, read as such."""
    first, _, rest = rel_in_chart.partition("/")
    if rest:
        return first == "templates"
    return first == "Chart.yaml" or first == "values.schema.json" or fnmatch.fnmatchcase(first, "values*.y*ml")


def _outer_chart(root: Path) -> str | None:
    """`root`'s path inside the Helm chart that holds it (`-f chart/templates`), "" when it is the chart's
    directory, None when it is in no chart."""
    here = root.resolve()
    for up in (here, *here.parents):
        if (up / "Chart.yaml").is_file():
            return here.relative_to(up).as_posix().strip(".")
    return None


def _walk(root: Path, recursive: bool, exclude: Sequence[str], found: Inputs) -> None:
    """The manifest files under `root`, and what is passed over: in lexical order, a subdirectory's files where
    its name sorts (as kubectl's -f DIR, filepath.Walk); -R: the subdirectories too, symbolic links to
    directories not followed."""
    outer = _outer_chart(root)
    _walk_dir(root, "", None if outer is None else (f"{outer}/" if outer else ""), recursive, exclude, found)


def _walk_dir(
    here: Path, rel_dir: str, chart: str | None, recursive: bool, exclude: Sequence[str], found: Inputs
) -> None:
    """`chart`: the prefix that makes a name in `here` relative to the Helm chart holding it (None: in none)."""
    try:
        entries = sorted(os.scandir(here), key=lambda e: e.name)
    except OSError:  # an unreadable subdirectory; kubectl fails on it too, but its files cannot be named
        return
    if any(e.name == "Chart.yaml" for e in entries):
        chart = ""
    for e in entries:
        rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
        path = here / e.name
        if e.is_dir(follow_symlinks=False):
            if not recursive:
                continue
            if e.name.startswith("."):
                found.skipped[HIDDEN] += 1
            elif _excluded(rel, str(path), e.name, exclude):
                found.skipped[EXCLUDED] += 1
            else:
                below = None if chart is None else f"{chart}{e.name}/"
                _walk_dir(path, rel, below, recursive, exclude, found)
            continue
        if path.suffix.lower() not in MANIFEST_SUFFIXES or (e.is_symlink() and path.is_dir()):
            continue
        if _excluded(rel, str(path), e.name, exclude):
            found.skipped[EXCLUDED] += 1
        elif chart is not None and _is_chart_file(chart + e.name):
            found.skipped[CHART] += 1
        elif e.is_symlink() and not path.exists():
            found.dangling.append(str(path))
        elif path.is_file():
            found.files.append((str(path), True))


def walk_inputs(paths: Sequence[str], recursive: bool, exclude: Sequence[str] = ()) -> Inputs:
    """The files to read for `-f` arguments: a directory gives its manifest files (see `_walk`); `-` and files
    are kept as named, whatever their name, and a path that does not exist too, so reading it reports it."""
    found = Inputs()
    for p in paths:
        path = Path(p)
        if p != "-" and path.is_dir():
            _walk(path, recursive, exclude, found)
        else:
            found.files.append((p, False))
    return found


def expand_paths(paths: list[str], recursive: bool) -> list[str]:
    """The files `walk_inputs` reads, in order."""
    return [f for f, _ in walk_inputs(paths, recursive).files]


def is_manifest(located: Sequence[Located]) -> bool:
    """Whether a file read holds a Kubernetes object (or a document that cannot be read as YAML or JSON):
    false when every document is something else, or there is none."""
    return not all(d.not_object for d in located)


def locate_file(path_or_dash: str) -> list[Located]:
    """`locate_documents` of a file (or stdin), read line by line: a document is measured as its lines
    arrive, and one the apiserver would refuse is passed over without being kept; a file that cannot be
    opened is one Located error."""
    if path_or_dash == "-":
        stdin: Any = sys.stdin
        buffer = getattr(stdin, "buffer", None)
        lines = _Lines(buffer.read) if buffer is not None else _Lines.of_text(stdin.read())
        return _locate(lines, "stdin")
    p = Path(path_or_dash)
    try:
        with p.open("rb") as f:
            return _locate(_Lines(f.read), str(p))
    except FileNotFoundError:
        error = f"{p}: no such file"
    except IsADirectoryError:
        error = f"{p}: is a directory, not a manifest file"
    except OSError as exc:
        error = f"{p}: cannot read ({exc.strerror})"
    return [Located(path_or_dash, 0, error=error)]


def split_runtimes(docs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], RuntimeLookup]:
    """(the documents to check, a lookup over the runtimes given alongside them)."""
    jobs: list[dict[str, Any]] = []
    runtimes: dict[tuple[str, str, str], dict[str, Any]] = {}
    for doc in docs:
        if doc.get("kind") in RUNTIME_KINDS and str(doc.get("apiVersion", "")).startswith("trainer.kubeflow.org/"):
            meta = doc.get("metadata") or {}
            ns = "" if doc["kind"] == "ClusterTrainingRuntime" else str(meta.get("namespace") or "")
            runtimes[(doc["kind"], ns, str(meta.get("name") or ""))] = doc
        else:
            jobs.append(doc)

    def lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if kind == "ClusterTrainingRuntime":
            return runtimes.get((kind, "", name))
        found = runtimes.get((kind, namespace, name))
        if found is None:
            # a namespaced runtime written without metadata.namespace lands in the job's namespace
            found = runtimes.get((kind, "", name))
        return found

    return jobs, lookup
