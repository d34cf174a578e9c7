"""`preflight-webhook serve`: run the admission webhook over HTTPS."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import signal
import ssl
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook.checks import all_checks, check_names
from webhook.config import ConfigError, Settings, load_settings

if TYPE_CHECKING:
    from webhook.cluster.live import LiveClusterView
    from webhook.metrics import Metrics

log = logging.getLogger("webhook.serve")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve",
        help="run the validating admission webhook (HTTPS)",
        description=(
            "Serve POST /validate (AdmissionReview v1), /healthz, /readyz, /metrics and /capabilities over "
            "TLS (and, with --metrics-port, /metrics alone over plain HTTP). The certificate and key are reloaded when the files change. SIGTERM: readiness goes false, "
            "in-flight requests finish (bounded by drainSeconds), then the process exits."
        ),
    )
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default: 0.0.0.0)")
    p.add_argument("--port", type=int, default=8443, help="port to listen on (default: 8443)")
    p.add_argument("--tls-cert", metavar="FILE", help="PEM certificate (chain) to serve")
    p.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")
    p.add_argument(
        "--self-signed",
        action="store_true",
        help="generate a CA and serving certificate into --certs-dir and print the base64 caBundle (development)",
    )
    p.add_argument("--certs-dir", default="certs", metavar="DIR", help="where --self-signed writes (default: certs/)")
    p.add_argument(
        "--san",
        action="append",
        default=[],
        metavar="NAME|IP",
        help="extra SAN for --self-signed, besides localhost, 127.0.0.1 and ::1 (repeatable)",
    )
    p.add_argument(
        "--cert-reload-seconds",
        type=float,
        default=10.0,
        metavar="S",
        help="how often the certificate files are checked for changes (default: 10)",
    )
    p.add_argument(
        "--config", metavar="FILE", help="YAML configuration (see docs/configuration.md); default: all defaults"
    )
    p.add_argument("--offline", action="store_true", help="run without a cluster: cluster-backed checks are skipped")
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig to use (default: in-cluster, then ~/.kube/config)")
    p.add_argument("--access-log", action="store_true", help="log every HTTP request (aiohttp access log)")
    p.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        metavar="PORT",
        help="also serve GET /metrics (only) over plain HTTP on this port, for Prometheus (default 0: off; "
        "/metrics on the TLS port stays)",
    )
    p.add_argument("--metrics-host", metavar="ADDR", help="address of the --metrics-port listener (default: --host)")
    return p


def _error(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _self_signed(certs_dir: str, sans: list[str]) -> tuple[Path, Path]:
    from webhook.tls import ca_bundle, generate_ca, generate_serving_cert, write_cert_files

    dns, ips = ["localhost"], ["127.0.0.1", "::1"]
    for san in sans:
        try:
            ipaddress.ip_address(san)
            ips.append(san)
        except ValueError:
            dns.append(san)
    ca = generate_ca()
    files = write_cert_files(certs_dir, ca, generate_serving_cert(ca, dns, ips))
    print(f"self-signed certificate for {', '.join(dns + ips)} written to {certs_dir}/", file=sys.stderr)
    print("caBundle (base64):", file=sys.stderr)
    print(ca_bundle(ca.cert_pem), flush=True)
    return files.cert, files.key


def run(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.config, known_checks=check_names())
    except ConfigError as exc:
        return _error(str(exc))
    if args.self_signed:
        if args.tls_cert or args.tls_key:
            return _error("--self-signed generates its own certificate; do not combine it with --tls-cert/--tls-key")
        cert, key = _self_signed(args.certs_dir, args.san)
    elif args.tls_cert and args.tls_key:
        cert, key = Path(args.tls_cert), Path(args.tls_key)
    else:
        return _error("serve needs --tls-cert FILE and --tls-key FILE, or --self-signed for development")

    from webhook.tls import CertReloader, server_context

    try:
        ctx = server_context(cert, key)
    except (OSError, ssl.SSLError) as exc:
        return _error(f"cannot load the TLS certificate {cert} and key {key}: {exc}")
    client_ca = settings.client_auth.ca_file
    if client_ca:
        try:
            ctx = server_context(cert, key, client_ca)
        except (OSError, ssl.SSLError) as exc:
            return _error(f"cannot load the client CA {client_ca} (clientAuth.caFile): {exc}")
    reloader = CertReloader(ctx, cert, key, interval=args.cert_reload_seconds)
    try:
        reloader.load_initial()
    except (OSError, ssl.SSLError) as exc:
        return _error(str(exc))

    _install_uvloop()
    return asyncio.run(_serve(args, settings, ctx, reloader))


def _install_uvloop() -> None:
    """uvloop when installed (the `fast` extra); see docs/benchmarks.md for what it buys."""
    import os

    if os.environ.get("PREFLIGHT_WEBHOOK_LOOP", "auto") == "asyncio":
        return
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def _freeze_startup_objects() -> None:
    """Move what start-up built (modules, schemas, the synced caches) out of the cyclic collector's way.

    Without it every full collection walks all of them, once every few hundred reviews, which
    lands in the p99 (docs/benchmarks.md has the measurement). Reference counting still frees frozen objects
    (a cache entry that is replaced goes away as before). The adapters are imported first,
    as they otherwise load on the first review. Then generation 0 is given room for the reviews in flight
    (webhook.heap.tune_collector).
    """
    import gc

    from webhook.heap import tune_collector
    from webhook.workloads import import_adapters

    import_adapters()
    gc.collect()
    gc.freeze()
    tune_collector()


async def _serve(args: argparse.Namespace, settings: Settings, ctx: ssl.SSLContext, reloader: Any) -> int:
    """Serve until SIGTERM or SIGINT: the cluster view, the metrics, the TLS listener and the /metrics one;
    1 when one of them cannot start."""
    from webhook.listener import WebhookServer
    from webhook.server import WebhookApp

    view = None
    if not args.offline:
        view = await _open_view(args, settings)
        if view is None:
            return 1
    metrics = _metrics(view, reloader)
    webhook = WebhookApp(settings, view=view, metrics=metrics)
    server = WebhookServer(
        webhook, ssl_context=ctx, host=args.host, port=args.port, reloader=reloader, access_log=args.access_log
    )
    try:
        await server.start()
    except OSError as exc:
        if view is not None:
            await view.close()
        return _error(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")

    metrics_runner = None
    if args.metrics_port:
        host = args.metrics_host or args.host
        try:
            metrics_runner = await start_metrics_listener(metrics, host, args.metrics_port)
        except OSError as exc:
            await server.shutdown()
            if view is not None:
                await view.close()
            return _error(f"cannot listen on {host}:{args.metrics_port} (--metrics-port): {exc.strerror or exc}")
        log.info("serving /metrics over plain HTTP on %s:%d", host, args.metrics_port)

    _freeze_startup_objects()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(server.shutdown()))
    await server.wait_stopped()
    if metrics_runner is not None:
        await metrics_runner.cleanup()
    if view is not None:
        await view.close()
    return 0


async def _open_view(args: argparse.Namespace, settings: Settings) -> LiveClusterView | None:
    """The live cluster view, its lists read; None (the error logged and printed) when the cluster cannot be reached."""
    from webhook.cluster.live import open_cluster_view

    try:
        return await open_cluster_view(
            settings, kubeconfig=args.kubeconfig, checks=all_checks(), freeze_after_lists=True
        )
    except Exception as exc:
        log.error("cannot connect to the cluster: %s: %s", type(exc).__name__, exc)
        print("error: cannot connect to the cluster; check --kubeconfig, or pass --offline", file=sys.stderr)
        return None


def _metrics(view: LiveClusterView | None, reloader: Any) -> Metrics:
    """The webhook's Metrics, following the view's cache ages and the certificate reloader's reloads."""
    from webhook.metrics import Metrics
    from webhook.workloads import known_kinds

    metrics = Metrics(
        known_kinds=known_kinds(), unverified=[(c.name, what) for c in all_checks() for what, _ in c.unverified]
    )
    if view is not None:
        live_view = view
        resources = sorted(getattr(view, "reflectors", {}))
        metrics.track_caches(lambda: [(r, live_view.cache_age(r)) for r in resources])

    def on_reload(info: Any) -> None:
        metrics.cert_reloads.labels("ok").inc()
        metrics.cert_expiry.set(info.not_after.timestamp())

    reloader.on_reload = on_reload
    reloader.on_error = lambda exc: metrics.cert_reloads.labels("error").inc()
    if reloader.info is not None:
        metrics.cert_expiry.set(reloader.info.not_after.timestamp())
    return metrics


async def start_metrics_listener(metrics: Any, host: str, port: int) -> Any:
    """The plain-HTTP /metrics listener (webhook.server.metrics_app); returns its aiohttp AppRunner."""
    from aiohttp import web

    from webhook.server import metrics_app

    runner = web.AppRunner(metrics_app(metrics), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError:
        await runner.cleanup()
        raise
    return runner
