"""Reading manifests from a file or stdin for the CLI (`check`, `plan`).

Multi-document YAML or JSON (a JSON object, a JSON list, or a `kind: List`). Offline,
TrainingRuntime / ClusterTrainingRuntime documents in the same input stand in for the
cluster: `split_runtimes` turns them into the adapters' runtime lookup.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from webhook.workloads.base import RuntimeLookup

__all__ = ["load_documents", "split_runtimes", "RUNTIME_KINDS"]

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


def _load_all(text: str) -> Any:
    loader = _BoundedLoader(text)
    try:
        while loader.check_data():  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
            yield loader.get_data()
    finally:
        loader.dispose()


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


def _flatten(doc: Any, source: str, index: int) -> list[dict[str, Any]]:
    if isinstance(doc, list):
        out: list[dict[str, Any]] = []
        for item in doc:
            out += _flatten(item, source, index)
        return out
    if not isinstance(doc, dict):
        raise ValueError(
            f"{source}: document {index + 1} is a {type(doc).__name__}, not a Kubernetes object (a mapping with apiVersion and kind)"
        )
    if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        return _flatten(doc["items"], source, index)
    if not isinstance(doc.get("apiVersion"), str) or not isinstance(doc.get("kind"), str):
        missing = [k for k in ("apiVersion", "kind") if not isinstance(doc.get(k), str)]
        raise ValueError(f"{source}: document {index + 1} has no {' and no '.join(missing)}")
    return [doc]


def parse_documents(text: str, source: str = "input") -> list[dict[str, Any]]:
    """The Kubernetes objects in `text` (YAML stream or JSON). Raises ValueError naming the document."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            docs: list[Any] = [json.loads(text)]
        except json.JSONDecodeError as exc:
            # YAML is a superset of JSON-ish flow style; only report JSON errors if YAML fails too
            try:
                docs = list(_load_all(text))
            except (yaml.YAMLError, _TooBig, RecursionError):
                raise ValueError(f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise ValueError(
                f"{source}: document 1 is nested too deeply to read (more levels than Python's recursion limit)"
            ) from None
    else:
        docs = []
        loader = _load_all(text)
        index = 0
        while True:
            try:
                doc = next(loader)
            except StopIteration:
                break
            except _TooBig as exc:
                raise ValueError(
                    f"{source}: document {index + 1} is refused: YAML aliases expand it to {exc}"
                ) from None
            except RecursionError:
                raise ValueError(
                    f"{source}: document {index + 1} is nested too deeply to read (more levels than Python's recursion limit)"
                ) from None
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
                problem = getattr(exc, "problem", None) or str(exc)
                raise ValueError(f"{source}: document {index + 1} is not valid YAML{where}: {problem}") from None
            docs.append(doc)
            index += 1
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(docs):
        if doc is None:  # empty document between `---` separators
            continue
        out += _flatten(doc, source, i)
    if not out:
        raise ValueError(f"{source}: no Kubernetes objects found")
    return out


def load_documents(path_or_dash: str) -> list[dict[str, Any]]:
    """Every object in the file (or stdin for `-`). Raises ValueError with a clear message."""
    text, source = _read(path_or_dash)
    return parse_documents(text, source)


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
