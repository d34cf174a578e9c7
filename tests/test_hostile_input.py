"""Hostile input: big objects, the deadline, and client mistakes that were 5xx.

Every test here asserts behaviour (which verdict, which HTTP status, which words), never
timing: the cost of hostile objects is measured by bench/hostile.py (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import copy
import gzip
import json
import ssl
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from test_server import CHECKS, call, review, widget

from webhook.checks.base import Check, CheckContext
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.preflight import evaluate
from webhook.results import CheckResult, Status
from webhook.workloads.walks import size_problem

SAMPLE = Path(__file__).parent / "oracle" / "specs" / "sample.yaml"


def aiperfjob() -> dict[str, Any]:
    return yaml.safe_load(SAMPLE.read_text())


async def judge(obj: dict[str, Any], settings: Settings | None = None, **kw: Any) -> Any:
    return await evaluate(obj, settings=settings or Settings(), deadline=Deadline(4.0), **kw)


# --------------------------------------------------------------------------- §1 the size bound


async def test_a_broken_job_with_280k_models_is_too_large_to_check_and_denied(monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's example: answered by the bound, before the adapter renders anything."""
    import webhook.workloads.aiperf as aiperf

    def no_render(*_: Any, **__: Any) -> Any:
        raise AssertionError("rendered an object past the size bound")

    monkeypatch.setattr(aiperf, "build", no_render)
    obj = aiperfjob()
    obj["spec"]["benchmark"]["models"] = ["m"] * 280_000
    ev = await judge(obj)
    assert ev.decision.allowed is False
    assert ev.decision.message == (
        'AIPerfJob "llama-sweep" in namespace "bench" failed 1 preflight check:\n'
        "[Object Size] too large to check: 280000 models in spec.benchmark.models (limit 1000). "
        "Fix: keep spec.benchmark.models to at most 1000 entries (split a benchmark over several jobs), "
        "or ask the webhook's operator to raise objectLimits.maxItems"
    )
    assert ev.decision.audit_annotations["failed-checks"] == "Object Size"


@pytest.mark.parametrize(
    ("where", "noun"),
    [
        (("spec", "benchmark", "datasets"), "datasets"),
        (("spec", "benchmark", "phases"), "phases"),
        (("spec", "benchmark", "endpoint", "urls"), "endpoint URLs"),
        (("spec", "podTemplate", "env"), "env entries"),
        (("spec", "podTemplate", "volumes"), "volumes"),
        (("spec", "podTemplate", "tolerations"), "tolerations"),
        (("spec", "podTemplate", "initContainers"), "init containers"),
        (("spec", "benchmark", "someUnknownField"), "entries"),
    ],
)
async def test_every_list_that_drives_rendering_is_bounded(where: tuple[str, ...], noun: str) -> None:
    obj = aiperfjob()
    parent = obj
    for key in where[:-1]:
        parent = parent.setdefault(key, {})
    parent[where[-1]] = [{"name": f"x{i}"} for i in range(1001)]
    ev = await judge(obj)
    assert ev.decision.allowed is False
    path = ".".join(where)
    assert f"[Object Size] too large to check: 1001 {noun} in {path} (limit 1000)" in (ev.decision.message or "")


async def test_maps_are_bounded_too() -> None:
    obj = aiperfjob()
    obj["metadata"]["labels"] = {f"l{i}": "v" for i in range(2000)}
    ev = await judge(obj)
    assert "too large to check: 2000 labels in metadata.labels (limit 1000)" in (ev.decision.message or "")


async def test_many_values_in_short_lists_are_bounded_by_max_values() -> None:
    obj = aiperfjob()
    obj["spec"]["benchmark"]["variables"] = {f"v{i}": list(range(900)) for i in range(20)}
    ev = await judge(obj)
    assert ev.decision.allowed is False
    assert (
        "[Object Size] too large to check: more than 10000 JSON values (limit 10000; the largest part is "
        "spec.benchmark.variables with " in (ev.decision.message or "")
    )
    assert "Fix: remove what the job does not need from spec.benchmark.variables" in (ev.decision.message or "")


def test_the_bound_stops_at_the_limit_on_deep_and_shared_structures() -> None:
    """Aliased (shared) lists are counted as expanded, and a deep chain does not build long paths."""
    level: list[Any] = ["x"] * 10
    for _ in range(9):  # a billion laughs made of shared references: 10^10 values as expanded
        level = [level] * 10
    assert "more than 10000 JSON values" in (size_problem({"spec": level}, max_values=10_000, max_items=1000) or "")
    deep: list[Any] = []
    node = deep
    for _ in range(5000):
        node.append([])
        node = node[0]
    assert size_problem({"spec": deep}, max_values=10_000, max_items=1000) is None


async def test_a_normal_job_is_within_the_bounds() -> None:
    ev = await judge(aiperfjob())
    assert all(r.name != "Object Size" for r in ev.results.checks)


@pytest.mark.parametrize(("action", "mode", "allowed", "warned"), [
    ("deny", "enforce", False, False),
    ("warn", "enforce", True, True),
    ("audit", "enforce", True, False),
    ("deny", "warn", True, True),
])  # fmt: skip
async def test_the_size_verdict_follows_its_configured_action(
    action: str, mode: str, allowed: bool, warned: bool
) -> None:
    obj = aiperfjob()
    obj["spec"]["benchmark"]["models"] = ["m"] * 1001
    ev = await judge(obj, Settings(mode=mode, objectLimits={"action": action}))
    assert ev.decision.allowed is allowed
    warning = "[Object Size] too large to check: 1001 models in spec.benchmark.models (limit 1000)."
    assert any(w.startswith(warning) for w in ev.decision.warnings) is warned
    assert ev.decision.audit_annotations["failed-checks"] == "Object Size"


async def test_the_size_limits_are_configurable() -> None:
    obj = aiperfjob()
    obj["spec"]["benchmark"]["models"] = ["m"] * 1001
    ev = await judge(obj, Settings(objectLimits={"maxItems": 2000}))
    assert all(r.name != "Object Size" for r in ev.results.checks)


async def test_an_update_of_an_object_already_too_large_is_not_blocked() -> None:
    """Ratchet: a job stored before the bound existed can still be cancelled or fixed."""
    old = aiperfjob()
    old["spec"]["benchmark"]["models"] = ["m"] * 1001
    new = copy.deepcopy(old)
    new["spec"]["cancel"] = True
    ev = await judge(new, operation="UPDATE", old_obj=old)
    assert ev.decision.allowed is True
    assert ev.decision.warnings[0].startswith("pre-existing: [Object Size] too large to check: 1001 models")


async def test_an_update_that_makes_an_object_too_large_is_denied() -> None:
    old = aiperfjob()
    new = copy.deepcopy(old)
    new["spec"]["benchmark"]["models"] = ["m"] * 1001
    ev = await judge(new, operation="UPDATE", old_obj=old)
    assert ev.decision.allowed is False


async def test_an_object_of_a_kind_without_adapter_is_not_measured() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {f"k{i}": "v" for i in range(5000)},
    }
    ev = await judge(obj)
    assert ev.decision.allowed is True and ev.decision.outcome == "unhandled"


# --------------------------------------------------------------------------- §1 the deadline, whatever layer notices it


class StuckCheck(Check):
    """A check the engine runs inline (synchronous) that never returns: only the outer timeout ends it."""

    name = "Widget Stuck"
    kinds = frozenset({"Widget"})
    summary = "Never finishes."
    synchronous = True
    started: ClassVar[int] = 0

    async def run(self, ctx: CheckContext) -> CheckResult:
        StuckCheck.started += 1
        await asyncio.Event().wait()
        return CheckResult(self.name, Status.PASS, "unreachable")  # pragma: no cover


@pytest.mark.parametrize(("timeout_action", "allowed"), [("deny", False), ("warn", True)])
async def test_the_outer_timeout_is_decided_by_timeout_action_not_failed_open(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, timeout_action: str, allowed: bool
) -> None:
    server = await start_webhook(Settings(timeoutAction=timeout_action), checks=[StuckCheck()])
    status, body, _ = await call(server, client_ssl, review(widget(), uid="t-1"), params={"timeout": "1s"})
    assert status == 200
    resp = body["response"]
    assert resp["uid"] == "t-1"
    assert resp["allowed"] is allowed
    finding = "[Preflight] did not finish within the 0.5s budget; its verdict is unknown (timed out)"
    if allowed:
        assert resp["warnings"] == [finding]
    else:
        assert resp["status"]["message"] == f'Widget "w1" in namespace "team-a" failed 1 preflight check:\n{finding}'
    assert resp["auditAnnotations"]["failed-checks"] == "Preflight"
    assert "internal error" not in json.dumps(resp)


# --------------------------------------------------------------------------- §2 the body and its parse


async def test_a_body_that_parses_into_too_many_values_is_refused_before_parsing(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answered in the protocol (the uid is read from the envelope's head) as too large to check."""
    server = await start_webhook(checks=CHECKS)
    parsed: list[int] = []
    loads = server.webhook.loads
    server.webhook.loads = lambda b: parsed.append(len(b)) or loads(b)  # type: ignore[method-assign]
    obj = widget()
    obj["spec"]["pad"] = [0] * 60_000
    status, body, _ = await call(server, client_ssl, review(obj, uid="big-1"))
    assert status == 200
    assert parsed == []  # never parsed
    resp = body["response"]
    assert resp["uid"] == "big-1"
    assert resp["allowed"] is False
    assert resp["status"]["message"] == (
        'Widget "w1" in namespace "team-a" failed 1 preflight check:\n'
        "[Object Size] too large to check: request.object holds about 60030 JSON values, more than the "
        "40000 an object within objectLimits.maxValues (10000) can hold. Fix: remove what the job does not need, "
        "or ask the webhook's operator to raise objectLimits.maxValues"
    )


async def test_an_object_over_max_bytes_is_too_large_to_check_without_parsing(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    """A few values but megabytes of text (one long string): bounded by bytes, etcd's 1.5 MiB by default."""
    server = await start_webhook(checks=CHECKS)
    obj = widget()
    obj["spec"]["pad"] = "x" * (2 * 2**20)
    status, body, _ = await call(server, client_ssl, review(obj, uid="big-2"))
    resp = body["response"]
    assert (status, resp["uid"], resp["allowed"]) == (200, "big-2", False)
    assert resp["status"]["message"].split("\n")[1] == (
        "[Object Size] too large to check: request.object is 2.0 MiB (limit 1.5 MiB, objectLimits.maxBytes; "
        "etcd's default limit, so it could not be stored anyway). Fix: remove what the job does not need "
        "(inline data belongs in a ConfigMap, a volume or a URL)"
    )


async def test_a_body_too_large_without_a_readable_uid_is_413(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(checks=CHECKS)
    status, body, _ = await call(server, client_ssl, json.dumps({"x": [0] * 60_000}))
    assert status == 413
    assert body["error"] == (
        "the request body (0.2 MiB, about 60002 JSON values) is larger than an AdmissionReview of an object "
        "within objectLimits, and does not start as the apiserver's do"
    )


async def test_a_big_update_whose_old_object_was_as_big_is_allowed_with_a_warning(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(checks=CHECKS)
    old = widget()
    old["spec"]["pad"] = [0] * 40_000
    new = copy.deepcopy(old)
    new["spec"]["image"] = "other"
    status, body, _ = await call(server, client_ssl, review(new, old=old, op="UPDATE", uid="u-2"))
    resp = body["response"]
    assert (status, resp["uid"], resp["allowed"]) == (200, "u-2", True)
    assert resp["warnings"][0].startswith("pre-existing: [Object Size] too large to check:")


async def test_a_big_delete_is_allowed_untouched(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(checks=CHECKS)
    old = widget()
    old["spec"]["pad"] = [0] * 60_000
    status, body, _ = await call(server, client_ssl, review(None, old=old, op="DELETE", uid="d-1"))
    assert (status, body["response"]["uid"], body["response"]["allowed"]) == (200, "d-1", True)


def test_the_default_body_limit_fits_what_the_apiserver_can_send() -> None:
    """object ≤ 3 MiB (the apiserver's request limit) + oldObject ≤ 1.5 MiB (etcd's) + the envelope."""
    limit = Settings().max_body_bytes
    assert 3 * 2**20 + 1.5 * 2**20 < limit <= 8 * 2**20


# --------------------------------------------------------------------------- §5 client mistakes are 400, not 500


async def test_a_lone_surrogate_is_400_json(server_with_widgets: Any, client_ssl: ssl.SSLContext) -> None:
    raw = json.dumps(review(widget("bad", name="w1"))).replace('"name": "w1"', '"name": "w\\ud800"', 1)
    status, body, _ = await call(server_with_widgets, client_ssl, raw)
    assert status == 400
    assert body == {
        "error": "the request body is not valid Unicode: a lone UTF-16 surrogate (\\ud800) in the string at request.name"
    }


async def test_a_surrogate_pair_is_fine(server_with_widgets: Any, client_ssl: ssl.SSLContext) -> None:
    raw = json.dumps(review(widget(name="w1"))).replace('"image": "good"', '"image": "good", "emoji": "\\ud83d\\ude00"')
    status, body, _ = await call(server_with_widgets, client_ssl, raw)
    assert (status, body["response"]["allowed"]) == (200, True)


async def test_an_escaped_backslash_before_u_d800_is_not_a_surrogate(
    server_with_widgets: Any, client_ssl: ssl.SSLContext
) -> None:
    raw = json.dumps(review(widget(name="w1"))).replace('"image": "good"', '"image": "good", "text": "\\\\ud800"')
    status, body, _ = await call(server_with_widgets, client_ssl, raw)
    assert (status, body["response"]["allowed"]) == (200, True)


async def test_a_body_that_is_not_the_gzip_it_claims_is_400_json(
    server_with_widgets: Any, client_ssl: ssl.SSLContext
) -> None:
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    status, body, _ = await call(server_with_widgets, client_ssl, json.dumps(review(widget())), headers=headers)
    assert status == 400
    assert body == {"error": "the request body is not valid gzip, as its Content-Encoding says it is"}


async def test_a_real_gzip_body_is_accepted(server_with_widgets: Any, client_ssl: ssl.SSLContext) -> None:
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    data = gzip.compress(json.dumps(review(widget(), uid="gz")).encode())
    status, body, _ = await call(server_with_widgets, client_ssl, data, headers=headers)
    assert (status, body["response"]["uid"], body["response"]["allowed"]) == (200, "gz", True)


@pytest.mark.parametrize("value", ["yes", 1, "true", 0, None])
async def test_dry_run_must_be_a_boolean(server_with_widgets: Any, client_ssl: ssl.SSLContext, value: Any) -> None:
    r = review(widget())
    r["request"]["dryRun"] = value
    status, body, _ = await call(server_with_widgets, client_ssl, r)
    assert status == 400
    assert body["error"].startswith(
        "not an AdmissionReview admission.k8s.io/v1: request.dryRun: Input should be a valid boolean"
    )


@pytest.mark.parametrize("field", ["object", "oldObject"])
async def test_request_kind_and_the_objects_kind_must_agree(
    server_with_widgets: Any, client_ssl: ssl.SSLContext, field: str
) -> None:
    other = widget()
    other["kind"] = "Gadget"
    r = review(widget(), op="UPDATE", old=widget())
    r["request"][field] = other
    status, body, _ = await call(server_with_widgets, client_ssl, r)
    assert status == 400
    assert body == {
        "error": f"not an AdmissionReview admission.k8s.io/v1: request.{field} is a example.com/v1 Gadget, "
        "but request.kind says example.com/v1 Widget"
    }


async def test_request_kind_and_the_objects_api_version_must_agree(
    server_with_widgets: Any, client_ssl: ssl.SSLContext
) -> None:
    r = review(widget())
    r["request"]["object"]["apiVersion"] = "other.io/v1"
    status, body, _ = await call(server_with_widgets, client_ssl, r)
    assert status == 400
    assert "request.object is a other.io/v1 Widget, but request.kind says example.com/v1 Widget" in body["error"]


@pytest.fixture
async def server_with_widgets(start_webhook: Any, widget_adapter: str) -> Any:
    return await start_webhook(checks=CHECKS)
