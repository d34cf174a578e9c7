"""The audit controller started before the AIPerf, Trainer, Kueue and JobSet CRDs exist, against a
real kube-apiserver + etcd of its own (the shared one has every CRD from the start).

Once the CRDs are installed (e2e/build.sh's, as `ControlPlane.install_crds` applies them), the
running controller watches the new kinds, without a restart: it learns of them from the
apiserver's discovery (webhook/cluster/discovery.py, refreshed every `discovery_refresh_seconds`;
1 s here, 60 s by default), judges the AIPerfJob that was created meanwhile and writes its
`PreflightFailed` Event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.conftest import SAMPLES_DIR
from e2e.harness.controlplane import ControlPlane, ensure_built
from e2e.test_audit_live import until
from webhook.audit.events import FAILED
from webhook.audit.runner import AuditRun
from webhook.checks import all_checks
from webhook.config import Settings

NS = "audit-late"
SETTINGS = Settings.model_validate({"audit": {"leaseNamespace": NS, "debounceSeconds": 0.5}})
WATCHED_LATE = {"aiperfjobs", "aiperfsweeps", "trainjobs", "jobsets", "workloads", "localqueues", "clusterqueues",
                "trainingruntimes", "clustertrainingruntimes"}  # fmt: skip


@pytest.fixture(scope="module")
def bare() -> Iterator[ControlPlane]:
    """A control plane without any CRD."""
    ensure_built(quiet=True, what="control-plane")
    with ControlPlane(build=False, install_crds=False) as cp:
        cp.ensure_namespace(NS)
        yield cp


def _job() -> dict[str, Any]:
    job = yaml.safe_load((SAMPLES_DIR / "aiperfjob-good.yaml").read_text())
    job["metadata"] = {"name": "late-bench", "namespace": NS}
    job["spec"]["image"] = "nvcr.io/nvidia/AIPERF:0.13.0"  # invalid: uppercase repository
    job["spec"]["benchmark"]["endpoint"]["urls"] = ["http://127.0.0.1:8000"]
    return job


def _events(cp: ControlPlane) -> list[dict[str, Any]]:
    out = cp.kubectl("get", "events", "-n", NS, "-o", "json").stdout
    return [
        e for e in json.loads(out)["items"]
        if e.get("reason") == FAILED and (e.get("involvedObject") or {}).get("name") == "late-bench"
    ]  # fmt: skip


async def test_kinds_whose_crds_are_installed_after_start_are_watched_and_judged_without_a_restart(
    bare: ControlPlane,
) -> None:
    run = await AuditRun.start(
        SETTINGS, kubeconfig=str(bare.kubeconfig), identity="late-a", checks=all_checks(), discovery_refresh_seconds=1.0
    )
    try:
        c = run.controller
        await until("the controller leads and scanned once", lambda: c.is_leader and c.scans >= 1)
        assert WATCHED_LATE.isdisjoint(c.watched)  # not served: not watched
        assert {"secrets", "resourcequotas"} <= c.watched  # resourcequotas: on the view's cache

        await asyncio.to_thread(bare.install_crds)
        await asyncio.to_thread(bare.apply, _job())  # created before or after the watch starts: judged either way
        await until("every new kind is watched", lambda: WATCHED_LATE <= c.watched, timeout=60)
        got = await until(
            "a PreflightFailed Event on the AIPerfJob", lambda: asyncio.to_thread(_events, bare), timeout=60
        )
        assert got[0]["message"] == (
            f'AIPerfJob "late-bench" in namespace "{NS}" failed 1 preflight check:\n'
            '[Image Reference] Image "nvcr.io/nvidia/AIPERF:0.13.0" used by containers "event-bus-proxy", '
            '"control-plane" and 7 more in pod group "controller"; containers "worker-group-manager", "worker-0", '
            '"record-processor-0" in pod group "workers" is invalid: repository "nvidia/AIPERF" contains uppercase '
            "letters; repository paths must be lowercase. Fix: use [registry[:port]/]repository[:tag][@digest] with a "
            'lowercase repository, e.g. "nvcr.io/nvidia/aiperf:0.13.0"'
        )
        assert c.scans == 1  # no restart, no second scan: the new watch found it
        assert ("aiperfjobs", NS, "late-bench") in c.judged
    finally:
        await run.stop()
