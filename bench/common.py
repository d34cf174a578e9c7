"""What every benchmark shares: the AdmissionReview the apiserver sends, the request the in-process
benchmarks hand the handler, and writing a section of its raw-runs file under docs/benchmarks/ between its markers (the rest of the file is left alone)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks"
#: section name prefix -> the raw-runs file (docs/benchmarks/<file>.md) it is written into
STUDIES = {
    "validate-offline": "validate-offline",
    "cluster-": "cluster",
    "hostile": "hostile",
    "sweep": "sweep",
    "apply-latency": "apply-latency",
    "admitted-latency": "admitted-latency",
    "inproc": "inproc",
    "vs-kyverno": "vs-kyverno",
    "loop-stall": "large-objects",
    "large": "large-objects",
    "fuzz-parsers": "fuzz-parsers",
    "audit-reports": "audit-reports",
    "audit-scale": "audit-scale",
    "audit-churn": "audit-churn",
    "worst-at-once": "worst-at-once",
}


def doc_for(name: str) -> Path:
    """The file a section is written into: the study its name starts with, else docs/benchmarks/NAME.md."""
    prefix = max((p for p in STUDIES if name.startswith(p)), key=len, default=None)
    return DOCS / f"{STUDIES[prefix] if prefix else name}.md"


class FakeRequest:
    """What WebhookApp.validate reads from aiohttp's request."""

    content_type = "application/json"
    query: dict[str, str] = {}

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.content_length = len(body)
        self.headers = {"Content-Type": "application/json"}

    async def read(self) -> bytes:
        return self.body


PLURALS = {"AIPerfJob": "aiperfjobs", "AIPerfSweep": "aiperfsweeps", "TrainJob": "trainjobs"}


def review(obj: dict[str, Any], *, uid: str = "bench-0000", kind: dict[str, str] | None = None) -> bytes:
    """The AdmissionReview for a CREATE of `obj`; `kind` overrides request.kind/resource's group+version."""
    group, version = obj["apiVersion"].split("/")
    gvk = kind or {"group": group, "version": version, "kind": obj["kind"]}
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": gvk,
                "resource": {
                    "group": gvk["group"],
                    "version": gvk["version"],
                    "resource": PLURALS.get(obj["kind"], "unknown"),
                },
                "namespace": obj["metadata"].get("namespace", "default"),
                "name": obj["metadata"]["name"],
                "operation": "CREATE",
                "userInfo": {"username": "bench"},
                "object": obj,
                "dryRun": False,
            },
        }
    ).encode()


def write_section(name: str, body: str) -> None:
    """Replace (or append) the `<!-- bench:NAME -->` … `<!-- /bench:NAME -->` section of its docs/benchmarks/ file."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    section = f"{begin}\n{body.strip()}\n{end}"
    doc = doc_for(name)
    doc.parent.mkdir(parents=True, exist_ok=True)
    text = (
        doc.read_text()
        if doc.exists()
        else f"# {name}\n\nRaw runs; the guide is [docs/benchmarks.md](../benchmarks.md).\n"
    )
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        _, after = rest.split(end, 1)
        text = before + section + after
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    doc.write_text(text)
