"""`preflight-webhook capabilities`: what the webhook may see on this cluster, per check.

Runs the same start-up probe as the server (discovery + SelfSubjectAccessReviews with
the caller's credentials) and prints every check with value (yes | no | unknown),
source (probed | declared) and reason — the same data as GET /capabilities.
`--rbac` prints the RBAC rules the webhook needs, without contacting a cluster: the ClusterRole's
rules and, for the settings (`--config`), the Roles of its named reads, one per namespace.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, TextIO

import yaml

from webhook.checks import all_checks, check_names
from webhook.config import ConfigError, load_settings


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "capabilities",
        help="show which checks can run on a cluster (permissions and served APIs)",
        description=(
            "Probe the cluster as the webhook does at start-up (discovery and SelfSubjectAccessReviews "
            "with the current credentials) and list every check with value yes|no|unknown, "
            "source probed|declared and the reason a check would be skipped."
        ),
    )
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--config", metavar="FILE", help="webhook settings file (YAML)")
    p.add_argument("-o", "--output", choices=["text", "json"], default="text", help="output format (default: text)")
    p.add_argument(
        "--wait", type=float, default=30.0, metavar="SECONDS", help="longest wait for the probe (default: 30)"
    )
    p.add_argument(
        "--rbac",
        action="store_true",
        help="print the RBAC rules the webhook needs (ClusterRole rules; Roles of the named reads of --config) "
        "and exit (no cluster access)",
    )
    return p


def run(args: argparse.Namespace) -> int:
    out, err = sys.stdout, sys.stderr
    try:
        settings = load_settings(args.config, known_checks=check_names())
    except ConfigError as exc:
        print(f"error: {exc}", file=err)
        return 2
    if args.rbac:
        return _print_rbac(args.output, settings, out)
    return asyncio.run(_probe(args, settings, out, err))


def _print_rbac(fmt: str, settings: Any, out: TextIO) -> int:
    from webhook.cluster.capabilities import named_permissions, rbac_roles, rbac_rules, required_permissions

    perms = required_permissions(all_checks())
    named = named_permissions(all_checks(), settings)
    if fmt == "json":
        doc = {
            "permissions": [str(p) for p in perms],
            "rules": rbac_rules(perms),
            "namedPermissions": [str(p) for p in named],
            "roles": rbac_roles(named),
        }
        out.write(json.dumps(doc, indent=2) + "\n")
    else:
        out.write(yaml.safe_dump({"rules": rbac_rules(perms), "roles": rbac_roles(named)}, sort_keys=False))
    return 0


async def _probe(args: argparse.Namespace, settings: Any, out: TextIO, err: TextIO) -> int:
    from webhook.cluster.live import open_cluster_view

    try:
        view = await open_cluster_view(
            settings, kubeconfig=args.kubeconfig, checks=all_checks(), wait_seconds=args.wait
        )
    except Exception as exc:  # bad kubeconfig, no config at all: the user's input
        print(
            f"error: cannot connect to the cluster: {str(exc) or type(exc).__name__}. Fix: check --kubeconfig", file=err
        )
        return 1
    try:
        await view.wait_probed(max(0.0, args.wait))
        summary = view.capability_summary()
    finally:
        await view.close()
    if args.output == "json":
        out.write(json.dumps(summary, indent=2) + "\n")
    else:
        out.write(render_table(summary))
    return 0 if summary["probed"] else 1


def render_table(summary: dict[str, Any]) -> str:
    rows = [("CHECK", "VALUE", "SOURCE", "REASON")]
    rows += [(c["check"], c["value"], c["source"], c["reason"]) for c in summary["checks"]]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [
        "  ".join([r[0].ljust(widths[0]), r[1].ljust(widths[1]), r[2].ljust(widths[2]), r[3]]).rstrip() for r in rows
    ]
    ver = summary.get("serverVersion") or "unknown"
    lines.append("")
    lines.append(f"Kubernetes {ver}; {'ready' if summary['ready'] else 'not ready'}: {summary['reason']}")
    missing = summary.get("missingPermissions") or []
    if missing:
        lines.append("Missing permissions: " + ", ".join(missing))
    absent = [c for c in summary.get("caches", []) if not c.get("cached")]
    if absent:
        lines.append("Not cached: " + "; ".join(f"{c['resource']} ({c['reason']})" for c in absent))
    return "\n".join(lines) + "\n"
