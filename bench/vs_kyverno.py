"""Is an apply slower with this webhook than with Kyverno doing less, and how far is it from a no-op?

    .venv/bin/python bench/vs_kyverno.py [--clients 1,8,32] [--per-client 20] [--rounds 1] [--profile] [--no-write]

Issue 22, part 2. One local control plane (e2e/harness/controlplane.py) with the sample
prerequisites (bench/cluster_bench.py ``setup_samples``), and four modes, only one registered at a
time, measured in turn (bench/apply_latency.py ``measure_rounds``; the order reversed every other round):

no webhook      the apiserver's own cost, the baseline
no-op webhook   bench/noop_server.py --echo-uid, registered exactly like ours (apply_latency.NoopWebhook)
Kyverno         Kyverno 1.19.1's admission controller (``e2e/build.sh kyverno``, run by
                e2e/harness/kyverno.py as a local process, as its ``--serverIP`` flag is for), with
                :func:`policy`: one ClusterPolicy in Enforce on the kinds our webhook judges
                (AIPerfJob, AIPerfSweep, TrainJob), failurePolicy Fail (Kyverno's default, like
                ours), with a rule of each kind the issue names:
                  - every Secret a job's env (``secretKeyRef``) or pull secrets name exists: a
                    ``foreach`` with an ``apiCall`` context that GETs each Secret (Kyverno's way to
                    read the cluster), denied when the GET fails;
                  - a job that names a Kueue queue (label ``kueue.x-k8s.io/queue-name``) names a
                    non-empty one;
                  - no job image is ``:latest``.
                Kyverno registers its own webhook for the kinds its policies match; "on" is the
                policy in place (Ready) and a ``:latest`` probe refused with its message, "off" the
                policy deleted and the probe no longer refused by it.
preflight       ``python -m webhook serve`` with the default config (every check, Dry Run on:
                strictly more than the policy above: the same Secret and image questions, and the
                derived JobSet, pods, quotas, Kueue, nodes, runtime, endpoints...)

The clients are bench/loadgen.py (admin client certificate, keep-alive TLS) POSTing the sample
TrainJob and AIPerfJob (e2e/samples/) to their collections with ``?dryRun=All`` (judged like a create,
nothing stored) at each client count. Added latency = the mode's percentile minus the no-webhook
percentile at the same client count; the 95 % intervals are bench/apply_latency.py's bootstrap.

Why not the real node: admission happens in the kube-apiserver, which calls each webhook by URL;
the node (kubelet, containerd) takes no part in a dry-run create. Kyverno and the webhook run as local
processes against the local control plane, as the harness already runs them
(docs/benchmarks.md says so next to the table).

The render cache (webhook/workloads/render_cache.py): the webhook's
``preflight_webhook_render_cache_total`` is read before and after each of its measurements, per sample,
and so is ``preflight_webhook_check_duration_seconds`` (where the webhook's own time goes, per check).
``--profile`` (py-spy, when installed: ``.venv/bin/pip install py-spy``) samples the webhook process
during its phase and adds the functions that take its time to the section.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.apply_latency import PATHS, NoopWebhook, interval, measure, measure_rounds, timed_main  # noqa: E402
from bench.cluster_bench import (  # noqa: E402
    SAMPLE_SELECTOR,
    check_times,
    header,
    pct,
    sample,
    set_registered,
    setup_samples,
)
from bench.common import write_section  # noqa: E402
from bench.run import cpu_seconds  # noqa: E402
from e2e.harness.controlplane import ControlPlane  # noqa: E402
from e2e.harness.kyverno import Kyverno, kyverno_version  # noqa: E402
from e2e.harness.runner import RunningWebhook, wait_until  # noqa: E402

SECTION = "vs-kyverno"
NONE, NOOP, KYVERNO, OURS = "no webhook", "no-op webhook", "Kyverno", "preflight"
POLICY_NAME = "preflight-bench-equivalent"
KINDS = ["AIPerfJob", "AIPerfSweep", "TrainJob"]
#: where each kind's images, env and pull secrets are (the samples' kinds; an AIPerfSweep like an AIPerfJob)
IMAGE_PATTERNS = {
    "TrainJob": {"spec": {"=(trainer)": {"=(image)": "!*:latest"}}},
    "AIPerfJob": {"spec": {"=(image)": "!*:latest"}},
    "AIPerfSweep": {"spec": {"=(image)": "!*:latest"}},
}
ENV_LISTS = {
    "TrainJob": "request.object.spec.trainer.env[?valueFrom.secretKeyRef] || `[]`",
    "AIPerfJob": "request.object.spec.podTemplate.env[?valueFrom.secretKeyRef] || `[]`",
    "AIPerfSweep": "request.object.spec.podTemplate.env[?valueFrom.secretKeyRef] || `[]`",
}
PULL_LISTS = {
    "AIPerfJob": "request.object.spec.podTemplate.imagePullSecrets || `[]`",
    "AIPerfSweep": "request.object.spec.podTemplate.imagePullSecrets || `[]`",
}
#: the warm-up requests bench/cluster_bench.py direct_dry_runs sends per client before the measured ones
WARMUP_PER_CLIENT = 2
GOALS = "our p99 below Kyverno's at every client count; our p99 at 8 clients within 2x the no-op's"


def _secret_rule(name: str, kind: str, listing: str, secret_name: str, message: str) -> dict[str, Any]:
    """A foreach over `listing`: GET each Secret (apiCall); a failed GET gives the default, which is denied."""
    return {
        "name": name,
        "match": {"any": [{"resources": {"kinds": [kind], "operations": ["CREATE", "UPDATE"]}}]},
        "validate": {
            "failureAction": "Enforce",
            "message": message,
            "foreach": [
                {
                    "list": listing,
                    "context": [
                        {
                            "name": "found",
                            "apiCall": {
                                "urlPath": f"/api/v1/namespaces/{{{{request.namespace}}}}/secrets/{{{{{secret_name}}}}}",
                                "jmesPath": "metadata.uid",
                                "default": "missing",
                            },
                        }
                    ],
                    "deny": {"conditions": {"any": [{"key": "{{ found }}", "operator": "Equals", "value": "missing"}]}},
                }
            ],
        },
    }


def policy() -> dict[str, Any]:
    """The ClusterPolicy of equivalent intent (see the module docstring)."""
    rules: list[dict[str, Any]] = []
    for kind in KINDS:
        rules.append(
            _secret_rule(
                f"{kind.lower()}-env-secrets-exist",
                kind,
                ENV_LISTS[kind],
                "element.valueFrom.secretKeyRef.name",
                "a Secret named by an env secretKeyRef does not exist in the job's namespace",
            )
        )
        if kind in PULL_LISTS:
            rules.append(
                _secret_rule(
                    f"{kind.lower()}-pull-secrets-exist",
                    kind,
                    PULL_LISTS[kind],
                    "element.name",
                    "an image pull Secret does not exist in the job's namespace",
                )
            )
    match_all = {"any": [{"resources": {"kinds": KINDS, "operations": ["CREATE", "UPDATE"]}}]}
    rules.append(
        {
            "name": "queue-label-not-empty",
            "match": match_all,
            "validate": {
                "failureAction": "Enforce",
                "message": "the label kueue.x-k8s.io/queue-name, when set, must name a LocalQueue",
                "pattern": {"metadata": {"=(labels)": {"=(kueue.x-k8s.io/queue-name)": "?*"}}},
            },
        }
    )
    for kind in KINDS:
        rules.append(
            {
                "name": f"{kind.lower()}-image-not-latest",
                "match": {"any": [{"resources": {"kinds": [kind], "operations": ["CREATE", "UPDATE"]}}]},
                "validate": {
                    "failureAction": "Enforce",
                    "message": "the job's image must be pinned to a tag other than latest",
                    "pattern": IMAGE_PATTERNS[kind],
                },
            }
        )
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {"background": False, "failurePolicy": "Fail", "rules": rules},
    }


def _probe_answer(cp: ControlPlane) -> str:
    """A dry-run create of the sample TrainJob with a ``:latest`` image: the apiserver's answer."""
    probe = sample("trainjob-good")
    probe["metadata"]["name"] = "kyverno-probe"
    probe["spec"]["trainer"]["image"] = "registry.example/acme/probe:latest"
    proc = cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False, timeout=60)
    return proc.stdout + proc.stderr


class KyvernoSwitch:
    """Kyverno's policy in place (Kyverno registers and answers for the kinds) or not."""

    def __init__(self, cp: ControlPlane, kyverno: Kyverno) -> None:
        self.cp, self.kyverno = cp, kyverno

    def set(self, on: bool) -> None:
        if on:
            self.cp.apply([policy()])
            self.kyverno.wait_policies([POLICY_NAME])
        else:
            self.cp.kubectl("delete", "clusterpolicy.kyverno.io", POLICY_NAME, "--ignore-not-found")
        what = "refuse" if on else "stop refusing"
        wait_until(
            f"Kyverno to {what} a :latest TrainJob (policy {POLICY_NAME})",
            lambda: (POLICY_NAME in _probe_answer(self.cp)) == on,
            timeout=120,
            every=0.5,
        )


class Profiler:
    """py-spy sampling one process (raw collapsed stacks) while a phase runs; see :func:`profile_summary`."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid, self.out = pid, out
        self.proc: subprocess.Popen[bytes] | None = None
        self.files: list[Path] = []

    def start(self) -> None:
        exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
        if exe is None or self.proc is not None:
            return
        out = self.out / f"profile-{len(self.files)}.txt"
        self.files.append(out)
        self.proc = subprocess.Popen(
            [exe, "record", "--pid", str(self.pid), "--format", "raw", "--rate", "200", "--nonblocking",
             "--output", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(2)  # SIGINT: py-spy writes its file and exits
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def stacks(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for f in self.files:
            if f.exists():
                for line in f.read_text(errors="replace").splitlines():
                    stack, _, n = line.rpartition(" ")
                    if stack and n.isdigit():
                        out[stack] += int(n)
        return out


#: where a sample of the webhook process is spent: the leaf-most frame that matches one of these
#: (checked from the leaf up, each frame against the list in order); a sample whose leaf is the
#: selector's poll is the loop waiting for I/O
PROFILE_BUCKETS = [
    ("TLS (ssl)", ("(ssl.py", "(asyncio/sslproto.py")),
    ("JSON, marshal, hashing", ("(json/", "orjson", "dryrun_cache.py")),
    ("render (webhook/workloads)", ("(webhook/workloads/",)),
    ("Dry Run (webhook/checks/dryrun*)", ("(webhook/checks/dryrun",)),
    ("other checks (webhook/checks)", ("(webhook/checks/",)),
    ("cluster view, client (webhook/cluster, webhook/kube)", ("(webhook/cluster/", "(webhook/kube.py")),
    ("server, admission, policy, metrics", ("(webhook/",)),
    ("pydantic", ("(pydantic",)),
]
IDLE = "event loop waiting (selector poll)"
OTHER = "aiohttp, asyncio, other"


def bucket_of(stack: str) -> str:
    frames = stack.split(";")
    if "(selectors.py" in frames[-1]:
        return IDLE
    for frame in reversed(frames):
        for label, marks in PROFILE_BUCKETS:
            if any(m in frame for m in marks):
                return label
    return OTHER


def profile_summary(stacks: Counter[str]) -> list[str]:
    """Shares of the samples by the innermost component they are in, and the top functions by own samples."""
    total = sum(stacks.values())
    if not total:
        return ["No profile (py-spy not installed or not permitted to attach)."]
    buckets: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    for stack, n in stacks.items():
        leaves[stack.split(";")[-1].strip()] += n
        buckets[bucket_of(stack)] += n
    lines = [f"py-spy, {total} samples of the webhook process during its phase (200 Hz, threads on CPU):", ""]
    lines += ["| where (innermost) | share |", "|---|---:|"]
    lines += [f"| {label} | {n / total:.0%} |" for label, n in buckets.most_common()]
    lines += ["", "Top functions by own samples:", ""]
    lines += [f"- {n / total:.1%} `{leaf}`" for leaf, n in leaves.most_common(8)]
    return lines


def render_cache_counts(hook: RunningWebhook) -> tuple[float, float]:
    m = hook.metrics()
    return (
        m.get(("preflight_webhook_render_cache_total", frozenset({("result", "hit")})), 0.0),
        m.get(("preflight_webhook_render_cache_total", frozenset({("result", "miss")})), 0.0),
    )


def accepted_connections(hook: RunningWebhook) -> float:
    """Connections our listener accepted so far (each a TLS handshake)."""
    return hook.metrics().get(("preflight_webhook_connections_total", frozenset({("result", "accepted")})), 0.0)


def connections_line(opened: dict[int, list[float]]) -> str:
    """Connections the apiserver opened to our webhook per 100 reviews, by client count: the apiserver keeps
    at most 25 idle connections per webhook (client-go transport/cache.go idleConnsPerHost) and speaks
    HTTP/1.1 to ours, so more reviews at once than that cost a TLS handshake each."""
    parts = [
        f"{c} client{'s' if c != 1 else ''}: {n / max(reviews, 1) * 100:.1f} ({n:.0f} in {reviews:.0f} reviews)"
        for c, (n, reviews) in sorted(opened.items())
    ]
    return (
        "Connections opened to our webhook per 100 reviews (TLS handshakes; warm-ups included): "
        + "; ".join(parts)
        + "."
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", default="1,8,32", help="comma-separated concurrent clients (default 1,8,32)")
    p.add_argument("--per-client", type=int, default=20, help="requests per client per round and level")
    p.add_argument("--rounds", type=int, default=1, help="rounds over every mode (default 1)")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks/ alone")
    p.add_argument("--quick", action="store_true", help="a smoke run: 1 client, 3 requests, writes nothing")
    p.add_argument("--profile", action="store_true", help="sample the webhook with py-spy during its phase")
    p.add_argument("--print-policy", action="store_true", help="print the Kyverno ClusterPolicy (YAML) and exit")
    p.add_argument(
        "--config",
        type=json.loads,
        default={},
        metavar="JSON",
        help="settings for our webhook instead of the defaults, as JSON (e.g. '{\"dryRunCacheSeconds\": 0}')",
    )
    args = p.parse_args()
    if args.quick:
        args.clients, args.per_client, args.rounds, args.no_write = "1", 3, 1, True
    if args.print_policy:
        import yaml

        print(yaml.safe_dump(policy(), sort_keys=False))
        return 0
    levels = [int(c) for c in args.clients.split(",")]
    command = " ".join([interpreter(), "bench/vs_kyverno.py", *(shlex.quote(a) for a in sys.argv[1:])])
    modes = [NONE, NOOP, KYVERNO, OURS]
    cache: dict[str, list[float]] = {}
    checks: dict[str, dict[str, list[float]]] = {}
    cpu: dict[str, float] = {}
    calls: dict[str, int] = {}
    #: per mode, per round: [CPU seconds of the process over the measured requests, reviews sent in them]
    windows: dict[str, dict[int, list[float]]] = {}
    stacks: Counter[str] = Counter()
    #: per client count: [connections our listener accepted while measuring, reviews sent then]
    opened: dict[int, list[float]] = {}
    with ControlPlane() as cp:
        setup_samples(cp)
        with contextlib.ExitStack() as stack:
            t0 = time.monotonic()
            kyverno = stack.enter_context(Kyverno(cp))
            print(f"==> Kyverno up in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)
            common: dict[str, Any] = {"namespace_selector": SAMPLE_SELECTOR, "probe_namespace": "demo-bench"}
            noop = stack.enter_context(NoopWebhook(cp, vwc_name="vs-kyverno-noop", **common))
            ours = stack.enter_context(
                RunningWebhook(cp, vwc_name="vs-kyverno-preflight", config=args.config, log_level="warning", **common)
            )
            hooks: dict[str, RunningWebhook] = {NOOP: noop, OURS: ours}
            switch = KyvernoSwitch(cp, kyverno)
            profiler = Profiler(ours.proc.pid, Path(tempfile.mkdtemp(prefix="vs-kyverno-"))) if ours.proc else None
            answered0 = {m: h.requests_total() for m, h in hooks.items()}
            current = [NONE]
            pids = {m: p.pid for m, p in ((NOOP, noop.proc), (OURS, ours.proc), (KYVERNO, kyverno.proc)) if p}
            cpu_at: dict[str, float] = {}

            def cpu_mark(mode: str, start: bool) -> None:
                """The process's CPU seconds over its own phases (insensitive to how busy the machine is)."""
                if mode in pids:
                    now = cpu_seconds(pids[mode])
                    cpu[mode] = cpu.get(mode, 0.0) + (0.0 if start else now - cpu_at[mode])
                    cpu_at[mode] = now

            def switch_to(mode: str) -> None:
                if current[0] != NONE:
                    cpu_mark(current[0], start=False)
                for other, h in hooks.items():
                    if other != mode:
                        set_registered(h, False)
                if mode != KYVERNO:
                    switch.set(False)
                if mode in hooks:
                    set_registered(hooks[mode], True)
                elif mode == KYVERNO:
                    switch.set(True)
                if profiler is not None and args.profile:
                    (profiler.start if mode == OURS else profiler.stop)()
                current[0] = mode
                switches[0] += 1
                cpu_mark(mode, start=True)

            switches = [0]

            def windowed(name: str, c: int) -> tuple[list[float], int]:
                """measure(), with the process's CPU over the requests alone (no registration, no scrape)."""
                pid = pids.get(current[0])
                cpu0 = cpu_seconds(pid) if pid else 0.0
                out = measure(cp, name, c, args.per_client)
                if pid:
                    rnd = windows.setdefault(current[0], {}).setdefault((switches[0] - 1) // len(modes), [0.0, 0])
                    rnd[0] += cpu_seconds(pid) - cpu0
                    rnd[1] += len(out[0]) + out[1] + WARMUP_PER_CLIENT * c
                return out

            def measured(name: str, c: int) -> tuple[list[float], int]:
                if current[0] != OURS:
                    return windowed(name, c)
                before, times0, opened0 = render_cache_counts(ours), check_times(ours), accepted_connections(ours)
                out = windowed(name, c)
                after, times1, opened1 = render_cache_counts(ours), check_times(ours), accepted_connections(ours)
                got_c = opened.setdefault(c, [0.0, 0])
                got_c[0] += opened1 - opened0
                got_c[1] += len(out[0]) + out[1] + WARMUP_PER_CLIENT * c
                acc = cache.setdefault(name, [0.0, 0.0])
                acc[0] += after[0] - before[0]
                acc[1] += after[1] - before[1]
                per = checks.setdefault(name, {})
                for check, (n1, mean1) in times1.items():
                    n0, mean0 = times0.get(check, (0.0, 0.0))
                    got = per.setdefault(check, [0.0, 0.0])
                    got[0] += n1 - n0
                    got[1] += n1 * mean1 - n0 * mean0
                return out

            measured_all = measure_rounds(modes, args.rounds, levels, switch_to, measured)
            cpu_mark(current[0], start=False)
            calls = {
                m: sum(len(xs) + measured_all[1][k] for k, xs in measured_all[0].items() if k[0] == m) for m in pids
            }
            if profiler is not None:
                profiler.stop()
                stacks = profiler.stacks()
            answered = {m: h.requests_total() - answered0[m] for m, h in hooks.items()}
            kyverno_rss = _rss_mib(kyverno.proc.pid if kyverno.proc else 0)
            ours_rss = _rss_mib(ours.proc.pid if ours.proc else 0)
    text = render(command, levels, modes, measured_all, answered, cache, args, (kyverno_rss, ours_rss))
    text += "\n\n" + cpu_line(cpu, calls) + "\n\n" + window_cpu_line(windows) + "\n\n" + connections_line(opened)
    text += "\n\n" + "\n".join(where_time_goes(checks) + ([""] + profile_summary(stacks) if args.profile else []))
    print(text, flush=True)
    if not args.no_write:
        write_section(SECTION, text)
    return 0


def cpu_line(cpu: dict[str, float], calls: dict[str, int]) -> str:
    """CPU per measured review of each webhook process (user + system over its own phase, warm-up and
    probes included in the CPU, not in the count: an upper bound)."""
    parts = [
        f"{m} {1000 * cpu[m] / calls[m]:.2f} ms ({cpu[m]:.1f} s over {calls[m]} calls)" for m in cpu if calls.get(m)
    ]
    return (
        "CPU per review of each webhook process over its own phase (user + system from /proc, including the "
        "warm-up requests and registration probes, so an upper bound; it does not move with the machine's load): "
        + "; ".join(parts)
        + "."
    )


def interpreter() -> str:
    """The Python that ran this (and so the webhook and the no-op): .venv's, or another environment's path."""
    exe = Path(sys.executable)
    if exe.is_relative_to(ROOT):  # not resolved: .venv/bin/python is a symlink out of the tree
        return str(exe.relative_to(ROOT))
    return str(exe)


def event_loop() -> str:
    """Which event loop the webhook and the no-op run (webhook/cli/serve.py `_install_uvloop`)."""
    import os

    try:
        import uvloop
    except ImportError:
        return "Event loop: asyncio's own (uvloop is not installed here; the image installs it, the `fast` extra)."
    if os.environ.get("PREFLIGHT_WEBHOOK_LOOP", "auto") == "asyncio":
        return "Event loop: asyncio's own (PREFLIGHT_WEBHOOK_LOOP=asyncio)."
    return f"Event loop: uvloop {uvloop.__version__}, as in the image (the `fast` extra)."


def window_cpu_line(windows: dict[str, dict[int, list[float]]]) -> str:
    """CPU per review over the measured requests only, per round: the median and the range of the rounds."""
    parts = []
    for mode, rounds in windows.items():
        per = [1000 * cpu / n for cpu, n in (rounds[r] for r in sorted(rounds)) if n]
        if per:
            shown = ", ".join(f"{x:.2f}" for x in per)
            parts.append(
                f"{mode} {statistics.median(per):.2f} ms (rounds: {shown}; range {min(per):.2f}–{max(per):.2f})"
            )
    return (
        "CPU per review over the measured requests alone (each process's user + system from /proc from the first "
        "to the last request of each sample and client count, warm-up requests counted; registration, probes and "
        "metrics scrapes left out; median of the rounds): " + "; ".join(parts) + "."
    )


def where_time_goes(checks: dict[str, dict[str, list[float]]]) -> list[str]:
    """The slowest checks per sample over the preflight phase (the webhook's own histogram)."""
    lines = [
        "Where the webhook's time goes (preflight_webhook_check_duration_seconds over its phase, mean ms per review):",
        "",
    ]
    for name, per in checks.items():
        top = sorted(((s / n, c) for c, (n, s) in per.items() if n > 0), reverse=True)[:6]
        lines.append(f"- {name}: " + ", ".join(f"{c} {ms:.1f}" for ms, c in top))
    return lines


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def render(
    command: str,
    levels: list[int],
    modes: list[str],
    measured: tuple[dict[tuple[str, str, int], list[float]], dict[tuple[str, str, int], int], list[str]],
    answered: dict[str, float],
    cache: dict[str, list[float]],
    args: argparse.Namespace,
    rss: tuple[float, float],
) -> str:
    times, errors, loads = measured

    def added(mode: str, name: str, c: int, q: float) -> float:
        return pct(times[(mode, name, c)], q) - pct(times[(NONE, name, c)], q)

    lines = [
        f"## Side by side: added apply latency, Kyverno {kyverno_version()} vs preflight vs a no-op webhook",
        "",
        *header(command, event_loop()),
        f"Clients: bench/loadgen.py POSTing the sample to its collection with `?dryRun=All` through the real "
        f"kube-apiserver (admin client certificate, keep-alive TLS), {args.per_client} requests per client per "
        f"round and level, {args.rounds} round(s). One mode registered at a time. Kyverno: the ClusterPolicy "
        f"`{POLICY_NAME}` (`bench/vs_kyverno.py --print-policy`), Enforce, failurePolicy Fail. preflight: the "
        + ("default config" if not args.config else f"default config with `{json.dumps(args.config)}`")
        + " (every check, Dry Run on). Added = the mode's percentile minus the no-webhook "
        "percentile; vs no-op = the mode's p99 over the no-op's p99.",
        "",
        "| sample | clients | mode | calls | p50 | p99 | added p50 | added p99 | p99 vs no-op | errors |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in PATHS:
        for c in levels:
            for mode in modes:
                xs = times[(mode, name, c)]
                row = f"| {name} | {c} | {mode} | {len(xs)} | {pct(xs, 50):.1f} | {pct(xs, 99):.1f} |"
                if mode == NONE:
                    row += " | | |"
                else:
                    ratio = pct(xs, 99) / pct(times[(NOOP, name, c)], 99)
                    row += f" {added(mode, name, c, 50):.1f} | {added(mode, name, c, 99):.1f} | {ratio:.2f} |"
                lines.append(row + f" {errors[(mode, name, c)]} |")
    verdicts = []
    for name in PATHS:
        for c in levels:
            o, k = times[(OURS, name, c)], times[(KYVERNO, name, c)]
            lo, hi = interval(o, k, 99)
            diff = pct(o, 99) - pct(k, 99)
            verdicts.append(
                f"- {name}, {c} client(s): p99 preflight {pct(o, 99):.1f} ms vs Kyverno {pct(k, 99):.1f} ms, "
                f"difference {diff:+.1f} ms (95 % interval {lo:+.1f} to {hi:+.1f}) → "
                f"{'below' if diff < 0 else 'NOT below'} Kyverno's."
            )
        if 8 in levels:
            o, n = times[(OURS, name, 8)], times[(NOOP, name, 8)]
            ratio = pct(o, 99) / pct(n, 99)
            a_o, a_n = added(OURS, name, 8, 99), added(NOOP, name, 8, 99)
            verdicts.append(
                f"- {name}, 8 clients: p99 preflight {pct(o, 99):.1f} ms = {ratio:.2f}x the no-op's {pct(n, 99):.1f} ms "
                f"→ {'within' if ratio <= 2 else 'NOT within'} 2x; added p99 {a_o:.1f} ms vs the no-op's {a_n:.1f} ms "
                f"({a_o / a_n:.1f}x)."
                if a_n > 0
                else f"({name}: the no-op added nothing measurable at 8 clients)"
            )
    hit_lines = []
    for name, (h, m) in cache.items():
        total = h + m
        rate = f"{h / total:.0%}" if total else "n/a"
        hit_lines.append(f"{name}: {h:.0f} hits, {m:.0f} misses ({rate})")
    lines += [
        "",
        f"Load average at the start of each phase: {', '.join(loads)}. Reviews answered: "
        + ", ".join(f"{m}: {n:.0f}" for m, n in answered.items())
        + f". Peak RSS: Kyverno {rss[0]:.0f} MiB, preflight {rss[1]:.0f} MiB.",
        "",
        "Render cache (preflight_webhook_render_cache_total over the preflight phase): " + "; ".join(hit_lines) + ".",
        "",
        f"Goals ({GOALS}):",
        "",
        *verdicts,
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    timed_main(main)
