#!/usr/bin/env bash
# `make test`'s pytest in two processes at once (docs/development.md, "Test tiers"):
#   tests/   the unit tests, the in-process TLS server and the oracles: CPU-bound, ~4-8 min;
#   e2e/     the local control plane, the node smoke and the fidelity matrix: mostly waiting on
#            those processes (printed live).
# Run one after the other they took the sum; side by side the unit tests use the CPU e2e/ leaves idle.
# (A third lane, e2e/'s node modules beside the rest of e2e/, was tried once: the control-plane half
# took 19 min beside a node at load 30-40; docs/benchmarks/build-and-test-times.md. Not kept.)
# Both lanes run to their end. tests/'s output is printed whole after e2e/'s (not interleaved); the
# exit status is non-zero when either failed, and each lane's status is printed last.
#
#   scripts/test.sh <python> [pytest arguments for every lane...]
set -uo pipefail
py=${1:?usage: scripts/test.sh <python> [pytest arguments...]}
shift
tier="not conformance" # make conformance runs the rest (e2e/tiers.py)
logs=$(mktemp -d -t preflight-tests.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    rm -rf "$logs"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

names=("tests/")
"$py" -m pytest tests -q -m "$tier" -p no:cacheprovider --durations=10 "$@" >"$logs/0" 2>&1 &
pids+=($!)
echo "==> ${names[*]} in the background (its output follows e2e/'s); e2e/ now"
"$py" -m pytest e2e -q -m "$tier" --durations=25 "$@"
rc=$?
status="e2e/ $rc"
failed=$((rc != 0))
for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    rc=$?
    echo "==> ${names[$i]} (run beside it), exit $rc:"
    cat "$logs/$i"
    status+=", ${names[$i]} $rc"
    ((rc == 0)) || failed=1
done
pids=()
echo "==> exit status: $status"
((failed == 0))
