#!/usr/bin/env bash
# Build (once) the DRA oracle: tests/oracle/dra/main.go against k8s.io/kubernetes at the e2e version
# (e2e/versions.env), so the Device Allocation check is compared with the real structured allocator
# (k8s.io/dynamic-resource-allocation structured.NewAllocator / Allocate) and the apiserver's DRA CEL.
#
# Prints the binary's path on stdout; progress goes to stderr. The binary lives in
# ~/.cache/preflight-webhook/dra-oracle-<k8s version>/ (never in the repository); a stamp records
# the version and main.go's hash, so a warm run takes well under a second.
set -euo pipefail
ORACLE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../../e2e/build.sh
source "$ORACLE_DIR/../../../e2e/build.sh"   # defines kube_gomod, build_kube_oracle, say, die, fresh; runs nothing

build_kube_oracle dra "$ORACLE_DIR"
