#!/usr/bin/env bash
# Build (once) the Kueue v0.17.0 capacity oracle (main.go: Kueue's own scheduler cache driven in
# process) into ~/.cache/preflight-webhook/kueue-oracle/. Prints the binary's path on stdout;
# progress goes to stderr. Idempotent: a stamp records the sources it was built from, so a warm
# run takes well under a second. Cold build: see docs/benchmarks/build-and-test-times.md.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${PREFLIGHT_KUEUE_ORACLE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/preflight-webhook/kueue-oracle}"
BIN="$DIR/kueue-oracle"
STAMP="$DIR/.stamp"
WANT="kueue=v0.17.0 $(cat "$HERE/go.mod" "$HERE/go.sum" "$HERE"/*.go | sha256sum | cut -c1-16)"
if [[ -x "$BIN" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
    echo "$BIN"
    exit 0
fi
echo "==> building the Kueue v0.17.0 capacity oracle into $DIR (first time: a few minutes)" >&2
mkdir -p "$DIR"
# -trimpath and CGO_ENABLED=0 like every other Go build here (e2e/stack.sh builds Kueue v0.17.0 itself):
# the same flags give the same build-cache keys, so their shared dependencies compile once
( cd "$HERE" && GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local go build -trimpath -ldflags "-s -w" -o "$BIN.tmp" . ) >&2
mv "$BIN.tmp" "$BIN"
echo "$WANT" > "$STAMP"
echo "$BIN"
