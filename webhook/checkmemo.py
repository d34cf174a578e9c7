"""The check memo: a check's results for one render, kept while every cache it read is unchanged.

A synchronous check (Check.synchronous: run() never awaits) reads only the Workload, the settings and
the watch caches; so does a check whose every other input is a read of the view (Check.reads_only_the_view:
the node checks, which ask what could provision a node only when none fits) in a run that read only
caches. The same render (Workload.render_id, webhook/workloads/render_cache.py: one id per
content, namespace, settings and runtime) judged again, with the same settings object and caches that
have not changed since, gets the same results: the webhook answers them from here instead of
judging again (issue 38: the same spec applied again, a dry run and the apply after it, a controller's
retries). Only the webhook's server uses it (webhook/server.py): the audit controller and the CLI judge
anew.

What a result stands on is written down as it is made, by the one recorder of reads there is
(webhook/cluster/recording.py `RecordingView`, the audit controller's too):

- each cache it read, by its version (ClusterView.cache_version: it changes with every added, changed or
  deleted object and every relist), the same at each read and at the end (a check that awaits may read on
  either side of a change: then it is not kept). A read of anything without a version (a resource the
  view does not cache, a live read: a Secret's keys, a GET kept for a ttl), or of any member that reads
  no object other than a cache's age (discovery: `served`, `server_version`), makes the result not
  memoizable;
- each cache whose age it looked at (`cache_age`, the stale-cache note, webhook/checks/common.py): a
  result is kept only when none of them was stale, and stands only while none of them is (the note
  depends on the time, so a result that would carry it is judged again, and says it).

Never kept: a result of a render cut short or not cached (no render_id: its Workload is the review's
alone, like the pods as admitted, webhook/workloads/admitted.py), one timed out, one made after the
deadline passed, one whose run raised (the engine's text of an error), and one that names the job's uid
(an AIPerfJob's render is shared by its creates, each with its own uid filled in: a verdict that quoted
it would be the first create's). Each hit is a copy, so a caller may change what it got.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Any

from webhook.checks.base import Check, CheckContext
from webhook.cluster.recording import RecordingView
from webhook.config import Settings
from webhook.results import CheckResult

#: at most this many checks' results kept (each a few short strings), the least recently used dropped first
MEMO_ENTRIES = 4096
#: the one member that reads no object a memoizable check may ask: the age of a cache (its stale note)
_AGE = "cache_age"
#: the members of the view a kept result may have read: the watch caches'
_CACHE_READS = frozenset({"list_cached", "get_cached", "cache_version"})
#: kept instead of results for a check that read what has no version on this render (discovery, a resource
#: not cached) or named the job's uid: it is run as it is from then on, without recording its reads
_NEVER = object()


@dataclasses.dataclass(frozen=True)
class _Entry:
    settings: Settings
    #: (resource, ClusterView.cache_version) of every cache the check read
    versions: tuple[tuple[str, Any], ...]
    #: the caches whose age the check looked at (none of them stale when kept)
    aged: tuple[str, ...]
    results: tuple[CheckResult, ...]


def covers(check: Check) -> bool:
    """The check's results may be kept: it is synchronous (its run reads only the Workload and the caches), or
    every input its run has besides the Workload and the settings is a read of the view
    (Check.reads_only_the_view: a run that then read only the caches is kept like a synchronous one's)."""
    return check.synchronous or check.reads_only_the_view


def _copy(r: CheckResult) -> CheckResult:
    """A result of its own (its lists too): the review's engine and policy may add to them. Built field by field,
    not with dataclasses.replace (a dict of every field per call: 12 results a review; tests/test_checkmemo.py
    pins that a copy equals its original field for field)."""
    return CheckResult(
        r.name, r.status, r.message, list(r.details), list(r.hints), r.duration_ms, list(r.caveats), r.timed_out
    )


def _fresh(view: Any, aged: tuple[str, ...], settings: Settings) -> bool:
    """No cache of `aged` is older than cacheStaleSeconds or unsynced (stale_details would say nothing)."""
    limit = settings.cache_stale_seconds
    for resource in aged:
        age = view.cache_age(resource)
        if age is None or age > limit:
            return False
    return True


def _names_uid(results: list[CheckResult], uid: str) -> bool:
    return bool(uid) and any(
        uid in r.message or any(uid in t for t in (*r.details, *r.hints, *r.caveats)) for r in results
    )


class CheckMemo:
    """The kept results, by (check, render); `hits` and `misses` count the lookups of memoizable requests."""

    def __init__(self, entries: int = MEMO_ENTRIES) -> None:
        self.limit = entries
        self._entries: OrderedDict[tuple[Check, int], _Entry | object] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def lookup(self, check: Check, ctx: CheckContext) -> list[CheckResult] | None:
        """The kept results of `check` on this render, copied, if every read they stand on is unchanged; else None."""
        rid, view = ctx.workload.render_id, ctx.view
        if rid is None or view is None or not covers(check):
            return None
        entry = self._entries.get((check, rid))
        if entry is _NEVER:
            return None
        if (
            not isinstance(entry, _Entry)
            or entry.settings is not ctx.settings
            or any(view.cache_version(resource) != version for resource, version in entry.versions)
            or not _fresh(view, entry.aged, ctx.settings)
        ):
            self.misses += 1
            return None
        self._entries.move_to_end((check, rid))
        self.hits += 1
        return [_copy(r) for r in entry.results]

    async def run(self, check: Check, ctx: CheckContext) -> list[CheckResult]:
        """`check`'s results, run with the view recording its reads; kept when they are memoizable."""
        rid, view = ctx.workload.render_id, ctx.view
        if rid is None or view is None or not covers(check) or self._entries.get((check, rid)) is _NEVER:
            out = await check.run(ctx)
            return out if isinstance(out, list) else [out]
        # each read stamped with its cache's version then: a check that awaits may read on either side of a change
        recording = RecordingView(view, stamp=lambda dep: repr(view.cache_version(dep.resource)))
        out = await check.run(dataclasses.replace(ctx, view=recording))
        results = out if isinstance(out, list) else [out]
        entry = self._entry(recording, results, ctx)
        if entry is not None:
            self._entries[(check, rid)] = entry
            self._entries.move_to_end((check, rid))
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)
        return results

    def _entry(self, recording: RecordingView, results: list[CheckResult], ctx: CheckContext) -> _Entry | object | None:
        """What `results` stand on; `_NEVER` when such results can never be kept, None when not these."""
        view = recording.inner
        if ctx.deadline.expired or any(r.timed_out for r in results):
            return None
        if not recording.methods <= _CACHE_READS:
            return _NEVER  # a live read (a Secret's keys, a GET with a ttl): no version to hold it to
        aged: list[str] = []
        for member, args in recording.passed:
            if member != _AGE or len(args) != 1:
                return _NEVER  # discovery, capabilities...: no version to hold them to
            aged.append(args[0])
        versions = []
        for resource in sorted({dep.resource for dep in recording.reads}):
            version = view.cache_version(resource)
            if version is None:
                return _NEVER
            versions.append((resource, version))
        now = dict(versions)
        stamps = (item for reads in recording.by_reader.values() for item in reads.items())
        if any(seen != repr(now[dep.resource]) for dep, seen in stamps):
            return None  # a cache changed while it ran: what it read is not one version

        uid = (ctx.workload.obj.get("metadata") or {}).get("uid")
        if _names_uid(results, uid if isinstance(uid, str) else ""):
            return _NEVER
        aged_t = tuple(dict.fromkeys(aged))
        if not _fresh(view, aged_t, ctx.settings):
            return None  # its results carry the stale note, which depends on the time
        return _Entry(ctx.settings, tuple(versions), aged_t, tuple(_copy(r) for r in results))
