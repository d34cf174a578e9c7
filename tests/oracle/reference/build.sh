#!/usr/bin/env bash
# Build (once) the image reference oracle: tests/oracle/reference/main.go against k8s.io/kubernetes
# at the e2e version (e2e/versions.env), so webhook/imageref.py is compared with the kubelet's own
# ParseImageName (github.com/distribution/reference and go-digest at the versions Kubernetes pins).
#
# Prints the binary's path on stdout; progress goes to stderr. Cached in
# ~/.cache/preflight-webhook/reference-oracle-<k8s version>/ like the quota oracle.
set -euo pipefail
ORACLE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../../e2e/build.sh
source "$ORACLE_DIR/../../../e2e/build.sh"   # defines kube_gomod, build_kube_oracle, say, die, fresh; runs nothing

build_kube_oracle reference "$ORACLE_DIR"
