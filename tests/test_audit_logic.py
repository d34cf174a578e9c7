"""The audit controller's pure logic (webhook/audit/): which jobs are judged, what a job reads
and who reads an object, debouncing, Event dedup, the Lease's state machine, the write guard."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakeview import FakeView
from webhook.audit.client import TokenBucket, background_requests, check_audit_write
from webhook.audit.deps import _NOT_READS, _READS, ANY, Dep, RecordingView, ReverseIndex
from webhook.audit.events import (
    FAILED,
    PASSED,
    clip_message,
    event_to_write,
    failure_text,
    latest_states,
    state_of,
)
from webhook.audit.jobs import (
    FINISHED,
    JUDGED,
    RUNNING,
    Related,
    aiperf_state,
    job_kinds,
    jobset_state,
    sweep_state,
    trainjob_state,
)
from webhook.audit.lease import Record, decide
from webhook.audit.queue import Debouncer
from webhook.audit.sink import JobRef, Judgement
from webhook.cluster.view import ClusterView
from webhook.config import ConfigError, Settings, load_settings
from webhook.deadline import Deadline
from webhook.preflight import evaluate

SAMPLES = Path(__file__).resolve().parent / "oracle" / "samples"


# --- which jobs are "not started" ----------------------------------------------------------------


def _tj(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "tj", "namespace": "ns", "uid": "u1"}, "spec": spec}


def test_trainjob_states() -> None:
    assert trainjob_state(_tj(suspend=True), Related({"x": 1})) == (JUDGED, "suspended")
    assert trainjob_state(_tj(), Related(None)) == (JUDGED, "no JobSet yet")
    assert trainjob_state(_tj(), Related({})) == (RUNNING, "running")
    wl = {"metadata": {"ownerReferences": [{"uid": "u1", "kind": "TrainJob"}]}, "status": {"conditions": []}}
    assert trainjob_state(_tj(), Related({}, (wl,))) == (JUDGED, "Kueue Workload not admitted")
    admitted = copy.deepcopy(wl)
    admitted["status"]["conditions"] = [{"type": "Admitted", "status": "True"}]
    assert trainjob_state(_tj(), Related({}, (admitted,))) == (RUNNING, "running")
    other = {"metadata": {"ownerReferences": [{"uid": "u2"}]}}
    assert trainjob_state(_tj(), Related({}, (other,))) == (RUNNING, "running")
    done = _tj(suspend=True)
    done["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert trainjob_state(done, Related(None)) == (FINISHED, "finished")
    failed = _tj()
    failed["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
    assert trainjob_state(failed, Related(None))[0] == FINISHED


@pytest.mark.parametrize(
    ("phase", "state"),
    [
        (None, JUDGED), ("Pending", JUDGED), ("Queued", JUDGED), ("Initializing", RUNNING), ("Running", RUNNING),
        ("Completed", FINISHED), ("Failed", FINISHED), ("Cancelled", FINISHED), (7, JUDGED),
    ],
)  # fmt: skip
def test_aiperf_states(phase: Any, state: str) -> None:
    obj = {"status": {"phase": phase}} if phase is not None else {}
    assert aiperf_state(obj)[0] == state


def test_sweep_is_judged_until_terminal() -> None:
    assert sweep_state({"status": {"phase": "Running"}}) == (JUDGED, "remaining children")
    assert sweep_state({}) == (JUDGED, "phase not set")
    assert sweep_state({"status": {"phase": "Completed"}})[0] == FINISHED


def test_a_jobset_applied_directly_is_judged_while_it_waits() -> None:
    js: dict[str, Any] = {"metadata": {"name": "js", "namespace": "ns", "uid": "u1"}, "spec": {"suspend": True}}
    assert jobset_state(js, Related()) == (JUDGED, "suspended")
    queued = {"metadata": {"ownerReferences": [{"uid": "u1", "kind": "JobSet"}]}, "status": {"conditions": []}}
    assert jobset_state({**js, "spec": {}}, Related(None, (queued,))) == (JUDGED, "Kueue Workload not admitted")
    assert jobset_state({**js, "spec": {}}, Related()) == (RUNNING, "running")  # its Jobs are made at once
    done = {**js, "status": {"conditions": [{"type": "Completed", "status": "True"}]}}
    assert jobset_state(done, Related())[0] == FINISHED


def test_a_jobset_a_judged_job_owns_is_no_job_and_keeps_its_metadata_only() -> None:
    """Its owner is judged (the chart's not-owned-by-a-judged-job says the same at apply); the audit
    controller's JobSet watch keeps only its metadata, all its owner's state reads of it."""
    from webhook.audit.controller import JobCache

    [spec] = [k for k in job_kinds() if k.kind == "JobSet"]
    owner = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "ft", "uid": "t1"}
    owned = {"metadata": {"name": "ft", "namespace": "ns", "ownerReferences": [owner]}, "spec": {"suspend": True}}
    mine = {"metadata": {"name": "direct", "namespace": "ns"}, "spec": {"suspend": True}}
    assert spec.skipped(owned) and not spec.skipped(mine)
    seen: list[str] = []
    cache = JobCache("jobsets", lambda t, o: seen.append(o["metadata"]["name"]), spec.skipped)
    cache.replace([copy.deepcopy(owned), copy.deepcopy(mine)], "1")
    assert cache.get("ns", "ft") == {"metadata": owned["metadata"]}
    assert cache.get("ns", "direct") == mine
    cache.apply("MODIFIED", copy.deepcopy(owned))
    assert seen == ["ft"] and "spec" not in (cache.get("ns", "ft") or {})


# --- what a job reads, and who reads an object ---------------------------------------------------


async def test_recording_view_records_the_reads_of_a_real_evaluation() -> None:
    tj = yaml.safe_load((SAMPLES / "trainjob.yaml").read_text())
    tj["metadata"]["namespace"] = "team-a"
    rt = yaml.safe_load((SAMPLES / "clustertrainingruntime.yaml").read_text())
    inner = FakeView({"clustertrainingruntimes": [rt], "namespaces": [{"metadata": {"name": "team-a"}}]})
    view = RecordingView(inner)
    ev = await evaluate(copy.deepcopy(tj), settings=Settings(), deadline=Deadline(5), view=view)
    assert ev.workload is not None
    assert Dep("secrets", "team-a", "hf-token") in view.reads
    assert Dep("clustertrainingruntimes", "", rt["metadata"]["name"]) in view.reads
    assert Dep("namespaces", "", "team-a") in view.reads
    # what the view served is what the checks asked for
    assert ("team-a", "hf-token") in inner.secret_reads


def test_reverse_index() -> None:
    idx = ReverseIndex()
    a, b = ("trainjobs", "ns", "a"), ("trainjobs", "ns", "b")
    idx.replace(a, [Dep("secrets", "ns", "s1"), Dep("resourcequotas", "ns", ANY)])
    idx.replace(b, [Dep("secrets", "ns", "s2"), Dep("clusterqueues", "", "cq")])
    assert idx.jobs_for("secrets", "ns", "s1") == {a}
    assert idx.jobs_for("secrets", "ns", "s3") == set()
    assert idx.jobs_for("secrets", "other", "s1") == set()
    assert idx.jobs_for("resourcequotas", "ns", "any-quota") == {a}  # a list read
    assert idx.jobs_for("clusterqueues", "", "cq") == {b}
    idx.replace(a, [Dep("secrets", "ns", "s2")])  # a's next evaluation read other things
    assert idx.jobs_for("secrets", "ns", "s1") == set()
    assert idx.jobs_for("secrets", "ns", "s2") == {a, b}
    idx.drop(b)
    assert idx.jobs_for("secrets", "ns", "s2") == {a}
    assert len(idx) == 1


async def test_a_read_is_indexed_when_it_is_made_not_when_the_evaluation_ends() -> None:
    """Issue 20's quarantined node test: a Secret deleted after the Secrets check read it, while the
    job's first judgement still ran, touched no indexed job and was lost. The controller hands
    `on_read` the index: each read is in it at once; `replace` at the end settles the job's reads."""
    idx = ReverseIndex()
    job = ("trainjobs", "ns", "ft")
    idx.replace(job, [Dep("configmaps", "ns", "old")])  # the last judgement's reads
    view = RecordingView(FakeView({"namespaces": []}), on_read=lambda dep: idx.add(job, dep))
    assert await view.secret_keys("ns", "hf-token", Deadline(5)) is None
    # the evaluation is still running: the Secret it read already re-checks the job, and so do the old reads
    assert idx.jobs_for("secrets", "ns", "hf-token") == {job}
    assert idx.jobs_for("configmaps", "ns", "old") == {job}
    assert await view.secret_keys("ns", "hf-token", Deadline(5)) is None  # read twice, indexed once
    assert idx.deps_of(job) == {Dep("configmaps", "ns", "old"), Dep("secrets", "ns", "hf-token")}
    idx.replace(job, view.reads)  # the judgement ended: exactly what it read
    assert idx.deps_of(job) == {Dep("secrets", "ns", "hf-token")}
    assert idx.jobs_for("configmaps", "ns", "old") == set()


# --- debounce ------------------------------------------------------------------------------------


def test_debouncer_joins_a_burst_and_keeps_every_reason() -> None:
    d = Debouncer(2.0)
    assert d.add("k", 'secrets "ns/a" deleted', now=10.0)
    assert not d.add("k", 'secrets "ns/a" deleted', now=10.5)
    assert not d.add("k", "job changed", now=11.9)
    d.add("j", "job changed", now=11.0)
    assert d.pop_due(11.9) == []
    assert d.pop_due(12.0) == [("k", 'secrets "ns/a" deleted; job changed')]
    assert d.next_due() == 13.0
    d.discard("j")
    assert d.pop_due(20.0) == []
    assert len(d) == 0
    assert d.add("k", "period", now=30.0)  # a new burst after the last one ran


# --- Events: what is written, dedup ---------------------------------------------------------------


def test_event_dedup() -> None:
    fail = (FAILED, "TrainJob x failed 1 preflight check:\n[Secrets] ...")
    assert event_to_write(None, fail) == fail
    assert event_to_write(fail, fail) is None  # the periodic re-check: no storm
    other = (FAILED, "TrainJob x failed 1 preflight check:\n[Resource Quotas] ...")
    assert event_to_write(fail, other) == other  # another failure is another result
    assert event_to_write(fail, (PASSED, "")) == (PASSED, "")
    assert event_to_write((PASSED, ""), (PASSED, "")) is None
    assert event_to_write(None, (PASSED, "")) is None  # passing from the start: nothing to say


def test_latest_states_read_back_after_a_restart() -> None:
    def ev(uid: str, reason: str, ts: str, msg: str = "m", comp: str = "preflight-webhook-audit") -> dict[str, Any]:
        return {
            "involvedObject": {"uid": uid}, "reason": reason, "message": msg, "lastTimestamp": ts,
            "source": {"component": comp},
        }  # fmt: skip

    states = latest_states(
        [
            ev("u1", FAILED, "2026-01-01T00:00:01Z", "old"),
            ev("u1", PASSED, "2026-01-01T00:00:02Z"),
            ev("u2", PASSED, "2026-01-01T00:00:01Z"),
            ev("u2", FAILED, "2026-01-01T00:00:03Z", "now"),
            ev("u3", FAILED, "2026-01-01T00:00:03Z", "someone else's", comp="other"),
            ev("u4", "Created", "2026-01-01T00:00:03Z"),
        ]
    )
    assert states == {"u1": (PASSED, ""), "u2": (FAILED, "now")}


async def test_failure_text_is_what_enforce_would_deny_in_every_mode() -> None:
    tj = yaml.safe_load((SAMPLES / "trainjob.yaml").read_text())
    tj["metadata"]["namespace"] = "team-a"
    rt = yaml.safe_load((SAMPLES / "clustertrainingruntime.yaml").read_text())
    view = FakeView({"clustertrainingruntimes": [rt]}, secrets={("team-a", "ghcr-pull"): {".dockerconfigjson"}})
    ref = JobRef("trainer.kubeflow.org/v1alpha1", "TrainJob", "team-a", tj["metadata"]["name"], "u1")
    now = dt.datetime.now(dt.UTC)

    async def text(settings: Settings) -> str | None:
        ev = await evaluate(copy.deepcopy(tj), settings=settings, deadline=Deadline(5), view=view)
        return failure_text(Judgement(ref, ev, "1", now, "scan"), settings)

    enforce = await evaluate(copy.deepcopy(tj), settings=Settings(), deadline=Deadline(5), view=view)
    assert not enforce.decision.allowed
    assert await text(Settings()) == enforce.decision.message  # the webhook's own denial
    got = await text(Settings())
    assert got is not None and '[Secrets] Secret "hf-token" not found in namespace "team-a"' in got
    assert "Fix: kubectl create secret generic hf-token -n team-a" in got
    # warn and audit admit the job; the Event still says what enforce would deny, in the same words
    assert await text(Settings(mode="warn")) == enforce.decision.message
    assert await text(Settings(mode="audit")) == enforce.decision.message
    # a check whose action is warn never denies in enforce: not a failure here either
    only = enforce.decision.denied_checks
    relaxed = await text(Settings(checks=dict.fromkeys(only, "warn")))
    assert relaxed is None
    assert state_of(got) == (FAILED, got)
    assert state_of(None) == (PASSED, "")


def test_clip_message_bounds_bytes() -> None:
    assert clip_message("short") == "short"
    long = "é" * 1000
    out = clip_message(long)
    assert len(out.encode()) <= 1024 and out.endswith("…")


# --- leader election (client-go tryAcquireOrRenew) -----------------------------------------------


def test_lease_state_machine() -> None:
    kw = {"duration": 15, "now_wall": "T1"}
    assert decide(None, me="a", now=0, observed_at=0, **kw) == Record("a", 15, "T1", "T1", 0)
    held = Record("b", 15, "T0", "T0", 3)
    assert decide(held, me="a", now=14.9, observed_at=0, **kw) is None  # valid on our clock
    assert decide(held, me="a", now=15.1, observed_at=0, **kw) == Record("a", 15, "T1", "T1", 4)  # expired: take over
    mine = Record("a", 15, "T0", "T0", 3)
    assert decide(mine, me="a", now=100, observed_at=0, **kw) == Record("a", 15, "T0", "T1", 3)  # renew
    released = Record("", 1, "T0", "T0", 3)
    assert decide(released, me="a", now=0, observed_at=0, **kw) == Record("a", 15, "T1", "T1", 4)
    spec = Record("a", 15, "T0", "T1", 2).to_spec()
    assert Record.from_spec(spec) == Record("a", 15, "T0", "T1", 2)
    assert Record.from_spec({"holderIdentity": 3}) == Record()


# --- writes and pacing ---------------------------------------------------------------------------


def test_audit_client_writes_only_what_it_owns() -> None:
    check_audit_write("POST", "/api/v1/namespaces/ns/events", None)
    check_audit_write("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", None)
    check_audit_write("POST", "/apis/openreports.io/v1alpha1/namespaces/ns/reports", None)
    check_audit_write("POST", "/api/v1/namespaces/ns/pods", {"dryRun": "All"})
    for method, path in [
        ("POST", "/api/v1/namespaces/ns/secrets"),
        ("DELETE", "/api/v1/namespaces/ns/pods/p"),
        ("PUT", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/t"),
        ("POST", "/api/v1/namespaces/ns/events/x/y"),
    ]:
        with pytest.raises(ValueError, match="never writes"):
            check_audit_write(method, path, None)


def test_token_bucket() -> None:
    t = [0.0]
    b = TokenBucket(qps=10, burst=2, clock=lambda: t[0])
    assert b.reserve() == 0.0
    assert b.reserve() == 0.0
    assert b.reserve() == pytest.approx(0.1)  # over the burst: wait for the next token
    t[0] = 1.0
    assert b.reserve() == 0.0


async def test_the_token_bucket_serves_the_foreground_lane_first_at_the_same_pace() -> None:
    b = TokenBucket(qps=1000, burst=1)
    await b.wait()  # the one token of the burst
    order: list[str] = []

    async def take(name: str, background: bool) -> None:
        if background:
            with background_requests():
                await b.wait()
        else:
            await b.wait()
        order.append(name)

    tasks = [asyncio.ensure_future(take(n, bg)) for n, bg in [("report-1", True), ("report-2", True), ("lease", False)]]
    await asyncio.sleep(0)  # every task is queued before the first token comes back
    assert b.waiting() == (1, 2)
    await asyncio.gather(*tasks)
    assert order == ["lease", "report-1", "report-2"]  # the read that arrived last went first
    assert b.waiting() == (0, 0)


async def test_a_cancelled_waiter_gives_its_token_to_the_next() -> None:
    b = TokenBucket(qps=1000, burst=1)
    await b.wait()
    gone = asyncio.ensure_future(b.wait())
    kept = asyncio.ensure_future(b.wait(background=True))
    await asyncio.sleep(0)
    gone.cancel()
    await kept  # granted though the waiter before it left
    assert gone.cancelled() and b.waiting() == (0, 0)


async def test_closing_the_bucket_cancels_its_waiters() -> None:
    b = TokenBucket(qps=0.001, burst=1)  # the next token in 1,000 s
    await b.wait()
    waiter = asyncio.ensure_future(b.wait())
    await asyncio.sleep(0)
    await b.close()
    with pytest.raises(asyncio.CancelledError):
        await waiter


def test_audit_settings(tmp_path: Path) -> None:
    s = Settings()
    assert (s.audit.period_seconds, s.audit.qps, s.audit.lease_name) == (600.0, 20.0, "preflight-webhook-audit")
    p = tmp_path / "c.yaml"
    p.write_text("audit:\n  periodSeconds: 60\n  qps: 5\n  leaseNamespace: ops\n")
    s = load_settings(p)
    assert (s.audit.period_seconds, s.audit.qps, s.audit.lease_namespace) == (60.0, 5.0, "ops")
    p.write_text("audit:\n  leaseDurationSeconds: 5\n  renewDeadlineSeconds: 10\n")
    with pytest.raises(ConfigError, match="leaseDurationSeconds must be greater than renewDeadlineSeconds"):
        load_settings(p)
    p.write_text("audit:\n  periodSeconds: 1\n")
    with pytest.raises(ConfigError, match="audit.periodSeconds"):
        load_settings(p)


def test_notifying_cache_reports_each_change_also_across_a_relist() -> None:
    from webhook.audit.controller import NotifyingCache

    seen: list[tuple[str, str]] = []
    cache = NotifyingCache("secrets", lambda t, o: seen.append((t, o["metadata"]["name"])))

    def obj(name: str, rv: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}

    cache.replace([obj("a", "1"), obj("b", "1")], "1")
    assert seen == []  # the first list is the start, not a change
    cache.apply("DELETED", obj("a", "2"))
    cache.apply("BOOKMARK", {"metadata": {"resourceVersion": "3"}})
    assert seen == [("DELETED", "a")]
    seen.clear()
    cache.replace([obj("b", "5"), obj("c", "4")], "5")  # a relist after 410 Gone: b changed, c is new
    assert sorted(seen) == [("ADDED", "c"), ("MODIFIED", "b")]
    seen.clear()
    cache.replace([obj("c", "4")], "6")
    assert seen == [("DELETED", "b")]


def test_a_trigger_watch_keeps_only_what_names_a_version_and_still_reports_each_change() -> None:
    """VersionCache (the trigger watches: Secrets, ConfigMaps, ServiceAccounts, ...): namespace, name and
    resourceVersion of each object, nothing else of its metadata; changes are reported as NotifyingCache's."""
    from webhook.audit.controller import VersionCache

    seen: list[tuple[str, str]] = []
    cache = VersionCache("configmaps", lambda t, o: seen.append((t, o["metadata"]["resourceVersion"])))

    def obj(name: str, rv: str) -> dict[str, Any]:
        meta = {"name": name, "namespace": "ns", "resourceVersion": rv, "uid": "u-" + name,
                "labels": {"app": "x"}, "annotations": {"a": "b"}, "creationTimestamp": "2026-01-01T00:00:00Z"}  # fmt: skip
        return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}

    cache.replace([obj("a", "1")], "1")
    assert cache.objects() == [{"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "1"}}]
    cache.apply("MODIFIED", obj("a", "2"))
    assert cache.get("ns", "a") == {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "2"}}
    cache.replace([obj("a", "3"), obj("b", "3")], "3")
    assert seen == [("MODIFIED", "2"), ("MODIFIED", "3"), ("ADDED", "3")] and len(cache) == 2


async def test_recording_view_records_each_read_and_passes_the_rest_through() -> None:
    inner = FakeView({"limitranges": [], "namespaces": [{"metadata": {"name": "ns"}}]})
    view = RecordingView(inner)
    d = Deadline(5)
    assert view.list_cached("limitranges", "ns") == []
    assert view.get_cached("namespaces", None, "ns") == {"metadata": {"name": "ns"}}
    assert await view.secret_keys("ns", "s1", d) is None
    assert await view.pull_secret("ns", "pull", d) is None
    await view.dry_run_create("batch/v1", "Job", "ns", {"metadata": {"name": "j"}}, d)
    assert await view.get_object("v1", "configmaps", "ns", "cm", d, ttl=1.0) is None
    assert await view.list_objects("discovery.k8s.io/v1", "endpointslices", "ns", "a=b", d) == []
    assert view.cache_version("nodes") is None  # a kept listing stands for the whole list
    assert view.reads == {
        Dep("nodes", "", ANY),
        Dep("limitranges", "ns", ANY),
        Dep("namespaces", "", "ns"),
        Dep("secrets", "ns", "s1"),
        Dep("secrets", "ns", "pull"),
        Dep("resourcequotas", "ns", ANY),
        Dep("configmaps", "ns", "cm"),
        Dep("endpointslices", "ns", ANY),
    }
    # what the view served is what the checks asked for
    assert inner.secret_reads == [("ns", "s1"), ("ns", "pull")] and inner.object_reads == [("configmaps", "ns", "cm")]
    assert [r[:3] for r in inner.dry_runs] == [("batch/v1", "Job", "ns")]
    # discovery, capabilities and readiness are no reads: passed through, nothing recorded
    before = set(view.reads)
    assert view.served("v1") == inner.served("v1")
    assert view.ready == inner.ready and view.ready_reason == inner.ready_reason
    assert view.reads == before
    # close() leaves the controller's view open
    await view.close()
    assert view.get_cached("namespaces", None, "ns") is not None


def test_recording_view_knows_every_member_of_the_cluster_view() -> None:
    """A ClusterView member in neither table would pass unrecorded: RecordingView refuses it."""
    members = {n for n in vars(ClusterView) if not n.startswith("_")} - {"close"}
    assert members == set(_READS) | _NOT_READS
    with pytest.raises(AttributeError, match=r"ClusterView\.reflectors: add it to _READS"):
        RecordingView(FakeView({})).reflectors  # noqa: B018


def test_view_has_seen_a_change_once_its_cache_holds_it() -> None:
    from webhook.audit.controller import view_has_seen
    from webhook.cluster.cache import ResourceCache

    def obj(name: str, rv: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}

    view = ResourceCache("resourcequotas")
    assert not view_has_seen(view, "MODIFIED", obj("q", "5"))  # never synced: holds nothing yet
    view.replace([obj("q", "4")], "4")
    assert not view_has_seen(view, "MODIFIED", obj("q", "5"))  # the view lags: it holds the old quota
    assert not view_has_seen(view, "ADDED", obj("new", "5"))
    assert not view_has_seen(view, "DELETED", obj("q", "5"))  # the view still holds the deleted quota
    view.apply("BOOKMARK", {"metadata": {"resourceVersion": "4"}})
    assert not view_has_seen(view, "MODIFIED", obj("q", "5"))
    view.apply("MODIFIED", obj("q", "5"))
    assert view_has_seen(view, "MODIFIED", obj("q", "5"))
    assert view_has_seen(view, "MODIFIED", obj("q", "3"))  # an older change: the view is past it
    view.apply("MODIFIED", obj("q", "7"))
    assert view_has_seen(view, "MODIFIED", obj("q", "6"))  # changed again since: it holds a later state
    assert view_has_seen(view, "ADDED", obj("other", "6"))  # created and deleted again before the view's watch
    view.apply("DELETED", obj("q", "8"))
    assert view_has_seen(view, "DELETED", obj("q", "8"))
    # opaque (non-integer) versions: only the object's own version counts
    opaque = ResourceCache("resourcequotas")
    opaque.replace([obj("q", "b")], "b")
    assert view_has_seen(opaque, "MODIFIED", obj("q", "b"))
    assert not view_has_seen(opaque, "MODIFIED", obj("q", "c"))
    assert view_has_seen(opaque, "DELETED", obj("gone", "c"))
