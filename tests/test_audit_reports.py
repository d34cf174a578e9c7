"""The Policy Reports sink and the findings behind it (webhook/audit/findings.py, reports.py, metrics.py).

The apiserver here is an in-memory stand-in for one resource collection (pure logic: what is written
and when); e2e/test_audit_reports_live.py runs the same sink against the real kube-apiserver + etcd
with the openreports.io CRDs installed.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
from typing import Any

import pytest
from prometheus_client import generate_latest

from tests.test_preflight import BAD_IMAGE, OFFLINE, _job
from webhook.audit.client import _BACKGROUND
from webhook.audit.findings import PASS, WARNING, denied_checks, findings
from webhook.audit.metrics import AuditMetrics
from webhook.audit.reports import Kept, ReportSink, Stamps, _content_hash, build_report, open_report_sink, report_path
from webhook.audit.sink import JobRef, Judgement
from webhook.cluster.view import ApiError
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.preflight import evaluate

AUDIT = Settings(mode="audit")
WHEN = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
IMAGE_FIX = (
    'Image "nvcr.io/nvidia/AIPERF:0.13.0" used by containers "event-bus-proxy", "control-plane" and 7 more in '
    'pod group "controller"; containers "worker-group-manager", "worker-0", "record-processor-0" in pod group '
    '"workers" is invalid: repository "nvidia/AIPERF" contains uppercase letters; repository paths must be '
    "lowercase. Fix: use [registry[:port]/]repository[:tag][@digest] with a lowercase repository, e.g. "
    '"nvcr.io/nvidia/aiperf:0.13.0"'
)


async def _ev(obj: dict[str, Any], settings: Settings = AUDIT):  # type: ignore[no-untyped-def]
    return await evaluate(obj, settings=settings, deadline=Deadline(5), checks=OFFLINE)


def _ref(name: str = "bench", ns: str = "team-a", uid: str = "u-1") -> JobRef:
    return JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfJob", ns, name, uid)


async def _judgement(obj: dict[str, Any], ref: JobRef, settings: Settings = AUDIT) -> Judgement:
    return Judgement(ref, await _ev(obj, settings), "1", WHEN, "scan")


class Store:
    """One openreports.io collection in memory: resourceVersions, 404 and 409 as the apiserver answers."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        #: whether each call was sent in the background lane (webhook/audit/client.py)
        self.background: list[bool] = []
        #: each list's Accept header and query
        self.lists: list[tuple[str, dict[str, Any]]] = []
        self.rv = 0

    async def request(
        self,
        method: str,
        path: str,
        *,
        timeout: float,
        query: Any = None,
        body: Any = None,
        accept: str = "application/json",
    ) -> Any:
        self.calls.append((method, path))
        self.background.append(_BACKGROUND.get())
        if method == "GET" and path.endswith("/reports"):  # a list: paged by limit/continue as the apiserver does
            items = [copy.deepcopy(o) for o in self.objects.values()]
            if "as=PartialObjectMetadataList" in accept:
                items = [{"kind": "PartialObjectMetadata", "metadata": o["metadata"]} for o in items]
            self.lists.append((accept, dict(query or {})))
            start, limit = int((query or {}).get("continue") or 0), (query or {}).get("limit") or len(items)
            more = start + limit < len(items)
            return {"items": items[start : start + limit], "metadata": {"continue": str(start + limit)} if more else {}}
        if method == "GET":
            if path not in self.objects:
                raise ApiError(404, "not found")
            return copy.deepcopy(self.objects[path])
        self.rv += 1
        obj = copy.deepcopy(body)
        if method == "POST":
            path = f"{path}/{obj['metadata']['name']}"
            if path in self.objects:
                raise ApiError(409, "already exists")
        elif self.objects.get(path, {}).get("metadata", {}).get("resourceVersion") != obj["metadata"].get(
            "resourceVersion"
        ):
            raise ApiError(409, "the object has been modified")
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[path] = obj
        return copy.deepcopy(obj)

    def writes(self) -> list[str]:
        return [m for m, _ in self.calls if m != "GET"]


async def test_audit_mode_findings_fail_exactly_where_enforce_mode_denies() -> None:
    jobs = {"good": _job(), "broken": _job(BAD_IMAGE)}
    for name, obj in jobs.items():
        audited, enforced = await _ev(obj, AUDIT), await _ev(obj, Settings(mode="enforce"))
        assert audited.decision.allowed  # audit mode never denies
        assert denied_checks(audited, AUDIT) == enforced.decision.denied_checks, name
    assert denied_checks(await _ev(jobs["broken"]), AUDIT) == ["Image Reference"]


async def test_a_failure_whose_action_is_warn_is_a_warn_finding_since_enforce_admits_it() -> None:
    settings = Settings.model_validate({"mode": "audit", "checks": {"Image Reference": "warn"}})
    found = {f.check: f for f in findings(await _ev(_job(BAD_IMAGE), settings), settings)}
    enforced = await _ev(_job(BAD_IMAGE), settings.model_copy(update={"mode": "enforce"}))
    assert enforced.decision.allowed
    assert (found["Image Reference"].result, found["Image Reference"].enforce) == (WARNING, "warn")
    assert found["Job Render"].result == PASS


async def test_the_report_holds_one_result_per_check_with_the_job_as_subject_and_the_fix() -> None:
    j = await _judgement(_job(BAD_IMAGE), _ref())
    from webhook.audit.reports import Entry

    report = build_report("team-a", [Entry(j.job, f) for f in findings(j.evaluation, AUDIT)], now=1_700_000_000)
    assert report["apiVersion"] == "openreports.io/v1alpha1" and report["kind"] == "Report"
    assert report["metadata"] == {
        "name": "preflight-webhook",
        "namespace": "team-a",
        "labels": {"app.kubernetes.io/managed-by": "preflight-webhook", "app.kubernetes.io/name": "preflight-webhook"},
    }
    assert report["source"] == "preflight-webhook"
    assert report["summary"] == {"pass": 4, "fail": 1, "warn": 0, "error": 0, "skip": 0}
    image = next(r for r in report["results"] if r["policy"] == "Image Reference")
    assert image == {
        "source": "preflight-webhook",
        "policy": "Image Reference",
        "category": "Preflight",
        "result": "fail",
        "message": IMAGE_FIX,
        "resources": [
            {
                "apiVersion": "aiperf.nvidia.com/v1alpha1",
                "kind": "AIPerfJob",
                "namespace": "team-a",
                "name": "bench",
                "uid": "u-1",
            }
        ],
        "properties": {"enforce": "deny", "now": "recorded", "status": "fail"},
        "timestamp": {"seconds": 1_700_000_000, "nanos": 0},
    }
    assert [r["policy"] for r in report["results"]] == sorted(r["policy"] for r in report["results"])


async def test_a_sweep_child_is_reported_on_its_sweep_and_names_the_child() -> None:
    sweep = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfSweep", "team-a", "sweep", "s-1")
    child = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfJob", "team-a", "sweep-3", "", parent=sweep)
    j = await _judgement(_job(BAD_IMAGE), child)
    store = Store()
    sink = ReportSink(store, AUDIT, debounce=0)
    await sink.publish(j)
    await sink.idle()
    result = store.objects[report_path("team-a")]["results"][0]
    assert result["resources"][0]["kind"] == "AIPerfSweep" and result["resources"][0]["name"] == "sweep"
    assert result["properties"]["child"] == "sweep-3"


async def test_the_sink_writes_once_and_not_again_while_nothing_changes() -> None:
    store = Store()
    clock = iter(range(1000, 2000, 10))
    sink = ReportSink(store, AUDIT, debounce=0, clock=lambda: next(clock))
    bad = await _judgement(_job(BAD_IMAGE), _ref())
    for _ in range(3):  # the scan, then two periodic re-checks: same findings
        await sink.publish(bad)
        await sink.idle()
    assert store.writes() == ["POST"]
    first = store.objects[report_path("team-a")]
    # the job is fixed: one update, the changed result gets a new timestamp, the others keep theirs
    await sink.publish(await _judgement(_job(), _ref()))
    await sink.idle()
    assert store.writes() == ["POST", "PUT"]
    now = store.objects[report_path("team-a")]
    assert now["summary"]["fail"] == 0 and now["summary"]["pass"] == 5
    ts = {r["policy"]: r["timestamp"]["seconds"] for r in now["results"]}
    before = {r["policy"]: r["timestamp"]["seconds"] for r in first["results"]}
    assert ts["Image Reference"] > before["Image Reference"]
    assert ts["Job Render"] == before["Job Render"]


async def test_every_request_of_the_sink_takes_the_background_lane() -> None:
    store = Store()
    sink = ReportSink(store, AUDIT, debounce=0)
    await sink.publish(await _judgement(_job(BAD_IMAGE), _ref()))
    await sink.idle()
    await sink.scan_done(1, {})  # the orphans' list
    assert [m for m, _ in store.calls] == ["GET", "POST", "GET"]
    assert store.background == [True, True, True]
    assert _BACKGROUND.get() is False  # the caller's own requests are not


async def test_equal_findings_of_two_jobs_are_held_once_and_what_no_job_holds_is_let_go() -> None:
    store = Store()
    sink = ReportSink(store, AUDIT, debounce=0)
    bad = await _judgement(_job(BAD_IMAGE), _ref("a", uid="u-a"))
    await sink.publish(bad)
    await sink.publish(await _judgement(_job(BAD_IMAGE), _ref("b", uid="u-b")))
    (_, a), (_, b) = sink._entries["team-a"].values()
    assert a == b and a is b  # one tuple of the same findings for both jobs
    # b is fixed: its new findings are held, and after the scan the old ones only through a
    await sink.publish(await _judgement(_job(), _ref("b", uid="u-b")))
    fixed = sink._entries["team-a"]["u-b"][1]
    await sink.scan_done(2, {})
    assert set(sink._shared) == {a, fixed, *a, *fixed}
    await sink.forget(bad.job, "deleted")
    await sink.scan_done(1, {})
    assert set(sink._shared) == {fixed, *fixed}
    await sink.idle()
    assert [r["resources"][0]["name"] for r in store.objects[report_path("team-a")]["results"]] == ["b"] * 5


class Slow(Store):
    """A Store whose requests wait at a gate; it counts how many were in flight at most."""

    def __init__(self) -> None:
        super().__init__()
        self.now = self.most = 0
        self.gate = asyncio.Event()

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await self.gate.wait()
            return await super().request(method, path, **kw)
        finally:
            self.now -= 1


async def test_at_most_writers_reports_are_built_and_sent_at_once() -> None:
    from webhook.audit.reports import WRITERS

    store = Slow()
    sink = ReportSink(store, AUDIT, debounce=0)
    for i in range(WRITERS * 3):
        await sink.publish(await _judgement(_job(BAD_IMAGE), _ref(uid=f"u-{i}", ns=f"ns-{i}")))
    waiting = asyncio.ensure_future(sink.idle())
    for _ in range(5):
        await asyncio.sleep(0)  # every namespace's write has started or waits for a writer
    assert store.most == WRITERS and not waiting.done()
    store.gate.set()
    await waiting  # idle() waited for the writes that had left the pending set too
    assert store.writes() == ["POST"] * WRITERS * 3 and store.most == WRITERS


async def test_the_sink_keeps_the_resource_version_digest_and_timestamps_of_a_report_not_its_body() -> None:
    store = Store()
    sink = ReportSink(store, AUDIT, debounce=0)
    await sink.publish(await _judgement(_job(BAD_IMAGE), _ref()))
    await sink.idle()
    stored = store.objects[report_path("team-a")]
    kept = sink._remote["team-a"]
    assert isinstance(kept, Kept)
    assert kept.resource_version == stored["metadata"]["resourceVersion"]
    assert len(kept.stamps) == len(stored["results"])
    assert [kept.stamps.get(_content_hash(r)) for r in stored["results"]] == [
        r["timestamp"]["seconds"] for r in stored["results"]
    ]
    assert kept == Kept.of(stored)  # what a restart reads back compares equal: no write


async def test_changes_within_the_debounce_window_make_one_write() -> None:
    store = Store()
    sink = ReportSink(store, AUDIT, debounce=0.05)
    for i in range(5):
        await sink.publish(await _judgement(_job(BAD_IMAGE), _ref(f"bench-{i}", uid=f"u-{i}")))
    await sink.idle()
    assert store.writes() == ["POST"]
    assert len(store.objects[report_path("team-a")]["results"]) == 25


async def test_a_restart_rebuilds_from_the_scan_without_writing_an_unchanged_report() -> None:
    store = Store()
    first = ReportSink(store, AUDIT, debounce=0)
    await first.publish(await _judgement(_job(BAD_IMAGE), _ref()))
    await first.publish(await _judgement(_job(), _ref(ns="team-b", uid="u-2")))
    await first.idle()
    assert store.writes() == ["POST", "POST"]
    # team-b's job is deleted while the controller is down; a new controller scans
    second = ReportSink(store, AUDIT, debounce=0)
    await second.publish(await _judgement(_job(BAD_IMAGE), _ref()))
    await second.idle()
    await second.scan_done(1, {"running": 2})
    assert store.writes() == ["POST", "POST", "PUT"]  # team-b's report emptied, team-a's left alone
    emptied = store.objects[report_path("team-b")]
    assert emptied["results"] == [] and emptied["summary"] == dict.fromkeys(
        ("pass", "fail", "warn", "error", "skip"), 0
    )
    await second.scan_done(1, {})  # only the first scan cleans up
    assert store.writes() == ["POST", "POST", "PUT"]


async def test_the_orphans_are_listed_as_metadata_page_by_page_and_read_whole_only_to_be_emptied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from webhook.audit import reports

    monkeypatch.setattr(reports, "LIST_PAGE", 2)
    store = Store()
    first = ReportSink(store, AUDIT, debounce=0)
    for i in range(5):
        await first.publish(await _judgement(_job(BAD_IMAGE), _ref(ns=f"team-{i}", uid=f"u-{i}")))
    await first.idle()
    # a new controller finds only team-0's job: the other four reports, over three pages, are orphans
    second = ReportSink(store, AUDIT, debounce=0)
    await second.publish(await _judgement(_job(BAD_IMAGE), _ref(ns="team-0", uid="u-0")))
    await second.idle()
    store.calls.clear()
    await second.scan_done(1, {})
    assert [q.get("continue") for _, q in store.lists] == [None, "2", "4"]
    assert all(
        a.startswith("application/json;as=PartialObjectMetadataList") and q["limit"] == 2 for a, q in store.lists
    )
    emptied = [p for m, p in store.calls if m == "PUT"]
    assert emptied == [report_path(f"team-{i}") for i in range(1, 5)]
    assert all(store.objects[p]["results"] == [] for p in emptied)
    assert store.objects[report_path("team-0")]["results"]  # the judged namespace's report is left alone


async def test_a_forgotten_job_leaves_the_report_and_the_last_one_empties_it() -> None:
    store = Store()
    sink = ReportSink(store, AUDIT, debounce=0)
    # both judged first: an evaluation between the two publishes lets the first one's write run alone
    bad, good = await _judgement(_job(BAD_IMAGE), _ref()), await _judgement(_job(), _ref("other", uid="u-2"))
    await sink.publish(bad)
    await sink.publish(good)
    await sink.idle()
    await sink.forget(_ref(), "started")
    await sink.idle()
    assert [r["resources"][0]["name"] for r in store.objects[report_path("team-a")]["results"]] == ["other"] * 5
    await sink.forget(_ref("other", uid="u-2"), "deleted")
    await sink.idle()
    assert store.objects[report_path("team-a")]["results"] == [] and store.writes() == ["POST", "PUT", "PUT"]


async def test_a_conflict_is_read_again_and_written_once_more() -> None:
    store = Store()
    sink = ReportSink(store, AUDIT, debounce=0)
    await sink.publish(await _judgement(_job(BAD_IMAGE), _ref()))
    await sink.idle()
    store.objects[report_path("team-a")]["metadata"]["resourceVersion"] = "changed-by-someone"
    await sink.publish(await _judgement(_job(), _ref()))
    await sink.idle()
    assert store.writes() == ["POST", "PUT", "PUT"]
    assert store.objects[report_path("team-a")]["summary"]["fail"] == 0


@pytest.mark.parametrize("status", [403, 500])
async def test_a_failed_write_is_logged_and_nothing_breaks(status: int, caplog: pytest.LogCaptureFixture) -> None:
    class Refusing(Store):
        async def request(self, method: str, path: str, **kw: Any) -> Any:
            if method != "GET":
                raise ApiError(status, "forbidden" if status == 403 else "etcd unavailable")
            return await super().request(method, path, **kw)

    sink = ReportSink(Refusing(), AUDIT, debounce=0)
    await sink.publish(await _judgement(_job(BAD_IMAGE), _ref()))
    await sink.idle()
    assert "cannot write the Report" in caplog.text


async def test_a_failed_write_is_retried_with_a_doubling_delay_until_it_lands(caplog: pytest.LogCaptureFixture) -> None:
    """A write that times out (an apiserver busy with a full scan) is not dropped: the report would
    keep saying what it said before the change. It is retried, after 1, 2, 4, ... retry_base."""

    class Slow(Store):
        failures = 2

        async def request(self, method: str, path: str, **kw: Any) -> Any:
            if method != "GET" and self.failures:
                self.failures -= 1
                self.calls.append((method, path))
                raise ApiError(0, "timed out after 10.0s waiting for the apiserver")
            return await super().request(method, path, **kw)

    store = Slow()
    sink = ReportSink(store, AUDIT, debounce=0, retry_base=0.01)
    await sink.publish(await _judgement(_job(BAD_IMAGE), _ref()))
    await sink.idle()  # the first write failed; its retry waits
    assert store.writes() == ["POST"] and report_path("team-a") not in store.objects
    while store.failures or sink._pending:  # the retries run: wait on them, not on a clock
        await asyncio.gather(*list(sink._pending.values()))
    assert store.writes() == ["POST", "POST", "POST"]
    assert store.objects[report_path("team-a")]["summary"]["fail"] == 1
    assert sink.writes == {"create": 1, "update": 0}
    assert (
        "cannot write the Report in namespace team-a (timed out after 10.0s waiting for the apiserver); retrying in 0s"
        in caplog.text
    )
    assert sink._failures == {}  # a write that landed resets the delay


async def test_a_change_during_a_retry_wait_joins_the_retry() -> None:
    class Once(Store):
        failed = False

        async def request(self, method: str, path: str, **kw: Any) -> Any:
            if method != "GET" and not self.failed:
                self.failed = True
                raise ApiError(500, "etcd unavailable")
            return await super().request(method, path, **kw)

    store = Once()
    sink = ReportSink(store, AUDIT, debounce=0, retry_base=0.01)
    await sink.publish(await _judgement(_job(BAD_IMAGE), _ref()))
    await sink.idle()
    await sink.publish(await _judgement(_job(), _ref("ok", uid="u-2")))  # while the retry waits
    while sink._pending:
        await asyncio.gather(*list(sink._pending.values()))
    assert store.writes() == ["POST"]  # the one retry wrote both jobs
    report = store.objects[report_path("team-a")]
    assert {r["resources"][0]["name"] for r in report["results"]} == {"bench", "ok"}
    assert report["summary"]["fail"] == 1
    await sink.close()


async def test_metrics_count_the_findings_now_by_namespace_kind_check_and_result() -> None:
    m = AuditMetrics(AUDIT)
    await m.publish(await _judgement(_job(BAD_IMAGE), _ref()))
    await m.publish(await _judgement(_job(), _ref("ok", uid="u-2")))
    m.count_write("create")
    await m.scan_done(2, {"running": 3})
    text = generate_latest(m.registry).decode()
    fail = 'preflight_audit_findings{check="Image Reference",kind="AIPerfJob",namespace="team-a",result="fail"} 1.0'
    assert fail in text
    assert (
        'preflight_audit_findings{check="Image Reference",kind="AIPerfJob",namespace="team-a",result="pass"} 1.0'
        in text
    )
    assert 'preflight_audit_jobs_watched{state="judged"} 2.0' in text
    assert 'preflight_audit_jobs_watched{state="running"} 3.0' in text
    assert 'preflight_audit_report_writes_total{verb="create"} 1.0' in text
    assert "preflight_audit_scan_duration_seconds_count 1.0" in text
    assert "preflight_audit_last_full_scan_timestamp_seconds 0.0" not in text
    await m.forget(_ref(), "started")
    assert fail not in generate_latest(m.registry).decode()


@pytest.mark.parametrize(
    ("enabled", "discovery", "said"),
    [
        (
            False,
            None,
            "Policy Reports are off (audit.reports: false): the audit controller writes no openreports.io Report",
        ),
        (True, ApiError(404, "not found"), "Policy Reports: the openreports.io/v1alpha1 API is not served (its CRDs"),
        (True, {"resources": [{"name": "clusterreports"}]}, "the openreports.io/v1alpha1 API is not served"),
    ],
)
async def test_without_reports_the_controller_says_so_at_start(
    enabled: bool, discovery: Any, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    class Discovery(Store):
        async def request(self, method: str, path: str, **kw: Any) -> Any:
            assert path == "/apis/openreports.io/v1alpha1"
            if isinstance(discovery, ApiError):
                raise discovery
            return discovery

    assert await open_report_sink(Discovery(), AUDIT, enabled=enabled) is None
    assert said in caplog.text and "its findings go to Events and metrics only" in caplog.text


async def test_with_the_crds_served_the_sink_is_opened() -> None:
    class Served(Store):
        async def request(self, method: str, path: str, **kw: Any) -> Any:
            return {"resources": [{"name": "reports"}, {"name": "clusterreports"}]}

    assert isinstance(await open_report_sink(Served(), AUDIT), ReportSink)


async def test_a_namespace_too_large_for_one_object_keeps_every_fail_and_says_what_it_left_out() -> None:
    from webhook.audit.reports import Entry

    bad = await _judgement(_job(BAD_IMAGE), _ref())
    entries = [Entry(_ref(f"bench-{i}", uid=f"u-{i}"), f) for i in range(40) for f in findings(bad.evaluation, AUDIT)]
    whole = build_report("team-a", entries, now=1)
    assert len(whole["results"]) == 200 and "configuration" not in whole
    cut = build_report("team-a", entries, now=1, max_bytes=40_000)
    assert cut["summary"] == whole["summary"] == {"pass": 160, "fail": 40, "warn": 0, "error": 0, "skip": 0}
    assert [r["result"] for r in cut["results"]].count("fail") == 40  # every fail kept
    assert len(json.dumps(cut, separators=(",", ":"))) <= 40_000
    assert {r["result"] for r in cut["results"]} == {"fail"}  # the passes did not fit whole: left out
    assert cut["configuration"] == {"limits": {"maxResults": 40, "statusFilter": ["fail", "warn", "skip"]}}
    tiny = build_report("team-a", entries, now=1, max_bytes=10_000)
    assert 0 < len(tiny["results"]) < 40 and tiny["configuration"] == {"limits": {"maxResults": len(tiny["results"])}}


def test_stamps_find_each_hash_by_its_time_and_say_none_for_an_unknown_one() -> None:
    pairs = [(7, 100), (-3, 100), (2**62, 200), (5, 100), (-(2**63), 300)]
    stamps = Stamps(pairs)
    assert [stamps.get(h) for h, _ in pairs] == [100, 100, 200, 100, 300]
    assert stamps.get(6) is None and stamps.get(2**63 - 1) is None
    assert len(stamps) == 5
    assert sorted(stamps.items()) == sorted(pairs)


def test_stamps_keep_the_last_time_of_a_hash_seen_twice_and_compare_by_content() -> None:
    stamps = Stamps([(1, 10), (1, 20), (2, 10)])
    assert stamps.get(1) == 20 and len(stamps) == 2
    assert stamps == Stamps([(2, 10), (1, 20)])  # the order given does not matter
    assert stamps != Stamps([(2, 10), (1, 10)])
    assert Stamps() == Stamps([]) and len(Stamps()) == 0 and Stamps().get(1) is None


async def test_one_write_of_a_namespace_at_a_time_and_a_change_meanwhile_is_written_after_it() -> None:
    store = Slow()
    sink = ReportSink(store, AUDIT, debounce=0)
    await sink.publish(await _judgement(_job(BAD_IMAGE), _ref("a", uid="u-a")))
    for _ in range(5):
        await asyncio.sleep(0)  # its write has started: it reads the report and waits at the gate
    await sink.publish(await _judgement(_job(BAD_IMAGE), _ref("b", uid="u-b")))
    waiting = asyncio.ensure_future(sink.idle())
    for _ in range(5):
        await asyncio.sleep(0)
    assert store.most == 1 and not waiting.done()  # the second write waits for the first
    store.gate.set()
    await waiting
    # one create with both jobs (the first write's body is built after its read, with the change),
    # and the second write finds nothing to do; two writes at once both POSTed, and one was refused (409)
    assert store.writes() == ["POST"]
    results = store.objects[report_path("team-a")]["results"]
    assert sorted({r["resources"][0]["name"] for r in results}) == ["a", "b"]
