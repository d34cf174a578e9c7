"""The fidelity matrix with EVERY scenario run for real (``make conformance``): the record rewritten.

The same run as e2e/test_fidelity.py (one real node, the stack, every verdict in ``enforce`` mode
through the whole admission chain), but no outcome is taken from the record: every job is created
with the webhook in ``audit`` mode and watched to its real outcome (e2e/fidelity/run.py), Kyverno
built and started for its rows. Then e2e/fidelity/outcomes.json is rewritten with every outcome,
its digest, the date and the commit (e2e/fidelity/record.py), and docs/fidelity.md is rendered
from it. ``make test`` compares its verdicts with that record.

Zero misses and zero false denies: the record is written first either way (it is what was observed;
a miss is the webhook's fault, not the record's), and the test then fails on any wrong verdict.
About 30 minutes on 2 cores (27.9 min idle, 2026-12-05): every job of ~95 runs to its outcome on the one node (AIPerfJobs are
watched up to 420 s and run again after a crash past their start).
``PREFLIGHT_FIDELITY_RECORD``: another path for the record (and no docs/fidelity.md written), e.g.
to try a run without touching the repository's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.fidelity import record as rec
from e2e.fidelity.run import BAD, DOC, MatrixRun, render_record, run_on_node
from e2e.fidelity.scenarios import SCENARIOS
from e2e.harness.node import Node

#: ~30 min on an idle 2-core machine; the 1,800 s default of pyproject.toml cut it at a load average of ~50
pytestmark = [pytest.mark.node, pytest.mark.conformance, pytest.mark.timeout(5400)]

RECORD_ENV = "PREFLIGHT_FIDELITY_RECORD"


@pytest.fixture(scope="module")
def matrix() -> Iterator[MatrixRun]:
    t0 = time.monotonic()
    node = Node(start_timeout=180)
    node.start()
    try:
        timings = {"node start": time.monotonic() - t0}
        run = run_on_node(node, SCENARIOS, record=None, kyverno=True)
        timings.update(run.timings)
    finally:
        left = node.stop()
    timings["total"] = time.monotonic() - t0
    run.timings = timings
    path = Path(os.environ[RECORD_ENV]) if os.environ.get(RECORD_ENV) else rec.RECORD
    record = run.recorded(rec.Record(), when=rec.utc_now(), commit=rec.commit(), rewrite=True)
    rec.save(record, path)
    if path == rec.RECORD:
        DOC.write_text(render_record(record))
    assert left == [], left
    yield run


def test_every_scenario_ran_for_real_and_is_recorded(matrix: MatrixRun) -> None:
    path = Path(os.environ[RECORD_ENV]) if os.environ.get(RECORD_ENV) else rec.RECORD
    record = rec.load(path)
    assert matrix.skipped == [] and matrix.compared == []
    assert sorted(matrix.real) == sorted(s.name for s in SCENARIOS) == sorted(record.entries)
    for r in matrix.rows:
        e = record.entries[r.scenario]
        assert (e.digest, e.kind) == (matrix.digests[r.scenario], r.outcome.kind), r.scenario


def test_no_miss_and_no_false_deny(matrix: MatrixRun) -> None:
    bad = [r for r in matrix.rows if r.result in BAD]
    assert not bad, f"{len(bad)} wrong verdicts:\n" + "\n".join(
        f"{r.scenario}: {r.result}: {r.outcome.kind} ({r.outcome.detail[:200]}) / "
        f"{'admitted' if r.verdict.allowed else 'denied: ' + r.verdict.message[:300]}"
        for r in bad
    )
