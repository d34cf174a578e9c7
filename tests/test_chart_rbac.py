"""The serving ClusterRole is exactly what the capability probe asks for: no more, no less.

`webhook.cluster.capabilities.required_permissions(all_checks())` is the union of every check's declared
permissions and what the caches need; the chart's rules are generated from it by
charts/preflight-webhook/gen-rbac.py. A check that gains a permission without regenerating
the chart fails here (its check would be lowered to skip in production); a rule that no
check needs fails here too.
"""

from __future__ import annotations

import subprocess
import sys

from test_chart import CHART, FULL, ROOT, one, render

from webhook.checks import all_checks
from webhook.cluster.capabilities import required_permissions


def _flatten(rules: list[dict]) -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    for r in rules:
        assert "resourceNames" not in r and "nonResourceURLs" not in r, r
        for g in r["apiGroups"]:
            for res in r["resources"]:
                for verb in r["verbs"]:
                    out.add((verb, g, res))
    return out


def test_serving_cluster_role_equals_required_permissions() -> None:
    docs = render()
    rules = one(docs, "ClusterRole", FULL)["rules"]
    granted = _flatten(rules)
    wanted = {
        (p.verb, p.group, f"{p.resource}/{p.subresource}" if p.subresource else p.resource)
        for p in required_permissions(all_checks())
    }
    assert not (granted - wanted), f"the chart grants more than the checks need: {sorted(granted - wanted)}"
    assert not (wanted - granted), f"the chart lacks what the checks need: {sorted(wanted - granted)}"
    assert not any("*" in x for rule in granted for x in rule), "no wildcards"


def test_serving_account_has_no_other_binding() -> None:
    docs = render()
    sa = one(docs, "Deployment", FULL)["spec"]["template"]["spec"]["serviceAccountName"]
    bound = [
        (d["kind"], d["roleRef"]["name"])
        for d in docs
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and any(s["kind"] == "ServiceAccount" and s["name"] == sa for s in d["subjects"])
    ]
    assert bound == [("ClusterRoleBinding", FULL)]


def test_only_dry_run_writes_are_granted() -> None:
    """The only write verb is create, on pods and jobsets: the dry runs the VAP confines to dryRun=All."""
    granted = _flatten(one(render(), "ClusterRole", FULL)["rules"])
    writes = sorted((v, g, r) for v, g, r in granted if v not in ("get", "list", "watch"))
    assert writes == [
        ("create", "", "pods"),
        ("create", "authorization.k8s.io", "selfsubjectaccessreviews"),
        ("create", "jobset.x-k8s.io", "jobsets"),
    ]


def test_generated_template_is_up_to_date() -> None:
    proc = subprocess.run(
        [sys.executable, str(CHART / "gen-rbac.py"), "--check"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr


def test_secrets_are_only_ever_got_by_name() -> None:
    """`get` by name, never `list`/`watch`: a LIST would hand over every value of a namespace.
    RBAC cannot narrow `get` to "all namespaces but these": webhook/cluster/live.py does
    (never_read_namespaces), and the self-managed certificate Secret holds no CA key."""
    granted = _flatten(one(render(), "ClusterRole", FULL)["rules"])
    assert sorted(v for v, g, r in granted if (g, r) == ("", "secrets")) == ["get"]
