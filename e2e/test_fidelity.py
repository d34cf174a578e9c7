"""The fidelity matrix (e2e/fidelity/): every scenario's verdict against the real stack's outcome.

One real node (e2e/harness/node.py) with JobSet, Trainer and Kueue deployed from their own
manifests and the AIPerf operator with its stand-in endpoint (e2e/harness/stack.py,
``aiperf=True``); TrainJob and AIPerfJob scenarios; the webhook asked in ``enforce`` mode, then each job run with
it in ``audit`` mode and watched (e2e/fidelity/run.py). Zero misses and zero false denies; a
known limitation is listed by name (docs/fidelity.md) and must still be one.

Marked ``node`` (``pytest e2e -m "not node"`` skips it; ``make test`` runs it).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.fidelity.run import Row, render, run_on_node
from e2e.fidelity.scenarios import JOBSET_SCENARIOS, KNOWN_LIMITATIONS, KYVERNO_SCENARIOS, SCENARIOS
from e2e.harness.node import Node

pytestmark = pytest.mark.node


#: a path here makes the suite's matrix run also write the document (docs/fidelity.md), as
#: ``python -m e2e.fidelity.run`` does: one run of the matrix serves both
DOC_ENV = "PREFLIGHT_FIDELITY_DOC"


@pytest.fixture(scope="module")
def rows() -> Iterator[list[Row]]:
    t0 = time.monotonic()
    node = Node(start_timeout=180)
    node.start()
    try:
        timings = {"node start": time.monotonic() - t0}
        rows, on_node = run_on_node(node, SCENARIOS)
        timings.update(on_node, total=time.monotonic() - t0)
        if os.environ.get(DOC_ENV):
            Path(os.environ[DOC_ENV]).write_text(render(rows, timings))
        yield rows
    finally:
        left = node.stop()
        assert left == [], left


def _show(rows: list[Row]) -> str:
    return "\n".join(
        f"{r.scenario}: {r.outcome.kind} ({r.outcome.detail[:200]}) / "
        f"{'admitted ' + '; '.join(r.verdict.warnings)[:200] if r.verdict.allowed else 'denied: ' + r.verdict.message[:300]}"
        for r in rows
    )


def test_the_matrix_covers_at_least_60_scenarios_with_both_outcomes(rows: list[Row]) -> None:
    assert len(rows) == len(SCENARIOS) >= 60
    assert any(r.would_run for r in rows) and any(not r.would_run for r in rows), _show(rows)
    assert any(not r.verdict.allowed for r in rows), _show(rows)


def test_no_miss_and_no_false_deny(rows: list[Row]) -> None:
    bad = [r for r in rows if r.result in ("miss", "false-deny")]
    assert not bad, f"{len(bad)} wrong verdicts:\n" + _show(bad)


def test_every_known_limitation_is_still_one(rows: list[Row]) -> None:
    """A known limitation whose scenario now agrees must be removed from the table, not kept."""
    for r in rows:
        if r.known is not None:
            assert r.known in KNOWN_LIMITATIONS
            assert r.result == f"known:{r.known}", f"{r.scenario} now agrees ({r.result}): drop known={r.known!r}"


def test_no_job_carries_a_warning_that_is_not_about_it(rows: list[Row]) -> None:
    """A warning on an apply is about that job: each admitted job is warned by exactly the checks its
    scenario declares (Scenario.warns); none by Dry Run's "cannot verify", on any apply."""
    noisy = [r for r in rows if r.verdict.allowed and r.warned_by() != list(r.warns)]
    assert not noisy, "\n".join(f"{r.scenario}: warned by {r.warned_by()}, expected {list(r.warns)}" for r in noisy)
    dry_run = [(r.scenario, w) for r in rows for w in r.verdict.warnings if w.startswith("[Dry Run]")]
    assert not dry_run, dry_run


def test_good_jobs_of_every_kind_run_and_are_admitted(rows: list[Row]) -> None:
    good = [r for r in rows if r.scenario.startswith("good-")]
    assert len(good) >= 5
    assert "good-jobset" in [r.scenario for r in good]
    for r in good:
        assert r.outcome.kind == "runs" and r.verdict.allowed, _show([r])


def test_each_policy_engine_rule_refuses_its_job_and_admits_and_runs_its_twin(rows: list[Row]) -> None:
    """The Kyverno rows and the JobSets applied directly: a violating job never runs and is refused
    (by the webhook, or by the engine at apply); its compliant twin is admitted with no warning and runs."""
    by_name = {r.scenario: r for r in rows}
    names = [s.name for s in [*KYVERNO_SCENARIOS, *JOBSET_SCENARIOS]]
    assert sum(n.endswith("-violating") for n in names) >= 7
    for name in names:
        if name.endswith("-violating"):
            bad, good = by_name[name], by_name[name.removesuffix("-violating") + "-compliant"]
            assert not bad.would_run and not bad.verdict.allowed, _show([bad])
            assert good.would_run and good.verdict.allowed and good.verdict.warnings == [], _show([good])


#: the Image Pull row's denial (webhook/checks/imagepull.py, ImagePull._unknown), the registry's
#: address (the node's bridge and a free port) in \1
IMAGE_MISSING_DENIAL = re.compile(
    r'\[Image Pull\] Image "([0-9.]+:[0-9]+)/fidelity/workload:9\.9" not found: registry "\1" has no manifest '
    r'for tag "9\.9" of repository "fidelity/workload" \(pod group "node"\); tags: 1\.0\. '
    r'Fix: use a tag that exists, e\.g\. "1\.0"\.'
)


def test_an_image_missing_from_the_registry_is_denied_and_its_twin_is_pulled_and_runs(rows: list[Row]) -> None:
    """The Image Pull rows (e2e/fidelity/imagepull_scenarios.py), against the registry on the node's bridge:
    the tag it lacks never starts (the kubelet's ErrImagePull / ImagePullBackOff) and is denied with the
    registry's tags; the tag it has is admitted with no warning, pulled by containerd and runs."""
    by_name = {r.scenario: r for r in rows}
    missing, present = by_name["image-pull-tag-missing"], by_name["image-pull-tag-present"]
    assert missing.outcome.kind == "never-starts", _show([missing])
    assert "ErrImagePull" in missing.outcome.detail or "ImagePullBackOff" in missing.outcome.detail, _show([missing])
    assert not missing.verdict.allowed and IMAGE_MISSING_DENIAL.search(missing.verdict.message), _show([missing])
    assert present.would_run and present.verdict.allowed and present.verdict.warnings == [], _show([present])
