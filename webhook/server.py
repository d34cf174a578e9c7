"""The HTTPS server: POST /validate, GET /healthz /readyz /metrics /capabilities.

Handlers stay free of policy: /validate parses the envelope (webhook.admission), hands
the object to webhook.preflight.evaluate (the same path the CLI uses) and renders the
decision. Error contract:

- the client's mistakes are 4xx with a JSON body `{"error": "..."}` naming what is
  wrong: 400 (invalid JSON, not an AdmissionReview, a body its Content-Encoding cannot
  decode, a malformed request head), 408 (the body did not arrive within
  bodyTimeoutSeconds), 413 (body over maxBodyBytes, as sent or once inflated: a
  compressed body is inflated in steps and never past the limit, see `inflate`), 415
  (content type is not application/json, or a Content-Encoding other than gzip or deflate). Never a 5xx for a client's mistake. An error that leaves the body
  unread or unreadable ends the connection, and its answer says `Connection: close`.
- every refused request leaves one line in the log (`rejected request: HTTP <status>:
  <reason>`), and every judged one one decision line, answered from the envelope's head
  or not; no traceback for a client's mistake.
- an object the adapter cannot read at all is the OBJECT's problem, not the review's:
  HTTP 200 with allowed=false, status 403 and the reason (evaluate's decision, written by
  webhook.policy.unreadable).
- our own bugs FAIL OPEN: any unexpected exception while judging a well-formed review
  becomes allowed=true with a warning naming the internal error, is logged (without
  the exception text, which could quote object content) and counted as decision
  "error". A webhook bug must not block every job in the cluster; the warning and the
  metric make it visible.

Shutdown (SIGTERM): readiness goes false at once, the listener closes, open connections
get up to Settings.drain_seconds to finish what they carry (a body still arriving is
read and answered; answers say `Connection: close`), then the process exits. Pair it
with a preStop sleep so endpoints stop routing to the pod before SIGTERM arrives.
Slow clients are bounded per connection (head, body and idle timeouts, maxConnections):
see webhook.listener (WebhookServer, _Connection).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import logging
import os
import time
import traceback
import zlib
from collections.abc import Callable
from typing import Any

from aiohttp import web

from webhook.admission import (
    AdmissionRequest,
    AdmissionReview,
    ReviewError,
    estimate_values,
    parse_review_bytes,
    peek_envelope,
    response_from_decision,
    review_response,
    split_old_object,
)
from webhook.checkmemo import CheckMemo
from webhook.checks import all_checks
from webhook.checks.base import Check, describe
from webhook.cluster.view import ClusterView
from webhook.config import Settings
from webhook.deadline import RENDER_SHARE, Deadline, budget_seconds, parse_go_duration
from webhook.heap import loads_untracked
from webhook.jsonslices import loads_sliced
from webhook.metrics import Metrics
from webhook.policy import Outcome, clip
from webhook.preflight import (
    Progress,
    busy_evaluation,
    cut_short_evaluation,
    evaluate,
    oversize_text,
    too_large_evaluation,
)
from webhook.workloads import known_kinds
from webhook.workloads.kinds import kinds

log = logging.getLogger("webhook.server")
decision_log = logging.getLogger("webhook.decisions")

JSON = "application/json"

#: the most concatenated gzip members one body may hold (aiohttp's own cap, compression_utils)
MAX_MEMBERS = 1024
#: a compressed body is inflated this many bytes at a time, the loop getting a turn between two (~0.3 ms of
#: CPU each): a 1 MB gzip body can inflate to 1 GiB, which in one call held the loop for seconds
INFLATE_CHUNK = 256 * 1024
#: the Content-Encodings /validate decodes (the apiserver sends none); zlib's window bits for each
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class BodyError(Exception):
    """A request body that cannot be decoded as its headers say: (HTTP status, the reason for the client)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def inflate(body: bytes, encoding: str, limit: int, *, chunk: int = INFLATE_CHUNK) -> bytes:
    """`body` decoded from its Content-Encoding, `chunk` bytes at a time, and never more than `limit` bytes.

    Each step inflates at most `chunk` bytes, then yields to the event loop, so a small compressed
    body that inflates to gigabytes costs the loop a fraction of a millisecond at a time and stops
    one chunk past `limit` (maxBodyBytes: 413). Concatenated gzip members are decoded in turn, at most
    MAX_MEMBERS of them. Raises BodyError (400: not the encoding it claims; 413: over the limit; 415:
    an encoding we do not decode)."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return body
    wbits = _WBITS.get(name)
    if wbits is None:
        raise BodyError(415, f"Content-Encoding {_clip(encoding, 40)!r} is not supported; send gzip, deflate or none")
    if name == "deflate" and body and body[0] & 0xF != 8:
        wbits = -zlib.MAX_WBITS  # raw deflate without the zlib header, as aiohttp (and browsers) accept it
    out = bytearray()
    members = 1
    d = zlib.decompressobj(wbits)
    pending = body
    try:
        while True:
            piece = d.decompress(pending, chunk)
            pending = d.unconsumed_tail
            out += piece
            if len(out) > limit:
                raise BodyError(
                    413,
                    f"the request body inflates to more than the limit of {limit} bytes (maxBodyBytes; "
                    f"Content-Encoding {name}); it was not decoded further",
                )
            if d.eof:
                rest = d.unused_data
                if not rest or name == "deflate":
                    break
                members += 1
                if members > MAX_MEMBERS:
                    raise BodyError(
                        400,
                        f"the request body has more {name} members than the {MAX_MEMBERS} the server decodes; "
                        "compress it as one",
                    )
                d, pending = zlib.decompressobj(wbits), rest
            elif not pending and not piece:
                break  # the input ended before the stream did: truncated
            await asyncio.sleep(0)
        if not d.eof:
            raise zlib.error("truncated")
    except zlib.error:
        raise BodyError(400, f"the request body is not valid {name}, as its Content-Encoding says it is") from None
    return bytes(out)


class BodyTimeout(Exception):
    """Raised into a request body's stream (by the listener) when the body did not arrive in time.

    The handler reading the body answers 408 with `Connection: close`, and logs one line.
    """

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the request body did not arrive within {seconds:g}s (bodyTimeoutSeconds)")


#: kinds whose one object renders many objects (an AIPerfSweep: up to 200 child AIPerfJobs), read off the loop
#: (KindSpec.renders_many)
RENDERS_MANY = frozenset(s.kind for s in kinds() if s.renders_many)

#: the body bytes of large reviews (over GATED_BYTES) judged at once; more wait their turn in order (one
#: heavier than this goes alone). Memory is not what binds: three 600 KB sweeps peak at ~125 MiB
#: (bench/worst_at_once.py). CPU is: their renders and pod specs (17 MB of JSON each for a 14,000-entry env)
#: shared one loop and two cores, and a Secrets read that could deny missed its deadline in 1 of 2 reviews
#: (e2e/test_hostile.py). With 1 MiB one such review is judged at a time; the others wait, then 503
LARGE_REVIEW_BYTES = 1 * 2**20
#: what a 503 asks the apiserver to wait before it tries again (client-go retries a 5xx with Retry-After
#: within the webhook's timeoutSeconds; through a Service the next try may reach another replica)
RETRY_AFTER_SECONDS = 1


class ByteGate:
    """A first-come, first-served semaphore weighted by body bytes: the large reviews judged at once.

    A review heavier than the whole capacity is let through alone. `acquire` gives up after `timeout`
    seconds (False): the server then answers without judging (WebhookApp._busy)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self, weight: int, timeout: float) -> bool:
        weight = min(weight, self.capacity)
        if not self._waiters and self.used + weight <= self.capacity:
            self.used += weight
            return True
        entry = (weight, asyncio.get_running_loop().create_future())
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(max(0.0, timeout)):
                await entry[1]
            return True
        except TimeoutError:
            if entry[1].done() and not entry[1].cancelled():  # granted as the time ran out: hand it back
                self.release(weight)
            return False
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)
                self._wake()  # a heavy review that gave up may have held back lighter ones behind it

    def release(self, weight: int) -> None:
        self.used -= min(weight, self.capacity)
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            weight, fut = self._waiters[0]
            if fut.done():
                self._waiters.popleft()
                continue
            if self.used + weight > self.capacity and self.used > 0:
                return
            self._waiters.popleft()
            self.used += weight
            fut.set_result(None)


# --------------------------------------------------------------------------- JSON codec


def _stdlib_dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


#: a body larger than this has its object walked and rendered in a worker thread (preflight.evaluate
#: off_loop): the sample AIPerfJob's review is ~12 KB and costs ~1 ms on the loop, a 256 KiB one ~20 ms,
#: and a 127 KiB JobSet of 2,000 containers held it 28-70 ms in one go (bench/worst_at_once.py)
OFF_LOOP_BYTES = 64 * 1024
#: a body larger than this is a large review: it takes its share of the byte gate (LARGE_REVIEW_BYTES)
GATED_BYTES = 256 * 1024


def json_codec(choice: str | None = None) -> tuple[Callable[[bytes], Any], Callable[[Any], bytes], str]:
    """(loads, dumps, name): stdlib json unless `PREFLIGHT_WEBHOOK_JSON=orjson` (benchmarking only).

    orjson does not pay for itself here (docs/benchmarks.md measures it)
    and it turns integers beyond 64 bits into floats, so stdlib json is the default.
    """
    choice = (choice or os.environ.get("PREFLIGHT_WEBHOOK_JSON") or "stdlib").lower()
    if choice == "orjson":
        import orjson

        return orjson.loads, orjson.dumps, "orjson"
    return json.loads, _stdlib_dumps, "stdlib"


async def read_review(body: bytes, loads: Callable[[bytes], Any], *, off_loop: bool) -> AdmissionReview:
    """The review in `body` (parse_review_bytes), as /validate reads it. `off_loop` (a large body): in a worker
    thread, which lets the loop run only between C calls, so the stdlib decoder reads it a slice at a time
    (webhook.jsonslices: one call over 1.5 MiB held the interpreter lock 50-160 ms), and with the cyclic
    collector kept out of it (webhook.heap.loads_untracked: the full collections that its containers set off
    held the lock for 140-460 ms each)."""
    if not off_loop:
        return parse_review_bytes(body, loads)
    decode = loads_sliced if loads is json.loads else loads  # orjson (benchmarking only) reads it whole
    return await asyncio.to_thread(loads_untracked, lambda b: parse_review_bytes(b, decode), body)


# --------------------------------------------------------------------------- the app


class WebhookApp:
    """The aiohttp application and the state its handlers share (one per server)."""

    def __init__(
        self,
        settings: Settings,
        *,
        view: ClusterView | None = None,
        metrics: Metrics | None = None,
        checks: list[Check] | None = None,
        json_choice: str | None = None,
        large_review_bytes: int = LARGE_REVIEW_BYTES,
    ) -> None:
        self.settings = settings
        self.large_reviews = ByteGate(large_review_bytes)
        self.view = view
        self.checks = all_checks() if checks is None else list(checks)
        #: the synchronous checks' results kept for the same render and unchanged caches (webhook/checkmemo.py)
        self.memo = CheckMemo()
        self.kinds = frozenset(known_kinds())
        self.metrics = metrics or Metrics(known_kinds=sorted(self.kinds))
        self.loads, self.dumps, self.json_name = json_codec(json_choice)
        self.config_loaded = True
        self.tls_loaded = False
        self.draining = False
        self.app = web.Application(client_max_size=settings.max_body_bytes, middlewares=[self._json_errors])
        self.app.router.add_post("/validate", self.validate)
        self.app.router.add_get("/healthz", self.healthz)
        self.app.router.add_get("/readyz", self.readyz)
        self.app.router.add_get("/metrics", self.metrics_handler)
        self.app.router.add_get("/capabilities", self.capabilities)

    # ----------------------------------------------------------------- readiness

    def readiness(self) -> tuple[bool, str]:
        if self.draining:
            return False, "shutting down"
        if not self.tls_loaded:
            return False, "TLS material not loaded"
        if not self.config_loaded:
            return False, "configuration not loaded"
        if self.view is not None and not self.view.ready:
            return False, self.view.ready_reason or "cluster view not ready"
        return True, "ready"

    # ----------------------------------------------------------------- helpers

    def _json(self, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        return web.Response(body=self.dumps(data), status=status, content_type=JSON, headers=headers)

    def _client_error(self, status: int, message: str, started: float, *, close: bool = False) -> web.Response:
        """The client's mistake: one log line, counted as "invalid", a JSON 4xx.

        `close`: the connection cannot carry another request (its body was not read, or could
        not be): the answer says `Connection: close` and the connection ends after it.
        """
        self.metrics.observe_request("", "", Outcome.INVALID, time.perf_counter() - started)
        log.info("rejected request: HTTP %d: %s", status, message)
        response = self._json({"error": message}, status=status)
        if close:  # said in so many words: aiohttp leaves it out where HTTP/1.0 implies it
            response.headers["Connection"] = "close"
            response.force_close()
        return response

    @web.middleware
    async def _json_errors(self, request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
        """aiohttp's own 404/405/413 pages are text; answer every HTTP error in JSON instead."""
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            log.info(
                "rejected request: HTTP %d: %s (%s %s)", exc.status, exc.reason, request.method, _clip(request.raw_path)
            )
            headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
            return self._json({"error": exc.reason}, status=exc.status, headers=headers)

    # ----------------------------------------------------------------- /validate

    async def validate(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        self.metrics.in_flight.inc()
        try:
            return await self._validate(request, started)
        finally:
            self.metrics.in_flight.dec()

    async def _validate(self, request: web.Request, started: float) -> web.StreamResponse:
        if request.content_type != JSON:
            got = request.headers.get("Content-Type") or "none"
            return self._client_error(415, f"Content-Type must be application/json, not {got}", started)
        limit = self.settings.max_body_bytes
        # every error in reading the body ends the connection (close=True): the rest of the body
        # is unread or unreadable, so the next request on it could not be told apart
        if request.content_length is not None and request.content_length > limit:
            return self._client_error(
                413,
                f"request body of {request.content_length} bytes exceeds the limit of {limit} bytes (maxBodyBytes)",
                started,
                close=True,
            )
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return self._client_error(
                413, f"request body exceeds the limit of {limit} bytes (maxBodyBytes)", started, close=True
            )
        except web.RequestPayloadError as exc:  # the client's body, not our bug: 400, never a 5xx
            return self._client_error(400, _unreadable_body(exc, request), started, close=True)
        except BodyTimeout as exc:
            return self._client_error(408, str(exc), started, close=True)
        except ConnectionError:  # the connection ended mid-body (the client left, or the listener made room)
            self.metrics.observe_request("", "", Outcome.INVALID, time.perf_counter() - started)
            log.info("rejected request: the connection closed before the request body arrived; no answer sent")
            response = self._json({"error": "the connection closed before the request body arrived"}, status=400)
            response.force_close()
            return response  # unwritable: aiohttp drops it as a premature disconnection
        encoding = request.headers.get("Content-Encoding", "")
        if encoding:  # the listener leaves bodies encoded (auto_decompress off): inflated here, bounded
            try:
                body = await inflate(body, encoding, limit)
            except BodyError as exc:
                return self._client_error(exc.status, str(exc), started, close=True)
        too_big = self._too_big_to_parse(body, started)
        if too_big is not None:
            return too_big
        off_loop = len(body) > OFF_LOOP_BYTES
        s = self.settings
        timeout = parse_go_duration(request.query.get("timeout"))
        deadline = Deadline(budget_seconds(timeout, s.budget_seconds, s.safety_margin_seconds))
        weight = len(body) if len(body) > GATED_BYTES else 0
        # a large review waits for its share of memory at most RENDER_SHARE of its budget, keeping the rest
        # to be judged in; the wait counts against its deadline
        if weight and not await self.large_reviews.acquire(weight, deadline.budget * RENDER_SHARE):
            return self._busy(body, started)
        progress = Progress()
        try:
            return await self._review(body, started, deadline, off_loop, progress)
        finally:
            if weight:
                self._release_after(progress.running, weight)

    async def _review(
        self, body: bytes, started: float, deadline: Deadline, off_loop: bool, progress: Progress
    ) -> web.Response:
        try:
            review = await read_review(body, self.loads, off_loop=off_loop)
        except ReviewError as exc:
            return self._client_error(400, str(exc), started)

        req = review.request
        try:
            # a kind whose one object renders many is rendered off the loop at any size (a 20 KB sweep: 200
            # children, ~100 ms of CPU each review, held the loop 250 ms with 3 at once)
            many = off_loop or req.kind.kind in RENDERS_MANY
            answer, decision = await self._judge(req, deadline, off_loop=many, progress=progress)
        except Exception as exc:  # our bug: fail open, visibly
            answer, decision = self._fail_open(req, exc), Outcome.ERROR
        self.metrics.observe_request(req.kind.kind, req.operation, decision, time.perf_counter() - started)
        self._log_decision(req, decision, answer, started)
        return self._json(answer)

    def _release_after(self, running: concurrent.futures.Future[Any] | None, weight: int) -> None:
        """Give a large review's share back once its render has ended: a render cut short by the deadline
        goes on in its worker thread (it stops at its own share of the budget), holding its memory."""
        if running is None or running.done():
            self.large_reviews.release(weight)
            return
        loop = asyncio.get_running_loop()
        running.add_done_callback(lambda _: loop.call_soon_threadsafe(self.large_reviews.release, weight))

    def _busy(self, body: bytes, started: float) -> web.Response:
        """A large review that could not start within its share of the budget (too many at once).

        Never a silent allow. With timeoutAction deny it is denied as not verified (HTTP 200); otherwise it
        is HTTP 503 with Retry-After: the apiserver's webhook client retries a 5xx that carries Retry-After
        within timeoutSeconds (client-go rest/with_retry.go, IsNextRetry/checkWait), through the Service
        possibly on another replica, and when no try answers it applies failurePolicy to the call error
        (apiserver admission/plugin/webhook/validating/dispatcher.go: Fail refuses the request). A 200 "not
        verified" under timeoutAction warn would admit a job that would have been denied; a 503 lets a
        retry judge it. docs/sizing.md, "Large reviews at once"."""
        gate = self.large_reviews
        why = (
            f"not judged: this replica is judging {_mib(gate.used)} of other large reviews (the most it judges at "
            f"once is {_mib(gate.capacity)}) and {gate.waiting} more are waiting"
        )
        head = peek_envelope(body)
        if self.settings.timeout_action == "deny" and head is not None:
            stub = {"kind": head["kind"], "metadata": {"name": head["name"], "namespace": head["namespace"]}}
            ev = busy_evaluation(
                stub,
                f"{why}; its verdict is unknown. Fix: apply again in a moment",
                settings=self.settings,
                view=self.view,
                namespace=head["namespace"] or None,
            )
            return self._answer(response_from_decision(head["uid"], ev.decision), head, Outcome.BUSY, started)
        self.metrics.observe_request(head["kind"] if head else "", head["operation"] if head else "", Outcome.BUSY,
                                     time.perf_counter() - started)  # fmt: skip
        message = f"{why}; try again in {RETRY_AFTER_SECONDS}s"
        log.warning("rejected request: HTTP 503: %s", message)
        return self._json({"error": message}, status=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})

    def _too_big_to_parse(self, body: bytes, started: float) -> web.Response | None:
        """The answer to a body whose object is over objectLimits.maxBytes, or None (parse it as usual).

        etcd stores at most objectLimits.maxBytes of an object (its --max-request-bytes), so an
        object over it can never be stored, and parsing it would cost time and memory in proportion
        to its values (3 MiB of `[[],[],...]` is a million lists). Such a body is answered from the
        envelope's head without being parsed: the Object Size verdict, in preflight.oversize_text's
        words (the CLI's too) for `request.object` as the apiserver sent it, under
        objectLimits.action; or 413 when the head is not the apiserver's. The value estimate (at
        memchr speed) only agrees with the size: within maxBytes an object holds at most
        `maxBytes / 2 + 1` values (`0,` each). A body over only because of its oldObject (an UPDATE)
        is parsed and judged as usual, so the ratchet can compare the two.
        """
        limits = self.settings.object_limits
        most = 4 * limits.max_values
        if len(body) <= limits.max_bytes and estimate_values(body) <= most:
            return None
        new_part, old_part = split_old_object(body)
        new_values, old_values = estimate_values(new_part), estimate_values(old_part)

        def over(values: int, part: bytes) -> bool:
            return values > most or len(part) > limits.max_bytes

        head = peek_envelope(body)
        if head is None:  # not what the apiserver sends (request.uid first): no review to answer
            return self._client_error(
                413,
                f"the request body ({_mib(len(body))}, about {estimate_values(body)} JSON values) is larger than an "
                "AdmissionReview of an object within objectLimits, and does not start as the apiserver's do",
                started,
            )
        kind, operation = head["kind"], head["operation"]
        if operation in ("DELETE", "CONNECT") or kind not in self.kinds:
            # never judged: DELETE/CONNECT, and kinds without an adapter, are allowed untouched
            decision = Outcome.SKIPPED if operation in ("DELETE", "CONNECT") else Outcome.UNHANDLED
            return self._answer(review_response(head["uid"], allowed=True), head, decision, started)
        if not over(new_values, new_part):
            # the size is in the old object, stored before the bound (etcd keeps it under 1.5 MiB):
            # parsed and judged as usual, so the ratchet can compare the two
            return None
        problem = oversize_text(len(new_part), self.settings)  # over maxBytes: values ≤ bytes / 2
        stub = {"kind": kind, "metadata": {"name": head["name"], "namespace": head["namespace"]}}
        ev = too_large_evaluation(
            problem, settings=self.settings, obj=stub, view=self.view, namespace=head["namespace"] or None,
            preexisting=operation == "UPDATE" and over(old_values, old_part),
        )  # fmt: skip
        return self._answer(response_from_decision(head["uid"], ev.decision), head, ev.decision.outcome, started)

    def _answer(self, answer: dict[str, Any], head: dict[str, str], decision: Outcome, started: float) -> web.Response:
        """A decision made from the envelope's head alone (the body is not parsed): counted and logged."""
        kind, operation = head["kind"], head["operation"]
        self.metrics.observe_request(kind, operation, decision, time.perf_counter() - started)
        known = {"uid": head["uid"], "kind": kind, "namespace": head["namespace"], "name": head["name"]}
        self._log_fields(known | {"operation": operation, "dryRun": None, "user": None}, decision, answer, started)
        return self._json(answer)

    async def _judge(
        self, req: AdmissionRequest, deadline: Deadline, *, off_loop: bool = False, progress: Progress | None = None
    ) -> tuple[dict[str, Any], Outcome]:
        """(AdmissionReview answer, metrics decision label) for a well-formed request; `off_loop`: read the
        object in a worker thread (a large body: preflight.evaluate)."""
        if req.operation in ("DELETE", "CONNECT"):
            return review_response(req.uid, allowed=True), Outcome.SKIPPED
        s = self.settings
        self.metrics.budget.observe(deadline.budget)
        obj = req.object
        assert obj is not None  # the envelope model requires it for CREATE/UPDATE
        # the rest of the budget (a large review may have waited for its share) plus half the safety margin
        outer = asyncio.timeout(deadline.remaining() + s.safety_margin_seconds / 2)
        progress = progress or Progress()
        try:
            async with outer:
                ev = await evaluate(
                    obj,
                    settings=s,
                    deadline=deadline,
                    view=self.view,
                    operation=req.operation,
                    old_obj=req.old_object,
                    namespace=req.namespace or None,
                    checks=self.checks,
                    off_loop=off_loop,
                    within_limit=True,  # _too_big_to_parse measured the object as the apiserver wrote it
                    progress=progress,
                    memo=self.memo,
                )
        except TimeoutError:
            if not outer.expired():
                raise  # a TimeoutError of our own making: a bug, fails open
            # the deadline, noticed here rather than by a check: the failures found by then deny, the checks
            # still running are timed out by name, and timeoutAction decides about those (never a silent allow)
            ev = cut_short_evaluation(
                progress, obj, settings=s, deadline=deadline, view=self.view, namespace=req.namespace or None
            )
        self.metrics.observe_checks(ev.results.checks)
        return response_from_decision(req.uid, ev.decision), ev.decision.outcome

    def _fail_open(self, req: AdmissionRequest, exc: BaseException) -> dict[str, Any]:
        where = _where(exc)
        name = type(exc).__name__
        if isinstance(exc, TimeoutError):
            name = "timeout"
        # the exception's text is left out on purpose: it may quote object content
        log.error(
            "internal error while judging uid=%s kind=%s operation=%s: %s at %s; allowed (fail-open)\n%s",
            req.uid,
            req.kind.kind,
            req.operation,
            name,
            where,
            "".join(traceback.format_tb(exc.__traceback__)),
        )
        warning = clip(f"preflight-webhook internal error ({name} at {where}); the object was not checked")
        return review_response(req.uid, allowed=True, warnings=[warning], audit_annotations={"decision": "error"})

    def _log_decision(self, req: AdmissionRequest, decision: Outcome, answer: dict[str, Any], started: float) -> None:
        request = {
            "uid": req.uid,
            "kind": req.kind.kind,
            "namespace": req.namespace,
            "name": req.name or _meta(req.object, "name"),
            "operation": req.operation,
            "dryRun": req.dry_run,
            "user": req.user_info.username,
        }
        self._log_fields(request, decision, answer, started)

    def _log_fields(self, request: dict[str, Any], decision: Outcome, answer: dict[str, Any], started: float) -> None:
        """The one decision line of a review: denials and errors at info, the rest at debug."""
        level = logging.INFO if decision in (Outcome.DENIED, Outcome.ERROR) else logging.DEBUG
        if not decision_log.isEnabledFor(level):
            return
        resp = answer["response"]
        fields = {
            **request,
            "decision": decision,
            "allowed": resp["allowed"],
            "warnings": len(resp.get("warnings") or ()),
            "failedChecks": (resp.get("auditAnnotations") or {}).get("failed-checks", ""),
            "ms": round((time.perf_counter() - started) * 1000.0, 2),
        }
        decision_log.log(level, "admission decision", extra={"fields": fields})

    # ----------------------------------------------------------------- other endpoints

    async def healthz(self, request: web.Request) -> web.Response:
        return self._json({"ok": True})

    async def readyz(self, request: web.Request) -> web.Response:
        ok, reason = self.readiness()
        return self._json({"ready": ok, "reason": reason}, status=200 if ok else 503)

    async def metrics_handler(self, request: web.Request) -> web.Response:
        body, ctype = self.metrics.render()
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = ctype
        return resp

    async def capabilities(self, request: web.Request) -> web.Response:
        if self.view is not None:
            try:
                caps = self.view.capabilities()
            except Exception as exc:
                log.error("capabilities failed: %s", type(exc).__name__)
                return self._json({"error": f"capabilities unavailable ({type(exc).__name__})"}, status=503)
            return self._json(caps)
        out = []
        for check in self.checks:
            entry = describe(check)
            entry.update({"value": "unknown", "source": "declared", "reason": "offline"})
            out.append(entry)
        return self._json(out)


def metrics_app(metrics: Metrics) -> web.Application:
    """GET /metrics and nothing else, for a plain-HTTP listener of its own (`serve --metrics-port`):
    Prometheus scrapes it without a path through the webhook's TLS port, its connection limits or
    its client-certificate rule. The TLS port keeps /metrics too. Everything here is already public on
    the TLS port's /metrics (bounded labels, no object content: webhook.metrics)."""

    async def handler(request: web.Request) -> web.Response:
        body, ctype = metrics.render()
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = ctype
        return resp

    app = web.Application()
    app.router.add_get("/metrics", handler)
    return app


def _unreadable_body(exc: web.RequestPayloadError, request: web.Request) -> str:
    """Why a request body could not be read, in the client's terms (aiohttp's text names no content)."""
    return "the request body could not be read (truncated or malformed)"


def _clip(text: str, limit: int = 100) -> str:
    """A client-supplied string as a log line may carry it: at most `limit` characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _meta(obj: Any, key: str) -> str:
    if not isinstance(obj, dict):
        return ""
    meta = obj.get("metadata")
    value = meta.get(key) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else ""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _where(exc: BaseException) -> str:
    """`workloads/aiperf/jobset.py:123`: the innermost frame in our package (or the innermost frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "unknown"
    ours = [f for f in frames if f.filename.startswith(_PACKAGE_DIR)]
    if ours:
        return f"{ours[-1].filename[len(_PACKAGE_DIR) :]}:{ours[-1].lineno}"
    return f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}"


__all__ = ["BodyTimeout", "WebhookApp", "json_codec"]
