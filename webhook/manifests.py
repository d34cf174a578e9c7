"""Reading manifests from a file or stdin for the CLI (`check`, `plan`).

Multi-document YAML or JSON (a JSON object, a JSON list, or a `kind: List`). Offline,
TrainingRuntime / ClusterTrainingRuntime documents in the same input stand in for the
cluster: `split_runtimes` turns them into the adapters' runtime lookup.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from webhook.workloads.base import RuntimeLookup

__all__ = ["load_documents", "split_runtimes", "RUNTIME_KINDS", "Located", "locate_file", "expand_paths"]

RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")

#: a document may expand (YAML aliases included) to at most this many values; the checks
#: themselves stop at objectLimits (10000 by default), this only keeps the loader itself bounded
MAX_EXPANDED_VALUES = 1_000_000


class _TooBig(ValueError):
    pass


def _expanded_size(node: yaml.Node, limit: int) -> int:
    """Values in `node` as constructed, aliases expanded, counted over the node graph (each
    distinct node once), so a billion laughs is measured without being expanded."""
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        n, done = stack.pop()
        key = id(n)
        if key in size:
            continue
        if isinstance(n, yaml.MappingNode):
            children = [c for pair in n.value for c in pair]
        elif isinstance(n, yaml.SequenceNode):
            children = list(n.value)
        else:
            children = []
        if done:
            open_.discard(key)
            size[key] = total = 1 + sum(size[id(c)] for c in children)
            if total > limit:
                raise _TooBig(f"more than {limit} values")
            continue
        open_.add(key)
        stack.append((n, True))
        for c in children:
            if id(c) in open_:
                raise _TooBig("a recursive alias (a value that contains itself)")
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


def _read(path_or_dash: str) -> tuple[str, str]:
    if path_or_dash == "-":
        return sys.stdin.read(), "stdin"
    p = Path(path_or_dash)
    try:
        return p.read_text(encoding="utf-8"), str(p)
    except FileNotFoundError:
        raise ValueError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{p}: is a directory, not a manifest file") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ValueError(f"{p}: cannot read ({exc.strerror})") from None


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


def _line(node: yaml.Node | None, default: int) -> int:
    return node.start_mark.line + 1 if node is not None else default


def _items_node(node: yaml.Node | None) -> yaml.Node | None:
    """The `items:` sequence node of a `kind: List` mapping node."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "items":
                return value
    return None


def _flatten(doc: Any, source: str, index: int, node: yaml.Node | None = None, line: int = 1) -> list[Located]:
    line = _line(node, line)
    if isinstance(doc, list):
        children = node.value if isinstance(node, yaml.SequenceNode) else [None] * len(doc)
        out: list[Located] = []
        for item, child in zip(doc, children):
            out += _flatten(item, source, index, child, line)
        return out
    if not isinstance(doc, dict):
        return [
            Located(
                source,
                line,
                error=f"{source}: document {index + 1} is a {type(doc).__name__}, not a Kubernetes object "
                "(a mapping with apiVersion and kind)",
            )
        ]
    if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        return _flatten(doc["items"], source, index, _items_node(node), line)
    if not isinstance(doc.get("apiVersion"), str) or not isinstance(doc.get("kind"), str):
        missing = [k for k in ("apiVersion", "kind") if not isinstance(doc.get(k), str)]
        return [Located(source, line, error=f"{source}: document {index + 1} has no {' and no '.join(missing)}")]
    return [Located(source, line, doc)]


def _yaml_located(text: str, source: str) -> list[Located]:
    """The documents of a YAML stream, each with its line; an unreadable document ends the stream (YAML
    cannot resume after a syntax error) with a Located error at the line where reading stopped."""
    out: list[Located] = []
    loader = _BoundedLoader(text)
    index = 0
    try:
        while True:
            line = 1
            try:
                if not loader.check_node():
                    break
                line = loader.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
                node = loader.get_node()
                doc = loader.construct_document(node) if node is not None else None
            except _TooBig as exc:
                out.append(
                    Located(
                        source,
                        line,
                        error=f"{source}: document {index + 1} is refused: YAML aliases expand it to {exc}",
                    )
                )
                break
            except RecursionError:
                out.append(
                    Located(
                        source,
                        line,
                        error=f"{source}: document {index + 1} is nested too deeply to read "
                        "(more levels than Python's recursion limit)",
                    )
                )
                break
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
                problem = getattr(exc, "problem", None) or str(exc)
                out.append(
                    Located(
                        source,
                        mark.line + 1 if mark is not None else line,
                        error=f"{source}: document {index + 1} is not valid YAML{where}: {problem}",
                    )
                )
                break
            if doc is not None:  # an empty document between `---` separators
                out += _flatten(doc, source, index, node)
            index += 1
    finally:
        loader.dispose()
    return out


def locate_documents(text: str, source: str = "input") -> list[Located]:
    """Every object in `text` (YAML stream or JSON) with its line, and a Located error for each
    document that cannot be read; never raises."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            docs: list[Any] = [json.loads(text)]
        except json.JSONDecodeError as exc:
            # YAML is a superset of JSON-ish flow style; only report JSON errors if YAML fails too
            located = _yaml_located(text, source)
            if any(d.error for d in located):
                return [
                    Located(
                        source,
                        exc.lineno,
                        error=f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                    )
                ]
            return located or [Located(source, 1, error=f"{source}: no Kubernetes objects found")]
        except RecursionError:
            return [
                Located(
                    source,
                    1,
                    error=f"{source}: document 1 is nested too deeply to read (more levels than Python's recursion limit)",
                )
            ]
        first = len(text) - len(stripped)
        out = _flatten(docs[0], source, 0, line=text.count("\n", 0, first) + 1)
    else:
        out = _yaml_located(text, source)
    return out or [Located(source, 1, error=f"{source}: no Kubernetes objects found")]


def parse_documents(text: str, source: str = "input") -> list[dict[str, Any]]:
    """The Kubernetes objects in `text` (YAML stream or JSON). Raises ValueError naming the document."""
    located = locate_documents(text, source)
    for d in located:
        if d.error is not None:
            raise ValueError(d.error)
    return [d.obj for d in located if d.obj is not None]


def load_documents(path_or_dash: str) -> list[dict[str, Any]]:
    """Every object in the file (or stdin for `-`). Raises ValueError with a clear message."""
    text, source = _read(path_or_dash)
    return parse_documents(text, source)


#: what a directory is searched for, as kubectl does (k8s.io/cli-runtime pkg/resource/visitor.go,
#: FileExtensions = []string{".json", ".yaml", ".yml"}); a file named on the command line is read whatever its name
MANIFEST_SUFFIXES = (".json", ".yaml", ".yml")


def expand_paths(paths: list[str], recursive: bool) -> list[str]:
    """Files to read for `-f` arguments, in order: a directory gives its manifest files (sorted; with
    `recursive` its subdirectories' too, as kubectl's `-R`); `-` and files are kept as named; a path
    that does not exist is kept too, so reading it reports it."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if p != "-" and path.is_dir():
            pattern = "**/*" if recursive else "*"
            out += [str(f) for f in sorted(path.glob(pattern)) if f.is_file() and f.suffix.lower() in MANIFEST_SUFFIXES]
        else:
            out.append(p)
    return out


def locate_file(path_or_dash: str) -> list[Located]:
    """`locate_documents` of a file (or stdin); a file that cannot be read is one Located error."""
    try:
        text, source = _read(path_or_dash)
    except ValueError as exc:
        return [Located("stdin" if path_or_dash == "-" else path_or_dash, 0, error=str(exc))]
    return locate_documents(text, source)


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
