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


#: generation 0's threshold in a serving process, where CPython's default is 700 (see tune_collector)
YOUNG_THRESHOLD = 10_000


def tune_collector(young: int = YOUNG_THRESHOLD) -> tuple[int, int, int]:
    """Collect generation 0 after `young` net new containers instead of 700; the older generations'
    thresholds stay. Returns the thresholds as they were.

    The collector (Modules/gcmodule.c, `gc_alloc`/`collect_generations` in CPython 3.11) counts the
    containers allocated minus those freed since generation 0's last collection and collects once the
    count passes threshold0, inside whatever allocates, holding the event loop. A review decodes
    thousands of containers and 32 reviews in flight hold tens of thousands, so at 700 the webhook collected
    ~350 times per 1,500 AIPerfJob reviews, a tenth of them generation 1 as well, and freed nothing: a
    review's JSON holds no reference cycle, reference counting frees it (bench/gc_pauses.py,
    docs/benchmarks/vs-kyverno.md). At 10,000 the in-flight reviews stay under the threshold and a
    collection runs only when something keeps growing. What cycles there are (an exception kept with its
    traceback) are still collected, later: at most `young` containers of them wait."""
    before = gc.get_threshold()
    gc.set_threshold(young, before[1], before[2])
    return before


__all__ = ["MANY_CONTAINERS", "YOUNG_THRESHOLD", "containers_at_most", "loads_untracked", "tune_collector"]
