"""Kueue oracle: our cohort-tree arithmetic (webhook.models.kueue.cohort.CohortTree) against Kueue
v0.17.0's own scheduler cache (pkg/cache/scheduler, driven in process by main.go).

Generated ClusterQueue/Cohort trees — nested Cohorts with their own nominalQuota, implicit
cohorts, a parent that does not exist, lendingLimit and borrowingLimit on both, usage — and
for every ClusterQueue and flavor/resource: PotentialAvailable (the "can never fit" bound)
and Available (the "not now" bound) must be equal.

Runs when PREFLIGHT_KUEUE_ORACLE names the binary; `make test` builds it with
tests/oracle/kueue/build.sh and sets the variable; without it these tests skip.

    PREFLIGHT_KUEUE_ORACLE="$(bash tests/oracle/kueue/build.sh)" \
        .venv/bin/python -m pytest tests/oracle/kueue -q
"""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

import pytest

from tests.oracle._common import GoOracle
from webhook.models.kueue.cohort import CohortTree

ORACLE = GoOracle("kueue", "the Kueue oracle")
pytestmark = ORACLE.skip

FLAVORS = ("red", "blue")
RESOURCES = ("cpu", "nvidia.com/gpu")
CASES = 200


def _kueue_units(resource: str, v: Decimal) -> int:
    """pkg/resources ResourceValue: cpu in millicores, the rest in units."""
    return int(v * 1000) if resource == "cpu" else int(v)


def _groups(rng: random.Random, *, limits: bool) -> list[dict[str, Any]]:
    flavors = [f for f in FLAVORS if rng.random() < 0.8] or ["red"]
    out = []
    for f in flavors:
        res = []
        for r in RESOURCES:
            nominal = rng.choice([0, 1, 2, 4, 5, 8, 10, 16])
            q: dict[str, Any] = {"name": r, "nominalQuota": str(nominal)}
            if limits and rng.random() < 0.35:
                q["borrowingLimit"] = str(rng.choice([0, 1, 3, 6, 12]))
            if limits and rng.random() < 0.35:
                q["lendingLimit"] = str(rng.randint(0, nominal))
            res.append(q)
        out.append({"name": f, "resources": res})
    return [{"coveredResources": list(RESOURCES), "flavors": out}]


def generate(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    n_cohorts = rng.randint(0, 4)
    cohorts = []
    names = [f"co{i}" for i in range(n_cohorts)]
    for i, name in enumerate(names):
        if rng.random() < 0.2:
            continue  # referenced below but no object: an implicit cohort
        spec: dict[str, Any] = {}
        if i and rng.random() < 0.7:
            spec["parentName"] = rng.choice(names[:i])  # earlier only: no cycles
        elif rng.random() < 0.1:
            spec["parentName"] = "ghost"  # a parent that does not exist
        if rng.random() < 0.6:
            spec["resourceGroups"] = _groups(rng, limits=bool(spec.get("parentName")))
        cohorts.append(
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}
        )
    cqs, usage = [], {}
    for i in range(rng.randint(1, 5)):
        name = f"cq{i}"
        spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": _groups(rng, limits=True)}
        if names and rng.random() < 0.85:
            spec["cohortName"] = rng.choice(names)
        reservation = []
        for f in spec["resourceGroups"][0]["flavors"]:
            rows = []
            for q in f["resources"]:
                if rng.random() < 0.5:
                    used = Decimal(rng.randint(0, int(q["nominalQuota"]) + 4))
                    rows.append({"name": q["name"], "total": str(used)})
                    usage.setdefault(name, {})[f"{f['name']}/{q['name']}"] = _kueue_units(q["name"], used)
            reservation.append({"name": f["name"], "resources": rows})
        cqs.append({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec,
            "status": {"flavorsReservation": reservation},
        })  # fmt: skip
    return {"clusterQueues": cqs, "cohorts": cohorts, "usage": usage}


@pytest.fixture(scope="module")
def answers() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    cases = [generate(seed) for seed in range(CASES)]
    oracle_in = [{k: v for k, v in c.items()} for c in cases]
    for c in oracle_in:  # Kueue's cache gets usage through the snapshot, not status
        c["clusterQueues"] = [{k: v for k, v in cq.items() if k != "status"} for cq in c["clusterQueues"]]
    got = [json.loads(line) for line in ORACLE.call(oracle_in).splitlines()]
    assert len(got) == len(cases)
    return cases, got


def test_generated_trees_cover_what_matters(answers) -> None:
    cases, _ = answers
    assert len(cases) >= 50
    assert sum(1 for c in cases if any((co["spec"].get("parentName") or "") for co in c["cohorts"])) >= 30  # nested
    assert sum(1 for c in cases if any(co["spec"].get("resourceGroups") for co in c["cohorts"])) >= 50  # own quota
    assert sum(1 for c in cases if any(co["spec"].get("parentName") == "ghost" for co in c["cohorts"])) >= 3


def test_potential_and_available_agree_with_kueue(answers) -> None:
    cases, got = answers
    compared = never = 0
    mismatches: list[str] = []
    for i, (case, oracle) in enumerate(zip(cases, got)):
        for cq in case["clusterQueues"]:
            name = cq["metadata"]["name"]
            tree = CohortTree(cq, case["clusterQueues"], case["cohorts"])
            for key, want in sorted(oracle[name].items()):
                f, r = key.split("/", 1)
                pot = _kueue_units(r, tree.potential_available((f, r)))
                avail = _kueue_units(r, max(Decimal(0), tree.available((f, r))))
                compared += 1
                request = _kueue_units(r, Decimal(random.Random(i * 7 + compared).randint(0, 40)))
                never += request > want["potential"]
                if (pot, avail) != (want["potential"], want["available"]):
                    mismatches.append(
                        f"case {i} {name} {key}: ours {pot}/{avail}, Kueue {want['potential']}/{want['available']}"
                    )
    assert not mismatches, "\n".join(mismatches[:20])
    assert compared >= 500 and never >= 50, (compared, never)
