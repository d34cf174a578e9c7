"""Do Image Pull's platform read and Kueue flavour matching still grow with the number of Nodes?

The two Node readings outside the placement checks, in process: Image Pull's platforms of the
nodes a pod group selects (webhook/checks/imagepull.py `eligible_platforms`) and Kueue flavour
matching's "some Node already carries the flavor's nodeLabels" (webhook/models/provisioning.py
`flavors_for` through `_carried`), per shape of Node (nodes.py `per_shape`, kept per Node listing) against the
Node-by-Node reading they replaced (issue 22).

    .venv/bin/python bench/node_readers.py [--nodes 50,5000] [--no-write]
    .venv/bin/python bench/node_readers.py --quick    # a smoke run (50 and 500 Nodes) that writes nothing

Nodes are bench/scale.py's (`real_node`: zone, instance type, GPU labels and taint, 20 pools), with
kubernetes.io/os; 25 flavors name a pool each (20 of them carried). CPU per reading, the mean over
`--reviews` after one; "one Node changed" replaces one Node (a new resourceVersion, as a kubelet's
status update does) before each pair of readings.
"""

from __future__ import annotations

import argparse
import copy
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import write_section
from bench.scale import header, load, real_node
from webhook.checks.imagepull import eligible_platforms
from webhook.models import nodes as N
from webhook.models.provisioning import _carried
from webhook.registry.platform import node_platform

SPEC = {"nodeSelector": {"nvidia.com/gpu.present": "true"}}
FLAVORS = [{"metadata": {"name": f"f{i}"}, "spec": {"nodeLabels": {"pool": f"pool-{i}"}}} for i in range(25)]


def _nodes(count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        n = real_node(i)
        n["status"].pop("images", None)  # the cache slims them away (webhook/cluster/cache.py)
        n["metadata"]["resourceVersion"] = str(i + 1)
        n["metadata"]["labels"]["kubernetes.io/os"] = "linux"
        out.append(n)
    return out


def platforms_node_by_node(nodes: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """The Image Pull check's reading before issue 22's grouping (every Node)."""
    return {p for n in nodes if N.selects(SPEC, n) and (p := node_platform(n)) is not None}


def flavors_node_by_node(nodes: list[dict[str, Any]]) -> list[str]:
    """The flavors no Node carries, as flavors_for read it before (every Node for every flavor)."""
    labels = [((n.get("metadata") or {}).get("labels") or {}) for n in nodes]
    return [
        rf["metadata"]["name"]
        for rf in FLAVORS
        if not any(all(nl.get(k) == v for k, v in rf["spec"]["nodeLabels"].items()) for nl in labels)
    ]


def flavors_per_shape(nodes: list[dict[str, Any]]) -> list[str]:
    """The same, as flavors_for reads it now (provisioning._carried: nodes.label_values)."""
    carried = _carried(nodes, FLAVORS)
    return [rf["metadata"]["name"] for rf in FLAVORS if not carried(rf["spec"]["nodeLabels"])]


def _ms(fn: Callable[[], object], reviews: int) -> float:
    fn()
    t0 = time.process_time()
    for _ in range(reviews):
        fn()
    return (time.process_time() - t0) / reviews * 1000


def measure(count: int, reviews: int) -> list[str]:
    N._KEPT.clear()
    N._STATIC.clear()
    nodes = _nodes(count)
    assert eligible_platforms(nodes, SPEC) == platforms_node_by_node(nodes)
    grouped = _ms(lambda: eligible_platforms(nodes, SPEC), reviews)
    direct = _ms(lambda: platforms_node_by_node(nodes), reviews)
    assert flavors_per_shape(nodes) == flavors_node_by_node(nodes)
    f_grouped = _ms(lambda: flavors_per_shape(nodes), reviews)
    f_direct = _ms(lambda: flavors_node_by_node(nodes), reviews)
    current, rv = [nodes], [10**7]

    def one_changed() -> None:
        listing = list(current[0])
        changed = copy.deepcopy(listing[count // 2])
        rv[0] += 1
        changed["metadata"]["resourceVersion"] = str(rv[0])
        listing[count // 2] = changed
        current[0] = listing
        eligible_platforms(listing, SPEC)
        flavors_per_shape(listing)

    churn = _ms(one_changed, max(1, reviews // 4))
    return [
        f"| {count:,} | {direct:.2f} | {grouped:.3f} | {f_direct:.2f} | {f_grouped:.3f} | {churn:.2f} |",
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="50,5000", help="Node counts, comma-separated (default 50,5000)")
    p.add_argument("--reviews", type=int, default=40, help="readings measured per figure (default 40)")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks/ alone")
    p.add_argument("--quick", action="store_true", help="50 and 500 Nodes, 5 readings, print only")
    args = p.parse_args()
    if args.quick:
        args.nodes, args.reviews, args.no_write = "50,500", 5, True
    command = " ".join([".venv/bin/python bench/node_readers.py", *(shlex.quote(a) for a in sys.argv[1:])])
    at_start = load()
    rows: list[str] = []
    for count in (int(x) for x in args.nodes.split(",") if x.strip()):
        rows += measure(count, args.reviews)
    text = "\n".join(
        [
            "## Image Pull's platforms and Kueue flavour matching, in process: Node by Node and per shape",
            "",
            *header(command),
            f"Load average at the start: {at_start}. CPU ms per reading (process time), the mean over "
            f"{args.reviews} after one. Flavors: which of 25 flavors (20 carried) no Node carries yet.",
            "",
            "| Nodes | platforms, Node by Node | platforms, per shape | flavors, Node by Node | flavors, per shape "
            "| both per shape, one Node changed before each |",
            "|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
        ]
    )
    print(text, flush=True)
    if not args.no_write:
        write_section("cluster-node-readers", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
