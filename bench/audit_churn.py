"""The churn mode of bench/audit_scale.py (`--churn SECONDS`): does the audit controller stay flat under Secret churn?

Issue 33: a Secret read by many waiting jobs, deleted and created again every second, took the controller
from 172 to 1,458 MiB (past its 1Gi limit at about the 45th cycle), never released; plain patches kept
0.3 core busy; no periodic scan ran in 36 minutes; the Reports kept false DENYs minutes after the
Secret was back. This mode measures, on the local control plane (etcd + kube-apiserver), while the
`hf-token` Secret of the churned namespaces is deleted and created again (or patched) every
`--churn-every` seconds for `--churn` seconds:

- RSS of this process (the controller) every 10 s, and its drift over the churn (Done-when: ±10 %);
- the CPU it used a second; the queue (jobs waiting, being judged) and the asyncio tasks;
- the evaluations made, the full scans ended during the churn (the period is `--period`);
- after the last change (the Secret present): how long until no stored Report holds a Secrets `fail`.

The churn is sent by a process of its own (the harness's admin identity, one kept-alive connection):
its CPU and memory are not counted as the controller's.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import multiprocessing
import os
import resource
import ssl
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

from e2e.harness.controlplane import ControlPlane

SECRET = "hf-token"
#: seconds between two samples of the controller
SAMPLE = 10.0


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _secret(ns: str, n: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, "namespace": ns},
            "stringData": {"token": f"x{n}"}}  # fmt: skip


def _churn_process(
    url: str,
    ca: str,
    cert: str,
    key: str,
    namespaces: list[str],
    mode: str,
    every: float,
    stop: Any,
    cycles: Any,
    errors: Any,
) -> None:
    """The churn, in a process of its own (its CPU and memory are not the controller's), on one kept-alive
    connection: each cycle deletes the Secret of each namespace and creates it again half a cycle later
    (mode "delete"), or patches it (mode "patch"); the Secret is present when it stops."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.load_cert_chain(cert, key)
    host = urllib.parse.urlsplit(url)
    conn = http.client.HTTPSConnection(host.hostname or "127.0.0.1", host.port, context=ctx, timeout=30)

    def send(method: str, path: str, body: dict[str, Any] | None = None, ctype: str = "application/json") -> int:
        nonlocal conn
        data = None if body is None else json.dumps(body).encode()
        try:
            conn.request(method, path, body=data, headers={"Content-Type": ctype} if data is not None else {})
            r = conn.getresponse()
            r.read()
            return int(r.status)
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPSConnection(host.hostname or "127.0.0.1", host.port, context=ctx, timeout=30)
            return 0

    nxt = time.monotonic()
    n = 0
    while not stop.is_set():
        n += 1
        for ns in namespaces:
            path = f"/api/v1/namespaces/{ns}/secrets"
            if mode == "delete":
                ok = send("DELETE", f"{path}/{SECRET}") in (200, 202, 404)
            else:
                patch = {"stringData": {"token": f"x{n}"}}
                ok = send("PATCH", f"{path}/{SECRET}", patch, "application/merge-patch+json") == 200
            errors.value += not ok
        if mode == "delete":  # gone for half the cycle, then back
            stop.wait(max(0.0, nxt + every / 2 - time.monotonic()))
            for ns in namespaces:
                errors.value += send("POST", f"/api/v1/namespaces/{ns}/secrets", _secret(ns, n)) not in (200, 201)
        cycles.value = n
        nxt += every
        stop.wait(max(0.0, nxt - time.monotonic()))
    for ns in namespaces:  # present at the end, whatever the last cycle did
        send("POST", f"/api/v1/namespaces/{ns}/secrets", _secret(ns, 0))


class Churner:
    """`_churn_process` in a spawned process, until `stop()`."""

    def __init__(self, cp: ControlPlane, namespaces: list[str], mode: str, every: float) -> None:
        mp = multiprocessing.get_context("spawn")
        self.stop_event, self._cycles, self._errors = mp.Event(), mp.Value("i", 0), mp.Value("i", 0)
        cert, key = cp._admin_cert_files()
        ca = Path(tempfile.mkdtemp(prefix="pfw-churn-")) / "ca.crt"
        ca.write_bytes(cp.ca_pem or b"")
        self.proc = mp.Process(
            target=_churn_process,
            args=(cp.server_url, str(ca), str(cert), str(key), namespaces, mode, every, self.stop_event,
                  self._cycles, self._errors),
            daemon=True,
        )  # fmt: skip

    @property
    def cycles(self) -> int:
        return int(self._cycles.value)

    @property
    def errors(self) -> int:
        return int(self._errors.value)

    def start(self) -> None:
        self.proc.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.proc.join(120)


def stored_secret_fails(cp: ControlPlane, namespaces: list[str]) -> int:
    """The stored Reports' results of the Secrets check that say fail, in `namespaces`."""
    fails = 0
    for ns in namespaces:
        status, body = cp.get_raw(f"/apis/openreports.io/v1alpha1/namespaces/{ns}/reports/preflight-webhook")
        if status != 200:
            continue
        fails += sum(
            1
            for r in json.loads(body).get("results") or []
            if r.get("policy") == "Secrets" and r.get("result") == "fail"
        )
    return fails


async def churn(
    cp: ControlPlane, run: Any, namespaces: list[str], *, seconds: float, mode: str, every: float
) -> dict[str, Any]:
    """Churn for `seconds` and sample; then wait for the stored Reports to hold no Secrets fail."""
    c = run.controller
    samples: list[dict[str, float]] = []
    t0, cpu0, ev0, scans0 = time.monotonic(), _cpu_s(), sum(c.evaluations.values()), c.scans
    churner = Churner(cp, namespaces, mode, every)
    churner.start()
    most_queue = most_tasks = 0
    most_stale = 0
    try:
        while (el := time.monotonic() - t0) < seconds:
            await asyncio.sleep(min(SAMPLE, seconds - el))
            q, tasks = len(c.debouncer), len(asyncio.all_tasks())
            most_queue, most_tasks = max(most_queue, q), max(most_tasks, tasks)
            s = {"t": time.monotonic() - t0, "rss": _rss_mib(), "cpu": _cpu_s() - cpu0, "queue": q,
                 "processing": c.debouncer.processing, "tasks": tasks, "evals": sum(c.evaluations.values()) - ev0,
                 "scans": c.scans - scans0, "cycles": churner.cycles}  # fmt: skip
            samples.append(s)
            print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in s.items()), flush=True)
    finally:
        await asyncio.to_thread(churner.stop)
    churned = time.monotonic() - t0
    cpu = _cpu_s() - cpu0
    # the Secret is back: how long until no stored Report says fail for it
    t1 = time.monotonic()
    cleared = None
    while time.monotonic() - t1 < 600:
        fails = await asyncio.to_thread(stored_secret_fails, cp, namespaces)
        most_stale = max(most_stale, fails)
        if fails == 0:
            cleared = time.monotonic() - t1
            break
        await asyncio.sleep(0.5)
    return {
        "seconds": churned, "cycles": churner.cycles, "errors": churner.errors, "samples": samples,
        "cpu_per_s": cpu / churned, "evals": sum(c.evaluations.values()) - ev0, "scans": c.scans - scans0,
        "most_queue": most_queue, "most_tasks": most_tasks, "cleared_s": cleared, "stale_at_stop": most_stale,
        "rss_after": _rss_mib(), "pid": os.getpid(),
    }  # fmt: skip


def drift(samples: list[dict[str, float]]) -> tuple[float, float, float]:
    """(first, last, spread %) of RSS over the samples after the first quarter (the queue's warm-up)."""
    rss = [s["rss"] for s in samples[len(samples) // 4 :]] or [s["rss"] for s in samples]
    lo, hi = min(rss), max(rss)
    return rss[0], rss[-1], 100.0 * (hi - lo) / lo if lo else 0.0
