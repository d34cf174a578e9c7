"""Debounced, coalesced re-checks: one entry a job, however many changes touch it.

A work queue in the manner of client-go's (k8s.io/client-go/util/workqueue: the delaying queue's
`AddAfter`, and the `dirty`/`processing` sets of queue.go):

- a key added again while it waits keeps its first due time, so a burst of changes is judged once,
  `delay` seconds after the first of them (its reasons are joined, at most `MAX_REASONS` of them);
- a due key is *ready*: a worker `take`s it and it is *processing* until `done`;
- a key added while it is processing waits its own debounce, then is *held* (not handed to a second
  worker) until the judgement in progress is `done`, and is then ready again: a judgement that
  started before the latest change is always followed by one that starts after it, and a job is
  never judged by two workers at once.

So the queue holds at most one waiting entry and one processing mark per job: Secret churn (a Secret
read by 2,000 jobs, deleted and created every second) costs the same memory after an hour as after a
minute (issue 33: a task per change and job grew the controller past 1.4 GiB).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable

#: the reasons a waiting key keeps word for word; more are counted ("and 3 more")
MAX_REASONS = 4


class Debouncer:
    """Pure: keys, due times, reasons and the processing marks; the controller's loop asks what is due
    (`promote`), and its workers `take` a ready key and say when it is `done`."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._due: dict[Hashable, float] = {}
        self._reasons: dict[Hashable, list[str]] = {}
        self._more: dict[Hashable, int] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0
        #: due, for the next free worker, in the order they came due
        self._ready: dict[Hashable, None] = {}
        #: taken by a worker and not done yet
        self._processing: set[Hashable] = set()
        #: due while processing: ready again when the judgement in progress is done
        self._held: set[Hashable] = set()

    def __len__(self) -> int:
        """Keys waiting: for their debounce, for a worker, or for their judgement in progress to end."""
        return len(self._due) + len(self._ready) + len(self._held)

    @property
    def processing(self) -> int:
        return len(self._processing)

    def add(self, key: Hashable, reason: str, now: float) -> bool:
        """Schedule `key`; True when it was not already waiting (a new entry)."""
        reasons = self._reasons.setdefault(key, [])
        if reason not in reasons:
            if len(reasons) < MAX_REASONS:
                reasons.append(reason)
            else:
                self._more[key] = self._more.get(key, 0) + 1
        if key in self._due or key in self._ready or key in self._held:
            return False
        due = now + self.delay
        self._due[key] = due
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, key))
        return True

    def next_due(self) -> float | None:
        """When the next waiting key comes due (its heap entry may be stale: `promote` skips it)."""
        while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)  # discarded, or already promoted
        return self._heap[0][0] if self._heap else None

    def promote(self, now: float) -> int:
        """Move the keys whose debounce has passed to ready (held, if their judgement still runs);
        the number made ready."""
        n = 0
        while self._heap and self._heap[0][0] <= now:
            due, _, key = heapq.heappop(self._heap)
            if self._due.get(key) != due:
                continue
            del self._due[key]
            if key in self._processing:
                self._held.add(key)
            else:
                self._ready[key] = None
                n += 1
        return n

    def take(self) -> tuple[Hashable, str] | None:
        """The oldest ready key with its reasons ("; "), now processing; None when none is ready."""
        if not self._ready:
            return None
        key = next(iter(self._ready))
        del self._ready[key]
        self._processing.add(key)
        return key, self._reason(key)

    def done(self, key: Hashable) -> bool:
        """The judgement of `key` ended; True when it is ready again (it changed meanwhile)."""
        self._processing.discard(key)
        if key in self._held:
            self._held.discard(key)
            self._ready[key] = None
            return True
        return False

    def pop_due(self, now: float) -> list[tuple[Hashable, str]]:
        """Promote and take every ready key at once (each is processing until `done`)."""
        self.promote(now)
        out: list[tuple[Hashable, str]] = []
        while (item := self.take()) is not None:
            out.append(item)
        return out

    def _reason(self, key: Hashable) -> str:
        reasons = self._reasons.pop(key, [])
        more = self._more.pop(key, 0)
        return "; ".join(reasons) + (f" (and {more} more)" if more else "")

    def discard(self, key: Hashable) -> None:
        """Forget a waiting key (its job was deleted)."""
        self._due.pop(key, None)
        self._ready.pop(key, None)
        self._held.discard(key)
        self._reasons.pop(key, None)
        self._more.pop(key, None)
