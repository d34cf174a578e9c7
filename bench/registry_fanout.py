"""What does one review of a JobSet with N distinct images cost in registry lookups, memory and descriptors, and is a broken one still denied?

    .venv/bin/python bench/registry_fanout.py [--write] [--quick] [--root DIR]

Issue 33: with `registryAccess.mode: all`, one JobSet naming N distinct images was looked up N
times at once (a session, a connector and a TLS handshake each): +320 MiB at 1,000 images,
5,010 descriptors at 5,000, and at 2,000 the review ran past its budget, so `timeoutAction: warn`
admitted a broken job (an imagePullSecret that does not exist, on a registry in
`privateRegistries`: the Secrets check denies it with one image).

Each row is one fresh process (`--one N`) that judges that JobSet through `evaluate()` under the
server's own outer bound (budget + safetyMargin/2, as webhook/server.py wraps it): a timeout there
is what the server turns into `timeoutAction` (warn: admitted). The registry is
e2e/harness/hostile_registry.py in a process of its own, over real TLS on 127.0.0.1 (listed in
`registryAccess.internalRegistries`), answering every manifest HEAD 200 at once. Columns: the
requests the registry got, the RSS growth (peak VmHWM minus the RSS before the review), the most
descriptors open at once (sampled every 5 ms), the wall time and the decision. `--root DIR` runs
the reviews with the webhook package of another checkout (the "before" rows: the commit before the
fix, with only config.py taken from after it so that the same settings parse). `--write` puts the
table into docs/benchmarks/registry-fanout.md (section bench:registry-fanout).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: the checkout whose webhook package is imported (--root passes it on to the review's process)
sys.path.insert(0, os.environ.get("REGISTRY_FANOUT_ROOT", str(ROOT)))
DOC = ROOT / "docs" / "benchmarks" / "registry-fanout.md"

NS = "bench"


def jobset(registry: str, n: int) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": f"{registry}/team/app{i}:1.0"} for i in range(n)]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "fanout", "namespace": NS},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": {
            "containers": containers, "imagePullSecrets": [{"name": "missing-pull"}]}}}}}]},
    }  # fmt: skip


def _status(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def one(n: int, registry: str, ca_file: str) -> dict[str, Any]:
    """Judge the JobSet of `n` images in this process: what it cost and what was decided."""
    from tests.fakeview import FakeView
    from webhook.config import Settings
    from webhook.deadline import Deadline
    from webhook.preflight import evaluate

    ra = {"mode": "all", "internalRegistries": [registry], "caFile": ca_file, "timeoutSeconds": 2, "cacheSeconds": 0}
    settings = Settings(registryAccess=ra, privateRegistries=[registry])
    view = FakeView({"namespaces": [{"metadata": {"name": NS}}]})
    fds = [len(os.listdir("/proc/self/fd"))]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            fds.append(len(os.listdir("/proc/self/fd")))

    async def review() -> tuple[str, list[str]]:
        deadline = Deadline(settings.budget_seconds)
        try:
            async with asyncio.timeout(deadline.budget + settings.safety_margin_seconds / 2):
                ev = await evaluate(jobset(registry, n), settings=settings, deadline=deadline, view=view)
        except TimeoutError:
            return f"timed out: timeoutAction {settings.timeout_action}", []
        return ("denied" if not ev.decision.allowed else "allowed"), ev.decision.denied_checks

    async def main() -> tuple[str, list[str]]:
        # the same review once with 1 image: imports, the session and the TLS context are warm
        warm = jobset(registry, 1)
        await evaluate(warm, settings=settings, deadline=Deadline(4), view=view)
        before = _status("VmRSS")
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.perf_counter()
        try:
            decided, denied = await review()
        finally:
            done.set()
        result["seconds"] = round(time.perf_counter() - started, 2)
        result["rss_mib"] = round(_status("VmHWM") - before, 1)
        return decided, denied

    result: dict[str, Any] = {"images": n}
    decided, denied = asyncio.run(main())
    result.update(decision=decided, denied=denied, fds=max(fds))
    return result


def serve(port_file: str, ca_file: str) -> None:
    """The registry's process: every manifest HEAD answered 200; GET /count says how many requests came."""
    from e2e.harness.hostile_registry import HostileServer, Reply, json_reply

    with HostileServer() as reg:
        reg.default = Reply(200, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
        reg.route("GET", "/count", lambda _: json_reply({"count": len(reg.seen)}))
        reg.write_ca(Path(ca_file))
        Path(port_file).write_text(str(reg.port))
        threading.Event().wait()


def _count(port: int, ca_file: str) -> int:
    import ssl

    ctx = ssl.create_default_context(cafile=ca_file)
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/count", context=ctx, timeout=10) as r:
        return int(json.loads(r.read())["count"]) - 1  # not counting this one


def run(sizes: list[int], root: Path) -> list[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="registry-fanout-"))
    port_file, ca_file = tmp / "port", tmp / "ca.pem"
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(str(port_file), str(ca_file)))
    server.start()
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():  # polling a file the server writes, bounded
            assert time.monotonic() < deadline and server.is_alive(), "the registry did not start"
            time.sleep(0.05)
        port = int(port_file.read_text())
        rows = []
        for n in sizes:
            before = _count(port, str(ca_file))
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--one", str(n), "--registry",
                 f"127.0.0.1:{port}", "--ca", str(ca_file)],
                cwd=root, env={**os.environ, "PYTHONPATH": str(root), "REGISTRY_FANOUT_ROOT": str(root)}, capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            if proc.returncode != 0:
                raise SystemExit(proc.stderr[-3000:])
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            # not counted: the first /count (seen after `before` was read) and the warm-up review's one HEAD
            row["requests"] = _count(port, str(ca_file)) - before - 2
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
        return rows
    finally:
        server.terminate()
        server.join(10)


def markdown(rows: list[dict[str, Any]], label: str) -> str:
    out = [
        f"{label}: {time.strftime('%Y-%m-%d', time.gmtime())}, `{' '.join(sys.argv)}`, {os.cpu_count()} cores.",
        "",
        "| images | registry requests | RSS growth (MiB) | descriptors (max) | seconds | decision | denied by |",
        "|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['images']:,} | {r['requests']:,} | {r['rss_mib']} | {r['fds']:,} | {r['seconds']} | "
            f"{r['decision']} | {', '.join(r['denied']) or '-'} |"
        )
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a smoke run at toy sizes (1, 30 images); writes nothing")
    p.add_argument("--write", action="store_true", help="write the table into docs/benchmarks/registry-fanout.md")
    p.add_argument("--root", type=Path, default=ROOT, help="the checkout whose webhook package judges (default: this)")
    p.add_argument("--label", default="after", help="the table's label (e.g. before, after)")
    p.add_argument("--sizes", default="1,1000,2000", help="comma-separated image counts")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)
    p.add_argument("--registry", help=argparse.SUPPRESS)
    p.add_argument("--ca", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one is not None:
        print(json.dumps(one(args.one, args.registry, args.ca)))
        return
    sizes = [1, 30] if args.quick else [int(s) for s in args.sizes.split(",")]
    table = markdown(run(sizes, args.root.resolve()), args.label)
    print(table)
    if args.write and not args.quick:
        write(f"registry-fanout-{args.label}", table)


def write(name: str, body: str) -> None:
    """Replace (or append) the `<!-- bench:NAME -->` section of docs/benchmarks/registry-fanout.md."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    section = f"{begin}\n{body.strip()}\n{end}"
    text = (
        DOC.read_text()
        if DOC.exists()
        else "# registry-fanout\n\nRaw runs; the guide is [docs/benchmarks.md](../benchmarks.md).\n"
    )
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        text = before + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.write_text(text)


if __name__ == "__main__":
    main()
