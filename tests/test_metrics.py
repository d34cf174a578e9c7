"""The check-latency histogram: observed without locks, exposed exactly as prometheus-client's own."""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from webhook.metrics import LATENCY_BUCKETS, LoopHistogram, Metrics
from webhook.results import CheckResult, Status

# below, on and above bucket bounds, zero, past the last bound (+Inf)
AMOUNTS = [0.0, 0.0005, 0.001, 0.0010001, 0.0025, 0.3, 1.0, 29.9, 30.0, 31.0, 1e6]
LABELS = [("Secrets", "pass"), ("Secrets", "warn"), ("Dry Run", "fail")]


def _created_masked(text: bytes) -> str:
    return re.sub(r"(_created\{[^}]*\}) \S+", r"\1 T", text.decode())


@pytest.mark.parametrize("created", [True, False])
def test_loop_histogram_renders_what_prometheus_client_renders(monkeypatch: pytest.MonkeyPatch, created: bool) -> None:
    from prometheus_client import metrics as prometheus_metrics

    monkeypatch.setattr(prometheus_metrics, "_use_created", created)
    theirs, ours = CollectorRegistry(auto_describe=True), CollectorRegistry(auto_describe=True)
    reference = Histogram("x_seconds", "Help text.", ["check", "status"], buckets=LATENCY_BUCKETS, registry=theirs)
    loop = LoopHistogram("x_seconds", "Help text.", ("check", "status"), LATENCY_BUCKETS)
    ours.register(loop)
    for i, amount in enumerate(AMOUNTS * 3):
        labels = LABELS[i % len(LABELS)]
        reference.labels(*labels).observe(amount)
        loop.observe(labels, amount)
    expected, got = generate_latest(theirs), generate_latest(ours)
    assert ("_created" in expected.decode()) is created
    assert _created_masked(got) == _created_masked(expected)


def test_a_check_without_duration_is_not_observed() -> None:
    m = Metrics()
    timed = CheckResult("Secrets", Status.PASS, "ok", duration_ms=2.0)
    m.observe_checks([timed, CheckResult("Dry Run", Status.WARN, "x")])
    text = m.render()[0].decode()
    assert 'preflight_webhook_check_duration_seconds_count{check="Secrets",status="pass"} 1.0' in text
    assert 'preflight_webhook_check_duration_seconds_sum{check="Secrets",status="pass"} 0.002' in text
    assert 'check="Dry Run"' not in text


def test_certificate_reload_results_exist_at_zero_before_the_first_reload() -> None:
    # increase() over a counter that appears at 1 is 0: without these, the first failed reload
    # would never raise PreflightWebhookCertificateReloadFailing (nor show on the dashboard)
    body = Metrics().render()[0].decode()
    assert 'preflight_webhook_certificate_reloads_total{result="ok"} 0.0' in body
    assert 'preflight_webhook_certificate_reloads_total{result="error"} 0.0' in body
