"""The audit controller's two-pass full scan (webhook/audit/passes.py): the cheap pass sends no request
and comes first for every job, a partial judgement never writes an Event, and a request-sending check's
results are reused while nothing it read changed.

The controller runs on tests/fakeview.py's FakeView (pure logic; e2e/test_audit_*.py run it on the real
apiserver), with every real check on a TrainJob like bench/audit_scale.py's."""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakeview import FakeView
from webhook.audit.controller import AuditController
from webhook.audit.deps import Dep, ReverseIndex
from webhook.audit.events import FAILED, EventSink
from webhook.audit.metrics import AuditMetrics
from webhook.audit.passes import PENDING_TEXT, JobKept, Kept, Remembered, request_free
from webhook.audit.sink import JobRef, Judgement
from webhook.checks import all_checks
from webhook.cluster.cache import ResourceCache
from webhook.config import Settings

SAMPLES = Path(__file__).resolve().parent / "oracle" / "samples"
NS = "team-a"


def _runtime() -> dict[str, Any]:
    rt = yaml.safe_load((SAMPLES / "clustertrainingruntime.yaml").read_text())
    rt["metadata"]["name"] = "torch"
    rt["spec"]["mlPolicy"]["torch"] = {}
    return rt


def _job(name: str, uid: str, *, secret: str = "hf-token") -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NS, "uid": uid, "resourceVersion": "10", "generation": 1},
        "spec": {"suspend": True, "runtimeRef": {"name": "torch"}, "trainer": {
            "image": "registry.example/acme/ft:1.0", "numNodes": 1,
            "resourcesPerNode": {"requests": {"cpu": "1", "memory": "1Gi"}},
            "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": "token"}}}]}},
    }  # fmt: skip


def _pvc() -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "initializer", "namespace": NS, "resourceVersion": "7"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"},
    }  # fmt: skip


class _Reflector:
    """What the controller reads of a Reflector: its cache."""

    def __init__(self, resource: str, objects: list[dict[str, Any]]) -> None:
        self.cache = ResourceCache(resource)
        self.cache.replace(objects, "1")
        self.denied = ""


class _Recorder:
    """A sink that writes down every judgement, with the dry runs and Secret reads sent before it."""

    def __init__(self, view: FakeView) -> None:
        self.view = view
        self.log: list[tuple[str, bool, int, int]] = []
        self.last: dict[str, Judgement] = {}

    async def publish(self, j: Judgement) -> None:
        self.log.append((j.job.name, j.complete, len(self.view.dry_runs), len(self.view.secret_reads)))
        self.last[j.job.name] = j

    async def forget(self, job: JobRef, why: str) -> None:
        return None

    async def scan_done(self, judged: int, not_judged: dict[str, int]) -> None:
        return None


class _Client:
    """The Events' client: each POST is written down."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        assert method == "POST", (method, path)
        self.posts.append(kw["body"])
        return kw["body"]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _controller(
    jobs: list[dict[str, Any]],
    *,
    secrets: dict[tuple[str, str], set[str]] | None = None,
    settings: Settings | None = None,
) -> tuple[AuditController, FakeView, _Recorder, EventSink, _Client, AuditMetrics, _Clock]:
    settings = settings or Settings()
    view = FakeView(
        {"clustertrainingruntimes": [_runtime()], "namespaces": [{"metadata": {"name": NS, "resourceVersion": "3"}}]},
        secrets=secrets if secrets is not None else {(NS, "hf-token"): {"token"}},
        served={"v1", "batch/v1", "jobset.x-k8s.io/v1alpha2", "trainer.kubeflow.org/v1alpha1"},
        live={("persistentvolumeclaims", NS, "initializer"): _pvc()},
    )
    view.client = None  # type: ignore[attr-defined]
    view.never_read = set()  # type: ignore[attr-defined]
    rec = _Recorder(view)
    client = _Client()
    events = EventSink(client, settings, instance="test")
    metrics = AuditMetrics(settings)
    clock = _Clock()
    c = AuditController(settings, view, checks=all_checks(), sinks=[rec, events, metrics], clock=clock)  # type: ignore[arg-type]
    c.reflectors["trainjobs"] = _Reflector("trainjobs", jobs)  # type: ignore[assignment]
    secret_meta = [{"metadata": {"name": n, "namespace": ns, "resourceVersion": "5"}} for ns, n in (secrets or {})]
    if secrets is None:
        secret_meta = [{"metadata": {"name": "hf-token", "namespace": NS, "resourceVersion": "5"}}]
    for resource, objs in (
        ("secrets", secret_meta),
        ("namespaces", view.objects["namespaces"]),
        ("resourcequotas", []),
        ("limitranges", []),
        ("serviceaccounts", []),
        ("persistentvolumeclaims", [_pvc()]),
        # what the view watches on a cluster (Per-Node Schedulability, Volume Claims read their lists)
        ("nodes", []),
        ("storageclasses", []),
        ("persistentvolumes", []),
    ):
        c.reflectors[resource] = _Reflector(resource, objs)  # type: ignore[assignment]
    c.is_leader = True
    return c, view, rec, events, client, metrics, clock


def test_request_free_is_the_synchronous_contract_or_reads_every_job_shares() -> None:
    """The cheap pass runs the checks whose run() never awaits, and Controllers, whose few Lease and
    Deployment reads every job shares (reused for controllers.ttlSeconds), and Kueue Admission Checks (its only
    live read, kueue.admissionLease, reused for kueue.leaseTtlSeconds); Dry Run and Secrets send requests per
    job. Either reads per job when nothing is reused (ttl 0): then it waits for the request pass."""
    settings = Settings()
    by_name = {c.name: request_free(c, settings) for c in all_checks()}
    assert by_name["Dry Run"] is False and by_name["Secrets"] is False and by_name["Image Pull"] is False
    assert by_name["Resource Quotas"] is True and by_name["Job Render"] is True
    assert by_name["Controllers"] is True and by_name["Kueue Admission Checks"] is True
    # ConfigMap Size sends no request at all; it is a task only to measure a large ConfigMap in a worker thread
    assert by_name["ConfigMap Size"] is True
    # Kueue Capacity: a waiting job's ClusterQueue pending list (visibility API), reused kueue_wait.PENDING_TTL
    assert by_name["Kueue Capacity"] is True
    shared = ("Controllers", "Kueue Admission Checks", "ConfigMap Size", "Kueue Capacity")
    assert all(request_free(c, settings) == c.synchronous for c in all_checks() if c.name not in shared)
    no_reuse = Settings.model_validate(
        {"controllers": {"ttlSeconds": 0}, "kueue": {"admissionLease": "ns/gate", "leaseTtlSeconds": 0}}
    )
    assert sorted(c.name for c in all_checks() if request_free(c, no_reuse) != c.synchronous) == [
        "ConfigMap Size",
        "Kueue Capacity",
    ]
    # the admission Lease reused for a window: Kueue Admission Checks runs in the cheap pass
    gate = Settings.model_validate({"kueue": {"admissionLease": "ns/gate"}})
    assert request_free({c.name: c for c in all_checks()}["Kueue Admission Checks"], gate) is True


async def test_the_cheap_pass_judges_every_job_before_any_request() -> None:
    jobs = [_job(f"ft-{i}", f"uid-{i}") for i in range(3)]
    c, view, rec, events, client, metrics, _ = _controller(jobs)
    out = await c.full_scan("scan")
    assert out == {"judged": 3}
    names = [name for name, *_ in rec.log]
    # first every job's partial judgement, in (namespace, name) order, before one request was sent
    assert rec.log[:3] == [("ft-0", False, 0, 0), ("ft-1", False, 0, 0), ("ft-2", False, 0, 0)]
    # then every job's complete one, each after requests (`audit.workers` judge at once: the order in which they
    # end depends on when the token bucket's real clock hands out tokens, not on the order they began)
    assert sorted(names[3:]) == ["ft-0", "ft-1", "ft-2"] and all(complete for _, complete, *_ in rec.log[3:])
    assert all(r > 0 for _, _, r, _ in rec.log[3:])
    assert len(view.secret_reads) == 3
    assert c.cheap_passes == 1 and c.scans == 1 and c.partial == set()
    # a partial judgement says which checks have not run yet
    assert c.last_cheap_pass_seconds is not None
    partial = [r for r in rec.log if not r[1]]
    assert len(partial) == 3
    assert metrics._partial == set()  # every job complete now


async def test_a_full_scan_judges_with_audit_workers_tasks_in_order_not_a_task_a_job() -> None:
    jobs = [_job(f"ft-{i}", f"uid-{i}") for i in range(12)]
    c, view, rec, *_ = _controller(jobs, settings=Settings.model_validate({"audit": {"workers": 3}}))
    now = most = 0
    judge = c.judge
    begun: list[tuple[str, bool]] = []

    async def counted(key: Any, reason: str, *, cheap: bool = False) -> str:
        nonlocal now, most
        now += 1
        most = max(most, now)
        begun.append((key[2], cheap))
        try:
            return await judge(key, reason, cheap=cheap)
        finally:
            now -= 1

    c.judge = counted  # type: ignore[method-assign]
    assert await c.full_scan("scan") == {"judged": 12}
    # at most `workers` judgements begun at once: no job waits inside a task of its own for its turn
    assert most == 3
    order = sorted(f"ft-{i}" for i in range(12))
    assert [n for n, complete, *_ in rec.log if not complete] == order
    # the request pass takes the jobs in the same order; three at once end in the order the token bucket's real
    # clock lets them, so only the order they began in is fixed
    assert [n for n, cheap in begun if not cheap] == order
    assert sorted(n for n, complete, *_ in rec.log if complete) == order


async def test_one_job_is_judged_by_one_evaluation_at_a_time_and_no_lock_outlives_its_users() -> None:
    """AuditController._lock: two judgements of one job run one after the other (the second waits for the first),
    another job's does not wait; once none holds or waits, no lock is kept (10,000 jobs kept 10,000 locks)."""
    import asyncio

    c, *_ = _controller([_job("ft-0", "uid-0"), _job("ft-1", "uid-1")])
    log: list[str] = []
    release = asyncio.Event()
    inside = {name: asyncio.Event() for name in ("a", "b", "other")}

    async def hold(key: Any, name: str) -> None:
        async with c._lock(key):
            log.append(f"{name} in")
            inside[name].set()
            await release.wait()
            log.append(f"{name} out")

    a = asyncio.ensure_future(hold(("trainjobs", NS, "ft-0"), "a"))
    b = asyncio.ensure_future(hold(("trainjobs", NS, "ft-0"), "b"))
    other = asyncio.ensure_future(hold(("trainjobs", NS, "ft-1"), "other"))
    # tasks start in the order made: once the last one is inside its lock, b has asked for a's
    await inside["other"].wait()
    assert log == ["a in", "other in"] and not inside["b"].is_set()  # b waits for a; the other job does not
    assert c._locks[("trainjobs", NS, "ft-0")].users == 2
    release.set()
    await asyncio.gather(a, b, other)
    assert log.index("b in") > log.index("a out")
    assert c._locks == {}
    await c.full_scan("scan")
    assert c._locks == {}


async def test_each_full_scan_gives_the_freed_heap_back(monkeypatch: pytest.MonkeyPatch) -> None:
    import webhook.audit.controller as controller
    from webhook.cluster.cache import trim_heap

    assert trim_heap() is True  # glibc here: malloc_trim exists
    trims: list[int] = []
    monkeypatch.setattr(controller, "trim_heap", lambda: trims.append(1) or True)
    c, *_ = _controller([_job("ft-0", "uid-0")])
    await c.full_scan("scan")
    await c.full_scan("period")
    assert len(trims) == 2


async def test_a_partial_judgement_shows_in_reports_and_metrics_but_writes_no_event() -> None:
    """The Secret is missing (the Secrets check, which sends a request, fails) and the name is too long
    for the pods (Name Length, request-free, fails): the cheap pass already knows enforce denies the job,
    the metrics show it at once, but the one PreflightFailed waits for the complete judgement and names both."""
    long = "a-very-long-trainjob-name-that-makes-every-derived-pod-name-too-long"
    c, view, rec, events, client, metrics, _ = _controller([_job(long, "uid-long", secret="gone")], secrets={})
    await c.judge(("trainjobs", NS, long), "scan", cheap=True)
    j = rec.last[long]
    assert not j.complete
    results = {r.name: r for r in j.evaluation.results.checks}
    assert results["Name Length"].status.value == "fail"
    assert results["Dry Run"].message == PENDING_TEXT and results["Secrets"].message == PENDING_TEXT
    assert client.posts == []  # no Event from half the facts
    assert ("Name Length", "fail") in metrics._jobs["uid-long"][2]
    assert metrics._partial == {"uid-long"}
    await c.judge(("trainjobs", NS, long), "scan")
    assert rec.last[long].complete
    assert len(client.posts) == 1 and client.posts[0]["reason"] == FAILED
    message = client.posts[0]["message"]
    assert "[Name Length]" in message and "[Secrets]" in message and 'Secret "gone"' in message
    assert metrics._partial == set()


async def test_a_restart_writes_no_event_from_the_cheap_pass() -> None:
    """A new leader read back the job's PreflightFailed (both checks); its cheap pass lacks the Secrets
    failure: a PreflightFailed written from it would differ and be followed by a second one. None is written."""
    c, view, rec, events, client, metrics, _ = _controller([_job("ft", "uid-ft", secret="gone")], secrets={})
    await c.full_scan("scan")
    assert [p["reason"] for p in client.posts] == [FAILED]
    last = dict(events.last)
    c2, view2, rec2, events2, client2, _, _ = _controller([_job("ft", "uid-ft", secret="gone")], secrets={})
    events2.last = last  # what EventSink.resync reads back
    await c2.full_scan("scan")
    assert rec2.last["ft"].complete and [complete for _, complete, *_ in rec2.log] == [False, True]
    assert client2.posts == []


async def test_a_periodic_scan_reuses_what_did_not_change_and_rechecks_what_did() -> None:
    jobs = [_job("ft-0", "uid-0"), _job("ft-1", "uid-1")]
    c, view, rec, events, client, metrics, clock = _controller(jobs)
    await c.full_scan("scan")
    dry, reads = len(view.dry_runs), len(view.secret_reads)
    assert dry > 0 and reads == 2
    rec.log.clear()
    clock.now += 600
    await c.full_scan("period")
    # nothing changed: no request, and every judgement of the period is complete from the cheap pass
    assert (len(view.dry_runs), len(view.secret_reads)) == (dry, reads)
    assert [(n, complete) for n, complete, *_ in rec.log] == [("ft-0", True), ("ft-1", True)]
    # the kept results' reads stay in the reverse index: deleting the Secret still re-checks both jobs
    assert c.index.jobs_for("secrets", NS, "hf-token") == {("trainjobs", NS, "ft-0"), ("trainjobs", NS, "ft-1")}
    assert c.index.jobs_for("namespaces", "", NS) == {("trainjobs", NS, "ft-0"), ("trainjobs", NS, "ft-1")}
    kept: Kept = c.kept["uid-0"]["Dry Run"]
    assert ("namespaces", "", NS) in kept.reads and kept.reads[("namespaces", "", NS)] == "3"
    # the namespace's ResourceQuotas changed (what a dry run's admission reads): both are dry-run again
    c.reflectors["resourcequotas"].cache.apply(
        "ADDED", {"metadata": {"name": "q", "namespace": NS, "resourceVersion": "20"}}
    )
    rec.log.clear()
    await c.full_scan("period")
    assert len(view.dry_runs) == 2 * dry and len(view.secret_reads) == reads  # the Secret did not change
    assert sorted((n, complete) for n, complete, *_ in rec.log) == [("ft-0", True), ("ft-1", True)]  # no partial
    # one job changed: only its requests are sent again
    changed = copy.deepcopy(jobs[1])
    changed["metadata"]["resourceVersion"] = "11"
    c.reflectors["trainjobs"].cache.apply("MODIFIED", changed)
    await c.full_scan("period")
    assert len(view.dry_runs) == 2 * dry + dry // 2 and len(view.secret_reads) == reads + 1
    # older than audit.requestChecksReuseSeconds: sent again, whatever changed
    clock.now += Settings().audit.request_checks_reuse_seconds
    await c.full_scan("period")
    assert len(view.dry_runs) == 3 * dry + dry // 2 and len(view.secret_reads) == reads + 3


async def test_reuse_zero_sends_every_request_on_every_scan() -> None:
    settings = Settings.model_validate({"audit": {"requestChecksReuseSeconds": 0}})
    c, view, *_ = _controller([_job("ft", "uid-ft")], settings=settings)
    await c.full_scan("scan")
    dry = len(view.dry_runs)
    await c.full_scan("period")
    assert len(view.dry_runs) == 2 * dry and len(view.secret_reads) == 2


def _lease(holder: str) -> dict[str, Any]:
    """A leader-election Lease renewed now (an hour long: fresh for the whole test), `holder` "" released."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"metadata": {"name": "lease", "resourceVersion": "1"},
            "spec": {"holderIdentity": holder, "renewTime": now, "leaseDurationSeconds": 3600}}  # fmt: skip


async def test_a_periodic_scan_judges_each_job_once_and_the_controllers_again() -> None:
    """Controllers reads Leases no watch versions: its result is never kept, so it used to leave every job
    partial after the cheap pass and every periodic scan judged every job twice. It runs in the cheap pass
    now: one judgement per job and scan, complete, with the controllers' state read at that scan."""
    jobs = [_job("ft-0", "uid-0"), _job("ft-1", "uid-1")]
    c, view, rec, events, client, metrics, clock = _controller(jobs)
    cfg = c.settings.controllers
    for ref in (cfg.jobset, cfg.trainer):
        view.live[("leases", ref.namespace, ref.lease)] = _lease("leader-1")
    await c.full_scan("scan")
    assert c.evaluations == {"scan": 4}  # the cheap pass, then the Dry Run and Secrets in the request pass
    assert rec.last["ft-0"].complete
    ctl = {r.name: r for r in rec.last["ft-0"].evaluation.results.checks}["Controllers"]
    assert ctl.status.value == "pass" and f"Lease {cfg.jobset.namespace}/{cfg.jobset.lease} renewed" in ctl.message
    # nothing changed: each job judged once, complete from the cheap pass, the Leases read again
    c.evaluations.clear()
    rec.log.clear()
    reads = len(view.object_reads)
    clock.now += 600
    await c.full_scan("period")
    assert c.evaluations == {"period": 2}
    assert [(n, complete) for n, complete, *_ in rec.log] == [("ft-0", True), ("ft-1", True)]
    assert c.partial == set()
    leases = [r for r in view.object_reads[reads:] if r[0] == "leases"]
    assert sorted(set(leases)) == sorted({("leases", cfg.jobset.namespace, cfg.jobset.lease),
                                          ("leases", cfg.trainer.namespace, cfg.trainer.lease)})  # fmt: skip
    # JobSet's leader released its Lease (what no watch of the controller reports): the next period says so
    view.live[("leases", cfg.jobset.namespace, cfg.jobset.lease)] = _lease("")
    c.evaluations.clear()
    await c.full_scan("period")
    assert c.evaluations == {"period": 2}
    ctl = {r.name: r for r in rec.last["ft-1"].evaluation.results.checks}["Controllers"]
    assert ctl.status.value == "warn"
    assert ctl.message.startswith(
        f"JobSet controller looks down (Lease {cfg.jobset.namespace}/{cfg.jobset.lease} has no holder (released)"
    )


async def test_equal_kept_results_and_reads_are_one_object_and_a_remembered_answer_is_a_copy() -> None:
    """Memory: 10,000 waiting jobs keep 7 request-sending checks' results each. Equal results (word for word)
    and equal reads are held once for every job; what a job's judgement gets is its own copy."""
    jobs = [_job("ft-0", "uid-0"), _job("ft-1", "uid-1")]
    c, view, rec, *_ = _controller(jobs)
    await c.full_scan("scan")
    a, b = c.kept["uid-0"], c.kept["uid-1"]
    assert set(a) == set(b) and "Secrets" in a
    for name in a:  # the same namespace: the same reads at the same versions
        assert a[name].reads is b[name].reads, name
        assert (a[name].results is b[name].results) == (a[name].results == b[name].results), name
    assert a["Secrets"].results is b["Secrets"].results
    assert a["Dry Run"].results is not b["Dry Run"].results  # its message names the job's JobSet
    assert 'JobSet "ft-1"' in b["Dry Run"].results[0].message
    secrets = a["Secrets"]
    assert [r.status.value for r in secrets.results] == ["pass"]
    # a remembered answer is a copy: changing it changes no job's kept result
    remembered = Remembered(next(ch for ch in c.checks if ch.name == "Secrets"), secrets.results)
    got = await remembered.run(None)  # type: ignore[arg-type]
    assert isinstance(got, list)
    got[0].message = "changed"
    got[0].details.append("changed")
    assert secrets.results[0].message.startswith("1 Secret exists") and secrets.results[0].details == []
    # the job's metrics findings are one tuple for both jobs
    metrics = c.sinks[2]
    assert isinstance(metrics, AuditMetrics)
    assert metrics._jobs["uid-0"][2] is metrics._jobs["uid-1"][2]
    # the reverse index holds one Dep object per object read, whichever job read it
    d0 = {d: d for d in c.index.deps_of(("trainjobs", NS, "ft-0"))}
    assert all(d0[d] is d for d in c.index.deps_of(("trainjobs", NS, "ft-1")) if d in d0)
    # one record a job, no dict of Kept: the check names are one tuple for both jobs, the version and time one each
    assert isinstance(a, JobKept) and not hasattr(a, "__dict__")
    assert a._names is b._names and isinstance(a._versions, str) and isinstance(a._ats, float)
    assert a["Dry Run"].admission is not None and a["Secrets"].admission is None


def test_a_published_job_is_named_by_its_uid_and_a_remaining_child_by_its_sweeps_uid_and_its_name() -> None:
    sweep = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfSweep", NS, "sw", "uid-sw")
    child = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfJob", NS, "sw-0", "", parent=sweep)
    assert (sweep.key, child.key) == ("uid-sw", "uid-sw/sw-0")


def test_a_jobs_kept_results_merge_the_fresh_and_drop_what_another_version_found() -> None:
    """webhook/audit/passes.py JobKept: what `merged` gives back, and the Kept it answers, field for field."""
    reads: dict[Dep, str | None] = {("secrets", NS, "s"): "5"}
    old = JobKept({"Secrets": Kept("10", reads, 1.0, []), "Dry Run": Kept("10", {}, 1.0, [], "admitted")})
    assert list(old) == ["Secrets", "Dry Run"] and len(old) == 2 and "Volume Claims" not in old
    assert old["Dry Run"] == Kept("10", {}, 1.0, [], "admitted") and old["Secrets"].reads is reads
    with pytest.raises(KeyError):
        old["Volume Claims"]
    # the Dry Run ran again on the same version, later: the Secrets' entry stays, each with its own time
    same = old.merged({"Dry Run": Kept("10", {}, 2.0, [], None)}, "10")
    assert dict(same) == {"Secrets": Kept("10", reads, 1.0, []), "Dry Run": Kept("10", {}, 2.0, [], None)}
    assert same._ats == (1.0, 2.0) and same._versions == "10" and same._admission_at == -1
    assert old._admission_at == 1 and old._admission == "admitted"
    several = JobKept(
        {"A": Kept("10", {}, 1.0, [], "a"), "B": Kept("10", {}, 1.0, []), "C": Kept("10", {}, 1.0, [], "c")}
    )
    assert [several[n].admission for n in "ABC"] == ["a", None, "c"]
    # the job changed: what the old version found can never hold again, and is not kept
    moved = same.merged({"Dry Run": Kept("11", {}, 3.0, [])}, "11")
    assert dict(moved) == {"Dry Run": Kept("11", {}, 3.0, [])}
    assert not moved["Dry Run"].holds("10", lambda dep: "5", 3.0, 600.0)
    assert moved["Dry Run"].holds("11", lambda dep: "5", 3.0, 600.0)


def test_the_reverse_index_shares_one_dep_and_forgets_it_with_its_last_job() -> None:
    index = ReverseIndex()
    first = Dep("secrets", NS, "hf-token")
    index.add("job-a", first)
    again = Dep("secrets", NS, "hf-token")
    assert index.canonical(again) is first
    index.replace("job-b", [index.canonical(again)])
    index.drop("job-a")
    assert index.canonical(again) is first  # job-b still reads it
    index.drop("job-b")
    assert index.canonical(again) is again and index.jobs_for("secrets", NS, "hf-token") == set()
    assert index._canon == {}
