"""Run the fidelity matrix on the real stack: each verdict against its recorded or observed real outcome.

    python -m e2e.fidelity.run --all-real      # node + stack + webhook, every scenario run for real:
                                               # rewrites e2e/fidelity/outcomes.json, renders docs/fidelity.md
    python -m e2e.fidelity.run                 # every verdict, compared with the recorded outcomes; only the
                                               # scenarios with no outcome recorded for their digest run for real
    python -m e2e.fidelity.run --record-new    # the same, and those outcomes written into the record (and docs)
    python -m e2e.fidelity.run --render        # docs/fidelity.md from the record alone (no node)
    python -m e2e.fidelity.run -k quota        # only scenarios whose name contains "quota"
    python -m e2e.fidelity.run -k kyverno -k jobset   # those containing either

The record (e2e/fidelity/outcomes.json, e2e/fidelity/record.py) holds each scenario's real outcome
with the digest of the scenario and of the stack it was observed on, the date and the commit: a
real outcome does not depend on the webhook (step 3 runs it in ``audit`` mode). In the recorded
mode (the default; ``make test``, e2e/test_fidelity.py) steps 0-2 run for every scenario, step 3
only for those whose digest has no recorded outcome, and step 4 compares every verdict with its
outcome, recorded or just observed. Without Kyverno's binary (``e2e/build.sh kyverno``, not built
by ``make test``) the scenarios that need Kyverno are skipped there and listed by name: they are
judged in ``make conformance`` (``--all-real``, e2e/test_fidelity_conformance.py), which builds it.

What one run does (root; the real node, e2e/harness/node.py, with CoreDNS, and the stack,
e2e/harness/stack.py: JobSet, Trainer, Kueue and, ``aiperf=True``, the AIPerf operator with its
stand-in endpoint; the scenarios are TrainJobs, JobSets applied directly and AIPerfJobs):

0. when a scenario claims DRA devices (e2e/fidelity/dra_scenarios.py), the node's DRA kubelet plugin
   starts first (e2e/harness/dra_plugin.py: registered with the kubelet, its ResourceSlice published)
   and runs until the outcomes are in;
1. when a scenario carries a Kyverno ClusterPolicy, Kyverno's admission controller starts first
   (e2e/harness/kyverno.py: its CRDs, then the process, out of cluster, its webhooks registered
   by itself) and every ClusterPolicy is Ready before step 2; then every scenario's namespace
   (labelled ``preflight-fidelity=true``) and prerequisites are created, then the webhook starts (``RunningWebhook`` on the host against the node's apiserver,
   ``mode: enforce``, the chart's defaults otherwise; its watch caches list the prerequisites at
   start-up, so nothing waits on a watch event; it is sent TrainJobs, AIPerfJobs and, with the
   chart's matchCondition rendered by ``helm template``, JobSets that no judged job owns: the
   JobSets Trainer and the AIPerf operator make are not sent). ``RunningWebhook`` rather than the chart: the
   verdicts are the same code, and it saves the image build and ``helm install`` (about a minute
   warm, several after a source change); e2e/test_node_chart.py covers the chart;
2. **verdict**: ``kubectl create --dry-run=server`` of each job, the webhook in ``enforce``
   mode: allowed (with its warnings) or denied (with its message). Dry runs store nothing, so
   every verdict sees the same pristine cluster;
3. **outcome**: every scenario namespace is labelled ``preflight.webhook.io/mode=audit`` (the
   per-namespace mode); for a job that was denied, its dry run is repeated until the webhook
   admits it (the webhook has seen the label); then every job is created for real, at once, and
   the runner watches them (one list of each kind per poll for all scenarios) until each is done
   or its bound passes (then: "never starts", with what held it). A TrainJob: its conditions
   Complete or Failed, pods, Kueue Workloads and events; pods Running or Succeeded at the bound
   count as "runs". A JobSet applied directly: its conditions Completed or Failed, then pods
   as for a TrainJob. An AIPerfJob: the operator's status, read as
   :func:`e2e.harness.aiperf_stack.aiperf_outcome` reads it: phase ``Completed`` = runs,
   ``Failed``/``Cancelled`` = fails (the operator's validation or preflight refused it, or the
   benchmark failed), anything else at the bound = never starts, pods running or not; its bound
   is longer (``AIPERF_BOUND_SECONDS``, 420 s: a benchmark is ~30 s alone and shares the node).
   A benchmark that failed after it started (the operator's "Controller container terminated
   before ...", its results fetch lost the race with the controller's shutdown, or its JobSet failed
   from a Job failure with no container that never ran), or whose pods
   all started but were not done at the bound (startup probes failing on the loaded node), is created
   again, up to ``AIPERF_RERUNS`` more times, and the last run is its outcome (the detail keeps
   the earlier ones): the whole matrix shares one 2-core node;
4. each scenario is classified: denied and the job would have run = **false deny**; admitted
   and the job fails or never starts = **miss**; admitted, runs, and its order of admission (below)
   contradicts the verdict = **wrong wait**; a scenario carrying a known limitation is listed under
   its name and not counted.

**Jobs that run first and hold the queue** (``Scenario.before``, issue 39): a Kueue row whose job
meets a ClusterQueue already in use names the jobs that use it. After step 1's setup, and before the
webhook starts, the runner creates them and waits (``BEFORE_TIMEOUT``) until each holds its queue:
Kueue admitted its Workload, a pod of it is Running, and the ClusterQueue's status counts it
(status.admittedWorkloads: the view the webhook reads), so every verdict meets the queue as Kueue
reports it. They sleep far past any bound (``WORKLOAD_SLEEP_SECONDS``) and are never judged. In step 3
the runner reads the job's Workload on every poll (``QueueOrder``): when Kueue
tried the job and kept it pending (QuotaReserved=False), the runner ends the ``before`` jobs (deletes
them) and waits for Kueue to admit it; a job Kueue admits while they still hold the queue did not wait
(what its ClusterQueue borrowed from its cohort then is kept: read from a watch of the ClusterQueues
started before the first create, ``ClusterQueueWatch``, not from a poll), and they are ended once its
outcome is in. The outcome carries that order (``while-held`` or ``after-held``, with the seconds from the job's
create) and the record keeps it; the webhook's "will wait" warning must be given exactly when the
order is ``after-held``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trustme
import yaml

from e2e.fidelity import record as rec
from e2e.fidelity.aiperf_scenarios import AIPERF_BOUND_SECONDS
from e2e.fidelity.dra_scenarios import DEVICES, needs_dra
from e2e.fidelity.imagepull_scenarios import (
    FOREIGN_INDEX_TAG,
    MULTIARCH_INDEX_TAG,
    NO_CREDENTIALS_TAG,
    PULL_PASSWORD,
    PULL_USER,
    REGISTRY_PLACEHOLDER,
    REGISTRY_REPOSITORY,
    REGISTRY_TAG,
    WRONG_CREDENTIALS_TAG,
    foreign_arch,
    needs_registry,
)
from e2e.fidelity.kyverno_scenarios import needs_kyverno, policy_names
from e2e.fidelity.scenarios import (
    KNOWN_LIMITATIONS,
    MATRIX_LABEL,
    NS_PREFIX,
    RESOLVED,
    RESOLVED_BY,
    SCENARIOS,
    Scenario,
)
from e2e.harness.aiperf_stack import TERMINAL_PHASES, aiperf_outcome, jobset_name
from e2e.harness.controlplane import ControlPlane
from e2e.harness.dra_plugin import DraPlugin
from e2e.harness.kyverno import Kyverno, kyverno_version
from e2e.harness.node import Node
from e2e.harness.registry import (
    Registry,
    containerd_hosts,
    manifest_entry,
    push_docker_archive,
    push_index,
    retag,
)
from e2e.harness.runner import RULES, RunningWebhook, chart_jobset_hook, findings_of
from e2e.harness.stack import Stack, versions
from webhook.config import PUBLIC_REGISTRIES

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "fidelity.md"
OUR_DENIAL = 'admission webhook "preflight.webhook.io" denied the request: '
#: how long the runner watches a TrainJob after the last create (AIPerfJobs: AIPERF_BOUND_SECONDS)
BOUND_SECONDS = 90.0
#: the label the pods of a JobSet carry with its name
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: the matrix's images are loaded into the node's containerd under `localhost/` (e2e/stack.sh,
#: Node.load_image): a registry reachable without credentials, so it is one of the publicRegistries
#: (configuration, as an operator would for a registry mirror; nothing in the code knows it)
WEBHOOK_CONFIG: dict[str, Any] = {
    "mode": "enforce",
    "secretTtlSeconds": 0,
    "publicRegistries": [*PUBLIC_REGISTRIES, "localhost"],
}


@dataclass
class Verdict:
    allowed: bool
    by: str  # "preflight" | "apiserver" (another admission plugin/webhook refused first)
    message: str
    warnings: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    kind: str  # runs | fails | never-starts | refused
    detail: str
    seconds: float
    #: a scenario with ``before`` jobs: the order of admission seen (WHILE_HELD, AFTER_HELD); else ""
    admission: str = ""


#: Kueue admitted the job while the scenario's ``before`` jobs still held the queue: it did not wait
WHILE_HELD = "while-held"
#: Kueue kept the job pending while they held it and admitted it only after they had ended: it waited
AFTER_HELD = "after-held"
#: the start of Kueue Capacity's "will wait" warning as kubectl shows it (webhook/models/kueue/wait.py
#: wait_message: '<Kind> "<name>" will wait in ClusterQueue ...')
WILL_WAIT = re.compile(r'^\[Kueue Capacity\] \S+ "[^"]+" will wait in ClusterQueue ')


def predicts_wait(verdict: Verdict) -> bool:
    """Whether the webhook told the user the job will wait in its ClusterQueue."""
    return any(WILL_WAIT.match(w) for w in verdict.warnings)


@dataclass
class Row:
    scenario: str
    note: str
    covers: str
    verdict: Verdict
    outcome: Outcome
    result: str  # ok | miss | false-deny | known:<name>
    known: str | None = None
    #: the checks whose warnings are about this job (Scenario.warns)
    warns: tuple[str, ...] = ()
    #: where the outcome comes from: "real" (observed on this run) or "record" (e2e/fidelity/outcomes.json)
    source: str = "real"
    #: when and on which commit the outcome was observed ("observed 2026-12-05 on abc1234"; "" for this run)
    provenance: str = ""

    def warned_by(self) -> list[str]:
        """The checks that warned, in order, once each (`[Check] text`)."""
        return list(dict.fromkeys(w[1 : w.index("]")] for w in self.verdict.warnings if w.startswith("[") and "]" in w))

    @property
    def would_run(self) -> bool:
        return self.outcome.kind == "runs"


#: the results that fail the matrix
BAD = ("miss", "false-deny", "wrong-wait")


def classify(verdict: Verdict, outcome: Outcome, known: str | None) -> str:
    """ok | miss | false-deny | wrong-wait, or known:<limitation> when a known limitation disagrees.
    wrong-wait: a job admitted that runs, whose order of admission (a scenario with ``before`` jobs)
    contradicts the verdict: warned "will wait" and admitted at once, or not warned and kept waiting."""
    would_run = outcome.kind == "runs"
    if verdict.by != "preflight" or outcome.kind == "refused":
        # the apiserver (or another webhook) refuses the job itself: the user sees it at apply
        res = "ok" if not verdict.allowed else ("ok" if outcome.kind == "refused" else "miss")
    elif verdict.allowed:
        res = "ok" if would_run else "miss"
    else:
        res = "false-deny" if would_run else "ok"
    if res == "ok" and outcome.admission and predicts_wait(verdict) != (outcome.admission == AFTER_HELD):
        # the order of admission says whether the job waited: "will wait" exactly when it did
        res = "wrong-wait"
    if known is not None:
        return f"known:{known}" if res != "ok" else "ok"
    return res


# --------------------------------------------------------------------------- phases


def kubectl_json(cp: ControlPlane, *args: str) -> Any:
    return json.loads(cp.kubectl("get", *args, "-o", "json", check=False, timeout=60).stdout or "{}")


def setup(cp: ControlPlane, scenarios: Sequence[Scenario]) -> None:
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS_PREFIX + "probe", "labels": MATRIX_LABEL}}
    ]
    seen: set[tuple[str, str]] = set()
    for s in scenarios:
        for o in s.objects():
            key = (o["kind"], o["metadata"]["name"] + "/" + o["metadata"].get("namespace", ""))
            if key not in seen:
                seen.add(key)
                objs.append(o)
    namespaces = [o for o in objs if o["kind"] == "Namespace"]
    cp.apply(namespaces)
    cp.apply([o for o in objs if o["kind"] != "Namespace"], "--server-side", "--field-manager=preflight-fidelity")
    # the controller-manager makes each namespace's default ServiceAccount: the pods and the
    # webhook's Dry Run check need it
    deadline = time.monotonic() + 60
    for ns in namespaces:
        name = ns["metadata"]["name"]
        while cp.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no default ServiceAccount in {name} after 60s")
            time.sleep(0.2)  # polling the apiserver for a condition


def ask(cp: ControlPlane, s: Scenario) -> Verdict:
    proc = cp.kubectl("create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(s.job_object()), check=False)
    warns = findings_of(proc.stderr)
    if proc.returncode == 0:
        return Verdict(True, "preflight", "", warns)
    err = proc.stderr.strip()
    if OUR_DENIAL in err:
        return Verdict(False, "preflight", err.split(OUR_DENIAL, 1)[1], warns)
    return Verdict(False, "apiserver", err.removeprefix("Error from server"), warns)


def to_audit(cp: ControlPlane, scenarios: Sequence[Scenario], verdicts: dict[str, Verdict]) -> None:
    for s in scenarios:
        cp.kubectl("label", "namespace", s.namespace, "preflight.webhook.io/mode=audit", "--overwrite")
    deadline = time.monotonic() + 60
    for s in scenarios:
        if verdicts[s.name].allowed or verdicts[s.name].by != "preflight":
            continue
        while (v := ask(cp, s)).by == "preflight" and not v.allowed:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the webhook still denies {s.name} 60s after its namespace was set to audit")
            time.sleep(0.2)  # polling the webhook for a condition (its namespace cache)


def _cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_ and c.get("status") == "True":
            return c
    return None


def _by_ns(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for it in items:
        out.setdefault(it["metadata"].get("namespace", ""), []).append(it)
    return out


# --------------------------------------------------------------------------- jobs that hold the queue

#: how long the runner waits for the ``before`` jobs to hold their queue (admitted, pods running, counted)
BEFORE_TIMEOUT = 180.0


def _owned(items: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    """The objects among ``items`` whose ownerReferences name ``kind``/``name`` (Kueue's Workload of a job)."""
    return [
        i
        for i in items
        if any(r.get("kind") == kind and r.get("name") == name for r in (i["metadata"].get("ownerReferences") or []))
    ]


def _admitted(wl: dict[str, Any]) -> bool:
    return _cond(wl, "Admitted") is not None


def _pending_message(wl: dict[str, Any]) -> str | None:
    """Kueue's message when its scheduler tried the Workload and kept it pending (QuotaReserved=False)."""
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c.get("type") == "QuotaReserved" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "pending")
    return None


def _not_holding(
    s: Scenario, wls: list[dict[str, Any]], pods: list[dict[str, Any]], cqs: dict[str, dict[str, Any]]
) -> str:
    """Why the ``before`` jobs of ``s`` do not hold their queue yet ("" when they do): each Workload
    Admitted, a pod of each Running, and each ClusterQueue's status (Kueue's own view, what the webhook
    reads) counting them in status.admittedWorkloads."""
    per_cq: dict[str, int] = {}
    for obj in s.before:
        kind, name = obj["kind"], obj["metadata"]["name"]
        wl = next(iter(_owned(wls, kind, name)), None)
        if wl is None or not _admitted(wl):
            return f'Kueue has not admitted {kind} "{name}"'
        if not any(
            (p["metadata"].get("labels") or {}).get(JOBSET_LABEL) == name
            and (p.get("status") or {}).get("phase") == "Running"
            for p in pods
        ):
            return f'no pod of {kind} "{name}" is Running'
        cq = str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")
        per_cq[cq] = per_cq.get(cq, 0) + 1
    for cq, n in per_cq.items():
        counted = int(((cqs.get(cq) or {}).get("status") or {}).get("admittedWorkloads") or 0)
        if counted < n:
            return f'ClusterQueue "{cq}" status counts {counted} admitted workloads, not {n}'
    return ""


def start_before(cp: ControlPlane, scenarios: Sequence[Scenario], timeout: float = BEFORE_TIMEOUT) -> None:
    """Create every scenario's ``before`` jobs (Scenario.before) and wait until they hold their queue
    (:func:`_not_holding`), before the webhook starts: it lists the ClusterQueues as Kueue reports them
    with these jobs admitted, and it judges none of them."""
    held = [s for s in scenarios if s.before]
    if not held:
        return
    for s in held:
        cp.kubectl("create", "-f", "-", input=yaml.safe_dump_all(s.before_objects()))
    deadline = time.monotonic() + timeout
    while True:
        wls = _by_ns(kubectl_json(cp, "workloads.kueue.x-k8s.io", "-A").get("items", []))
        pods = _by_ns(kubectl_json(cp, "pods", "-A").get("items", []))
        cqs = {c["metadata"]["name"]: c for c in kubectl_json(cp, "clusterqueues.kueue.x-k8s.io").get("items", [])}
        why = {s.name: _not_holding(s, wls.get(s.namespace, []), pods.get(s.namespace, []), cqs) for s in held}
        waiting = {n: w for n, w in why.items() if w}
        if not waiting:
            print(f"==> fidelity: the before jobs of {len(held)} scenarios hold their queues", file=sys.stderr)
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"before jobs not holding their queue after {timeout:.0f}s: {waiting}")
        time.sleep(1.0)  # polling the cluster for a condition (Kueue's admission, the pods, its status)


def end_before(cp: ControlPlane, s: Scenario) -> None:
    """End the scenario's ``before`` jobs: delete them (not waited for; Kueue releases their quota)."""
    cp.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", input=yaml.safe_dump_all(s.before_objects()))


@dataclass
class QueueOrder:
    """What the runner sees, poll by poll, of a scenario's job and the ``before`` jobs holding its queue:
    whether Kueue kept the job pending while they held it, when they were ended and gone, when the job
    was admitted (and to which ClusterQueue, beside how many of them); and, from the ClusterQueues'
    watch (:class:`ClusterQueueWatch`, :meth:`take_borrowing`), what its ClusterQueue borrowed from its
    cohort while it held the job and they still held the queue."""

    scenario: Scenario
    created: float
    pending: str | None = None
    released: float | None = None
    gone: float | None = None
    admitted: float | None = None
    admitted_while_held: bool = False
    #: the ClusterQueue Kueue admitted the job to, and how many ``before`` jobs it held then
    cq: str = ""
    holders: int = 0
    borrowed: str = ""

    def see(self, wls: list[dict[str, Any]], now: float) -> bool:
        """Take one poll's Workloads of the namespace; True when the ``before`` jobs are to be ended now:
        Kueue tried the job and kept it pending while they held the queue."""
        s = self.scenario
        holders = [w for o in s.before for w in _owned(wls, o["kind"], o["metadata"]["name"])]
        if self.released is not None and self.gone is None:
            if all(w["metadata"].get("deletionTimestamp") or _cond(w, "Finished") for w in holders):
                self.gone = now
        job = next(iter(_owned(wls, s.kind, s.job["metadata"]["name"])), None)
        if job is None:
            return False
        if self.admitted is None and _admitted(job):
            self.admitted, self.admitted_while_held = now, self.released is None
            self.cq = _cluster_queue(job)
            self.holders = sum(1 for w in holders if _admitted(w) and _cluster_queue(w) == self.cq)
        if self.admitted is None and self.released is None and self.pending is None:
            self.pending = _pending_message(job)
            return self.pending is not None
        return False

    def take_borrowing(self, versions: Sequence[tuple[float, dict[str, Any]]]) -> None:
        """What the job's ClusterQueue borrowed from its cohort while it held the job beside the
        ``before`` jobs, from every version of it the watch read (time read, object): the first version
        read before the runner ended them (if it did) whose status reserves quota for more workloads
        than those (status.reservingWorkloads: the job too) and borrows (:func:`_borrowed`)."""
        for t, cq in versions:
            if cq["metadata"]["name"] != self.cq or (self.released is not None and t >= self.released):
                continue
            reserving = int((cq.get("status") or {}).get("reservingWorkloads") or 0)
            if reserving > self.holders and (borrowed := _borrowed(cq)):
                self.borrowed = borrowed
                return

    @property
    def admission(self) -> str:
        if self.admitted is None:
            return ""
        if self.admitted_while_held:
            return WHILE_HELD
        return AFTER_HELD if self.pending is not None and self.gone is not None else ""

    def text(self) -> str:
        """The order of admission, for the row's detail (seconds from the job's create)."""
        names = " and ".join(f'{o["kind"]} "{o["metadata"]["name"]}"' for o in self.scenario.before)

        def at(t: float | None) -> str:
            return f"+{t - self.created:.0f} s" if t is not None else "never"

        if self.admission == WHILE_HELD:
            out = f"Kueue admitted it at {at(self.admitted)} while {names} held the queue"
            if self.borrowed:
                out += f", its ClusterQueue borrowing {self.borrowed} from its cohort"
            return out
        return (
            f"Kueue kept it pending while {names} held the queue ({clip(self.pending or 'never seen pending', 160)}); "
            f"the runner ended {names} at {at(self.released)}, gone at {at(self.gone)}; "
            f"Kueue admitted it at {at(self.admitted)}"
        )


def _cluster_queue(wl: dict[str, Any]) -> str:
    return str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")


def _borrowed(cq: dict[str, Any]) -> str:
    """What the ClusterQueue borrows from its cohort, by its status.flavorsReservation
    (apis/kueue/v1beta2/clusterqueue_types.go ResourceUsage.borrowed): ``cpu 100m of flavor "f"``."""
    out = []
    for f in (cq.get("status") or {}).get("flavorsReservation") or []:
        for r in f.get("resources") or []:
            if str(r.get("borrowed") or "0") != "0":
                out.append(f'{r.get("name")} {r.get("borrowed")} of flavor "{f.get("name")}"')
    return ", ".join(out)


class ClusterQueueWatch:
    """Every version of every ClusterQueue, each with the time it was read: ``kubectl get
    clusterqueues -w -o json`` (a list, then a watch from its resourceVersion) read by a thread, started
    before the jobs are created. What a ClusterQueue borrowed while it held a job is then seen whatever
    the moment of the runner's polls (:meth:`QueueOrder.take_borrowing`).

    Why a watch: in the whole matrix (make conformance on 02a65f4: 102 jobs, each poll lists every kind,
    seconds apart), the polls saw kueue-borrows-beside-running's Workload admitted at +63 s and the job
    complete at +71 s, and none read a ClusterQueue status borrowing for it. A poll reads the
    ClusterQueue once, after the Workloads; Kueue updates that status after it admits the Workload, and
    releases the job's quota once it completes: a status read a moment too early or too late shows no
    borrowing (which of the two it was, the record does not say). The watch sees every version. It lasts
    as long as the apiserver keeps a watch open (--min-request-timeout, 30 to 60 min), longer than
    the observation of the whole matrix."""

    def __init__(self, cp: ControlPlane, timeout: float = 30.0) -> None:
        self.cp, self.timeout = cp, timeout
        self._versions: list[tuple[float, dict[str, Any]]] = []
        self._read_one = threading.Condition()
        self._proc: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ClusterQueueWatch:
        argv = [str(self.cp.kubectl_path), f"--kubeconfig={self.cp.kubeconfig}",
                "get", "clusterqueues.kueue.x-k8s.io", "--watch", "-o", "json"]  # fmt: skip
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._thread = threading.Thread(target=self._read, args=(self._proc,), daemon=True)
        self._thread.start()
        # the list comes first (the scenarios' ClusterQueues exist since setup): the watch follows it
        if not self.listed(1):
            self.__exit__()
            raise RuntimeError(f"kubectl get clusterqueues --watch listed nothing in {self.timeout:.0f}s")
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        decoder, text = json.JSONDecoder(), ""
        for line in proc.stdout:  # the objects come indented, one after another
            text += line
            try:
                obj, end = decoder.raw_decode(text.lstrip())
            except ValueError:
                continue  # not a whole object yet
            text = text.lstrip()[end:]
            with self._read_one:
                self._versions.append((time.monotonic(), obj))
                self._read_one.notify_all()

    def listed(self, n: int) -> bool:
        """Whether ``n`` versions were read within the timeout (waits on the reader, no polling)."""
        with self._read_one:
            return self._read_one.wait_for(lambda: len(self._versions) >= n, self.timeout)

    def versions(self) -> list[tuple[float, dict[str, Any]]]:
        """The versions read so far, in order: (time.monotonic() when read, the ClusterQueue)."""
        with self._read_one:
            return list(self._versions)

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)
        if self._thread is not None:
            self._thread.join(10)


def _stuck_detail(pods: list[dict[str, Any]], workloads: list[dict[str, Any]], events: list[dict[str, Any]]) -> str:
    parts: list[str] = []
    for wl in workloads:
        for c in (wl.get("status") or {}).get("conditions") or []:
            if c.get("type") in ("QuotaReserved", "Admitted") and c.get("status") == "False" and c.get("message"):
                parts.append(f"Kueue Workload {c['type']}=False: {c['message']}")
        for ac in (wl.get("status") or {}).get("admissionChecks") or []:
            parts.append(f"AdmissionCheck {ac.get('name')}: {ac.get('state')}")
    if not workloads and not pods:
        parts.append("no pod created")
    for p in pods:
        st = p.get("status") or {}
        for c in st.get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                parts.append(f"pod {c.get('reason')}: {c.get('message', '')}")
        for cs in (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or []):
            w = (cs.get("state") or {}).get("waiting")
            if w and w.get("reason") not in (None, "ContainerCreating", "PodInitializing"):
                parts.append(f"container {cs['name']} {w['reason']}: {w.get('message', '')}")
    seen: set[str] = set()
    for e in sorted(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or ""):
        if e.get("type") == "Warning" and e.get("message") not in seen:
            seen.add(e["message"])
            obj = e.get("involvedObject") or {}
            parts.append(f"event {e.get('reason')} on {obj.get('kind')}: {e['message']}")
    uniq = list(dict.fromkeys(p.strip() for p in parts))
    return "; ".join(clip(x) for x in uniq[:4]) or "nothing reported"


def clip(text: str, limit: int = 240) -> str:
    """``text`` in at most ``limit`` characters: its start and its end around an ellipsis. A pull
    error wraps its cause last (containerd: 'failed to pull and unpack image ...: failed to resolve
    reference ...: ...: 401 Unauthorized'), so the end is kept as well as the start."""
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half]} … {text[len(text) - (limit - 3 - half) :]}"


def bound_of(s: Scenario, bound: float, aiperf_bound: float = AIPERF_BOUND_SECONDS) -> float:
    """How long the runner watches ``s`` after the creates: its own ``bound`` if it carries one,
    else ``bound`` for a TrainJob and ``aiperf_bound`` for an AIPerfJob (a benchmark takes ~30 s
    alone on the node, ~90 s beside the whole matrix)."""
    if s.bound is not None:
        return s.bound
    return aiperf_bound if s.kind == "AIPerfJob" else bound


def _trainjob_outcome(
    tj: dict[str, Any],
    pods: list[dict[str, Any]],
    last: bool,
    workloads: list[dict[str, Any]],
    events: list[dict[str, Any]],
) -> tuple[str, str] | None:
    """(kind, detail) of a TrainJob from its conditions; at the bound, pods Running or Succeeded
    count as "runs" (the workload may simply be slower than the bound)."""
    return _conditions_outcome(tj, "Complete", pods, last, workloads, events)


def _jobset_outcome(
    js: dict[str, Any],
    pods: list[dict[str, Any]],
    last: bool,
    events: list[dict[str, Any]],
) -> tuple[str, str] | None:
    """(kind, detail) of a JobSet applied directly, from the conditions JobSet's controller sets
    (sigs.k8s.io/jobset v0.12.0 api/jobset/v1alpha2: ``Completed``, ``Failed``); at the bound, its
    pods Running or Succeeded count as "runs", as for a TrainJob."""
    return _conditions_outcome(js, "Completed", pods, last, [], events)


def _conditions_outcome(
    obj: dict[str, Any],
    done_type: str,
    pods: list[dict[str, Any]],
    last: bool,
    workloads: list[dict[str, Any]],
    events: list[dict[str, Any]],
) -> tuple[str, str] | None:
    """The reading a TrainJob and a JobSet share: ``done_type`` or ``Failed`` true ends it; at the
    bound, pods Running or Succeeded are "runs", none "never-starts" with what held them."""
    done = _cond(obj, done_type)
    failed = _cond(obj, "Failed")
    if done:
        return "runs", f"{done_type}: {done.get('message', '')}".strip()
    if failed:
        return "fails", f"Failed ({failed.get('reason')}): {failed.get('message', '')}"
    if not last:
        return None
    running = [p for p in pods if (p.get("status") or {}).get("phase") in ("Running", "Succeeded")]
    if running:
        return "runs", f"{len(running)}/{len(pods)} pods Running or Succeeded, not {done_type} at the bound"
    return "never-starts", _stuck_detail(pods, workloads, events)


def _aiperfjob_outcome(
    job: dict[str, Any],
    pods: list[dict[str, Any]],
    jobset: dict[str, Any] | None,
    last: bool,
    events: list[dict[str, Any]],
) -> tuple[str, str] | None:
    """(kind, detail) of an AIPerfJob from the operator's status (:func:`aiperf_outcome`): only
    the phase ``Completed`` is "runs"; at the bound anything not terminal is "never-starts", pods
    running or not, with what holds it."""
    o = aiperf_outcome(job, pods, jobset, events)
    if o.terminal:
        bad = [
            f"{t} ({c.get('reason')}): {c.get('message', '')}"
            for t, c in o.conditions.items()
            if c.get("status") == "False"
        ]
        detail = f"phase {o.phase}: {o.message}" if o.message else f"phase {o.phase}"
        if o.kind != "runs" and bad:
            detail += "; " + "; ".join(bad)
        if o.kind == "fails" and JOB_FAILURES in f"{o.message} {o.jobset}" and not _never_started(pods):
            ran = _terminations(pods)
            stuck = _stuck_detail(pods, [], events) if events else ""
            detail = f"{STARTED_THEN_FAILED}: {detail}" + "".join(
                f"; {x}" for x in (ran, stuck) if x and x != "nothing reported"
            )
        return o.kind, detail
    if not last:
        return None
    held = f"phase {o.phase or '-'} at the bound; pods {o.pods or '-'}; JobSet {o.jobset or '-'}"
    if (
        pods
        and len(pods) >= _expected_pods(jobset)
        and all((p.get("status") or {}).get("phase") in ("Running", "Succeeded") for p in pods)
    ):
        held = f"{STARTED_AT_BOUND}: {held}"
    stuck = _stuck_detail(pods, [], events) if pods or events else ""
    return "never-starts", held + ("; " + stuck if stuck and stuck != "nothing reported" else "")


def observe(
    cp: ControlPlane, scenarios: Sequence[Scenario], bound: float, aiperf_bound: float = AIPERF_BOUND_SECONDS
) -> dict[str, Outcome]:
    """Create every job at once and watch them until each finishes or its bound (:func:`bound_of`)
    passes. Each poll lists each kind once for all scenarios: TrainJobs, AIPerfJobs, pods (and
    JobSets while an AIPerfJob is pending); Kueue Workloads and events only when a job reaches its
    bound, or an AIPerfJob is terminal (its Warning events go with the detail). A JobSet applied
    directly is read from the same list of JobSets and its pods (label ``JOBSET_LABEL``). With
    ``before`` jobs, the ClusterQueues are watched from before the first create (:class:`ClusterQueueWatch`)."""
    with contextlib.ExitStack() as stack:
        watch = stack.enter_context(ClusterQueueWatch(cp)) if any(s.before for s in scenarios) else None
        return _observe(cp, scenarios, bound, aiperf_bound, watch)


def _observe(
    cp: ControlPlane, scenarios: Sequence[Scenario], bound: float, aiperf_bound: float, watch: ClusterQueueWatch | None
) -> dict[str, Outcome]:
    outcomes: dict[str, Outcome] = {}
    t0 = time.monotonic()
    started: dict[str, float] = {}
    orders: dict[str, QueueOrder] = {}  # the scenarios with before jobs holding their queue
    for s in scenarios:
        started[s.name] = time.monotonic()
        if s.before:
            orders[s.name] = QueueOrder(s, started[s.name])
        proc = cp.kubectl("create", "-f", "-", input=yaml.safe_dump(s.job_object()), check=False)
        if proc.returncode != 0:
            outcomes[s.name] = Outcome("refused", proc.stderr.strip().removeprefix("Error from server"), 0.0)
    pending = [s for s in scenarios if s.name not in outcomes]
    t_created = time.monotonic()
    deadlines = {s.name: t_created + bound_of(s, bound, aiperf_bound) for s in pending}
    rerun: dict[str, list[str]] = {}  # scenario -> the earlier runs' failures, for an AIPerfJob run again
    while pending:
        now = time.monotonic()
        kinds = {s.kind for s in pending}
        tjs = (
            _by_ns(kubectl_json(cp, "trainjobs.trainer.kubeflow.org", "-A").get("items", []))
            if "TrainJob" in kinds
            else {}
        )
        ajs: dict[str, list[dict[str, Any]]] = {}
        jss: dict[str, list[dict[str, Any]]] = {}
        if "AIPerfJob" in kinds:
            ajs = _by_ns(kubectl_json(cp, "aiperfjobs.aiperf.nvidia.com", "-A").get("items", []))
        if kinds & {"AIPerfJob", "JobSet"}:
            jss = _by_ns(kubectl_json(cp, "jobsets.jobset.x-k8s.io", "-A").get("items", []))
        pods = _by_ns(kubectl_json(cp, "pods", "-A").get("items", []))
        lasts = {s.name for s in pending if now >= deadlines[s.name]}
        ai_done = any(s.kind == "AIPerfJob" and _aiperf_terminal(ajs.get(s.namespace, [])) for s in pending)
        wls: dict[str, list[dict[str, Any]]] = {}
        evs: dict[str, list[dict[str, Any]]] = {}
        held = [s for s in pending if s.name in orders]
        if lasts or held:
            wls = _by_ns(kubectl_json(cp, "workloads.kueue.x-k8s.io", "-A").get("items", []))
        for s in held:  # the order of admission: each poll, the jobs' Workloads
            if orders[s.name].see(wls.get(s.namespace, []), now):
                end_before(cp, s)
                orders[s.name].released = now
        if lasts or ai_done:
            evs = _by_ns(kubectl_json(cp, "events", "-A").get("items", []))
        still = []
        for s in pending:
            ns, last = s.namespace, s.name in lasts
            res: tuple[str, str] | None
            if s.kind == "AIPerfJob":
                job = next(iter(ajs.get(ns, [])), {})
                js_name = jobset_name(s.job["metadata"]["name"])
                js = next((j for j in jss.get(ns, []) if j["metadata"]["name"] == js_name), None)
                ps = [p for p in pods.get(ns, []) if (p["metadata"].get("labels") or {}).get(JOBSET_LABEL) == js_name]
                res = _aiperfjob_outcome(job, ps, js, last, evs.get(ns, []))
            elif s.kind == "JobSet":
                name = s.job["metadata"]["name"]
                js = next((j for j in jss.get(ns, []) if j["metadata"]["name"] == name), {})
                ps = [p for p in pods.get(ns, []) if (p["metadata"].get("labels") or {}).get(JOBSET_LABEL) == name]
                res = _jobset_outcome(js, ps, last, evs.get(ns, []))
            elif s.name in orders:  # the namespace holds the before jobs too: only the job's own objects
                name = s.job["metadata"]["name"]
                tj = next((j for j in tjs.get(ns, []) if j["metadata"]["name"] == name), {})
                ps = [p for p in pods.get(ns, []) if (p["metadata"].get("labels") or {}).get(JOBSET_LABEL) == name]
                res = _trainjob_outcome(tj, ps, last, _owned(wls.get(ns, []), s.kind, name), evs.get(ns, []))
            else:
                tj = next(iter(tjs.get(ns, [])), {})
                res = _trainjob_outcome(tj, pods.get(ns, []), last, wls.get(ns, []), evs.get(ns, []))
            if res is None:
                still.append(s)
            elif s.kind == "AIPerfJob" and len(rerun.get(s.name, ())) < AIPERF_RERUNS and crashed_after_start(res):
                # the benchmark started and its controller died mid-run (the node is shared by
                # the whole matrix): one more run says whether the job itself is at fault
                rerun.setdefault(s.name, []).append(res[1])
                recreate_aiperfjob(cp, s)
                deadlines[s.name] = time.monotonic() + bound_of(s, bound, aiperf_bound)
                still.append(s)
            else:
                detail, admission = res[1], ""
                if s.name in rerun:
                    earlier = "; ".join(f"run {i + 1}: {d}" for i, d in enumerate(rerun[s.name]))
                    detail += f" (run {len(rerun[s.name]) + 1}; {earlier})"
                if (order := orders.get(s.name)) is not None:
                    assert watch is not None
                    order.take_borrowing(watch.versions())
                    detail, admission = f"{detail}; {order.text()}", order.admission
                    if order.released is None:
                        end_before(cp, s)  # the outcome is in: they hold nothing any more
                outcomes[s.name] = Outcome(res[0], detail, time.monotonic() - started[s.name], admission)
        pending = still
        if pending:
            time.sleep(2.0)  # polling the cluster: one list of each kind for all scenarios
    print(f"==> fidelity: observed {len(scenarios)} jobs in {time.monotonic() - t0:.0f}s", file=sys.stderr)
    return outcomes


#: the operator's words when the benchmark's controller container ended before its final export
#: (aiperf 0.13.0 operator/handlers/monitor.py, _salvage_terminated_controller_results): the pods
#: were admitted, scheduled and started; the run itself died
CONTROLLER_TERMINATED = "Controller container terminated before"
#: the operator's condition when its HTTP fetch of a finished benchmark's results lost the race with
#: the controller's shutdown and its retry budget ran out (aiperf 0.13.0 operator/handlers/
#: _completion_retry.py and _completion_fetch.py, "Failed to fetch results"): the benchmark ran
RESULTS_FETCH_FAILED = "(ResultsFetchFailed)"
#: the operator's condition when its health check of the job's endpoint failed at create (aiperf 0.13.0
#: operator/handlers/create.py: EndpointReachable False, reason EndpointUnreachable; it runs the
#: benchmark anyway): a run that then dies failed on the job's own endpoint, not on the shared node,
#: and fails every run (aiperf-endpoint-no-ready: ~300 s a run, up to 936 s with its reruns in CI)
ENDPOINT_UNREACHABLE = "(EndpointUnreachable)"


#: the runner's words for an AIPerfJob whose pods were all admitted, scheduled and started, but whose
#: benchmark was not done at the bound: on the loaded node its containers failed their startup probes
#: (CI, aiperf-kyverno-pods-env-compliant: "Startup probe failed ... connect: connection refused",
#: phase Running after 456 s); run again like a benchmark that died after its start
STARTED_AT_BOUND = "pods started, benchmark not done"


#: JobSet's condition message when a child Job failed (jobset v0.12 pkg/constants/constants.go
#: FailedJobsMessage, with " (first failed job: <name>)" appended): a Job fails only once one of its
#: pods ran and failed (or hit its deadline), after admission, scheduling and the image pull
JOB_FAILURES = "jobset failed due to one or more job failures"

#: the runner's words for an AIPerfJob whose JobSet failed from a Job failure while none of its pods
#: waited on a container that never started: on the loaded node a controller container killed by its
#: failing startup probe (CI, aiperf-kyverno-pods-env-compliant, three runs of the matrix in a row,
#: "first failed job: aiperf-bench-controller-0" after 319 s); run again like one that died mid-run
STARTED_THEN_FAILED = "pods started, then failed"


def _never_started(pods: list[dict[str, Any]]) -> bool:
    """Whether a pod has a container that never ran: still waiting on anything but its turn (an
    image pull, a missing Secret key), or ended in a start error (kubelet ``StartError``,
    ``ContainerCannotRun``). A failed Job's pods may be gone already: none is not "never"."""
    for p in pods:
        for cs in (p.get("status") or {}).get("containerStatuses") or []:
            state = cs.get("state") or {}
            w = state.get("waiting")
            if w and w.get("reason") not in (None, "ContainerCreating", "PodInitializing") and not cs.get("lastState"):
                return True
            term = state.get("terminated") or (cs.get("lastState") or {}).get("terminated") or {}
            if term.get("reason") in ("StartError", "ContainerCannotRun"):
                return True
    return False


def _terminations(pods: list[dict[str, Any]]) -> str:
    """How the job's containers ended (``pod/container reason exit N``), restarts included: why a
    run that started then failed, in the row's detail."""
    out: list[str] = []
    for p in pods:
        for cs in (p.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")
            if term:
                restarts = f", {cs['restartCount']} restarts" if cs.get("restartCount") else ""
                out.append(
                    f"{p['metadata']['name']}/{cs['name']} {term.get('reason')} exit {term.get('exitCode')}{restarts}"
                )
    return clip("containers: " + ", ".join(out)) if out else ""


#: how many more runs an AIPerfJob gets after a failure past its start (:func:`crashed_after_start`):
#: beside ~90 scenarios on the 2-CPU node a controller twice failed its startup probe and ran alone
#: (e2e/fidelity/dra_scenarios.py good-dra-aiperf); a job at fault fails every run
AIPERF_RERUNS = 2


def _expected_pods(jobset: dict[str, Any] | None) -> int:
    """How many pods the JobSet's Jobs run at once: the sum over its replicatedJobs of replicas ×
    parallelism (jobset v0.12 api: replicas defaults to 1; batch/v1 Job: parallelism to 1); 0 when
    the JobSet is not known. Pods that all run but are fewer than that did not all start: one was
    never created (CI, aiperf-pods-quota: the controller pod refused by a pods quota of 1, the worker
    running; run twice more for nothing, 1,236 s)."""
    total = 0
    for rj in ((jobset or {}).get("spec") or {}).get("replicatedJobs") or []:
        spec = ((rj.get("template") or {}).get("spec")) or {}
        replicas, parallelism = rj.get("replicas", 1), spec.get("parallelism", 1)
        if isinstance(replicas, int) and isinstance(parallelism, int):
            total += replicas * parallelism
    return total


def crashed_after_start(res: tuple[str, str]) -> bool:
    """An AIPerfJob outcome that failed, or was not done at its bound, after its pods started: the one
    case the runner runs again (a job at fault fails every run; admission and scheduling are what the
    matrix judges, and the last run is the outcome). Not when the operator found the job's endpoint
    unreachable before the run: that job is at fault."""
    if ENDPOINT_UNREACHABLE in res[1]:
        return False
    if res[0] == "never-starts":
        return res[1].startswith(STARTED_AT_BOUND)
    return res[0] == "fails" and (
        res[1].startswith(STARTED_THEN_FAILED) or CONTROLLER_TERMINATED in res[1] or RESULTS_FETCH_FAILED in res[1]
    )


def recreate_aiperfjob(cp: ControlPlane, s: Scenario) -> None:
    """Delete the scenario's AIPerfJob, wait until it and its JobSet are gone, create it again."""
    name, ns = s.job["metadata"]["name"], s.namespace
    cp.kubectl("delete", "aiperfjobs.aiperf.nvidia.com", name, "-n", ns, "--wait=true", "--timeout=120s", check=False)
    cp.kubectl(
        "wait", "--for=delete", f"jobsets.jobset.x-k8s.io/{jobset_name(name)}", "-n", ns, "--timeout=120s", check=False
    )
    cp.kubectl("create", "-f", "-", input=yaml.safe_dump(s.job_object()))


def _aiperf_terminal(jobs: list[dict[str, Any]]) -> bool:
    return any(((j.get("status") or {}).get("phase") or "") in TERMINAL_PHASES for j in jobs)


@contextlib.contextmanager
def image_registry(
    node: Node, scenarios: Sequence[Scenario], workload_archive: Path
) -> Iterator[tuple[list[Scenario], dict[str, Any]]]:
    """The Image Pull rows' registry (e2e/fidelity/imagepull_scenarios.py), when a scenario names it:
    the CNCF distribution registry on the node's bridge (TLS from its own CA, htpasswd), the workload
    image pushed to it, containerd given its CA (``<address>/ca.crt``); yields the scenarios with its address
    in place of the placeholder and the webhook's configuration asking only it (registryAccess
    allowlist, its CA as caFile). Without such a scenario: the scenarios and WEBHOOK_CONFIG as they are."""
    if not needs_registry(list(scenarios)):
        yield list(scenarios), WEBHOOK_CONFIG
        return
    assert node.state_dir is not None
    users = {PULL_USER: PULL_PASSWORD}
    with Registry(node.state_dir / "fidelity-registry", trustme.CA(), users, host=node.bridge_ip) as reg:
        push_images(reg, workload_archive)
        containerd_hosts(reg, node.registry_hosts_dir)
        access = {"mode": "allowlist", "allowlist": [reg.address], "caFile": str(reg.ca_file),
                  "internalRegistries": [reg.address]}  # fmt: skip
        print(f"==> fidelity: registry on {reg.address}, {REGISTRY_REPOSITORY}:{REGISTRY_TAG} pushed", file=sys.stderr)
        yield [with_registry(s, reg.address) for s in scenarios], {**WEBHOOK_CONFIG, "registryAccess": access}


def push_images(reg: Registry, workload_archive: Path) -> None:
    """What the Image Pull rows pull: the workload image as ``REGISTRY_TAG``, its manifest again under
    each credential row's own tag, and two OCI indexes: one over a hand-made manifest for an
    architecture other than the workload's (the node's) only, one over the workload's manifest and that.

    The pushed workload image is a copy with a config, hence an image ID, of its own (push_docker_archive,
    e2e/harness/registry.py pushed_config): the kubelet keys the credentials it pulled an image with by
    image ID (k8s.io/kubernetes pkg/kubelet/images/pullmanager, KEP-2535), so a row pulling the copy with
    its Secret leaves every other row's ``localhost/preflight/workload:local`` preloaded."""
    repo = REGISTRY_REPOSITORY
    push_docker_archive(reg, repo, REGISTRY_TAG, workload_archive)
    for tag in (NO_CREDENTIALS_TAG, WRONG_CREDENTIALS_TAG):
        retag(reg, repo, REGISTRY_TAG, tag)
    own = manifest_entry(reg, repo, REGISTRY_TAG)
    foreign = [(own["platform"]["os"], foreign_arch(own["platform"]["architecture"]))]
    push_index(reg, repo, FOREIGN_INDEX_TAG, foreign)
    push_index(reg, repo, MULTIARCH_INDEX_TAG, foreign, entries=[own])


def with_registry(s: Scenario, address: str) -> Scenario:
    """``s`` with the registry's host:port wherever its job and prerequisites name the placeholder."""

    def sub(obj: Any) -> Any:
        return json.loads(json.dumps(obj).replace(REGISTRY_PLACEHOLDER, address))

    return dataclasses.replace(s, job=sub(s.job), prereqs=sub(s.prereqs))


def run_matrix(
    cp: ControlPlane,
    scenarios: Sequence[Scenario],
    bound: float = BOUND_SECONDS,
    aiperf_bound: float = AIPERF_BOUND_SECONDS,
    config: dict[str, Any] | None = None,
    recorded: dict[str, Outcome] | None = None,
) -> list[Row]:
    """Set up every scenario, start the jobs that hold a queue first (``before``), ask the webhook for
    every verdict, observe the real outcome of each scenario not in ``recorded`` (the record's outcomes,
    by scenario name), classify every one."""
    cluster_objects = [o for s in scenarios for o in s.cluster_prereqs]
    with contextlib.ExitStack() as engines:
        # a real policy engine when a scenario has its policies: Kyverno's CRDs before the
        # ClusterPolicies, every policy Ready before the verdicts; it runs until the outcomes are in
        kyverno = engines.enter_context(Kyverno(cp)) if needs_kyverno(cluster_objects) else None
        setup(cp, scenarios)
        if kyverno is not None:
            kyverno.wait_policies(dict.fromkeys(policy_names(cluster_objects)))
        start_before(cp, scenarios)
        return _judge_and_observe(cp, scenarios, bound, aiperf_bound, config or WEBHOOK_CONFIG, recorded or {})


def _judge_and_observe(
    cp: ControlPlane,
    scenarios: Sequence[Scenario],
    bound: float,
    aiperf_bound: float,
    config: dict[str, Any],
    recorded: dict[str, Outcome],
) -> list[Row]:
    # the chart's JobSet entry: its rules, and its matchCondition that skips a JobSet a judged job owns
    # (one hook with both, as e2e/test_jobset_kind.py: no scenario's TrainJob or AIPerfJob has an owner)
    hook = chart_jobset_hook(cp)
    owned = [c for c in hook.get("matchConditions") or [] if c["name"] == "not-owned-by-a-judged-job"]
    if not owned:
        raise RuntimeError(f"the chart's {hook['name']} has no matchCondition not-owned-by-a-judged-job")
    with RunningWebhook(
        cp,
        vwc_name="preflight-fidelity",
        config=config,
        namespace_selector={"matchLabels": MATRIX_LABEL},
        probe_namespace=NS_PREFIX + "probe",
        rules=[*RULES, *hook["rules"]],
        match_conditions=owned,
    ):
        verdicts = {s.name: ask(cp, s) for s in scenarios}
        real = [s for s in scenarios if s.name not in recorded]
        outcomes: dict[str, Outcome] = {}
        if real:
            to_audit(cp, real, verdicts)
            outcomes = observe(cp, real, bound, aiperf_bound)
    rows = []
    for s in scenarios:
        v, o = verdicts[s.name], recorded.get(s.name) or outcomes[s.name]
        source = "record" if s.name in recorded else "real"
        rows.append(Row(s.name, s.note, s.covers, v, o, classify(v, o, s.known), s.known, s.warns, source))
    return rows


# --------------------------------------------------------------------------- the document


def _cell(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def render(rows: Sequence[Row], timings: dict[str, float], missing: Sequence[str] = ()) -> str:
    """docs/fidelity.md: ``rows`` (each outcome with its provenance), ``timings`` of the run that
    observed them, and the scenarios ``missing`` from the record."""
    v = versions()
    counts = {k: sum(1 for r in rows if r.result == k) for k in ("ok", "miss", "false-deny", "wrong-wait")}
    known = sum(1 for r in rows if r.result.startswith("known:"))
    runs = sum(1 for r in rows if r.would_run)
    denied = sum(1 for r in rows if not r.verdict.allowed)
    out = [
        "# Fidelity: the webhook's verdict against the real stack's outcome",
        "",
        "Generated from the record of real outcomes, `e2e/fidelity/outcomes.json`, which `make conformance` "
        "rewrites (`python -m e2e.fidelity.run --all-real`: every scenario run for real; root; the real node "
        "with CoreDNS, the JobSet "
        f"{v['JOBSET_VERSION']}, Trainer {v['TRAINER_VERSION']} and Kueue {v['KUEUE_VERSION']} "
        f"controllers, Kyverno {v['KYVERNO_VERSION']}'s admission controller (e2e/harness/kyverno.py) and the AIPerf {v['AIPERF_VERSION']} operator with a stand-in endpoint (fakellm "
        f"{v['FAKELLM_VERSION']}), Kubernetes {v['KUBERNETES_VERSION']}); do not edit by hand. The "
        "scenarios are `e2e/fidelity/scenarios.py` (TrainJobs), `e2e/fidelity/aiperf_scenarios.py` "
        "(AIPerfJobs), `e2e/fidelity/policy_scenarios.py` (ValidatingAdmissionPolicies, LimitRanges), "
        "`e2e/fidelity/kyverno_scenarios.py` (Kyverno ClusterPolicies), `e2e/fidelity/jobset_scenarios.py` "
        "(JobSets applied directly), `e2e/fidelity/dra_scenarios.py` (DRA device claims, allocated from the "
        "devices of the node's DRA kubelet plugin, e2e/harness/dra_plugin.py) and "
        "`e2e/fidelity/imagepull_scenarios.py` (images from a registry on the node's bridge); how a run works "
        "is the docstring of `e2e/fidelity/run.py`; "
        "`e2e/test_fidelity.py` (`make test`) computes every verdict afresh on the real stack, compares it "
        "with the recorded outcome whose digest (the scenario's objects and the stack's versions and images, "
        "`e2e/fidelity/record.py`) matches, runs for real only the scenarios with none, and fails on any miss "
        "or false deny. Each outcome below says when and on which commit it was observed; the verdict is the "
        "one the webhook gave on that run.",
        "",
        "For each scenario the webhook (mode `enforce`) gives its verdict on a server-side dry run; "
        "then the job is created with the webhook in `audit` mode and the real controllers, scheduler "
        f"and kubelet run it, watched for at most {BOUND_SECONDS:.0f} s (a TrainJob: Complete or Failed; "
        "a JobSet: Completed or Failed; pods running at the bound count as running) or "
        f"{AIPERF_BOUND_SECONDS:.0f} s (an AIPerfJob: runs = the operator's phase Completed, fails = "
        "Failed or Cancelled, never starts = anything else at the bound, pods running or not). **miss**: "
        "admitted, and the job fails or never starts. **false deny**: denied, and the job runs. A scenario "
        "with jobs that run first and hold its Kueue queue (`Scenario.before`) also shows the order of "
        "admission the runner saw: **wrong wait**: the job was warned that it will wait and Kueue admitted it "
        "at once, or it was not warned and Kueue kept it pending until they ended. Every "
        "warning is shown: a job carries only the warnings about itself that its scenario declares "
        "(`Scenario.warns`), and `e2e/test_fidelity.py` fails on any other (the images' registry "
        "`localhost` is configured in `publicRegistries`; Dry Run reaches every admission layer behind "
        "Kueue's webhooks, see dry-run-blinded below).",
        "",
        f"**{len(rows)} scenarios: {runs} run, {len(rows) - runs} fail or never start; the webhook denies "
        f"{denied}. {counts['miss']} misses, {counts['false-deny']} false denies, {counts['wrong-wait']} wrong "
        f"waits, {known} known limitations.**",
        "",
        "| scenario | what | real outcome | observed | verdict (enforce) | |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.verdict.allowed:
            checks = r.warned_by()
            rest = list(r.verdict.warnings)
            verdict = "admitted"
            if checks:
                verdict += ", warned by " + ", ".join(dict.fromkeys(checks))
            if rest:
                verdict += ": " + _cell(" / ".join(rest), 300)
        elif r.verdict.by == "preflight":
            verdict = "**denied**: " + _cell(r.verdict.message.split("\n", 1)[-1], 300)
        else:
            verdict = "refused by the apiserver before the webhook's answer counts: " + _cell(r.verdict.message, 200)
        outcome = f"**{r.outcome.kind}** ({r.outcome.seconds:.0f} s): {_cell(r.outcome.detail, 300)}"
        mark = {"ok": "ok", "miss": "**MISS**", "false-deny": "**FALSE DENY**", "wrong-wait": "**WRONG WAIT**"}.get(
            r.result, r.result
        )
        seen = r.provenance.removeprefix("observed ") or "this run"
        out.append(f"| `{r.scenario}` | {_cell(r.note, 160)} | {outcome} | {seen} | {verdict} | {mark} |")
    if missing:
        out += ["", "Not in the record (never run for real): " + ", ".join(f"`{m}`" for m in missing) + "."]
    out += ["", "## Known limitations", ""]
    for name, text in KNOWN_LIMITATIONS.items():
        used = [r.scenario for r in rows if r.known == name]
        out.append(f"- **{name}** ({', '.join(f'`{u}`' for u in used) or 'no scenario'}): {text}")
    out += ["", "## Found by earlier runs, since fixed", ""]
    for name, text in RESOLVED.items():
        out.append(f"- **{name}** (fixed by {RESOLVED_BY[name]}): {text}")
    out += ["", "## The run that wrote the record", ""]
    for k, val in timings.items():
        out.append(f"- {k}: {val:.0f} s")
    out.append("")
    return "\n".join(out)


def select(*ks: str) -> list[Scenario]:
    """The scenarios whose name contains one of ``ks`` (the whole matrix for none or "")."""
    if not any(ks):
        return list(SCENARIOS)
    return [s for s in SCENARIOS if any(k and k in s.name for k in ks)]


# --------------------------------------------------------------------------- the record


def observation(
    s: Scenario, bound: float = BOUND_SECONDS, aiperf_bound: float = AIPERF_BOUND_SECONDS
) -> dict[str, Any]:
    """How the runner observes ``s`` (part of its digest): how long it watches it, how many more
    runs an AIPerfJob gets after a failure past its start."""
    return {"bound": bound_of(s, bound, aiperf_bound), "reruns": AIPERF_RERUNS if s.kind == "AIPerfJob" else 0}


def digests(
    scenarios: Sequence[Scenario],
    bound: float = BOUND_SECONDS,
    aiperf_bound: float = AIPERF_BOUND_SECONDS,
    stack: str | None = None,
) -> dict[str, str]:
    """Each scenario's digest (e2e/fidelity/record.py) by name, of the scenarios as the table holds
    them: before the registry's address replaces ``REGISTRY_PLACEHOLDER``."""
    stack = stack if stack is not None else rec.stack_digest()
    return {s.name: rec.scenario_digest(s, observation(s, bound, aiperf_bound), stack) for s in scenarios}


def kyverno_installed() -> bool:
    """Whether Kyverno's admission controller is built (``e2e/build.sh kyverno``: ``make conformance``
    builds it, ``make test`` does not, 10–16 min cold); the path e2e/harness/kyverno.py ``build`` checks. The
    tests of ``make test`` that need Kyverno run only where it is (this matrix's rows, test_admitted_live.py).
    Not in e2e/harness/kyverno.py: that file is part of the stack digest (record.py STACK_FILES)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "preflight-webhook"
    return (root / f"kyverno-{kyverno_version()}" / "bin" / "kyverno").is_file()


def needs_kyverno_scenario(s: Scenario) -> bool:
    return needs_kyverno([*s.cluster_prereqs, *s.prereqs])


def _mask(text: str, address: str | None) -> str:
    """``text`` with the registry's address (a free port on the node's bridge) as the placeholder."""
    return text.replace(address, REGISTRY_PLACEHOLDER) if address else text


@dataclass
class MatrixRun:
    """What one run of the matrix gives: the rows, the timings, each scenario's digest, the scenarios
    skipped (a component absent) and the registry's address on the node (None: no registry)."""

    rows: list[Row]
    timings: dict[str, float]
    digests: dict[str, str]
    skipped: list[str] = field(default_factory=list)
    registry: str | None = None
    stack: str = ""

    @property
    def compared(self) -> list[str]:
        """The scenarios whose verdict was compared with a recorded outcome."""
        return [r.scenario for r in self.rows if r.source == "record"]

    @property
    def real(self) -> list[str]:
        """The scenarios run for real on this run."""
        return [r.scenario for r in self.rows if r.source == "real"]

    def summary(self) -> str:
        out = (
            f"fidelity: {len(self.rows)} verdicts; {len(self.compared)} compared with the recorded outcome "
            f"(e2e/fidelity/outcomes.json), {len(self.real)} run for real"
        )
        if self.real:
            out += " (no outcome recorded for their digest): " + ", ".join(self.real)
        if self.skipped:
            out += f"; {len(self.skipped)} skipped, Kyverno not built (judged only in make conformance): " + ", ".join(
                self.skipped
            )
        return out

    def recorded(self, record: rec.Record, *, when: str, commit: str, rewrite: bool = False) -> rec.Record:
        """``record`` with the outcomes run for real on this run (``rewrite``: only those)."""
        entries = {} if rewrite else dict(record.entries)
        for r in self.rows:
            if r.source != "real":
                continue
            verdict = asdict(r.verdict)
            verdict["message"] = _mask(verdict["message"], self.registry)
            verdict["warnings"] = [_mask(w, self.registry) for w in verdict["warnings"]]
            entries[r.scenario] = rec.Entry(
                digest=self.digests[r.scenario],
                kind=r.outcome.kind,
                detail=_mask(r.outcome.detail, self.registry),
                seconds=r.outcome.seconds,
                observed=when,
                commit=commit,
                verdict=verdict,
                admission=r.outcome.admission,
            )
        timings = dict(self.timings) if rewrite else record.timings
        return rec.Record(entries, self.stack or record.stack, timings)


def rows_from_record(
    record: rec.Record, scenarios: Sequence[Scenario], now: dict[str, str] | None = None
) -> tuple[list[Row], list[str]]:
    """The rows docs/fidelity.md shows, from the record alone: each recorded outcome with the verdict
    of its run and its provenance (``stale`` when the scenario's digest ``now`` is another); and the
    scenarios the record lacks."""
    rows: list[Row] = []
    missing: list[str] = []
    for s in scenarios:
        e = record.entries.get(s.name)
        if e is None:
            missing.append(s.name)
            continue
        v = Verdict(**e.verdict) if e.verdict else Verdict(True, "preflight", "", [])
        o = Outcome(e.kind, e.detail, e.seconds, e.admission)
        stale = now is not None and now.get(s.name) != e.digest
        prov = e.provenance() + (" (stale: the scenario or the stack changed since)" if stale else "")
        rows.append(Row(s.name, s.note, s.covers, v, o, classify(v, o, s.known), s.known, s.warns, "record", prov))
    return rows, missing


def render_record(record: rec.Record, scenarios: Sequence[Scenario] = SCENARIOS) -> str:
    """docs/fidelity.md from the record."""
    rows, missing = rows_from_record(record, scenarios, digests(scenarios))
    return render(rows, record.timings, missing)


def run_on_node(
    node: Node,
    scenarios: Sequence[Scenario],
    bound: float = BOUND_SECONDS,
    aiperf_bound: float = AIPERF_BOUND_SECONDS,
    *,
    record: rec.Record | None = None,
    kyverno: bool | None = None,
) -> MatrixRun:
    """On a started node: the stack (with the AIPerf operator), then the matrix (the CLI and
    e2e/test_fidelity*.py share it). ``record``: the recorded outcomes; a scenario with one for its
    digest is not run for real (None: every scenario is). ``kyverno``: whether the scenarios that
    need Kyverno are judged (None: if its binary is built, :func:`kyverno_installed`); else skipped."""
    if kyverno is None:
        kyverno = kyverno_installed()
    skipped = [] if kyverno else [s.name for s in scenarios if needs_kyverno_scenario(s)]
    scenarios = [s for s in scenarios if s.name not in skipped]
    stack_digest = rec.stack_digest()
    # of the scenarios as the table holds them: before the registry's address is substituted
    digest = digests(scenarios, bound, aiperf_bound, stack_digest)
    matching = record.matching(digest) if record is not None else {}
    recorded = {n: Outcome(e.kind, e.detail, e.seconds, e.admission) for n, e in matching.items()}
    stack = Stack(node, aiperf=True).start()
    timings = {f"stack {k}": v for k, v in stack.timings.items()}
    t1 = time.monotonic()
    assert node.cp is not None and stack.cache is not None
    with contextlib.ExitStack() as plugins:
        # the DRA rows' devices: the node's DRA kubelet plugin, when a selected scenario claims them
        if needs_dra(scenarios):
            plugins.enter_context(DraPlugin(node, devices=DEVICES))
        # the Image Pull rows' registry on the node's bridge, when a selected scenario names it
        workload = stack.cache / "images" / "workload.tar"
        scenarios, config = plugins.enter_context(image_registry(node, scenarios, workload))
        registry = ((config.get("registryAccess") or {}).get("allowlist") or [None])[0]
        rows = run_matrix(node.cp, scenarios, bound=bound, aiperf_bound=aiperf_bound, config=config, recorded=recorded)
    timings["matrix (setup, verdicts, outcomes)"] = time.monotonic() - t1
    for r in rows:
        if r.scenario in matching:
            r.provenance = matching[r.scenario].provenance()
    return MatrixRun(rows, timings, digest, skipped, registry, stack_digest)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.fidelity.run", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "-k",
        action="append",
        default=[],
        help="only scenarios whose name contains this; repeat for more",
    )
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument(
        "--all-real",
        action="store_true",
        help="run every selected scenario for real and write their outcomes into e2e/fidelity/outcomes.json "
        "(the whole matrix: the record rewritten), then docs/fidelity.md from the record (make conformance)",
    )
    mode.add_argument(
        "--record-new",
        action="store_true",
        help="the recorded mode, and the outcomes of the scenarios run for real written into the record and docs",
    )
    mode.add_argument("--render", action="store_true", help="only render docs/fidelity.md from the record (no node)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    ap.add_argument("--bound", type=float, default=BOUND_SECONDS, help="seconds a TrainJob is watched")
    ap.add_argument("--aiperf-bound", type=float, default=AIPERF_BOUND_SECONDS, help="seconds an AIPerfJob is watched")
    args = ap.parse_args(argv)
    if args.render:
        DOC.write_text(render_record(rec.load()))
        print(f"wrote {DOC}", file=sys.stderr)
        return 0
    scenarios = select(*args.k)
    record = rec.load()
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    with Node() as node:
        timings["node start"] = time.monotonic() - t0
        run = run_on_node(
            node,
            scenarios,
            bound=args.bound,
            aiperf_bound=args.aiperf_bound,
            record=None if args.all_real else record,
            kyverno=True if args.all_real else None,
        )
        timings.update(run.timings)
    timings["total"] = time.monotonic() - t0
    run.timings = timings
    for r in run.rows:
        print(
            f"{r.result:12} {r.scenario:36} {r.outcome.kind:13} {'admitted' if r.verdict.allowed else 'denied':9}"
            f" {r.source}"
        )
    print(run.summary(), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in run.rows], indent=1))
    if args.all_real or (args.record_new and run.real):
        whole = args.all_real and not args.k
        record = run.recorded(record, when=rec.utc_now(), commit=rec.commit(), rewrite=whole)
        rec.save(record)
        DOC.write_text(render_record(record))
        print(f"wrote {rec.RECORD} and {DOC}", file=sys.stderr)
    bad = [r for r in run.rows if r.result in BAD]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
