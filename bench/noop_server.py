"""The floor: an aiohttp TLS server whose POST /validate reads the body and allows it.

Same TLS settings (webhook.tls.server_context), same aiohttp, no checks: what the webhook
costs on top of this is what our code costs. The answer is fixed, except that with
``--echo-uid`` the request's uid is parsed out of the review and echoed (the apiserver
rejects an answer whose uid differs: bench/apply_latency.py registers this server with the
apiserver). ``/metrics`` counts the reviews answered as ``preflight_webhook_requests_total``,
the counter e2e/harness/runner.py's registration probe watches.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

from aiohttp import web

from webhook.tls import server_context

ANSWER = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"x","allowed":true}}'


ECHO_UID = False
ANSWERED = [0]


async def validate(request: web.Request) -> web.Response:
    body = await request.read()
    ANSWERED[0] += 1
    if not ECHO_UID:
        return web.Response(body=ANSWER, content_type="application/json")
    uid = json.loads(body)["request"]["uid"]
    answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": uid, "allowed": True}}
    return web.Response(body=json.dumps(answer).encode(), content_type="application/json")


async def metrics(request: web.Request) -> web.Response:
    return web.Response(text=f"preflight_webhook_requests_total {ANSWERED[0]}\n", content_type="text/plain")


async def readyz(request: web.Request) -> web.Response:
    return web.Response(body=b'{"ready":true}', content_type="application/json")


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1", help="0.0.0.0 in a pod (bench/apply_latency.py --on node)")
    p.add_argument("--tls-cert", required=True)
    p.add_argument("--tls-key", required=True)
    p.add_argument("--echo-uid", action="store_true", help="answer with the review's uid (behind an apiserver)")
    args = p.parse_args()
    global ECHO_UID
    ECHO_UID = args.echo_uid
    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post("/validate", validate)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/healthz", readyz)  # the chart's liveness probe (bench/apply_latency.py --on node)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.port, ssl_context=server_context(args.tls_cert, args.tls_key)).start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    if os.environ.get("PREFLIGHT_WEBHOOK_LOOP", "auto") != "asyncio":
        try:
            import uvloop

            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        except ImportError:
            pass
    asyncio.run(main())
