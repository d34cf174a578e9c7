"""`make demo-cluster`: the product as a user runs it, on a real single node built here.

    python -m e2e.harness.demo_cluster up      # node + our image + helm install + the sample applies
    python -m e2e.harness.demo_cluster down    # stop everything `up` started (by PID) and remove it

`up` starts the real node (e2e/harness/node.py: etcd, kube-apiserver, controller-manager, scheduler,
containerd, kube-proxy, kubelet; state in .demo/node/, git-ignored), builds the image from the
repository's Dockerfile (e2e/images.sh, cached), `helm install`s charts/preflight-webhook with
its default values (only the image repository, tag and pull policy set), waits until the
apiserver calls the webhook pods through their Service, then applies e2e/samples/ through
kubectl. The chart judges every namespace but kube-system, kube-public, kube-node-lease and
its own, so your own namespaces are judged too. Needs root (containerd, kubelet, iptables).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from e2e.harness.controlplane import ControlPlaneError
from e2e.harness.demo import SAMPLES, heading, note, show_kubectl, step
from e2e.harness.node import CHART_NAMESPACE, CHART_RELEASE, Node
from e2e.harness.node import main as node_main

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / ".demo" / "node"


def up() -> int:
    if (NODE_DIR / "node.json").exists():
        print(f"A cluster demo is recorded in {NODE_DIR.relative_to(ROOT)}/; run `make demo-cluster-down` first.")
        return 1
    total = 5
    t0 = time.monotonic()
    node = Node(NODE_DIR)
    try:
        step(
            1,
            total,
            "Starting a real single node: etcd, kube-apiserver, controller-manager, scheduler, containerd, kube-proxy, kubelet",
        )
        note("binaries from e2e/build.sh (cached); pod and Service addresses exist only on a bridge of its own")
        node.start()
        cp = node.cp
        assert cp is not None
        show_kubectl(cp, "get", "nodes", "-o", "wide")
        step(2, total, "Creating the sample namespaces, Service, Secrets and ClusterTrainingRuntime")
        # then waits until the controller-manager has made each namespace's default ServiceAccount
        cp.apply_samples_prerequisites(SAMPLES, show=show_kubectl)
        show_kubectl(cp, "get", "serviceaccounts,secrets", "-n", "demo-train")
        step(
            3,
            total,
            "Building the image from the Dockerfile and `helm install` of charts/preflight-webhook (default values)",
        )
        note("image: e2e/images.sh (buildah, a local Debian bookworm + Python 3.11 base); loaded into containerd")
        t = time.monotonic()
        image = node.install_webhook_chart()
        note(
            f"helm install {CHART_RELEASE} charts/preflight-webhook -n {CHART_NAMESPACE} --set image.repository=… "
            f"--set image.tag=… --set image.pullPolicy=Never  ({image}; answering after {time.monotonic() - t:.0f}s)"
        )
        show_kubectl(cp, "get", "pods", "-n", CHART_NAMESPACE, "-o", "wide")
        step(4, total, "Applying the samples through kubectl")
        heading("A good TrainJob: accepted")
        show_kubectl(cp, "apply", "-f", str(SAMPLES / "trainjob-good.yaml"))
        heading(
            "A good AIPerfJob: its workers ask for 3350m CPU; on a node with less, where nothing could add a node, "
            "Per-Node Schedulability denies it"
        )
        show_kubectl(cp, "apply", "-f", str(SAMPLES / "aiperfjob-good.yaml"))
        heading('A broken TrainJob (Secret key "hf_token" does not exist): denied, with the check and the fix')
        show_kubectl(cp, "apply", "-f", str(SAMPLES / "trainjob-broken.yaml"))
        heading(
            'An AIPerfJob whose pull Secret "ngc" is missing: warned (nvcr.io is private only once declared in config.privateRegistries)'
        )
        show_kubectl(cp, "apply", "--dry-run=server", "-f", str(SAMPLES / "aiperfjob-broken.yaml"))
        heading("A job that only warns, with --dry-run=server: allowed, warnings printed, nothing stored")
        show_kubectl(cp, "apply", "--dry-run=server", "-f", str(SAMPLES / "aiperfjob-warns.yaml"))
        step(5, total, f"Done in {time.monotonic() - t0:.0f}s. The node keeps running:")
        print(f"\n    export KUBECONFIG={cp.kubeconfig}")
        print(f"    export PATH={node.bin_dir}:$PATH")
        print(f"    kubectl -n {CHART_NAMESPACE} logs deploy/{CHART_RELEASE}      # the webhook's log")
        print("\n    make demo-cluster-down      # stops everything the demo started\n", flush=True)
        return 0
    except (ControlPlaneError, OSError, KeyboardInterrupt) as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        print("==> stopping everything the demo started", file=sys.stderr, flush=True)
        node.stop()
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.harness.demo_cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("cmd", choices=["up", "down"])
    args = parser.parse_args(argv)
    if args.cmd == "up":
        return up()
    if not NODE_DIR.exists():
        print(f"==> no cluster demo in {NODE_DIR}")
        return 0
    return node_main(["down", "--state-dir", str(NODE_DIR)])


if __name__ == "__main__":
    sys.exit(main())
