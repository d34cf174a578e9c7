"""The floor: an aiohttp TLS server whose POST /validate reads the body and answers a fixed JSON.

Same TLS settings (webhook.tls.server_context), same aiohttp, no parsing, no checks: what
the webhook costs on top of this is what our code costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from aiohttp import web

from webhook.tls import server_context

ANSWER = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"x","allowed":true}}'


async def validate(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=ANSWER, content_type="application/json")


async def readyz(request: web.Request) -> web.Response:
    return web.Response(body=b'{"ready":true}', content_type="application/json")


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls-cert", required=True)
    p.add_argument("--tls-key", required=True)
    args = p.parse_args()
    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post("/validate", validate)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", args.port, ssl_context=server_context(args.tls_cert, args.tls_key)).start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    if os.environ.get("PREFLIGHT_WEBHOOK_LOOP", "auto") != "asyncio":
        try:
            import uvloop

            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        except ImportError:
            pass
    asyncio.run(main())
