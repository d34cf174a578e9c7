#!/usr/bin/env bash
# Build (once) the quota oracle: tests/oracle/quota/main.go against k8s.io/kubernetes at the
# e2e version (e2e/versions.env), so the Resource Quotas check is compared with Kubernetes' own
# ResourceQuota admission, pod evaluator, LimitRanger and v1 defaulting.
#
# Prints the binary's path on stdout; progress goes to stderr. The binary lives in
# ~/.cache/preflight-webhook/quota-oracle-<k8s version>/ (never in the repository); a stamp
# records the version and main.go's hash, so a warm run takes well under a second. The go.mod
# comes from e2e/build.sh's kube_gomod (every k8s.io/<staging> module replaced by v0.<minor>.<patch>).
set -euo pipefail
ORACLE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../../e2e/build.sh
source "$ORACLE_DIR/../../../e2e/build.sh"   # defines kube_gomod, build_kube_oracle, say, die, fresh; runs nothing

build_kube_oracle quota "$ORACLE_DIR"
