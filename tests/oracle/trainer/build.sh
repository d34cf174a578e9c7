#!/usr/bin/env bash
# Build (once) the Trainer oracle: tests/oracle/trainer/main.go compiled against Kubeflow
# Trainer's and JobSet's own Go modules (versions from e2e/versions.env), outside the repository.
# Prints the binary's path on stdout; progress goes to stderr. Idempotent: a stamp records the
# versions and the source it was built from, so a warm run takes well under a second.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../../e2e/versions.env
source "$HERE/../../../e2e/versions.env"
DIR="${PREFLIGHT_TRAINER_ORACLE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/preflight-webhook/trainer-oracle}"
OUT="$DIR/trainer-oracle"
STAMP="$DIR/.stamp"
WANT="trainer=$TRAINER_VERSION jobset=$JOBSET_VERSION src=$(cat "$HERE/main.go" "$HERE/build.sh" | sha256sum | cut -c1-16)"
if [[ -x "$OUT" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
    echo "$OUT"
    exit 0
fi
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
command -v go >/dev/null 2>&1 || { echo "tests/oracle/trainer/build.sh: error: 'go' is required" >&2; exit 1; }
echo "==> building the Trainer $TRAINER_VERSION / JobSet $JOBSET_VERSION oracle in $DIR (first time: a few minutes)" >&2
t0=$SECONDS
mkdir -p "$DIR"
# One build at a time (two test runs may start together); the second waits, then finds the stamp.
exec 9>"$DIR/.build.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi
if [[ -x "$OUT" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
    echo "$OUT"
    exit 0
fi
SRC="$DIR/src"
rm -rf "$SRC"
mkdir -p "$SRC/crds"
modfield() {
    go mod download -json "$1" | python3 -c '
import json, sys
info = json.load(sys.stdin)
if info.get("Error"):
    sys.exit("go mod download: " + info["Error"])
print(info[sys.argv[1]])' "$2"
}
tdir="$(modfield "github.com/kubeflow/trainer/v2@$TRAINER_VERSION" Dir)"
jdir="$(modfield "sigs.k8s.io/jobset@$JOBSET_VERSION" Dir)"
tgo="$(sed -nE 's/^go ([0-9.]+).*/\1/p' "$(modfield "github.com/kubeflow/trainer/v2@$TRAINER_VERSION" GoMod)" | head -1)"
# the CRD schemas whose defaults the apiserver applies (embedded into the binary)
cp "$tdir"/manifests/base/crds/trainer.kubeflow.org_{trainjobs,clustertrainingruntimes,trainingruntimes}.yaml "$SRC/crds/"
cp "$jdir"/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml "$SRC/crds/"
chmod -R u+w "$SRC/crds"
cp "$HERE/main.go" "$SRC/main.go"
# every upstream runtime (manifests/base/runtimes/**, and the Flux example runtime), for the test cases
rm -rf "$DIR/runtimes"
mkdir -p "$DIR/runtimes"
while IFS= read -r f; do
    grep -q '^kind: ClusterTrainingRuntime' "$f" && cp "$f" "$DIR/runtimes/$(basename "$f")"
done < <(find "$tdir/manifests/base/runtimes" "$tdir/examples/flux" -name '*.yaml' | sort)
chmod -R u+w "$DIR/runtimes"
printf 'module preflight-webhook.local/oracle/trainer\n\ngo %s\n\nrequire (\n\tgithub.com/kubeflow/trainer/v2 %s\n\tsigs.k8s.io/jobset %s\n)\n' \
    "${tgo:-1.26.0}" "$TRAINER_VERSION" "$JOBSET_VERSION" >"$SRC/go.mod"
(cd "$SRC" && go build -trimpath -ldflags "-s -w" -o "$OUT.tmp" .)
mv -f "$OUT.tmp" "$OUT"
echo "$WANT" >"$STAMP"
echo "==> Trainer oracle built in $((SECONDS - t0))s: $OUT" >&2
echo "$OUT"
