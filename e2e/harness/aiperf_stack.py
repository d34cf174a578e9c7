"""The AIPerf 0.13.0 operator on the real node, deployed as users do, a stand-in endpoint, and
what an AIPerfJob's run looks like from outside.

The objects (the operator's namespace, ServiceAccount, ClusterRole and Deployment modelled on the
upstream Helm chart, the fakellm stand-in, the offline tokenizer, the good job) are in
:mod:`e2e.harness.aiperf_manifests`, re-exported here; their sources and every difference from the
chart are said there. :class:`AIPerfOperator` loads the images and deploys them (called by
:class:`e2e.harness.stack.Stack` with ``aiperf=True``); :func:`observe_aiperfjob` and
:func:`wait_aiperfjob` report a job as :class:`AIPerfOutcome` (phase, conditions, message, pods,
JobSet, events), for the tests and the fidelity matrix.

Use::

    with Node() as node, Stack(node, components=("jobset",), aiperf=True) as stack:
        job = good_aiperfjob("bench", "team-a")
        ensure_tokenizer(node.cp, "team-a")
        node.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(job))
        outcome = wait_aiperfjob(node.cp, "team-a", "bench", timeout=600)
        assert outcome.phase == "Completed", outcome.detail()
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.aiperf_manifests import (
    FAKELLM_CONFIG,
    HF_CACHE_MOUNT,
    OPERATOR_NAME,
    OPERATOR_NAMESPACE,
    OPERATOR_RULES,
    STANDIN_NAME,
    STANDIN_NAMESPACE,
    STANDIN_PORT,
    STANDIN_URL,
    TOKENIZER_CONFIGMAP,
    TOKENIZER_NAME,
    aiperf_image,
    ensure_tokenizer,
    fakellm_image,
    good_aiperfjob,
    operator_manifests,
    standin_manifests,
    tokenizer_configmap,
    tokenizer_files,
)
from e2e.harness.controlplane import ControlPlane
from e2e.harness.node import Node, poll_until

__all__ = [
    "OPERATOR_NAMESPACE",
    "OPERATOR_NAME",
    "STANDIN_NAMESPACE",
    "STANDIN_NAME",
    "STANDIN_PORT",
    "STANDIN_URL",
    "TOKENIZER_CONFIGMAP",
    "TOKENIZER_NAME",
    "HF_CACHE_MOUNT",
    "OPERATOR_RULES",
    "FAKELLM_CONFIG",
    "aiperf_image",
    "fakellm_image",
    "operator_manifests",
    "standin_manifests",
    "tokenizer_files",
    "tokenizer_configmap",
    "ensure_tokenizer",
    "good_aiperfjob",
    "TERMINAL_PHASES",
    "AIPerfOutcome",
    "AIPerfOperator",
    "jobset_name",
    "aiperf_outcome",
    "observe_aiperfjob",
    "wait_aiperfjob",
    "container_logs",
]

#: the phases in which the operator is done with an AIPerfJob (aiperf/kubernetes/phase.py)
TERMINAL_PHASES = ("Completed", "Failed", "Cancelled")


# --------------------------------------------------------------------------- observing


@dataclass
class AIPerfOutcome:
    """What the operator and the cluster say about one AIPerfJob."""

    name: str
    namespace: str
    phase: str  # status.phase ("" before the operator wrote one)
    conditions: dict[str, dict[str, Any]]  # by type: status, reason, message
    message: str  # status.error or the Failed/Complete condition's message
    pods: dict[str, str] = field(default_factory=dict)  # pod name -> phase
    events: list[str] = field(default_factory=list)  # "Reason: message" of the job's Warning events
    jobset: str = ""  # the JobSet's terminal condition, "" while it runs, "absent" without one
    seconds: float = 0.0  # from the first observation to this one

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def kind(self) -> str:
        """The fidelity runner's vocabulary (e2e/fidelity/run.py ``Outcome.kind``): ``runs`` (the
        operator's ``Completed``), ``fails`` (``Failed``/``Cancelled``: refused by the operator's
        own validation or preflight, or failed while running), ``never-starts`` (no terminal phase)."""
        if self.phase == "Completed":
            return "runs"
        return "fails" if self.terminal else "never-starts"

    def condition(self, type_: str) -> str:
        return (self.conditions.get(type_) or {}).get("status", "")

    def detail(self) -> str:
        conds = "; ".join(
            f"{t}={c.get('status')} ({c.get('reason')}): {c.get('message', '')}" for t, c in self.conditions.items()
        )
        return (
            f"AIPerfJob {self.namespace}/{self.name}: phase={self.phase or '-'} after {self.seconds:.0f}s; "
            f"message={self.message!r}; conditions: {conds or '-'}; pods: {self.pods or '-'}; "
            f"jobset: {self.jobset or '-'}; events: {self.events[-5:] or '-'}"
        )


def _get_json(cp: ControlPlane, *args: str) -> dict[str, Any]:
    proc = cp.kubectl("get", *args, "-o", "json", check=False, timeout=60)
    return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else {}


def aiperf_outcome(
    job: dict[str, Any],
    pods: list[dict[str, Any]],
    jobset: dict[str, Any] | None = None,
    events: list[dict[str, Any]] | None = None,
) -> AIPerfOutcome:
    """One AIPerfJob object (as the apiserver returns it), the pods of its JobSet, the JobSet
    (``{}`` or ``None``: none yet) and its events, as an :class:`AIPerfOutcome` (``seconds`` 0).
    :func:`observe_aiperfjob` gets them for one job; the fidelity runner from one list of each
    kind for all its jobs."""
    meta = job.get("metadata") or {}
    status = job.get("status") or {}
    conds = {c["type"]: c for c in status.get("conditions") or [] if "type" in c}
    message = str(status.get("error") or "")
    for t in ("Failed", "Complete"):
        if not message and (conds.get(t) or {}).get("status") == "True":
            message = str(conds[t].get("message") or "")
    js_done = [
        f"{c['type']}: {c.get('message', '')}"
        for c in ((jobset or {}).get("status") or {}).get("conditions") or []
        if c.get("type") in ("Completed", "Failed") and c.get("status") == "True"
    ]
    return AIPerfOutcome(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        phase=str(status.get("phase") or ""),
        conditions=conds,
        message=message,
        pods={p["metadata"]["name"]: (p.get("status") or {}).get("phase", "") for p in pods},
        events=[f"{e.get('reason')}: {e.get('message')}" for e in events or [] if e.get("type") == "Warning"],
        jobset="; ".join(js_done) if jobset else "absent",
    )


def jobset_name(name: str) -> str:
    """The JobSet the operator renders for AIPerfJob ``name`` (its pods carry it as
    ``jobset.sigs.k8s.io/jobset-name``)."""
    return f"aiperf-{name}"


def observe_aiperfjob(cp: ControlPlane, namespace: str, name: str) -> AIPerfOutcome:
    """One observation of an AIPerfJob: phase, conditions, message, its pods, JobSet and events."""
    job = _get_json(cp, "aiperfjobs.aiperf.nvidia.com", name, "-n", namespace)
    pods = _get_json(cp, "pods", "-n", namespace, "-l", f"jobset.sigs.k8s.io/jobset-name={jobset_name(name)}")
    js = _get_json(cp, "jobsets.jobset.x-k8s.io", jobset_name(name), "-n", namespace)
    evs = _get_json(cp, "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")
    out = aiperf_outcome(job, pods.get("items", []), js, evs.get("items", []))
    out.name, out.namespace = name, namespace
    return out


def container_logs(cp: ControlPlane, namespace: str, name: str, *, lines: int = 15) -> str:
    """The log tails of the job's containers that terminated with an error (all of them when none
    did): what says why a run failed, for assertion messages and the docs."""
    pods = _get_json(cp, "pods", "-n", namespace, "-l", f"jobset.sigs.k8s.io/jobset-name={jobset_name(name)}")
    picked: list[tuple[str, str]] = []
    everything: list[tuple[str, str]] = []
    for p in pods.get("items", []):
        for cs in (p.get("status") or {}).get("containerStatuses") or []:
            everything.append((p["metadata"]["name"], cs["name"]))
            term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")
            if term and term.get("exitCode"):
                picked.append((p["metadata"]["name"], cs["name"]))
    out = []
    for pod, c in picked or everything:
        proc = cp.kubectl("logs", "-n", namespace, pod, "-c", c, f"--tail={lines}", check=False)
        out.append(f"--- {pod}/{c}\n{proc.stdout}{proc.stderr}")
    return "\n".join(out)


def wait_aiperfjob(
    cp: ControlPlane,
    namespace: str,
    name: str,
    *,
    timeout: float = 600.0,
    until: Callable[[AIPerfOutcome], bool] = lambda o: o.terminal,
    interval: float = 2.0,
) -> AIPerfOutcome:
    """Poll :func:`observe_aiperfjob` until ``until`` (default: a terminal phase) or the deadline;
    returns the last observation either way (check ``terminal``/``phase``), ``seconds`` set."""
    t0 = time.monotonic()
    while True:
        out = observe_aiperfjob(cp, namespace, name)
        out.seconds = time.monotonic() - t0
        if until(out) or out.seconds >= timeout:
            return out
        time.sleep(interval)  # polling the apiserver for a condition, with a deadline


# --------------------------------------------------------------------------- deploying


class AIPerfOperator:
    """The operator and the stand-in on a started :class:`Node` whose JobSet is installed
    (:class:`e2e.harness.stack.Stack`, which calls this with ``aiperf=True``)."""

    def __init__(self, node: Node, *, aiperf_version: str, fakellm_version: str, timeout: float = 300.0) -> None:
        self.node = node
        self.aiperf_version = aiperf_version
        self.fakellm_version = fakellm_version
        self.timeout = timeout
        self.timings: dict[str, float] = {}

    @property
    def cp(self) -> ControlPlane:
        assert self.node.cp is not None
        return self.node.cp

    def _say(self, msg: str) -> None:
        print(f"==> aiperf: {msg}", file=sys.stderr, flush=True)

    def _apply(self, docs: list[dict[str, Any]]) -> None:
        self.cp.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=preflight-aiperf",
            "-f",
            "-",
            input=yaml.safe_dump_all(docs, sort_keys=False),
            timeout=120,
        )

    def start(self, images: Path) -> AIPerfOperator:
        """``images``: the directory holding ``aiperf.tar`` and ``standin.tar`` (e2e/stack.sh aiperf)."""
        t0 = time.monotonic()
        for name in ("aiperf", "standin"):
            self.node.load_image(images / f"{name}.tar")
        self.timings["load"] = time.monotonic() - t0
        self._apply(standin_manifests(self.fakellm_version))
        self._apply(operator_manifests(self.aiperf_version))
        for ns, dep in ((STANDIN_NAMESPACE, STANDIN_NAME), (OPERATOR_NAMESPACE, OPERATOR_NAME)):
            t1 = time.monotonic()
            self._wait(f"Deployment {ns}/{dep} Available", lambda ns=ns, dep=dep: self._available(ns, dep))
            self.timings[dep] = time.monotonic() - t0
            self._say(f"{ns}/{dep} Available ({time.monotonic() - t1:.0f}s)")
        self.timings["total"] = time.monotonic() - t0
        return self

    def operator_log(self, lines: int = 80) -> str:
        proc = self.cp.kubectl(
            "logs", "-n", OPERATOR_NAMESPACE, f"deploy/{OPERATOR_NAME}", f"--tail={lines}", check=False
        )
        return proc.stdout + proc.stderr

    def _available(self, ns: str, dep: str) -> bool | str:
        obj = _get_json(self.cp, "deployment", dep, "-n", ns)
        conds = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
        if conds.get("Available", {}).get("status") == "True":
            return True
        pods = self.cp.kubectl("get", "pods", "-n", ns, "-o", "wide", check=False).stdout
        return f"{conds.get('Available', {}).get('message', 'no Available condition')}\n{pods}"

    def _wait(self, what: str, cond: Callable[[], bool | str]) -> None:
        poll_until(what, cond, self.timeout, every=1.0, context=lambda: self.operator_log(30))
