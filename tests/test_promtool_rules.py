"""The chart's PrometheusRule, judged by the real promtool (built from the Go module
github.com/prometheus/prometheus at e2e/versions.env PROMETHEUS_VERSION by `e2e/build.sh promtool`):
`promtool check rules` on the rendered groups, and `promtool test rules` with one firing and one quiet
case per alert (tests/promtool/alerts-test.yaml). The unit tests compare labels only: the annotations,
which promtool would compare too, are dropped from the copy the unit tests load (check rules reads them).
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import yaml

from tests.test_chart import FULL, one, render
from tests.test_chart_monitoring import ON

HERE = Path(__file__).parent


@functools.lru_cache(maxsize=1)
def promtool() -> Path:
    from e2e.harness.controlplane import cache_dir

    # built by `e2e/build.sh all` (make build-cluster, which make test runs first): no test builds it
    binary = cache_dir() / "bin" / "promtool"
    assert binary.is_file(), f"{binary} missing: run `bash e2e/build.sh promtool` (part of `make build-cluster`)"
    return binary


def _groups() -> list[dict]:
    return one(render(*ON), "PrometheusRule", FULL)["spec"]["groups"]


def test_promtool_checks_the_rendered_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": _groups()}, sort_keys=False))
    proc = subprocess.run([str(promtool()), "check", "rules", str(rules)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 8 rules found" in proc.stdout + proc.stderr


def test_each_alert_fires_in_a_promtool_unit_test(tmp_path: Path) -> None:
    groups = _groups()
    for g in groups:
        for r in g["rules"]:
            r.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    spec = yaml.safe_load((HERE / "promtool" / "alerts-test.yaml").read_text())
    spec["rule_files"] = ["rules.yaml"]
    test_file = tmp_path / "alerts-test.yaml"
    test_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    # every alert of the rule has a firing case
    alerts = {r["alert"] for g in groups for r in g["rules"]}
    fired = {
        case["alertname"] for t in spec["tests"] for case in t.get("alert_rule_test", []) if case.get("exp_alerts")
    }
    assert fired == alerts
    proc = subprocess.run(
        [str(promtool()), "test", "rules", str(test_file)], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr
