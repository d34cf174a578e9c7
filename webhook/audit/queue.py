"""Debounced re-checks: many changes in a burst become one evaluation per job.

Like client-go's delaying work queue (k8s.io/client-go/util/workqueue/delaying_queue.go `AddAfter`)
a key added again while it waits keeps its first due time, so a burst of changes is judged once,
`debounce` seconds after the first of them, with every reason kept. At most one evaluation of a
key runs at a time: the controller holds a per-key lock while it judges, and a key added while
it is judged waits its own debounce and then the lock (client-go's dirty/processing sets).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable


class Debouncer:
    """Pure: keys, due times and reasons; the controller's loop asks what is due."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._due: dict[Hashable, float] = {}
        self._reasons: dict[Hashable, list[str]] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._due)

    def add(self, key: Hashable, reason: str, now: float) -> bool:
        """Schedule `key`; True when it was not already waiting (a new entry)."""
        reasons = self._reasons.setdefault(key, [])
        if reason not in reasons:
            reasons.append(reason)
        if key in self._due:
            return False
        due = now + self.delay
        self._due[key] = due
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, key))
        return True

    def next_due(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[tuple[Hashable, str]]:
        """The keys whose time has come, each with its reasons joined ("; ")."""
        out: list[tuple[Hashable, str]] = []
        while self._heap and self._heap[0][0] <= now:
            _, _, key = heapq.heappop(self._heap)
            if self._due.pop(key, None) is None:
                continue
            out.append((key, "; ".join(self._reasons.pop(key, []))))
        return out

    def discard(self, key: Hashable) -> None:
        """Forget a waiting key (its job was deleted)."""
        self._due.pop(key, None)
        self._reasons.pop(key, None)
