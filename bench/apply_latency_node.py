"""What users feel on a real node: the latency the webhook adds to an apply, called through its Service.

    .venv/bin/python bench/apply_latency_node.py [--clients 1,8] [--per-client 20] [--rounds 2] [--no-write]

bench/apply_latency.py measures the webhook as a local process the apiserver calls by URL. Here
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
each pod's IP over the bridge) moves for a probe. The clients are bench/loadgen.py, as in
bench/apply_latency.py (the table and the verdict are the same code). The section goes to
docs/benchmarks.md between ``<!-- bench:apply-latency-node -->`` markers. Needs root (the node).
"""

from __future__ import annotations

import argparse
import json
import shlex
import ssl
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.apply_latency import NONE, NOOP, OFF, ON, PATHS, measure_rounds, publish, timed_main  # noqa: E402
from bench.cluster_bench import direct_dry_runs, sample  # noqa: E402
from e2e.harness.node import SAMPLES_DIR, Node  # noqa: E402
from e2e.harness.runner import wait_until  # noqa: E402

RELEASES = {NOOP: "pf-noop", OFF: "pf-off", ON: "pf-on"}
CONFIGS: dict[str, dict[str, Any]] = {
    NOOP: {"mode": "warn"},
    OFF: {"mode": "warn", "checks": {"Dry Run": "off"}},
    ON: {"mode": "warn"},
}
PORT = 8443  # the chart's containerPort


class Release:
    """One helm release of the chart on the node, its VWC switchable on and off."""

    def __init__(self, node: Node, mode: str) -> None:
        self.node = node
        self.mode = mode
        self.name = RELEASES[mode]
        self.namespace = self.name
        self.vwc_name = ""
        self.saved: dict[str, Any] = {}
        self._ctx = ssl.create_default_context()
        self._ctx.check_hostname = False  # pod IPs are not in the Service certificate
        self._ctx.verify_mode = ssl.CERT_NONE  # the bench reading its own pods' counters

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return self.node.cp.kubectl(*args, input=input).stdout  # type: ignore[union-attr]

    def install(self) -> None:
        self.node.install_webhook_chart(self.name, self.namespace, values={"config": CONFIGS[self.mode]})
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
        exists = (
            self.node.cp.kubectl("get", "validatingwebhookconfiguration", self.vwc_name, check=False).returncode == 0
        )  # type: ignore[union-attr]
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", default="1,8")
    p.add_argument("--per-client", type=int, default=20, help="requests per client per round and level")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args()
    levels = [int(c) for c in args.clients.split(",")]
    command = " ".join([".venv/bin/python bench/apply_latency_node.py", *(shlex.quote(a) for a in sys.argv[1:])])
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
        None if args.no_write else "apply-latency-node",
        "## Real node: added apply latency through the Service, against a no-op webhook",
        command,
        modes,
        levels,
        measured,
        answered,
        clients_line=(
            f"Clients: bench/loadgen.py POSTing the sample to its collection with `?dryRun=All` through the real "
            f"kube-apiserver of the node, which calls each webhook through its Service (kube-proxy, two pods), "
            f"{args.per_client} requests per client per round, {args.rounds} rounds (mode order reversed every other "
            f"round). Each mode is a `helm install` of the chart in warn mode; the no-op is that release's own "
            f"Deployment serving bench/noop_server.py --echo-uid. One VWC in place at a time. Added = the mode's "
            f"percentile minus the no-webhook percentile; ratio = added / the no-op's added."
        ),
    )
    return 0


if __name__ == "__main__":
    timed_main(main)
