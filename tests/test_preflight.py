"""evaluate(): the one path from an object to a decision (ratchet, overrides, unreadable objects)."""

from __future__ import annotations

import copy

import pytest

from tests.fakeview import FakeView
from webhook.checks import all_checks
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.preflight import evaluate


def _job(image: str = "nvcr.io/nvidia/aiperf:0.13.0", **annotations: str) -> dict:
    job = {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfJob",
        "metadata": {"name": "bench", "namespace": "team-a", "annotations": dict(annotations)},
        "spec": {
            "image": image,
            "benchmark": {
                "models": ["m"],
                "endpoint": {"urls": ["http://llm.example.com:8000"]},
                "datasets": [{"name": "main", "type": "synthetic", "entries": 10}],
                "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 10, "requests": 10}],
            },
        },
    }
    return job


OFFLINE = [c for c in all_checks() if not c.needs_cluster]
BAD_IMAGE = "nvcr.io/nvidia/AIPERF:0.13.0"  # uppercase repository: an invalid reference


async def _eval(obj, *, settings=None, view=None, operation="CREATE", old=None):
    return await evaluate(
        obj,
        settings=settings or Settings(),
        deadline=Deadline(5),
        view=view,
        operation=operation,
        old_obj=old,
        checks=OFFLINE,
    )


async def test_create_with_an_invalid_image_is_denied_naming_the_object_and_check() -> None:
    ev = await _eval(_job(BAD_IMAGE))
    assert ev.decision.allowed is False
    assert ev.decision.message.splitlines()[0] == 'AIPerfJob "bench" in namespace "team-a" failed 1 preflight check:'
    assert ev.decision.message.splitlines()[1].startswith("[Image Reference] ")


async def test_update_with_unchanged_spec_runs_no_checks() -> None:
    old = _job(BAD_IMAGE)
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"x": "y"}
    ev = await _eval(new, operation="UPDATE", old=old)
    assert ev.decision.allowed is True
    assert ev.results.checks == []


async def test_update_keeps_a_preexisting_failure_as_a_warning() -> None:
    old = _job(BAD_IMAGE)
    new = copy.deepcopy(old)
    new["spec"]["connectionsPerWorker"] = 50
    ev = await _eval(new, operation="UPDATE", old=old)
    assert ev.decision.allowed is True
    assert any(w.startswith("pre-existing: [Image Reference] ") for w in ev.decision.warnings)


async def test_update_that_introduces_a_failure_is_denied() -> None:
    old = _job()
    new = _job(BAD_IMAGE)
    ev = await _eval(new, operation="UPDATE", old=old)
    assert ev.decision.allowed is False
    assert ev.decision.denied_checks == ["Image Reference"]


async def test_unreadable_object_is_denied_on_create_by_a_policy_made_decision() -> None:
    job = _job()
    job["spec"]["bogusKey"] = 1
    ev = await _eval(job)
    assert ev.workload is None and ev.unreadable is not None
    assert ev.decision.allowed is False and ev.decision.outcome == "denied"
    assert ev.decision.message == (
        f'AIPerfJob "bench" in namespace "team-a" is not a valid AIPerfJob: {ev.unreadable}. '
        "Fix: correct that field and apply again."
    )


@pytest.mark.parametrize("mode", ["warn", "audit"])
async def test_unreadable_object_outside_enforce_mode_is_a_job_render_finding_never_a_deny(mode: str) -> None:
    """warn and audit never deny (docs/configuration.md): an object the operator would refuse is
    said as Job Render's finding, a warning in warn mode, an audit annotation in audit mode."""
    job = _job()
    del job["spec"]["benchmark"]["datasets"]
    ev = await _eval(job, settings=Settings.model_validate({"mode": mode}))
    assert ev.workload is None and ev.unreadable is not None
    assert ev.decision.allowed is True
    text = (
        'AIPerfJob "bench" in namespace "team-a" is not a valid AIPerfJob: spec.benchmark.datasets is required: '
        "at least one dataset (- name: main, type: synthetic, ...), or spec.benchmark.dataset for one. Fix: correct "
        "that field and apply again."
    )
    if mode == "warn":
        assert ev.decision.warnings == [f"[Job Render] {text}"]
    else:
        assert ev.decision.warnings == []
        assert "Job Render" in ev.decision.audit_annotations.get("failed-checks", "")


async def test_update_of_an_object_that_was_already_unreadable_is_allowed_with_a_warning() -> None:
    old = _job()
    old["spec"]["bogusKey"] = 1
    new = copy.deepcopy(old)
    new["spec"]["cancel"] = True
    ev = await _eval(new, operation="UPDATE", old=old)
    assert ev.decision.allowed is True
    assert len(ev.decision.warnings) == 1
    assert ev.decision.warnings[0].startswith("pre-existing: the object cannot be read: ")


async def test_namespace_label_switches_the_mode_and_says_so() -> None:
    view = FakeView({"namespaces": [{"metadata": {"name": "team-a", "labels": {"preflight.webhook.io/mode": "warn"}}}]})
    ev = await _eval(_job(BAD_IMAGE), view=view)
    assert ev.decision.allowed is True
    assert ev.decision.warnings[0] == "mode warn for namespace team-a (label preflight.webhook.io/mode)"
    assert ev.decision.warnings[1].startswith("[Image Reference] ")
    assert ev.decision.audit_annotations["mode"] == "warn"
    assert "mode warn for namespace team-a" in ev.decision.audit_annotations["overrides"]


async def test_skip_annotation_honoured_only_for_skippable_checks() -> None:
    settings = Settings(skippableChecks=["Image Reference"])
    ev = await _eval(
        _job(BAD_IMAGE, **{"preflight.webhook.io/skip-checks": "Image Reference, Name Length"}), settings=settings
    )
    assert ev.decision.allowed is True
    assert "Image Reference" not in [r.name for r in ev.results.checks]
    assert "Name Length" in [r.name for r in ev.results.checks]
    assert ev.decision.warnings == [
        "check 'Image Reference' skipped by annotation preflight.webhook.io/skip-checks",
        "annotation preflight.webhook.io/skip-checks cannot skip 'Name Length': not in skippableChecks",
    ]


async def test_unhandled_kind_is_allowed_without_checks() -> None:
    ev = await _eval({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    assert ev.workload is None and ev.decision.allowed is True and ev.decision.outcome == "unhandled"


async def test_a_check_passed_in_keeps_its_own_default_action():
    # a check that is not in the global registry: its default_action is its own, not "deny"
    from webhook.checks.base import Check
    from webhook.results import CheckResult, Status

    class Advisory(Check):
        name = "Advisory Only"
        default_action = "warn"
        needs_pod_groups = False

        async def run(self, ctx):
            return CheckResult(self.name, Status.FAIL, "the job looks odd. Fix: nothing required")

    ev = await evaluate(_job(), settings=Settings(), deadline=Deadline(5.0), checks=[Advisory()])
    assert ev.decision.allowed is True
    assert ev.decision.warnings == ["[Advisory Only] the job looks odd. Fix: nothing required"]
    configured = Settings(checks={"Advisory Only": "deny"})
    ev = await evaluate(_job(), settings=configured, deadline=Deadline(5.0), checks=[Advisory()])
    assert ev.decision.allowed is False


# --------------------------------------------------------------------------- issue 25: large objects off the loop


@pytest.mark.parametrize("image", ["nvcr.io/nvidia/aiperf:0.13.0", BAD_IMAGE])
async def test_off_loop_reads_the_object_in_a_worker_thread_with_the_same_verdict(
    image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import webhook.preflight as preflight

    threads: list[int] = []
    real = preflight.build_workload

    def recording(*args, **kwargs):  # type: ignore[no-untyped-def]
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(preflight, "build_workload", recording)
    on = await evaluate(_job(image), settings=Settings(), deadline=Deadline(5), checks=OFFLINE)
    off = await evaluate(_job(image), settings=Settings(), deadline=Deadline(5), checks=OFFLINE, off_loop=True)
    assert threads[0] == threading.get_ident() and threads[1] != threading.get_ident()
    assert (off.decision.allowed, off.decision.message, off.decision.warnings) == (
        on.decision.allowed,
        on.decision.message,
        on.decision.warnings,
    )


async def test_an_object_the_server_measured_within_the_limit_is_not_serialized_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server measured the object's JSON as the apiserver wrote it; a second measure was one C call
    holding the interpreter lock (127 ms at 750 KiB). Without that measure (the CLI), it is measured."""
    import webhook.workloads.walks as walks

    job = _job()
    job["metadata"]["labels"] = {f"l{i}": "v" * 40 for i in range(20_000)}  # ~1 MB, past the estimate: measured
    calls: list[int] = []
    real = walks.json_bytes

    def counting(obj):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(obj)

    monkeypatch.setattr(walks, "json_bytes", counting)
    ev = await evaluate(job, settings=Settings(), deadline=Deadline(5), checks=OFFLINE, within_limit=True)
    assert ev.decision.allowed is True and calls == []
    ev = await evaluate(job, settings=Settings(), deadline=Deadline(5), checks=OFFLINE)
    assert ev.decision.allowed is True and calls == [1]
