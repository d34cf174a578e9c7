"""Every private internal of a library, or of CPython, the webhook relies on: one place.

A private name can change in any release, a patch release included. Each one the webhook reads is
here, with where upstream defines it and what the webhook does where it is gone. tests/test_compat.py
holds one test per entry, so a release that drops or reshapes one fails there and names it (instead
of a hostile-client test or a metrics test failing in a way that hides why); constraints.txt pins the
versions those tests passed on (`make constraints`), and the image installs the same ones.
tests/test_compat.py also fails when a module outside this one reads another library's private name.

| internal | upstream | read by |
|---|---|---|
| `RequestHandler`'s hooks and members | aiohttp/web_protocol.py | webhook/listener.py `_Connection` |
| `web.Server._kwargs` | aiohttp/web_server.py | webhook/listener.py `WebhookServer.start` |
| `prometheus_client.metrics._use_created` | prometheus_client/metrics.py | webhook/metrics.py `LoopHistogram` |
| `os.environ._data` | CPython Lib/os.py `_Environ` | webhook/workloads/render_cache.py, aiperf/env.py |
| `yaml._yaml.CParser` | PyYAML yaml/_yaml.pyx (imported by yaml/cyaml.py, not in its `__all__`) | webhook/manifests.py |
| `ArgumentParser._actions` | CPython Lib/argparse.py `_ActionsContainer` | webhook/cli/__init__.py |

Type annotations only (never evaluated: `from __future__ import annotations`): webhook/cli's
`argparse._SubParsersAction`, the type typeshed gives `add_subparsers()`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import yaml

# aiohttp and prometheus_client are imported where they are read, not here: the kind packages import this
# module (environ_key), and the oracles run them in a venv of AIPerf's own that has neither
if TYPE_CHECKING:
    from aiohttp import web
    from aiohttp.web_protocol import RequestHandler
else:

    def __getattr__(name: str) -> Any:
        if name == "RequestHandler":
            from aiohttp.web_protocol import RequestHandler

            return RequestHandler
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


try:  # libyaml's event parser, when PyYAML was built with it
    from yaml._yaml import CParser as YamlEventParser

    LIBYAML = True
except ImportError:  # pragma: no cover - PyYAML without libyaml: the pure-Python parser gives the same events
    YamlEventParser = yaml.SafeLoader  # type: ignore[assignment,misc]
    LIBYAML = False

__all__ = [
    "RequestHandler",
    "RequestHandlerHooks",
    "server_protocol_kwargs",
    "prometheus_created_series",
    "environ_key",
    "YamlEventParser",
    "LIBYAML",
    "parser_dests",
]

#: aiohttp/web_protocol.py RequestHandler: aiohttp.web exports the class, but not what a subclass may
#: override. webhook/listener.py's `_Connection` overrides these hooks (name → parameters after self) to
#: bound heads, bodies and idle connections, and calls `force_close()` and reads `transport` and `_loop`.
RequestHandlerHooks: dict[str, list[str]] = {
    "connection_made": ["transport"],
    "connection_lost": ["exc"],
    "data_received": ["data"],
    "finish_response": ["request", "resp", "start_time"],
    "handle_error": ["request", "status", "exc", "message"],
}


def server_protocol_kwargs(server: web.Server) -> dict[str, Any]:
    """The keyword arguments aiohttp's own web.Server gives each RequestHandler it makes (keepalive
    timeout, access log, limits): aiohttp/web_server.py `Server.__init__` keeps them in `self._kwargs` and
    `Server.__call__` builds `RequestHandler(self, loop=self._loop, **self._kwargs)`. The listener builds
    its own protocol the same way."""
    return dict(server._kwargs)


def prometheus_created_series() -> bool:
    """Whether prometheus_client writes the `_created` samples: prometheus_client/metrics.py
    `_use_created`, False once PROMETHEUS_DISABLE_CREATED_SERIES is set or `disable_created_metrics()`
    ran. A collector of ours that renders a histogram follows it, or its exposition would differ from the
    library's own. Read at each call: those functions rebind the module's global. True where it is gone
    (prometheus_client's default)."""
    from prometheus_client import metrics as prometheus_metrics

    return bool(getattr(prometheus_metrics, "_use_created", True))


def environ_key() -> Hashable | None:
    """The process environment as CPython holds it, to compare with a previous one: Lib/os.py
    `_Environ._data`, the encoded names and values behind os.environ, as a tuple. Comparing it costs no
    decoding of every variable (a pod's environment holds several per Service in its namespace). None
    where os.environ has no such dict: the callers then decode os.environ itself."""
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):
        return None
    key = tuple(data.items())
    last = _ENVIRON_KEY[0]
    if last is not None and last == key:
        return last  # one tuple for every holder (each render cache entry keeps its key: 9,215 pairs at 256 renders)
    _ENVIRON_KEY[0] = key
    return key


#: the last environ_key() made, given back while the environment is unchanged
_ENVIRON_KEY: list[tuple[tuple[bytes, bytes], ...] | None] = [None]


def parser_dests(parser: argparse.ArgumentParser) -> set[str]:
    """The `dest` of every argument a parser has (Lib/argparse.py `_ActionsContainer._actions`: argparse
    has no public listing), so an option shared by subcommands is added once."""
    return {action.dest for action in parser._actions}
