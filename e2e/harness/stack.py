"""The real stack on the real node: JobSet, Trainer and Kueue controllers, deployed as users do.

On top of :class:`e2e.harness.node.Node` (which it leaves unchanged), :class:`Stack`:

* builds or reuses (``e2e/stack.sh``: seconds when warm) the controller managers of JobSet,
  Trainer and Kueue from their own Go modules at the versions ``e2e/versions.env`` pins, each
  as ``/manager`` in an image FROM scratch, the workload image the matrix's jobs run
  (``e2e/nodeimage/workload``), and the upstream manifests rendered by ``kubectl kustomize``
  (JobSet ``config/default``, Trainer ``manifests/overlays/manager``, Kueue ``config/default``);
* deploys the cluster DNS the way Kubernetes itself ships it (:meth:`Stack.deploy_dns`):
  CoreDNS built from its own Go module at ``COREDNS_VERSION`` (``/coredns`` in an image FROM
  scratch, as its Dockerfile), from the addon manifest
  ``cluster/addons/dns/coredns/coredns.yaml.base`` of the k8s.io/kubernetes module at
  ``KUBERNETES_VERSION``, its variables substituted as kube-up does
  (``cluster/addons/dns/coredns/transforms2sed.sed``): ``__DNS__SERVER__`` the Service range's
  .10 address the kubelet's ``clusterDNS`` names, ``__DNS__DOMAIN__`` ``cluster.local``,
  ``__DNS__MEMORY__LIMIT__`` kube-up's default 170Mi (``cluster/gce/config-default.sh``); only
  the image replaced by the local one, and the Corefile's ``forward . /etc/resolv.conf`` block
  removed: this machine has no outside network, so CoreDNS answers for ``cluster.local`` (and
  the reverse zones) only and never sends a query off the node;
* loads the images into the node's containerd;
* advertises ``nvidia.com/gpu`` in the Node's status capacity (a patch of the ``status``
  subresource, as Kubernetes' "Advertise Extended Resources for a Node" task does), so the
  scheduler counts GPUs;
* applies each component's manifests with only these changes, each named where it is made:
  the controller images replaced by the local ones (``imagePullPolicy: IfNotPresent``); the
  Trainer overlay's ``third-party/jobset`` (a remote URL) left out, as its own comment says to
  when JobSet is installed, since JobSet comes from its own module here; Kueue's visibility
  ``APIService`` objects (``v1beta1`` and ``v1beta2.visibility.kueue.x-k8s.io``,
  ``insecureSkipTLSVerify``, served by its controller on port 8082 behind the Service
  ``kueue-visibility-server``) applied as rendered: the node's apiserver has the aggregation
  layer's front-proxy certificates and flags (``aggregation_layer=True`` in
  :class:`e2e.harness.node.Node`, kubeadm's, :func:`e2e.harness.controlplane.aggregation_layer_flags`);
* waits until each Deployment is Available and each component's own admission webhook answers
  (its cert-controller wrote the Secret and injected the caBundle): a server-side dry run of an
  object its webhook judges succeeds; and until each APIService a component renders is
  ``Available`` (an unavailable aggregated API would make the namespace controller's discovery
  fail, and so every namespace deletion stay ``Terminating``);
* installs Trainer's own ClusterTrainingRuntimes (``manifests/overlays/runtimes``) with every
  image replaced by the workload image;
* with ``aiperf=True``, the AIPerf operator and its stand-in endpoint
  (:class:`e2e.harness.aiperf_stack.AIPerfOperator`; images from ``e2e/stack.sh aiperf``, part
  of ``all``),
  on the JobSet deployed first; ``stack.aiperf`` is then that operator.

Use::

    with Node() as node, Stack(node) as stack:
        node.cp.kubectl("get", "pods", "-A")
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.aiperf_stack import AIPerfOperator
from e2e.harness.controlplane import ControlPlane
from e2e.harness.node import CLUSTER_DOMAIN, NODE_NAME, Node, NodeError, poll_until
from e2e.harness.trainer_manifests import training_runtime
from e2e.harness.vap import deny_policy

STACK_SCRIPT = Path(__file__).resolve().parents[1] / "stack.sh"
VERSIONS_FILE = Path(__file__).resolve().parents[1] / "versions.env"
WORKLOAD_IMAGE = "localhost/preflight/workload:local"

#: component -> (namespace, Deployment names)
COMPONENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "jobset": ("jobset-system", ("jobset-controller-manager",)),
    "trainer": ("kubeflow-system", ("kubeflow-trainer-controller-manager",)),
    "kueue": ("kueue-system", ("kueue-controller-manager",)),
}


#: the addon manifest Kubernetes ships CoreDNS with (in the k8s.io/kubernetes module)
DNS_MANIFEST = "cluster/addons/dns/coredns/coredns.yaml.base"
#: kube-up's DNS_MEMORY_LIMIT default (cluster/gce/config-default.sh: KUBE_DNS_MEMORY_LIMIT:-170Mi)
DNS_MEMORY_LIMIT = "170Mi"
DNS_NAMESPACE, DNS_DEPLOYMENT, DNS_SERVICE = "kube-system", "coredns", "kube-dns"
# the Corefile's upstream forwarding (its whole block), dropped: no outside network here
_FORWARD_BLOCK = re.compile(r"^[ \t]*forward \. /etc/resolv\.conf \{[^}]*\}[ \t]*\n", re.M)


def dns_manifests(template: str, *, server: str, domain: str, image: str) -> list[dict[str, Any]]:
    """``coredns.yaml.base`` rendered as kube-up renders it (transforms2sed.sed), the image
    replaced by ``image`` and the Corefile's ``forward . /etc/resolv.conf`` block removed."""
    text = (
        template.replace("__DNS__SERVER__", server)
        .replace("__DNS__DOMAIN__", domain)
        .replace("__DNS__MEMORY__LIMIT__", DNS_MEMORY_LIMIT)
        .replace("__MACHINE_GENERATED_WARNING__", f"Warning: This is a file generated from {DNS_MANIFEST}")
    )
    if "__" in "".join(line.split("#")[0] for line in text.splitlines()):
        raise NodeError(f"{DNS_MANIFEST}: a template variable this harness does not know is left")
    docs = [d for d in yaml.safe_load_all(text) if d]
    for d in docs:
        if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == DNS_DEPLOYMENT:
            corefile, n = _FORWARD_BLOCK.subn("", d["data"]["Corefile"])
            if n != 1:
                raise NodeError(f"{DNS_MANIFEST}: no `forward . /etc/resolv.conf` block in its Corefile")
            d["data"]["Corefile"] = corefile
    return localize(docs, lambda _old: image)


def versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def image_ref(component: str) -> str:
    v = versions()[f"{component.upper()}_VERSION"]
    if component == "coredns":
        return f"localhost/preflight/coredns:{v}"
    return f"localhost/preflight/{component}-controller:{v}"


def run_stack_script(what: str = "all") -> Path:
    """Run e2e/stack.sh (seconds when warm); returns its cache directory."""
    t0 = time.monotonic()
    proc = subprocess.run(["bash", str(STACK_SCRIPT), what], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise NodeError(f"e2e/stack.sh {what} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    for line in proc.stderr.splitlines():
        if "built in" in line:
            print(line, file=sys.stderr, flush=True)
    if time.monotonic() - t0 > 5:
        print(f"==> stack: e2e/stack.sh {what} ready in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)
    out = subprocess.run(["bash", str(STACK_SCRIPT), "path"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def localize(objects: Iterable[dict[str, Any]], image: Callable[[str], str]) -> list[dict[str, Any]]:
    """Every container/initContainer image of every pod template replaced by ``image(old)``."""
    out = []
    for obj in objects:
        _walk_images(obj, image)
        out.append(obj)
    return out


def _walk_images(node: Any, image: Callable[[str], str]) -> None:
    if isinstance(node, dict):
        for key in ("containers", "initContainers"):
            conts = node.get(key)
            if isinstance(conts, list) and all(isinstance(c, dict) for c in conts):
                for c in conts:
                    if isinstance(c.get("image"), str):
                        c["image"] = image(c["image"])
                        c["imagePullPolicy"] = "IfNotPresent"
        for v in node.values():
            _walk_images(v, image)
    elif isinstance(node, list):
        for v in node:
            _walk_images(v, image)


class Stack:
    """JobSet + Trainer + Kueue on a started :class:`Node`; see the module docstring.

    ``gpus``: the ``nvidia.com/gpu`` count the Node advertises. ``components``: which to deploy
    (in order; Trainer and ``aiperf`` need JobSet). ``dns``: deploy CoreDNS first (:meth:`deploy_dns`).
    ``aiperf``: also the AIPerf operator and its stand-in endpoint (they need ``dns``).
    """

    def __init__(
        self,
        node: Node,
        *,
        components: Sequence[str] = ("jobset", "trainer", "kueue"),
        gpus: int = 4,
        timeout: float = 300.0,
        runtimes: bool = True,
        dns: bool = True,
        aiperf: bool = False,
    ) -> None:
        if aiperf and ("jobset" not in components or not dns):
            raise ValueError("the AIPerf operator renders JobSets whose pods find each other by DNS: jobset and dns")
        self.node = node
        self.components = tuple(components)
        self.gpus = gpus
        self.timeout = timeout
        self.runtimes = runtimes
        self.dns = dns
        self.cache: Path | None = None
        self.timings: dict[str, float] = {}
        self.aiperf: AIPerfOperator | None = None
        if aiperf:
            v = versions()
            self.aiperf = AIPerfOperator(
                node, aiperf_version=v["AIPERF_VERSION"], fakellm_version=v["FAKELLM_VERSION"], timeout=timeout
            )

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        pass  # everything lives in the node; Node.stop() removes it

    def _say(self, msg: str) -> None:
        print(f"==> stack: {msg}", file=sys.stderr, flush=True)

    @property
    def cp(self) -> ControlPlane:
        """The node's control plane (there from ``Node.start()`` to ``Node.stop()``)."""
        assert self.node.cp is not None, "the Stack's node is not started: call Node.start() first"
        return self.node.cp

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.cp.kubectl(*args, **kw)

    def namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        """Create the namespace ``name`` (with ``labels``) and wait for its default ServiceAccount
        (a pod created before it exists is refused)."""
        meta: dict[str, Any] = {"name": name}
        if labels:
            meta["labels"] = labels
        self.cp.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        self.node.wait_default_serviceaccount(name)

    def start(self) -> Stack:
        t0 = time.monotonic()
        self.cache = run_stack_script("all")
        self.timings["build"] = time.monotonic() - t0
        for name in (*(("coredns",) if self.dns else ()), *self.components, "workload"):
            self.node.load_image(self.cache / "images" / f"{name}.tar")
        self.timings["load"] = time.monotonic() - t0 - self.timings["build"]
        if self.dns:
            t1 = time.monotonic()
            self.deploy_dns()
            self.timings["coredns"] = time.monotonic() - t1
            self._say(f"coredns ready: Deployment Available at {self.node.dns_ip} ({self.timings['coredns']:.0f}s)")
        self.advertise_gpus(self.gpus)
        for name in self.components:
            t1 = time.monotonic()
            self.deploy(name)
            self.timings[name] = time.monotonic() - t1
            self._say(f"{name} ready: Deployment Available, its webhook answers ({self.timings[name]:.0f}s)")
        if self.runtimes and "trainer" in self.components:
            self.install_runtimes()
        if self.aiperf is not None:
            t1 = time.monotonic()
            self.aiperf.start(self.cache / "images")  # built by e2e/stack.sh all
            self.timings["aiperf"] = time.monotonic() - t1
            self._say(f"aiperf operator and stand-in ready ({self.timings['aiperf']:.0f}s)")
        self.timings["total"] = time.monotonic() - t0
        self._say(f"stack up in {self.timings['total']:.0f}s")
        return self

    # ----------------------------------------------------------------- GPUs

    def advertise_gpus(self, count: int) -> None:
        """``nvidia.com/gpu: count`` in the Node's status capacity (the kubelet then reports it
        as allocatable too, and keeps it: the resource is not one of its device plugins')."""
        patch = {"status": {"capacity": {"nvidia.com/gpu": str(count)}}}
        self.kubectl("patch", "node", NODE_NAME, "--subresource=status", "--type=merge", "-p", json.dumps(patch))

        def advertised() -> bool | str:
            node = json.loads(self.kubectl("get", "node", NODE_NAME, "-o", "json").stdout)
            got = (node.get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu")
            return True if got == str(count) else f"allocatable nvidia.com/gpu={got}"

        self._wait(f"nvidia.com/gpu={count} allocatable on {NODE_NAME}", advertised, 60)

    # ----------------------------------------------------------------- deploy

    def manifests(self, name: str) -> list[dict[str, Any]]:
        assert self.cache is not None
        docs = [d for d in yaml.safe_load_all((self.cache / "manifests" / f"{name}.yaml").read_text()) if d]
        ref = image_ref(name)
        return localize(docs, lambda _old: ref)

    def deploy(self, name: str) -> None:
        ns, deployments = COMPONENTS[name]
        docs = self.manifests(name)
        text = yaml.safe_dump_all(docs, sort_keys=False)
        self.kubectl(
            "apply", "--server-side", "--force-conflicts", "--field-manager=preflight-stack", "-f", "-",
            input=text, timeout=180,
        )  # fmt: skip
        for dep in deployments:
            self._wait(f"Deployment {ns}/{dep} Available", lambda d=dep: self._available(ns, d), self.timeout)
        probe = _WEBHOOK_PROBES[name]
        self._wait(f"the {name} webhook answering", lambda: self._dry_run_ok(probe), self.timeout)
        for svc in (d["metadata"]["name"] for d in docs if d.get("kind") == "APIService"):
            self._wait(f"APIService {svc} Available", lambda s=svc: self._api_service_available(s), self.timeout)

    def _api_service_available(self, name: str) -> bool | str:
        """True once the aggregator reports the APIService ``Available`` (kube-aggregator
        pkg/controllers/status: its Service has a ready endpoint and answers discovery), else why not."""
        proc = self.kubectl("get", "apiservice", name, "-o", "json", check=False)
        if proc.returncode != 0:
            return proc.stderr.strip()[-200:]
        conds = {c["type"]: c for c in (json.loads(proc.stdout).get("status") or {}).get("conditions") or []}
        available = conds.get("Available") or {}
        return True if available.get("status") == "True" else f"{available.get('reason')}: {available.get('message')}"

    def deploy_dns(self) -> None:
        """CoreDNS from Kubernetes' addon manifest (:func:`dns_manifests`), its Service at the
        node's ``clusterDNS`` address; returns once the Deployment is Available (its readiness
        probe, ``/ready`` of the ``ready`` plugin, passes once the kubernetes plugin has synced)."""
        assert self.cache is not None
        template = (self.cache / "manifests" / "coredns.yaml.base").read_text()
        docs = dns_manifests(template, server=self.node.dns_ip, domain=CLUSTER_DOMAIN, image=image_ref("coredns"))
        self.kubectl(
            "apply", "--server-side", "--force-conflicts", "--field-manager=preflight-stack", "-f", "-",
            input=yaml.safe_dump_all(docs, sort_keys=False), timeout=180,
        )  # fmt: skip
        # Available alone is True at once (1 replica, maxUnavailable 1): every replica must be
        self._wait(
            f"Deployment {DNS_NAMESPACE}/{DNS_DEPLOYMENT} Available with every replica ready",
            lambda: self._available(DNS_NAMESPACE, DNS_DEPLOYMENT, every_replica=True),
            self.timeout,
        )

    def _available(self, ns: str, dep: str, *, every_replica: bool = False) -> bool | str:
        proc = self.kubectl("get", "deployment", dep, "-n", ns, "-o", "json", check=False)
        if proc.returncode != 0:
            return proc.stderr.strip()[-200:]
        obj = json.loads(proc.stdout)
        status = obj.get("status") or {}
        conds = {c["type"]: c for c in status.get("conditions") or []}
        replicas = (obj.get("spec") or {}).get("replicas", 1)
        if conds.get("Available", {}).get("status") == "True" and (
            not every_replica
            or (status.get("observedGeneration") == obj["metadata"].get("generation")
                and status.get("availableReplicas", 0) >= replicas
                and status.get("updatedReplicas", 0) >= replicas)
        ):  # fmt: skip
            return True
        pods = self.kubectl("get", "pods", "-n", ns, "-o", "wide", check=False).stdout
        return f"{conds.get('Available', {}).get('message', 'no Available condition')}\n{pods}"

    def _dry_run_ok(self, obj: dict[str, Any]) -> bool | str:
        proc = self.kubectl("create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(obj), check=False)
        return True if proc.returncode == 0 else proc.stderr.strip()[-300:]

    def install_runtimes(self) -> None:
        """Trainer's own ClusterTrainingRuntimes, every image the workload image."""
        assert self.cache is not None
        docs = [d for d in yaml.safe_load_all((self.cache / "manifests" / "runtimes.yaml").read_text()) if d]
        docs = localize(docs, lambda _old: WORKLOAD_IMAGE)
        self.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=preflight-stack", "-f", "-",
                     input=yaml.safe_dump_all(docs, sort_keys=False))  # fmt: skip

    def _wait(self, what: str, cond: Callable[[], bool | str], timeout: float) -> None:
        poll_until(what, cond, timeout)


#: an object each component's webhook judges (a server-side dry run passes only once it answers)
_WEBHOOK_PROBES: dict[str, dict[str, Any]] = {
    "jobset": {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "stack-probe", "namespace": "default"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "p",
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [{"name": "c", "image": WORKLOAD_IMAGE}],
                                }
                            }
                        }
                    },
                }
            ]
        },
    },
    "trainer": training_runtime(
        "stack-probe", {"containers": [{"name": "node", "image": WORKLOAD_IMAGE}]}, namespace="default"
    ),
    "kueue": {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "stack-probe"},
        "spec": {},
    },
}


@contextlib.contextmanager
def running_stack(*, start_timeout: float = 180, **stack_kw: Any) -> Iterator[Stack]:
    """A node started with its Stack (``Stack(node, **stack_kw)``); on exit the node stops, and
    nothing of it may be left behind (the module fixtures of the node tests share this)."""
    node = Node(start_timeout=start_timeout)
    node.start()
    try:
        yield Stack(node, **stack_kw).start()
    finally:
        left = node.stop()
        assert left == [], left


class SharedStack:
    """A node with ``Stack(node, **stack_kw)`` that several test modules use one after the other
    (e2e/conftest.py's ``shared_stack``): started on the first :meth:`get`, stopped by :meth:`stop`
    (nothing of the node may be left behind, as :func:`running_stack`). A start that failed fails
    every later :meth:`get` the same way, without a second try."""

    def __init__(self, **stack_kw: Any) -> None:
        self._kw = stack_kw
        self._cm: contextlib.AbstractContextManager[Stack] | None = None
        self._stack: Stack | None = None
        self._failed: BaseException | None = None

    def get(self) -> Stack:
        if self._failed is not None:
            raise NodeError(f"the shared node did not start: {self._failed}") from self._failed
        if self._stack is None:
            cm = running_stack(**self._kw)
            try:
                self._stack = cm.__enter__()
            except BaseException as e:
                self._failed = e
                raise
            self._cm = cm
        return self._stack

    @contextlib.contextmanager
    def borrowed(self, *, namespaces: Sequence[str] = (), objects: Sequence[dict[str, Any]] = ()) -> Iterator[Stack]:
        """The stack for one module; afterwards its ``namespaces`` and cluster ``objects`` are deleted
        (not waited for: the next module uses its own names), so the next module finds none of them."""
        st = self.get()
        try:
            yield st
        finally:
            if objects:
                st.cp.kubectl(
                    "delete", "--ignore-not-found", "--wait=false", "-f", "-",
                    input=yaml.safe_dump_all(objects), check=False,
                )  # fmt: skip
            if namespaces:
                st.cp.kubectl("delete", "namespace", "--ignore-not-found", "--wait=false", *namespaces, check=False)

    def stop(self) -> None:
        cm, self._cm, self._stack = self._cm, None, None
        if cm is not None:
            cm.__exit__(None, None, None)


def forbidden_env_policy(name: str, label: str) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy (and its binding) refusing Pods that set the env var FORBIDDEN,
    in the namespaces labelled ``<label>=true``: a layer behind Kueue's pod webhook that only a
    dry run of the pods reaches."""
    return deny_policy(
        name,
        resource="pods",
        validation={
            "expression": "!object.spec.containers.exists(c, has(c.env) && c.env.exists(e, e.name == 'FORBIDDEN'))",
            "message": "pods may not set the env var FORBIDDEN",
        },
        namespace_labels={label: "true"},
    )
