"""A real single-node Kubernetes, built and run here: the ONE place that starts and stops it.

:class:`Node` starts, on this machine and as root:

* etcd + kube-apiserver (:class:`e2e.harness.controlplane.ControlPlane`), the apiserver listening on
  and advertising the bridge's address (a local address: pods reach it through the
  ``kubernetes`` Service; the host reaches it over loopback routing), with a kubelet client
  certificate so ``kubectl logs``/``exec`` work;
* kube-controller-manager (every default controller: namespaces, service accounts and their
  tokens, garbage collector, quota, job, endpoint slices, deployments...), kube-scheduler;
* containerd (the Debian package) + runc, its CRI plugin with ``restrict_oom_score_adj``
  (this VM lacks CAP_SYS_RESOURCE) and the CNI ``bridge`` plugin on a bridge of our own;
* kube-proxy (iptables mode), which makes ClusterIPs work from pods *and* from the
  apiserver: the webhook is called through its Service, as in a user's cluster. (The
  apiserver's ``--enable-aggregator-routing`` would route webhook calls to endpoints
  directly, but pods still need the ``kubernetes`` Service to reach the apiserver, so
  kube-proxy is needed anyway; with it both paths are the real ones.)
* the kubelet (cgroupfs driver, its cgroups under a root of its own, node IP on the bridge),
  with ``clusterDNS: [<the Service range's .10 address>]`` and ``clusterDomain: cluster.local``
  as kubeadm writes them (:func:`cluster_dns_ip`); the DNS server itself, CoreDNS, is deployed
  by :class:`e2e.harness.stack.Stack` (without it pods get a nameserver nobody answers on).

Network safety: the pod and Service ranges are checked against ``ip route`` before anything
starts (a collision is an error); the bridge's connected route covers the pod range and a
route sends the Service range into the bridge *before* any ClusterIP is used, so a packet
kube-proxy has not rewritten yet stays on this machine; a guard chain in the filter table
drops (and counts) anything addressed to those ranges that would leave by the default
route's interface (:meth:`Node.guard_counters`; e2e/test_node.py asserts it stays 0).
IP forwarding and masquerading are left off: pods reach only the host and each other.

Teardown (:meth:`Node.stop`) stops every process the harness started, by PID (and the
container processes and shims containerd started for it, found under its own cgroup root and
socket), unmounts what was mounted, removes the bridge, the veths, the guard chain and every
iptables chain/rule that was not there at start, the cgroups, the fixed paths the kubelet and
containerd create, and restores the sysctls the kubelet changes. :meth:`Node.leftovers`
compares with the snapshot taken at start (e2e/test_node.py asserts it is empty).

Library use (the next issues run JobSet/Trainer/Kueue controllers on it)::

    with Node() as node:
        node.cp.kubectl("get", "nodes")
        node.load_image(Path("image.oci.tar"))

Command line::

    python -m e2e.harness.node up --state-dir .demo/node   # prints export KUBECONFIG=...
    python -m e2e.harness.node down --state-dir .demo/node
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.controlplane import (
    ControlPlane,
    ControlPlaneError,
    _die_with_parent,
    _pid_alive,
    _tail,
    _write,
    cache_dir,
    ensure_built,
    free_ports,
    stop_pid,
)

NODE_NAME = "preflight-node"
#: Candidate (pod CIDR, Service CIDR) pairs; the first that collides with no route is used.
CIDR_CANDIDATES = [
    ("10.244.0.0/24", "10.96.0.0/24"),
    ("172.30.244.0/24", "172.30.96.0/24"),
    ("192.168.244.0/24", "192.168.96.0/24"),
]
GUARD_CHAIN = "PREFLIGHT-NODE-GUARD"
#: the kubelet's clusterDomain (kubeadm's default, DefaultServiceDNSDomain)
CLUSTER_DOMAIN = "cluster.local"
#: One node at a time per machine: the kubelet's fixed paths, the guard chain and the start
#: snapshot are machine-wide. Node.start() holds this lock until stop(). Under it, a node whose
#: owner died before stop() (a killed session or CI run: its processes die with it, its bridge,
#: chains and mounts stay) is torn down first (:func:`stale_state_dirs`); a kubelet it did not
#: start (a node left up by ``python -m e2e.harness.node up``) is waited for, then named.
MACHINE_LOCK = Path("/run/preflight-node.lock")
MACHINE_WAIT_SECONDS = 5 * 60
#: Paths the kubelet/containerd/CNI write whatever their config says; removed at teardown
#: when they did not exist at start.
FIXED_PATHS = [
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/run/containerd",
    "/var/lib/cni",
    "/run/netns",
    "/var/run/netns",
    "/etc/cni",
    "/opt/cni",
]
#: Sysctls the kubelet (protectKernelDefaults: false) or kube-proxy may set; restored at teardown.
SYSCTLS = [
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/conf/all/route_localnet",
    "net/ipv4/ip_forward",
    "net/netfilter/nf_conntrack_max",
    "net/netfilter/nf_conntrack_tcp_timeout_established",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
    "net/bridge/bridge-nf-call-iptables",
]
TABLES = ("filter", "nat", "mangle", "raw")
REQUIRED_COMMANDS = {
    "containerd": "containerd",
    "runc": "runc",
    "ctr": "containerd",
    "iptables": "iptables",
    "iptables-save": "iptables",
    "ip": "iproute2",
    "conntrack": "conntrack",
    "nft": "nftables",
}
CNI_BIN_DIR = Path("/usr/lib/cni")
CHART_DIR = Path(__file__).resolve().parents[2] / "charts" / "preflight-webhook"
SAMPLES_DIR = Path(__file__).resolve().parents[1] / "samples"
CHART_RELEASE = "preflight-webhook"  # the chart's full name is then the release name
CHART_NAMESPACE = "preflight-system"


_SEQ = 0


class NodeError(ControlPlaneError):
    """The node could not be started, used or torn down; the message says why."""


def _run(argv: Sequence[str], check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw)
    if check and proc.returncode != 0:
        raise NodeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def binary_version(path: Path) -> tuple[int, int, int]:
    """``(1, 37, 2)`` from a Kubernetes binary's ``--version`` ("Kubernetes v1.37.2")."""
    out = _run([str(path), "--version"], timeout=60).stdout.split()[-1]
    major, minor, patch = (out.lstrip("v").split("-")[0].split(".") + ["0", "0"])[:3]
    return int(major), int(minor), int(patch)


def kubelet_config(version: tuple[int, int, int], base: dict[str, Any]) -> dict[str, Any]:
    """The KubeletConfiguration for this kubelet's version: ``base`` plus the fields that version
    has (k8s.io/kubelet config/v1beta1 types.go of each release).

    * ``failCgroupV1: false`` from 1.31, where the field appeared (KEP-4569); from 1.35 it
      defaults to true and the kubelet refuses this VM's cgroup v1 hierarchies without it. A
      1.30 kubelet would only warn about the unknown field (lenient v1beta1 decoding), but
      nothing unknown is sent.
    """
    cfg = dict(base)
    if version[:2] >= (1, 31):
        cfg["failCgroupV1"] = False
    return cfg


def cluster_dns_ip(service_cidr: str) -> str:
    """The cluster DNS Service's ClusterIP: the 10th address of the Service range, as kubeadm
    picks it (``GetDNSIP``: ``GetIndexedIP(serviceSubnet, 10)``), e.g. 10.96.0.10."""
    net = ipaddress.ip_network(service_cidr)
    return str(net.network_address + 10)


def _another_node_present() -> bool:
    """A kubelet runs, or a node's guard chain still exists: another node is up or still tearing down.

    The kubelet exits early in a teardown, the iptables chains go last, so both are waited for
    (a node started while the other's chains were being removed failed with "Chain already exists").
    """
    if _run(["pgrep", "-x", "kubelet"], check=False).stdout.strip():
        return True
    return _run(["iptables", "-w", "-S", GUARD_CHAIN], check=False).returncode == 0


def poll_until(
    what: str, cond: Callable[[], bool | str], timeout: float, every: float = 0.5, context: Callable[[], str] = str
) -> None:
    """Poll ``cond`` (True: done; a string: why not yet) until it is True or ``timeout`` passes, then
    raise NodeError naming ``what``, the last answer and ``context()`` (e.g. a log tail). An apiserver
    error counts as "not yet". The one polling loop of the stack on the node (stack.py, aiperf_stack.py)."""
    deadline = time.monotonic() + timeout
    last: bool | str = ""
    while time.monotonic() < deadline:
        try:
            last = cond()
        except ControlPlaneError as e:
            last = str(e)[-300:]
        if last is True:
            return
        time.sleep(every)  # polling the apiserver for a condition
    tail = context()
    raise NodeError(f"timed out after {timeout:.0f}s waiting for {what}: {last}" + (f"\n{tail}" if tail else ""))


def stale_state_dirs() -> list[Path]:
    """State dirs of in-process nodes whose owner is gone without stop() (a killed session or CI run).

    Called only under the machine lock, so no live harness node is among them. A node that
    ``up`` left running on purpose (its state dir given on the command line, ``detached``) is
    never one; a node.json from before ``owner_pid`` was recorded is its owner's temporary dir
    (``preflight-node-*``, made only for in-process nodes), so it is stale too.
    """
    out = []
    for f in sorted(Path(tempfile.gettempdir()).glob("preflight-node-*/node.json")):
        try:
            state = json.loads(f.read_text())
        except (OSError, ValueError):
            state = {}  # killed while writing it: still a node of ours
        if state.get("detached"):
            continue
        owner = state.get("owner_pid")
        if isinstance(owner, int) and owner != os.getpid() and _pid_alive(owner):
            continue
        out.append(f.parent)
    return out


def preflight_problems() -> list[str]:
    """Why a node cannot run on this machine (empty when it can)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("the real node needs root (containerd, kubelet, iptables, network namespaces)")
    missing = sorted({pkg for cmd, pkg in REQUIRED_COMMANDS.items() if shutil.which(cmd) is None})
    if not (CNI_BIN_DIR / "bridge").exists():
        missing.append("containernetworking-plugins")
    if missing:
        problems.append(f"missing Debian packages: {' '.join(missing)} (as root: bash e2e/build.sh node)")
    if not Path("/sys/fs/cgroup").is_dir():
        problems.append("no /sys/fs/cgroup")
    return problems


def routes() -> list[dict[str, Any]]:
    return json.loads(_run(["ip", "-j", "route", "show", "table", "all"]).stdout or "[]")


def default_route_devs() -> set[str]:
    return {r["dev"] for r in routes() if r.get("dst") == "default" and r.get("dev")}


def pick_cidrs() -> tuple[str, str]:
    """The first candidate (pod, Service) CIDR pair that overlaps no existing route."""
    nets = []
    for r in routes():
        dst = r.get("dst")
        if not dst or dst == "default" or ":" in dst:
            continue
        with contextlib.suppress(ValueError):
            nets.append(ipaddress.ip_network(dst if "/" in dst else f"{dst}/32", strict=False))
    for pod, svc in CIDR_CANDIDATES:
        if not any(ipaddress.ip_network(c).overlaps(n) for c in (pod, svc) for n in nets):
            return pod, svc
    raise NodeError(f"every candidate pod/Service CIDR pair {CIDR_CANDIDATES} collides with a route here: {nets}")


# --------------------------------------------------------------------------- host snapshot


def _iptables_save(cmd: str = "iptables-save") -> dict[str, list[str]]:
    """{table: normalized rule/chain lines} (counters and comments stripped)."""
    out: dict[str, list[str]] = {}
    if shutil.which(cmd) is None:
        return out
    table = None
    for line in _run([cmd], check=False).stdout.splitlines():
        if line.startswith("*"):
            table = line[1:]
            out[table] = []
        elif line.startswith(":") and table:
            out[table].append(line.split()[0])  # chain name without policy counters
        elif line.startswith("-") and table:
            out[table].append(line)
    return out


def _nft_tables() -> list[str]:
    """``family name`` of every nftables table (iptables-nft makes one per iptables table it touches)."""
    if shutil.which("nft") is None:
        return []
    return sorted(
        line[len("table ") :]
        for line in _run(["nft", "list", "tables"], check=False).stdout.splitlines()
        if line.startswith("table ")
    )


def _mounts() -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4].replace("\\040", " ") for line in f]


def _links() -> set[str]:
    return {link["ifname"] for link in json.loads(_run(["ip", "-j", "link", "show"]).stdout or "[]")}


def _read_sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", name).read_text().strip()
    except OSError:
        return None


def _cgroup_hierarchies() -> list[Path]:
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():
        return [root]  # pure cgroup v2
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())


def snapshot() -> dict[str, Any]:
    """What the host looks like (interfaces, iptables, mounts, fixed paths, sysctls, routes)."""
    return {
        "links": sorted(_links()),
        "iptables": _iptables_save("iptables-save"),
        "ip6tables": _iptables_save("ip6tables-save"),
        "nft_tables": _nft_tables(),
        "mounts": sorted(set(_mounts())),
        "paths": sorted(p for p in FIXED_PATHS if os.path.lexists(p)),
        "sysctls": {n: _read_sysctl(n) for n in SYSCTLS},
        "routes": sorted(json.dumps(r, sort_keys=True) for r in routes()),
    }


def diff_snapshots(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What ``after`` has that ``before`` had not (or changed), as readable lines."""
    out = []
    for key in ("links", "mounts", "paths", "routes", "nft_tables"):
        for extra in sorted(set(after[key]) - set(before[key])):
            out.append(f"{key}: {extra} left behind")
    for key in ("iptables", "ip6tables"):
        for table in sorted(set(before[key]) | set(after[key])):
            b, a = set(before[key].get(table, [])), set(after[key].get(table, []))
            if table not in before[key] and all(line.startswith(":") for line in a):
                continue  # a table with only built-in chains: reported (or not) by nft_tables
            for extra in sorted(a - b):
                out.append(f"{key} {table}: {extra} left behind")
    for name, value in before["sysctls"].items():
        if after["sysctls"].get(name) != value:
            out.append(f"sysctl {name}: {value} at start, {after['sysctls'].get(name)} now")
    return out


# --------------------------------------------------------------------------- the node


class Node:
    """A single-node cluster on this machine; see the module docstring.

    ``state_dir``: where everything goes (a temp dir removed by :meth:`stop` when None).
    ``start_timeout``: the deadline for each component to become ready; on expiry start()
    raises :class:`NodeError` with the component's log tail (and tears down what started).
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        build: bool = True,
        start_timeout: float = 180.0,
        verbose: bool = True,
        pause_image: str | None = None,
    ) -> None:
        self._given_state_dir = Path(state_dir).resolve() if state_dir is not None else None
        self._build = build
        self.start_timeout = start_timeout
        self.verbose = verbose
        self.pause_image = pause_image or PAUSE_IMAGE
        self.state_dir: Path | None = None
        self.cp: ControlPlane | None = None
        self.bridge = ""
        self.bridge_ip = ""
        self.pod_cidr = ""
        self.service_cidr = ""
        self.cgroup_root = ""
        self.containerd_sock: Path | None = None
        self._procs: dict[str, subprocess.Popen] = {}
        self._logfiles: list[Any] = []
        self._before: dict[str, Any] | None = None
        self._guard_rules: list[list[str]] = []
        self._started = False
        self._lock_fd: int | None = None

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> Node:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pids(self) -> dict[str, int]:
        out = {name: p.pid for name, p in self._procs.items()}
        if self.cp is not None:
            out.update(self.cp.pids)
        return out

    def _say(self, msg: str) -> None:
        if self.verbose:
            print(f"==> node: {msg}", file=sys.stderr, flush=True)

    def start(self) -> Node:
        if self._started:
            return self
        problems = preflight_problems()
        if problems:
            raise NodeError("the real node cannot run on this machine: " + "; ".join(problems))
        self._acquire_machine()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self._started = True
        return self

    def _acquire_machine(self) -> None:
        """Wait for the machine-wide node lock, then for any other node's kubelet to exit."""
        if self._lock_fd is not None:
            return
        fd = os.open(MACHINE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._say(f"another node holds {MACHINE_LOCK}; waiting for it to stop")
                fcntl.flock(fd, fcntl.LOCK_EX)
            for stale in stale_state_dirs():
                self._say(f"a node whose owner died before stopping it is still here ({stale}); tearing it down")
                teardown_state_dir(stale)
            deadline = time.monotonic() + MACHINE_WAIT_SECONDS
            said = False
            while _another_node_present():
                if time.monotonic() > deadline:
                    kubelets = _run(["pgrep", "-a", "-x", "kubelet"], check=False).stdout.strip()
                    raise NodeError(
                        f"another node is still up after {MACHINE_WAIT_SECONDS // 60} min (a kubelet this harness "
                        f"did not start, or the {GUARD_CHAIN} iptables chain): "
                        f"{kubelets[:400] or 'no kubelet, the chain is left'}; if `python -m e2e.harness.node up` "
                        "started it, stop it: python -m e2e.harness.node down --state-dir DIR"
                    )
                if not said:
                    self._say("another node's kubelet or guard chain is still there; waiting for its teardown")
                    said = True
                time.sleep(2)  # polling a foreign process: there is nothing to wait on
        except BaseException:
            os.close(fd)
            raise
        self._lock_fd = fd

    def _release_machine(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def _start(self) -> None:
        t0 = time.monotonic()
        cache = ensure_built(quiet=True) if self._build else cache_dir()
        self.bin_dir = cache / "bin"
        for tool in ("kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy"):
            if not (self.bin_dir / tool).is_file():
                raise NodeError(f"{self.bin_dir / tool} missing: run bash e2e/build.sh node")
        if self._given_state_dir is not None:
            self.state_dir = self._given_state_dir
            self.state_dir.mkdir(parents=True, exist_ok=True)
        else:
            self.state_dir = Path(tempfile.mkdtemp(prefix="preflight-node-"))
        self.state_dir.chmod(0o755)
        (self.state_dir / "logs").mkdir(exist_ok=True)
        self._before = snapshot()
        _write(self.state_dir / "snapshot.json", json.dumps(self._before), 0o644)
        global _SEQ
        _SEQ += 1
        tag = format((os.getpid() * 16 + _SEQ) % 0xFFFFF, "x")
        self.bridge = f"pfnode{tag}"[:15]
        self.cgroup_root = f"/preflight-node-{tag}"
        self.pod_cidr, self.service_cidr = pick_cidrs()
        self.bridge_ip = str(next(ipaddress.ip_network(self.pod_cidr).hosts()))
        self._write_state()
        self._setup_network()
        self._say(
            f"bridge {self.bridge} {self.bridge_ip}, pods {self.pod_cidr}, Services {self.service_cidr} routed into it"
        )

        self.cp = ControlPlane(
            self.state_dir / "cp",
            build=False,
            start_timeout=self.start_timeout,
            bind_address=self.bridge_ip,
            service_cidr=self.service_cidr,
            kubelet_client=True,
            aggregation_layer=True,  # Kueue's visibility API is an APIService its controller serves
            verbose=self.verbose,
            die_with_parent=self._given_state_dir is None,
        )
        # its ServiceAccount controller makes the namespaces' default ServiceAccounts: the
        # harness waits for them rather than racing it (ControlPlane.default_service_accounts)
        self.cp.controller_manager = True
        self.cp.start()
        self._write_state()
        self._start_containerd()
        self._say(f"containerd ready ({time.monotonic() - t0:.1f}s)")
        self.load_image(build_images("pause") / "pause.tar")
        self._start_kube_proxy()
        self._start_kubelet()
        self._start_controllers()
        self._write_state()
        self.wait_node_ready()
        self._say(f"node {NODE_NAME} Ready ({time.monotonic() - t0:.1f}s)")
        self.wait_default_serviceaccount("default")
        self._say(f"controllers up: default ServiceAccount exists ({time.monotonic() - t0:.1f}s)")

    # ----------------------------------------------------------------- network

    def _setup_network(self) -> None:
        assert self.state_dir is not None
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        _run(
            [
                "ip",
                "addr",
                "add",
                f"{self.bridge_ip}/{ipaddress.ip_network(self.pod_cidr).prefixlen}",
                "dev",
                self.bridge,
            ]
        )
        _run(["ip", "link", "set", self.bridge, "up"])
        # The Service range goes into the bridge BEFORE anything uses a ClusterIP: a packet that
        # kube-proxy has not rewritten (yet) is delivered nowhere rather than off the machine.
        _run(["ip", "route", "add", self.service_cidr, "dev", self.bridge])
        _run(["iptables", "-w", "-N", GUARD_CHAIN])
        for dev in sorted(default_route_devs()):
            for cidr in (self.pod_cidr, self.service_cidr):
                self._guard_rules.append(["-o", dev, "-d", cidr, "-j", "DROP"])
        for rule in self._guard_rules:
            _run(["iptables", "-w", "-A", GUARD_CHAIN, *rule])
        for hook in ("OUTPUT", "FORWARD"):
            _run(["iptables", "-w", "-I", hook, "1", "-j", GUARD_CHAIN])
        cni = self.state_dir / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        conf = {
            "cniVersion": "0.4.0",
            "name": "preflight-node",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": True,
                    "ipMasq": False,  # nothing of the pods' is ever routed off this machine
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(cni / "ipam"),
                        "ranges": [[{"subnet": self.pod_cidr, "gateway": self.bridge_ip}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}, "snat": False},
            ],
        }
        _write(cni / "net.d" / "10-preflight-node.conflist", json.dumps(conf, indent=2), 0o644)

    @property
    def dns_ip(self) -> str:
        """The ClusterIP the kubelet gives pods as their nameserver (:func:`cluster_dns_ip`)."""
        return cluster_dns_ip(self.service_cidr)

    def guard_counters(self) -> dict[str, int]:
        """Packets the guard chain dropped per rule (addressed to pod/Service ranges, leaving by the default route)."""
        out = _run(["iptables", "-w", "-L", GUARD_CHAIN, "-n", "-v", "-x"]).stdout.splitlines()[2:]
        return {" ".join(line.split()[2:]): int(line.split()[0]) for line in out if line.strip()}

    # ----------------------------------------------------------------- processes

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        assert self.state_dir is not None
        log = open(self.state_dir / "logs" / f"{name}.log", "ab")
        self._logfiles.append(log)
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            preexec_fn=_die_with_parent if self._given_state_dir is None else None,
        )
        self._procs[name] = proc
        return proc

    def log_tail(self, name: str, lines: int = 40) -> str:
        assert self.state_dir is not None
        return _tail(self.state_dir / "logs" / f"{name}.log", lines)

    def _wait(self, what: str, names: Sequence[str], ok: Any, timeout: float | None = None) -> None:
        """Poll ``ok()`` until true; fail fast (with log tails) when a component exits or time runs out."""
        deadline = time.monotonic() + (timeout or self.start_timeout)
        last: Any = None
        while time.monotonic() < deadline:
            for name in names:
                proc = self._procs.get(name)
                if proc is not None and proc.poll() is not None:
                    raise NodeError(
                        f"{name} exited with {proc.returncode} while waiting for {what}; log tail:\n{self.log_tail(name)}"
                    )
            try:
                last = ok()
                if last is True:
                    return
            except Exception as e:
                last = e
            time.sleep(0.2)
        tails = "\n".join(f"--- {n}:\n{self.log_tail(n, 25)}" for n in names)
        raise NodeError(f"{what} not reached within {timeout or self.start_timeout:.0f}s (last: {last!r})\n{tails}")

    def _start_containerd(self) -> None:
        assert self.state_dir is not None
        d = self.state_dir / "containerd"
        d.mkdir(exist_ok=True)
        self.containerd_sock = d / "containerd.sock"
        self.registry_hosts_dir.mkdir(exist_ok=True)
        config = f"""version = 2
root = "{d / "root"}"
state = "{d / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{self.containerd_sock}"
[ttrpc]
  address = "{d / "containerd.sock.ttrpc"}"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{d / "opt"}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{self.pause_image}"
  # this VM lacks CAP_SYS_RESOURCE: a negative oom_score_adj is refused, so every sandbox fails without this
  restrict_oom_score_adj = true
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".registry]
    # per-registry host dirs (a test registry's CA as <host:port>/ca.crt: e2e/harness/registry.py containerd_hosts), read at each pull
    config_path = "{self.registry_hosts_dir}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{self.state_dir / "cni" / "net.d"}"
    max_conf_num = 1
"""
        cfg = _write(d / "config.toml", config, 0o644)
        self._spawn("containerd", [shutil.which("containerd") or "containerd", "--config", str(cfg)])
        self._wait(
            "containerd serving",
            ["containerd"],
            lambda: self.ctr("version", check=False).returncode == 0 or "no answer",
        )

    @property
    def registry_hosts_dir(self) -> Path:
        """containerd's registry config_path: one ``<host:port>/`` directory per registry (its ``ca.crt``)."""
        assert self.state_dir is not None
        return self.state_dir / "containerd" / "certs.d"

    def ctr(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``ctr -n k8s.io`` against this node's containerd."""
        return _run(
            ["ctr", "--address", str(self.containerd_sock), "-n", "k8s.io", *args], check=check, timeout=timeout
        )

    def load_image(self, archive: Path) -> None:
        """Import an OCI/docker archive into the node's containerd (pods use it with pullPolicy IfNotPresent/Never)."""
        self.ctr("images", "import", "--all-platforms", str(archive))

    def load_webhook_image(self) -> str:
        """Build (or reuse) the image from our Dockerfile and load it; returns ``repository:tag``
        (the tag derived from the source: :func:`webhook_image`)."""
        image = webhook_image()
        self.load_image(image.archive)
        return image.ref

    def helm(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """The cached helm against this node (admin); raises NodeError with its output and the release's state."""
        assert self.cp is not None
        argv = [str(self.cp.helm_path), f"--kubeconfig={self.cp.kubeconfig}", *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.cp.env())
        if proc.returncode != 0:
            raise NodeError(
                f"helm {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}\n{self.describe(CHART_NAMESPACE)}"
            )
        return proc

    def describe(self, namespace: str) -> str:
        """Pods, Deployments, Services, Secrets and recent events of ``namespace``, and the kubelet's log tail."""
        assert self.cp is not None
        out = self.cp.kubectl(
            "get", "pods,deploy,svc,endpointslices,secrets", "-n", namespace, "-o", "wide", check=False
        ).stdout
        events = self.cp.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp", check=False).stdout[
            -3000:
        ]
        return f"{out}\n{events}\nkubelet:\n{self.log_tail('kubelet', 15)}"

    def install_webhook_chart(
        self,
        release: str = CHART_RELEASE,
        namespace: str = CHART_NAMESPACE,
        probe: Path | None = None,
        chart: Path = CHART_DIR,
        values: dict[str, Any] | None = None,
    ) -> str:
        """Build/load our image and ``helm install`` the chart (``chart``: charts/preflight-webhook)
        with its default values (only the image repository, tag and ``pullPolicy=Never`` set, for this
        chart ``rbac.clusterWide``, and ``values`` given as a values file); wait until the apiserver calls the webhook through its
        Service (``kubectl apply --dry-run=server`` of ``probe`` succeeds). Returns the image reference."""
        image = self.load_webhook_image()
        repo, tag = image.rsplit(":", 1)
        extra: list[str] = []
        if chart == CHART_DIR:
            # the tests make their namespaces after the install, and the audit controller's Secret watch is
            # cluster-wide: Secrets and Events everywhere (rbac.clusterWide), not only in the namespaces that
            # exist now (the default; docs/security.md, "What each identity may do")
            values = {**(values or {}), "rbac": {"clusterWide": True, **(values or {}).get("rbac", {})}}
        if values:
            assert self.state_dir is not None
            vfile = self.state_dir / f"values-{release}.yaml"
            vfile.write_text(yaml.safe_dump(values))
            extra = ["--values", str(vfile)]
        self.helm(
            "install",
            release,
            str(chart),
            "--namespace",
            namespace,
            "--create-namespace",
            "--set",
            f"image.repository={repo}",
            "--set",
            f"image.tag={tag}",
            "--set",
            "image.pullPolicy=Never",
            *extra,
            "--wait",
            "--timeout",
            "5m",
        )
        probe = probe or SAMPLES_DIR / "trainjob-good.yaml"

        def answers() -> bool | str:
            proc = self.cp.kubectl("apply", "--dry-run=server", "-f", str(probe), check=False)  # type: ignore[union-attr]
            return True if proc.returncode == 0 else proc.stderr.strip()[-300:]

        self._wait("the apiserver calling the webhook through its Service", ["kubelet", "kube-proxy"], answers, 180)
        return image

    def _component_kubeconfig(self, user: str, groups: Sequence[str] = ()) -> Path:
        assert self.cp is not None and self.state_dir is not None
        return self.cp.write_user_kubeconfig(user, groups, self.state_dir / f"{user.replace(':', '-')}.kubeconfig")

    def _start_kube_proxy(self) -> None:
        assert self.cp is not None and self.state_dir is not None
        kc = self._component_kubeconfig("system:kube-proxy")
        health, metrics = free_ports(2)
        cfg = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kc)},
            "mode": "iptables",
            "clusterCIDR": self.pod_cidr,
            "hostnameOverride": NODE_NAME,
            "bindAddress": self.bridge_ip,
            "healthzBindAddress": f"127.0.0.1:{health}",
            "metricsBindAddress": f"127.0.0.1:{metrics}",
            # NodePorts only on the bridge address: no route_localnet, nothing on eth0
            "nodePortAddresses": [f"{self.bridge_ip}/32"],
            # leave the machine's conntrack settings alone
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            "iptables": {"masqueradeAll": False, "syncPeriod": "30s", "minSyncPeriod": "0s"},
        }
        path = _write(self.state_dir / "kube-proxy.yaml", yaml.safe_dump(cfg), 0o644)
        self._spawn("kube-proxy", [str(self.bin_dir / "kube-proxy"), f"--config={path}", "--v=1"])
        self._kube_proxy_health = health

    def _start_kubelet(self) -> None:
        assert self.cp is not None and self.state_dir is not None
        kc = self._component_kubeconfig(f"system:node:{NODE_NAME}", ["system:nodes"])
        port, health = free_ports(2)
        root = self.state_dir / "kubelet"
        root.mkdir(exist_ok=True)
        for h in _cgroup_hierarchies():  # the kubelet wants its cgroup root in every hierarchy
            (h / self.cgroup_root.lstrip("/")).mkdir(exist_ok=True)
        cfg = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.bridge_ip,
            "port": port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": health,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(self.cp.ca_path)},
            },
            "authorization": {"mode": "AlwaysAllow"},  # only the apiserver holds a client cert of our CA
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd_sock}",
            "imageServiceEndpoint": f"unix://{self.containerd_sock}",
            "resolvConf": "/etc/resolv.conf",
            # what kubeadm writes: pods (dnsPolicy ClusterFirst) ask CoreDNS (e2e/harness/stack.py)
            "clusterDNS": [self.dns_ip],
            "clusterDomain": CLUSTER_DOMAIN,
            "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "staticPodPath": "",
            "podCIDR": self.pod_cidr,
            "maxPods": 60,
            "registerNode": True,
            "protectKernelDefaults": False,
            "localStorageCapacityIsolation": True,
        }
        cfg = kubelet_config(binary_version(self.bin_dir / "kubelet"), cfg)
        path = _write(self.state_dir / "kubelet.yaml", yaml.safe_dump(cfg), 0o644)
        self._spawn(
            "kubelet",
            [
                str(self.bin_dir / "kubelet"),
                f"--config={path}",
                f"--kubeconfig={kc}",
                f"--root-dir={root}",
                f"--cert-dir={root / 'pki'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={self.bridge_ip}",
                "--v=1",
            ],
        )

    def _start_controllers(self) -> None:
        assert self.cp is not None and self.state_dir is not None
        pki = self.cp.state_dir / "pki"  # type: ignore[operator]
        kcm_kc = self._component_kubeconfig("system:kube-controller-manager")
        kcm_port, sched_port = free_ports(2)
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                f"--kubeconfig={kcm_kc}",
                f"--authentication-kubeconfig={kcm_kc}",
                f"--authorization-kubeconfig={kcm_kc}",
                "--bind-address=127.0.0.1",
                f"--secure-port={kcm_port}",
                "--leader-elect=false",
                "--controllers=*",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={self.cp.ca_path}",
                f"--service-cluster-ip-range={self.service_cidr}",
                f"--cluster-cidr={self.pod_cidr}",
                "--allocate-node-cidrs=false",
                f"--cert-dir={self.state_dir / 'kcm-pki'}",
                "--v=1",
            ],
        )
        sched_kc = self._component_kubeconfig("system:kube-scheduler")
        self._spawn(
            "kube-scheduler",
            [
                str(self.bin_dir / "kube-scheduler"),
                f"--kubeconfig={sched_kc}",
                f"--authentication-kubeconfig={sched_kc}",
                f"--authorization-kubeconfig={sched_kc}",
                "--bind-address=127.0.0.1",
                f"--secure-port={sched_port}",
                "--leader-elect=false",
                f"--cert-dir={self.state_dir / 'sched-pki'}",
                "--v=1",
            ],
        )

    def wait_node_ready(self, timeout: float | None = None) -> None:
        assert self.cp is not None

        def ready() -> Any:
            status, body = self.cp.get_raw(f"/api/v1/nodes/{NODE_NAME}")  # type: ignore[union-attr]
            if status != 200:
                return f"HTTP {status}"
            conds = {c["type"]: c for c in json.loads(body).get("status", {}).get("conditions", [])}
            ready = conds.get("Ready", {})
            return True if ready.get("status") == "True" else f"Ready={ready.get('status')}: {ready.get('message')}"

        self._wait(f"node {NODE_NAME} Ready", ["containerd", "kubelet", "kube-proxy"], ready, timeout)

    def wait_default_serviceaccount(self, namespace: str, timeout: float | None = None) -> None:
        assert self.cp is not None
        self._wait(
            f"ServiceAccount {namespace}/default (controller-manager)",
            ["kube-controller-manager"],
            lambda: self.cp.get_raw(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")[0] == 200,  # type: ignore[union-attr]
            timeout,
        )

    # ----------------------------------------------------------------- state + teardown

    def _write_state(self) -> None:
        assert self.state_dir is not None
        state = {
            "owner_pid": os.getpid(),
            # a node whose state dir was given (`up`) outlives its owner on purpose
            "detached": self._given_state_dir is not None,
            "pids": {n: {"pid": p.pid, "exe": p.args[0]} for n, p in self._procs.items()},  # type: ignore[index]
            "bridge": self.bridge,
            "bridge_ip": self.bridge_ip,
            "pod_cidr": self.pod_cidr,
            "service_cidr": self.service_cidr,
            "cgroup_root": self.cgroup_root,
            "containerd_sock": str(self.containerd_sock) if self.containerd_sock else None,
            "guard_rules": self._guard_rules,
            "kubeconfig": str(self.cp.kubeconfig) if self.cp and self.cp.kubeconfig else None,
        }
        _write(self.state_dir / "node.json", json.dumps(state, indent=2), 0o644)

    def stop(self) -> list[str]:
        """Tear everything down; returns what was left behind compared with the start snapshot (empty = clean)."""
        if self.state_dir is None:
            self._release_machine()
            return []
        teardown(self.state_dir, self._procs, self.cp, self.bin_dir if hasattr(self, "bin_dir") else None)
        self._procs.clear()
        for f in self._logfiles:
            with contextlib.suppress(OSError):
                f.close()
        self._logfiles = []
        left = self.leftovers()
        if self._given_state_dir is None:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        self.state_dir = None
        self._started = False
        self._last_leftovers = left
        self._release_machine()
        return left

    @property
    def start_snapshot(self) -> dict[str, Any] | None:
        """The host as :meth:`start` found it once it held the machine lock (another node that
        ran before is gone by then), the reference of :meth:`leftovers`."""
        return self._before

    def leftovers(self) -> list[str]:
        if self._before is None:
            return []
        return diff_snapshots(self._before, snapshot())


def _cgroup_dirs(cgroup_root: str) -> list[Path]:
    """Every cgroup directory under ``cgroup_root`` in every hierarchy, deepest first."""
    out: list[Path] = []
    for h in _cgroup_hierarchies():
        top = h / cgroup_root.lstrip("/")
        if top.is_dir():
            out += [Path(dp) for dp, _, _ in os.walk(top)]
    return sorted(out, key=lambda p: len(p.parts), reverse=True)


def _cgroup_pids(cgroup_root: str) -> set[int]:
    pids: set[int] = set()
    for d in _cgroup_dirs(cgroup_root):
        with contextlib.suppress(OSError):
            pids |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
    return pids


def _shim_pids(sock: str) -> list[int]:
    """containerd-shim processes serving this node's containerd (their argv names its socket)."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (p / "cmdline").read_bytes().split(b"\0")
            if argv and b"containerd-shim" in argv[0] and sock.encode() in b" ".join(argv):
                out.append(int(p.name))
    return out


def teardown(
    state_dir: Path,
    procs: dict[str, subprocess.Popen] | None = None,
    cp: ControlPlane | None = None,
    bin_dir: Path | None = None,
) -> None:
    """Stop and remove everything a node in ``state_dir`` made (used by stop() and ``down``)."""
    state_file = state_dir / "node.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    before = json.loads((state_dir / "snapshot.json").read_text()) if (state_dir / "snapshot.json").exists() else None
    recorded = {n: i["pid"] for n, i in state.get("pids", {}).items()}
    order = ["kube-scheduler", "kube-controller-manager", "kubelet", "kube-proxy"]
    for name in order:
        proc = (procs or {}).get(name)
        if proc is not None:
            stop_pid(proc.pid, proc=proc)
        elif name in recorded:
            _stop_recorded_pid(recorded[name], name)
    # containers: their processes live under our cgroup root; then the shims, then containerd
    cg = state.get("cgroup_root")
    if cg:
        for _ in range(3):
            pids = _cgroup_pids(cg)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
    sock = state.get("containerd_sock")
    if sock:
        for pid in _shim_pids(sock):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    proc = (procs or {}).get("containerd")
    if proc is not None:
        stop_pid(proc.pid, proc=proc)
    elif "containerd" in recorded:
        _stop_recorded_pid(recorded["containerd"], "containerd")
    if cp is not None:
        cp.stop()
    elif (state_dir / "cp" / "controlplane.json").exists():
        from e2e.harness.controlplane import _stop_recorded

        _stop_recorded(state_dir / "cp")
    if bin_dir is not None and (bin_dir / "kube-proxy").exists() and state.get("bridge"):
        _run([str(bin_dir / "kube-proxy"), "--cleanup"], check=False, timeout=60)
    # mounts under our state dir and the fixed paths (netns, shm, rootfs, pod volumes), deepest first
    prefixes = [str(state_dir)] + [p for p in FIXED_PATHS if before is None or p not in before["paths"]]
    prefixes += ["/run/netns", "/var/run/netns"]
    for _ in range(3):
        mine = [m for m in set(_mounts()) if any(m == p or m.startswith(p.rstrip("/") + "/") for p in prefixes)]
        if before is not None:
            mine = [m for m in mine if m not in before["mounts"]]
        if not mine:
            break
        for m in sorted(mine, key=len, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
    # cgroups
    if cg:
        for d in _cgroup_dirs(cg):
            with contextlib.suppress(OSError):
                d.rmdir()
    # network: veths on our bridge, the bridge (its routes go with it), the guard chain
    bridge = state.get("bridge")
    if bridge:
        links = json.loads(_run(["ip", "-j", "link", "show"], check=False).stdout or "[]")
        for link in links:
            if link.get("master") == bridge:
                _run(["ip", "link", "del", link["ifname"]], check=False)
        _run(["ip", "link", "del", bridge], check=False)
        for hook in ("OUTPUT", "FORWARD"):
            while _run(["iptables", "-w", "-D", hook, "-j", GUARD_CHAIN], check=False).returncode == 0:
                pass
        _run(["iptables", "-w", "-F", GUARD_CHAIN], check=False)
        _run(["iptables", "-w", "-X", GUARD_CHAIN], check=False)
    if before is not None:
        _restore_iptables(before)
        for table in _nft_tables():  # tables the node's iptables calls created (empty by now)
            if table not in before.get("nft_tables", []):
                _run(["nft", "delete", "table", *table.split()], check=False)
        for name, value in before["sysctls"].items():
            if value is not None and _read_sysctl(name) != value:
                with contextlib.suppress(OSError):
                    Path("/proc/sys", name).write_text(value)
        for p in FIXED_PATHS:
            if p not in before["paths"] and os.path.lexists(p):
                if os.path.islink(p) or not os.path.isdir(p):
                    os.unlink(p)
                else:
                    shutil.rmtree(p, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        state_file.unlink()


def teardown_state_dir(state_dir: Path) -> list[str]:
    """Tear down the node recorded in ``state_dir`` by its records alone (``down``, or a node its
    dead owner left: :func:`stale_state_dirs`); returns what is still left (the dir goes when nothing is)."""
    before_file = state_dir / "snapshot.json"
    before = json.loads(before_file.read_text()) if before_file.exists() else None
    teardown(state_dir, bin_dir=cache_dir() / "bin")
    left = diff_snapshots(before, snapshot()) if before is not None else []
    for line in left:
        print(f"e2e/harness/node.py: left behind: {line}", file=sys.stderr)
    if before is not None and not left:
        shutil.rmtree(state_dir, ignore_errors=True)
    return left


def _stop_recorded_pid(pid: int, name: str) -> None:
    try:
        comm = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return
    if os.path.basename(comm) == name or comm.endswith("/" + name):
        stop_pid(pid)


def _restore_iptables(before: dict[str, Any]) -> None:
    """Delete every rule and chain that was not there at start (kube-proxy and kubelet leave some)."""
    for key, cmd in (("iptables", "iptables"), ("ip6tables", "ip6tables")):
        if shutil.which(cmd) is None:
            continue
        now = _iptables_save(f"{cmd}-save")
        for table, lines in now.items():
            had = set(before[key].get(table, []))
            for rule in [r for r in lines if r.startswith("-A ") and r not in had]:
                _run([cmd, "-w", "-t", table, "-D", *_split_rule(rule[3:])], check=False)
            for chain in [c[1:] for c in lines if c.startswith(":") and c not in had]:
                _run([cmd, "-w", "-t", table, "-F", chain], check=False)
            for chain in [c[1:] for c in lines if c.startswith(":") and c not in had]:
                _run([cmd, "-w", "-t", table, "-X", chain], check=False)


def _split_rule(rule: str) -> list[str]:
    import shlex

    return shlex.split(rule)


# --------------------------------------------------------------------------- images


IMAGES_SCRIPT = Path(__file__).resolve().parents[1] / "images.sh"
PAUSE_IMAGE = "localhost/preflight/pause:local"


@dataclass(frozen=True)
class WebhookImage:
    """Our Dockerfile's image as e2e/images.sh built it: ``ref`` is ``repository:src-<hash>``, the tag
    derived from the files the image is built from, so worktrees never share (or overwrite) a tag;
    ``archive`` is its docker archive (``ctr images import``). The same reference names the image
    in buildah's e2e store (``images_dir() / "storage"``)."""

    ref: str
    archive: Path

    @property
    def repository(self) -> str:
        return self.ref.rsplit(":", 1)[0]

    @property
    def tag(self) -> str:
        return self.ref.rsplit(":", 1)[1]


def webhook_image(build: bool = True) -> WebhookImage:
    """The webhook image of this checkout's source, built first unless it exists (``build=False``:
    only name it). The one place the e2e harness and tests take its reference from."""
    proc = _images_sh("webhook" if build else "webhook-ref")
    fields = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return WebhookImage(ref=fields["ref"], archive=Path(fields["archive"]))


def build_images(what: str = "all") -> Path:
    """Run e2e/images.sh (seconds when warm) and return the directory holding the archives."""
    _images_sh(what)
    return images_dir()


def images_dir() -> Path:
    """e2e/images.sh's directory: the archives, and buildah's store in ``storage/``."""
    return Path(_images_sh("path").stdout.strip())


def _images_sh(what: str) -> subprocess.CompletedProcess[str]:
    t0 = time.monotonic()
    proc = subprocess.run(["bash", str(IMAGES_SCRIPT), what], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise NodeError(f"e2e/images.sh {what} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    for line in proc.stderr.splitlines():
        if "built in" in line:
            print(line, file=sys.stderr, flush=True)
    if time.monotonic() - t0 > 5:
        print(f"==> node: images ({what}) ready in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)
    return proc


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.harness.node", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start the node; prints export KUBECONFIG=...")
    up.add_argument("--state-dir", required=True)
    up.add_argument("--timeout", type=float, default=180.0)
    down = sub.add_parser("down", help="stop what `up` started (by PID) and remove what it made")
    down.add_argument("--state-dir", required=True)
    args = parser.parse_args(argv)
    state_dir = Path(args.state_dir).resolve()
    try:
        if args.cmd == "up":
            node = Node(state_dir, start_timeout=args.timeout)
            node.start()
            print(f"export KUBECONFIG={node.cp.kubeconfig}")  # type: ignore[union-attr]
            print(f"export PATH={node.bin_dir}:$PATH")
            return 0
        return 1 if teardown_state_dir(state_dir) else 0
    except ControlPlaneError as e:
        print(f"e2e/harness/node.py: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
