"""The chart's observability (metrics port, NetworkPolicy rule, ServiceMonitor, PrometheusRule, Grafana
dashboard, JSON logs), rendered by the real helm: each off by default and on with its value; and every
metric and label the alerts and the dashboard query is one the webhook exports (webhook/metrics.py), so a
renamed metric breaks this test instead of an alert going silent."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.test_chart import APISERVER, CHART, FULL, NS, helm, one, render
from webhook.metrics import Metrics
from webhook.policy import Outcome
from webhook.results import CheckResult, Status

ON = [
    "--set",
    "metrics.enabled=true",
    "--set",
    "metrics.serviceMonitor.enabled=true",
    "--set",
    "metrics.prometheusRule.enabled=true",
    "--set",
    "metrics.grafanaDashboard.enabled=true",
]
MONITORING_KINDS = {"ServiceMonitor", "PrometheusRule"}


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(docs, "Deployment", FULL)["spec"]["template"]["spec"]["containers"][0]


def _metrics_rule(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ingress = one(docs, "NetworkPolicy", FULL)["spec"]["ingress"]
    return [r for r in ingress if any(p["port"] == 9090 for p in r["ports"])]


def test_everything_is_off_by_default() -> None:
    docs = render()
    assert not [d for d in docs if d["kind"] in MONITORING_KINDS]
    assert not [d for d in docs if d["metadata"]["name"] == f"{FULL}-dashboard"]
    c = _container(docs)
    assert not [a for a in c["args"] if a.startswith("--metrics-port")]
    assert "--log-format=text" in c["args"]
    assert [p["name"] for p in c["ports"]] == ["https"]
    assert [p["name"] for p in one(docs, "Service", FULL)["spec"]["ports"]] == ["https"]
    assert _metrics_rule(docs) == []


def test_metrics_port_reaches_container_service_and_network_policy() -> None:
    docs = render("--set", "metrics.enabled=true")
    c = _container(docs)
    assert "--metrics-port=9090" in c["args"]
    assert {"name": "metrics", "containerPort": 9090, "protocol": "TCP"} in c["ports"]
    assert {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"} in one(docs, "Service", FULL)[
        "spec"
    ]["ports"]
    assert _metrics_rule(docs) == [
        {
            "ports": [{"port": 9090, "protocol": "TCP"}],
            "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
        }
    ]
    # the webhook port's own rule is unchanged: the metrics rule only adds a port
    ingress = one(docs, "NetworkPolicy", FULL)["spec"]["ingress"]
    assert ingress[0]["ports"] == [{"port": 8443, "protocol": "TCP"}]
    assert not [d for d in docs if d["kind"] in MONITORING_KINDS]


def test_metrics_network_policy_selectors_are_values() -> None:
    docs = render(
        "--set",
        "metrics.enabled=true",
        "--set",
        "metrics.networkPolicy.namespaceSelector.matchLabels.team=observability",
        "--set",
        "metrics.networkPolicy.podSelector.matchLabels.app\\.kubernetes\\.io/name=prometheus",
        "--set",
        "metrics.port=9100",
    )
    [rule] = [r for r in one(docs, "NetworkPolicy", FULL)["spec"]["ingress"] if r["ports"][0]["port"] == 9100]
    assert rule["from"] == [
        {
            "namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": "monitoring", "team": "observability"}
            },
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }
    ]
    off = render("--set", "metrics.enabled=true", "--set", "networkPolicy.enabled=false")
    assert not [d for d in off if d["kind"] == "NetworkPolicy"]


def test_rendered_args_parse_with_the_real_cli() -> None:
    from webhook.cli import build_parser

    c = _container(render("--set", "metrics.enabled=true", "--set", "logFormat=json"))
    args = build_parser().parse_args(["serve", *c["args"]])
    assert (args.metrics_port, args.log_format, args.port) == (9090, "json", 8443)


def test_service_monitor_scrapes_the_metrics_port_of_this_release_only() -> None:
    docs = render(*ON, "--set", "metrics.serviceMonitor.labels.release=kube-prometheus-stack")
    sm = one(docs, "ServiceMonitor", FULL)
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    service = one(docs, "Service", FULL)
    assert sm["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NS]}
    [endpoint] = sm["spec"]["endpoints"]
    assert endpoint == {
        "port": "metrics",
        "scheme": "http",
        "path": "/metrics",
        "interval": "30s",
        "scrapeTimeout": "10s",
    }
    assert endpoint["port"] in [p["name"] for p in service["spec"]["ports"]]
    # nothing else in the release carries the Service's selector labels AND is a Service
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Service"] == [FULL]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # values.schema.json names both fixes (test_a_monitor_without_its_source_fails_helm_lint)
        (["--set", "metrics.serviceMonitor.enabled=true"], "- at '/metrics/enabled': value must be true"),
        (
            ["--set", "metrics.enabled=true", "--set", "metrics.port=8443"],
            "metrics.port (8443) must differ from containerPort",
        ),
        (["--set", "logFormat=yaml"], "logFormat"),
        (["--set", "metrics.prometheusRule.latencyTimeoutFraction=2"], "latencyTimeoutFraction"),
    ],
)
def test_bad_monitoring_values_are_refused(args: list[str], message: str) -> None:
    proc = helm("template", "pf", str(CHART), "--namespace", NS, *APISERVER, *args, check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def _alerts(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    [group] = one(docs, "PrometheusRule", FULL)["spec"]["groups"]
    return {r["alert"]: r for r in group["rules"]}


def test_prometheus_rule_alerts_follow_the_values() -> None:
    docs = render(
        *ON,
        "--set",
        "webhook.timeoutSeconds=10",
        "--set",
        "config.budgetSeconds=8",
        "--set-json",
        "metrics.prometheusRule.latencyTimeoutFraction=0.5",
        "--set",
        "metrics.prometheusRule.certificateExpiryDays=7",
        "--set",
        "metrics.auditFindingsMetric=preflight_audit_problems",
        "--set",
        "metrics.prometheusRule.alertLabels.team=ml-platform",
    )
    alerts = _alerts(docs)
    assert sorted(alerts) == [
        "PreflightAuditFindingsRising",
        "PreflightAuditScanStale",
        "PreflightWebhookCannotVerifyRising",
        "PreflightWebhookCertificateExpiring",
        "PreflightWebhookCertificateReloadFailing",
        "PreflightWebhookDown",
        "PreflightWebhookFailingOpen",
        "PreflightWebhookSlow",
    ]
    assert alerts["PreflightWebhookSlow"]["expr"].rstrip().endswith("> 5")
    assert "< 604800" in alerts["PreflightWebhookCertificateExpiring"]["expr"]
    assert (
        f'preflight_audit_problems{{namespace="{NS}", result="fail"}}' in alerts["PreflightAuditFindingsRising"]["expr"]
    )
    assert alerts["PreflightWebhookDown"]["expr"] == f'absent(up{{namespace="{NS}", job="{FULL}"}} == 1)'
    assert all(a["labels"]["team"] == "ml-platform" and a["for"] == "10m" for a in alerts.values())
    assert 'decision="error"' in alerts["PreflightWebhookFailingOpen"]["expr"]
    # N x config.audit.periodSeconds: 3 x 600 s by default
    stale = alerts["PreflightAuditScanStale"]["expr"]
    assert stale.rstrip().endswith(f'max(preflight_audit_last_full_scan_timestamp_seconds{{namespace="{NS}"}}) > 1800')
    stale = _alerts(
        render(
            *ON, "--set", "config.audit.periodSeconds=300", "--set", "metrics.prometheusRule.auditScanStalePeriods=2"
        )
    )["PreflightAuditScanStale"]["expr"]
    assert stale.rstrip().endswith("> 600")


def test_dashboard_config_map_is_the_json_file_for_the_sidecar() -> None:
    docs = render(*ON, "--set", "metrics.grafanaDashboard.namespace=grafana")
    cm = one(docs, "ConfigMap", f"{FULL}-dashboard")
    assert cm["metadata"]["namespace"] == "grafana"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(cm["data"]["preflight-webhook.json"])
    assert dashboard == json.loads((CHART / "dashboards" / "preflight-webhook.json").read_text())
    titles = [p["title"] for p in dashboard["panels"]]
    for wanted in (
        "Verdicts by kind",
        "Check results by check and status",
        "By namespace",
        "Answer time (p50, p90, p99)",
    ):
        assert wanted in titles
    assert {
        "Deadline use (p99 answer time / mean budget)",
        "Watch caches synced",
        "Audit findings by job namespace (fail)",
    } <= set(titles)


# ------------------------------------------------------------------------------ metric names


def _exported() -> dict[str, set[str]]:
    """Every series name the webhook exports, with its label names (one sample of each metric made)."""
    m = Metrics(known_kinds=["AIPerfJob"], unverified=[("Secrets", "x")])
    m.observe_request("AIPerfJob", "CREATE", Outcome.ALLOWED, 0.01)
    m.observe_checks([CheckResult("Secrets", Status.WARN, "w", duration_ms=1.0)])
    m.budget.observe(4.0)
    m.in_flight.set(0)
    m.cert_expiry.set(1.0)
    m.cert_reloads.labels("ok").inc()
    m.track_caches(lambda: [("nodes", 1.0)])
    m.track_connections(lambda: {"accepted": 1})
    out: dict[str, set[str]] = {}
    for family in m.registry.collect():
        for s in family.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def _audit_names() -> dict[str, set[str]] | None:
    """The audit controller's metrics with their labels, as its module declares them (the registered
    names, and the `name{labels}` lines of its docstring); None before webhook/audit/metrics.py exists."""
    module = Path(__file__).resolve().parents[1] / "webhook" / "audit" / "metrics.py"
    if not module.is_file():
        return None
    text = module.read_text()
    out: dict[str, set[str]] = {n: set() for n in re.findall(r"\"(preflight_audit_[a-z0-9_]+)\"", text)}
    for name, labels in re.findall(r"(preflight_audit_[a-z0-9_]+)\{([a-z_,]*)\}", text):
        out.setdefault(name.removesuffix("_total"), set()).update(labels.split(","))
    return out


#: labels Prometheus adds to every scraped series (the ServiceMonitor's target labels)
TARGET_LABELS = {"namespace", "job", "pod", "instance", "service", "endpoint", "container"}
#: series Prometheus makes itself
PROMETHEUS_SERIES = {"up"}

_SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}")
_NAME = re.compile(r"\b(preflight_[a-z0-9_]+)\b")
_BY = re.compile(r"\bby \(([^)]*)\)")


def _queries() -> list[tuple[str, str]]:
    docs = render(*ON)
    out = [(f"alert {name}", rule["expr"]) for name, rule in _alerts(docs).items()]
    dashboard = json.loads(one(docs, "ConfigMap", f"{FULL}-dashboard")["data"]["preflight-webhook.json"])
    out += [(f"panel {p['title']}", t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])]
    out += [
        (f"variable {v['name']}", v["query"]["query"]) for v in dashboard["templating"]["list"] if v["type"] == "query"
    ]
    return out


def test_every_metric_and_label_in_the_alerts_and_the_dashboard_is_exported() -> None:
    exported = _exported()
    audit = _audit_names()
    # a scraped series' own `namespace` label (the audit controller's job namespace) becomes exported_namespace
    all_labels = set().union(*exported.values(), *(audit or {}).values()) | TARGET_LABELS | {"exported_namespace"}
    queries = _queries()
    assert len(queries) > 20
    named: set[str] = set()
    for where, expr in queries:
        for metric in _NAME.findall(expr):
            named.add(metric)
            if metric.startswith("preflight_audit_"):
                if audit is not None:  # the audit controller's metrics module exists: hold it to its names
                    assert metric.removesuffix("_total") in audit, (
                        f"{where}: {metric} is not in webhook/audit/metrics.py"
                    )
                continue
            assert metric in exported, f"{where}: {metric} is not exported by webhook/metrics.py"
        for metric, matchers in _SELECTOR.findall(expr):
            labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", matchers))
            known = TARGET_LABELS | exported.get(metric, set())
            if metric.startswith("preflight_audit_") and audit is not None:
                known = TARGET_LABELS | audit.get(metric.removesuffix("_total"), set())
            elif metric in PROMETHEUS_SERIES or metric.startswith("preflight_audit_"):
                continue
            assert labels <= known, f"{where}: {metric} has no label(s) {labels - known}"
        for by in _BY.findall(expr):
            wanted = {x.strip() for x in by.split(",")}
            assert wanted <= all_labels, f"{where}: by ({by}) names labels no metric has"
    # the alerts and panels together show every metric the webhook exports
    bases = {re.sub(r"_(bucket|count|sum|total)$", "", n) for n in exported if not n.endswith("_created")}
    unused = sorted(b for b in bases if not any(n.startswith(b) for n in named))
    assert not unused, f"metrics no panel or alert shows: {unused}"


def test_the_check_catches_a_misspelt_metric() -> None:
    exported = _exported()
    assert "preflight_webhook_requests_total" in exported
    assert "preflight_webhook_request_total" not in exported
    assert "decision" in exported["preflight_webhook_requests_total"]
    assert "namespace" not in exported["preflight_webhook_requests_total"]  # object content is never a label


def test_audit_pod_monitor_scrapes_the_audit_controllers_metrics_port() -> None:
    assert not [d for d in render(*ON) if d["kind"] == "PodMonitor"]
    docs = render(
        *ON,
        "--set",
        "metrics.auditPodMonitor.enabled=true",
        "--set",
        "metrics.auditPodMonitor.labels.release=kube-prometheus-stack",
    )
    pm = one(docs, "PodMonitor", f"{FULL}-audit")
    assert pm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    audit = one(docs, "Deployment", f"{FULL}-audit")
    pod_labels = audit["spec"]["template"]["metadata"]["labels"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    # only the audit pods: the webhook's pods lack the audit component label
    webhook_labels = one(docs, "Deployment", FULL)["spec"]["template"]["metadata"]["labels"]
    assert not pm["spec"]["selector"]["matchLabels"].items() <= webhook_labels.items()
    assert pm["spec"]["namespaceSelector"] == {"matchNames": [NS]}
    [endpoint] = pm["spec"]["podMetricsEndpoints"]
    assert endpoint == {
        "port": "metrics",
        "scheme": "http",
        "path": "/metrics",
        "interval": "30s",
        "scrapeTimeout": "10s",
    }
    [container] = audit["spec"]["template"]["spec"]["containers"]
    assert {"name": "metrics", "containerPort": 9090, "protocol": "TCP"} in container["ports"]
    proc = helm(
        "template",
        "pf",
        str(CHART),
        "--namespace",
        NS,
        "--set",
        "metrics.auditPodMonitor.enabled=true",
        "--set",
        "audit.enabled=false",
        check=False,
    )
    assert proc.returncode != 0 and "- at '/audit/enabled': value must be true" in proc.stderr


@pytest.mark.parametrize(
    ("args", "fixes", "template_message", "fix"),
    [
        (
            ["--set", "metrics.serviceMonitor.enabled=true"],
            [
                "- at '/metrics/enabled': value must be true",
                "- at '/metrics/serviceMonitor/enabled': value must be false",
            ],
            "metrics.serviceMonitor.enabled needs metrics.enabled=true",
            "metrics.enabled=true",
        ),
        (
            ["--set", "metrics.auditPodMonitor.enabled=true", "--set", "audit.enabled=false"],
            [
                "- at '/audit/enabled': value must be true",
                "- at '/metrics/auditPodMonitor/enabled': value must be false",
            ],
            "metrics.auditPodMonitor.enabled needs audit.enabled=true",
            "audit.enabled=true",
        ),
    ],
)
def test_a_monitor_without_its_source_fails_helm_lint(
    args: list[str], fixes: list[str], template_message: str, fix: str
) -> None:
    """helm lint reports a template's `fail` as an INFO line and passes (issue 36): the schema's anyOf makes
    lint, template and install fail, naming both ways out."""
    lint = helm("lint", str(CHART), *APISERVER, *args, check=False)
    assert lint.returncode != 0, lint.stdout + lint.stderr
    assert "[ERROR] values.yaml: - at " in lint.stdout and all(f in lint.stdout for f in fixes), lint.stdout
    install = helm("template", "pf", str(CHART), "--namespace", NS, *APISERVER, *args, check=False)
    assert install.returncode != 0 and all(f in install.stderr for f in fixes), install.stderr
    # without the schema (--skip-schema-validation), the template's own fail still stops it
    skipped = helm(
        "template", "pf", str(CHART), "--namespace", NS, *APISERVER, *args, "--skip-schema-validation", check=False
    )
    assert skipped.returncode != 0 and template_message in skipped.stderr, skipped.stderr
    # with its source on, lint passes
    ok = helm("lint", str(CHART), *APISERVER, *args, "--set", fix, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
