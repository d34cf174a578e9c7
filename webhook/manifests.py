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
        for j, item in enumerate(doc):
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
                docs = list(yaml.safe_load_all(text))
            except yaml.YAMLError:
                raise ValueError(f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    else:
        docs = []
        loader = yaml.safe_load_all(text)
        index = 0
        while True:
            try:
                doc = next(loader)
            except StopIteration:
                break
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
