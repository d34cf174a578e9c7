"""`preflight-webhook plan`: what a job will create, as the checks see it.

Per pod group the replicas, containers and images, and per-pod requests/limits; the
Secrets, ServiceAccount and ConfigMaps the pods reference; and the objects the job's
controller derives (JobSet, run-config ConfigMap and its size). No cluster is needed:
TrainingRuntimes given in the same input are used as the TrainJob's runtime.

Exit codes: 0 planned, 1 a document cannot be rendered (the reason is on stderr),
2 usage or input errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from webhook import quantity
from webhook.checks import check_names
from webhook.cli.args import add_manifest_argument
from webhook.config import ConfigError, Settings, load_settings
from webhook.manifests import load_documents, split_runtimes
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
    return p


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
