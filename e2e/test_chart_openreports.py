"""The openreports.io CRDs the chart installs are reports-api v0.2.1's, byte for byte (the Go module,
fetched by `e2e/build.sh openreports`), and the real apiserver accepts, under them, the Report the
audit controller writes (webhook/audit/reports.py build_report) with every field it sets."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.harness.controlplane import ControlPlane, cache_dir, ensure_built
from webhook.audit.findings import Finding
from webhook.audit.reports import Entry, build_report
from webhook.audit.sink import JobRef

CHART_CRDS = Path(__file__).resolve().parents[1] / "charts" / "preflight-webhook" / "files" / "openreports"
FILES = ("openreports.io_reports.yaml", "openreports.io_clusterreports.yaml")


def test_the_chart_ships_the_upstream_crds_unchanged() -> None:
    ensure_built(quiet=True, what="openreports")
    upstream = cache_dir() / "crds-openreports"
    assert (upstream / ".version").read_text().strip() == "openreports=v0.2.1"
    for name in FILES:
        assert (CHART_CRDS / name).read_bytes() == (upstream / name).read_bytes(), name


def test_the_apiserver_accepts_the_report_the_sink_builds(control_plane: ControlPlane) -> None:
    cp = control_plane
    args = ["apply", "--server-side", "--field-manager=preflight-e2e"]
    for name in FILES:
        args += ["-f", str(CHART_CRDS / name)]
    cp.kubectl(*args)
    cp.wait_for_crds(["reports.openreports.io", "clusterreports.openreports.io"])
    ns = "e2e-openreports-schema"
    cp.ensure_namespace(ns)
    sweep = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfSweep", ns, "sweep", "0000-1")
    entries = [
        Entry(JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfJob", ns, "bench", "0000-2"),
              Finding("Secrets", "fail", 'Secret "hf" not found. Fix: kubectl create secret ...', "fail", "deny", "recorded")),
        Entry(JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfJob", ns, "sweep-1", "", parent=sweep),
              Finding("Resource Quotas", "warn", "cannot verify", "warn", "", "recorded")),
    ]  # fmt: skip
    report = build_report(ns, entries, now=1_764_547_200)
    cp.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(report))
    stored = json.loads(cp.kubectl("get", "reports.openreports.io", "preflight-webhook", "-n", ns, "-o", "json").stdout)
    # nothing pruned by the CRD's structural schema: every field the sink sets is in it
    for key in ("source", "scope", "summary", "results"):
        assert stored[key] == report[key], key
    # a namespace too large for one object: the report says what it left out (configuration.limits)
    cut = build_report(ns, entries, now=1_764_547_200, max_bytes=1_200)
    assert cut["configuration"]["limits"]["maxResults"] == len(cut["results"]) < 2
    cut["metadata"]["name"] = "preflight-webhook-cut"
    cp.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(cut))
    stored_cut = json.loads(
        cp.kubectl("get", "reports.openreports.io", "preflight-webhook-cut", "-n", ns, "-o", "json").stdout
    )
    assert stored_cut["configuration"] == cut["configuration"] and stored_cut["summary"] == report["summary"]
    printed = cp.kubectl("get", "reports.openreports.io", "preflight-webhook", "-n", ns).stdout.split("\n")
    assert printed[0].split()[:6] == ["NAME", "PASS", "FAIL", "WARN", "ERROR", "SKIP"]
    assert printed[1].split()[:6] == ["preflight-webhook", "0", "1", "1", "0", "0"]
