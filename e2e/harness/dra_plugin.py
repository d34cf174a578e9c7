"""A DRA kubelet plugin beside the real node's kubelet: devices that pods can really be given.

``e2e/build.sh dra-plugin`` builds e2e/draplugin/main.go (against k8s.io/kubernetes at
``KUBERNETES_VERSION``, its ``k8s.io/dynamic-resource-allocation/kubeletplugin`` helper) into the
cache. :class:`DraPlugin` runs it on the host for a started :class:`~e2e.harness.node.Node`:

* it registers with the kubelet's plugin watcher (``<kubelet --root-dir>/plugins_registry``) and
  serves the kubelet's DRA gRPC API (NodePrepareResources / NodeUnprepareResources) from
  ``<root>/plugins/<driver>/dra.sock``; preparing is answering "done, no CDI device", so a pod
  whose claim the scheduler allocated from its devices really starts;
* it publishes its devices as one ResourceSlice of the node (pool = the node's name; devices
  ``gpu-0``.. with the attributes ``model`` and ``index`` and the capacity ``memory``), as a real
  driver does (kubeletplugin.Helper.PublishResources → k8s.io/dynamic-resource-allocation
  resourceslice controller);
* the DeviceClass of the driver (``device.driver == "<driver>"``) is the caller's, as it is a
  cluster admin's (or a driver's Helm chart's) in a real cluster.

Start-up ends when the kubelet confirmed the registration (the plugin prints ``registered``) and the
ResourceSlice is listed with its devices. :meth:`DraPlugin.stop` stops the process by its PID and
deletes the driver's ResourceSlices (a driver gone leaves none to allocate from).
Without this plugin the kubelet refuses such a pod ("DRA driver gpu.example.com is not registered",
issue 26): the scheduler needs no driver, the kubelet does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from e2e.harness.controlplane import _die_with_parent, stop_pid
from e2e.harness.managed import Managed
from e2e.harness.node import NODE_NAME, Node, NodeError, poll_until

BUILD_SCRIPT = Path(__file__).resolve().parents[1] / "build.sh"
DRIVER = "gpu.example.com"


def build() -> Path:
    """``e2e/build.sh dra-plugin`` (a stamp check when warm); returns the binary."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), "dra-plugin"], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise NodeError(f"e2e/build.sh dra-plugin failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    path = subprocess.run(["bash", str(BUILD_SCRIPT), "path"], capture_output=True, text=True, check=True)
    out = Path(path.stdout.strip()) / "bin" / "preflight-dra-plugin"
    if not out.is_file():
        raise NodeError(f"e2e/build.sh dra-plugin left no {out}")
    return out


def device_class(driver: str = DRIVER) -> dict[str, Any]:
    """The DeviceClass that selects every device of ``driver`` (named after it)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


class DraPlugin(Managed):
    """The plugin for ``node``'s kubelet; see the module docstring."""

    def __init__(
        self,
        node: Node,
        *,
        driver: str = DRIVER,
        devices: int = 2,
        model: str = "H100",
        memory: str = "80Gi",
        timeout: float = 120.0,
    ) -> None:
        self.node = node
        self.driver = driver
        self.devices = devices
        self.model = model
        self.memory = memory
        self.timeout = timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._out: Path | None = None
        self._log: Path | None = None

    def log_tail(self, lines: int = 30) -> str:
        if self._log is None or not self._log.exists():
            return ""
        return "\n".join(self._log.read_text(errors="replace").splitlines()[-lines:])

    def start(self) -> DraPlugin:
        node = self.node
        assert node.cp is not None and node.cp.kubeconfig is not None and node.state_dir is not None
        binary = build()
        t0 = time.monotonic()
        logs = node.state_dir / "logs"
        logs.mkdir(exist_ok=True)
        self._out, self._log = logs / "dra-plugin.out", logs / "dra-plugin.log"
        argv = [
            str(binary),
            f"--driver={self.driver}",
            f"--node-name={NODE_NAME}",
            f"--kubeconfig={node.cp.kubeconfig}",
            f"--kubelet-root={node.state_dir / 'kubelet'}",
            f"--devices={self.devices}",
            f"--model={self.model}",
            f"--memory={self.memory}",
        ]
        with open(self._out, "ab") as out, open(self._log, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=log,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        poll_until(
            f"the kubelet registering DRA driver {self.driver}", self._registered, self.timeout, context=self.log_tail
        )
        poll_until(
            f"the ResourceSlice of {self.driver} on {NODE_NAME} with {self.devices} devices",
            self._published,
            self.timeout,
            context=self.log_tail,
        )
        print(
            f"==> dra-plugin: {self.driver} registered, {self.devices} devices published "
            f"(pid {self.proc.pid}) in {time.monotonic() - t0:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        return self

    def _registered(self) -> bool | str:
        assert self.proc is not None and self._out is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"the DRA plugin exited with {self.proc.returncode}:\n{self.log_tail()}")
        return "registered" in self._out.read_text() or "no registration confirmed yet"

    def _slices(self) -> list[dict[str, Any]]:
        assert self.node.cp is not None
        proc = self.node.cp.kubectl(
            "get", "resourceslices", f"--field-selector=spec.driver={self.driver}", "-o", "json", check=False
        )
        return list(json.loads(proc.stdout or "{}").get("items") or [])

    def _published(self) -> bool | str:
        got = sum(len(s["spec"].get("devices") or []) for s in self._slices() if s["spec"].get("nodeName") == NODE_NAME)
        return got == self.devices or f"{got} devices published"

    def stop(self) -> None:
        """Stop the process (by PID), then delete the driver's ResourceSlices."""
        if self.proc is not None and self.proc.poll() is None:
            stop_pid(self.proc.pid, proc=self.proc)
        if self.proc is not None and self.node.cp is not None and self.node.cp.kubeconfig is not None:
            self.node.cp.kubectl(
                "delete", "resourceslices", f"--field-selector=spec.driver={self.driver}", "--ignore-not-found",
                check=False,
            )  # fmt: skip
        self.proc = None


if __name__ == "__main__":  # pragma: no cover - a manual check: `python -m e2e.harness.dra_plugin`
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    with Node() as n, DraPlugin(n) as p:
        print(json.dumps([s["metadata"]["name"] for s in p._slices()]))
