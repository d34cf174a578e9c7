"""In-process server tests over real TLS (trustme): round trips, bad input, metrics, readiness."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from typing import Any, ClassVar

import aiohttp
import pytest

from webhook.checks.base import Check, CheckContext
from webhook.config import Settings
from webhook.results import CheckResult, Status
from webhook.server import WebhookApp

WIDGET = frozenset({"Widget"})


class PassCheck(Check):
    name = "Widget Pass"
    kinds = WIDGET
    summary = "Always passes."
    seen: ClassVar[list[float]] = []

    async def run(self, ctx: CheckContext) -> CheckResult:
        PassCheck.seen.append(ctx.deadline.budget)
        return CheckResult(self.name, Status.PASS, "fine")


class ImageCheck(Check):
    """Fails when spec.image is "bad"; warns when it is "odd"."""

    name = "Widget Image"
    kinds = WIDGET
    summary = "The widget image is usable."

    async def run(self, ctx: CheckContext) -> CheckResult:
        image = ctx.workload.obj["spec"].get("image")
        if image == "bad":
            return CheckResult(self.name, Status.FAIL, 'image "bad" cannot be pulled. Fix: use image "good"')
        if image == "odd":
            return CheckResult(self.name, Status.WARN, 'image "odd" has no tag')
        return CheckResult(self.name, Status.PASS, "image ok")


CHECKS = [PassCheck(), ImageCheck()]


def review(
    obj: dict[str, Any] | None,
    *,
    op: str = "CREATE",
    uid: str = "0b7c2a5e-1111-4a2b-9c3d-000000000001",
    old: dict[str, Any] | None = None,
    namespace: str = "team-a",
) -> dict[str, Any]:
    kind = (obj or old or {}).get("kind", "Widget")
    req: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": "example.com", "version": "v1", "kind": kind},
        "resource": {"group": "example.com", "version": "v1", "resource": kind.lower() + "s"},
        "namespace": namespace,
        "name": ((obj or old or {}).get("metadata") or {}).get("name", ""),
        "operation": op,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def widget(image: str = "good", name: str = "w1") -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"image": image},
    }


async def call(
    server: Any,
    client_ssl: ssl.SSLContext,
    body: Any,
    *,
    path: str = "/validate",
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> tuple[int, Any, aiohttp.typedefs.LooseHeaders]:
    data = json.dumps(body) if isinstance(body, (dict, list)) else body
    hdrs = {"Content-Type": "application/json"} if headers is None else headers
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl)) as s:
        async with s.request(method, server.url + path, data=data, params=params, headers=hdrs) as r:
            raw = await r.read()
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = raw.decode()
            return r.status, payload, r.headers


@pytest.fixture
async def server(start_webhook: Any, widget_adapter: str) -> Any:
    PassCheck.seen.clear()
    return await start_webhook(checks=CHECKS)


async def metrics_text(server: Any, client_ssl: ssl.SSLContext) -> str:
    status, text, headers = await call(server, client_ssl, None, path="/metrics", method="GET", headers={})
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    return text


# --------------------------------------------------------------------------- round trips


async def test_allowed_round_trip_echoes_uid(server: Any, client_ssl: ssl.SSLContext) -> None:
    status, body, headers = await call(server, client_ssl, review(widget(), uid="abc-123"))
    assert status == 200
    assert headers["Content-Type"].startswith("application/json")
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    resp = body["response"]
    assert resp["uid"] == "abc-123"
    assert resp["allowed"] is True
    assert "status" not in resp
    assert "warnings" not in resp
    assert resp["auditAnnotations"] == {"mode": "enforce", "decision": "allowed"}


async def test_denial_has_403_status_and_readable_message(server: Any, client_ssl: ssl.SSLContext) -> None:
    status, body, _ = await call(server, client_ssl, review(widget("bad"), uid="deny-1"))
    assert status == 200
    resp = body["response"]
    assert resp["uid"] == "deny-1"
    assert resp["allowed"] is False
    assert resp["status"] == {
        "code": 403,
        "status": "Failure",
        "reason": "Forbidden",
        "message": 'Widget "w1" in namespace "team-a" failed 1 preflight check:\n'
        '[Widget Image] image "bad" cannot be pulled. Fix: use image "good"',
    }
    assert resp["auditAnnotations"]["failed-checks"] == "Widget Image"
    assert resp["auditAnnotations"]["decision"] == "denied"


async def test_warning_is_returned_and_allowed(server: Any, client_ssl: ssl.SSLContext) -> None:
    _, body, _ = await call(server, client_ssl, review(widget("odd")))
    resp = body["response"]
    assert resp["allowed"] is True
    assert resp["warnings"] == ['[Widget Image] image "odd" has no tag']


async def test_warn_mode_turns_the_denial_into_a_warning(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(Settings(mode="warn"), checks=CHECKS)
    _, body, _ = await call(server, client_ssl, review(widget("bad")))
    resp = body["response"]
    assert resp["allowed"] is True
    assert resp["warnings"] == ['[Widget Image] image "bad" cannot be pulled. Fix: use image "good"']


@pytest.mark.parametrize("op", ["DELETE", "CONNECT"])
async def test_delete_and_connect_are_allowed_untouched(server: Any, client_ssl: ssl.SSLContext, op: str) -> None:
    _, body, _ = await call(server, client_ssl, review(None, op=op, old=widget("bad"), uid=f"{op}-1"))
    assert body["response"] == {"uid": f"{op}-1", "allowed": True}
    assert PassCheck.seen == []
    text = await metrics_text(server, client_ssl)
    assert f'preflight_webhook_requests_total{{decision="skipped",kind="Widget",operation="{op}"}} 1.0' in text


async def test_update_with_unchanged_spec_passes_without_checks(server: Any, client_ssl: ssl.SSLContext) -> None:
    old = widget("bad")
    new = widget("bad")
    new["metadata"]["labels"] = {"touched": "yes"}
    _, body, _ = await call(server, client_ssl, review(new, op="UPDATE", old=old))
    assert body["response"]["allowed"] is True
    assert PassCheck.seen == []


async def test_update_that_introduces_a_failure_is_denied(server: Any, client_ssl: ssl.SSLContext) -> None:
    _, body, _ = await call(server, client_ssl, review(widget("bad"), op="UPDATE", old=widget("good")))
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["code"] == 403


async def test_unknown_kind_is_allowed_without_checks_and_counted(server: Any, client_ssl: ssl.SSLContext) -> None:
    gadget = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"image": "bad"}}
    _, body, _ = await call(server, client_ssl, review(gadget, uid="g-1"))
    assert body["response"] == {"uid": "g-1", "allowed": True}
    assert PassCheck.seen == []
    text = await metrics_text(server, client_ssl)
    assert 'preflight_webhook_requests_total{decision="unhandled",kind="other",operation="CREATE"} 1.0' in text


async def test_unreadable_object_is_denied_with_200_and_403_status(server: Any, client_ssl: ssl.SSLContext) -> None:
    obj = widget()
    obj["spec"] = "not-a-mapping"
    status, body, _ = await call(server, client_ssl, review(obj, uid="u-9"))
    assert status == 200
    resp = body["response"]
    assert resp["uid"] == "u-9"
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 403
    assert resp["status"]["message"] == (
        'Widget "w1" in namespace "team-a" is not a valid Widget: spec must be an object. '
        "Fix: correct that field and apply again."
    )


# --------------------------------------------------------------------------- bad input


async def test_invalid_json_is_400_naming_the_problem(server: Any, client_ssl: ssl.SSLContext) -> None:
    status, body, _ = await call(server, client_ssl, b'{"apiVersion": ')
    assert status == 400
    assert body["error"].startswith("the request body is not valid JSON: ")


async def test_empty_body_is_400(server: Any, client_ssl: ssl.SSLContext) -> None:
    status, body, _ = await call(server, client_ssl, b"")
    assert status == 400
    assert body == {"error": "the request body is empty; expected an AdmissionReview JSON object"}


async def test_not_an_admission_review_names_the_field_path(server: Any, client_ssl: ssl.SSLContext) -> None:
    bad = review(widget())
    del bad["request"]["uid"]
    bad["request"]["kind"] = {"version": "v1"}
    status, body, _ = await call(server, client_ssl, bad)
    assert status == 400
    assert body == {
        "error": "not an AdmissionReview admission.k8s.io/v1: request.uid: Field required; request.kind.kind: Field required"
    }


async def test_json_array_is_400(server: Any, client_ssl: ssl.SSLContext) -> None:
    status, body, _ = await call(server, client_ssl, [1, 2])
    assert status == 400
    assert body == {"error": "not an AdmissionReview: the body is a JSON array, not an object"}


async def test_create_without_object_is_400(server: Any, client_ssl: ssl.SSLContext) -> None:
    status, body, _ = await call(server, client_ssl, review(None))
    assert status == 400
    assert body == {
        "error": "not an AdmissionReview admission.k8s.io/v1: request.object is required for operation CREATE"
    }


async def test_wrong_content_type_is_415(server: Any, client_ssl: ssl.SSLContext) -> None:
    status, body, _ = await call(
        server, client_ssl, json.dumps(review(widget())), headers={"Content-Type": "text/plain"}
    )
    assert status == 415
    assert body == {"error": "Content-Type must be application/json, not text/plain"}


async def test_body_over_limit_is_413_json(start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext) -> None:
    server = await start_webhook(Settings(maxBodyBytes=2048), checks=CHECKS)
    big = review(widget())
    big["request"]["object"]["metadata"]["annotations"] = {"pad": "x" * 4096}
    status, body, _ = await call(server, client_ssl, big)
    assert status == 413
    assert body["error"].startswith("request body of ") and body["error"].endswith(
        "exceeds the limit of 2048 bytes (maxBodyBytes)"
    )


async def test_chunked_body_over_limit_is_413_json(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    """No Content-Length: aiohttp's own limit trips while reading and is still answered in JSON."""
    server = await start_webhook(Settings(maxBodyBytes=2048), checks=CHECKS)

    async def chunks() -> Any:
        for _ in range(8):
            yield b" " * 1024

    status, body, _ = await call(server, client_ssl, chunks())
    assert status == 413
    assert body == {"error": "request body exceeds the limit of 2048 bytes (maxBodyBytes)"}


async def test_unknown_path_and_method_answer_json(server: Any, client_ssl: ssl.SSLContext) -> None:
    status, body, _ = await call(server, client_ssl, None, path="/nope", method="GET", headers={})
    assert (status, body) == (404, {"error": "Not Found"})
    status, body, headers = await call(server, client_ssl, None, path="/validate", method="GET", headers={})
    assert (status, body) == (405, {"error": "Method Not Allowed"})
    assert headers["Allow"] == "POST"


async def test_bad_requests_are_counted_as_invalid(server: Any, client_ssl: ssl.SSLContext) -> None:
    await call(server, client_ssl, b"nope")
    await call(server, client_ssl, b"{}", headers={"Content-Type": "text/yaml"})
    text = await metrics_text(server, client_ssl)
    assert 'preflight_webhook_requests_total{decision="invalid",kind="other",operation=""} 2.0' in text


# --------------------------------------------------------------------------- fail-open on our own bugs


def _boom(obj: dict[str, Any], **_: Any) -> Any:
    raise RuntimeError(f"token={obj['spec']['image']}")  # object content in the text: must not be logged


async def test_internal_error_fails_open_with_a_warning_and_no_secret(
    start_webhook: Any, monkeypatch: pytest.MonkeyPatch, client_ssl: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    from webhook.workloads.kinds import KindSpec, registry

    spec = KindSpec(kind="Widget", group="example.com", version="v1", plural="widgets", adapter=_boom)
    monkeypatch.setitem(registry(), spec.group_kind, spec)
    server = await start_webhook(checks=CHECKS)
    with caplog.at_level(logging.INFO):
        status, body, _ = await call(server, client_ssl, review(widget("s3cr3t-value"), uid="b-1"))
    assert status == 200
    resp = body["response"]
    assert resp["uid"] == "b-1"
    assert resp["allowed"] is True
    [warning] = resp["warnings"]
    assert warning.startswith("preflight-webhook internal error (RuntimeError at workloads/__init__.py:")
    assert warning.endswith("); the object was not checked")
    assert len(warning) <= 120
    assert resp["auditAnnotations"] == {"decision": "error"}
    assert "s3cr3t" not in caplog.text
    assert "internal error while judging uid=b-1" in caplog.text
    text = await metrics_text(server, client_ssl)
    assert 'preflight_webhook_requests_total{decision="error",kind="Widget",operation="CREATE"} 1.0' in text


# --------------------------------------------------------------------------- deadline from ?timeout=


@pytest.mark.parametrize(
    ("timeout", "budget"),
    [("2s", 1.5), ("1m0s", 4.0), ("2500ms", 2.0), (None, 4.0), ("garbage", 4.0), ("0.2s", 0.0)],
)
async def test_timeout_query_reaches_the_deadline(
    server: Any, client_ssl: ssl.SSLContext, timeout: str | None, budget: float
) -> None:
    params = {"timeout": timeout} if timeout is not None else None
    status, body, _ = await call(server, client_ssl, review(widget()), params=params)
    assert status == 200
    if budget > 0:
        assert PassCheck.seen == [pytest.approx(budget)]
    else:  # no budget at all: the check is reported as timed out, never silently dropped
        assert body["response"]["allowed"] is True
        if PassCheck.seen:  # it ran (it never awaits, so it can finish at once) with a zero budget
            assert PassCheck.seen == [0.0]
        else:
            assert any("[Widget Pass] did not finish within the 0.0s budget" in w for w in body["response"]["warnings"])


# --------------------------------------------------------------------------- metrics


async def test_metrics_expose_requests_latency_checks_and_in_flight(server: Any, client_ssl: ssl.SSLContext) -> None:
    await call(server, client_ssl, review(widget("bad")))
    await call(server, client_ssl, review(widget("good")))
    text = await metrics_text(server, client_ssl)
    assert 'preflight_webhook_requests_total{decision="denied",kind="Widget",operation="CREATE"} 1.0' in text
    assert 'preflight_webhook_requests_total{decision="allowed",kind="Widget",operation="CREATE"} 1.0' in text
    assert 'preflight_webhook_request_duration_seconds_bucket{kind="Widget",le="0.001",operation="CREATE"}' in text
    assert 'preflight_webhook_request_duration_seconds_bucket{kind="Widget",le="30.0",operation="CREATE"} 2.0' in text
    assert 'preflight_webhook_check_duration_seconds_count{check="Widget Image",status="fail"} 1.0' in text
    assert 'preflight_webhook_check_duration_seconds_count{check="Widget Image",status="pass"} 1.0' in text
    assert 'preflight_webhook_check_duration_seconds_count{check="Widget Pass",status="pass"} 2.0' in text
    assert "preflight_webhook_requests_in_flight 0.0" in text
    # no object content in labels
    assert "w1" not in text and "team-a" not in text and "alice" not in text


# --------------------------------------------------------------------------- readiness and capabilities


class FakeView:
    """Just enough of the live cluster view for readiness and /capabilities."""

    def __init__(self) -> None:
        self.ready = False
        self.ready_reason = "caches not synced: nodes"

    def capabilities(self) -> list[dict[str, Any]]:
        return [{"name": "Widget Pass", "value": "usable", "source": "probed", "reason": ""}]


def test_not_ready_until_tls_is_loaded() -> None:
    app = WebhookApp(Settings(), checks=CHECKS)
    assert app.readiness() == (False, "TLS material not loaded")
    app.tls_loaded = True
    assert app.readiness() == (True, "ready")
    app.config_loaded = False
    assert app.readiness() == (False, "configuration not loaded")


async def test_readyz_follows_the_cluster_view(start_webhook: Any, client_ssl: ssl.SSLContext) -> None:
    view = FakeView()
    server = await start_webhook(view=view, checks=CHECKS)
    status, body, _ = await call(server, client_ssl, None, path="/readyz", method="GET", headers={})
    assert (status, body) == (503, {"ready": False, "reason": "caches not synced: nodes"})
    view.ready = True
    status, body, _ = await call(server, client_ssl, None, path="/readyz", method="GET", headers={})
    assert (status, body) == (200, {"ready": True, "reason": "ready"})
    status, body, _ = await call(server, client_ssl, None, path="/healthz", method="GET", headers={})
    assert (status, body) == (200, {"ok": True})
    status, body, _ = await call(server, client_ssl, None, path="/capabilities", method="GET", headers={})
    assert (status, body) == (200, view.capabilities())


async def test_capabilities_offline_lists_declared_checks(server: Any, client_ssl: ssl.SSLContext) -> None:
    status, body, _ = await call(server, client_ssl, None, path="/capabilities", method="GET", headers={})
    assert status == 200
    assert [c["name"] for c in body] == ["Widget Pass", "Widget Image"]
    assert body[1] == {
        "name": "Widget Image",
        "blocking": False,
        "kinds": ["Widget"],
        "needsCluster": False,
        "permissions": [],
        "apis": [],
        "summary": "The widget image is usable.",
        "defaultAction": "deny",
        "value": "unknown",
        "source": "declared",
        "reason": "offline",
    }


# --------------------------------------------------------------------------- graceful drain


class GateCheck(Check):
    """Blocks until released, so a request can be held in flight."""

    name = "Widget Gate"
    kinds = WIDGET
    started: asyncio.Event
    release: asyncio.Event

    async def run(self, ctx: CheckContext) -> CheckResult:
        self.started.set()
        await self.release.wait()
        return CheckResult(self.name, Status.PASS, "released")


async def test_sigterm_drain_finishes_in_flight_requests(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    gate = GateCheck()
    gate.started, gate.release = asyncio.Event(), asyncio.Event()
    server = await start_webhook(checks=[gate])
    in_flight = asyncio.ensure_future(call(server, client_ssl, review(widget(), uid="drain-1")))
    await gate.started.wait()

    stopping = asyncio.ensure_future(server.shutdown())
    await asyncio.sleep(0)  # let shutdown flip readiness and close the listener
    assert server.webhook.readiness() == (False, "shutting down")
    assert not stopping.done()

    gate.release.set()
    status, body, _ = await in_flight
    await stopping
    assert status == 200
    assert body["response"] == {
        "uid": "drain-1",
        "allowed": True,
        "auditAnnotations": {"mode": "enforce", "decision": "allowed"},
    }
    with pytest.raises(aiohttp.ClientConnectionError):
        await call(server, client_ssl, review(widget()))


async def test_drain_is_bounded_by_drain_seconds(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    gate = GateCheck()
    gate.started, gate.release = asyncio.Event(), asyncio.Event()  # never released
    server = await start_webhook(Settings(drainSeconds=0.2, budgetSeconds=30), checks=[gate])
    in_flight = asyncio.ensure_future(call(server, client_ssl, review(widget())))
    await gate.started.wait()
    await server.shutdown()  # returns although the request never finishes by itself
    with pytest.raises(aiohttp.ClientError):
        await in_flight


async def test_the_start_line_names_the_event_loop(start_webhook: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Which loop serves is visible in the log (the image runs uvloop: e2e/test_node_chart.py)."""
    with caplog.at_level(logging.INFO, logger="webhook"):
        server = await start_webhook()
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("serving on https://"))
    assert f"127.0.0.1:{server.port} (json: stdlib, event loop: asyncio, client authentication: off)" in line
