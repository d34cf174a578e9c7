"""`preflight-webhook audit`: run the audit controller (re-checks the jobs that have not started)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
import uuid
from typing import TYPE_CHECKING

from webhook.checks import all_checks, check_names
from webhook.config import ConfigError, Settings, load_settings

if TYPE_CHECKING:
    from aiohttp import web

    from webhook.audit.runner import AuditRun

log = logging.getLogger("webhook.audit")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "audit",
        help="run the audit controller: re-check waiting jobs, write Events (and reports) on them",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Judge every AIPerfJob, AIPerfSweep and TrainJob that has not started yet (a TrainJob\n"
            "suspended, waiting in Kueue or without its JobSet; an AIPerfJob Pending or Queued; an\n"
            "unfinished AIPerfSweep) with the webhook's own checks and policy, and judge it again when\n"
            "the job changes, when something it read changes (a Secret, ConfigMap, quota, queue,\n"
            "runtime, ...), and every audit.periodSeconds. Running and finished jobs are not judged.\n"
            "\n"
            "Findings go on the job as Events: PreflightFailed (Warning, the webhook's text and fix)\n"
            "and PreflightPassed (Normal, when a failing job is good again), only when the result\n"
            "changes. Replicas elect a leader through a coordination.k8s.io Lease (audit.leaseName);\n"
            "only the leader judges and writes. Settings: the `audit` section of --config\n"
            "(docs/configuration.md); behaviour: docs/audit.md; the rollout: docs/rollout.md.\n"
            "SIGTERM: the Lease is released and the process exits."
        ),
    )
    p.add_argument(
        "--config", metavar="FILE", help="YAML configuration (see docs/configuration.md); default: all defaults"
    )
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig to use (default: in-cluster, then ~/.kube/config)")
    p.add_argument(
        "--identity",
        metavar="NAME",
        help="this replica's name in the Lease (default: $POD_NAME, else hostname_<random>)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=9090,
        metavar="PORT",
        help="serve /metrics (Prometheus) and /healthz over HTTP on this port (default: 9090; 0: off)",
    )
    p.add_argument("--metrics-host", default="0.0.0.0", metavar="ADDR", help="address for --metrics-port")
    return p


def default_identity() -> str:
    """client-go's advice: the hostname plus a unique part, so a restarted replica is a new candidate."""
    pod = (os.environ.get("POD_NAME") or "").strip()
    return pod or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def run(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.config, known_checks=check_names())
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(
            _run(settings, args.kubeconfig, args.identity or default_identity(), args.metrics_host, args.metrics_port)
        )
    except KeyboardInterrupt:
        return 130


async def _metrics_server(run: AuditRun, host: str, port: int) -> web.AppRunner:
    """/metrics (the audit metrics' registry) and /healthz (200 while the process runs: only the leader
    judges, so a follower is healthy too) over plain HTTP; what a Prometheus scrape needs."""
    from aiohttp import web
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    registry = run.metrics.registry

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    log.info("audit: metrics on http://%s:%d/metrics", host, port)
    return runner


async def _run(settings: Settings, kubeconfig: str | None, identity: str, host: str, port: int) -> int:
    from webhook.audit.runner import AuditRun

    try:
        run = await AuditRun.start(settings, kubeconfig=kubeconfig, identity=identity, checks=all_checks())
    except Exception as exc:
        log.error("cannot connect to the cluster: %s: %s", type(exc).__name__, exc)
        print("error: cannot connect to the cluster; check --kubeconfig", file=sys.stderr)
        return 1
    server = None
    if port:
        try:
            server = await _metrics_server(run, host, port)
        except OSError as exc:
            await run.stop()
            print(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await run.stop()
    if server is not None:
        await server.cleanup()
    return 0
