"""The real Prometheus scrapes a webhook on 127.0.0.1, on the control plane alone (no node, no lock).

The webhook runs as ``serve`` beside the control plane (e2e/harness/runner.py, the sample webhook) and
Prometheus scrapes its TLS port's /metrics through a static target. That target gets the labels the
chart's ServiceMonitor gives the pods (``namespace`` = the release namespace, ``job`` = the Service's
name), so the chart's PrometheusRule and dashboard queries, rendered with the real helm, select it
unchanged (prometheus-operator's pkg/prometheus/promcfg.go generateServiceMonitorConfig sets ``job``
to the Service's name). No audit controller runs here: its panels are asserted to be exactly the
empty ones.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane
from e2e.harness.node import SAMPLES_DIR
from e2e.harness.prometheus import MONITORING, RATE_INTERVAL, Prometheus
from e2e.harness.runner import RunningWebhook

NS = "preflight-system"
FULL = "preflight-webhook"
ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "preflight-webhook"
AUDIT_PANELS = {
    "Audit findings by job namespace (fail)",
    "Audit findings by check and kind (fail)",
    "Audit: time since the last full scan",
}


class Local:
    def __init__(self, cp: ControlPlane, hook: RunningWebhook, prom: Prometheus, rendered: list[dict[str, Any]]):
        self.cp, self.hook, self.prom = cp, hook, prom
        rule = next(d for d in rendered if d["kind"] == "PrometheusRule")
        self.alerts = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
        cm = next(d for d in rendered if d["kind"] == "ConfigMap" and d["metadata"]["name"] == f"{FULL}-dashboard")
        dashboard = json.loads(cm["data"]["preflight-webhook.json"])
        self.panels = [
            (
                p["title"],
                t["expr"].replace("$namespace", NS).replace("$job", FULL).replace("$__rate_interval", RATE_INTERVAL),
            )
            for p in dashboard["panels"]
            for t in p.get("targets", [])
        ]


@pytest.fixture(scope="module")
def local(
    samples_cluster: ControlPlane, sample_webhook: RunningWebhook, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Local]:
    cp, hook = samples_cluster, sample_webhook
    out = subprocess.run(
        [
            str(cp.helm_path),
            "template",
            FULL,
            str(CHART),
            "--namespace",
            NS,
            "--set",
            "metrics.enabled=true",
            # the NetworkPolicy needs the apiserver's address, which `helm template` cannot read
            "--set",
            "networkPolicy.apiserverCIDRs={127.0.0.1/32}",
            *MONITORING,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rendered = [d for d in yaml.safe_load_all(out) if d]
    work = tmp_path_factory.mktemp("prometheus")
    rule = next(d for d in rendered if d["kind"] == "PrometheusRule")
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {
                "job_name": "webhook",
                "scheme": "https",
                "tls_config": {"insecure_skip_verify": True},  # a test CA; the scrape is all this test trusts it for
                "scrape_timeout": "1s",
                "static_configs": [{"targets": [f"127.0.0.1:{hook.port}"], "labels": {"namespace": NS}}],
                # the ServiceMonitor's target labels
                "relabel_configs": [
                    {"target_label": "job", "replacement": FULL},
                    {"target_label": "service", "replacement": FULL},
                    {"target_label": "endpoint", "replacement": "metrics"},
                ],
            }
        ],
    }
    prom = Prometheus(work, config, {"groups": rule["spec"]["groups"]})
    try:
        prom.wait(
            "the webhook scraped",
            lambda: [t for t in prom.api("targets", state="active")["activeTargets"] if t["health"] == "up"],
        )
        denied = cp.kubectl("apply", "-f", str(SAMPLES_DIR / "trainjob-broken.yaml"), check=False)
        assert denied.returncode != 0 and "denied the request" in denied.stderr, denied.stderr
        allowed = cp.kubectl("apply", "--dry-run=server", "-f", str(SAMPLES_DIR / "trainjob-good.yaml"), check=False)
        assert allowed.returncode == 0, allowed.stderr
        warned = cp.kubectl("apply", "--dry-run=server", "-f", str(SAMPLES_DIR / "aiperfjob-warns.yaml"), check=False)
        assert "Warning: " in warned.stderr, warned.stderr
        yield Local(cp, hook, prom, rendered)
    finally:
        prom.stop()


def test_request_and_check_series_carry_the_selected_labels(local: Local) -> None:
    prom, sel = local.prom, f'namespace="{NS}", job="{FULL}"'

    def decisions() -> set[str] | None:
        got = {
            s["metric"]["decision"] for s in prom.query(f'preflight_webhook_requests_total{{{sel}, kind="TrainJob"}}')
        }
        return got if {"denied", "allowed"} <= got else None

    prom.wait("a denied and an allowed TrainJob counted", decisions)
    [series, *_] = prom.query(f'preflight_webhook_requests_total{{{sel}, decision="denied"}}')
    assert series["metric"]["kind"] == "TrainJob" and series["metric"]["operation"] == "CREATE"
    prom.wait(
        "check results with fail, warn and pass",
        lambda: (
            {s["metric"]["status"] for s in prom.query(f"preflight_webhook_check_duration_seconds_count{{{sel}}}")}
            >= {"fail", "warn", "pass"}
        ),
    )


def test_every_alert_evaluates_with_health_ok(local: Local) -> None:
    prom = local.prom
    assert len(local.alerts) == 8

    def evaluated() -> dict[str, dict[str, Any]] | None:
        rules = {r["name"]: r for g in prom.api("rules", type="alert")["groups"] for r in g["rules"]}
        done = set(rules) == set(local.alerts) and all(r["health"] != "unknown" for r in rules.values())
        return rules if done else None

    for name, rule in prom.wait("every alert rule evaluated", evaluated).items():
        assert rule["health"] == "ok" and not rule.get("lastError"), f"{name}: {rule.get('lastError')}"
    for name, expr in local.alerts.items():
        prom.query(expr)
        for metric in set(re.findall(r"\b(preflight_webhook_[a-z_]+)\b", expr)):
            assert prom.query(f'{metric}{{namespace="{NS}", job="{FULL}"}}'), f"{name}: no {metric} series"
    assert prom.query(local.alerts["PreflightWebhookDown"]) == []


def test_every_webhook_panel_query_returns_data(local: Local) -> None:
    prom = local.prom
    empty: list[str] = []

    def only_audit_empty() -> bool:
        empty[:] = sorted({title for title, expr in local.panels if not prom.query(expr)})
        return set(empty) == AUDIT_PANELS

    try:
        prom.wait("every webhook panel query returning data", only_audit_empty)
    except AssertionError as e:
        raise AssertionError(f"panels without data: {empty}") from e
