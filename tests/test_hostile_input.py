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
from test_large_objects import aiperf_review
from test_server import CHECKS, call, review, widget

from webhook.checks.base import Check, CheckContext
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.preflight import evaluate, too_large
from webhook.results import CheckResult, Status

SAMPLE = Path(__file__).parent / "oracle" / "specs" / "sample.yaml"


def aiperfjob() -> dict[str, Any]:
    return yaml.safe_load(SAMPLE.read_text())


async def judge(obj: dict[str, Any], settings: Settings | None = None, **kw: Any) -> Any:
    return await evaluate(obj, settings=settings or Settings(), deadline=Deadline(4.0), **kw)


# --------------------------------------------------------------------------- §1 the size bound: etcd's


def oversized() -> dict[str, Any]:
    """The sample AIPerfJob at about 2 MiB of JSON: over what etcd stores by default."""
    obj = aiperfjob()
    obj["spec"]["benchmark"]["models"] = ["meta/llama"] * 170_000
    return obj


OVER = (
    "[Object Size] the object is 2.1 MiB as JSON, over the 1.5 MiB etcd stores by default (its --max-request-bytes; "
    "objectLimits.maxBytes), so the apiserver cannot store it and no controller would ever see it. Fix: remove what "
    "the job does not need (inline data belongs in a ConfigMap, a volume or a URL)"
)


async def test_an_object_over_etcds_limit_is_denied_by_object_size_before_rendering(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import webhook.workloads.aiperf as aiperf

    def no_render(*_: Any, **__: Any) -> Any:
        raise AssertionError("rendered an object over the size bound")

    monkeypatch.setattr(aiperf, "build", no_render)
    ev = await judge(oversized())
    assert ev.decision.allowed is False
    assert ev.decision.message == f'AIPerfJob "llama-sweep" in namespace "bench" failed 1 preflight check:\n{OVER}'
    assert ev.decision.audit_annotations["failed-checks"] == "Object Size"


@pytest.mark.parametrize(
    "where",
    [
        ("spec", "benchmark", "models"),
        ("spec", "benchmark", "endpoint", "urls"),
        ("spec", "podTemplate", "env"),
        ("spec", "podTemplate", "volumes"),
        ("spec", "podTemplate", "tolerations"),
        ("spec", "benchmark", "variables"),
    ],
)
async def test_a_long_list_within_etcds_limit_is_checked_in_full(where: tuple[str, ...]) -> None:
    """No round-number bound on a list's length (was 1000): the checks judge it."""
    obj = aiperfjob()
    parent = obj
    for key in where[:-1]:
        parent = parent.setdefault(key, {})
    parent[where[-1]] = (
        [f"http://llm-{i}.models.svc:8000" for i in range(1500)]
        if where[-1] == "urls"
        else ["m"] * 1500
        if where[-1] == "models"
        else [{"name": f"x{i}", "value": "v", "emptyDir": {}, "key": "k"} for i in range(1500)]
        if where[-1] != "variables"
        else {f"v{i}": list(range(30)) for i in range(1500)}
    )
    ev = await judge(obj)
    assert all(r.name != "Object Size" for r in ev.results.checks)
    assert ev.workload is not None and "ConfigMap Size" in {r.name for r in ev.results.checks}


async def test_a_big_map_within_etcds_limit_is_checked_in_full() -> None:
    obj = aiperfjob()
    obj["metadata"]["labels"] = {f"l{i}": "v" for i in range(20_000)}
    ev = await judge(obj)
    assert ev.workload is not None and all(r.name != "Object Size" for r in ev.results.checks)


def test_the_bound_stops_at_the_limit_on_deep_and_shared_structures() -> None:
    """Aliased (shared) lists are counted as expanded, and a deep chain is the adapter's to refuse."""
    level: list[Any] = ["x"] * 10
    for _ in range(9):  # a billion laughs made of shared references: 10^10 values as expanded
        level = [level] * 10
    assert (too_large({"spec": level}, Settings()) or "").startswith("the object is ")  # without writing it out
    deep: list[Any] = []
    node = deep
    for _ in range(5000):
        node.append([])
        node = node[0]
    assert too_large({"spec": deep}, Settings()) is None


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
    ev = await judge(oversized(), Settings(mode=mode, objectLimits={"action": action}))
    assert ev.decision.allowed is allowed
    warning = "[Object Size] the object is 2.1 MiB as JSON, over the 1.5 MiB etcd stores by default"
    assert any(w.startswith(warning) for w in ev.decision.warnings) is warned
    assert ev.decision.audit_annotations["failed-checks"] == "Object Size"


async def test_the_size_limit_follows_etcds_when_raised() -> None:
    ev = await judge(oversized(), Settings(objectLimits={"maxBytes": 3 * 2**20}))
    assert all(r.name != "Object Size" for r in ev.results.checks)
    lowered = await judge(aiperfjob(), Settings(objectLimits={"maxBytes": 65_536}))
    assert lowered.decision.allowed is True
    small = aiperfjob()
    small["spec"]["benchmark"]["models"] = ["meta/llama"] * 8_000
    ev = await judge(small, Settings(objectLimits={"maxBytes": 65_536}))
    assert (ev.decision.message or "").split("\n")[1] == (
        "[Object Size] the object is 0.1 MiB as JSON, over the 0.1 MiB etcd stores (its --max-request-bytes; "
        "objectLimits.maxBytes), so the apiserver cannot store it and no controller would ever see it. Fix: remove "
        "what the job does not need (inline data belongs in a ConfigMap, a volume or a URL)"
    )


def test_the_removed_round_number_bounds_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """An upgrade keeps an old config working: a webhook that refused to start would block every apply."""
    with caplog.at_level("WARNING", logger="webhook.config"):
        settings = Settings.model_validate({"objectLimits": {"maxItems": 2000, "maxValues": 9, "maxBytes": 2_000_000}})
    assert settings.object_limits.max_bytes == 2_000_000
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "WARNING",
            "objectLimits.maxValues and maxItems no longer exist and are ignored: the only bound is maxBytes (etcd's "
            "object limit), and every object within it is checked in full; remove them from the configuration",
        )
    ]


async def test_an_update_of_an_object_already_too_large_is_not_blocked() -> None:
    """Ratchet: a job stored while etcd's limit was higher can still be cancelled or fixed."""
    old = oversized()
    new = copy.deepcopy(old)
    new["spec"]["cancel"] = True
    ev = await judge(new, operation="UPDATE", old_obj=old)
    assert ev.decision.allowed is True
    assert ev.decision.warnings[0].startswith("pre-existing: [Object Size] the object is 2.1 MiB as JSON")


async def test_an_update_that_makes_an_object_too_large_is_denied() -> None:
    old = aiperfjob()
    ev = await judge(oversized(), operation="UPDATE", old_obj=old)
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
    # named: the check still running when the server's own timeout ended the review (issue 33)
    finding = "[Widget Stuck] did not finish within the 0.5s budget; its verdict is unknown (timed out)"
    if allowed:
        assert resp["warnings"] == [finding]
    else:
        assert resp["status"]["message"] == f'Widget "w1" in namespace "team-a" failed 1 preflight check:\n{finding}'
    assert resp["auditAnnotations"]["failed-checks"] == "Widget Stuck"
    assert "internal error" not in json.dumps(resp)


# --------------------------------------------------------------------------- §2 the body and its parse


async def test_a_body_of_more_values_than_etcd_stores_is_refused_before_parsing(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A million values cannot fit etcd's 1.5 MiB: answered in the protocol (the uid is read from the
    envelope's head) by Object Size, never parsed."""
    server = await start_webhook(checks=CHECKS)
    parsed: list[int] = []
    loads = server.webhook.loads
    server.webhook.loads = lambda b: parsed.append(len(b)) or loads(b)  # type: ignore[method-assign]
    obj = widget()
    obj["spec"]["pad"] = [0] * 1_000_000
    status, body, _ = await call(server, client_ssl, review(obj, uid="big-1"))
    assert status == 200
    assert parsed == []  # never parsed
    resp = body["response"]
    assert resp["uid"] == "big-1"
    assert resp["allowed"] is False
    assert resp["status"]["message"] == (
        'Widget "w1" in namespace "team-a" failed 1 preflight check:\n'
        "[Object Size] the object is 2.9 MiB as JSON, over the 1.5 MiB etcd stores by default (its "
        "--max-request-bytes; objectLimits.maxBytes), so the apiserver cannot store it and no controller would "
        "ever see it. Fix: remove what the job does not need (inline data belongs in a ConfigMap, a volume or a URL)"
    )


async def test_an_object_over_max_bytes_is_denied_by_object_size_without_parsing(
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
        "[Object Size] the object is 2.0 MiB as JSON, over the 1.5 MiB etcd stores by default (its "
        "--max-request-bytes; objectLimits.maxBytes), so the apiserver cannot store it and no controller would "
        "ever see it. Fix: remove what the job does not need (inline data belongs in a ConfigMap, a volume or a URL)"
    )


async def test_a_body_too_large_without_a_readable_uid_is_413(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(checks=CHECKS)
    status, body, _ = await call(server, client_ssl, json.dumps({"x": [0] * 600_000}))
    assert status == 413
    assert body["error"] == (
        "the request body (1.7 MiB, about 600002 JSON values) is larger than an AdmissionReview of an object "
        "within objectLimits, and does not start as the apiserver's do"
    )


async def test_a_big_update_whose_old_object_was_as_big_is_allowed_with_a_warning(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(checks=CHECKS)
    old = widget()
    old["spec"]["pad"] = [0] * 600_000
    new = copy.deepcopy(old)
    new["spec"]["image"] = "other"
    status, body, _ = await call(server, client_ssl, review(new, old=old, op="UPDATE", uid="u-2"))
    resp = body["response"]
    assert (status, resp["uid"], resp["allowed"]) == (200, "u-2", True)
    assert resp["warnings"][0].startswith("pre-existing: [Object Size] the object is 1.7 MiB as JSON")


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


# --------------------------------------------------------------------------- issue 25: an image name froze the loop


HOSTILE_IMAGE_DENIAL = (
    'AIPerfJob "llama-sweep" in namespace "bench" failed 1 preflight check:\n[Image Reference] Image "{shown}…" '
    '(128000 characters) used by containers "event-bus-proxy", "control-plane" and 7 more in pod group "controller"; '
    'containers "worker-group-manager", "worker-0" and 19 more in pod group "workers" is invalid: the repository path '
    "is 128000 characters, over the 255 allowed. Fix: use [registry[:port]/]repository[:tag][@digest] with a lowercase "
    'repository, e.g. "nvcr.io/nvidia/aiperf:0.13.0"'
)


@pytest.mark.timeout(30)  # with docker-image-py's regex these four took 18 s each, one after another
async def test_129_kb_image_names_are_denied_while_healthz_and_a_good_review_are_answered(
    start_webhook: Any, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(Settings())
    good = aiperfjob()
    bad = {}
    for sep in ("a/", "a.", "a-", "a_"):
        bad[sep] = aiperfjob()
        bad[sep]["spec"]["image"] = sep * 64_000  # 129 KB of AdmissionReview: a legal object
    answers = await asyncio.gather(
        *(call(server, client_ssl, aiperf_review(obj, f"bad-{i}")) for i, obj in enumerate(bad.values())),
        call(server, client_ssl, None, path="/healthz", method="GET"),
        call(server, client_ssl, aiperf_review(good, "good-0")),
    )
    for (status, body, _), sep in zip(answers[:4], bad, strict=True):
        assert status == 200
        assert body["response"]["allowed"] is False
        assert body["response"]["status"]["message"] == HOSTILE_IMAGE_DENIAL.format(shown=(sep * 50)[:100])
    assert answers[4][0] == 200
    assert answers[5][0] == 200 and answers[5][1]["response"]["allowed"] is True
