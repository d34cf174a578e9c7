"""`make demo-cluster`: the product as a user runs it, on a real single node built here.

    python -m e2e.harness.demo_cluster up      # node + our image + helm install + the sample applies
    python -m e2e.harness.demo_cluster down    # stop everything `up` started (by PID) and remove it

`up` starts the real node (e2e/harness/node.py: etcd, kube-apiserver, controller-manager, scheduler,
containerd, kube-proxy, kubelet; state in .demo/node/, git-ignored), then installs as users do
(e2e/harness/oci_install.py): a private registry on the node's bridge (the CNCF distribution
registry, e2e/harness/registry.py: TLS from a CA of its own, htpasswd; state in .demo/registry/),
the image built from the repository's Dockerfile (e2e/images.sh, cached) and the `helm package`d
chart pushed to it by scripts/release.sh, `helm install oci://…` with its default values (only the
pull Secret set), containerd pulling the image from the registry; it waits until the apiserver
calls the webhook pods through their Service, then applies e2e/samples/ through kubectl. The chart judges every namespace but kube-system, kube-public, kube-node-lease and
its own, so your own namespaces are judged too. Needs root (containerd, kubelet, iptables).
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import trustme

from e2e.harness.controlplane import ControlPlaneError
from e2e.harness.demo import SAMPLES, heading, note, show_kubectl, step
from e2e.harness.node import CHART_NAMESPACE, CHART_RELEASE, SAMPLES_DIR, Node, _stop_recorded_pid, poll_until
from e2e.harness.node import main as node_main
from e2e.harness.oci_install import install, publish
from e2e.harness.registry import Registry, RegistryError

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / ".demo" / "node"
REGISTRY_DIR = ROOT / ".demo" / "registry"
REGISTRY_USER = "demo"
#: the chart's version and the image's tag in the demo's registry
DEMO_VERSION = "0.0.0-demo"


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
        step(3, total, "Installing as users do: image and chart pushed to a private registry, `helm install oci://…`")
        install_from_registry(node)
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
    except (ControlPlaneError, RegistryError, OSError, KeyboardInterrupt) as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        print("==> stopping everything the demo started", file=sys.stderr, flush=True)
        stop_registry()
        node.stop()
        return 1


def install_from_registry(node: Node) -> None:
    """The registry on the node's bridge (left running: its PID in .demo/registry/registry.json, stopped by
    `down`), scripts/release.sh pushing our image and the chart to it, `helm install oci://…` from it."""
    assert node.cp is not None and node.bridge_ip is not None
    password = secrets.token_hex(12)  # a throw-away login, never printed; in .demo/registry/htpasswd, bcrypt
    reg = Registry(REGISTRY_DIR, trustme.CA(), {REGISTRY_USER: password}, host=node.bridge_ip).start()
    (REGISTRY_DIR / "registry.json").write_text(json.dumps({"pid": reg.proc.pid if reg.proc else None}))
    note(f"registry: https://{reg.address} (CNCF distribution, htpasswd user {REGISTRY_USER!r}; CA {rel(reg.ca_file)})")
    t = time.monotonic()
    published = publish(node, reg, REGISTRY_USER, password, DEMO_VERSION)
    note(
        f"scripts/release.sh pushed ({time.monotonic() - t:.0f}s with e2e/images.sh's build of the image, cached if unchanged):"
    )
    note(f"  image  {published.image}")
    note(f"  chart  {published.chart} --version {published.version}")
    t = time.monotonic()
    install(node, reg, published, REGISTRY_USER, password)
    cp = node.cp
    note(
        f"helm install {CHART_RELEASE} {published.chart} --version {published.version} -n {CHART_NAMESPACE} "
        f"--ca-file {rel(reg.ca_file)} --set imagePullSecrets[0].name=regcred  ({time.monotonic() - t:.0f}s)"
    )
    # the first pod's pull (the kubelet's "Successfully pulled image …"); later pods find it present
    pulled = [
        e["message"]
        for e in json.loads(cp.kubectl("get", "events", "-n", CHART_NAMESPACE, "-o", "json").stdout)["items"]
        if e.get("reason") == "Pulled" and str(e.get("message", "")).startswith("Successfully pulled")
    ]
    note(f"the kubelet: {pulled[0] if pulled else '(no Successfully pulled event yet)'}")

    def answers() -> bool | str:
        proc = cp.kubectl("apply", "--dry-run=server", "-f", str(SAMPLES_DIR / "trainjob-good.yaml"), check=False)
        return True if proc.returncode == 0 else proc.stderr.strip()[-300:]

    poll_until("the apiserver calling the webhook through its Service", answers, 180)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def stop_registry() -> None:
    """Stop the registry `up` left running (its recorded PID, if that is still the registry binary) and
    remove its directory (its data, htpasswd and TLS key)."""
    state = REGISTRY_DIR / "registry.json"
    if state.exists():
        pid = json.loads(state.read_text()).get("pid")
        if pid:
            _stop_recorded_pid(int(pid), "registry")
    shutil.rmtree(REGISTRY_DIR, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.harness.demo_cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("cmd", choices=["up", "down"])
    args = parser.parse_args(argv)
    if args.cmd == "up":
        return up()
    stop_registry()
    if not NODE_DIR.exists():
        print(f"==> no cluster demo in {NODE_DIR}")
        return 0
    return node_main(["down", "--state-dir", str(NODE_DIR)])


if __name__ == "__main__":
    sys.exit(main())
