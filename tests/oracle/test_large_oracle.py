"""Live oracle at the largest workable sizes: AIPerf 0.13.0 accepts what we accept, and refuses
what we refuse, at the 1 MiB ConfigMap and at its 256-level nesting limit (issue 25 item 4).

Runs when PREFLIGHT_ORACLE_PYTHON names the python of the oracle venv (tests/oracle/setup.sh).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.checks.configmap import CONFIGMAP_MAX_BYTES, payload_bytes
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.preflight import evaluate
from webhook.workloads.aiperf import build

HERE = Path(__file__).parent
ORACLE_PYTHON = os.environ.get("PREFLIGHT_ORACLE_PYTHON")
SAMPLE = HERE / "specs" / "sample.yaml"

pytestmark = pytest.mark.skipif(not ORACLE_PYTHON, reason="PREFLIGHT_ORACLE_PYTHON is not set")


def _oracle(flag: str, path: Path) -> Any:
    """generate.py `flag` `path` in the oracle venv (default AIPERF_* environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIPERF_")}
    out = subprocess.run(
        [os.path.expanduser(ORACLE_PYTHON or ""), str(HERE / "generate.py"), flag, str(path)],
        env=env, capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def with_records(records: list[Any], fmt: str | None = None) -> dict[str, Any]:
    obj = yaml.safe_load(SAMPLE.read_text())
    dataset: dict[str, Any] = {"name": "main", "type": "file", "records": records}
    if fmt:
        dataset["format"] = fmt
    obj["spec"]["benchmark"]["datasets"] = [dataset]
    return obj


def prompts(n: int) -> dict[str, Any]:
    return with_records([{"text": f"Summarise the plot of a short novel in two sentences #{i}"} for i in range(n)])


def nested(levels: int) -> dict[str, Any]:
    """A multi-turn record whose turn nests `levels` dicts: the deepest container is at depth
    6 + levels below spec (spec.benchmark.datasets[0].records[0].turns[0]...). AIPerf accepts at
    most 247 here; 251 and more pass its 256-level limit ("Configuration nested too deeply")."""
    node: Any = "p"
    for _ in range(levels):
        node = {"n": node}
    return with_records([{"turns": [node]}], fmt="multi_turn")


def configmap_bytes(obj: dict[str, Any]) -> int:
    return payload_bytes(build(obj, settings=Settings()).derived["configMap"])


def largest_fitting() -> int:
    """The most prompts whose run-config ConfigMap fits 1 MiB (by our renderer)."""
    lo, hi = 1, 16_384
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if configmap_bytes(prompts(mid)) <= CONFIGMAP_MAX_BYTES else (lo, mid)
    return lo


async def ours(obj: dict[str, Any]) -> tuple[bool, dict[str, str]]:
    """(allowed offline in enforce mode, {check name: message} of what failed)."""
    ev = await evaluate(obj, settings=Settings(), deadline=Deadline(60))
    failed = {c.name: c.message for c in ev.results.checks if c.status.value == "fail"}
    return ev.decision.allowed, failed


async def test_aiperf_agrees_at_the_1_mib_configmap_and_the_256_level_nesting_limit(tmp_path: Path) -> None:
    n = largest_fitting()
    cases = {
        "records-fit": prompts(n),
        "records-over": prompts(n + 1),
        "nest-fit": nested(247),
        "nest-257": nested(251),
    }
    assert configmap_bytes(cases["records-fit"]) <= CONFIGMAP_MAX_BYTES < configmap_bytes(cases["records-over"])
    src = tmp_path / "large.json"
    src.write_text(json.dumps(cases))
    theirs = _oracle("--verdicts", src)
    assert {case: v.split(":")[0] for case, v in theirs.items()} == {
        "records-fit": "accepts",
        "records-over": "rejects",
        "nest-fit": "accepts",
        "nest-257": "rejects",
    }, theirs
    for case, obj in cases.items():
        allowed, failed = await ours(obj)
        assert allowed is (theirs[case] == "accepts"), (case, failed)
    # refused for the same reason, and the sizes agree within AIPerf's 0.1 KB rounding
    _, failed = await ours(cases["records-over"])
    assert list(failed) == ["ConfigMap Size"]
    size = configmap_bytes(cases["records-over"])
    m = re.search(r"data size \(([0-9.]+) KB\) exceeds Kubernetes limit of 1024 KB", theirs["records-over"])
    assert m, theirs["records-over"]
    assert abs(float(m.group(1)) * 1024 - size) <= 0.05 * 1024
    assert f"would be {float(m.group(1)):.1f} KiB ({size} bytes)" in failed["ConfigMap Size"]
    assert "Configuration nested too deeply (>256 levels)" in theirs["nest-257"]
    ev = await evaluate(cases["nest-257"], settings=Settings(), deadline=Deadline(60))
    assert "is nested more than 256 levels below spec, which the AIPerf operator refuses" in (ev.decision.message or "")


async def test_the_largest_fitting_configmap_is_aiperfs_byte_for_byte(tmp_path: Path) -> None:
    obj = prompts(largest_fitting())
    path = tmp_path / "fit.yaml"
    path.write_text(json.dumps(obj))
    want = _oracle("--one", path)
    assert "error" not in want, want["error"]
    got = build(obj, settings=Settings()).derived["configMap"]
    assert got["data"] == want["configMap"]["data"]
    assert payload_bytes(got) == sum(len(k.encode()) + len(v.encode()) for k, v in want["configMap"]["data"].items())


async def test_records_nested_past_what_aiperfs_orjson_writes_are_refused_by_both(tmp_path: Path) -> None:
    """AIPerf refuses a record nested 248-250 levels before its own 256-level check: the orjson.dumps
    that writes run_config.json stops at 254 nested containers ("TypeError: Recursion limit reached")."""
    cases = {f"nest-{k}": nested(k) for k in (247, 248, 249, 250)}
    src = tmp_path / "nest.json"
    src.write_text(json.dumps(cases))
    theirs = _oracle("--verdicts", src)
    assert theirs["nest-247"] == "accepts"
    for k in (248, 249, 250):
        assert theirs[f"nest-{k}"] == "rejects: TypeError: Recursion limit reached", theirs
    for case, obj in cases.items():
        allowed, failed = await ours(obj)
        assert allowed is (theirs[case] == "accepts"), (case, failed)
        if not allowed:
            assert list(failed) == ["Job Render"]
            assert f"its run_config.json would nest {255 + int(case[5:]) - 248} levels deep" in failed["Job Render"]
