"""Image Pull without a registry: the setting's off and allowlist paths, and what it collects.

Every verdict that needs a registry's answer is tested against the real distribution registry
(e2e/test_imagepull_registry.py); these are the paths that ask no one.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakeview import FakeView
from webhook.checks.base import CheckContext
from webhook.checks.imagepull import ImagePull, collect, nearby
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.results import Status
from webhook.workloads.base import PodGroup, Workload


def _wl(*groups: PodGroup) -> Workload:
    return Workload(kind="AIPerfJob", api_version="aiperf.nvidia.com/v1alpha1", name="j", namespace="ns", obj={},
                    pod_groups=list(groups))  # fmt: skip


def _group(name: str, images: list[str], secrets: list[str] | None = None, sa: str | None = None) -> PodGroup:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(images)]}
    if secrets is not None:
        spec["imagePullSecrets"] = [{"name": s} for s in secrets]
    if sa:
        spec["serviceAccountName"] = sa
    return PodGroup(name=name, pods=1, pod_spec=spec)


def _ctx(wl: Workload, view: FakeView, **ra: Any) -> CheckContext:
    return CheckContext(wl, Deadline(5), Settings(registryAccess=ra), view)


async def test_off_by_default_asks_no_one() -> None:
    view = FakeView()
    r = await ImagePull().run(_ctx(_wl(_group("g", ["registry.example/a:1"], ["s"])), view))
    assert [(x.status, x.message) for x in r] == [
        (Status.SKIP, "Registry access is off (registryAccess.mode); images are not looked up")
    ]
    assert view.secret_reads == []


def test_yaml_off_is_off() -> None:
    assert Settings.model_validate({"registryAccess": {"mode": False}}).registry_access.mode == "off"


async def test_allowlist_leaves_other_registries_unasked() -> None:
    view = FakeView()
    r = await ImagePull().run(_ctx(_wl(_group("g", ["registry.example/a:1"], ["s"])), view, mode="allowlist",
                                   allowlist=["mine.example:5000"]))  # fmt: skip
    assert [(x.status, x.message) for x in r] == [
        (Status.SKIP, 'Registries not in registryAccess.allowlist, not asked: "registry.example"')
    ]
    assert view.secret_reads == []


def test_collect_uses_the_service_accounts_secrets_only_when_the_pod_names_none() -> None:
    """plugin/pkg/admission/serviceaccount/admission.go: the SA's imagePullSecrets are copied into a
    pod that has none."""
    view = FakeView({"serviceaccounts": [{"metadata": {"name": "runner", "namespace": "ns"},
                                          "imagePullSecrets": [{"name": "sa-pull"}]}]})  # fmt: skip
    wl = _wl(
        _group("a", ["registry.example/x:1", "registry.example/x:1"], sa="runner"),
        _group("b", ["registry.example/x:1"], ["own"], sa="runner"),
        _group("c", ["registry.example/x:1", "Not A Ref", ""], sa="runner"),
    )
    needs = collect(CheckContext(wl, Deadline(5), Settings(), view))
    assert [(n.image, n.secrets, n.source, n.groups) for n in needs] == [
        ("registry.example/x:1", ("sa-pull",), 'ServiceAccount "runner"', ["a", "c"]),
        ("registry.example/x:1", ("own",), "imagePullSecrets", ["b"]),
    ]


@pytest.mark.parametrize(
    ("tag", "tags", "want"),
    [("1.2", ("1.0", "1.1", "2.0"), ["1.1", "1.0"]), ("v1.0", ("1.0", "latest"), ["1.0"]), ("zz", ("1.0",), [])],
)
def test_nearby_tags(tag: str, tags: tuple[str, ...], want: list[str]) -> None:
    assert nearby(tag, tags) == want
