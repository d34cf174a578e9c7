"""How should the webhook know about Secrets? Measure, against a real kube-apiserver.

Variants, each measured in a fresh process (RSS after the data is loaded, minus the RSS
of the same process before loading):

  metadata  list+watch as PartialObjectMetadata (existence only), slimmed, in a ResourceCache
  full      a naive informer holding whole Secrets (what a plain watch would cost)
  ondemand  on-demand GETs with a TTL: the worst case, every Secret's key set remembered

Then apiserver requests per admission for a burst through the real LiveClusterView:
`--burst` admissions at once, each referencing 3 Secrets (2 by key, 1 whole).

Usage:
  .venv/bin/python bench/secrets_memory.py                 # starts its own control plane
  .venv/bin/python bench/secrets_memory.py --kubeconfig K  # an existing (admin) cluster
Prints a Markdown table for docs/cluster.md. Takes a few minutes (10k creates).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COUNT = int(os.environ.get("BENCH_SECRETS", "10000"))
METADATA_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def _client(kubeconfig: str) -> Any:
    from webhook.cluster.client import KubeClient, load_configuration

    return KubeClient(await load_configuration(kubeconfig), 16)


async def _list_all(client: Any, path: str, accept: str = "application/json") -> tuple[list[dict[str, Any]], str]:
    items: list[dict[str, Any]] = []
    cont = None
    rv = ""
    while True:
        doc = await client.request("GET", path, query={"limit": 500, "continue": cont}, timeout=120, accept=accept)
        items += doc.get("items") or []
        rv = (doc.get("metadata") or {}).get("resourceVersion") or rv
        cont = (doc.get("metadata") or {}).get("continue")
        if not cont:
            return items, rv


async def measure_variant(variant: str, kubeconfig: str, namespace: str, trace: bool) -> dict[str, Any]:
    """Runs inside the child process: load one variant, report what it costs: RSS growth
    (without tracemalloc) or the bytes still allocated once loaded (with tracemalloc)."""
    from webhook.cluster.cache import ResourceCache

    client = await _client(kubeconfig)
    # warm the client, imports and TLS so the baseline includes them
    await client.request("GET", "/version", timeout=30)
    gc.collect()
    before = rss_bytes()
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    held: Any
    path = f"/api/v1/namespaces/{namespace}/secrets"
    if variant == "metadata":
        items, rv = await _list_all(client, path, METADATA_ACCEPT)
        held = ResourceCache("secrets")
        held.replace(items, rv)
        count = len(held)
    elif variant == "full":
        items, rv = await _list_all(client, path)
        held = ResourceCache("secrets")
        held.replace(items, rv)  # managedFields dropped; values kept, as an informer would
        count = len(held)
    elif variant == "ondemand":
        # worst case of what secret_keys() keeps: every Secret read within one TTL, each entry
        # ((namespace, name), (expiry, frozenset(keys))) decoded from JSON like a GET answer
        items = []
        held = {}
        for i in range(COUNT):
            body = json.loads(
                json.dumps(
                    {
                        "metadata": {"namespace": namespace, "name": f"s-{i:05d}"},
                        "data": {"token": "x", "username": "y"},
                    }
                )
            )
            keys = frozenset(body["data"].keys())
            held[(body["metadata"]["namespace"], body["metadata"]["name"])] = (time.monotonic() + 5.0, keys)
        count = len(held)
    else:
        raise SystemExit(f"unknown variant {variant}")
    load_seconds = time.perf_counter() - t0
    del items
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] if trace else 0
    if trace:
        tracemalloc.stop()
    after = rss_bytes()
    await client.close()
    return {
        "variant": variant,
        "objects": count,
        "rss_delta": after - before,
        "retained": retained,
        "load_seconds": load_seconds,
    }


async def create_secrets(kubeconfig: str, namespace: str, count: int) -> None:
    """Bench setup: realistic small Secrets (2 keys, ~100 bytes each), 32 at a time."""
    from kubernetes_asyncio import client as k8s

    from webhook.cluster.client import load_configuration

    cfg = await load_configuration(kubeconfig)
    async with k8s.ApiClient(cfg) as api:
        core = k8s.CoreV1Api(api)
        try:
            await core.create_namespace({"metadata": {"name": namespace}})
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise
        existing = await core.list_namespaced_secret(namespace, limit=1)
        have = int(existing.metadata.remaining_item_count or 0) + len(existing.items)
        if have >= count:
            return
        sem = asyncio.Semaphore(32)
        value = base64.b64encode(os.urandom(75)).decode()

        async def one(i: int) -> None:
            body = {
                "metadata": {"name": f"s-{i:05d}", "labels": {"app": "bench"}},
                "type": "Opaque",
                "data": {"token": value, "username": base64.b64encode(b"user-%d" % i).decode()},
            }
            async with sem:
                try:
                    await core.create_namespaced_secret(namespace, body)
                except k8s.ApiException as exc:
                    if exc.status != 409:
                        raise

        await asyncio.gather(*(one(i) for i in range(count)))


async def burst(kubeconfig: str, namespace: str, admissions: int, ttl: float, sequential: bool) -> dict[str, Any]:
    """Requests the real LiveClusterView sends for `admissions` concurrent admissions."""
    from webhook.checks import all_checks
    from webhook.cluster.live import open_cluster_view
    from webhook.config import Settings
    from webhook.deadline import Deadline

    settings = Settings(secretTtlSeconds=ttl)
    view = await open_cluster_view(settings, kubeconfig=kubeconfig, checks=all_checks())
    await view.wait_synced(60)
    before = view.client.requests["GET secret"]

    async def admission(i: int) -> None:
        d = Deadline(4.0)
        # AIPerf-style: an HF token (by key), a registry pull secret (whole), an API key (by key)
        await asyncio.gather(
            view.secret_keys(namespace, "s-00001", d),
            view.secret_keys(namespace, "s-00002", d),
            view.secret_keys(namespace, f"s-{(i % 10) + 10:05d}", d),
        )

    t0 = time.perf_counter()
    if sequential:
        for i in range(admissions):
            await admission(i)
    else:
        await asyncio.gather(*(admission(i) for i in range(admissions)))
    elapsed = time.perf_counter() - t0
    sent = view.client.requests["GET secret"] - before
    await view.close()
    return {"admissions": admissions, "ttl": ttl, "requests": sent, "seconds": elapsed, "sequential": sequential}


def run_child(variant: str, kubeconfig: str, namespace: str, count: int, trace: bool) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", variant, "--kubeconfig", kubeconfig, "--namespace", namespace]
    out = subprocess.run(
        argv + (["--trace"] if trace else []),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "BENCH_SECRETS": str(count)},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--kubeconfig", help="admin kubeconfig of an existing cluster (default: start a local control plane)"
    )
    ap.add_argument("--namespace", default="bench-secrets")
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--burst", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2, help="measurements per variant (the median is reported)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        print(json.dumps(asyncio.run(measure_variant(args.child, args.kubeconfig, args.namespace, args.trace))))
        return 0

    cp = None
    kubeconfig = args.kubeconfig
    if kubeconfig is None:
        from e2e.harness.controlplane import ControlPlane

        cp = ControlPlane().start()
        kubeconfig = str(cp.kubeconfig)
    try:
        t0 = time.perf_counter()
        asyncio.run(create_secrets(kubeconfig, args.namespace, args.count))
        print(
            f"# {args.count} Secrets in {args.namespace} ready after {time.perf_counter() - t0:.0f}s", file=sys.stderr
        )
        rows = []
        for variant in ("metadata", "full", "ondemand"):
            runs = sorted(
                (run_child(variant, kubeconfig, args.namespace, args.count, False) for _ in range(args.repeat)),
                key=lambda r: r["rss_delta"],
            )
            r = runs[len(runs) // 2]
            r["retained"] = run_child(variant, kubeconfig, args.namespace, args.count, True)["retained"]
            rows.append(r)
            print(f"# {variant}: {r}", file=sys.stderr)
        bursts = [
            asyncio.run(burst(kubeconfig, args.namespace, args.burst, ttl, seq))
            for seq in (False, True)
            for ttl in (0.0, 5.0)
        ]
    finally:
        if cp is not None:
            cp.stop()

    per10k = 10_000 / max(1, args.count)
    print("| variant | objects | RSS growth | RSS per 10k Secrets | retained (tracemalloc) per 10k |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['variant']} | {r['objects']} | {r['rss_delta'] / 2**20:.1f} MiB | "
            f"{r['rss_delta'] * per10k / 2**20:.1f} MiB | {r['retained'] * per10k / 2**20:.1f} MiB |"
        )
    print()
    print("| admissions (3 Secret refs each) | Secret TTL | GET secret requests | per admission | wall time |")
    print("|---|---|---|---|---|")
    for b in bursts:
        how = "one after another" if b["sequential"] else "all at once"
        print(
            f"| {b['admissions']} {how} | {b['ttl']:.0f}s | {b['requests']} | "
            f"{b['requests'] / b['admissions']:.3f} | {b['seconds']:.2f}s |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
