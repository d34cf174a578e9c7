"""Dry Run sends its dry runs once for the most common pair: `kubectl apply --dry-run=server`
followed by the real apply of the same TrainJob (webhook.checks.dryrun_cache).

Counted at the apiserver: its audit log records every create of jobsets and pods, the dry
runs included (their requestURI carries dryRun=All).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from e2e.conftest import SAMPLES_DIR
from e2e.harness.controlplane import ControlPlane
from e2e.harness.runner import RunningWebhook
from e2e.harness.runner import stored as exists


def dry_run_creates(cp: ControlPlane, ns: str, prefix: str) -> list[tuple[str, str]]:
    """(resource, name) of every dryRun=All create of jobsets and pods whose name contains ``prefix``."""
    return [
        (ref.get("resource"), ref.get("name"))
        for e in cp.audit_events()
        if e.get("stage") == "ResponseComplete"
        and e.get("verb") == "create"
        and "dryRun=All" in (e.get("requestURI") or "")
        and (ref := e.get("objectRef") or {}).get("resource") in ("jobsets", "pods")
        and ref.get("namespace") == ns
        and prefix in str(ref.get("name") or "")
    ]


@pytest.mark.parametrize("sample", ["trainjob-good", "aiperfjob-good"])
def test_dry_run_then_apply_dry_runs_once(
    samples_cluster: ControlPlane, sample_webhook: RunningWebhook, sample: str
) -> None:
    """The second apply carries a new metadata.uid (the AIPerfJob's containers get it in env): still one dry run."""
    cp = samples_cluster
    job: dict[str, Any] = yaml.safe_load((SAMPLES_DIR / f"{sample}.yaml").read_text())
    name, ns = f"e2e-dryrun-once-{sample.split('-')[0]}", job["metadata"]["namespace"]
    job["metadata"]["name"] = name
    manifest = yaml.safe_dump(job, sort_keys=False)
    reviews0 = sample_webhook.requests_total()
    try:
        first = cp.kubectl("apply", "-f", "-", "--dry-run=server", input=manifest, check=False)
        assert first.returncode == 0, first.stderr
        after_first = dry_run_creates(cp, ns, name)
        second = cp.kubectl("apply", "-f", "-", input=manifest, check=False)
        assert second.returncode == 0, second.stderr
        assert exists(cp, job)
        # both applies were reviewed, the second one from the cache: no new dry run at the apiserver
        assert sample_webhook.requests_total() - reviews0 == 2
        # the first apply: the JobSet once, a Pod per pod group once, none twice
        resources = [r for r, _ in after_first]
        assert resources.count("jobsets") == 1 and resources.count("pods") >= 1, after_first
        assert len(set(after_first)) == len(after_first), after_first
        assert dry_run_creates(cp, ns, name) == after_first
    finally:
        cp.kubectl("delete", job["kind"].lower(), name, "-n", ns, "--ignore-not-found", check=False)
