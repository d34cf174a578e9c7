"""What does the webhook hold before it has cached anything, and which imports make it up?

Issue 38, item 3 ("Do not import what is never used").

    .venv/bin/python bench/import_weight.py [--runs 5] [--cluster] [--write | --quick]

Every figure is the resident set (VmRSS of /proc/PID/status) of a fresh process, the median of
`--runs` processes:

- import sets: `python -c` that imports a set of modules and prints its own VmRSS: a bare Python,
  `import webhook.cli` (what `python -m webhook` loads before it parses its arguments), the
  modules `serve` imports when it runs offline (webhook/cli/serve.py `_serve`, the adapters that
  `_freeze_startup_objects` imports included) and online (the same plus webhook.cluster.live), and
  `import kubernetes_asyncio` alone;
- the idle offline webhook: `python -m webhook serve --offline` on a trustme certificate (as
  tests/conftest.py makes them), after /readyz answered 200 and one AdmissionReview (the sample
  AIPerfJob) was answered;
- what serve defers until it is used (DEFERRED: cel, cryptography, the other commands, jsonschema,
  kubernetes_asyncio), each as what importing it adds over serve's online import set;
- with `--cluster`: the idle webhook against a local control plane (e2e/harness/controlplane.py,
  etcd + kube-apiserver, no Node; its CRDs and nothing else, so the caches are small), after
  /readyz (caches synced) and the probe review the apiserver sends it (e2e/harness/runner.py).

Then what the online import set is made of, in one process per run: the RSS after each step of the
order `serve` reaches them (each step is charged what it loads first), and the top modules of
`python -X importtime` by cumulative time.

`--write` puts the tables and the command into docs/benchmarks/import-weight.md between
`<!-- bench:import-weight -->` markers; `--quick` runs once each and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import review, write_section  # noqa: E402

SECTION = "import-weight"
SAMPLE = ROOT / "tests" / "oracle" / "samples" / "aiperfjob.yaml"

#: what webhook/cli/serve.py `_serve` imports, offline; `serve` imports webhook.cli first
SERVE_OFFLINE = (
    "import webhook.cli, webhook.cli.serve, webhook.tls, webhook.listener, webhook.metrics, webhook.server\n"
    "from webhook.workloads import import_adapters; import_adapters()"
)
SERVE_ONLINE = SERVE_OFFLINE + "\nimport webhook.cluster.live"

IMPORT_SETS: list[tuple[str, str]] = [
    ("bare Python (`pass`)", "pass"),
    ("`import webhook.cli`", "import webhook.cli"),
    ("`serve --offline`'s import set", SERVE_OFFLINE),
    ("`serve`'s import set (online: + webhook.cluster.live)", SERVE_ONLINE),
    ("`import kubernetes_asyncio` alone", "import kubernetes_asyncio"),
]

#: the online import set, step by step in the order serve reaches it: (label, statement)
STEPS: list[tuple[str, str]] = [
    ("asyncio, ssl, json, logging (stdlib)", "import asyncio, ssl, json, logging, argparse"),
    ("webhook.cli (the command table; a command's module loads when it runs)", "import webhook.cli"),
    ("yaml", "import yaml"),
    ("pydantic", "import pydantic"),
    ("webhook.config (pydantic models)", "import webhook.config"),
    ("aiohttp", "import aiohttp, aiohttp.web"),
    ("webhook.cli.serve (the checks, policy, admission)", "import webhook.cli.serve"),
    ("webhook.tls (the SSL context; cryptography only to generate a pair)", "import webhook.tls"),
    ("prometheus_client (webhook.metrics)", "import webhook.metrics"),
    ("webhook.server, webhook.listener", "import webhook.server, webhook.listener"),
    ("the workload adapters", "from webhook.workloads import import_adapters; import_adapters()"),
    ("webhook.cluster.live (the view, caches, client, kubeconfig loader)", "import webhook.cluster.live"),
]

#: what serve leaves out until it is used (tests/test_import_weight.py holds each): (label, statement),
#: each measured on top of serve's online import set
DEFERRED: list[tuple[str, str]] = [
    ("cel: the first CEL compile (its __init__ imports cel.cli: prompt_toolkit)", "import cel"),
    (
        "cryptography: generating a pair (serve --self-signed, certs)",
        "import cryptography.x509, cryptography.hazmat.primitives.asymmetric.ec",
    ),
    (
        "the check and plan commands (the manifest reader, the report formats)",
        "import webhook.cli.check, webhook.cli.plan",
    ),
    ("jsonschema: check --offline's CRD schemas", "import jsonschema"),
    ("kubernetes_asyncio: certs manage, an auth-provider kubeconfig user", "import kubernetes_asyncio"),
]

RSS_FN = (
    "import re as _re\n"
    "def _rss():\n"
    "    with open('/proc/self/status') as f:\n"
    "        return int(_re.search(r'VmRSS:\\s+(\\d+)', f.read()).group(1)) / 1024\n"
)


def child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PREFLIGHT_WEBHOOK_LOOP="asyncio")


def python(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=child_env(), capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"child failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return out.stdout


def import_set_rss(code: str) -> float:
    return float(python(f"{RSS_FN}{code}\nprint(_rss())").split()[-1])


def steps_rss() -> list[float]:
    """RSS before any step, then after each step, in one process."""
    lines = [RSS_FN, "_out = [_rss()]"]
    for _, stmt in STEPS:
        lines.append(stmt)
        lines.append("_out.append(_rss())")
    lines.append("print(' '.join(f'{x:.2f}' for x in _out))")
    return [float(x) for x in python("\n".join(lines)).split()]


def deferred_rss() -> list[float]:
    """What each of DEFERRED adds over serve's online import set, each in its own process."""
    out = []
    for _, stmt in DEFERRED:
        code = f"{RSS_FN}{SERVE_ONLINE}\n_before = _rss()\n{stmt}\nprint(_rss() - _before)"
        out.append(float(python(code).split()[-1]))
    return out


def top_importtime(code: str, n: int = 15) -> list[tuple[str, float, int]]:
    """(package, import ms, modules) of the `n` top-level packages whose modules took longest to import
    (the sum of their modules' own times, `python -X importtime`)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    total: dict[str, float] = {}
    count: dict[str, int] = {}
    for line in out.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| *(\S+)", line)
        if m:
            top = m.group(3).split(".")[0]
            if top == "webhook":  # the project's own packages, one level down
                top = ".".join(m.group(3).split(".")[:2])
            total[top] = total.get(top, 0.0) + int(m.group(1)) / 1000
            count[top] = count.get(top, 0) + 1
    ranked = sorted(total, key=lambda k: -total[k])[:n]
    return [(k, total[k], count[k]) for k in ranked]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vm_status(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a live process, MiB."""
    text = Path(f"/proc/{pid}/status").read_text()

    def field(name: str) -> float:
        m = re.search(rf"{name}:\s+(\d+)", text)
        return int(m.group(1)) / 1024 if m else float("nan")

    return field("VmRSS"), field("VmHWM")


def offline_webhook_rss(workdir: Path) -> tuple[float, float]:
    """`serve --offline` on a trustme certificate; its (RSS, peak) after /readyz and one review."""
    import trustme
    import yaml

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert_file, key_file, ca_file = workdir / "tls.crt", workdir / "tls.key", workdir / "ca.crt"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    ca.cert_pem.write_to_path(str(ca_file))
    ctx = ssl.create_default_context(cafile=str(ca_file))
    port = free_port()
    argv = [sys.executable, "-m", "webhook", "serve", "--offline", "--host=127.0.0.1", f"--port={port}"]
    argv += [f"--tls-cert={cert_file}", f"--tls-key={key_file}"]
    log = open(workdir / "serve.log", "wb")
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        url = f"https://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"serve exited with {proc.returncode}: {(workdir / 'serve.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=5, context=ctx) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("serve --offline never became ready")
            time.sleep(0.1)
        body = review(yaml.safe_load(SAMPLE.read_text()))
        req = urllib.request.Request(
            f"{url}/validate?timeout=10s", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
            answer = json.loads(r.read())
        if "allowed" not in answer.get("response", {}):
            raise RuntimeError(f"no verdict: {answer}")
        return vm_status(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def cluster_webhook_rss(runs: int) -> list[tuple[float, float]]:
    """`serve` against a fresh local control plane: (RSS, peak) after /readyz and the apiserver's probe review."""
    from e2e.harness.controlplane import ControlPlane
    from e2e.harness.runner import RunningWebhook

    out = []
    with ControlPlane(verbose=False) as cp:
        for _ in range(runs):
            with RunningWebhook(cp, log_level="warning") as hook:
                assert hook.pid is not None
                out.append(vm_status(hook.pid))
    return out


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def fmt(xs: list[float]) -> str:
    return f"{median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per figure (default 5)")
    ap.add_argument("--cluster", action="store_true", help="also measure serve against a local control plane")
    ap.add_argument("--commit", help="the code's commit to record, when this checkout has no .git (an export)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help="write docs/benchmarks/import-weight.md's section")
    g.add_argument("--quick", action="store_true", help="one run each, write nothing")
    args = ap.parse_args()
    runs = 1 if args.quick else args.runs
    load = os.getloadavg()[0]
    commit = (
        args.commit
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    )

    rows: list[tuple[str, list[float]]] = []
    for label, code in IMPORT_SETS:
        rows.append((label, [import_set_rss(code) for _ in range(runs)]))
        print(f"{label}: {fmt(rows[-1][1])} MiB", flush=True)

    offline: list[tuple[float, float]] = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="import-weight-") as tmp:
            offline.append(offline_webhook_rss(Path(tmp)))
    print(f"idle offline webhook: {fmt([r for r, _ in offline])} MiB", flush=True)

    online: list[tuple[float, float]] = cluster_webhook_rss(runs) if args.cluster else []
    if online:
        print(f"idle webhook on the control plane: {fmt([r for r, _ in online])} MiB", flush=True)

    step_runs = [steps_rss() for _ in range(runs)]
    step_rows = []
    for i, (label, _) in enumerate(STEPS):
        deltas = [r[i + 1] - r[i] for r in step_runs]
        step_rows.append((label, median(deltas), median([r[i + 1] for r in step_runs])))
    base = median([r[0] for r in step_runs])
    deferred_runs = [deferred_rss() for _ in range(runs)]
    times = top_importtime(SERVE_ONLINE)

    lines = [
        "## Resident memory of imports and of the idle webhook (`bench/import_weight.py`)",
        "",
        f"`python bench/import_weight.py --runs {runs}{' --cluster' if args.cluster else ''}"
        f"{' --write' if args.write else ''}{f' --commit {args.commit}' if args.commit else ''}` ({date.today().isoformat()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores, load average {load:.1f}; code: {commit}). VmRSS in MiB, the median of {runs} "
        "fresh processes (min–max in parentheses).",
        "",
        "| process | RSS MiB |",
        "|---|---:|",
    ]
    lines += [f"| {label} | {fmt(xs)} |" for label, xs in rows]
    lines.append(
        f"| idle `serve --offline` after one review (peak {median([p for _, p in offline]):.1f}) | "
        f"{fmt([r for r, _ in offline])} |"
    )
    if online:
        lines.append(
            f"| idle `serve` on the local control plane, caches synced, after the probe review "
            f"(peak {median([p for _, p in online]):.1f}) | {fmt([r for r, _ in online])} |"
        )
    lines += [
        "",
        f"What `serve`'s online import set is made of: one process, each step charged what it loads first "
        f"(median of {runs}; a bare interpreter with the measuring code holds {base:.1f} MiB):",
        "",
        "| step | + MiB | RSS after |",
        "|---|---:|---:|",
    ]
    lines += [f"| {label} | {d:.1f} | {after:.1f} |" for label, d, after in step_rows]
    lines += [
        "",
        "What `serve` does not import until it is used (tests/test_import_weight.py), and what importing it "
        f"adds over the online import set (median of {runs}):",
        "",
        "| deferred | + MiB |",
        "|---|---:|",
    ]
    lines += [f"| {label} | {median([r[i] for r in deferred_runs]):.1f} |" for i, (label, _) in enumerate(DEFERRED)]
    lines += [
        "",
        "Where the online import set's time goes (`python -X importtime`, one run; the own time of every "
        "module summed per top-level package, the project's own per subpackage):",
        "",
        "| package | ms | modules |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {ms:.0f} | {k} |" for name, ms, k in times]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
