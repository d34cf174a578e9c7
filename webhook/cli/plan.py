"""`preflight-webhook plan`: what a job will create, as the checks see it.

Per pod group the replicas, containers and images, and per-pod requests/limits; the
Secrets, ServiceAccount and ConfigMaps the pods reference; and the objects the job's
controller derives (JobSet, run-config ConfigMap and its size). No cluster is needed:
TrainingRuntimes given in the same input are used as the TrainJob's runtime. With --cluster,
one pod per group is also dry-run on the cluster (as the Dry Run check does) and what its
admission chain changes in the pods is listed per group (docs/mutations.md).

Exit codes: 0 planned, 1 a document cannot be rendered (the reason is on stderr),
2 usage or input errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from webhook import quantity
from webhook.checks import all_checks, check_names
from webhook.cli.args import add_manifest_argument
from webhook.config import ConfigError, Settings, load_settings
from webhook.manifests import load_documents, split_runtimes
from webhook.results import Status
from webhook.workloads import build_workload
from webhook.workloads.aiperf_sweep import SweepWorkload
from webhook.workloads.base import AdapterError, Workload, text_bytes
from webhook.workloads.podspec import config_map_refs, pod_limits, pod_requests, secret_refs, service_account

EXIT_OK, EXIT_UNRENDERABLE, EXIT_USAGE = 0, 1, 2


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "plan",
        help="show the pods, references and derived objects a job will create",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    add_manifest_argument(p)
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.add_argument("--config", metavar="FILE", help="webhook config (for aiperfEnv and the Kueue default queue)")
    p.add_argument(
        "--cluster",
        action="store_true",
        help="dry-run one pod per group on the cluster and list what admission changes in the pods",
    )
    p.add_argument(
        "--kubeconfig", metavar="FILE", help="with --cluster: the kubeconfig (default: $KUBECONFIG, ~/.kube/config)"
    )
    p.add_argument(
        "--context", metavar="NAME", help="with --cluster: the kubeconfig context (default: its current-context)"
    )
    p.add_argument(
        "--timeout", type=float, default=10.0, metavar="SECONDS", help="with --cluster: per job (default 10)"
    )
    return p


async def admission(
    doc: dict[str, Any], view: Any, settings: Settings, timeout: float, lookup: Any = None
) -> dict[str, Any]:
    """What admission changes in the job's pods, by pod group, from the Dry Run check's dry runs on `view`
    (webhook/engine.py judge_admitted): {"changed": {group: [change, ...]}, "unseen": why not seen, or None}."""
    from webhook.deadline import Deadline
    from webhook.engine import UNSEEN
    from webhook.preflight import evaluate

    dry = [c for c in all_checks() if c.admits]
    ev = await evaluate(
        doc, settings=settings, deadline=Deadline(timeout), view=view, checks=dry, runtime_lookup=lookup
    )
    details = [d for r in ev.results.checks for d in r.details]
    unseen = next((d[len(UNSEEN) + 2 :] for d in details if d.startswith(UNSEEN)), None)
    if unseen is None and not ev.results.admitted:
        # not run at all (an unreadable object), or refused: the Dry Run's own words
        unseen = next((r.message for r in ev.results.checks if r.status is not Status.PASS), None)
    return {"changed": ev.results.admitted, "unseen": unseen}


def _quantities(res: dict[str, Any]) -> dict[str, str]:
    return {k: quantity.format_quantity(v, k) for k, v in sorted(res.items())}


def _bytes(cm: dict[str, Any]) -> int:
    """ConfigMap payload size the way AIPerf and the apiserver's 1 MiB limit count it."""
    return sum(len(str(k).encode()) + text_bytes(v) for k, v in (cm.get("data") or {}).items())


def plan(wl: Workload) -> dict[str, Any]:
    """The `plan` JSON object of one Workload."""
    groups = []
    secrets: set[str] = set()
    config_maps: set[str] = set()
    sa: str | None = None
    derived_cms = {
        (o.get("metadata") or {}).get("name")
        for k, o in wl.derived.items()
        if isinstance(o, dict) and (o.get("kind") == "ConfigMap" or k == "configMap")
    }
    for g in wl.pod_groups:
        groups.append(
            {
                "name": g.name,
                "replicas": g.pods,
                "containers": [{"name": c.get("name"), "image": c.get("image")} for c in g.containers()],
                "requests": _quantities(pod_requests(g.pod_spec)),
                "limits": _quantities(pod_limits(g.pod_spec)),
            }
        )
        secrets.update(r.name for r in secret_refs(g.pod_spec))
        config_maps.update(name for name, _, _ in config_map_refs(g.pod_spec) if name not in derived_cms)
        sa = sa or service_account(g.pod_spec)
    secrets.update(ref[0] for ref in wl.extra_secret_refs)
    secrets -= wl.managed_secrets
    js = wl.derived.get("jobSet")
    cm = wl.derived.get("configMap")
    out = {
        "kind": wl.kind,
        "name": wl.name,
        "namespace": wl.namespace,
        "podGroups": groups,
        "references": {"secrets": sorted(secrets), "serviceAccount": sa, "configMaps": sorted(config_maps)},
        "derived": {
            "jobSet": {"name": js["metadata"]["name"]} if js else None,
            "configMap": {"name": cm["metadata"]["name"], "bytes": _bytes(cm)} if cm else None,
        },
    }
    if isinstance(wl, SweepWorkload):
        out["sweep"] = sweep_plan(wl)
    return out


def sweep_plan(wl: SweepWorkload) -> dict[str, Any]:
    """An AIPerfSweep's children: one entry per variation (its trials share the render), run one at a time."""
    children = []
    for c in wl.children:
        pods, cpu, mem = c.requests
        cm = c.workload.derived.get("configMap")
        children.append(
            {
                "name": c.name,
                "names": c.names,
                "variation": c.variation,
                "label": c.label,
                "podGroups": [
                    {"name": g.name, "replicas": g.pods, "requests": _quantities(pod_requests(g.pod_spec))}
                    for g in c.workload.pod_groups
                ],
                "requests": {
                    "pods": pods,
                    "cpu": quantity.format_quantity(cpu, "cpu"),
                    "memory": quantity.format_quantity(mem, "memory"),
                },
                "configMapBytes": c.configmap_bytes if cm else None,
                "renderErrors": list(c.workload.render_errors),
            }
        )
    return {
        "type": wl.sweep_type,
        "variations": wl.variations,
        "trials": wl.trials,
        "concurrency": "one child at a time, next to the sweep-controller pod",
        "heaviestChild": wl.worst.name if wl.worst else None,
        "controllerObjects": {k: v["metadata"]["name"] for k, v in wl.controller_objects.items()},
        "notes": list(wl.notes),
        "children": children,
    }


def _fmt_res(res: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in res.items()) or "none"


def render_text(p: dict[str, Any], wl: Workload) -> str:
    lines = [f"{p['kind']} {p['namespace']}/{p['name']}"]
    if wl.incomplete_reason and not p["podGroups"]:
        lines.append(f"  pods unknown: {wl.incomplete_reason}")
    for g in p["podGroups"]:
        lines.append(f"  pod group {g['name']}: {g['replicas']} pod(s)")
        lines.append(f"    per pod: requests {_fmt_res(g['requests'])}; limits {_fmt_res(g['limits'])}")
        images = {c["image"] for c in g["containers"]}
        names = ", ".join(c["name"] for c in g["containers"])
        if len(images) == 1:
            lines.append(f"    {len(g['containers'])} container(s), image {images.pop()}: {names}")
        else:
            lines += [f"    container {c['name']}: {c['image']}" for c in g["containers"]]
    refs = p["references"]
    lines.append(f"  secrets: {', '.join(refs['secrets']) or '-'}")
    lines.append(f"  service account: {refs['serviceAccount'] or 'default (not set)'}")
    lines.append(f"  config maps: {', '.join(refs['configMaps']) or '-'}")
    d = p["derived"]
    if d["jobSet"]:
        lines.append(f"  creates JobSet {d['jobSet']['name']}")
    if d["configMap"]:
        lines.append(f"  creates ConfigMap {d['configMap']['name']} ({d['configMap']['bytes']:,} bytes of 1,048,576)")
    adm = p.get("admission")
    if adm is not None:
        if adm["changed"]:
            for group, changes in adm["changed"].items():
                lines.append(f"  admission changes the {group} pods: " + "; ".join(changes))
        elif adm["unseen"]:
            lines.append(f"  admission: not seen ({adm['unseen']})")
        else:
            lines.append("  admission changes nothing in the pods")
    sw = p.get("sweep")
    if sw:
        objs = sw["controllerObjects"]
        if objs:
            lines.append(
                f"  sweep controller: JobSet {objs['jobSet']}, ServiceAccount/Role/RoleBinding {objs['serviceAccount']}"
            )
        runs = sum(len(c["names"]) for c in sw["children"])
        lines.append(
            f"  {sw['type']} sweep: {sw['variations']} variation(s) x {sw['trials']} trial(s), {runs} child AIPerfJob(s), "
            f"{sw['concurrency']}; the pod groups above are the peak (heaviest child {sw['heaviestChild'] or '-'})"
        )
        lines += [f"  note: {n}" for n in sw["notes"]]
        for c in sw["children"]:
            groups = ", ".join(f"{g['replicas']} {g['name']}" for g in c["podGroups"]) or "not rendered"
            r = c["requests"]
            trials = f" (+{len(c['names']) - 1} trial(s))" if len(c["names"]) > 1 else ""
            lines.append(
                f"    child {c['name']}{trials} [{c['label']}]: {groups}; requests cpu={r['cpu']} memory={r['memory']}"
            )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        settings = (
            load_settings(getattr(args, "config", None), known_checks=check_names())
            if getattr(args, "config", None)
            else Settings()
        )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        docs = load_documents(args.filename)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    jobs, lookup = split_runtimes(docs)
    if getattr(args, "cluster", False):
        return asyncio.run(_with_cluster(args, settings, jobs, lookup))
    return _plan_all(args, settings, jobs, lookup, None)


async def _with_cluster(args: argparse.Namespace, settings: Settings, jobs: list[dict[str, Any]], lookup: Any) -> int:
    from webhook.cli.session import kubeconfig_problem, live_view

    problem = kubeconfig_problem(args.kubeconfig, args.context)
    if problem is not None:
        print(f"error: {problem}, or run without --cluster", file=sys.stderr)
        return EXIT_USAGE
    fix = "check --kubeconfig and --context, or run without --cluster"
    async with live_view(settings, args.kubeconfig, sys.stderr, fix=fix, context=args.context) as view:
        if view is None:
            return EXIT_USAGE
        await view.wait_synced(args.timeout)
        found = [await admission(doc, view, settings, args.timeout, lookup) for doc in jobs]
    return _plan_all(args, settings, jobs, lookup, found)


def _plan_all(
    args: argparse.Namespace,
    settings: Settings,
    jobs: list[dict[str, Any]],
    lookup: Any,
    admitted: list[dict[str, Any]] | None,
) -> int:
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    code = EXIT_OK
    for i, doc in enumerate(jobs):
        try:
            wl = build_workload(doc, settings=settings, runtime_lookup=lookup)
        except AdapterError as exc:
            meta: dict[str, Any] = m if isinstance(m := doc.get("metadata"), dict) else {}
            print(f"error: document {i + 1} ({doc.get('kind')} {meta.get('name', '?')}): {exc}", file=sys.stderr)
            return EXIT_USAGE
        if wl is None:
            print(
                f"note: {doc.get('kind')} {doc.get('apiVersion')} is not a job this webhook plans; skipped",
                file=sys.stderr,
            )
            continue
        for err in wl.render_errors:
            print(f"error: {wl.ref}: {err}", file=sys.stderr)
            code = EXIT_UNRENDERABLE
        p = plan(wl)
        if admitted is not None:
            p["admission"] = admitted[i]
        out.append(p)
        texts.append(render_text(p, wl))
    if not out:
        print("error: no AIPerfJob, AIPerfSweep or TrainJob in the input", file=sys.stderr)
        return EXIT_USAGE
    if args.output == "json":
        print(json.dumps(out[0] if len(out) == 1 else out, indent=2))
    else:
        print("\n\n".join(texts))
    return code
