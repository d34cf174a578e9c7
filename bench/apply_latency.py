"""How much slower does an apply get with the webhook, against a no-op webhook registered the same way?

    .venv/bin/python bench/apply_latency.py [--clients 1,8,32] [--per-client 30] [--rounds 2] [--no-write]
    .venv/bin/python bench/apply_latency.py --on node [...]   # through the Service on the real node (root)

The target: the p99 the webhook adds at 8 clients, Dry Run off, is at most 1.3 times the no-op's.
Both ways write their section of docs/benchmarks/apply-latency.md (`apply-latency` for the local
control plane, `apply-latency-node` for the node).

--on local (the default)
One local control plane (e2e/harness/controlplane.py) with the sample prerequisites (bench/cluster_bench.py
``setup_samples``), and four modes, measured in turn in each round:

none            no ValidatingWebhookConfiguration: the apiserver's own cost, the baseline
no-op           bench/noop_server.py (``--echo-uid``: it parses the review for its uid and
                allows), registered exactly like the webhook: e2e/harness/runner.py RunningWebhook's
                certificates, VWC (failurePolicy Fail, timeoutSeconds 10, the same rules and
                namespaceSelector)
Dry Run off     ``python -m webhook serve`` with ``checks: {Dry Run: off}``
Dry Run on      ``python -m webhook serve`` with the default config (Dry Run POSTs the derived
                JobSet and one Pod per pod group with dryRun=All; an outcome is reused for
                dryRunCacheSeconds, so the repeated identical POSTs here are the "apiserver
                retry / dry run then apply" case)
Dry Run on,     the same with ``dryRunCacheSeconds: 0``: every review sends its dry runs, the
cache off       cost of an object the webhook has not seen

Only one mode's VWC is in place at a time (each webhook's own request counter confirms the
apiserver calls it). The clients are bench/loadgen.py (aiohttp, admin client certificate,
keep-alive TLS) POSTing the sample AIPerfJob or TrainJob to its collection with ``?dryRun=All``
(the webhook judges a dry-run create exactly like a create; nothing is stored), at 1, 8 and 32
concurrent clients. Added latency = mode - none at the same percentile; the ratio is the
webhook's added latency over the no-op's.

--on node
The local way measures the webhook as a process the apiserver calls by URL. Here
everything is as users run it: the real node (e2e/harness/node.py: kubelet, containerd, kube-proxy),
our Dockerfile's image, ``helm install`` of charts/preflight-webhook, and the apiserver calling each
webhook through its Service's ClusterIP (kube-proxy's rules) to one of its two pods. Three releases,
each in its own namespace, with the chart's defaults plus ``config.mode: warn`` (the node has 2 CPUs:
the sample AIPerfJob's 3350m workers are denied in enforce mode, and a denial would end the request
before the apiserver's own work; in warn mode every request is a 201):

no-op           release ``pf-noop``: the chart's Deployment with its container's command replaced
                by bench/noop_server.py --echo-uid (from a ConfigMap, in the same image): the same
                Service, certificates, VWC (failurePolicy, timeoutSeconds, rules, namespaceSelector,
                matchConditions), pods, probes and resources; only the handler differs
Dry Run off     release ``pf-off``: ``config.checks: {Dry Run: off}``
Dry Run on      release ``pf-on``: the default config

and "no webhook": none of the three VWCs in place, the apiserver's own cost. Only one VWC is in
place at a time: the others are deleted and re-created from what helm made (caBundle included);
a registration counts once the release's pods' ``preflight_webhook_requests_total`` (read from
each pod's IP over the bridge) moves for a probe. The clients and the table are the
same as the local way's. Needs root (the node).

--admitted (issue 35: the latency judging the pods as admitted adds)
The same clients and samples, with the webhook's Dry Run on, and a MutatingAdmissionPolicy that changes
the pods (it adds the label ``preflight-bench/admitted=true`` to every Pod created in the sample
namespaces, bench/apply_latency.py ``ADMITTED_POLICY``) bound or not. The Dry Run's dry-run Pods are then
changed by admission, and every check runs a second time on the admitted pods (docs/mutations.md).
The policy acts on Pods only, which only the webhook's dry runs create here: the apiserver's own
work on the applied job is the same in both ways. Modes, measured in turn in each run:

no webhook                          the baseline
Dry Run on / + mutated              the default config (dryRunCacheSeconds 10: an identical job's
                                    dry runs are reused, its second run of the checks is not)
Dry Run on, cache off / + mutated   ``dryRunCacheSeconds: 0``: every review sends its dry runs

A switch of the policy counts once a dry-run Pod in each sample namespace shows the label (bound) or
does not (unbound): the apiserver loads policies from its informer. ``--on node``: two helm releases
(``pf-on``, ``pf-cold``) as above; ``--on local``: two RunningWebhooks on one control plane. Each run
(``--rounds``, 3 by default here) is listed with its own p50/p95/p99; the section is
``admitted-latency-node`` or ``admitted-latency-local`` of docs/benchmarks/admitted-latency.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster_bench import (  # noqa: E402
    SAMPLE_SELECTOR,
    SAMPLES,
    direct_dry_runs,
    header,
    load,
    pct,
    sample,
    set_registered,
    setup_samples,
)
from bench.common import write_section  # noqa: E402
from e2e.harness.controlplane import ControlPlane, free_ports  # noqa: E402
from e2e.harness.runner import ROOT as E2E_ROOT  # noqa: E402
from e2e.harness.runner import RunningWebhook, wait_until  # noqa: E402

if TYPE_CHECKING:
    from e2e.harness.node import Node

PATHS = {
    "aiperfjob-good": "/apis/aiperf.nvidia.com/v1alpha1/namespaces/{ns}/aiperfjobs",
    "trainjob-good": "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs",
}
NONE, NOOP, OFF, ON = "no webhook", "no-op webhook", "preflight, Dry Run off", "preflight, Dry Run on"
COLD = "preflight, Dry Run on, cache off"
TARGET = "p99 added <= 1.3x the no-op webhook's at 8 clients, Dry Run off"


class NoopWebhook(RunningWebhook):
    """bench/noop_server.py in place of ``serve``: same certificates, same VWC, same probe."""

    def start_process(self, cert: Path, key: Path, config: Path) -> None:
        assert self.workdir is not None
        (self.port,) = free_ports(1)
        self.log_path = self.workdir / "noop.log"
        self._log = open(self.log_path, "ab")
        argv = [
            sys.executable,
            str(E2E_ROOT / "bench" / "noop_server.py"),
            f"--port={self.port}",
            f"--tls-cert={cert}",
            f"--tls-key={key}",
            "--echo-uid",
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(E2E_ROOT), env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            argv, cwd=E2E_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        wait_until("the no-op webhook's /readyz", self._ready, timeout=self.ready_timeout)


def measure(cp: ControlPlane, name: str, clients: int, per_client: int) -> tuple[list[float], int]:
    job = sample(name)
    path = PATHS[name].format(ns=job["metadata"]["namespace"])
    res = direct_dry_runs(cp, job, clients, per_client, path=path, duration=300)
    return res.latencies_ms, res.errors


Samples = dict[tuple[str, str, int], list[float]]


def measure_rounds(
    modes: list[str],
    rounds: int,
    levels: list[int],
    switch_to: Callable[[str], None],
    measure: Callable[[str, int], tuple[list[float], int]],
) -> tuple[Samples, dict[tuple[str, str, int], int], list[str]]:
    """Every round: each mode in turn (reversed every other round), ``switch_to(mode)`` (only that
    mode's webhook registered), then ``measure(sample, clients)`` for each sample and level.
    Returns (latencies, errors, load averages) keyed by (mode, sample, clients)."""
    times: Samples = {}
    errors: dict[tuple[str, str, int], int] = {}
    loads: list[str] = []
    for rnd in range(rounds):
        for mode in modes if rnd % 2 == 0 else list(reversed(modes)):
            switch_to(mode)
            loads.append(load())
            for name in PATHS:
                for c in levels:
                    xs, errs = measure(name, c)
                    times.setdefault((mode, name, c), []).extend(xs)
                    errors[(mode, name, c)] = errors.get((mode, name, c), 0) + errs
                    print(
                        f"round {rnd} {mode} {name} c={c}: p50 {pct(xs, 50):.1f} p99 {pct(xs, 99):.1f} "
                        f"errors {errs} load {load()}",
                        flush=True,
                    )
    return times, errors, loads


def interval(a: list[float], b: list[float], q: float, *, resamples: int = 1000, seed: int = 13) -> tuple[float, float]:
    """95 % bootstrap interval of pct(a, q) - pct(b, q): each side resampled with replacement
    (the two runs are independent). What a p99 of a few hundred calls can and cannot tell apart."""
    import random

    rnd = random.Random(seed)
    diffs = sorted(pct(rnd.choices(a, k=len(a)), q) - pct(rnd.choices(b, k=len(b)), q) for _ in range(resamples))
    return diffs[int(0.025 * resamples)], diffs[int(0.975 * resamples) - 1]


def render(
    title: str,
    command: str,
    modes: list[str],
    levels: list[int],
    times: dict[tuple[str, str, int], list[float]],
    errors: dict[tuple[str, str, int], int],
    loads: list[str],
    answered: dict[str, float],
    clients_line: str,
) -> str:
    """The docs/benchmarks/apply-latency.md section: the table per sample, level and mode, and the target's verdict."""

    def added(mode: str, name: str, c: int, q: float) -> float:
        return pct(times[(mode, name, c)], q) - pct(times[(NONE, name, c)], q)

    lines = [
        title,
        "",
        *header(command),
        clients_line,
        "",
        "| sample | clients | mode | calls | p50 | p99 | added p50 | added p99 | ratio p50 | ratio p99 | errors |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in PATHS:
        for c in levels:
            for mode in modes:
                xs = times[(mode, name, c)]
                row = f"| {name} | {c} | {mode} | {len(xs)} | {pct(xs, 50):.1f} | {pct(xs, 99):.1f} |"
                if mode == NONE:
                    row += " | | | |"
                else:
                    a50, a99 = added(mode, name, c, 50), added(mode, name, c, 99)
                    n50, n99 = added(NOOP, name, c, 50), added(NOOP, name, c, 99)
                    r50 = f"{a50 / n50:.2f}" if mode != NOOP and n50 > 0 else ""
                    r99 = f"{a99 / n99:.2f}" if mode != NOOP and n99 > 0 else ""
                    row += f" {a50:.1f} | {a99:.1f} | {r50} | {r99} |"
                lines.append(row + f" {errors[(mode, name, c)]} |")
    verdicts = []
    if 8 in levels:
        for name in PATHS:
            a, n = added(OFF, name, 8, 99), added(NOOP, name, 8, 99)
            ok = n > 0 and a <= 1.3 * n
            off, noop, none = (times[(m, name, 8)] for m in (OFF, NOOP, NONE))
            a_lo, a_hi = interval(off, none, 99)
            n_lo, n_hi = interval(noop, none, 99)
            x_lo, x_hi = interval(off, noop, 99)
            verdicts.append(
                f"- {name}, 8 clients, Dry Run off: added p99 {a:.1f} ms (95 % interval {a_lo:.1f} to {a_hi:.1f}) "
                f"vs the no-op's {n:.1f} ms ({n_lo:.1f} to {n_hi:.1f}) → {'met' if ok else 'NOT met'} ({TARGET}); "
                f"p99 over the no-op's: {a - n:.1f} ms ({x_lo:.1f} to {x_hi:.1f})."
            )
    lines += [
        "",
        f"Load average at the start of each phase: {', '.join(loads)}. Reviews answered: "
        + ", ".join(f"{m}: {n:.0f}" for m, n in answered.items())
        + ".",
        "",
        *verdicts,
    ]
    return "\n".join(lines)


def publish(
    args: argparse.Namespace,
    title: str,
    command: str,
    modes: list[str],
    levels: list[int],
    measured: tuple[dict[tuple[str, str, int], list[float]], dict[tuple[str, str, int], int], list[str]],
    answered: dict[str, float],
    through: str,
    setup: str,
) -> None:
    """Render the section, print it, and write it into docs/benchmarks/apply-latency.md (args.section)
    unless --no-write. The clients line says how the requests reach the webhooks (`through`, after
    "the real kube-apiserver") and how the modes are set up (`setup`)."""
    clients_line = (
        f"Clients: bench/loadgen.py POSTing the sample to its collection with `?dryRun=All` through the real "
        f"kube-apiserver{through}, {args.per_client} requests per client per round, {args.rounds} rounds (mode order "
        f"reversed every other round). {setup} Added = the mode's percentile minus the no-webhook percentile; "
        "ratio = added / the no-op's added."
    )
    section = None if args.no_write else args.section
    times, errors, loads = measured
    text = render(title, command, modes, levels, times, errors, loads, answered, clients_line)
    print(text, flush=True)
    if section is not None:
        write_section(section, text)


def timed_main(main: Callable[[], int]) -> None:
    """Run a bench's main, say how long it took, exit with its code."""
    t0 = time.perf_counter()
    rc = main()
    print(f"==> took {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    raise SystemExit(rc)


RELEASES = {NOOP: "pf-noop", OFF: "pf-off", ON: "pf-on"}
CONFIGS: dict[str, dict[str, Any]] = {
    NOOP: {"mode": "warn"},
    OFF: {"mode": "warn", "checks": {"Dry Run": "off"}},
    ON: {"mode": "warn"},
}
PORT = 8443  # the chart's containerPort


class Release:
    """One helm release of the chart on the node, its VWC switchable on and off."""

    def __init__(self, node: Node, mode: str, name: str | None = None, config: dict[str, Any] | None = None) -> None:
        self.node = node
        self.mode = mode
        self.name = name or RELEASES[mode]
        self.config = config if config is not None else CONFIGS[mode]
        self.namespace = self.name
        self.vwc_name = ""
        self.saved: dict[str, Any] = {}
        self._ctx = ssl.create_default_context()
        self._ctx.check_hostname = False  # pod IPs are not in the Service certificate
        self._ctx.verify_mode = ssl.CERT_NONE  # the bench reading its own pods' counters

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return self.node.cp.kubectl(*args, input=input).stdout  # type: ignore[union-attr]

    def install(self) -> None:
        self.node.install_webhook_chart(self.name, self.namespace, values={"config": self.config})
        vwcs = json.loads(self.kubectl("get", "validatingwebhookconfiguration", "-o", "json"))["items"]
        (vwc,) = [v for v in vwcs if v["metadata"].get("annotations", {}).get("meta.helm.sh/release-name") == self.name]
        self.vwc_name = vwc["metadata"]["name"]
        if self.mode == NOOP:
            self._become_noop()
        vwc = json.loads(self.kubectl("get", "validatingwebhookconfiguration", self.vwc_name, "-o", "json"))
        meta = vwc["metadata"]
        for k in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
            meta.pop(k, None)
        self.saved = vwc

    def _become_noop(self) -> None:
        """The release's own Deployment, serving bench/noop_server.py instead of the webhook."""
        script = (ROOT / "bench" / "noop_server.py").read_text()
        cm = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "noop-server", "namespace": self.namespace},
            "data": {"noop_server.py": script},
        }
        self.kubectl("apply", "-f", "-", input=json.dumps(cm))
        deploy = self._deployment()
        c = deploy["spec"]["template"]["spec"]["containers"][0]
        tls = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in c["args"] if a.startswith("--tls-")}
        ops = [
            {"op": "add", "path": "/spec/template/spec/volumes/-", "value": {"name": "noop", "configMap": {"name": "noop-server"}}},
            {"op": "add", "path": "/spec/template/spec/containers/0/volumeMounts/-", "value": {"name": "noop", "mountPath": "/noop"}},
            {"op": "add", "path": "/spec/template/spec/containers/0/command", "value": ["python", "/noop/noop_server.py"]},
            {
                "op": "replace",
                "path": "/spec/template/spec/containers/0/args",
                "value": [f"--port={PORT}", "--host=0.0.0.0", f"--tls-cert={tls['--tls-cert']}", f"--tls-key={tls['--tls-key']}", "--echo-uid"],
            },
        ]  # fmt: skip
        name = deploy["metadata"]["name"]
        self.kubectl("patch", "deployment", "-n", self.namespace, name, "--type=json", f"-p={json.dumps(ops)}")
        cp = self.node.cp
        assert cp is not None
        rollout = cp.kubectl("rollout", "status", "deployment", "-n", self.namespace, name, "--timeout=170s", timeout=180, check=False)  # fmt: skip
        if rollout.returncode != 0:
            pods = cp.kubectl("get", "pods", "-n", self.namespace, "-o", "wide", check=False).stdout
            logs = cp.kubectl("logs", "-n", self.namespace, f"deployment/{name}", "--tail=30", check=False)
            raise RuntimeError(
                f"the no-op release did not roll out: {rollout.stderr}\n{pods}\n{logs.stdout}{logs.stderr}"
            )

    def _deployment(self) -> dict[str, Any]:
        items = json.loads(
            self.kubectl(
                "get", "deployments", "-n", self.namespace, "-l",
                f"app.kubernetes.io/instance={self.name},app.kubernetes.io/component=webhook", "-o", "json",
            )
        )["items"]  # fmt: skip
        (deploy,) = items
        return deploy

    def pod_ips(self) -> list[str]:
        sel = f"app.kubernetes.io/instance={self.name},app.kubernetes.io/component=webhook"
        pods = json.loads(self.kubectl("get", "pods", "-n", self.namespace, "-l", sel, "-o", "json"))["items"]
        return [
            p["status"]["podIP"]
            for p in pods
            if p["status"].get("podIP") and not p["metadata"].get("deletionTimestamp")
        ]

    def requests_total(self) -> float:
        total = 0.0
        for ip in self.pod_ips():
            with urllib.request.urlopen(f"https://{ip}:{PORT}/metrics", timeout=5, context=self._ctx) as r:
                text = r.read().decode()
            for line in text.splitlines():
                if line.startswith("preflight_webhook_requests_total"):
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def set_registered(self, on: bool) -> None:
        cp = self.node.cp
        assert cp is not None
        exists = cp.kubectl("get", "validatingwebhookconfiguration", self.vwc_name, check=False).returncode == 0
        if on and not exists:
            self.kubectl("create", "-f", "-", input=json.dumps(self.saved))
        elif not on and exists:
            self.kubectl("delete", "validatingwebhookconfiguration", self.vwc_name)
        probe = sample("trainjob-good")
        ns = probe["metadata"]["namespace"]

        def settled() -> bool:
            before = self.requests_total()
            direct_dry_runs(self.node.cp, probe, 1, 1, path=PATHS["trainjob-good"].format(ns=ns), duration=30)  # type: ignore[arg-type]
            moved = self.requests_total() > before
            return moved if on else not moved

        what = "call" if on else "stop calling"
        wait_until(f"the apiserver to {what} release {self.name}'s webhook", settled, timeout=60, every=0.2)


def run_node(args: argparse.Namespace, levels: list[int], command: str) -> int:
    from e2e.harness.node import SAMPLES_DIR, Node

    modes = [NONE, NOOP, OFF, ON]
    with Node(start_timeout=180) as node:
        assert node.cp is not None
        node.cp.apply_samples_prerequisites(SAMPLES_DIR)
        releases = {m: Release(node, m) for m in RELEASES}
        for r in releases.values():
            t0 = time.monotonic()
            r.install()
            print(f"==> {r.name} installed in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)
        answered0 = {m: r.requests_total() for m, r in releases.items()}

        def switch_to(mode: str) -> None:
            for other, r in releases.items():
                if other != mode:
                    r.set_registered(False)
            if mode in releases:
                releases[mode].set_registered(True)

        def measure(name: str, c: int) -> tuple[list[float], int]:
            job = sample(name)
            path = PATHS[name].format(ns=job["metadata"]["namespace"])
            res = direct_dry_runs(node.cp, job, c, args.per_client, path=path, duration=300)  # type: ignore[arg-type]
            return res.latencies_ms, res.errors

        measured = measure_rounds(modes, args.rounds, levels, switch_to, measure)
        answered = {m: r.requests_total() - answered0[m] for m, r in releases.items()}
    publish(
        args,
        "## Real node: added apply latency through the Service, against a no-op webhook",
        command,
        modes,
        levels,
        measured,
        answered,
        through=" of the node, which calls each webhook through its Service (kube-proxy, two pods)",
        setup="Each mode is a `helm install` of the chart in warn mode; the no-op is that release's own Deployment "
        "serving bench/noop_server.py --echo-uid. One VWC in place at a time.",
    )
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", default="1,8,32", help="comma-separated concurrent clients (default 1,8,32)")
    p.add_argument("--per-client", type=int, default=30, help="requests per client per round and level")
    p.add_argument("--rounds", type=int, default=2, help="rounds over every mode (default 2)")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks/ alone")
    p.add_argument(
        "--on", choices=("local", "node"), default="local", help="local control plane, or the real node (root)"
    )
    p.add_argument(
        "--section", help="the section of docs/benchmarks/apply-latency.md to write (default: apply-latency[-node])"
    )
    p.add_argument(
        "--admitted",
        action="store_true",
        help="the latency a MutatingAdmissionPolicy that changes the pods adds (the webhook judges the pods as "
        "admitted): Dry Run on, cache on and off, the policy bound or not; p50/p95/p99 of each run "
        "(--rounds, default 3 here) into docs/benchmarks/admitted-latency.md (see above)",
    )
    args = p.parse_args()
    levels = [int(c) for c in args.clients.split(",")]
    command = " ".join([".venv/bin/python bench/apply_latency.py", *(shlex.quote(a) for a in sys.argv[1:])])
    if args.admitted:
        if "--rounds" not in sys.argv:
            args.rounds = 3
        args.section = args.section or f"admitted-latency-{args.on}"
        return run_admitted(args, levels, command)
    if args.section is None:
        args.section = "apply-latency" if args.on == "local" else "apply-latency-node"
    if args.on == "node":
        return run_node(args, levels, command)
    return run_local(args, levels, command)


def run_local(args: argparse.Namespace, levels: list[int], command: str) -> int:
    modes = [NONE, NOOP, OFF, ON, COLD]
    with ControlPlane() as cp:
        setup_samples(cp)
        with contextlib.ExitStack() as stack:
            common: dict[str, Any] = {"namespace_selector": SAMPLE_SELECTOR, "probe_namespace": "demo-bench"}
            hooks: dict[str, RunningWebhook] = {
                NOOP: stack.enter_context(NoopWebhook(cp, vwc_name="apply-bench-noop", **common)),
                OFF: stack.enter_context(
                    RunningWebhook(
                        cp,
                        vwc_name="apply-bench-off",
                        config={"checks": {"Dry Run": "off"}},
                        log_level="warning",
                        **common,
                    )
                ),  # fmt: skip
                ON: stack.enter_context(
                    RunningWebhook(cp, vwc_name="apply-bench-on", config={}, log_level="warning", **common)
                ),
                COLD: stack.enter_context(
                    RunningWebhook(
                        cp,
                        vwc_name="apply-bench-cold",
                        config={"dryRunCacheSeconds": 0},
                        log_level="warning",
                        **common,
                    )
                ),  # fmt: skip
            }
            answered0 = {m: h.requests_total() for m, h in hooks.items()}

            def switch_to(mode: str) -> None:
                for other, h in hooks.items():
                    if other != mode:
                        set_registered(h, False)
                if mode in hooks:
                    set_registered(hooks[mode], True)

            measured = measure_rounds(
                modes, args.rounds, levels, switch_to, lambda name, c: measure(cp, name, c, args.per_client)
            )
            answered = {m: h.requests_total() - answered0[m] for m, h in hooks.items()}

    publish(
        args,
        "## Cluster: added apply latency against a no-op webhook",
        command,
        modes,
        levels,
        measured,
        answered,
        through=" (admin client certificate, keep-alive TLS)",
        setup="The no-op webhook (bench/noop_server.py --echo-uid) is registered exactly like the webhook (same "
        "certificates, failurePolicy Fail, timeoutSeconds 10, rules, namespaceSelector); one VWC in place at a time.",
    )
    return 0


MUTATED = ", pods mutated"
ADMITTED_MODES = [NONE, ON, ON + MUTATED, COLD, COLD + MUTATED]
ADMITTED_CONFIGS: dict[str, dict[str, Any]] = {ON: {}, COLD: {"dryRunCacheSeconds": 0}}
ADMITTED_LABEL = "preflight-bench/admitted"


def admitted_policy() -> list[dict[str, Any]]:
    """The MutatingAdmissionPolicy ``bench-admitted`` and its binding (e2e/harness/vap.py mutate_policy): the
    label ADMITTED_LABEL=true on every Pod created in the sample namespaces."""
    from e2e.harness.vap import mutate_policy

    expression = f'Object{{metadata: Object.metadata{{labels: {{"{ADMITTED_LABEL}": "true"}}}}}}'
    return mutate_policy("bench-admitted", expression, namespace_labels=SAMPLE_SELECTOR["matchLabels"])


class Mutation:
    """ADMITTED_POLICY bound or not: the binding created or deleted, then a dry-run Pod in each sample
    namespace polled until it shows the label (bound) or does not (unbound)."""

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.policy, self.binding = admitted_policy()
        cp.kubectl("apply", "-f", "-", input=json.dumps(self.policy))
        self.namespaces = sorted({sample(n)["metadata"]["namespace"] for n in PATHS})

    def _labelled(self, ns: str) -> bool:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "bench-admitted-probe", "namespace": ns},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        # the sample namespaces' quotas (bench/cluster_bench.py setup_samples) need both
                        "resources": {
                            "requests": {"cpu": "1m", "memory": "1Mi"},
                            "limits": {"cpu": "1m", "memory": "1Mi"},
                        },
                    }
                ]
            },
        }
        out = self.cp.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod))
        return ADMITTED_LABEL in (json.loads(out.stdout)["metadata"].get("labels") or {})

    def set(self, on: bool) -> None:
        exists = self.cp.kubectl("get", "mutatingadmissionpolicybinding", "bench-admitted", check=False).returncode == 0
        if on and not exists:
            self.cp.kubectl("create", "-f", "-", input=json.dumps(self.binding))
        elif not on and exists:
            self.cp.kubectl("delete", "mutatingadmissionpolicybinding", "bench-admitted")
        what = "bound" if on else "unbound"
        wait_until(
            f"MutatingAdmissionPolicy bench-admitted {what} in {', '.join(self.namespaces)}",
            lambda: all(self._labelled(ns) == on for ns in self.namespaces),
            timeout=60,
            every=0.2,
        )


Runs = dict[tuple[str, str, int, int], list[float]]


def admission_seen(cp: ControlPlane, name: str) -> Any:
    """`preflight-webhook plan --cluster -o json` of the sample: its `admission` (docs/mutations.md), the proof
    that the Dry Run's pods are changed by admission while the policy is bound."""
    argv = [sys.executable, "-m", "webhook", "plan", "--cluster", "--kubeconfig", str(cp.kubeconfig), "-o", "json"]
    # a TrainJob's runtime read from the same input (plan reads no ClusterTrainingRuntime from the cluster)
    text = (SAMPLES / f"{name}.yaml").read_text()
    if name.startswith("trainjob"):
        text = (SAMPLES / "01-clustertrainingruntime.yaml").read_text() + "\n---\n" + text
    out = subprocess.run([*argv, "-f", "-"], input=text, capture_output=True, text=True, timeout=120, cwd=ROOT)
    if out.returncode != 0:
        return f"plan failed: {out.stderr.strip()[-300:]}"
    got = json.loads(out.stdout)
    adm = (got[0] if isinstance(got, list) else got).get("admission") or {}
    if adm.get("unseen"):
        return f"not seen: {adm['unseen']}"
    # the changes only: its warnings (AIPerf's pods: duplicate port names) say nothing of the policy
    return {g: [c for c in cs if not c.startswith("the dry run warned")] for g, cs in adm.get("changed", {}).items()}


def run_admitted(args: argparse.Namespace, levels: list[int], command: str) -> int:
    """--admitted: see the module docstring."""
    with contextlib.ExitStack() as stack:
        if args.on == "node":
            from e2e.harness.node import SAMPLES_DIR, Node

            node = stack.enter_context(Node(start_timeout=180))
            cp = node.cp
            assert cp is not None
            cp.apply_samples_prerequisites(SAMPLES_DIR)
            releases = {
                m: Release(node, m, name="pf-on" if m == ON else "pf-cold", config={"mode": "warn", **c})
                for m, c in ADMITTED_CONFIGS.items()
            }
            for r in releases.values():
                t0 = time.monotonic()
                r.install()
                print(f"==> {r.name} installed in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)
            registered: dict[str, Callable[[bool], None]] = {m: r.set_registered for m, r in releases.items()}
            counted: dict[str, Callable[[], float]] = {m: r.requests_total for m, r in releases.items()}
        else:
            cp = stack.enter_context(ControlPlane())
            setup_samples(cp)
            common: dict[str, Any] = {"namespace_selector": SAMPLE_SELECTOR, "probe_namespace": "demo-bench"}
            hooks = {
                m: stack.enter_context(
                    RunningWebhook(cp, vwc_name=f"admitted-bench-{i}", config=c, log_level="warning", **common)
                )
                for i, (m, c) in enumerate(ADMITTED_CONFIGS.items())
            }
            registered = {m: (lambda on, h=h: set_registered(h, on)) for m, h in hooks.items()}
            counted = {m: h.requests_total for m, h in hooks.items()}
        mutation = Mutation(cp)
        answered0 = {m: f() for m, f in counted.items()}
        runs: Runs = {}
        errors: dict[tuple[str, str, int], int] = {}
        loads: list[str] = []
        seen: dict[str, Any] = {}
        for rnd in range(args.rounds):
            for mode in ADMITTED_MODES if rnd % 2 == 0 else list(reversed(ADMITTED_MODES)):
                base = mode.removesuffix(MUTATED)
                for other, reg in registered.items():
                    if other != base:
                        reg(False)
                if base in registered:
                    registered[base](True)
                mutation.set(mode.endswith(MUTATED))
                if mode.endswith(MUTATED) and not seen:
                    seen.update((name, admission_seen(cp, name)) for name in PATHS)
                loads.append(load())
                for name in PATHS:
                    job = sample(name)
                    path = PATHS[name].format(ns=job["metadata"]["namespace"])
                    for c in levels:
                        res = direct_dry_runs(cp, job, c, args.per_client, path=path, duration=300)
                        runs[(mode, name, c, rnd)] = res.latencies_ms
                        errors[(mode, name, c)] = errors.get((mode, name, c), 0) + res.errors
                        xs = res.latencies_ms
                        print(
                            f"run {rnd} {mode} {name} c={c}: p50 {pct(xs, 50):.1f} p95 {pct(xs, 95):.1f} "
                            f"p99 {pct(xs, 99):.1f} errors {res.errors} load {load()}",
                            flush=True,
                        )
        answered = {m: f() - answered0[m] for m, f in counted.items()}
    where = (
        "the real node's kube-apiserver, which calls each webhook through its Service (kube-proxy, two pods); "
        "each webhook a `helm install` of the chart in warn mode"
        if args.on == "node"
        else "one local control plane; each webhook `python -m webhook serve` (RunningWebhook), default config"
    )
    text = render_admitted(args, command, levels, runs, errors, loads, answered, where)
    text += "\n\nWhat admission changes in each sample's pods with the policy bound (`plan --cluster -o json`, " + (
        "admin kubeconfig): " + "; ".join(f"{n}: `{json.dumps(a, sort_keys=True)}`" for n, a in seen.items()) + "."
    )
    print(text, flush=True)
    if not args.no_write:
        write_section(args.section, text)
    return 0


def render_admitted(
    args: argparse.Namespace,
    command: str,
    levels: list[int],
    runs: Runs,
    errors: dict[tuple[str, str, int], int],
    loads: list[str],
    answered: dict[str, float],
    where: str,
) -> str:
    """The admitted-latency section: per sample, clients and mode, p50/p95/p99 of all runs and of each,
    and what the mutation adds over the same mode with the policy unbound."""

    def pooled(mode: str, name: str, c: int) -> list[float]:
        return [x for r in range(args.rounds) for x in runs[(mode, name, c, r)]]

    lines = [
        f"## {'Real node' if args.on == 'node' else 'Local control plane'}: the latency judging the pods as "
        "admitted adds",
        "",
        *header(command),
        f"Clients: bench/loadgen.py POSTing the sample to its collection with `?dryRun=All` through {where}; "
        f"{args.per_client} requests per client per run and level, {args.rounds} runs (mode order reversed every other "
        "run). Mutated = the MutatingAdmissionPolicy `bench-admitted` bound (a label on every Pod of the sample "
        "namespaces): the Dry Run's pods are changed by admission and every check runs again on them. Added by the "
        "mutation = the mode's percentile minus the same mode's with the policy unbound.",
        "",
        "| sample | clients | mode | calls | p50 | p95 | p99 | each run p50 / p95 / p99 | added by the mutation "
        "p50 / p95 / p99 | errors |",
        "|---|---:|---|---:|---:|---:|---:|---|---|---:|",
    ]
    for name in PATHS:
        for c in levels:
            for mode in ADMITTED_MODES:
                xs = pooled(mode, name, c)
                each = "; ".join(
                    " / ".join(f"{pct(runs[(mode, name, c, r)], q):.1f}" for q in (50, 95, 99))
                    for r in range(args.rounds)
                )
                added = ""
                if mode.endswith(MUTATED):
                    ys = pooled(mode.removesuffix(MUTATED), name, c)
                    added = " / ".join(f"{pct(xs, q) - pct(ys, q):+.1f}" for q in (50, 95, 99))
                lines.append(
                    f"| {name} | {c} | {mode} | {len(xs)} | {pct(xs, 50):.1f} | {pct(xs, 95):.1f} | "
                    f"{pct(xs, 99):.1f} | {each} | {added} | {errors[(mode, name, c)]} |"
                )
    lines += [
        "",
        f"Load average at the start of each phase: {', '.join(loads)}. Reviews answered: "
        + ", ".join(f"{m}: {n:.0f}" for m, n in answered.items())
        + ".",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    timed_main(main)
