"""The AIPerf operator's manifests and the good job of e2e/harness/aiperf_stack.py, judged by
AIPerf 0.13.0's own code in the oracle venv (tests/oracle/setup.sh; skipped without
``PREFLIGHT_ORACLE_PYTHON``, as tests/oracle/test_oracle_live.py). No node needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import aiperf_stack as A

ORACLE_PYTHON = os.environ.get("PREFLIGHT_ORACLE_PYTHON")
GENERATE = Path(__file__).resolve().parents[1] / "tests" / "oracle" / "generate.py"

pytestmark = pytest.mark.skipif(not ORACLE_PYTHON, reason="PREFLIGHT_ORACLE_PYTHON is not set")

#: what the operator needs: its RBAC preflight's permissions and the Role it writes per job
_WHEEL_RBAC = """
import json
from aiperf.operator.preflight._common import OPERATOR_RBAC_PERMISSIONS
from aiperf.kubernetes.resources import RBACSpec
print(json.dumps({"preflight": OPERATOR_RBAC_PERMISSIONS, "role": RBACSpec._RULES}))
"""


def _oracle(*argv: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIPERF_")}
    proc = subprocess.run(
        [os.path.expanduser(ORACLE_PYTHON or ""), *argv], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


def _granted(verb: str, resource: str, group: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in A.OPERATOR_RULES)


def test_the_cluster_role_covers_what_the_operator_checks_and_grants() -> None:
    wheel = json.loads(_oracle("-c", _WHEEL_RBAC))
    missing = [p for p in wheel["preflight"] if not _granted(*p)]
    assert not missing, f"the operator's RBAC preflight would FAIL: {missing}"
    # RBAC escalation prevention: the operator may write only a Role whose rules it holds
    role: list[dict[str, Any]] = wheel["role"]
    over = [(v, res, g) for r in role for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]]
    assert not [p for p in over if not _granted(*p)]


def test_the_good_job_renders_small_with_aiperfs_own_code() -> None:
    job = A.good_aiperfjob("bench", "team-a")
    job["metadata"]["creationTimestamp"] = "2026-01-15T10:00:00Z"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as fh:
        fh.write(json.dumps(job))
        fh.flush()
        out = json.loads(_oracle(str(GENERATE), "--one", fh.name))
    assert "error" not in out, out.get("error")
    assert out["workerPods"] == 1
    jobs = {rj["name"]: rj["template"]["spec"]["template"]["spec"] for rj in out["jobSet"]["spec"]["replicatedJobs"]}
    assert set(jobs) == {"controller", "workers"}
    for spec in jobs.values():
        assert all("resources" not in c for c in spec["containers"])  # resourceMode: none
        for c in spec["containers"]:
            if c["name"] != "results-sidecar":  # the podTemplate's mounts reach every other container
                mounts = {m["mountPath"] for m in c["volumeMounts"]}
                assert {f"/{A.TOKENIZER_NAME}", A.HF_CACHE_MOUNT} <= mounts, c["name"]
                env = {e["name"]: e.get("value") for e in c.get("env", [])}
                assert env.get("HF_HUB_CACHE") == f"{A.HF_CACHE_MOUNT}/hub" and "HF_HUB_OFFLINE" not in env, c["name"]
                assert "workingDir" not in c  # the name resolves as a directory relative to "/"
    config = json.loads(out["configMap"]["data"]["run_config.json"])["cfg"]
    assert config["endpoint"]["urls"] == [A.STANDIN_URL]
    assert config["tokenizer"]["name"] == A.TOKENIZER_NAME
