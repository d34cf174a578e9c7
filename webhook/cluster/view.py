"""ClusterView: what checks may ask of the cluster.

The live implementation (webhook.cluster.live) serves cached objects from watches and
makes the few live calls (Secret reads, dry-run creates) bounded by the deadline.
Unit tests of pure check logic may use a small in-memory implementation of this protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.kube import ApiError, Permission
from webhook.registry.keyring import PullSecret

__all__ = ["ApiError", "CheckNeeds", "ClusterView"]


class CheckNeeds(Protocol):
    """What the cluster layer reads of a check: its name and what it needs (checks.base.Check has it).

    The cluster layer takes this instead of importing checks/, the way a lower layer states
    the interface it serves rather than depending on the layer above."""

    @property
    def name(self) -> str: ...

    @property
    def needs_cluster(self) -> bool: ...

    @property
    def permissions(self) -> tuple[Permission, ...]: ...

    @property
    def optional_permissions(self) -> tuple[Permission, ...]: ...

    @property
    def apis(self) -> tuple[str, ...]: ...

    @property
    def named_permissions_required(self) -> bool: ...

    def named_permissions(self, settings: Settings) -> tuple[Permission, ...]: ...


class ClusterView(Protocol):
    @property
    def max_pages(self) -> int:
        """Pages a paged on-demand read may take (Kueue's pending workloads, webhook/models/kueue/wait.py):
        1 at apply (the admission deadline); the audit controller's view, whose every request is paced
        by audit.qps, allows more (webhook/audit/runner.py)."""
        ...

    # --- cached (watch-backed) objects; plain dicts ---
    def list_cached(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Objects of a cached resource ("resourcequotas", "nodes", "localqueues", ...)."""
        ...

    def get_cached(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...

    def cache_age(self, resource: str) -> float | None:
        """Seconds since the cache of `resource` was last known in sync (None: never synced)."""
        ...

    def cache_version(self, resource: str) -> tuple[int, int] | None:
        """A value that changes whenever the cache of `resource` changes (a list, or an added, changed
        or deleted object); None when the view cannot tell (then compare what list_cached returns)."""
        ...

    # --- live reads and dry runs, bounded by the deadline ---
    async def secret_keys(self, namespace: str, name: str, deadline: Deadline) -> set[str] | None:
        """Key names of a Secret (data and stringData); None when it does not exist.
        Raises ApiError (403, 5xx, timeout as status 0). Values never leave this call."""
        ...

    async def pull_secret(self, namespace: str, name: str, deadline: Deadline) -> PullSecret | None:
        """A pull Secret's registry credentials, as the kubelet reads them (None: it does not exist).
        Raises ApiError. Only the Image Pull check calls this, for one registry lookup."""
        ...

    async def dry_run_create(
        self, api_version: str, kind: str, namespace: str, body: dict[str, Any], deadline: Deadline
    ) -> dict[str, Any] | None:
        """POST body with dryRun=All: the object as admission would store it (after every mutating layer;
        None when the view cannot tell). Raises ApiError with the apiserver's message on rejection."""
        ...

    async def get_object(
        self,
        api_version: str,
        resource: str,
        namespace: str | None,
        name: str,
        deadline: Deadline,
        *,
        ttl: float = 0.0,
        subresource: str = "",
        query: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """A live GET of one object (None on 404); for things not cached (e.g. a Lease).
        `ttl` > 0: an answer (found or not found) is reused that many seconds.
        `subresource`: that subresource of the object (e.g. clusterqueues/<name>/pendingworkloads).
        `query`: its query parameters (one page of it: `offset`, `limit`), each query its own read."""
        ...

    async def list_objects(
        self,
        api_version: str,
        resource: str,
        namespace: str,
        label_selector: str,
        deadline: Deadline,
        ttl: float = 0.0,
    ) -> list[dict[str, Any]]:
        """A live LIST of one namespace's objects by label selector (e.g. a Service's EndpointSlices).
        `ttl` > 0: an answer is reused that many seconds."""
        ...

    def kept(self, read: str, *args: Any, **kw: Any) -> tuple[Any] | None:
        """(the answer,) the live read `read` ("secret_keys", "get_object", "list_objects") with these arguments
        gives now without a request or a wait (an answer kept within its ttl, a name no object can have), else
        None (and always None for a view that keeps nothing). Raises what the read raises for the same mistake."""
        ...

    # --- discovery and capabilities ---
    def served(self, group_version: str) -> bool: ...

    def server_version(self) -> tuple[int, int] | None: ...

    def check_capability(self, check: CheckNeeds) -> tuple[bool, str]:
        """(usable, reason). usable=False lowers the check to skip with `reason`."""
        ...

    # --- life cycle: the server's readiness, /capabilities and shutdown ---
    @property
    def ready(self) -> bool:
        """Caches synced and capabilities probed: the webhook may answer reviews."""
        ...

    @property
    def ready_reason(self) -> str:
        """Why the view is not ready ("ready" when it is)."""
        ...

    def capabilities(self) -> list[dict[str, str]]:
        """One entry per check: name, value (yes/no/unknown), source and reason."""
        ...

    async def close(self) -> None: ...
