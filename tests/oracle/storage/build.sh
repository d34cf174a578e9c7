#!/usr/bin/env bash
# Build (once) the storage oracle: tests/oracle/storage/main.go against k8s.io/kubernetes at the
# e2e version (e2e/versions.env), so the Volume Claims check is compared with Kubernetes' own
# PersistentVolume matching (component-helpers FindMatchingVolume, the PV controller's access-mode
# index, the scheduler's per-class list) and GetDefaultClass.
#
# Prints the binary's path on stdout; progress goes to stderr. The binary lives in
# ~/.cache/preflight-webhook/storage-oracle-<k8s version>/ (never in the repository); a stamp
# records the version and main.go's hash, so a warm run takes well under a second. The go.mod
# comes from e2e/build.sh's kube_gomod (every k8s.io/<staging> module replaced by v0.<minor>.<patch>).
set -euo pipefail
ORACLE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../../e2e/build.sh
source "$ORACLE_DIR/../../../e2e/build.sh"   # defines kube_gomod, modfield, say, die, fresh; runs nothing

OUT_DIR="$CACHE_ROOT/storage-oracle-$KUBERNETES_VERSION"
OUT="$OUT_DIR/storage-oracle"
STAMP="$OUT_DIR/.stamp"
WANT="$KUBERNETES_VERSION $(sha256sum "$ORACLE_DIR/main.go" | cut -c1-16)"

if [[ -x "$OUT" ]] && fresh "$STAMP" "$WANT"; then
    echo "$OUT"
    exit 0
fi
need go "Go 1.24 or newer"
mkdir -p "$OUT_DIR"
exec 8>"$OUT_DIR/.lock"
if command -v flock >/dev/null 2>&1; then flock 8; fi
if [[ -x "$OUT" ]] && fresh "$STAMP" "$WANT"; then  # built while we waited for the lock
    echo "$OUT"
    exit 0
fi
# the same Go modules as the kube-apiserver build: wait for a running e2e/build.sh (its lock)
# rather than download them twice at once
mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
if command -v flock >/dev/null 2>&1 && ! flock -n 9; then
    say "e2e/build.sh is running (it downloads the same modules); waiting for it..."
    flock 9
fi
say "building the storage oracle against k8s.io/kubernetes $KUBERNETES_VERSION (first time: a few minutes; cached afterwards)..."
t0=$SECONDS
SRC_DIR="$OUT_DIR/src"
rm -rf "$SRC_DIR"
mkdir -p "$SRC_DIR"
cp "$ORACLE_DIR/main.go" "$SRC_DIR/"
kube_gomod "$SRC_DIR" preflight-webhook.local/tests/oracle/storage
(cd "$SRC_DIR" && go build -trimpath -ldflags "-s -w" -o "$OUT.tmp" .) >&2
mv -f "$OUT.tmp" "$OUT"
echo "$WANT" >"$STAMP"
say "storage oracle built in $((SECONDS - t0))s: $OUT"
echo "$OUT"
