#!/usr/bin/env bash
# `make test`'s pytest, in two processes at once (docs/development.md, "Test tiers"):
#   tests/  the unit tests, the in-process TLS server and the oracles: CPU-bound, ~4 min alone;
#   e2e/    the control plane, the node smoke and the fidelity matrix: mostly waiting on those processes.
# Run one after the other they took the sum; side by side the unit tests use the CPU e2e/ leaves idle.
# Both always run to their end. tests/'s output is printed whole after e2e/'s (not interleaved); the
# exit status is non-zero when either failed, and each half's status is printed last.
#
#   scripts/test.sh <python> [pytest arguments for both halves...]
set -uo pipefail
py=${1:?usage: scripts/test.sh <python> [pytest arguments...]}
shift
marker="not conformance"  # make conformance runs the rest (e2e/tiers.py)
log=$(mktemp -t preflight-tests.XXXXXX)
unit=""
cleanup() {
    [[ -n $unit ]] && kill "$unit" 2>/dev/null
    rm -f "$log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "==> tests/ in the background (its output follows e2e/'s), e2e/ now"
"$py" -m pytest tests -q -m "$marker" -p no:cacheprovider --durations=10 "$@" >"$log" 2>&1 &
unit=$!
"$py" -m pytest e2e -q -m "$marker" --durations=25 "$@"
e2e_rc=$?
wait "$unit"
unit_rc=$?
unit=""
echo "==> tests/ (run beside e2e/):"
cat "$log"
echo "==> exit status: e2e/ $e2e_rc, tests/ $unit_rc"
((e2e_rc == 0 && unit_rc == 0))
