"""The audit controller with the chart's per-namespace RBAC only (issue 33), on the real kube-apiserver.

The chart grants the audit ServiceAccount `get/list/watch secrets` only where jobs live (rbac.jobNamespaces:
a RoleBinding each). The controller watched Secrets cluster-wide: the apiserver refused that watch (403),
start waited its whole sync timeout, and a deleted Secret re-checked its waiting job only at the next full
scan (audit.periodSeconds, 10 min). Now it watches Secrets in each job namespace: the deletion re-judges
the job at once and the PreflightFailed Event follows.

The chart is `helm install`ed by e2e/test_chart_privileges_live.py's fixture; the controller runs here
with the audit ServiceAccount's own token and the configuration the chart rendered."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.audit import initializer_claim, preflight_events, sample_runtime, until
from e2e.harness.controlplane import ControlPlane
from e2e.test_audit_live import RUNTIME, _secret, _trainjob
from e2e.test_chart_privileges_live import FULL, JOB_NS, NS, installed
from webhook.audit.controller import NamespacedReflector, watch_connections
from webhook.audit.events import FAILED
from webhook.audit.runner import AuditRun
from webhook.checks import all_checks
from webhook.config import Settings

__all__ = ["installed"]  # the module's fixture: the chart installed with rbac.jobNamespaces={JOB_NS}

JOB = "waiting-ft"  # the name e2e/test_audit_live.py's TrainJob builder gives
WAIT = 30.0  # far below the period (600 s): only the Secret's watch can re-check the job in time
SYNC = 20.0  # the start's wait for the watches: a refused watch would spend all of it


def _here(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = JOB_NS
    return obj


def _audit_kubeconfig(cp: ControlPlane) -> Path:
    token = cp.kubectl("create", "token", f"{FULL}-audit", "-n", NS, "--duration=1h").stdout.strip()
    cluster = yaml.safe_load(Path(cp.kubeconfig).read_text())["clusters"][0]
    path = cp.state_dir / "pf-priv-audit.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": "audit", "user": {"token": token}}],
                "contexts": [{"name": "audit", "context": {"cluster": cluster["name"], "user": "audit"}}],
                "current-context": "audit",
            }
        )
    )
    path.chmod(0o600)
    return path


async def test_a_secret_deleted_in_a_job_namespace_rejudges_its_job_with_per_namespace_rbac(
    installed: ControlPlane,
) -> None:
    cp = installed
    cp.apply(sample_runtime(RUNTIME))
    cp.apply([_here(_secret()), initializer_claim(JOB_NS), _here(_trainjob())])
    rendered = json.loads(cp.kubectl("get", "configmap", f"{FULL}-config", "-n", NS, "-o", "json").stdout)
    config = yaml.safe_load(rendered["data"]["config.yaml"])
    config.setdefault("audit", {}).update({"leaseNamespace": NS, "debounceSeconds": 0.5})
    settings = Settings.model_validate(config)
    assert settings.job_namespaces == [JOB_NS]
    run = await AuditRun.start(
        settings,
        kubeconfig=str(_audit_kubeconfig(cp)),
        identity="job-namespaces-a",
        checks=all_checks(),
        sync_timeout=SYNC,
    )
    try:
        c = run.controller
        secrets = c.reflectors["secrets"]
        assert isinstance(secrets, NamespacedReflector) and list(secrets.parts) == [JOB_NS]
        # synced in the job namespace, and refused nowhere (a cluster-wide watch was: 403)
        assert secrets.synced_event.is_set() and secrets.cache.get(JOB_NS, "hf-token") is not None
        assert [r.cache.last_error for r in secrets.parts.values()] == [""]
        # every watch stream holds a connection: the pool keeps the requests' on top of them all
        streams = len(run.view.reflectors) + len(c.reflectors) - 1 + len(secrets.parts)
        assert streams <= watch_connections(settings)
        assert c.client.configuration.connection_pool_maxsize >= settings.api_concurrency + streams
        key = ("trainjobs", JOB_NS, JOB)
        await until("the job's complete judgement read its Secret",
                    lambda: key in c.index.jobs_for("secrets", JOB_NS, "hf-token") and c.scans >= 1, timeout=WAIT)  # fmt: skip
        assert await preflight_events(cp, JOB_NS, JOB) == []  # the job passes while its Secret exists

        await asyncio.to_thread(cp.kubectl, "delete", "secret", "hf-token", "-n", JOB_NS)
        got = await until("a PreflightFailed Event", lambda: preflight_events(cp, JOB_NS, JOB), timeout=WAIT)
        assert [e["reason"] for e in got] == [FAILED]
        assert f'[Secrets] Secret "hf-token" not found in namespace "{JOB_NS}"' in got[0]["message"]
        assert c.evaluations["secrets"] >= 1  # the re-check the deletion's watch event caused
        assert c.scans == 1  # not the period's
    finally:
        await run.stop()
        # the control plane is the session's: a job left waiting would be judged by every later audit test
        await asyncio.to_thread(cp.kubectl, "delete", "trainjob", JOB, "-n", JOB_NS, "--ignore-not-found")
