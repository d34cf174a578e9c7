"""How does the webhook behave with live caches against a real control plane (latency, bursts, memory)?

    .venv/bin/python bench/cluster_bench.py [--only validate,burst,memory] [--no-write]

One local control plane (e2e/harness/controlplane.py, binaries from e2e/build.sh) is started for the
run; the sample objects (e2e/samples/: namespaces, ServiceAccounts, Secrets, the endpoint
Service, the ClusterTrainingRuntime), a ResourceQuota per sample namespace (status filled in:
there is no quota controller) and a few Ready Nodes are created, then each selected
benchmark runs and writes its own section of docs/benchmarks/cluster.md between
``<!-- bench:cluster-NAME -->`` markers, with the command that produced it:

validate   warm caches, every check but Dry Run (``checks: {Dry Run: off}``), /validate
           driven directly by bench/loadgen.py with the sample TrainJob and AIPerfJob reviews
burst      200 concurrent real TrainJob creates through the apiserver (then deleted)
memory     5,000 Secrets, 500 ResourceQuotas and 200 Nodes loaded, then a fresh webhook's RSS

The latency the webhook adds to an apply is bench/apply_latency.py's question (it was
`--only apiserver` here until commit 4fd6a1d).

Everything listens on 127.0.0.1. The machine's load average is recorded with every figure:
the two cores are shared with other work, and closed-loop latency moves with it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import copy
import json
import os
import platform
import shlex
import ssl
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import review, write_section  # noqa: E402
from bench.loadgen import LoadResult, run_load  # noqa: E402
from bench.run import cpu_seconds  # noqa: E402
from e2e.harness.controlplane import ControlPlane  # noqa: E402
from e2e.harness.runner import RunningWebhook, parse_metrics  # noqa: E402

SAMPLES = ROOT / "e2e" / "samples"
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs"
SAMPLE_SELECTOR = {"matchLabels": {"preflight-webhook/samples": "true"}}
BENCH_NODES = 3  # Ready nodes present for every benchmark (the memory benchmark adds 200)

TARGETS = {
    "validate": "p99 <= 20 ms at 32 connections",
    "apiserver": "added p99 <= 100 ms at 8 concurrent clients",
    "burst": "zero timeouts, zero failed calls",
    "memory": "webhook RSS <= 250 MiB",
}


# ------------------------------------------------------------------------------- helpers


def load() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} / {b:.2f} / {c:.2f}"


def rss_mib(pid: int, field_name: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def pct(xs: list[float], q: float) -> float:
    """Nearest-rank percentile, the same rule as LoadResult.percentile."""
    return LoadResult(len(xs), 0, 0.0, list(xs)).percentile(q)


def sample(name: str) -> dict[str, Any]:
    return yaml.safe_load((SAMPLES / f"{name}.yaml").read_text())


def apiserver_count(cp: ControlPlane, resource: str, verb: str) -> float:
    """apiserver_request_total for (resource, verb), all codes: what the webhook made the apiserver do."""
    status, body = cp.get_raw("/metrics", timeout=30)
    if status != 200:
        return float("nan")
    return sum(
        v
        for (n, ls), v in parse_metrics(body).items()
        if n == "apiserver_request_total" and ("resource", resource) in ls and ("verb", verb) in ls
    )


class Admin:
    """Raw apiserver calls as admin (aiohttp, client certificate): fast bulk setup and timing."""

    def __init__(self, cp: ControlPlane, connections: int = 32) -> None:
        import aiohttp

        self.base = cp.server_url
        self._ssl = cp._admin_ssl()
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl, limit=connections),
            timeout=aiohttp.ClientTimeout(total=60),
        )

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()

    async def call(
        self, method: str, path: str, body: Any = None, ctype: str = "application/json"
    ) -> tuple[int, Any, Any]:
        data = None if body is None else json.dumps(body).encode()
        async with self.session.request(method, self.base + path, data=data, headers={"Content-Type": ctype}) as r:
            text = await r.read()
            try:
                doc = json.loads(text) if text else None
            except ValueError:
                doc = text.decode(errors="replace")
            return r.status, doc, r.headers

    async def create(self, path: str, body: dict[str, Any]) -> None:
        """POST; an existing object (409) is fine: setup is idempotent."""
        status, doc, _ = await self.call("POST", path, body)
        if status not in (200, 201, 409):
            raise RuntimeError(f"POST {path}: {status} {str(doc)[:300]}")

    async def bulk(self, calls: list[tuple[str, dict[str, Any]]], concurrency: int = 32) -> None:
        sem = asyncio.Semaphore(concurrency)

        async def one(path: str, body: dict[str, Any]) -> None:
            async with sem:
                await self.create(path, body)

        await asyncio.gather(*(one(p, b) for p, b in calls))


def node(name: str, cpu: str = "32", memory: str = "256Gi") -> dict[str, Any]:
    """A Ready Node without a kubelet: nothing ever updates it, so it stays Ready."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    res = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "500Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "bench": "true"},
        },
        "spec": {},
        "status": {
            "capacity": res,
            "allocatable": res,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "bench",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        },
    }


#: requests only: the sample pods set no limits, and a quota on limits.* rightly fails them
QUOTA_HARD = {"requests.cpu": "64", "requests.memory": "512Gi", "pods": "200", "count/jobsets.jobset.x-k8s.io": "50"}


async def create_quotas(admin: Admin, items: list[tuple[str, str]], concurrency: int = 32) -> None:
    """ResourceQuotas with status.hard/used filled in: without a quota controller the
    ResourceQuota admission plugin rejects what a quota with an empty status counts."""
    await admin.bulk(
        [
            (f"/api/v1/namespaces/{ns}/resourcequotas", {"metadata": {"name": name}, "spec": {"hard": QUOTA_HARD}})
            for ns, name in items
        ],
        concurrency,
    )
    used = {k: "0" for k in QUOTA_HARD}
    sem = asyncio.Semaphore(concurrency)

    async def status(ns: str, name: str) -> None:
        async with sem:
            code, doc, _ = await admin.call(
                "PATCH",
                f"/api/v1/namespaces/{ns}/resourcequotas/{name}/status",
                {"status": {"hard": QUOTA_HARD, "used": used}},
                "application/merge-patch+json",
            )
            if code != 200:
                raise RuntimeError(f"quota status {ns}/{name}: {code} {str(doc)[:200]}")

    await asyncio.gather(*(status(ns, n) for ns, n in items))


async def create_nodes(admin: Admin, names: list[str], concurrency: int = 32) -> None:
    """Ready, untainted Nodes. The apiserver's TaintNodesByCondition plugin adds
    node.kubernetes.io/not-ready on create, which the node lifecycle controller (absent
    here) would lift once the kubelet reports Ready: lift it ourselves."""
    await admin.bulk([("/api/v1/nodes", node(n)) for n in names], concurrency)
    sem = asyncio.Semaphore(concurrency)

    async def settle(n: str) -> None:
        async with sem:
            code, doc, _ = await admin.call(
                "PATCH", f"/api/v1/nodes/{n}", {"spec": {"taints": None}}, "application/merge-patch+json"
            )
            if code != 200:
                raise RuntimeError(f"untaint node {n}: {code} {str(doc)[:200]}")
            conds = ((doc or {}).get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
                await admin.call(
                    "PATCH", f"/api/v1/nodes/{n}/status", {"status": node(n)["status"]}, "application/merge-patch+json"
                )

    await asyncio.gather(*(settle(n) for n in names))


def setup_samples(cp: ControlPlane) -> None:
    """The sample prerequisites and runtime, a quota per sample namespace, a few Ready nodes."""
    cp.apply_samples_prerequisites(SAMPLES)  # (with each namespace's default ServiceAccount: no controller here)

    async def go() -> None:
        async with Admin(cp) as admin:
            await create_quotas(admin, [("demo-train", "compute"), ("demo-bench", "compute")])
            await create_nodes(admin, [f"bench-node-{i}" for i in range(BENCH_NODES)])

    asyncio.run(go())


@contextlib.contextmanager
def webhook(cp: ControlPlane, config: dict[str, Any]) -> Iterator[RunningWebhook]:
    with RunningWebhook(
        cp, config=config, namespace_selector=SAMPLE_SELECTOR, probe_namespace="demo-bench", log_level="warning"
    ) as hook:
        yield hook


def hook_ssl(hook: RunningWebhook) -> ssl.SSLContext:
    assert hook.ca_file is not None
    return ssl.create_default_context(cafile=str(hook.ca_file))


def post_once(hook: RunningWebhook, body: bytes) -> dict[str, Any]:
    """One /validate answer, to show what the measured requests decide."""
    import urllib.request

    req = urllib.request.Request(
        f"{hook.url}/validate?timeout=10s", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30, context=hook_ssl(hook)) as r:
        return json.loads(r.read())["response"]


def check_times(hook: RunningWebhook) -> dict[str, tuple[float, float]]:
    """(count, mean ms) per check from the webhook's own histogram."""
    m = hook.metrics()
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for (n, ls), v in m.items():
        check = dict(ls).get("check")
        if check is None:
            continue
        if n == "preflight_webhook_check_duration_seconds_sum":
            sums[check] = sums.get(check, 0.0) + v
        elif n == "preflight_webhook_check_duration_seconds_count":
            counts[check] = counts.get(check, 0.0) + v
    return {c: (counts[c], 1000.0 * sums.get(c, 0.0) / counts[c]) for c in counts if counts[c]}


def header(command: str, extra: str = "") -> list[str]:
    import aiohttp

    return [
        f"Command: `{command}`",
        "",
        f"Machine: {os.cpu_count()} cores shared with other work, Python {platform.python_version()}, "
        f"aiohttp {aiohttp.__version__}; kube-apiserver, etcd, the webhook and the clients all run on it. "
        "Latency in ms; load average is 1/5/15 min at the start of the measurement." + (" " + extra if extra else ""),
        "",
    ]


def verdict(ok: bool, what: str) -> str:
    return f"**{'meets' if ok else 'misses'} the target** ({what})"


# ------------------------------------------------------------------------------- 1. validate


@dataclass
class ValidateRun:
    label: str
    result: LoadResult
    cpu_ms: float
    load: str
    secret_gets: float
    connections: int


def bench_validate(cp: ControlPlane, args: argparse.Namespace, command: str) -> str:
    train = sample("trainjob-good")
    aiperf = sample("aiperfjob-good")
    bodies = [("TrainJob", review(train)), ("AIPerfJob", review(aiperf))]
    runs: list[ValidateRun] = []
    with webhook(cp, {"checks": {"Dry Run": "off"}}) as hook:
        ctx = hook_ssl(hook)
        answers = {kind: post_once(hook, body) for kind, body in bodies}
        for kind, body in bodies:
            for conns in (args.connections, 1):
                if kind == "AIPerfJob" and conns == 1:
                    continue
                n = args.requests if conns > 1 else max(200, args.requests // 10)
                gets0 = apiserver_count(cp, "secrets", "GET")
                cpu0 = [0.0]
                started = [load()]

                def on_start(cpu0: list[float] = cpu0, started: list[str] = started) -> None:
                    cpu0[0] = cpu_seconds(hook.pid)  # type: ignore[arg-type]
                    started[0] = load()

                res = asyncio.run(
                    run_load(
                        f"{hook.url}/validate?timeout=10s",
                        body,
                        ssl_context=ctx,
                        connections=conns,
                        requests=n,
                        duration=args.duration,
                        warmup=args.warmup if conns > 1 else 20,
                        on_start=on_start,
                    )
                )
                cpu_ms = (cpu_seconds(hook.pid) - cpu0[0]) * 1000.0 / max(1, res.requests)  # type: ignore[arg-type]
                gets = apiserver_count(cp, "secrets", "GET") - gets0
                run = ValidateRun(
                    f"{kind}, {conns} connection{'s' if conns > 1 else ''}", res, cpu_ms, started[0], gets, conns
                )
                runs.append(run)
                print(
                    f"validate {run.label}: {res.throughput:.0f} req/s p50 {res.percentile(50):.1f} p99 "
                    f"{res.percentile(99):.1f} cpu {cpu_ms:.2f} ms/req errors {res.errors} secret GETs {gets:.0f} load {run.load}",
                    flush=True,
                )
        rss, hwm = rss_mib(hook.pid), rss_mib(hook.pid, "VmHWM")  # type: ignore[arg-type]
        per_check = check_times(hook)

    lines = [
        "## Cluster: /validate with warm caches, every check but Dry Run",
        "",
        *header(command),
        f"Setup: the webhook (`serve`, config `checks: {{Dry Run: off}}`, kubeconfig of the local apiserver) with its "
        f"caches synced; in the cluster: the sample namespaces, ServiceAccounts, Secrets (`hf-token`, `ghcr-pull`), "
        f"the endpoint Service, the `torch-distributed` ClusterTrainingRuntime, a ResourceQuota per namespace and "
        f"{BENCH_NODES} Ready Nodes. bench/loadgen.py POSTs the AdmissionReview of `e2e/samples/trainjob-good.yaml` / "
        f"`aiperfjob-good.yaml` to /validate (keep-alive TLS, closed loop), {args.requests} measured requests after "
        f'{args.warmup} warm-up ones (bounded to {args.duration:.0f} s). "Secret GETs" is the apiserver\'s own count of '
        f"GET secrets during the measured run (secretTtlSeconds 5: one read per Secret per TTL, not per request).",
        "",
        "Answers: "
        + "; ".join(
            f"{k}: allowed={a.get('allowed')}, {len(a.get('warnings') or [])} warning(s)"
            + ("" if a.get("allowed") else f" [{((a.get('status') or {}).get('message') or '')[:400]}]")
            + (f" ({' / '.join(a.get('warnings') or [])})" if a.get("warnings") else "")
            for k, a in answers.items()
        )
        + ".",
        "",
        "| run | req/s | p50 | p95 | p99 | errors | webhook CPU ms/req | Secret GETs | load avg |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        x = r.result
        lines.append(
            f"| {r.label} | {x.throughput:,.0f} | {x.percentile(50):.1f} | {x.percentile(95):.1f} | "
            f"{x.percentile(99):.1f} | {x.errors} | {r.cpu_ms:.2f} | {r.secret_gets:.0f} | {r.load} |"
        )
    lines += [
        "",
        f"Webhook RSS after the runs: {rss:.0f} MiB (peak {hwm:.0f} MiB).",
        "",
        "Mean wall time per check over all requests above (the webhook's preflight_webhook_check_duration_seconds; "
        "a check that awaits, like Secrets, also counts time the event loop spends on other requests): "
        + ", ".join(f"{c} {ms:.2f}" for c, (n, ms) in sorted(per_check.items(), key=lambda kv: -kv[1][1]))
        + " ms.",
        "",
    ]
    main_run = runs[0]
    p99 = main_run.result.percentile(99)
    lines.append(
        f"- {main_run.label}: p99 {p99:.1f} ms → {verdict(p99 <= 20.0 and main_run.result.errors == 0, TARGETS['validate'])}."
    )
    one = next((r for r in runs if r.connections == 1), None)
    if one is not None:
        lines.append(
            f"- In a closed loop the latency at 32 connections is about 32 × the server's time per request "
            f"(Little's law): {main_run.result.throughput:,.0f} req/s gives {32000 / max(main_run.result.throughput, 1e-9):.0f} ms. "
            f"One connection shows the service time itself: p50 {one.result.percentile(50):.1f} ms, "
            f"p99 {one.result.percentile(99):.1f} ms."
        )
    return "\n".join(lines)


# ------------------------------------------------------------------------------- 2. apiserver


def direct_dry_runs(
    cp: ControlPlane,
    job: dict[str, Any],
    clients: int,
    per_client: int,
    path: str | None = None,
    duration: float = 120,
) -> LoadResult:
    url = f"{cp.server_url}{path or TRAINJOBS.format(ns=job['metadata']['namespace'])}?dryRun=All"
    return asyncio.run(
        run_load(
            url,
            json.dumps(job).encode(),
            ssl_context=cp._admin_ssl(),
            connections=clients,
            requests=clients * per_client,
            duration=duration,
            warmup=clients * 2,
            ok_statuses=(201,),
        )
    )


def set_registered(hook: RunningWebhook, on: bool) -> None:
    if on:
        hook.register()
        hook.wait_called()
    else:
        hook.cp.kubectl("delete", "validatingwebhookconfiguration", hook.vwc_name, "--ignore-not-found")
        hook.wait_not_called()


#: (label, webhook config or None = no webhook registered); the first is the baseline
API_MODES: list[tuple[str, dict[str, Any] | None]] = [
    ("webhook not registered", None),
    ("webhook registered, every check", {}),
    ("webhook registered, Dry Run off", {"checks": {"Dry Run": "off"}}),
]


@dataclass
class BurstResult:
    latencies_ms: list[float] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)
    timeouts: int = 0
    check_timeouts: int = 0
    wall: float = 0.0
    deleted: int = 0


async def burst(cp: ControlPlane, job: dict[str, Any], count: int, tag: str) -> BurstResult:
    import aiohttp

    ns = job["metadata"]["namespace"]
    path = TRAINJOBS.format(ns=ns)
    out = BurstResult()
    async with Admin(cp, connections=count) as admin:
        # open the connections first: the burst measures admission, not 200 TLS handshakes
        await asyncio.gather(*(admin.call("GET", "/version") for _ in range(count)))

        async def one(i: int) -> None:
            body = copy.deepcopy(job)
            body["metadata"]["name"] = f"burst-{tag}-{i:03d}"
            body["metadata"].setdefault("labels", {})["bench"] = f"burst-{tag}"
            t0 = time.perf_counter()
            try:
                status, doc, headers = await asyncio.wait_for(admin.call("POST", path, body), timeout=30)
            except (TimeoutError, aiohttp.ServerTimeoutError):
                out.timeouts += 1
                return
            except aiohttp.ClientError as exc:
                out.failed[type(exc).__name__] = out.failed.get(type(exc).__name__, 0) + 1
                return
            if status != 201:
                reason = f"{status} {(doc or {}).get('message', '')[:120] if isinstance(doc, dict) else ''}"
                out.failed[reason] = out.failed.get(reason, 0) + 1
                return
            out.latencies_ms.append((time.perf_counter() - t0) * 1000.0)
            out.check_timeouts += sum("did not finish within" in w for w in headers.getall("Warning", []))

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(count)))
        out.wall = time.perf_counter() - t0
        status, doc, _ = await admin.call("DELETE", f"{path}?labelSelector=bench%3Dburst-{tag}")
        _, left, _ = await admin.call("GET", f"{path}?labelSelector=bench%3Dburst-{tag}")
        out.deleted = len((doc or {}).get("items") or []) if status == 200 else -1
        if (left or {}).get("items"):
            raise RuntimeError(f"{len(left['items'])} burst TrainJobs left after delete")
    return out


def bench_burst(cp: ControlPlane, args: argparse.Namespace, command: str) -> str:
    job = sample("trainjob-good")
    rows: list[tuple[str, BurstResult, str]] = []
    started = load()
    base = asyncio.run(burst(cp, job, args.burst, "off"))
    rows.append(("webhook not registered", base, started))
    answered: dict[str, float] = {}
    peak: dict[str, float] = {}
    for i, (label, config) in enumerate(API_MODES[1:]):
        with webhook(cp, config or {}) as hook:
            before = hook.requests_total()
            started = load()
            r = asyncio.run(burst(cp, job, args.burst, f"on{i}"))
            rows.append((label, r, started))
            answered[label] = hook.requests_total() - before
            peak[label] = rss_mib(hook.pid, "VmHWM")  # type: ignore[arg-type]
    res = rows[1][1]
    for label, r, ld in rows:
        print(
            f"burst {label}: ok {len(r.latencies_ms)} p50 {pct(r.latencies_ms, 50):.0f} p99 {pct(r.latencies_ms, 99):.0f} "
            f"timeouts {r.timeouts} failed {r.failed} check timeouts {r.check_timeouts} wall {r.wall:.1f}s load {ld}",
            flush=True,
        )
    lines = [
        f"## Cluster: a burst of {args.burst} concurrent TrainJob creates through the real apiserver",
        "",
        *header(command),
        f"{args.burst} real creates (not dry run) of `e2e/samples/trainjob-good.yaml` under distinct names, all sent at "
        f"once as admin over {args.burst} already-open keep-alive TLS connections (aiohttp; 30 s client timeout), then "
        f'deleted with one DELETE collection. "check timeouts" counts `did not finish within` warnings returned to the client. '
        f"The webhook's budget per review is 4 s (budgetSeconds; the apiserver sends ?timeout=10s); the VWC's timeoutSeconds is 10.",
        "",
        "| run | created | failed | timeouts | check timeouts | p50 | p95 | p99 | max | wall s | load avg |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, r, ld in rows:
        xs = r.latencies_ms
        lines.append(
            f"| {label} | {len(xs)} | {sum(r.failed.values())} | {r.timeouts} | {r.check_timeouts} | "
            f"{pct(xs, 50):.0f} | {pct(xs, 95):.0f} | {pct(xs, 99):.0f} | {max(xs, default=float('nan')):.0f} | "
            f"{r.wall:.1f} | {ld} |"
        )
    failures = "; ".join(f"{k}: {v}" for label, r, _ in rows for k, v in r.failed.items())
    ok = res.timeouts == 0 and not res.failed and len(res.latencies_ms) == args.burst
    lines += [
        "",
        "Reviews answered / webhook peak RSS: "
        + ", ".join(f"{m}: {answered[m]:.0f} / {peak[m]:.0f} MiB" for m in answered)
        + "."
        + (f" Failures: {failures}." if failures else ""),
        "",
        f"- With the webhook (every check): {len(res.latencies_ms)}/{args.burst} created, {res.timeouts} timeouts, "
        f"{sum(res.failed.values())} failed, p99 {pct(res.latencies_ms, 99):.0f} ms → {verdict(ok, TARGETS['burst'])}.",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------- 4. memory


async def load_bulk(cp: ControlPlane, secrets: int, quotas: int, nodes: int, namespaces: int) -> dict[str, float]:
    """Namespaces, Secrets, ResourceQuotas and Nodes by concurrent POSTs; seconds per kind."""
    took: dict[str, float] = {}
    names = [f"bench-mem-{i:03d}" for i in range(namespaces)]
    value = base64.b64encode(os.urandom(75)).decode()
    async with Admin(cp) as admin:
        t0 = time.perf_counter()
        await admin.bulk(
            [("/api/v1/namespaces", {"metadata": {"name": n, "labels": {"bench": "memory"}}}) for n in names]
        )
        took["namespaces"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        await admin.bulk(
            [
                (
                    f"/api/v1/namespaces/{names[i % namespaces]}/secrets",
                    {
                        "metadata": {"name": f"s-{i:05d}", "labels": {"app": "bench"}},
                        "type": "Opaque",
                        "data": {"token": value, "username": base64.b64encode(b"user-%d" % i).decode()},
                    },
                )
                for i in range(secrets)
            ]
        )
        took["secrets"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        await create_quotas(admin, [(names[i % namespaces], f"q-{i:04d}") for i in range(quotas)])
        took["quotas"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        await create_nodes(admin, [f"bench-mem-node-{i:03d}" for i in range(nodes)])
        took["nodes"] = time.perf_counter() - t0
    return took


def bench_memory(cp: ControlPlane, args: argparse.Namespace, command: str) -> str:
    # a webhook on the small cluster first: the baseline the bulk objects add to
    with webhook(cp, {}) as hook:
        base_rss = rss_mib(hook.pid)  # type: ignore[arg-type]
    took = asyncio.run(load_bulk(cp, args.secrets, args.quotas, args.nodes, args.namespaces))
    print(f"memory: loaded {took}", flush=True)
    started = load()
    t0 = time.perf_counter()
    with webhook(cp, {}) as hook:
        ready_s = time.perf_counter() - t0
        pid = hook.pid
        assert pid is not None
        synced_rss = rss_mib(pid)
        body = review(sample("trainjob-good"))
        res = asyncio.run(
            run_load(
                f"{hook.url}/validate?timeout=10s",
                body,
                ssl_context=hook_ssl(hook),
                connections=8,
                requests=args.memory_requests,
                duration=60,
                warmup=16,
            )
        )
        after_rss, hwm = rss_mib(pid), rss_mib(pid, "VmHWM")
    print(
        f"memory: base {base_rss:.0f} synced {synced_rss:.0f} after {after_rss:.0f} peak {hwm:.0f} MiB, ready {ready_s:.1f}s",
        flush=True,
    )
    ok = max(after_rss, hwm) <= 250.0
    lines = [
        f"## Cluster: webhook memory with {args.secrets:,} Secrets, {args.quotas} ResourceQuotas and {args.nodes} Nodes",
        "",
        *header(command),
        f"Loaded by concurrent POSTs (32 in flight) into {args.namespaces} namespaces: Secrets of 2 keys (~100 bytes) "
        f"in {took['secrets']:.0f} s, ResourceQuotas (with status) in {took['quotas']:.0f} s, Ready Nodes without "
        f"kubelets in {took['nodes']:.0f} s (namespaces {took['namespaces']:.0f} s). Then a fresh webhook (default config) "
        f"was started and registered; `/readyz` (every cache synced) plus registration took {ready_s:.1f} s. After that, "
        f"{res.requests} reviews of the sample TrainJob (8 connections, Dry Run included) went to /validate "
        f"({res.errors} errors). Secrets are read on demand (docs/cluster.md), so they cost nothing until referenced; "
        f"Nodes, ResourceQuotas and Namespaces are in the watch caches.",
        "",
        "| webhook process | RSS MiB |",
        "|---|---:|",
        f"| small cluster (samples only), caches synced | {base_rss:.0f} |",
        f"| bulk objects loaded, caches synced | {synced_rss:.0f} |",
        f"| after {res.requests} reviews | {after_rss:.0f} |",
        f"| peak (VmHWM) | {hwm:.0f} |",
        "",
        f"Load average at the start: {started}.",
        "",
        f"- Peak RSS {hwm:.0f} MiB → {verdict(ok, TARGETS['memory'])}.",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------- main


BENCHES: dict[str, Callable[[ControlPlane, argparse.Namespace, str], str]] = {
    "validate": bench_validate,
    "burst": bench_burst,
    "memory": bench_memory,  # last: it leaves thousands of objects behind
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=",".join(BENCHES), help="comma-separated subset of: " + ", ".join(BENCHES))
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--requests", type=int, default=4000, help="validate: measured requests per run")
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--duration", type=float, default=40.0, help="validate: upper bound per run (s)")
    p.add_argument("--burst", type=int, default=200)
    p.add_argument("--secrets", type=int, default=5000)
    p.add_argument("--quotas", type=int, default=500)
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--namespaces", type=int, default=100)
    p.add_argument("--memory-requests", type=int, default=400)
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks/ alone")
    args = p.parse_args()
    selected = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = [b for b in selected if b not in BENCHES]
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(unknown)}")
    command = " ".join([".venv/bin/python bench/cluster_bench.py", *(shlex.quote(a) for a in sys.argv[1:])])

    with ControlPlane() as cp:
        setup_samples(cp)
        for name in BENCHES:
            if name not in selected:
                continue
            t0 = time.perf_counter()
            text = BENCHES[name](cp, args, command)
            print(f"==> {name} took {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
            print(text, flush=True)
            if not args.no_write:
                write_section(f"cluster-{name}", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
