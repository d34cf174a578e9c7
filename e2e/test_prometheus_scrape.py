"""A real Prometheus scrapes the chart's webhook pods on the node, and the chart's alerts and dashboard
queries run against what it scraped.

* Prometheus: cmd/prometheus from github.com/prometheus/prometheus (e2e/build.sh prometheus; version
  in e2e/versions.env), started here on 127.0.0.1 with a temporary data dir, stopped by its PID.
* The chart is installed on the real node (e2e/harness/node.py) with ``metrics.enabled=true``. The node
  has no prometheus-operator, so the chart's ServiceMonitor is rendered (``helm template``, same values)
  and turned into the scrape config prometheus-operator would generate for it (upstream
  pkg/prometheus/promcfg.go, generateServiceMonitorConfig, role endpointslice): keep the endpoints of
  Services carrying the selector's labels (``__meta_kubernetes_service_label_<name>`` and
  ``..._labelpresent_<name>``), keep the named port, then the target labels namespace, service, pod,
  container, endpoint and ``job`` = the Service's name. Discovery is kubernetes_sd_configs against the
  node's apiserver, as a user holding only the read Role Prometheus' own chart grants; the pod network
  is the node's bridge, reachable from this host.
* The PrometheusRule's groups are loaded as Prometheus' rule file (what the operator writes).

After a denied and an allowed apply (and a warned dry-run), every series the PrometheusRule and the
dashboard use exists with the labels they select on; every alert expression parses and evaluates
(the rule reports health "ok", and the expression answers an instant query); every dashboard panel
query returns data. The audit controller is scraped through the chart's PodMonitor
(metrics.auditPodMonitor, translated as the ServiceMonitor is: generatePodMonitorConfig, role pod);
the allowed job's Secret is then deleted, so its failing finding feeds the audit panels.

Marked ``node`` (``pytest e2e -m "not node"`` skips it; ``make test`` runs it).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.node import CHART_DIR, CHART_NAMESPACE, CHART_RELEASE, Node
from e2e.harness.prometheus import MONITORING, RATE_INTERVAL, Prometheus

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "e2e" / "samples"
NS = CHART_NAMESPACE
RELEASE = CHART_RELEASE
FULL = "preflight-webhook"  # the chart's fullname for this release (the Service, the `job` label)
#: the chart as installed: its metrics port on; scraped every second so rates have samples quickly
VALUES: dict[str, Any] = {
    "metrics": {"enabled": True, "serviceMonitor": {"interval": "1s", "scrapeTimeout": "1s"}},
}
#: audit.metricsPort's default
AUDIT_PORT = 9090
#: the allowed TrainJob's Secret (e2e/samples/trainjob-good.yaml), deleted afterwards: the audit
#: controller then finds the job failing (no Trainer runs on this node, so the job never starts)
SECRET_NS, SECRET = "demo-train", "hf-token"

#: Prometheus' read access for kubernetes_sd_configs role endpointslice (prometheus-community's chart,
#: templates/clusterrole.yaml, narrowed to one namespace)
SD_ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: prometheus-e2e, namespace: %(ns)s}
rules:
  - apiGroups: [""]
    resources: [services, endpoints, pods]
    verbs: [get, list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: prometheus-e2e, namespace: %(ns)s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: prometheus-e2e}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: prometheus-e2e}
"""


def _sanitize(name: str) -> str:
    """Prometheus' label-name sanitation of Kubernetes label names (strutil.SanitizeLabelName)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _selector_keep(matchlabels: dict[str, str], kind: str) -> list[dict[str, Any]]:
    return [
        {
            "action": "keep",
            "source_labels": [
                f"__meta_kubernetes_{kind}_label_{_sanitize(key)}",
                f"__meta_kubernetes_{kind}_labelpresent_{_sanitize(key)}",
            ],
            "regex": f"({value});true",
        }
        for key, value in sorted(matchlabels.items())
    ]


def _job(
    kind: str, role: str, monitor: dict[str, Any], ep: dict[str, Any], kubeconfig: Path, relabel: list[Any]
) -> dict[str, Any]:
    """One scrape job as promcfg.go writes it for a monitor's single endpoint: kubernetes SD with
    ``role`` in the monitor's namespaces, through ``kubeconfig``."""
    meta = monitor["metadata"]
    return {
        "job_name": f"{kind}/{meta['namespace']}/{meta['name']}/0",
        "honor_labels": False,
        "scrape_interval": ep["interval"],
        "scrape_timeout": ep["scrapeTimeout"],
        "metrics_path": ep["path"],
        "scheme": ep["scheme"],
        "kubernetes_sd_configs": [
            {
                "role": role,
                "kubeconfig_file": str(kubeconfig),
                "namespaces": {"names": monitor["spec"]["namespaceSelector"]["matchNames"]},
            }
        ],
        "relabel_configs": relabel,
    }


def pod_scrape_config(pm: dict[str, Any], kubeconfig: Path) -> dict[str, Any]:
    """The scrape config prometheus-operator generates for PodMonitor ``pm`` (one endpoint): role pod,
    keep the pods carrying the selector's labels and their named container port; ``job`` is
    ``<namespace>/<name>`` of the PodMonitor (promcfg.go generatePodMonitorConfig)."""
    meta, spec = pm["metadata"], pm["spec"]
    [ep] = spec["podMetricsEndpoints"]
    assert "matchExpressions" not in spec["selector"], "not translated: extend pod_scrape_config"
    relabel = [
        {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"},
        *_selector_keep(spec["selector"]["matchLabels"], "pod"),
        {"action": "keep", "source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": ep["port"]},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"target_label": "job", "replacement": f"{meta['namespace']}/{meta['name']}"},
        {"target_label": "endpoint", "replacement": ep["port"]},
    ]
    return _job("podMonitor", "pod", pm, ep, kubeconfig, relabel)


def scrape_config(sm: dict[str, Any], kubeconfig: Path) -> dict[str, Any]:
    """The scrape config prometheus-operator generates for ServiceMonitor ``sm`` (one endpoint),
    kubernetes SD through ``kubeconfig``. Follows pkg/prometheus/promcfg.go generateServiceMonitorConfig."""
    spec = sm["spec"]
    [ep] = spec["endpoints"]
    relabel = _selector_keep(spec["selector"]["matchLabels"], "service")
    assert "matchExpressions" not in spec["selector"], "not translated: extend scrape_config"
    relabel += [
        {"action": "keep", "source_labels": ["__meta_kubernetes_endpointslice_port_name"], "regex": ep["port"]},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"},
        {"target_label": "endpoint", "replacement": ep["port"]},
    ]
    return _job("serviceMonitor", "endpointslice", sm, ep, kubeconfig, relabel)


class Setup:
    def __init__(self, node: Node, prom: Prometheus, rendered: list[dict[str, Any]]) -> None:
        self.node, self.prom = node, prom
        self.rule = next(d for d in rendered if d["kind"] == "PrometheusRule")
        cm = next(d for d in rendered if d["kind"] == "ConfigMap" and d["metadata"]["name"] == f"{FULL}-dashboard")
        self.dashboard = json.loads(cm["data"]["preflight-webhook.json"])

    def alerts(self) -> dict[str, str]:
        return {r["alert"]: r["expr"] for g in self.rule["spec"]["groups"] for r in g["rules"]}

    def panel_queries(self) -> list[tuple[str, str]]:
        out = []
        for p in self.dashboard["panels"]:
            for t in p.get("targets", []):
                expr = t["expr"].replace("$namespace", NS).replace("$job", FULL)
                out.append((p["title"], expr.replace("$__rate_interval", RATE_INTERVAL)))
        return out


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    node = Node(start_timeout=180)
    node.start()
    prom: Prometheus | None = None
    try:
        assert node.cp is not None and node.state_dir is not None
        node.cp.apply_samples_prerequisites(SAMPLES)
        node.install_webhook_chart(RELEASE, NS, values=VALUES)
        vfile = node.state_dir / "values-prometheus.yaml"
        vfile.write_text(yaml.safe_dump(VALUES))
        # only the monitoring objects are read from this render; `helm template` cannot look up the
        # apiserver's address the NetworkPolicy needs (the install above did), so it is left out here
        no_netpol = ("--set", "networkPolicy.enabled=false")
        out = node.helm(
            "template", RELEASE, str(CHART_DIR), "--namespace", NS, "--values", str(vfile), *MONITORING, *no_netpol
        )
        rendered = [d for d in yaml.safe_load_all(out.stdout) if d]
        sm = next(d for d in rendered if d["kind"] == "ServiceMonitor")
        pm = next(d for d in rendered if d["kind"] == "PodMonitor")
        node.cp.kubectl("apply", "-f", "-", input=SD_ROLE % {"ns": NS})
        kubeconfig = node.cp.write_user_kubeconfig("prometheus-e2e", (), node.state_dir / "prometheus-e2e.kubeconfig")
        workdir = Path(tempfile.mkdtemp(prefix="prometheus-", dir=node.state_dir))
        rule = next(d for d in rendered if d["kind"] == "PrometheusRule")
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [scrape_config(sm, kubeconfig), pod_scrape_config(pm, kubeconfig)],
        }
        prom = Prometheus(workdir, config, {"groups": rule["spec"]["groups"]})
        yield Setup(node, prom, rendered)
    finally:
        if prom is not None:
            prom.stop()
        left = node.stop()
        assert left == [], left


def _pod_ips(s: Setup, component: str) -> set[str]:
    sel = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component={component}"
    pods = json.loads(s.node.cp.kubectl("get", "pods", "-n", NS, "-l", sel, "-o", "json").stdout)["items"]  # type: ignore[union-attr]
    return {p["status"]["podIP"] for p in pods if p["status"].get("podIP")}


def test_prometheus_discovers_and_scrapes_the_pods_the_monitors_select(setup: Setup) -> None:
    webhook, audit = _pod_ips(setup, "webhook"), _pod_ips(setup, "audit")
    assert len(webhook) == 2 and len(audit) == 1
    pools = {"webhook": f"serviceMonitor/{NS}/{FULL}/0", "audit": f"podMonitor/{NS}/{FULL}-audit/0"}

    def all_up() -> dict[str, list[dict[str, Any]]] | None:
        targets = setup.prom.api("targets", state="active")["activeTargets"]
        by_pool = {k: [t for t in targets if t["scrapePool"] == pool] for k, pool in pools.items()}
        ok = len(targets) == 3 and all(t["health"] == "up" for t in targets)
        return by_pool if ok and len(by_pool["webhook"]) == 2 else None

    by_pool = setup.prom.wait("both webhook pods and the audit pod scraped", all_up)
    port = VALUES["metrics"].get("port", 9090)
    assert {t["scrapeUrl"] for t in by_pool["webhook"]} == {f"http://{ip}:{port}/metrics" for ip in webhook}
    for t in by_pool["webhook"]:
        assert t["labels"]["job"] == FULL and t["labels"]["namespace"] == NS
        assert t["labels"]["service"] == FULL and t["labels"]["endpoint"] == "metrics"
        assert t["labels"]["container"] == "webhook" and t["labels"]["pod"]
    [t] = by_pool["audit"]
    assert t["scrapeUrl"] == f"http://{audit.pop()}:{AUDIT_PORT}/metrics"
    assert t["labels"]["namespace"] == NS and t["labels"]["container"] == "audit"
    assert t["labels"]["job"] == f"{NS}/{FULL}-audit"
    # the Service's TLS port is discovered too, and dropped by the port-name rule
    dropped = setup.prom.api("targets", state="dropped")["droppedTargets"]
    ports = {t["discoveredLabels"].get("__meta_kubernetes_endpointslice_port_name") for t in dropped}
    assert "https" in ports, ports


@pytest.fixture(scope="module")
def traffic(setup: Setup) -> Setup:
    """A denied apply, an allowed apply and a warned server-side dry-run, through the apiserver; then
    the allowed job's Secret is deleted."""
    cp = setup.node.cp
    assert cp is not None
    denied = cp.kubectl("apply", "-f", str(SAMPLES / "trainjob-broken.yaml"), check=False)
    assert denied.returncode != 0 and "denied the request" in denied.stderr, denied.stderr
    allowed = cp.kubectl("apply", "-f", str(SAMPLES / "trainjob-good.yaml"))
    assert "created" in allowed.stdout or "configured" in allowed.stdout
    cp.kubectl("delete", "secret", "-n", SECRET_NS, SECRET)  # the audit controller's failing finding
    warned = cp.kubectl("apply", "--dry-run=server", "-f", str(SAMPLES / "aiperfjob-warns.yaml"), check=False)
    assert "Warning: " in warned.stderr, warned.stderr
    return setup


def test_request_and_check_series_carry_the_labels_the_queries_select_on(traffic: Setup) -> None:
    prom = traffic.prom
    sel = f'namespace="{NS}", job="{FULL}"'

    got: set[str] = set()

    def decisions() -> bool:
        got.update(
            s["metric"]["decision"] for s in prom.query(f'preflight_webhook_requests_total{{{sel}, kind="TrainJob"}}')
        )
        # the allowed apply is `warned` on this node: no Trainer controller runs (the Controllers check warns)
        return "denied" in got and bool(got & {"allowed", "warned"})

    try:
        prom.wait("a denied and an allowed TrainJob counted", decisions)
    except AssertionError as e:
        raise AssertionError(f"decisions counted: {got}") from e
    [series, *_] = prom.query(f'preflight_webhook_requests_total{{{sel}, decision="denied"}}')
    assert {"kind", "operation", "decision", "namespace", "job", "pod", "instance", "service", "endpoint"} <= set(
        series["metric"]
    )
    assert series["metric"]["kind"] == "TrainJob" and series["metric"]["operation"] == "CREATE"
    statuses = prom.wait(
        "check results with fail and warn",
        lambda: (
            {s["metric"]["status"] for s in prom.query(f"preflight_webhook_check_duration_seconds_count{{{sel}}}")}
            >= {"fail", "warn", "pass"}
        ),
    )
    assert statuses
    failed = prom.query(f'preflight_webhook_check_duration_seconds_count{{{sel}, status="fail"}}')
    assert failed and all(s["metric"]["check"] for s in failed)


def test_every_alert_expression_parses_and_evaluates_on_live_data(traffic: Setup) -> None:
    prom = traffic.prom
    alerts = traffic.alerts()
    assert len(alerts) == 8

    def evaluated() -> dict[str, dict[str, Any]] | None:
        rules = {r["name"]: r for g in prom.api("rules", type="alert")["groups"] for r in g["rules"]}
        done = set(rules) == set(alerts) and all(r["health"] != "unknown" for r in rules.values())
        return rules if done else None

    rules = prom.wait("every alert rule evaluated once", evaluated)
    for name, rule in rules.items():
        assert rule["health"] == "ok", f"{name}: {rule.get('lastError')}"
        assert not rule.get("lastError"), name
    for name, expr in alerts.items():
        prom.query(expr)  # parses and evaluates now (raises on a 400/422)
        # the series inside each expression exist, as the ServiceMonitor and the PodMonitor scrape them
        for metric in set(re.findall(r"\b(preflight_webhook_[a-z_]+)\b", expr)):
            assert prom.query(f'{metric}{{namespace="{NS}", job="{FULL}"}}'), f"{name}: no {metric} series"
    fail = f'preflight_audit_findings{{namespace="{NS}", result="fail"}}'
    assert fail in alerts["PreflightAuditFindingsRising"]
    found = prom.wait(
        "the audit controller's failing finding on the job whose Secret is gone", lambda: prom.query(fail)
    )
    assert {(f["metric"]["exported_namespace"], f["metric"]["kind"], f["metric"]["check"]) for f in found} >= {
        (SECRET_NS, "TrainJob", "Secrets")
    }
    # the webhook is up, so PreflightWebhookDown's absent() is empty; its inner selector is not
    assert prom.query(f'up{{namespace="{NS}", job="{FULL}"}} == 1')
    assert prom.query(alerts["PreflightWebhookDown"]) == []


def test_every_dashboard_panel_query_returns_data(traffic: Setup) -> None:
    prom = traffic.prom
    queries = traffic.panel_queries()
    assert len(queries) > 15

    empty: list[str] = []

    def all_have_data() -> bool:
        empty[:] = sorted({title for title, expr in queries if not prom.query(expr)})
        return not empty

    try:
        prom.wait("every panel query returning data", all_have_data)
    except AssertionError as e:
        raise AssertionError(f"panels without data: {empty}") from e
    # the dashboard's variables resolve to this release
    assert NS in prom.api("label/namespace/values", **{"match[]": "preflight_webhook_requests_total"})
    assert FULL in prom.api("label/job/values", **{"match[]": f'preflight_webhook_requests_total{{namespace="{NS}"}}'})
