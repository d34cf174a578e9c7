"""The fidelity record's digests and file (e2e/fidelity/record.py): pure logic, no cluster.

A scenario's digest must change with anything of it or of the stack that can change its real
outcome, and only with that; it must not carry the registry's address (a free port on each node).
"""

from __future__ import annotations

import copy
import dataclasses
import shutil
from pathlib import Path

import pytest

from e2e.fidelity import record as rec
from e2e.fidelity.aiperf_scenarios import AIPERF_BOUND_SECONDS
from e2e.fidelity.imagepull_scenarios import IMAGEPULL_SCENARIOS, REGISTRY_PLACEHOLDER
from e2e.fidelity.run import (
    BOUND_SECONDS,
    Outcome,
    Row,
    Verdict,
    digests,
    observation,
    rows_from_record,
    with_registry,
)
from e2e.fidelity.scenarios import SCENARIOS, Scenario, by_name

STACK = "0" * 64


def named(name: str) -> Scenario:
    return by_name()[name]


def digest(s: Scenario, stack: str = STACK) -> str:
    return rec.scenario_digest(s, observation(s), stack)


def test_the_same_scenario_has_the_same_digest_and_every_scenario_its_own() -> None:
    s = named("good-torch")
    assert digest(s) == digest(copy.deepcopy(s))
    all_digests = digests(SCENARIOS, stack=STACK)
    assert len(set(all_digests.values())) == len(SCENARIOS)
    assert digests(SCENARIOS, stack=STACK) == all_digests


def test_a_changed_job_field_changes_the_digest() -> None:
    s = named("good-torch")
    job = copy.deepcopy(s.job)
    job["spec"]["trainer"]["numNodes"] = 2
    assert digest(dataclasses.replace(s, job=job)) != digest(s)


def test_a_changed_prerequisite_or_namespace_label_changes_the_digest() -> None:
    s = named("good-secrets")
    prereqs = copy.deepcopy(s.prereqs)
    prereqs[0]["stringData"]["token"] = "y"
    assert digest(dataclasses.replace(s, prereqs=prereqs)) != digest(s)
    cluster = [{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "fx-pv"}, "spec": {}}]
    assert digest(dataclasses.replace(s, cluster_prereqs=cluster)) != digest(s)
    assert digest(dataclasses.replace(s, namespace_labels={"a": "b"})) != digest(s)
    # the name is the namespace every object is in
    assert digest(dataclasses.replace(s, name="good-secrets-2")) != digest(s)


def test_the_bound_counts_and_the_description_does_not() -> None:
    s = named("good-torch")
    assert digest(dataclasses.replace(s, bound=30.0)) != digest(s)
    assert rec.scenario_digest(s, observation(s, bound=BOUND_SECONDS + 1), STACK) != digest(s)
    aiperf = next(x for x in SCENARIOS if x.kind == "AIPerfJob")
    assert observation(aiperf)["bound"] == AIPERF_BOUND_SECONDS
    assert rec.scenario_digest(aiperf, observation(aiperf, aiperf_bound=1.0), STACK) != digest(aiperf)
    described = dataclasses.replace(s, note="another note", covers="x", known="some-limitation", warns=("Secrets",))
    assert digest(described) == digest(s)


def test_the_stack_digest_is_part_of_the_scenario_digest() -> None:
    s = named("good-torch")
    assert digest(s, "1" * 64) != digest(s)


def test_the_digest_carries_the_registry_placeholder_not_the_address() -> None:
    s = IMAGEPULL_SCENARIOS[0]
    material = rec.canonical(rec.scenario_material(s, observation(s))).decode()
    assert REGISTRY_PLACEHOLDER in material
    on_node = with_registry(s, "10.99.0.1:5000")
    assert "10.99.0.1:5000" in rec.canonical(rec.scenario_material(on_node, observation(s))).decode()
    # digests() is of the table as it is: the same on every machine, whatever the address
    assert digests([s], stack=STACK)[s.name] == digest(s) != digest(on_node)


def _stack_root(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for path in rec.stack_files():
        dest = root / path.relative_to(rec.ROOT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    return root


def test_the_stack_digest_follows_versions_env_lines_and_the_stack_files(tmp_path: Path) -> None:
    root = _stack_root(tmp_path)
    assert rec.stack_digest(root) == rec.stack_digest()
    versions = root / "e2e" / "versions.env"
    text = versions.read_text()
    versions.write_text(text + "\n# a comment changes no version\n")
    assert rec.stack_digest(root) == rec.stack_digest()
    versions.write_text(text.replace("KUEUE_VERSION=", "KUEUE_VERSION=v0.0.1-", 1))
    assert "KUEUE_VERSION=v0.0.1-" in versions.read_text()
    assert rec.stack_digest(root) != rec.stack_digest()
    versions.write_text(text)
    workload = root / "e2e" / "nodeimage" / "workload" / "main.go"
    workload.write_text(workload.read_text() + "\n// the workload image's content counts\n")
    assert rec.stack_digest(root) != rec.stack_digest()


@pytest.mark.parametrize("key", sorted(rec.NOT_MET_VERSIONS))
def test_a_pin_no_job_meets_keeps_the_record(tmp_path: Path, key: str) -> None:
    root = _stack_root(tmp_path)
    versions = root / "e2e" / "versions.env"
    text = versions.read_text()
    assert f"\n{key}=" in text, f"{key} is not a versions.env line: drop it from NOT_MET_VERSIONS"
    versions.write_text(text.replace(f"\n{key}=", f"\n{key}=bumped-", 1))
    assert rec.stack_digest(root) == rec.stack_digest()


@pytest.mark.parametrize(
    "key",
    ["KUBERNETES_VERSION", "ETCD_VERSION", "JOBSET_VERSION", "TRAINER_VERSION", "KUEUE_VERSION", "KYVERNO_VERSION"],
)
def test_a_pin_a_job_runs_on_changes_the_digest(tmp_path: Path, key: str) -> None:
    assert key not in rec.NOT_MET_VERSIONS
    root = _stack_root(tmp_path)
    versions = root / "e2e" / "versions.env"
    versions.write_text(versions.read_text().replace(f"\n{key}=", f"\n{key}=bumped-", 1))
    assert rec.stack_digest(root) != rec.stack_digest()


def test_the_stack_files_are_found_and_each_piece_resolves() -> None:
    rels = {p.relative_to(rec.ROOT).as_posix() for p in rec.stack_files()}
    for want in ("e2e/versions.env", "e2e/images.sh", "e2e/stack.sh", "e2e/nodeimage/workload/main.go"):
        assert want in rels
    for pattern in rec.STACK_FILES:
        assert rec.stack_files(rec.ROOT, [pattern]), f"{pattern} matches no file"
    for ref in rec.STACK_PIECES:
        assert rec.piece_text(ref).strip(), ref
    # the Python harness the job never meets does not count
    assert not any("runner.py" in r or "test_" in r for r in rels)


def test_versions_lines_reads_key_value_lines_only() -> None:
    assert rec.versions_lines("# c\n\nA=1\n B = x \n#D=2\n") == {"A": "1", "B": "x"}


def _entry(digest: str, kind: str = "runs") -> rec.Entry:
    verdict = dataclasses.asdict(Verdict(True, "preflight", "", []))
    return rec.Entry(digest, kind, "Complete: done", 12.34, "2026-12-05T08:00:00Z", "a" * 40 + "+dirty", verdict)


def test_the_record_round_trips_sorted_and_matches_only_its_digest() -> None:
    record = rec.Record({"z": _entry("d1"), "a": _entry("d2", "fails")}, "s", {"total": 1.26})
    text = record.to_json()
    assert text.index('"a"') < text.index('"z"') and text.endswith("\n")
    again = rec.Record.from_json(text)
    assert again.to_json() == text
    assert again.entries["z"].seconds == 12.3
    assert set(again.matching({"z": "d1", "a": "other", "new": "d3"})) == {"z"}
    assert again.entries["z"].provenance() == "observed 2026-12-05 on aaaaaaa+dirty"


def test_a_record_of_another_recipe_matches_nothing() -> None:
    text = rec.Record({"z": _entry("d1")}).to_json().replace(f'"recipe": {rec.RECIPE}', '"recipe": 0')
    assert rec.Record.from_json(text).entries == {}


def test_rows_from_the_record_classify_and_flag_a_stale_outcome() -> None:
    s = named("good-torch")
    record = rec.Record({s.name: _entry("old")})
    rows, missing = rows_from_record(record, [s, named("secret-missing")], {s.name: "new"})
    assert missing == ["secret-missing"]
    (row,) = rows
    assert isinstance(row, Row) and row.result == "ok" and row.outcome == Outcome("runs", "Complete: done", 12.34)
    assert "stale" in row.provenance
    rows, _ = rows_from_record(record, [s], {s.name: "old"})
    assert "stale" not in rows[0].provenance


@pytest.mark.parametrize("path", ["outcomes.json"])
def test_save_and_load(tmp_path: Path, path: str) -> None:
    record = rec.Record({"a": _entry("d")})
    rec.save(record, tmp_path / path)
    assert rec.load(tmp_path / path).to_json() == record.to_json()
    assert rec.load(tmp_path / "none.json").entries == {}


def test_jobs_that_hold_the_queue_first_count_and_leave_every_other_digest_as_it_was() -> None:
    """Scenario.before changes a job's outcome (it meets a queue in use): it is in the digest, and only
    for a scenario that has some, so adding the field kept every recorded digest."""
    s = named("kueue-waits-behind-running")
    material = rec.scenario_material(s, observation(s))
    assert material["before"] == s.before_objects() and material["before"][0]["metadata"]["namespace"] == s.namespace
    assert digest(dataclasses.replace(s, before=[])) != digest(s)
    assert "before" not in rec.scenario_material(named("kueue-good"), observation(named("kueue-good")))
    assert digest(dataclasses.replace(s, says=("[Kueue Capacity] other",))) == digest(s)


def test_the_order_of_admission_is_recorded_only_where_there_is_one() -> None:
    held = dataclasses.replace(_entry("d1"), admission="after-held")
    text = rec.Record({"a": _entry("d2"), "z": held}).to_json()
    assert text.count('"admission"') == 1
    again = rec.Record.from_json(text)
    assert (again.entries["z"].admission, again.entries["a"].admission) == ("after-held", "")
    rows, _ = rows_from_record(again, [dataclasses.replace(named("kueue-waits-behind-running"), name="z")])
    assert rows[0].outcome.admission == "after-held"
