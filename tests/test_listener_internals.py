"""What webhook/listener.py uses of aiohttp beyond its public API, pinned.

The listener subclasses aiohttp's per-connection protocol (aiohttp.web_protocol.RequestHandler) to
bound heads, bodies and idle connections per connection, and builds it with the keyword arguments
aiohttp's own web.Server would pass (`Server._kwargs`). Neither is public API. pyproject.toml allows
aiohttp >=3.9,<4; should a release change any of these, this file fails first and names what moved,
instead of a hostile-client test failing in a way that hides why.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from webhook.listener import _Connection


def _params(func: Any) -> list[str]:
    return [p for p in inspect.signature(func).parameters if p != "self"]


def test_the_overridden_hooks_keep_their_signatures() -> None:
    expected = {
        "connection_made": ["transport"],
        "connection_lost": ["exc"],
        "data_received": ["data"],
        "finish_response": ["request", "resp", "start_time"],
        "handle_error": ["request", "status", "exc", "message"],
    }
    for name, params in expected.items():
        assert _params(getattr(RequestHandler, name)) == params, name
        assert _params(getattr(_Connection, name)) == params, name  # ours overrides the same shape


def test_the_members_used_exist() -> None:
    # called or read on the base class from _Connection
    for name in ("force_close", "transport"):
        assert hasattr(RequestHandler, name), name
    first = inspect.signature(RequestHandler.__init__).parameters
    assert list(first)[1] == "manager" and first["loop"].kind is inspect.Parameter.KEYWORD_ONLY


async def test_web_server_keeps_the_protocol_kwargs() -> None:
    async def ok(request: web.BaseRequest) -> web.StreamResponse:
        return web.Response()

    server = web.Server(ok, keepalive_timeout=7.5)
    kwargs = server._kwargs
    assert isinstance(kwargs, dict) and kwargs["keepalive_timeout"] == 7.5
    # what the listener's factory builds: aiohttp's protocol with exactly those arguments
    loop = asyncio.get_running_loop()
    handler = _Connection.__mro__[1](server, loop=loop, **kwargs)
    assert isinstance(handler, RequestHandler)
    assert handler._loop is loop  # the timers of _Connection._arm run on it
