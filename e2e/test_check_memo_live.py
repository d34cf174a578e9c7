"""The check memo (webhook/checkmemo.py) on the live view: a kept verdict follows the watch caches.

The sample TrainJob judged again and again through the real adapter, render cache and checks against
a real kube-apiserver: the second review's cache-reading checks come from the memo; a ResourceQuota
the job does not fit, created in its namespace, denies the next review (the quota cache's version
changed), word for word as a review without the memo; deleting it admits the job again. Each wait is
for the view's own cache to hold the change (LiveClusterView.wait_for), never a sleep.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import yaml

from e2e.conftest import SAMPLES_DIR
from e2e.harness.controlplane import ControlPlane
from webhook.checkmemo import CheckMemo
from webhook.checks import all_checks
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.preflight import Evaluation, evaluate

QUOTA = "e2e-memo-tight"


def _said(ev: Evaluation) -> tuple[Any, ...]:
    results = [(r.name, r.status, r.message, r.details, r.caveats) for r in ev.results.checks]
    d = ev.decision
    return (results, d.allowed, d.message, d.warnings)


async def test_a_kept_verdict_follows_the_quota_cache(samples_cluster: ControlPlane, open_view: Any) -> None:
    cp = samples_cluster
    settings = Settings.model_validate({"checks": {"Dry Run": "off"}})  # the Dry Run is not memoized: kept out
    view = await open_view(settings)
    checks, memo = all_checks(), CheckMemo()
    job: dict[str, Any] = yaml.safe_load((SAMPLES_DIR / "trainjob-good.yaml").read_text())
    job["metadata"]["name"] = "e2e-memo"
    ns = job["metadata"]["namespace"]

    async def judge(with_memo: bool) -> Evaluation:
        obj = copy.deepcopy(job)
        obj["metadata"]["uid"] = str(uuid.uuid4())  # each review a new create, as the apiserver sends them
        return await evaluate(
            obj,
            settings=settings,
            deadline=Deadline(10.0),
            view=view,
            namespace=ns,
            checks=checks,
            memo=memo if with_memo else None,
        )

    first = await judge(True)
    assert first.decision.allowed
    second = await judge(True)
    assert memo.hits > 0 and _said(second) == _said(first) == _said(await judge(False))
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": QUOTA, "namespace": ns},
        "spec": {"hard": {"requests.cpu": "1m"}},
    }
    try:
        cp.apply(quota)
        assert await view.wait_for("resourcequotas", lambda v: v.get_cached("resourcequotas", ns, QUOTA), 30)
        denied = await judge(True)
        assert not denied.decision.allowed
        assert f'ResourceQuota "{QUOTA}"' in denied.decision.message
        assert _said(denied) == _said(await judge(False))
    finally:
        cp.kubectl("delete", "resourcequota", QUOTA, "-n", ns, "--ignore-not-found", check=False)
    assert await view.wait_for("resourcequotas", lambda v: v.get_cached("resourcequotas", ns, QUOTA) is None, 30)
    again = await judge(True)
    assert again.decision.allowed and _said(again) == _said(first)
