"""Which APIs the cluster serves, and the server's version, refreshed in the background.

Checks ask `served("kueue.x-k8s.io/v1beta2")` on every request, so the answer is an
in-memory set refreshed every minute (a CRD installed after start-up shows up without
a restart). The resource lists of the group/versions we care about are fetched too:
they give the plural and scope of a kind for dry-run POSTs.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from webhook.kube import JOBSET_API_VERSION, ApiError

log = logging.getLogger(__name__)

#: group/versions whose resource lists we always keep
INTERESTING = (
    "v1",
    JOBSET_API_VERSION,
    "trainer.kubeflow.org/v1alpha1",
    "kueue.x-k8s.io/v1beta2",
    "coordination.k8s.io/v1",
)


@dataclass(frozen=True)
class ApiResource:
    name: str  # plural
    kind: str
    namespaced: bool


@dataclass
class DiscoverySnapshot:
    group_versions: set[str] = field(default_factory=set)
    resources: dict[str, dict[str, ApiResource]] = field(default_factory=dict)  # gv -> kind -> resource
    version: tuple[int, int] | None = None


def gv_path(group_version: str) -> str:
    return f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"


def parse_version(doc: dict[str, Any]) -> tuple[int, int] | None:
    """(major, minor) from /version; tolerates "27+" style minors and falls back to gitVersion."""
    try:
        major = int(re.sub(r"\D.*$", "", str(doc.get("major", ""))))
        minor = int(re.sub(r"\D.*$", "", str(doc.get("minor", ""))))
        return (major, minor)
    except ValueError:
        pass
    m = re.match(r"v?(\d+)\.(\d+)", str(doc.get("gitVersion", "")))
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_group_versions(core: dict[str, Any], groups: dict[str, Any]) -> set[str]:
    """Served group/versions from /api and /apis (classic discovery documents)."""
    out = {str(v) for v in core.get("versions") or []}
    for g in groups.get("groups") or []:
        for v in g.get("versions") or []:
            gv = v.get("groupVersion")
            if gv:
                out.add(str(gv))
    return out


def parse_resources(doc: dict[str, Any]) -> dict[str, ApiResource]:
    """kind -> ApiResource for top-level resources of one APIResourceList."""
    out: dict[str, ApiResource] = {}
    for r in doc.get("resources") or []:
        name = r.get("name") or ""
        if not name or "/" in name:  # subresources
            continue
        out[r.get("kind") or ""] = ApiResource(name, r.get("kind") or "", bool(r.get("namespaced")))
    return out


class Discovery:
    def __init__(self, client: Any, *, refresh_seconds: float = 60.0, timeout: float = 15.0) -> None:
        self.client = client
        self.refresh_seconds = refresh_seconds
        self.timeout = timeout
        self.snapshot: DiscoverySnapshot | None = None
        self.last_error = ""
        self._task: asyncio.Task[None] | None = None
        self._listeners: list[Any] = []

    # --- reads
    def served(self, group_version: str) -> bool:
        return self.snapshot is not None and group_version in self.snapshot.group_versions

    def server_version(self) -> tuple[int, int] | None:
        return None if self.snapshot is None else self.snapshot.version

    def resource_for(self, group_version: str, kind: str) -> ApiResource | None:
        if self.snapshot is None:
            return None
        return self.snapshot.resources.get(group_version, {}).get(kind)

    # --- fetching
    async def fetch(self) -> DiscoverySnapshot:
        """One full discovery pass. Raises ApiError when the apiserver cannot be read."""
        get = self.client.request
        t = self.timeout
        version, core, groups = await asyncio.gather(
            get("GET", "/version", timeout=t, kind="DISCOVERY"),
            get("GET", "/api", timeout=t, kind="DISCOVERY"),
            get("GET", "/apis", timeout=t, kind="DISCOVERY"),
        )
        snap = DiscoverySnapshot(
            group_versions=parse_group_versions(core, groups),
            version=parse_version(version),
        )
        wanted = [gv for gv in INTERESTING if gv in snap.group_versions]
        docs = await asyncio.gather(
            *(get("GET", gv_path(gv), timeout=t, kind="DISCOVERY") for gv in wanted), return_exceptions=True
        )
        for gv, doc in zip(wanted, docs):
            if isinstance(doc, dict):
                snap.resources[gv] = parse_resources(doc)
            elif self.snapshot is not None and gv in self.snapshot.resources:
                snap.resources[gv] = self.snapshot.resources[gv]
        # keep lazily fetched lists of other group/versions that are still served
        if self.snapshot is not None:
            for gv, res in self.snapshot.resources.items():
                if gv not in snap.resources and gv in snap.group_versions:
                    snap.resources[gv] = res
        return snap

    async def refresh(self) -> DiscoverySnapshot:
        snap = await self.fetch()
        old = self.snapshot
        self.snapshot = snap
        self.last_error = ""
        if old is not None and old.group_versions != snap.group_versions:
            added = sorted(snap.group_versions - old.group_versions)
            removed = sorted(old.group_versions - snap.group_versions)
            log.info("served APIs changed: added %s, removed %s", added or "none", removed or "none")
        for fn in self._listeners:
            fn(snap)
        return snap

    def on_change(self, fn: Any) -> None:
        self._listeners.append(fn)

    async def resource(self, group_version: str, kind: str, timeout: float) -> ApiResource | None:
        """The plural/scope of a kind, fetching the group/version's list once if needed."""
        found = self.resource_for(group_version, kind)
        if found is not None or self.snapshot is None:
            return found
        if group_version not in self.snapshot.group_versions:
            return None
        doc = await self.client.request("GET", gv_path(group_version), timeout=timeout, kind="DISCOVERY")
        self.snapshot.resources[group_version] = parse_resources(doc)
        return self.resource_for(group_version, kind)

    # --- background refresh
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_seconds)
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except ApiError as exc:  # keep the last answer; the next pass may succeed
                self.last_error = exc.message
                log.warning("discovery refresh failed (keeping the last answer): %s", exc.message)
            except Exception:
                log.exception("discovery refresh failed")
