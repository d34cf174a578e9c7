"""Every read a check makes of the ClusterView, written down: `RecordingView`.

Shared by the audit controller (webhook/audit/deps.py: its reverse index, "re-check on change", and the
results it keeps between scans) and the webhook's check memo (webhook/checkmemo.py: a synchronous
check's results kept while every cache it read is unchanged). One table of what each method reads
(`_READS`), so the two never disagree on it.

A read is a `Dep`: (resource, namespace, name), where name "*" stands for a list of the
resource in that namespace ("" namespace: cluster-wide).
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from webhook.cluster.view import ClusterView

ANY = "*"
#: the check whose run is making a read now (set by the audit controller around a check's run; None: not set),
#: so that `RecordingView.by_reader` can tell which check read what (its verdict is kept on those reads)
READER: contextvars.ContextVar[str | None] = contextvars.ContextVar("preflight_audit_reader", default=None)


class Dep(NamedTuple):
    resource: str
    namespace: str
    name: str


#: What each read of the ClusterView names: method -> (its arguments -> the (resource, namespace, name)
#: it read). A dry run reads what the apiserver's admission reads in that namespace: its LimitRanges
#: and ResourceQuotas and the namespace itself (Pod Security labels); those are recorded for it.
_READS: dict[str, Callable[..., Iterable[tuple[str, str | None, str]]]] = {
    "list_cached": lambda resource, namespace=None: [(resource, namespace, ANY)],
    "get_cached": lambda resource, namespace, name: [(resource, namespace, name)],
    # a check that asks a cache's version reads its whole list (it answers from a kept listing)
    "cache_version": lambda resource: [(resource, None, ANY)],
    "secret_keys": lambda namespace, name, deadline: [("secrets", namespace, name)],
    "pull_secret": lambda namespace, name, deadline: [("secrets", namespace, name)],
    "dry_run_create": lambda api_version, kind, namespace, body, deadline: [
        ("namespaces", None, namespace),
        ("limitranges", namespace, ANY),
        ("resourcequotas", namespace, ANY),
    ],
    "get_object": lambda api_version, resource, namespace, name, deadline, *, ttl=0.0, subresource="", query=None: [
        (resource, namespace, name)
    ],
    "list_objects": lambda api_version, resource, namespace, label_selector, deadline, ttl=0.0: [
        (resource, namespace, ANY)
    ],
}
# what the live read would have read: a kept answer stands on the same object
_READS["kept"] = lambda read, *args, **kw: _READS[read](*args, **kw)
#: The ClusterView's members that read no object (discovery, capabilities, life cycle): passed through.
_NOT_READS = frozenset(
    {"cache_age", "served", "server_version", "check_capability", "ready", "ready_reason", "capabilities", "max_pages"}
)


class RecordingView:
    """A ClusterView that answers from `inner` and writes down every read in `reads` (what each
    method reads: `_READS`); the members that read no object pass through (`_NOT_READS`). One
    delegate for every method, so the ClusterView's signatures are stated once (webhook/cluster/view.py).
    A member in neither table is an AttributeError: a new read cannot go unrecorded.

    `passed` lists what it was asked of the members that read no object (a cache's age, discovery).

    `on_read` is told of each new Dep at the moment of the read, before the evaluation ends: the
    controller indexes it at once, so a change of that object while the evaluation still runs (a
    Secret deleted after the Secrets check read it) re-checks the job instead of being lost."""

    def __init__(
        self,
        inner: ClusterView,
        on_read: Callable[[Dep], None] | None = None,
        stamp: Callable[[Dep], str | None] | None = None,
        canonical: Callable[[Dep], Dep] | None = None,
    ) -> None:
        self.inner = inner
        #: the one Dep object every job's record shares for a read (ReverseIndex.canonical), or None
        self.canonical = canonical
        self.reads: set[Dep] = set()
        #: the reads by who made them (`READER`: a check's name, or None), each with `stamp(dep)` at its
        #: first read by that reader (the object's resourceVersion then: what the reader saw at most)
        self.by_reader: dict[str | None, dict[Dep, str | None]] = {}
        self.on_read = on_read
        self.stamp = stamp
        #: the members that read no object it was asked, in order: (member, its positional arguments), `()`
        #: for an attribute (the check memo needs to know which caches' ages a verdict looked at)
        self.passed: list[tuple[str, tuple[Any, ...]]] = []
        #: the reading members it was asked (a cache's, or a live read: the check memo keeps only the former)
        self.methods: set[str] = set()

    def __getattr__(self, attr: str) -> Any:
        if attr in _NOT_READS:
            value = getattr(self.inner, attr)
            if not callable(value):
                self.passed.append((attr, ()))
                return value

            @functools.wraps(value)
            def passed(*args: Any, **kw: Any) -> Any:
                self.passed.append((attr, args + tuple(kw.values())))
                return value(*args, **kw)

            return passed
        names = _READS.get(attr)
        if names is None:
            raise AttributeError(
                f"RecordingView does not know ClusterView.{attr}: add it to _READS (what it reads) "
                "or _NOT_READS (it reads no object) in webhook/cluster/recording.py"
            )
        target = getattr(self.inner, attr)

        @functools.wraps(target)
        def recorded(*args: Any, **kw: Any) -> Any:
            self.methods.add(attr)
            reader = self.by_reader.setdefault(READER.get(), {})
            for resource, namespace, name in names(*args, **kw):
                dep = Dep(resource, namespace or "", name)
                if self.canonical is not None:
                    dep = self.canonical(dep)
                if dep not in reader:
                    reader[dep] = None if self.stamp is None else self.stamp(dep)
                if dep not in self.reads:
                    self.reads.add(dep)
                    if self.on_read is not None:
                        self.on_read(dep)
            return target(*args, **kw)

        return recorded

    async def close(self) -> None:  # the wrapped view belongs to the controller
        return None
