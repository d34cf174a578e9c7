"""`preflight-webhook certs init`: a CA and a serving certificate for the webhook Service."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from webhook.tls import ca_bundle, generate_ca, generate_serving_cert, service_dns_names, write_cert_files


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "certs",
        help="generate webhook TLS certificates",
        description="Generate TLS material for the webhook (development, or clusters without cert-manager).",
    )
    certs_sub = p.add_subparsers(dest="certs_command", metavar="ACTION", required=True)
    init = certs_sub.add_parser(
        "init",
        help="create ca.crt, tls.crt and tls.key for a Service",
        description=(
            "Create a CA and a serving certificate whose SANs are the names the apiserver uses for the "
            "Service: NAME, NAME.NS, NAME.NS.svc, NAME.NS.svc.cluster.local. Writes ca.crt, tls.crt and "
            "tls.key (mode 0600) and prints the base64 caBundle for the ValidatingWebhookConfiguration."
        ),
    )
    init.add_argument("--service", required=True, metavar="NAME", help="the webhook's Service name")
    init.add_argument("--namespace", required=True, metavar="NS", help="the Service's namespace")
    init.add_argument("--out", default="certs", metavar="DIR", help="output directory (default: certs/)")
    init.add_argument("--days", type=int, default=365, help="serving certificate validity in days (default: 365)")
    init.add_argument("--ca-days", type=int, default=3650, help="CA validity in days (default: 3650)")
    init.add_argument("--dns", action="append", default=[], metavar="NAME", help="an extra DNS SAN (repeatable)")
    init.add_argument(
        "--ip", action="append", default=[], metavar="ADDR", help="an extra IP SAN, e.g. 127.0.0.1 (repeatable)"
    )
    init.add_argument("--force", action="store_true", help="overwrite existing files in DIR")
    init.set_defaults(func=run_init)
    from webhook.cli import certs_manage  # `certs manage`: the self-managed rotation loop

    certs_manage.add_parser(certs_sub)
    return p


def run(args: argparse.Namespace) -> int:
    """Dispatch for `certs`; each action sets its own `func`, so this only runs without one."""
    print("error: certs needs an action (init)", file=sys.stderr)
    return 2


def run_init(args: argparse.Namespace) -> int:
    out = Path(args.out)
    existing = [f for f in ("ca.crt", "tls.crt", "tls.key") if (out / f).exists()]
    if existing and not args.force:
        print(f"error: {out} already holds {', '.join(existing)}; pass --force to replace them", file=sys.stderr)
        return 2
    if args.days <= 0 or args.ca_days <= 0:
        print("error: --days and --ca-days must be positive", file=sys.stderr)
        return 2
    try:
        ca = generate_ca(days=args.ca_days)
        dns = service_dns_names(args.service, args.namespace) + list(args.dns)
        serving = generate_serving_cert(ca, dns, args.ip, days=args.days)
    except ValueError as exc:  # e.g. an invalid --ip
        print(f"error: {exc}", file=sys.stderr)
        return 2
    files = write_cert_files(out, ca, serving)
    print(f"wrote {files.ca_cert}, {files.cert}, {files.key} (SANs: {', '.join(dns + list(args.ip))})", file=sys.stderr)
    print("caBundle (base64, for the ValidatingWebhookConfiguration):", file=sys.stderr)
    print(ca_bundle(ca.cert_pem))
    return 0
