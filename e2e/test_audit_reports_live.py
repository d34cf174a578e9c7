"""The audit controller's reporting against the real kube-apiserver + etcd, with the openreports.io
CRDs the chart installs (charts/preflight-webhook/files/openreports, from reports-api v0.2.1).

- Audit mode gets its meaning: for good and broken samples, the checks the report marks `fail`
  are exactly the ones the webhook in enforce mode denies on a server-side dry-run apply.
- The Report sink writes the namespace's Report, leaves it alone while nothing changes, updates it
  when a finding changes; `preflight-webhook report` reads it back, and computes the same live
  when there is no report.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conftest import SAMPLES_DIR
from e2e.harness.audit import install_openreports
from e2e.harness.controlplane import ControlPlane
from e2e.harness.live import live_evaluate
from e2e.harness.runner import RunningWebhook
from webhook.audit.client import AuditClient
from webhook.audit.findings import denied_checks
from webhook.audit.reports import ReportSink
from webhook.audit.sink import JobRef, Judgement
from webhook.cluster.client import load_configuration
from webhook.config import Settings

REPO = Path(__file__).resolve().parents[1]
HOOK = "preflight.webhook.io"
NS = "e2e-audit-reports"


@pytest.fixture(scope="module")
def reports_cluster(samples_cluster: ControlPlane) -> ControlPlane:
    install_openreports(samples_cluster)
    return samples_cluster


@pytest.fixture
async def writer(reports_cluster: ControlPlane) -> AsyncIterator[AuditClient]:
    client = AuditClient(await load_configuration(str(reports_cluster.kubeconfig)))
    yield client
    await client.close()


def _sample(name: str) -> dict[str, Any]:
    return yaml.safe_load((SAMPLES_DIR / f"{name}.yaml").read_text())


def _denied_by_dry_run(cp: ControlPlane, obj: dict[str, Any]) -> list[str]:
    """The checks named in the webhook's denial of a server-side dry-run apply ([] when admitted)."""
    proc = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(obj, sort_keys=False), check=False)
    if proc.returncode == 0:
        return []
    assert f'admission webhook "{HOOK}" denied the request' in proc.stderr, proc.stderr
    return re.findall(r"^\[([^\]]+)\] ", proc.stderr, flags=re.M)


SAMPLES = [
    "aiperfjob-good",
    "aiperfjob-broken",
    "aiperfjob-warns",
    "aiperfsweep-good",
    "trainjob-good",
    "trainjob-broken",
]


async def test_audit_findings_fail_exactly_where_the_enforcing_webhook_denies_a_dry_run(
    reports_cluster: ControlPlane, sample_webhook: RunningWebhook, open_view: Any
) -> None:
    audit = Settings.model_validate({**sample_webhook.config, "mode": "audit"})
    view = await open_view(audit)
    compared: dict[str, list[str]] = {}
    for name in SAMPLES:
        obj = _sample(name)
        ev = await live_evaluate(obj, view, audit)
        assert ev.decision.allowed, name  # audit mode never denies
        compared[name] = _denied_by_dry_run(reports_cluster, obj)
        assert denied_checks(ev, audit) == compared[name], name
    # not vacuous: the broken samples are denied, the good ones are not
    assert compared["aiperfjob-broken"] and compared["trainjob-broken"]
    assert compared["aiperfjob-good"] == [] and compared["trainjob-good"] == []


def _report(cp: ControlPlane, ns: str) -> dict[str, Any] | None:
    proc = cp.kubectl("get", "reports.openreports.io", "preflight-webhook", "-n", ns, "-o", "json", check=False)
    if proc.returncode != 0:
        assert "NotFound" in proc.stderr, proc.stderr
        return None
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def _cli(cp: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", "report", "--kubeconfig", str(cp.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


async def test_the_sink_writes_updates_only_on_change_and_report_reads_it_back(
    reports_cluster: ControlPlane, writer: AuditClient, open_view: Any
) -> None:
    cp = reports_cluster
    cp.ensure_namespace(NS)
    settings = Settings.model_validate({"mode": "audit", "checks": {"Controllers": "off"}})
    job = _sample("aiperfjob-good")
    job["metadata"] = {"name": "bench", "namespace": NS}
    job["spec"]["image"] = "nvcr.io/nvidia/AIPERF:0.13.0"  # invalid: uppercase repository
    job["spec"]["benchmark"]["endpoint"]["urls"] = ["http://127.0.0.1:8000"]
    cp.apply(job)  # no webhook selects this namespace: stored as a pipeline would store it
    stored = json.loads(cp.kubectl("get", "aiperfjobs", "bench", "-n", NS, "-o", "json").stdout)
    ref = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfJob", NS, "bench", stored["metadata"]["uid"])
    view = await open_view(settings)

    async def judge() -> Judgement:
        obj = json.loads(cp.kubectl("get", "aiperfjobs", "bench", "-n", NS, "-o", "json").stdout)
        return Judgement(ref, await live_evaluate(obj, view, settings), "1", dt.datetime.now(dt.UTC), "scan")

    sink = ReportSink(writer, settings, debounce=0)
    await sink.publish(await judge())
    await sink.idle()
    report = _report(cp, NS)
    assert report is not None and report["source"] == "preflight-webhook"
    assert report["summary"]["fail"] == 1
    image = next(r for r in report["results"] if r["policy"] == "Image Reference")
    assert image["result"] == "fail" and image["resources"][0]["uid"] == ref.uid
    assert image["message"].startswith('Image "nvcr.io/nvidia/AIPERF:0.13.0" used by containers')
    assert "Fix: use [registry[:port]/]repository[:tag][@digest] with a lowercase repository" in image["message"]
    version = report["metadata"]["resourceVersion"]

    # a periodic re-check that finds the same: nothing is written
    await sink.publish(await judge())
    await sink.idle()
    assert _report(cp, NS)["metadata"]["resourceVersion"] == version  # type: ignore[index]
    assert sink.writes == {"create": 1, "update": 0}

    # `report` reads it back: exit 1, enforce would deny the job for Image Reference
    proc = _cli(cp, "-n", NS, "-o", "json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["source"] == "reports" and doc["wouldBeDenied"] == 1
    (reported,) = doc["jobs"]
    assert (reported["kind"], reported["name"], reported["wouldBeDenied"]) == ("AIPerfJob", "bench", True)
    assert [f["check"] for f in reported["findings"] if f["result"] == "fail"] == ["Image Reference"]
    table = _cli(cp, "-n", NS)
    assert table.returncode == 1
    assert f"{NS}  AIPerfJob/bench  Image Reference  DENY" in table.stdout
    assert table.stdout.endswith(
        f"1 of 1 job(s) in namespace {NS} would be DENIED if the webhook enforced "
        "(from the audit controller's Policy Reports); fix them before you switch to enforce.\n"
    )

    # the job is fixed: one update, and the report says so
    cp.kubectl(
        "patch",
        "aiperfjobs",
        "bench",
        "-n",
        NS,
        "--type=merge",
        "-p",
        '{"spec":{"image":"nvcr.io/nvidia/aiperf:0.13.0"}}',
    )
    await sink.publish(await judge())
    await sink.idle()
    fixed = _report(cp, NS)
    assert fixed is not None and fixed["summary"]["fail"] == 0
    assert sink.writes == {"create": 1, "update": 1}
    assert _cli(cp, "-n", NS).returncode == 0

    # a new controller judges no job here (say it was deleted while none ran): the end of its first scan
    # finds the report in the metadata-only list of the apiserver and empties it
    fresh = ReportSink(writer, settings, debounce=0)
    await fresh.scan_done(0, {})
    await fresh.idle()
    emptied = _report(cp, NS)
    assert emptied is not None and emptied["results"] == [] and emptied["summary"]["pass"] == 0
    assert fresh.writes["create"] == 0 and fresh.writes["update"] >= 1
    await fresh.close()

    # no report: `report` judges live, with the same path, and finds the same job
    cp.kubectl("delete", "reports.openreports.io", "preflight-webhook", "-n", NS)
    live = _cli(cp, "-n", NS, "-o", "json")
    assert live.returncode == 0, live.stderr
    doc = json.loads(live.stdout)
    assert doc["source"] == "live" and [j["name"] for j in doc["jobs"]] == ["bench"]
    assert f"note: no Policy Report found in namespace {NS}" in live.stderr
    await sink.close()
