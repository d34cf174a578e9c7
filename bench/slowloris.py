"""Slowloris against `preflight-webhook serve --offline`: RSS, and whether the server closes them.

    PYTHONPATH=. .venv/bin/python bench/slowloris.py [--connections 1000] [--config FILE] [--port 18443]

Starts the server (self-signed certificate in a temp dir, 127.0.0.1 only), opens N TLS
connections that each send the start of a request head and then nothing, reads the
server's RSS, then waits up to 40 s for the server to close every one of them. Prints one
line; nothing is written to the repository. Run against an older checkout (PYTHONPATH) to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import subprocess
import sys
import tempfile


def rss_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return 0


async def attack(pid: int, port: int, ca: str, n: int) -> str:
    for _ in range(300):  # the listener comes up (a condition, polled)
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            break
        except OSError:
            await asyncio.sleep(0.1)
    ctx = ssl.create_default_context(cafile=ca)
    base = rss_mib(pid)
    peak = base

    async def sample() -> None:  # the server's peak RSS while the attack lasts
        nonlocal peak
        while True:
            peak = max(peak, rss_mib(pid))
            await asyncio.sleep(0.2)

    sampler = asyncio.ensure_future(sample())
    conns = []
    for _ in range(n):
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1")
        except (OSError, ssl.SSLError):
            continue
        w.write(b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        conns.append((r, w))  # keep the writer: a collected StreamWriter closes its connection
    await asyncio.sleep(2)  # held: the server has them all (or has refused them)

    async def closed(r: asyncio.StreamReader) -> bool:
        try:
            return await asyncio.wait_for(r.read(), 40) == b""
        except TimeoutError:
            return False
        except (ConnectionError, ssl.SSLError):
            return True

    done = sum(await asyncio.gather(*(closed(r) for r, _ in conns)))
    sampler.cancel()
    after = rss_mib(pid)
    return (
        f"connections={len(conns)} rss_before={base}MiB rss_peak={peak}MiB rss_after={after}MiB "
        f"closed_by_server_within_40s={done}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--config", help="serve --config FILE")
    ap.add_argument("--port", type=int, default=18443)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="slowloris-") as tmp:
        argv = [
            sys.executable,
            "-m",
            "webhook",
            "serve",
            "--offline",
            "--self-signed",
            f"--certs-dir={tmp}",
            "--host=127.0.0.1",
            f"--port={args.port}",
        ]
        if args.config:
            argv.append(f"--config={args.config}")
        proc = subprocess.Popen(argv, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            print(asyncio.run(attack(proc.pid, args.port, os.path.join(tmp, "ca.crt"), args.connections)))
        finally:
            proc.terminate()
            proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
