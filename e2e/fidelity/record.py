"""The fidelity matrix's record of real outcomes (e2e/fidelity/outcomes.json) and the digests that key it.

A scenario's real outcome does not depend on the webhook (it is in ``audit`` mode while the job
runs, e2e/fidelity/run.py): only on the scenario's objects and on what the stack is made of. So
each outcome observed on the real stack is stored with

* ``digest``: sha256 over the canonical JSON of (a) the scenario: its name (hence its namespace),
  its job object, its namespace (with its labels), its namespaced and cluster prerequisites, all
  as :class:`Scenario` holds them, i.e. with ``REGISTRY_PLACEHOLDER`` where the Image Pull rows name
  the registry (the address is substituted on the node only: the digest is the same on every
  machine), and how the runner observes it (its bound, the reruns an AIPerfJob gets); (b) the stack
  digest, :func:`stack_digest`: the pinned versions and the pieces of the harness the job meets
  (``STACK_FILES``, ``STACK_PIECES``);
* the outcome (kind, detail, seconds), the verdict the webhook gave on that run (informational: it
  is what docs/fidelity.md shows; ``make test`` computes every verdict afresh), the time (UTC) and
  the commit (``git rev-parse HEAD``, ``+dirty`` when the tree has changes) it was observed on.

``make test`` (e2e/test_fidelity.py) compares each fresh verdict with the recorded outcome whose
digest matches, and runs for real only the scenarios with none; ``make conformance``
(e2e/test_fidelity_conformance.py, ``python -m e2e.fidelity.run --all-real``) runs every scenario
and rewrites the record, and docs/fidelity.md is rendered from it. A digest that does not match is
never compared: the scenario runs for real.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.fidelity.scenarios_base import Scenario

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "e2e" / "fidelity" / "outcomes.json"
#: bumped when what goes into a digest changes shape (every record entry is then stale)
RECIPE = 1

#: The files that make the stack a job meets, relative to the repository (globs; ``**/*``: every file below).
#: e2e/versions.env counts by its KEY=VALUE lines (a comment changes nothing); the others by content.
#: Kept narrow on purpose: a refactor of harness code the job never meets (the runner's polling,
#: the tests, the webhook itself: it only audits while the job runs) leaves every record valid.
#:   versions.env            every component's version (Kubernetes, JobSet, Trainer, Kueue, CoreDNS,
#:                           AIPerf, fakellm, distribution, Kyverno): the binaries, manifests, CRDs
#:   images.sh               the pause image (the pods' sandbox) and the Python base the AIPerf images use
#:   nodeimage/**/*          the pause and the workload image's sources: what every job's container runs
#:   stack.sh                how the controllers, CoreDNS, the workload and AIPerf images and the
#:                           upstream manifests are built
#:   crds/*.yaml             the AIPerfJob CRD the apiserver serves
#:   draplugin/**/*          the DRA kubelet plugin the DRA rows' pods are prepared by
#:   harness/stack.py        what is deployed and every change made to the upstream manifests
#:                           (Kueue's configuration, the GPUs the node advertises, CoreDNS)
#:   harness/aiperf_manifests.py  the AIPerf operator's objects and the stand-in endpoint
#:   harness/kyverno.py      Kyverno's ConfigMap and flags (the Kyverno rows' policy engine)
#:   harness/dra_plugin.py   the DRA plugin's devices and DeviceClass
#:   harness/registry.py     the Image Pull rows' registry: its TLS, auth and what is pushed
#: versions.env pins no fidelity job ever meets: left out of the stack digest, so bumping them keeps
#: the record. A job runs on the node's Kubernetes, etcd, JobSet, Trainer, Kueue, CoreDNS, AIPerf,
#: fakellm, the registry and Kyverno; these only serve other tests or the webhook's own install:
#:   HELM_LAYER_*         helm renders and installs our chart (the webhook only audits while a job runs)
#:   KARPENTER_VERSION    NodePool CRDs no scenario's cluster has a controller for
#:   OPENREPORTS_VERSION  the audit controller's Report CRDs
#:   PROMETHEUS_VERSION   promtool and the Prometheus server of the monitoring tests
#:   KREW_VERSION         release tooling (tests/test_release_dist.py)
NOT_MET_VERSIONS = frozenset(
    {
        "HELM_LAYER_PYPI",
        "HELM_LAYER_VERSION",
        "KARPENTER_VERSION",
        "OPENREPORTS_VERSION",
        "PROMETHEUS_VERSION",
        "KREW_VERSION",
    }
)
STACK_FILES: tuple[str, ...] = (
    "e2e/versions.env",
    "e2e/images.sh",
    "e2e/nodeimage/**/*",
    "e2e/stack.sh",
    "e2e/crds/*.yaml",
    "e2e/draplugin/**/*",
    "e2e/harness/stack.py",
    "e2e/harness/aiperf_manifests.py",
    "e2e/harness/kyverno.py",
    "e2e/harness/dra_plugin.py",
    "e2e/harness/registry.py",
)
#: The parts of larger harness modules the job meets, as ``module:qualified.name``: a function's or
#: class's source, or a constant's value. The node's kubelet, containerd, controller-manager,
#: kube-proxy and apiserver as started (flags, admission plugins and their configuration), the
#: AIPerf operator's deployment, and what the Image Pull rows' registry holds; the rest of node.py,
#: controlplane.py and run.py (start-up, teardown, polling, reading the outcome) does not count.
STACK_PIECES: tuple[str, ...] = (
    "e2e.harness.controlplane:ADMISSION_PLUGINS",
    "e2e.harness.controlplane:ControlPlane._start_apiserver",
    "e2e.harness.controlplane:ControlPlane._write_admission_config",
    "e2e.harness.node:kubelet_config",
    "e2e.harness.node:Node._start_containerd",
    "e2e.harness.node:Node._start_kubelet",
    "e2e.harness.node:Node._start_controllers",
    "e2e.harness.node:Node._start_kube_proxy",
    "e2e.harness.aiperf_stack:AIPerfOperator",
    "e2e.fidelity.run:push_images",
    "e2e.fidelity.run:image_registry",
)


def canonical(obj: Any) -> bytes:
    """``obj`` as canonical JSON: keys sorted, no whitespace, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def versions_lines(text: str) -> dict[str, str]:
    """The KEY=VALUE lines of a versions.env (comments and blank lines do not count)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def stack_files(root: Path = ROOT, patterns: Iterable[str] = STACK_FILES) -> list[Path]:
    """The files ``patterns`` name under ``root``, sorted, without caches (``__pycache__``, ``*.pyc``)."""
    found: set[Path] = set()
    for pattern in patterns:
        for path in root.glob(pattern):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                found.add(path)
    return sorted(found)


def piece_text(ref: str) -> str:
    """The source of the function or class ``module:qualname``, or its value's canonical JSON."""
    module, _, qualname = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj):
        return inspect.getsource(obj)
    return canonical(obj).decode()


def stack_material(
    root: Path = ROOT, patterns: Iterable[str] = STACK_FILES, pieces: Iterable[str] = STACK_PIECES
) -> dict[str, Any]:
    """What :func:`stack_digest` hashes: the versions, each file's sha256 by its path, each piece's."""
    files: dict[str, str] = {}
    versions: dict[str, str] = {}
    for path in stack_files(root, patterns):
        rel = path.relative_to(root).as_posix()
        if rel == "e2e/versions.env":
            versions = {k: v for k, v in versions_lines(path.read_text()).items() if k not in NOT_MET_VERSIONS}
        else:
            files[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {
        "recipe": RECIPE,
        "versions": versions,
        "files": files,
        "pieces": {ref: hashlib.sha256(piece_text(ref).encode()).hexdigest() for ref in pieces},
    }


def stack_digest(root: Path = ROOT, patterns: Iterable[str] = STACK_FILES, pieces: Iterable[str] = STACK_PIECES) -> str:
    return hashlib.sha256(canonical(stack_material(root, patterns, pieces))).hexdigest()


def scenario_material(s: Scenario, observation: Mapping[str, Any]) -> dict[str, Any]:
    """What of ``s`` can change its real outcome: its name (its namespace), its job, its namespace
    and prerequisites (:meth:`Scenario.objects`), the jobs that hold its queue first (``before``, when
    it has some), and ``observation`` (how long the runner watches
    it, how often it is run again: e2e/fidelity/run.py ``observation``). Not its note, ``covers``,
    ``known``, ``warns`` or ``says``: they describe the scenario, the job does not meet them."""
    material: dict[str, Any] = {
        "name": s.name,
        "job": s.job_object(),
        "objects": s.objects(),
        "observation": dict(observation),
    }
    if s.before:  # only when there are some: every other scenario's digest stays what it was
        material["before"] = s.before_objects()
    return material


def scenario_digest(s: Scenario, observation: Mapping[str, Any], stack: str) -> str:
    """sha256 of the scenario (:func:`scenario_material`) and the stack digest ``stack``."""
    return hashlib.sha256(canonical({"scenario": scenario_material(s, observation), "stack": stack})).hexdigest()


def commit(root: Path = ROOT) -> str:
    """``git rev-parse HEAD`` of ``root``, with ``+dirty`` when tracked files have changes."""
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    status = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=True,
    )
    return head.stdout.strip() + ("+dirty" if status.stdout.strip() else "")


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Entry:
    """One scenario's recorded outcome and its provenance."""

    digest: str
    kind: str  # runs | fails | never-starts | refused (run.Outcome.kind)
    detail: str
    seconds: float
    observed: str  # UTC, ISO 8601
    commit: str
    #: the webhook's verdict on that run (run.Verdict as a dict): informational, docs/fidelity.md shows it
    verdict: dict[str, Any] = field(default_factory=dict)
    #: for a scenario with ``before`` jobs, the order of admission the runner saw (run.Outcome.admission:
    #: ``while-held`` or ``after-held``); "" for the others, and then not written
    admission: str = ""

    def provenance(self) -> str:
        """``observed 2026-12-05 on abc1234`` (the commit shortened, ``+dirty`` kept)."""
        sha, _, dirty = self.commit.partition("+")
        return f"observed {self.observed[:10]} on {sha[:7]}" + (f"+{dirty}" if dirty else "")


@dataclass
class Record:
    entries: dict[str, Entry] = field(default_factory=dict)
    #: the stack digest the last run that wrote the record saw (informational: each entry's digest
    #: already covers it)
    stack: str = ""
    #: timings of the last run that rewrote the whole record (docs/fidelity.md, "The run that wrote the record")
    timings: dict[str, float] = field(default_factory=dict)

    def matching(self, digests: Mapping[str, str]) -> dict[str, Entry]:
        """The entries of the scenarios in ``digests`` (name → digest now) whose recorded digest is that one."""
        return {n: e for n, d in digests.items() if (e := self.entries.get(n)) is not None and e.digest == d}

    def to_json(self) -> str:
        """Stable, sorted and one field a line: a re-run changes only the lines of what changed."""
        doc = {
            "about": "the fidelity matrix's real outcomes: e2e/fidelity/record.py; written by make conformance "
            "(python -m e2e.fidelity.run --all-real), compared with by make test (e2e/test_fidelity.py)",
            "recipe": RECIPE,
            "stack": self.stack,
            "timings": {k: round(v, 1) for k, v in self.timings.items()},
            "outcomes": {
                name: {
                    "digest": e.digest,
                    "kind": e.kind,
                    "detail": e.detail,
                    "seconds": round(e.seconds, 1),
                    "observed": e.observed,
                    "commit": e.commit,
                    "verdict": e.verdict,
                }
                | ({"admission": e.admission} if e.admission else {})
                for name, e in sorted(self.entries.items())
            },
        }
        return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Record:
        doc = json.loads(text)
        if doc.get("recipe") != RECIPE:
            return cls()  # another shape of digest: nothing in it can match
        entries = {name: Entry(**e) for name, e in (doc.get("outcomes") or {}).items()}
        return cls(entries, str(doc.get("stack", "")), dict(doc.get("timings") or {}))


def load(path: Path = RECORD) -> Record:
    """The record at ``path``; an empty one if there is none."""
    return Record.from_json(path.read_text()) if path.is_file() else Record()


def save(record: Record, path: Path = RECORD) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(record.to_json())
    tmp.replace(path)
