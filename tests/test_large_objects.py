"""Large objects the apiserver stores are checked in full, and the CLI and the webhook say the same.

Issue 25 item 4: a 1,500-record AIPerfJob (AIPerf 0.13.0 renders it) was denied as "too large to
check" by the webhook and "not checked" by the CLI. What is over a real limit is denied by the check
that names it: ConfigMap Size (1 MiB, the records' ConfigMap) or Object Size (etcd's 1.5 MiB).
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import yaml

from webhook.cli import check as cmd_check
from webhook.config import Settings
from webhook.server import WebhookApp

SAMPLE = Path(__file__).parent / "oracle" / "specs" / "sample.yaml"


def with_records(n: int) -> dict[str, Any]:
    obj = yaml.safe_load(SAMPLE.read_text())
    records = [{"text": f"Summarise the plot of a short novel in two sentences #{i}"} for i in range(n)]
    obj["spec"]["benchmark"]["datasets"] = [{"name": "main", "type": "file", "records": records}]
    return obj


class FakeRequest:
    """What WebhookApp.validate reads from aiohttp's request."""

    content_type = "application/json"
    query: dict[str, str] = {}

    def __init__(self, body: bytes) -> None:
        self.body, self.content_length = body, len(body)
        self.headers = {"Content-Type": "application/json"}

    async def read(self) -> bytes:
        return self.body


def aiperf_review(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    """The AdmissionReview the apiserver sends for a CREATE of the AIPerfJob `obj`."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "aiperf.nvidia.com", "version": "v1alpha1", "kind": "AIPerfJob"},
            "resource": {"group": "aiperf.nvidia.com", "version": "v1alpha1", "resource": "aiperfjobs"},
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {"username": "u"},
            "object": obj,
            "dryRun": False,
        },
    }


async def webhook(obj: dict[str, Any]) -> dict[str, Any]:
    """The webhook's answer, the body compact as the apiserver writes it (request.uid first)."""
    review = aiperf_review(obj, "u-1")
    body = json.dumps(review, separators=(",", ":"), ensure_ascii=False).encode()
    resp = await WebhookApp(Settings()).validate(FakeRequest(body))  # type: ignore[arg-type]
    return dict(json.loads(resp.body)["response"])  # type: ignore[attr-defined]


async def cli(tmp_path: Path, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The CLI's exit code and JSON report for `obj` (offline), as `preflight-webhook check` runs it."""
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(obj), encoding="utf-8")
    p = argparse.ArgumentParser(prog="preflight-webhook")
    cmd_check.add_parser(p.add_subparsers(dest="command"))
    args = p.parse_args(["check", "--offline", "-o", "json", "-f", str(path)])
    out, err = io.StringIO(), io.StringIO()
    code = await cmd_check._run(args, out, err)
    assert err.getvalue().startswith("Summary: 1 job checked in 1 file: ")  # nothing but the summary line
    assert len(err.getvalue().splitlines()) == 1
    [entry] = json.loads(out.getvalue())  # an array, one entry per job
    return code, entry


def finding(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["name"] == name)


async def test_the_1500_record_job_passes_in_the_webhook_and_the_cli(
    tmp_path: Path,
) -> None:
    obj = with_records(1500)
    answer = await webhook(obj)
    assert answer["allowed"] is True
    assert not any("Object Size" in w for w in answer.get("warnings") or [])
    code, report = await cli(tmp_path, obj)
    assert code == 0 and report["passed"] is True
    assert finding(report, "ConfigMap Size")["message"] == (
        'ConfigMap "aiperf-llama-sweep-config" is 155.6 KiB of the 1024 KiB limit'
    )
    assert all(c["name"] != "Object Size" for c in report["checks"])


async def test_records_over_the_1_mib_configmap_are_denied_by_configmap_size_in_the_same_words(
    tmp_path: Path,
) -> None:
    obj = with_records(12_000)
    answer = await webhook(obj)
    assert answer["allowed"] is False
    denied = answer["status"]["message"].split("\n")[1]
    code, report = await cli(tmp_path, obj)
    assert code == 1
    message = finding(report, "ConfigMap Size")["message"]
    assert denied == f"[ConfigMap Size] {message}"
    assert message.startswith(
        'ConfigMap "aiperf-llama-sweep-config" that the AIPerf operator renders from this spec would be 1'
    )
    assert "over the 1024 KiB (1 MiB) ConfigMap limit" in message
    assert "largest parts: cfg.datasets[0].records (" in message


async def test_an_object_over_etcds_limit_is_denied_by_object_size_in_the_same_words(
    tmp_path: Path,
) -> None:
    obj = with_records(30_000)  # 2.2 MiB as JSON
    answer = await webhook(obj)
    assert answer["allowed"] is False
    code, report = await cli(tmp_path, obj)
    assert code == 1
    # offline, the CRD's schema is validated too (docs/cli.md, "Schema validation");
    # the webhook's verdict is Object Size alone
    assert [c for c in report["checks"] if c["name"] != "CRD Schema"] == [finding(report, "Object Size")]
    message = finding(report, "Object Size")["message"]
    assert answer["status"]["message"].split("\n")[1] == f"[Object Size] {message}"
    assert message == (
        "the object is 2.0 MiB as JSON, over the 1.5 MiB etcd stores by default (its --max-request-bytes; "
        "objectLimits.maxBytes), so the apiserver cannot store it and no controller would ever see it. Fix: remove "
        "what the job does not need (inline data belongs in a ConfigMap, a volume or a URL)"
    )
