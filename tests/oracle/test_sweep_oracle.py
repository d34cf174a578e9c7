"""Sweep oracle: AIPerf 0.13.0's own create handler, expand_sweep, child naming and renderer
(tests/oracle/sweep_oracle.py) against our AIPerfSweep adapter, over tests/oracle/sweeps.py.

The live comparison runs when PREFLIGHT_ORACLE_PYTHON names the oracle venv's python (`make
test` sets it); without it, the committed summaries in tests/oracle/golden/sweeps.json (written
by `sweep_oracle.py --golden`: refusals, controller JobSet, every child's name and label, and
the pod groups of the rendered children) are compared instead.
Per case: both refuse or both accept (and a refusal other than "spec invalid" carries AIPerf's
own first clause); accepted, the sweep-controller JobSet is equal, the children (every trial)
have the same names and labels in the same order, and each child AIPerf rendered has the same
replicatedJobs (pod groups, replicas, pod templates) as our child's JobSet.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.oracle.sweeps import cases
from webhook.config import Settings
from webhook.workloads.aiperf_sweep import build

HERE = Path(__file__).parent
ORACLE_PYTHON = os.environ.get("PREFLIGHT_ORACLE_PYTHON")

live = pytest.mark.skipif(not ORACLE_PYTHON, reason="PREFLIGHT_ORACLE_PYTHON is not set")
GOLDEN = json.loads((HERE / "golden" / "sweeps.json").read_text())


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    src = tmp_path_factory.mktemp("sweeps") / "cases.json"
    src.write_text(json.dumps(cases()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIPERF_")}
    out = subprocess.run(
        [os.path.expanduser(ORACLE_PYTHON or ""), str(HERE / "sweep_oracle.py"), str(src)],
        env=env, capture_output=True, text=True, check=True, timeout=900,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def _mismatches(case: str, body: dict[str, Any], want: dict[str, Any]) -> list[str]:
    wl = build(body, settings=Settings())
    if "crash" in want:
        return [f"the oracle crashed: {want['crash']}"]
    if "refusal" in want:
        if not wl.render_errors:
            return [f"AIPerf refuses ({want['refusal'][:200]}), we accept"]
        theirs = want["refusal"]
        if (
            not theirs.startswith(("AIPerfSweep spec invalid", "AIPerfSweep sweep expansion"))
            and theirs.split(";")[0].split(" is ")[0][:40] not in wl.render_errors[0]
        ):
            return [f"refusal text differs: AIPerf {theirs[:160]!r}, ours {wl.render_errors[0][:160]!r}"]
        return []
    if wl.render_errors:
        return [f"AIPerf accepts, we refuse: {wl.render_errors}"]
    bad = []
    if wl.controller_objects["jobSet"] != want["jobSet"]:
        bad.append("sweep-controller JobSet differs")
    if (wl.variations, wl.trials) != (want["variations"], want["trials"]):
        bad.append(f"cardinality ours {(wl.variations, wl.trials)} AIPerf {(want['variations'], want['trials'])}")
    ours = []
    for c in wl.children:
        for trial, name in enumerate(c.names):
            labels = dict(c.workload.obj["metadata"]["labels"])
            if "aiperf.nvidia.com/trial-index" in labels:
                labels["aiperf.nvidia.com/trial-index"] = str(trial)
            ours.append((name, c.label, labels))
    theirs = [(ch["name"], ch["label"], ch.get("labels")) for ch in want["children"]]
    ours = [(n, lab, labels if theirs[i][2] is not None else None) if i < len(theirs) else (n, lab, labels)
            for i, (n, lab, labels) in enumerate(ours)]  # fmt: skip
    if ours != theirs:
        bad.append(f"children differ: ours {ours[:3]}... AIPerf {theirs[:3]}...")
    by_name = {c.name: c for c in wl.children}
    for ch in want["children"]:
        if "jobSet" not in ch and "error" not in ch and "podGroups" not in ch:
            continue
        mine = by_name.get(ch["name"])
        if mine is None:
            bad.append(f"child {ch['name']} missing")
            continue
        if "error" in ch:
            if not mine.workload.render_errors:
                bad.append(f"child {ch['name']}: AIPerf cannot render it ({ch['error'][:120]}), we can")
            continue
        if "runConfig" in ch:
            spec = mine.workload.obj["spec"]
            ours_rc = {"random_seed": spec.get("randomSeed"), "variables": spec.get("variables") or {}}
            if ours_rc != ch["runConfig"]:
                bad.append(f"child {ch['name']}: run_config seed/variables ours {ours_rc} AIPerf {ch['runConfig']}")
        js = mine.workload.derived.get("jobSet") or {}
        if "podGroups" in ch:  # the golden's summary
            if json.loads(json.dumps(pod_groups(js))) != ch["podGroups"]:
                bad.append(f"child {ch['name']}: pod groups differ from the golden")
        elif js.get("spec", {}).get("replicatedJobs") != ch["jobSet"]["spec"]["replicatedJobs"]:
            bad.append(f"child {ch['name']}: pod groups differ")
    return bad


def pod_groups(jobset: dict[str, Any]) -> list[Any]:
    """sweep_oracle.pod_groups: [replicatedJob, replicas, [[container, resources]]]."""
    return [
        [rj["name"], rj["replicas"],
         [[c["name"], c.get("resources")] for c in rj["template"]["spec"]["template"]["spec"]["containers"]]]
        for rj in jobset["spec"]["replicatedJobs"]
    ]  # fmt: skip


def test_at_least_thirty_generated_sweeps() -> None:
    assert len(cases()) >= 30
    assert sorted(GOLDEN) == sorted(cases()), "regenerate: python tests/oracle/sweep_oracle.py --golden"


@pytest.mark.parametrize("case", sorted(cases()))
def test_sweep_agrees_with_the_golden(case: str) -> None:
    assert _mismatches(case, cases()[case], GOLDEN[case]) == []


@live
@pytest.mark.parametrize("case", sorted(cases()))
def test_sweep_agrees_with_aiperf(case: str, oracle: dict[str, Any]) -> None:
    assert _mismatches(case, cases()[case], oracle[case]) == []


@live
def test_label_values_agree_with_aiperfs_sanitize_for_label() -> None:
    """webhook's linear sanitize_for_label against AIPerf's own (aiperf/sweep_controller/_naming.py)
    on generated values: separators, runs, case, non-ASCII, and lengths around the 63 cut."""
    import random

    from webhook.workloads.aiperf_sweep.naming import sanitize_for_label

    rng = random.Random(20261201)
    pieces = ["a", "Z", "0", ".", "_", "-", "!", "é", "İ", " ", "--", "!!!!", "a" * 30, "." * 40, "K8s"]
    values = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 25))) for _ in range(5000)]
    values += ["!" + "!-" * 5000 + "!", "a!" * 5000, "!" * 10_000 + "a", "", "!_a" + "_-" * 5000]
    values += [
        "a" + "!" * 5000 + "b" * 5000,
        "a" + "-!" * 20 + "!" * 5000 + "b" * 70,
        "ab" * 2047 + "!" * 9000 + "c" * 90,
    ]
    script = (
        "import json, sys\n"
        "from aiperf.sweep_controller._naming import sanitize_for_label\n"
        "print(json.dumps([sanitize_for_label(v) for v in json.load(sys.stdin)]))\n"
    )
    out = subprocess.run(
        [os.path.expanduser(ORACLE_PYTHON or ""), "-c", script],
        input=json.dumps(values),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert [sanitize_for_label(v) for v in values] == json.loads(out)
