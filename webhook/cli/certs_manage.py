"""`preflight-webhook certs manage`: the self-managed certificate loop (its own Deployment).

It runs apart from the serving replicas on purpose: the serving ServiceAccount never
writes (a ValidatingAdmissionPolicy refuses its non-dry-run requests), while this one may
write exactly one Secret and one ValidatingWebhookConfiguration (RBAC resourceNames).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from pathlib import Path

from webhook.certmanager import CertManager, KubeCertStore, RotationSettings, parse_secret_ref
from webhook.tls import service_dns_names


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Register `manage` under the `certs` sub-command."""
    p = sub.add_parser(
        "manage",
        help="keep the webhook's CA and serving certificate in a Secret, rotate them, inject the caBundle",
        description=__doc__,
    )
    p.add_argument("--secret", required=True, metavar="NS/NAME", help="the Secret holding the CA and serving pair")
    p.add_argument("--webhook-config", required=True, metavar="NAME", help="ValidatingWebhookConfiguration to inject")
    p.add_argument("--service", required=True, help="Service name the apiserver calls (certificate DNS names)")
    p.add_argument("--namespace", required=True, help="namespace of the Service")
    p.add_argument("--ip-address", action="append", default=[], metavar="IP", help="extra IP SAN (repeatable)")
    p.add_argument("--validity-days", type=float, default=365.0, help="lifetime of the CA and serving cert (365)")
    p.add_argument(
        "--renew-before-days", type=float, default=30.0, help="start a rotation this long before expiry (30)"
    )
    p.add_argument(
        "--bundle-propagation-seconds",
        type=float,
        default=30.0,
        help="wait between adding the new CA to the caBundle and serving a certificate from it (30)",
    )
    p.add_argument(
        "--cert-propagation-seconds",
        type=float,
        default=180.0,
        help="wait after switching the certificate before dropping the old CA: every replica must have reloaded (180)",
    )
    p.add_argument(
        "--check-interval", type=float, default=60.0, help="seconds between checks; repairs caBundle drift (60)"
    )
    p.add_argument(
        "--write-dir", type=Path, help="also mirror tls.crt, tls.key and ca.crt (bundle) into this directory"
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG)")
    p.add_argument("--once", action="store_true", help="reconcile once and exit")
    p.set_defaults(func=run)
    return p


async def _api_client(kubeconfig: str | None):  # type: ignore[no-untyped-def]
    from kubernetes_asyncio import client, config

    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        return client.ApiClient()
    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig or os.environ.get("KUBECONFIG"), client_configuration=cfg)
    return client.ApiClient(configuration=cfg)


async def _main(args: argparse.Namespace) -> int:
    ns, name = parse_secret_ref(args.secret)
    settings = RotationSettings(
        dns_names=tuple(service_dns_names(args.service, args.namespace)),
        ip_addresses=tuple(args.ip_address),
        validity_days=args.validity_days,
        renew_before_days=args.renew_before_days,
        bundle_propagation_seconds=args.bundle_propagation_seconds,
        cert_propagation_seconds=args.cert_propagation_seconds,
    )
    api = await _api_client(args.kubeconfig)
    async with api:
        mgr = CertManager(KubeCertStore(api), ns, name, args.webhook_config, settings, write_dir=args.write_dir)
        if args.once:
            res = await mgr.reconcile()
            logging.getLogger(__name__).info("step %s; next check due %s", res.step, res.next_due)
            return 0
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await mgr.run(args.check_interval, stop)
    return 0


def run(args: argparse.Namespace) -> int:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        RotationSettings(("x",), validity_days=args.validity_days, renew_before_days=args.renew_before_days)
        parse_secret_ref(args.secret)
    except ValueError as exc:
        raise SystemExit(f"preflight-webhook certs manage: {exc}") from None
    return asyncio.run(_main(args))
