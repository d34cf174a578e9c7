#!/usr/bin/env bash
# `make test`'s pytest in three processes at once (docs/development.md, "Test tiers"):
#   tests/                   the unit tests, the in-process TLS server and the oracles: CPU-bound;
#   e2e/, marked node        the real node: the smoke and the fidelity matrix, mostly waiting on pods;
#   e2e/, the rest           the local control plane: mostly waiting on it (printed live).
# Run one after the other they took the sum; side by side each uses the CPU the others leave idle.
# Every lane runs to its end. The two background lanes' output is printed whole after the live one's
# (not interleaved); the exit status is non-zero when any lane failed, and each lane's status is printed last.
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

names=("tests/" "e2e/ on the node")
"$py" -m pytest tests -q -m "$tier" -p no:cacheprovider --durations=10 "$@" >"$logs/0" 2>&1 &
pids+=($!)
"$py" -m pytest e2e -q -m "node and $tier" -p no:cacheprovider --durations=10 "$@" >"$logs/1" 2>&1 &
pids+=($!)
echo "==> ${names[*]} in the background (their output follows); e2e/ on the control plane now"
"$py" -m pytest e2e -q -m "not node and $tier" --durations=25 "$@"
rc=$?
status="e2e/ on the control plane $rc"
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
