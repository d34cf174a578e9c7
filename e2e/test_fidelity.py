"""The fidelity matrix (e2e/fidelity/): every scenario's verdict against the real stack's outcome.

One real node (e2e/harness/node.py) with JobSet, Trainer and Kueue deployed from their own
manifests and the AIPerf operator with its stand-in endpoint (e2e/harness/stack.py,
``aiperf=True``); every scenario set up and the webhook asked for every verdict in ``enforce``
mode, through the whole admission chain. Each verdict is compared with the scenario's RECORDED real
outcome (e2e/fidelity/outcomes.json, e2e/fidelity/record.py) when one was observed for its digest
(the scenario's objects, the stack's versions and images); a scenario with none (new, changed, or
the stack changed) is run for real here, with the webhook in ``audit`` mode, and watched
(e2e/fidelity/run.py). The output says how many were compared and names those run for real.
Without Kyverno's binary (``make test`` does not build it) the scenarios that need Kyverno are
skipped and named: ``make conformance`` judges them (e2e/test_fidelity_conformance.py runs every
scenario for real and rewrites the record). Zero misses and zero false denies; a known
limitation is listed by name (docs/fidelity.md) and must still be one.

Marked ``node`` (``pytest e2e -m "not node"`` skips it; ``make test`` runs it).
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.fidelity import record as rec
from e2e.fidelity.imagepull_scenarios import foreign_arch
from e2e.fidelity.run import AFTER_HELD, BAD, WHILE_HELD, MatrixRun, Row, render, run_on_node
from e2e.fidelity.scenarios import JOBSET_SCENARIOS, KNOWN_LIMITATIONS, KYVERNO_SCENARIOS, SCENARIOS, by_name
from e2e.harness.node import Node

pytestmark = pytest.mark.node


#: a path here makes the suite's matrix run also write its rows as a document (docs/fidelity.md's
#: shape; each outcome with its provenance, "this run" for those run for real)
DOC_ENV = "PREFLIGHT_FIDELITY_DOC"


def report(config: pytest.Config, line: str) -> None:
    """``line`` on pytest's terminal, past its output capture (shown with -q too)."""
    capman = config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
        print("\n" + line, file=sys.stderr, flush=True)


@pytest.fixture(scope="module")
def matrix(request: pytest.FixtureRequest) -> Iterator[MatrixRun]:
    """The node, the stack and every verdict: about 4.5 min warm (the node ~1 min, the JobSet, Trainer,
    Kueue and AIPerf stack ~2 min, 94 dry runs through the whole admission chain), longer than 60 s
    because the verdicts must come from the real controllers' webhooks and policies, not from a model
    of them; a scenario with no recorded outcome for its digest also runs for real here."""
    t0 = time.monotonic()
    node = Node(start_timeout=180)
    node.start()
    try:
        timings = {"node start": time.monotonic() - t0}
        run = run_on_node(node, SCENARIOS, record=rec.load())
        timings.update(run.timings, total=time.monotonic() - t0)
        if os.environ.get(DOC_ENV):
            Path(os.environ[DOC_ENV]).write_text(render(run.rows, timings))
        report(request.config, run.summary())
        if run.real:
            warnings.warn(
                f"{len(run.real)} fidelity scenarios had no outcome recorded for their digest and ran for real: "
                f"{', '.join(run.real)}; make conformance records them (e2e/fidelity/outcomes.json)",
                stacklevel=1,
            )
        if run.skipped:
            warnings.warn(
                f"{len(run.skipped)} fidelity scenarios need Kyverno, which is not built: skipped here, judged only "
                f"in make conformance: {', '.join(run.skipped)}",
                stacklevel=1,
            )
        yield run
    finally:
        left = node.stop()
        assert left == [], left


@pytest.fixture(scope="module")
def rows(matrix: MatrixRun) -> list[Row]:
    return matrix.rows


def _show(rows: list[Row]) -> str:
    return "\n".join(
        f"{r.scenario}: {r.outcome.kind} ({r.outcome.detail[:200]}) / "
        f"{'admitted ' + '; '.join(r.verdict.warnings)[:200] if r.verdict.allowed else 'denied: ' + r.verdict.message[:300]}"
        for r in rows
    )


def test_the_matrix_covers_at_least_60_scenarios_with_both_outcomes(matrix: MatrixRun, rows: list[Row]) -> None:
    assert len(rows) + len(matrix.skipped) == len(SCENARIOS) >= 60
    assert len(rows) >= 60, matrix.summary()
    assert any(r.would_run for r in rows) and any(not r.would_run for r in rows), _show(rows)
    assert any(not r.verdict.allowed for r in rows), _show(rows)


def test_no_miss_and_no_false_deny(matrix: MatrixRun, rows: list[Row]) -> None:
    """Nor a wrong wait: a job behind jobs holding its queue is warned "will wait" exactly when Kueue
    kept it waiting (run.classify)."""
    bad = [r for r in rows if r.result in BAD]
    assert not bad, f"{len(bad)} wrong verdicts ({matrix.summary()}):\n" + _show(bad)


def test_every_verdict_meets_a_real_outcome_of_its_own_digest(matrix: MatrixRun) -> None:
    """Each row's outcome is this run's, or the record's for the scenario's digest now: nothing stale
    is compared (a scenario or stack changed since its outcome was observed runs for real)."""
    record = rec.load()
    for r in matrix.rows:
        if r.source == "record":
            assert record.entries[r.scenario].digest == matrix.digests[r.scenario], r.scenario
        else:
            assert r.source == "real", r.scenario
    assert sorted(matrix.compared + matrix.real + matrix.skipped) == sorted(s.name for s in SCENARIOS)


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


def said(template: str) -> re.Pattern[str]:
    """A declared warning (Scenario.says) as a pattern: the words exactly, ``{s}`` any whole seconds."""
    return re.compile(re.escape(template).replace(re.escape("{s}"), r"[0-9]+"))


def test_every_declared_warning_is_given_word_for_word(rows: list[Row]) -> None:
    """A row that declares its warnings (Scenario.says) gets exactly those, in order, word for word."""
    scenarios = by_name()
    declared = [r for r in rows if scenarios[r.scenario].says]
    assert "kueue-waits-behind-running" in [r.scenario for r in declared]
    for r in declared:
        want = scenarios[r.scenario].says
        assert r.verdict.allowed and len(r.verdict.warnings) == len(want), _show([r])
        for got, template in zip(r.verdict.warnings, want, strict=True):
            assert said(template).fullmatch(got), f"{r.scenario}:\n got: {got}\nwant: {template}"


def test_a_job_behind_a_running_one_waits_and_one_that_fits_or_borrows_is_admitted_at_once(rows: list[Row]) -> None:
    """The Kueue rows with a job holding the queue first (Scenario.before, issue 39), as the runner saw
    Kueue admit them: the job that fits beside it, and the one that borrows from its cohort, were
    admitted while it held the queue, with no warning (the borrower's ClusterQueue borrowing cpu); the
    one behind it in a full ClusterQueue was warned, kept pending and admitted only after it ended."""
    by = {r.scenario: r for r in rows}
    fits, waits, borrows = (
        by[n] for n in ("kueue-fits-beside-running", "kueue-waits-behind-running", "kueue-borrows-beside-running")
    )
    for r in (fits, borrows):
        assert r.would_run and r.verdict.allowed and r.verdict.warnings == [], _show([r])
        assert r.outcome.admission == WHILE_HELD and 'while TrainJob "hold" held the queue' in r.outcome.detail
    assert 'its ClusterQueue borrowing cpu 100m of flavor "fx-default" from its cohort' in borrows.outcome.detail
    assert "borrowing" not in fits.outcome.detail, _show([fits])
    assert waits.would_run and waits.verdict.allowed, _show([waits])
    assert waits.outcome.admission == AFTER_HELD, _show([waits])
    assert 'Kueue kept it pending while TrainJob "hold" held the queue (' in waits.outcome.detail
    assert "insufficient unused quota for cpu in flavor fx-default" in waits.outcome.detail, _show([waits])


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
    # without Kyverno (not built for make test) its rows are judged in make conformance only
    # (the JobSets applied directly are always judged: at least their violating/compliant pair)
    assert all(s.name in by_name for s in JOBSET_SCENARIOS)
    names = [n for n in names if n in by_name]
    assert sum(n.endswith("-violating") for n in names) >= 1
    for name in names:
        if name.endswith("-violating"):
            bad, good = by_name[name], by_name[name.removesuffix("-violating") + "-compliant"]
            assert not bad.would_run and not bad.verdict.allowed, _show([bad])
            assert good.would_run and good.verdict.allowed and good.verdict.warnings == [], _show([good])


#: the Image Pull row's denial (webhook/checks/imagepull.py, ImagePull._unknown), the registry's
#: address (the node's bridge and a free port) in \1
IMAGE_MISSING_DENIAL = re.compile(
    r'\[Image Pull\] Image "([0-9.]+:[0-9]+)/fidelity/workload:9\.9" not found: registry "\1" has no manifest '
    r'for tag "9\.9" of repository "fidelity/workload" \(pod group "node"\); tags: 1\.0, 1\.0-anonymous, 1\.0-foreign\. '
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
    # containerd's own reason: the registry has no such manifest (not a TLS or login failure)
    assert "not found" in missing.outcome.detail and "x509" not in missing.outcome.detail, _show([missing])
    assert not missing.verdict.allowed and IMAGE_MISSING_DENIAL.search(missing.verdict.message), _show([missing])
    assert present.would_run and present.verdict.allowed and present.verdict.warnings == [], _show([present])


#: the node's architecture as the kubelet labels it (kubernetes.io/arch: Go's GOARCH)
NODE_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
#: the credential rows' denials (ImagePull._judge), the registry's address in \1
NO_CREDENTIALS_DENIAL = re.compile(
    r'\[Image Pull\] Registry "([0-9.]+:[0-9]+)" refused anonymous access to image '
    r'"\1/fidelity/workload:1\.0-anonymous" \(pod group "node"\) \(HTTP 401\), and the pods have no '
    r'imagePullSecrets \(nor has ServiceAccount "default"\); the kubelet would pull without credentials and fail\. '
    r"Fix: kubectl create secret docker-registry NAME -n fx-image-pull-no-credentials --docker-server=\1 \.\.\. "
    r"and list it in the pods' imagePullSecrets\."
)
WRONG_CREDENTIALS_DENIAL = re.compile(
    r'\[Image Pull\] Registry "([0-9.]+:[0-9]+)" refused image "\1/fidelity/workload:1\.0-stale" '
    r'\(pod group "node"\) \(HTTP 401\) with the credentials of Secret "stalecred" \(from imagePullSecrets\); '
    r'the kubelet would fail the pull\. Fix: update Secret "stalecred" in namespace '
    r'"fx-image-pull-wrong-credentials" with credentials that can pull "\1/fidelity/workload" '
    r"\(kubectl create secret docker-registry NAME --docker-server=\1 \.\.\.\)\."
)


def test_a_private_image_without_credentials_or_with_wrong_ones_is_denied_and_never_pulled(rows: list[Row]) -> None:
    """The credential rows: containerd pulls without credentials, or with the wrong password, the
    registry answers 401 and the pod never starts (ErrImagePull / ImagePullBackOff); the webhook denies,
    naming the Secret it tried (image-pull-tag-present is the row with the right credentials: it runs)."""
    by_name = {r.scenario: r for r in rows}
    for name, denial in (
        ("image-pull-no-credentials", NO_CREDENTIALS_DENIAL),
        ("image-pull-wrong-credentials", WRONG_CREDENTIALS_DENIAL),
    ):
        r = by_name[name]
        assert r.outcome.kind == "never-starts", _show([r])
        assert "ErrImagePull" in r.outcome.detail or "ImagePullBackOff" in r.outcome.detail, _show([r])
        assert "401 Unauthorized" in r.outcome.detail, _show([r])
        assert not r.verdict.allowed and denial.search(r.verdict.message), _show([r])


def test_an_index_without_the_nodes_platform_is_denied_and_its_twin_with_it_runs(rows: list[Row]) -> None:
    """The multi-arch rows: containerd's platform matcher finds no manifest for the node in an index
    offering only another architecture (the pull fails, the job never starts) and the webhook denies,
    naming both platforms; the index that offers the node's platform too is admitted and runs."""
    by_name = {r.scenario: r for r in rows}
    foreign, native = by_name["image-pull-index-foreign-platform"], by_name["image-pull-index-node-platform"]
    other = foreign_arch(NODE_ARCH)
    assert foreign.outcome.kind == "never-starts", _show([foreign])
    assert "no match for platform in manifest" in foreign.outcome.detail, _show([foreign])
    denial = (
        f'[Image Pull] Image "{{}}/fidelity/workload:1.0-foreign" has no manifest for the platform of the nodes '
        f'pod group "node" can run on (linux/{NODE_ARCH}); its index offers linux/{other}. Fix: push the image for '
        f"linux/{NODE_ARCH}, or select nodes of a platform the index offers (nodeSelector kubernetes.io/arch)."
    )
    registry = re.search(r'Image "([0-9.]+:[0-9]+)/', foreign.verdict.message)
    assert not foreign.verdict.allowed and registry, _show([foreign])
    assert denial.format(registry.group(1)) in foreign.verdict.message, _show([foreign])
    assert native.would_run and native.verdict.allowed and native.verdict.warnings == [], _show([native])
