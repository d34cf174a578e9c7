"""ClusterView: what checks may ask of the cluster.

The live implementation (webhook.cluster.live) serves cached objects from watches and
makes the few live calls (Secret reads, dry-run creates) bounded by the deadline.
Unit tests of pure check logic may use a small in-memory implementation of this protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from webhook.deadline import Deadline

if TYPE_CHECKING:  # pragma: no cover
    from webhook.checks.base import Check


class ApiError(Exception):
    """An apiserver answer that is not a success. `status` is the HTTP code (0 = no answer)."""

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason

    @property
    def transient(self) -> bool:
        return self.status == 0 or self.status == 429 or self.status >= 500

    @property
    def forbidden(self) -> bool:
        return self.status == 403

    @property
    def not_found(self) -> bool:
        return self.status == 404


class ClusterView(Protocol):
    # --- cached (watch-backed) objects; plain dicts ---
    def list_cached(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Objects of a cached resource ("resourcequotas", "nodes", "localqueues", ...)."""
        ...

    def get_cached(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...

    def cache_age(self, resource: str) -> float | None:
        """Seconds since the cache of `resource` was last known in sync (None: never synced)."""
        ...

    # --- live reads and dry runs, bounded by the deadline ---
    async def secret_keys(self, namespace: str, name: str, deadline: Deadline) -> set[str] | None:
        """Key names of a Secret (data and stringData); None when it does not exist.
        Raises ApiError (403, 5xx, timeout as status 0). Values never leave this call."""
        ...

    async def dry_run_create(
        self, api_version: str, kind: str, namespace: str, body: dict[str, Any], deadline: Deadline
    ) -> None:
        """POST body with dryRun=All. Raises ApiError with the apiserver's message on rejection."""
        ...

    async def get_object(
        self, api_version: str, resource: str, namespace: str | None, name: str, deadline: Deadline
    ) -> dict[str, Any] | None:
        """A live GET of one object (None on 404); for things not cached (e.g. a Lease)."""
        ...

    # --- discovery and capabilities ---
    def served(self, group_version: str) -> bool: ...

    def server_version(self) -> tuple[int, int] | None: ...

    def check_capability(self, check: Check) -> tuple[bool, str]:
        """(usable, reason). usable=False lowers the check to skip with `reason`."""
        ...
