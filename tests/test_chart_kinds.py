"""Every list of kinds is the KindSpecs' (webhook/workloads/kinds.py), and the chart's webhook says the same.

The chart cannot import the code, so its kinds are values (`webhook.kinds`) and the template derives the
rules and the CEL of `not-owned-by-a-judged-job` from them; these tests render it with the real helm and
compare with what the specs derive. A kind missing from the values, or one the values list that no
package registers, fails here. The last test adds a fifth kind (tests/widget_kind/) and shows that its
package, one registration line and one values entry are all it takes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

import webhook.workloads.kinds as kinds_module
from tests.test_chart import CHART, FULL, one, render
from webhook.workloads.kinds import KindSpec, judged_owners, kinds, registry

JOBSET_HOOK = "validate-jobsets.preflight.webhook.io"


def webhook_kinds(specs: list[KindSpec]) -> list[KindSpec]:
    """The kinds of the main webhook: all but those with objects that are not judged (a JobSet a judged
    job owns: the JobSet webhook, whose matchCondition skips them)."""
    return [s for s in specs if s.skips is None]


def derived_rules(specs: list[KindSpec]) -> list[dict[str, Any]]:
    """One rule per API group, in the order the groups first appear, as the template writes them."""
    by_group: dict[str, list[str]] = {}
    for s in webhook_kinds(specs):
        by_group.setdefault(s.group, []).append(s.plural)
    return [
        {
            "apiGroups": [g],
            "apiVersions": ["*"],
            "resources": rs,
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        }
        for g, rs in by_group.items()
    ]


def derived_owner_terms(specs: list[KindSpec]) -> list[tuple[str, list[str]]]:
    """(group, kinds) of the owners whose JobSets are not judged, per group in registration order."""
    owners = judged_owners()
    by_group: dict[str, list[str]] = {}
    for s in specs:
        if s.group_kind in owners:
            by_group.setdefault(s.group, []).append(s.kind)
    return list(by_group.items())


def cel_terms(expression: str) -> list[tuple[str, list[str]]]:
    """(group, kinds) of each `(r.apiVersion.startsWith('G/') && r.kind in [...])` term of the CEL."""
    inner = expression.split("exists(r, ", 1)[1].rsplit(")", 1)[0]
    out = []
    for term in inner.split(" || "):
        group = term.split("startsWith('", 1)[1].split("/')", 1)[0]
        names = term.split("r.kind in [", 1)[1].split("]", 1)[0]
        out.append((group, [n.strip().strip("'") for n in names.split(",")]))
    return out


def values_entries(specs: list[KindSpec]) -> list[dict[str, Any]]:
    return [
        {"group": s.group, "resource": s.plural, "kind": s.kind, "ownsJobSets": s.owns_jobsets}
        for s in webhook_kinds(specs)
    ]


def assert_chart_matches(docs: list[dict[str, Any]], specs: list[KindSpec]) -> None:
    hooks = one(docs, "ValidatingWebhookConfiguration", FULL)["webhooks"]
    assert hooks[0]["rules"] == derived_rules(specs)
    [jobset] = [h for h in hooks if h["name"] == JOBSET_HOOK]
    [js] = [s for s in specs if s.skips is not None]
    assert jobset["rules"] == [
        {
            "apiGroups": [js.group],
            "apiVersions": ["*"],
            "resources": [js.plural],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        }
    ]
    [owned] = [c for c in jobset["matchConditions"] if c["name"] == "not-owned-by-a-judged-job"]
    assert cel_terms(owned["expression"]) == derived_owner_terms(specs)


def test_the_values_list_every_kind_the_code_registers() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["webhook"]["kinds"] == values_entries(kinds())


def test_the_chart_rules_and_cel_are_the_kind_specs() -> None:
    assert_chart_matches(render(), kinds())


def test_every_list_of_kinds_is_the_registrations() -> None:
    from webhook.audit.jobs import job_kinds
    from webhook.audit.rbac import watched
    from webhook.server import RENDERS_MANY
    from webhook.workloads import known_kinds

    specs = kinds()
    assert known_kinds() == [s.kind for s in specs] == ["AIPerfJob", "AIPerfSweep", "TrainJob", "JobSet"]
    assert [s.plural for s in job_kinds()] == ["aiperfjobs", "aiperfsweeps", "trainjobs", "jobsets"]
    assert {(s.group, s.plural) for s in specs} <= set(watched())
    assert judged_owners() == {(s.group, s.kind) for s in specs if s.kind != "JobSet"}
    assert RENDERS_MANY == {"AIPerfSweep"}


@pytest.fixture
def widget(monkeypatch: pytest.MonkeyPatch) -> KindSpec:
    """The fifth kind registered: one line in KIND_PACKAGES (the registry is read again from it)."""
    monkeypatch.setattr(kinds_module, "KIND_PACKAGES", [*kinds_module.KIND_PACKAGES, "tests.widget_kind"])
    monkeypatch.setattr(kinds_module, "_REGISTRY", {})
    spec = registry()[("example.com", "Widget")]
    return spec


def _widget(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "team-a", **meta},
        "spec": {"image": "busybox:1.36"},
    }


async def test_a_new_kind_is_its_package_one_registration_and_the_chart_values(widget: KindSpec) -> None:
    from webhook.audit.controller import job_spec
    from webhook.audit.jobs import JUDGED, Related, job_kinds, kind_by_resource
    from webhook.audit.rbac import audit_permissions
    from webhook.checks import all_checks
    from webhook.checks.base import covered_kinds
    from webhook.config import Settings
    from webhook.kube import Permission
    from webhook.workloads import build_workload, known_kinds
    from webhook.workloads.jobset import build as build_jobset

    # the webhook judges it: its adapter, every check of every kind, the render cache's key
    assert "Widget" in known_kinds()
    first = build_workload(_widget(uid="u-1"), settings=Settings())
    again = build_workload(_widget(uid="u-2"), settings=Settings())  # its spec reads no uid: one render
    assert first is not None and again is not None and first.kind == "Widget"
    assert first.render_id == again.render_id
    assert "Widget" in covered_kinds(next(c for c in all_checks() if c.kinds is None))
    # a JobSet a Widget owns is its Widget's: not judged again
    owned = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "w", "namespace": "team-a", "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": "u-1"}]},
        "spec": {"replicatedJobs": [{"name": "r", "template": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}}]},
    }  # fmt: skip
    assert build_jobset(owned, settings=Settings()) is None
    assert ("example.com", "Widget") in judged_owners()
    # the audit controller lists, watches and judges it, and its RBAC lets it
    assert kind_by_resource("widgets") is widget and widget in job_kinds()
    assert job_spec(widget).path() == "/apis/example.com/v1/widgets"
    assert widget.state is not None and widget.state(_widget(), Related())[0] == JUDGED
    perms = audit_permissions(all_checks())
    assert {Permission("list", "widgets", "example.com"), Permission("watch", "widgets", "example.com")} <= set(perms)
    # the chart: one entry in webhook.kinds, the rules and the CEL follow
    values = yaml.safe_load((CHART / "values.yaml").read_text())["webhook"]["kinds"]
    entry = {"group": "example.com", "resource": "widgets", "kind": "Widget", "ownsJobSets": True}
    assert values_entries(kinds()) == [*values, entry]
    assert_chart_matches(render("--set-json", f"webhook.kinds={json.dumps([*values, entry])}"), kinds())
    with pytest.raises(AssertionError):  # the values without it no longer match the specs
        assert_chart_matches(render(), kinds())
