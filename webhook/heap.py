"""Large documents kept out of the cyclic garbage collector's way while they are decoded and judged.

CPython's collector (docs.python.org/3/library/gc.html; Modules/gcmodule.c, `collect_generations`)
runs inside whichever thread allocates a container once a generation's count passes its threshold,
and a full collection walks every tracked container of the process in one C call that holds the
interpreter lock. Decoding a large review makes containers by the hundred thousand: 1.4 MiB of
records nested 247 deep (bench/large.py records-deep) are ~216,000 dicts, so while `json.loads`
ran in a worker thread the collector did two or three full collections of 140-460 ms each, and the
event loop waited for every one of them (bench/large.py --stall: gaps of 908-1,978 ms; json.loads
alone took 64-84 ms with the collector off). A TrainJob's 1.5 MiB of env entries set off a 323 ms
full collection in the render that followed.

:func:`loads_untracked` decodes such a body with the collector paused and then freezes what is
alive (`gc.freeze()`: the permanent generation, which collections ignore), as serve does with its
start-up objects and the cluster caches after every list (webhook.cluster.cache.freeze_heap).
Reference counting still frees the document once the review is done (JSON makes no reference
cycles). A young collection first keeps the garbage cycles made so far out of the permanent
generation, as freeze_heap does.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: a body that may decode into more containers than this ("{" and "[" counted, an upper bound) is decoded
#: with the collector paused and frozen after: a full collection walks ~0.5 µs a container, so fewer than
#: this add milliseconds to one, and the many ordinary reviews are not frozen one by one
MANY_CONTAINERS = 20_000

_LOCK = threading.Lock()


def containers_at_most(body: bytes) -> int:
    """An upper bound on the dicts and lists `body` decodes into, at memchr speed (brackets inside
    strings only make it larger)."""
    return body.count(b"{") + body.count(b"[")


def loads_untracked(decode: Callable[[bytes], T], body: bytes) -> T:
    """`decode(body)` with the cyclic collector paused, everything alive then frozen (see the module).

    For a worker thread: the decoder is one C call that holds the interpreter lock whatever we do, but no
    full collection is added to it, and the document it made never enters a later one. A body of fewer
    than MANY_CONTAINERS containers is decoded as it is."""
    if containers_at_most(body) <= MANY_CONTAINERS:
        return decode(body)
    with _LOCK:  # one at a time: gc.disable()/enable() is process-wide
        enabled = gc.isenabled()
        gc.collect(1)  # the young garbage cycles made so far are not frozen
        gc.disable()
        try:
            return decode(body)
        finally:
            gc.freeze()  # what decode made (and what raised half-way) leaves the generations' counts
            if enabled:
                gc.enable()


__all__ = ["MANY_CONTAINERS", "containers_at_most", "loads_untracked"]
