"""An AIPerfSweep judged per child (webhook/audit/sweeps.py): which children remain, each judged as
the AIPerfJob the sweep controller will create, its Event on the sweep naming it, read back per child."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

from tests.fakeview import EventClient, FakeView
from tests.test_workload_aiperf_sweep import sweep_obj
from webhook.audit.events import FAILED, PASSED, EventSink, failure_text, job_key, latest_states
from webhook.audit.findings import FAIL, PASS, findings
from webhook.audit.jobs import FINISHED, JUDGED, RUNNING, sweep_state
from webhook.audit.sink import JobRef, Judgement
from webhook.audit.sweeps import child_of_sweep, created_children, remaining_children
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.preflight import evaluate

S = Settings()
SWEEP = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfSweep", "team-a", "conc", "u-1")


def _child(name: str, sweep: str = "conc", uid: str = "u-1") -> dict[str, Any]:
    labels = {"aiperf.nvidia.com/sweep": sweep, "aiperf.nvidia.com/sweep-uid": uid}
    return {"metadata": {"name": name, "namespace": "team-a", "labels": labels}}


@pytest.mark.parametrize(
    ("phase", "state"),
    [
        (None, JUDGED), ("Pending", JUDGED), ("Running", JUDGED), ("Aggregating", RUNNING),
        ("Succeeded", FINISHED), ("Failed", FINISHED), ("Cancelled", FINISHED), ("PartiallyFailed", FINISHED),
        ("Completed", FINISHED),
    ],
)  # fmt: skip
def test_sweep_phases_from_the_operator(phase: str | None, state: str) -> None:
    obj = {"status": {"phase": phase}} if phase else {}
    assert sweep_state(obj)[0] == state


def test_remaining_children_in_the_controllers_run_order_without_those_created() -> None:
    sweep = sweep_obj(values=[100, 700], multiRun={"numRuns": 2})
    kids = remaining_children(sweep, [], S)
    assert kids is not None
    # repeated (the default): trials outer, variations inner
    assert [(c.name, c.run, c.runs, c.variation) for c in kids] == [
        ("conc-v00-t0", 1, 4, 0), ("conc-v01-t0", 2, 4, 1), ("conc-v00-t1", 3, 4, 0), ("conc-v01-t1", 4, 4, 1),
    ]  # fmt: skip
    later = kids[3].obj["metadata"]
    assert later["name"] == "conc-v01-t1"
    assert later["labels"]["aiperf.nvidia.com/trial-index"] == "1"
    assert later["labels"]["aiperf.nvidia.com/variation-index"] == "01"
    assert later["uid"] != kids[1].obj["metadata"]["uid"]
    # the controller created the first two: two remain; another sweep's (or an older incarnation's) do not count
    created = [_child("conc-v00-t0"), _child("conc-v01-t0"), _child("conc-v00-t1", uid="u-0"), _child("x", "other")]
    assert created_children(sweep, created) == {"conc-v00-t0", "conc-v01-t0"}
    assert [c.name for c in remaining_children(sweep, created, S) or []] == ["conc-v00-t1", "conc-v01-t1"]
    everything = created + [_child("conc-v00-t1"), _child("conc-v01-t1")]
    assert remaining_children(sweep, everything, S) == []
    assert child_of_sweep(_child("conc-v00-t0")) == "conc"
    assert child_of_sweep({"metadata": {"name": "solo"}}) is None


def test_a_sweep_the_operator_refuses_has_no_children_to_judge() -> None:
    assert remaining_children(sweep_obj(image=None), [], S) is None  # no spec.image: refused at create
    broken = sweep_obj()
    broken["spec"] = "not a mapping"
    assert remaining_children(broken, [], S) is None


async def test_each_child_is_judged_as_the_webhook_will_judge_it_and_the_event_names_it() -> None:
    """A quota that fits the 100-connection child but not the 700 one: only conc-v01 fails."""
    quota = {
        "metadata": {"name": "team-quota", "namespace": "team-a"},
        "spec": {"hard": {"requests.cpu": "6"}},
        "status": {"hard": {"requests.cpu": "6"}, "used": {"requests.cpu": "0"}},
    }
    view = FakeView({"resourcequotas": [quota], "namespaces": [{"metadata": {"name": "team-a"}}]})
    kids = remaining_children(sweep_obj(values=[100, 700]), [], S) or []
    now = dt.datetime.now(dt.UTC)
    texts: dict[str, str | None] = {}
    results: dict[str, str] = {}
    for c in kids:
        ev = await evaluate(copy.deepcopy(c.obj), settings=S, deadline=Deadline(5), view=view)
        ref = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfJob", "team-a", c.name, "", parent=SWEEP)
        texts[c.name] = failure_text(Judgement(ref, ev, "1", now, "scan"), S)
        results[c.name] = {f.check: f.result for f in findings(ev, S)}["Resource Quotas"]
    assert texts["conc-v00"] is None and results["conc-v00"] == PASS
    assert results["conc-v01"] == FAIL
    assert texts["conc-v01"] == (
        'AIPerfJob "conc-v01", which AIPerfSweep "conc" creates later, in namespace "team-a" failed 1 preflight '
        'check:\n[Resource Quotas] ResourceQuota "team-quota": requests.cpu would be 23900m (used 0 + job 23900m) '
        "but hard is 6. Fix: raise hard requests.cpu to at least 23900m (kubectl edit resourcequota team-quota -n "
        "team-a), or reduce the job's pods or requests."
    )
    # audit mode: the same words, what a switch to enforce would refuse
    audit = Settings(mode="audit")
    ev = await evaluate(copy.deepcopy(kids[1].obj), settings=audit, deadline=Deadline(5), view=view)
    ref = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfJob", "team-a", "conc-v01", "", parent=SWEEP)
    assert failure_text(Judgement(ref, ev, "1", now, "scan"), audit) == texts["conc-v01"]


async def test_child_events_go_on_the_sweep_name_the_child_and_are_deduplicated_per_child() -> None:
    client = EventClient()
    sink = EventSink(client, S, instance="a")
    v0 = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfJob", "team-a", "conc-v00", "", parent=SWEEP)
    v1 = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfJob", "team-a", "conc-v01", "", parent=SWEEP)
    assert await sink._write(v1, FAILED, "the child's denial")
    body = client.bodies[0]
    assert body["involvedObject"] == {
        "apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": "AIPerfSweep", "name": "conc", "namespace": "team-a",
        "uid": "u-1",
    }  # fmt: skip
    assert body["related"] == {
        "apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": "AIPerfJob", "name": "conc-v01", "namespace": "team-a",
    }  # fmt: skip
    assert body["metadata"]["name"].startswith("conc.")
    assert await sink._write(v1, PASSED, "")
    assert client.bodies[1]["message"] == (
        "AIPerfJob conc-v01, which AIPerfSweep conc creates later, passes its preflight checks again"
    )
    assert job_key(v0) == "u-1/conc-v00" and job_key(SWEEP) == "u-1"
    # read back after a restart: one state per child, and the sweep's own apart
    for b, ts in zip(client.bodies, ("2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"), strict=True):
        b["lastTimestamp"] = ts
    on_sweep = {
        "involvedObject": {"uid": "u-1"}, "reason": FAILED, "message": "the sweep's", "source": {"component":
        "preflight-webhook-audit"}, "lastTimestamp": "2026-01-01T00:00:03Z",
    }  # fmt: skip
    v0_failed = copy.deepcopy(client.bodies[0])
    v0_failed["related"]["name"] = "conc-v00"
    assert latest_states([*client.bodies, on_sweep, v0_failed]) == {
        "u-1/conc-v01": (PASSED, ""),
        "u-1/conc-v00": (FAILED, "the child's denial"),
        "u-1": (FAILED, "the sweep's"),
    }
