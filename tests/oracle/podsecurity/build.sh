#!/usr/bin/env bash
# Build (once) the Pod Security oracle: tests/oracle/podsecurity/main.go against
# k8s.io/pod-security-admission v0.<minor>.<patch> of the e2e Kubernetes version
# (KUBERNETES_VERSION in e2e/versions.env), so the Pod Security check is compared with
# upstream's own evaluator (policy.NewEvaluator(policy.DefaultChecks())) and label parsing
# (api.PolicyToEvaluate).
#
# The evaluator's constructor differs by the module's minor (v0.35 added NewEvaluator's
# emulationVersion parameter and removed RelaxPolicyForUserNamespacePods): main.go calls
# newEvaluator / setRelaxUserNamespaces, defined in evaluator_v034.go (minor <= 34) or
# evaluator_v035.go (minor >= 35); both are copied and a build tag (psa_v034 / psa_v035)
# compiles exactly one. PREFLIGHT_KUBERNETES_VERSION=v1.x.y builds for another version, into its
# own cache directory.
#
# Prints the binary's path on stdout; progress goes to stderr. The binary lives in
# ~/.cache/preflight-webhook/podsecurity-oracle-<k8s version>/ (never in the repository); a
# stamp records the version, the build tag and the .go files' hash, so a warm run takes well under a second.
set -euo pipefail
ORACLE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../../e2e/build.sh
source "$ORACLE_DIR/../../../e2e/build.sh"   # defines say, die, need, fresh, CACHE_ROOT; runs nothing

ver="${KUBERNETES_VERSION#v}"
IFS=. read -r _major minor patch <<<"${ver%%-*}"
PSA_VERSION="v0.${minor}.${patch}${ver#"${ver%%-*}"}"
if (( minor <= 34 )); then TAG=psa_v034; else TAG=psa_v035; fi

OUT_DIR="$CACHE_ROOT/podsecurity-oracle-$KUBERNETES_VERSION"
OUT="$OUT_DIR/podsecurity-oracle"
STAMP="$OUT_DIR/.stamp"
WANT="k8s.io/pod-security-admission@$PSA_VERSION $TAG $(cat "$ORACLE_DIR"/*.go | sha256sum | cut -c1-16)"

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
say "building the Pod Security oracle against k8s.io/pod-security-admission $PSA_VERSION (first time: about a minute)..."
t0=$SECONDS
SRC_DIR="$OUT_DIR/src"
rm -rf "$SRC_DIR"
mkdir -p "$SRC_DIR"
cp "$ORACLE_DIR"/*.go "$SRC_DIR/"
cat >"$SRC_DIR/go.mod" <<EOF
module preflight-webhook.local/tests/oracle/podsecurity

go 1.24.0

require k8s.io/pod-security-admission $PSA_VERSION
EOF
(cd "$SRC_DIR" && go mod tidy >&2 && go build -tags "$TAG" -trimpath -ldflags "-s -w" -o "$OUT.tmp" .) >&2
mv -f "$OUT.tmp" "$OUT"
echo "$WANT" >"$STAMP"
say "Pod Security oracle built in $((SECONDS - t0))s: $OUT"
echo "$OUT"
