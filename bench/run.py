"""What does /validate cost against a no-op aiohttp TLS server (offline checks, sample AIPerfJob)?

    .venv/bin/python bench/run.py [--connections 32] [--requests 15000] [--duration 30] [--quick]

Starts each server in a subprocess on 127.0.0.1 with freshly generated certificates,
drives it with bench/loadgen.py (keep-alive, N connections, TLS), reads the server's
peak RSS (VmHWM) and writes the figures and the command into docs/benchmarks/validate-offline.md between
`<!-- bench:validate-offline -->` markers (other sections of that file are left alone).

Variants: the webhook with stdlib json or orjson, on asyncio or uvloop; each against a
floor on the same event loop. The machine is shared: the load average at the start of
each run is recorded next to its figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import review, write_section  # noqa: E402
from bench.loadgen import LoadResult, run_load  # noqa: E402
from webhook.tls import generate_ca, generate_serving_cert, write_cert_files  # noqa: E402

SAMPLE = ROOT / "tests" / "oracle" / "samples" / "aiperfjob.yaml"
SECTION = "validate-offline"
TARGET_RATIO, TARGET_P99_MS, TARGET_RSS_MIB = 0.60, 15.0, 150.0


@dataclass
class Run:
    label: str
    result: LoadResult
    rss_mib: float
    load_avg: float
    cpu_ms: float  # server CPU time (user+system) per answered request

    @property
    def capacity(self) -> float:
        """Requests per second one core sustains at this CPU cost: insensitive to other load on the machine."""
        return 1000.0 / self.cpu_ms if self.cpu_ms else 0.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def review_body(unhandled: bool = False) -> bytes:
    obj = yaml.safe_load(SAMPLE.read_text())
    group = "aiperf.nvidia.com"
    if unhandled:  # same bytes, a group no adapter handles: the server path without adapter and checks
        group = "bench.example.com"  # request.kind must name the object's own group (the server checks)
        obj["apiVersion"] = f"{group}/v1alpha1"
    return review(obj, kind={"group": group, "version": "v1alpha1", "kind": "AIPerfJob"})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def start(cmd: list[str], env: dict[str, str], port: int, client: ssl.SSLContext) -> subprocess.Popen[bytes]:
    env = dict(env, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as raw:
                with client.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    tls.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                    if b" 200 " in tls.recv(4096):
                        return proc
        except OSError:
            pass
        time.sleep(0.1)  # polling a subprocess's port: no event to wait on
    proc.kill()
    raise RuntimeError(f"{' '.join(cmd)} did not become ready")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def one_answer(port: int, body: bytes, client: ssl.SSLContext) -> dict[str, Any]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with client.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            head = (
                f"POST /validate?timeout=10s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            tls.sendall(head + body)
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def measure(
    label: str,
    cmd: list[str],
    env: dict[str, str],
    port: int,
    body: bytes,
    client: ssl.SSLContext,
    args: argparse.Namespace,
) -> tuple[Run, dict[str, Any]]:
    proc = start(cmd, env, port, client)
    try:
        answer = one_answer(port, body, client)
        load = os.getloadavg()[0]
        cpu0 = [0.0]
        result = asyncio.run(
            run_load(
                f"https://127.0.0.1:{port}/validate?timeout=10s",
                body,
                ssl_context=client,
                connections=args.connections,
                requests=args.requests,
                duration=args.duration,
                warmup=args.warmup,
                on_start=lambda: cpu0.__setitem__(0, cpu_seconds(proc.pid)),
            )
        )
        cpu_ms = (cpu_seconds(proc.pid) - cpu0[0]) * 1000.0 / max(1, result.requests)
        rss = peak_rss_mib(proc.pid)
    finally:
        stop(proc)
    run = Run(label, result, rss, load, cpu_ms)
    print(
        f"{label:<34} {result.throughput:8.0f} req/s  cpu {cpu_ms:5.2f} ms/req  p50 {result.percentile(50):6.2f}  p95 {result.percentile(95):6.2f}  "
        f"p99 {result.percentile(99):6.2f} ms  errors {result.errors}  RSS {rss:6.1f} MiB  load {load:.2f}",
        flush=True,
    )
    return run, answer


def available(mod: str) -> bool:
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--requests", type=int, default=15000, help="measured requests per run")
    p.add_argument("--duration", type=float, default=30.0, help="upper bound of each measured run (s)")
    p.add_argument("--warmup", type=int, default=1000, help="unmeasured requests before each run")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks/ alone")
    p.add_argument("--quick", action="store_true", help="a smoke run in seconds at toy sizes; writes nothing")
    args = p.parse_args()
    if args.quick:
        args.requests, args.duration, args.warmup, args.no_write = 100, 2.0, 10, True

    tmp = Path(tempfile.mkdtemp(prefix="preflight-bench-"))
    ca = generate_ca()
    files = write_cert_files(tmp, ca, generate_serving_cert(ca, ["localhost"], ["127.0.0.1"]))
    client = ssl.create_default_context(cafile=str(files.ca_cert))
    body = review_body()
    py = sys.executable

    def serve(port: int) -> list[str]:
        """`preflight-webhook serve --offline` on 127.0.0.1:port with the bench certificate."""
        return [py, "-m", "webhook", "serve", "--offline", "--host", "127.0.0.1", "--port", str(port),
                "--tls-cert", str(files.cert), "--tls-key", str(files.key), "--log-level", "warning"]  # fmt: skip

    loops = ["asyncio"] + (["uvloop"] if available("uvloop") else [])
    codecs = ["stdlib"] + (["orjson"] if available("orjson") else [])
    runs: dict[str, Run] = {}
    answer: dict[str, Any] = {}
    for loop in loops:
        env = dict(os.environ, PREFLIGHT_WEBHOOK_LOOP=loop)
        port = free_port()
        runs[f"floor/{loop}"], _ = measure(
            f"floor (no-op aiohttp TLS) {loop}",
            [
                py,
                "bench/noop_server.py",
                "--port",
                str(port),
                "--tls-cert",
                str(files.cert),
                "--tls-key",
                str(files.key),
            ],
            env,
            port,
            body,
            client,
            args,
        )
        for codec in codecs:
            port = free_port()
            env_c = dict(env, PREFLIGHT_WEBHOOK_JSON=codec)
            runs[f"webhook/{loop}/{codec}"], answer = measure(
                f"webhook {loop} + {codec} json",
                serve(port),
                env_c,
                port,
                body,
                client,
                args,
            )
        port = free_port()
        runs[f"path/{loop}/stdlib"], _ = measure(
            f"webhook {loop}, server path only",
            serve(port),
            dict(env, PREFLIGHT_WEBHOOK_JSON="stdlib"),
            port,
            review_body(unhandled=True),
            client,
            args,
        )

    command = ".venv/bin/python bench/run.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    text = render(runs, answer, args, command.strip())
    print(text)
    if not args.no_write:
        write_section(SECTION, text)
    return 0


def _row(run: Run, floor: Run | None) -> str:
    r = run.result
    ratio = f"{r.throughput / floor.result.throughput:.0%}" if floor else "—"
    cpu_ratio = f"{floor.cpu_ms / run.cpu_ms:.0%}" if floor and run.cpu_ms else "—"
    return (
        f"| {run.label} | {r.throughput:,.0f} | {ratio} | {run.cpu_ms:.2f} | {cpu_ratio} | {r.percentile(50):.2f} | {r.percentile(95):.2f} | "
        f"{r.percentile(99):.2f} | {r.errors} | {run.rss_mib:.0f} | {run.load_avg:.2f} |"
    )


def render(runs: dict[str, Run], answer: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    import aiohttp

    from webhook.checks import check_names

    resp = answer.get("response", {})
    lines = [
        "## /validate, offline checks, sample AIPerfJob",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {os.cpu_count()} cores ({platform.processor() or platform.machine()}), Python {platform.python_version()}, "
        f"aiohttp {aiohttp.__version__}; load generator and server share the cores. "
        f"{args.connections} keep-alive TLS connections, {args.requests} measured requests per run "
        f"(bounded to {args.duration:.0f} s) after {args.warmup} warm-up requests; latency in ms; RSS is the server's peak (VmHWM).",
        "",
        f"Request: CREATE of `tests/oracle/samples/aiperfjob.yaml`; checks registered: {', '.join(check_names())}. "
        f"Answer: allowed={resp.get('allowed')}, {len(resp.get('warnings') or [])} warning(s)"
        + (f": {'; '.join(resp.get('warnings') or [])}" if resp.get("warnings") else "")
        + ".",
        "",
        'Rows "server path only" send the same review with an apiVersion no adapter handles: envelope parsing, '
        "metrics, response and TLS, without the adapter and the checks.",
        "",
        '"CPU ms/req" is the server process\'s user+system CPU per answered request; "CPU vs floor" is '
        "floor CPU / our CPU, i.e. the throughput ratio the two would have with a core each, independent of "
        "whatever else the shared machine runs (the load average column shows how busy it was).",
        "",
        "| run | req/s | vs floor | CPU ms/req | CPU vs floor | p50 | p95 | p99 | errors | RSS MiB | load avg |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, run in runs.items():
        loop = key.split("/")[1]
        lines.append(_row(run, None if key.startswith("floor") else runs.get(f"floor/{loop}")))
    lines += ["", verdict(runs)]
    return "\n".join(lines)


def verdict(runs: dict[str, Run]) -> str:
    out = []
    for key, run in runs.items():
        if key.startswith("floor"):
            continue
        floor = runs[f"floor/{key.split('/')[1]}"]
        ratio = run.result.throughput / floor.result.throughput
        cpu_ratio = floor.cpu_ms / run.cpu_ms if run.cpu_ms else 0.0
        ok = ratio >= TARGET_RATIO and run.result.percentile(99) <= TARGET_P99_MS and run.rss_mib <= TARGET_RSS_MIB
        out.append(
            f"- {run.label}: {ratio:.0%} of floor ({cpu_ratio:.0%} by CPU cost), p99 {run.result.percentile(99):.1f} ms, {run.rss_mib:.0f} MiB → "
            f"{'meets' if ok else 'misses'} the target (≥ 60 %, ≤ 15 ms, ≤ 150 MiB)"
        )
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
