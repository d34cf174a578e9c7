"""Throw random and mutated AdmissionReviews at /validate: never a 5xx, no exception escapes.

The server runs in-process on its own event loop thread (real TLS, 127.0.0.1); hypothesis
drives it from the test thread. Starting points are valid reviews of the sample AIPerfJob
and TrainJob; mutations delete, replace or add fields anywhere with random JSON.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.config import Settings
from webhook.listener import WebhookServer
from webhook.server import WebhookApp
from webhook.tls import server_context

SAMPLES = Path(__file__).parent / "oracle" / "samples"  # copies of the design notes' samples


def _sample(name: str) -> dict[str, Any]:
    return yaml.safe_load((SAMPLES / name).read_text())


def _review(obj: dict[str, Any], op: str = "CREATE", old: dict[str, Any] | None = None) -> dict[str, Any]:
    group, version = obj["apiVersion"].split("/")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "fuzz-uid",
            "kind": {"group": group, "version": version, "kind": obj["kind"]},
            "resource": {"group": group, "version": version, "resource": obj["kind"].lower() + "s"},
            "namespace": obj["metadata"].get("namespace", "default"),
            "name": obj["metadata"]["name"],
            "operation": op,
            "userInfo": {"username": "fuzzer"},
            "object": obj,
            "oldObject": old,
            "dryRun": False,
        },
    }


BASES = [
    _review(_sample("aiperfjob.yaml")),
    _review(_sample("trainjob.yaml")),
    _review(_sample("aiperfjob.yaml"), op="UPDATE", old=_sample("aiperfjob.yaml")),
]

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


class _Loop:
    """A server on its own event loop thread, so hypothesis can drive it synchronously."""

    def __init__(self, ca: trustme.CA, tmp: Path) -> None:
        leaf = ca.issue_cert("127.0.0.1")
        crt, key = tmp / "tls.crt", tmp / "tls.key"
        crt.write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
        key.write_bytes(leaf.private_key_pem.bytes())
        self.server_ctx = server_context(crt, key)
        self.client_ctx = ssl.create_default_context()
        ca.configure_trust(self.client_ctx)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.app = WebhookApp(Settings(budgetSeconds=2))
        self.server = WebhookServer(self.app, ssl_context=self.server_ctx, host="127.0.0.1", port=0)
        self.run(self.server.start())
        self.session: aiohttp.ClientSession = self.run(self._session())

    async def _session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.client_ctx, limit=4))

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    async def _post(self, body: bytes) -> tuple[int, Any]:
        url = f"https://127.0.0.1:{self.server.port}/validate?timeout=5s"
        async with self.session.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
            raw = await r.read()
            return r.status, json.loads(raw)

    def post(self, body: bytes) -> tuple[int, Any]:
        return self.run(self._post(body))

    def close(self) -> None:
        self.run(self.session.close())
        self.run(self.server.shutdown())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class _Errors(logging.Handler):
    """Collects ERROR records: aiohttp's 'Error handling request' and our fail-open log."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def live(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Loop]:
    srv = _Loop(ca, tmp_path_factory.mktemp("fuzz-tls"))
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def errors() -> Iterator[_Errors]:
    handler = _Errors()
    loggers = [
        logging.getLogger("aiohttp.server"),
        logging.getLogger("webhook.server"),
        logging.getLogger("webhook.engine"),
    ]
    for lg in loggers:
        lg.addHandler(handler)
    yield handler
    for lg in loggers:
        lg.removeHandler(handler)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def mutated_reviews(draw: st.DrawFn) -> Any:
    doc: Any = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 4))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["delete", "replace", "add"]))
        if not path:
            if action == "replace":
                doc = draw(JSON_VALUES)
            continue
        parent = _get(doc, path[:-1])
        if action == "delete":
            del parent[path[-1]]
        elif action == "replace":
            parent[path[-1]] = draw(JSON_VALUES)
        else:
            target = _get(doc, path)
            if isinstance(target, dict):
                target[draw(st.text(max_size=12))] = draw(JSON_VALUES)
            elif isinstance(target, list):
                target.append(draw(JSON_VALUES))
            else:
                parent[path[-1]] = draw(JSON_VALUES)
    return doc


def _check(live: _Loop, errors: _Errors, body: bytes) -> None:
    before = len(errors.records)
    status, payload = live.post(body)
    assert status < 500, payload
    if status == 200:
        resp = payload["response"]
        assert resp["uid"]
        assert isinstance(resp["allowed"], bool)
        if not resp["allowed"]:
            assert resp["status"]["code"] == 403 and resp["status"]["message"]
        for w in resp.get("warnings", []):
            assert "internal error" not in w, w  # a fail-open means an exception escaped a component
    else:
        assert status in (400, 413, 415) and isinstance(payload["error"], str) and payload["error"]
    escaped = [r.getMessage() for r in errors.records[before:]]
    assert not escaped, escaped


FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@FUZZ
@given(doc=mutated_reviews())
def test_mutated_reviews_never_5xx(live: _Loop, errors: _Errors, doc: Any) -> None:
    _check(live, errors, json.dumps(doc).encode())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=JSON_VALUES)
def test_random_json_never_5xx(live: _Loop, errors: _Errors, doc: Any) -> None:
    _check(live, errors, json.dumps(doc).encode())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=200))
def test_random_bytes_never_5xx(live: _Loop, errors: _Errors, body: bytes) -> None:
    _check(live, errors, body)


def test_the_bases_are_judged(live: _Loop, errors: _Errors) -> None:
    """The unmutated samples go all the way through the adapters and checks."""
    for base in BASES:
        _check(live, errors, json.dumps(base).encode())
