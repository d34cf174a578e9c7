#!/usr/bin/env bash
# Build (once) the real stack the fidelity matrix runs on the node (e2e/harness/stack.py):
#
#   e2e/stack.sh [all|binaries|images|workload|aiperf|manifests|path]
#
#   binaries   the controller managers of JobSet, Trainer and Kueue, each built from its own Go
#              module at the version e2e/versions.env pins (JOBSET_VERSION, TRAINER_VERSION,
#              KUEUE_VERSION), static (CGO_ENABLED=0), with the ldflags of the upstream Makefile
#              (sigs.k8s.io/<x>/pkg/version); the main package each upstream Dockerfile builds:
#                jobset   main.go                                       (jobset/Dockerfile)
#                trainer  cmd/trainer-controller-manager/main.go        (its Dockerfile)
#                kueue    cmd/kueue/main.go                             (kueue/Dockerfile)
#              and the cluster DNS, CoreDNS, from github.com/coredns/coredns at COREDNS_VERSION
#              (main package at the module root; its Makefile's -tags=grpcnotrace and
#              -ldflags "-s -w -X .../coremain.GitCommit=<version>", CGO_ENABLED=0)
#   images     each manager as /manager in an image FROM scratch, USER 65532:65532,
#              ENTRYPOINT ["/manager"] (what the upstream Dockerfiles put on distroless/static),
#              built by buildah and saved as a docker archive; CoreDNS likewise as /coredns with
#              cap_net_bind_service set on it (coredns/Dockerfile: it binds :53 as 65532)
#   manifests  `kubectl kustomize` of each module's own manifests (jobset config/default,
#              trainer manifests/overlays/manager, kueue config/default): deployed with only the
#              image references replaced by the local ones (e2e/harness/stack.py)
#              and Trainer's own ClusterTrainingRuntimes (manifests/overlays/runtimes); and
#              Kubernetes' CoreDNS addon, cluster/addons/dns/coredns/coredns.yaml.base of
#              k8s.io/kubernetes@KUBERNETES_VERSION, copied as the template it is (stack.py
#              substitutes its variables for the node and drops the Corefile's `forward`)
#   aiperf     the AIPerf operator's image (also the image its pods use) from the aiperf wheel at
#              AIPERF_VERSION, and the stand-in endpoint's (PyPI fakellm at FAKELLM_VERSION), both
#              pip-installed on the local Python base (e2e/images.sh base); not part of `all` yet
#   workload   the matrix's workload image: e2e/nodeimage/workload (one static Go binary linked
#              as sh, python, torchrun, tune, mpirun, sshd ..., and getent for the DNS tests),
#              FROM scratch
#
# Everything lands in ~/.cache/preflight-webhook/stack/ with stamps: a warm run takes seconds.
# Images use the buildah storage of e2e/images.sh (the same vfs store). Needs Go; images need root.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"
KUBERNETES_VERSION="${PREFLIGHT_KUBERNETES_VERSION:-$KUBERNETES_VERSION}"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/preflight-webhook"
OUT="${PREFLIGHT_STACK_CACHE:-$CACHE_ROOT/stack}"
IMAGES_OUT="${PREFLIGHT_IMAGES_CACHE:-$CACHE_ROOT/images}"
STORE="$IMAGES_OUT/storage"

export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'e2e/stack.sh: error: %s\n' "$*" >&2; exit 1; }
fresh() { [[ -f "$1" && "$(cat "$1")" == "$2" ]]; }
bah() { buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs "$@"; }

# component -> "module version main-package manifests-dir"
spec() {
    case "$1" in
        jobset) echo "sigs.k8s.io/jobset $JOBSET_VERSION . config/default" ;;
        trainer) echo "github.com/kubeflow/trainer/v2 $TRAINER_VERSION ./cmd/trainer-controller-manager manifests/overlays/manager" ;;
        kueue) echo "sigs.k8s.io/kueue $KUEUE_VERSION ./cmd/kueue config/default" ;;
        coredns) echo "github.com/coredns/coredns $COREDNS_VERSION . -" ;;
        *) die "unknown component $1" ;;
    esac
}
COMPONENTS=(jobset trainer kueue)
# built and imaged like the components; its manifest is Kubernetes' own addon (e2e/harness/stack.py)
BINARIES=("${COMPONENTS[@]}" coredns)

# the binary's (and the image's entrypoint's) name: the managers are /manager, CoreDNS is /coredns
binname() { if [[ "$1" == coredns ]]; then echo coredns; else echo "$1-manager"; fi; }

moddir() {
    go mod download -json "$1@$2" | python3 -c '
import json, sys
info = json.load(sys.stdin)
if info.get("Error"):
    sys.exit("go mod download: " + info["Error"])
print(info["Dir"])'
}

build_binary() {
    local name="$1" module version pkg _m
    read -r module version pkg _m <<<"$(spec "$name")"
    local out stamp="$OUT/bin/.$name.version"
    out="$OUT/bin/$(binname "$name")"
    if [[ -x "$out" ]] && fresh "$stamp" "$module@$version"; then say "$name $version: cached"; return; fi
    command -v go >/dev/null || die "Go is required"
    say "building $(binname "$name") $version from the Go module $module..."
    local t0=$SECONDS dir src="$OUT/src/$name-$version"
    dir="$(moddir "$module" "$version")"
    rm -rf "$src"
    mkdir -p "$OUT/src" "$OUT/bin"
    cp -r "$dir" "$src"
    chmod -R u+w "$src"
    local ldflags="-s -w" tags=()
    case "$name" in
        jobset | kueue) ldflags+=" -X sigs.k8s.io/$name/pkg/version.GitVersion=$version" ;;
        # coredns/Makefile: GOTAGS=grpcnotrace, STRIP_FLAGS + coremain.GitCommit (its `git describe`:
        # a module download has no .git, so the version stands in for it)
        coredns) ldflags+=" -X github.com/coredns/coredns/coremain.GitCommit=$version" tags=(-tags=grpcnotrace) ;;
    esac
    (cd "$src" && go build -trimpath "${tags[@]}" -ldflags "$ldflags" -o "$out.tmp" "$pkg")
    mv -f "$out.tmp" "$out"
    rm -rf "$src"
    echo "$module@$version" >"$stamp"
    say "$(binname "$name") built in $((SECONDS - t0))s ($(du -h "$out" | cut -f1))"
}

build_manifests() {
    local kubectl
    kubectl="$(bash "$HERE/build.sh" path)/bin/kubectl"
    [[ -x "$kubectl" ]] || die "kubectl missing (bash e2e/build.sh kubectl)"
    mkdir -p "$OUT/manifests"
    local name module version pkg kdir
    for name in "${COMPONENTS[@]}" runtimes; do
        if [[ "$name" == runtimes ]]; then
            read -r module version pkg _ <<<"$(spec trainer)"
            kdir=manifests/overlays/runtimes
        else
            read -r module version pkg kdir <<<"$(spec "$name")"
        fi
        local out="$OUT/manifests/$name.yaml" stamp="$OUT/manifests/.$name.version"
        if [[ -s "$out" ]] && fresh "$stamp" "$module@$version $kdir recipe=1"; then continue; fi
        local dir tmp
        dir="$(moddir "$module" "$version")"
        tmp="$(mktemp -d)"
        cp -r "$dir/$(cut -d/ -f1 <<<"$kdir")" "$tmp/"
        chmod -R u+w "$tmp"
        if [[ "$name" == trainer ]]; then
            # JobSet comes from its own module (config/default): drop the overlay's remote
            # third-party/jobset, as its comment says to when JobSet is installed
            sed -i '/third-party\/jobset/d' "$tmp/$kdir/kustomization.yaml"
        fi
        "$kubectl" kustomize "$tmp/$kdir" >"$out.tmp" 2> >(grep -v "is deprecated" >&2)
        rm -rf "$tmp"
        mv -f "$out.tmp" "$out"
        echo "$module@$version $kdir recipe=1" >"$stamp"
        say "$name manifests: $kdir ($(grep -c '^kind:' "$out") objects)"
    done
}

# Kubernetes' own CoreDNS addon manifest at KUBERNETES_VERSION, the template as shipped: its
# variables (__DNS__SERVER__ ...) are the node's, substituted when a Stack deploys it
build_dns_manifest() {
    local out="$OUT/manifests/coredns.yaml.base" stamp="$OUT/manifests/.coredns.version" path
    path=cluster/addons/dns/coredns/coredns.yaml.base
    if [[ -s "$out" ]] && fresh "$stamp" "k8s.io/kubernetes@$KUBERNETES_VERSION $path"; then return; fi
    mkdir -p "$OUT/manifests"
    cp "$(moddir k8s.io/kubernetes "$KUBERNETES_VERSION")/$path" "$out.tmp"
    chmod u+w "$out.tmp"
    mv -f "$out.tmp" "$out"
    echo "k8s.io/kubernetes@$KUBERNETES_VERSION $path" >"$stamp"
    say "coredns manifest: k8s.io/kubernetes@$KUBERNETES_VERSION $path"
}

build_workload() {
    local tar="$OUT/images/workload.tar" stamp="$OUT/images/.workload.version" want
    local ref=localhost/preflight/workload:local src="$HERE/nodeimage/workload"
    want="$(cat "$src/main.go" "$src/go.mod" | sha256sum | cut -c1-16)"
    if [[ -s "$tar" ]] && fresh "$stamp" "$want"; then say "workload image: cached"; return; fi
    say "building the workload image (e2e/nodeimage/workload, FROM scratch)..."
    local t0=$SECONDS tmp c n
    tmp="$(mktemp -d)"
    mkdir -p "$tmp/root/bin" "$tmp/root/usr/bin" "$tmp/root/usr/local/bin" "$tmp/root/usr/sbin" "$tmp/root/tmp"
    (cd "$src" && go build -trimpath -ldflags "-s -w" -o "$tmp/root/workload" .)
    # the names the Trainer runtimes' and the tests' commands use
    for n in sh bash; do ln -s /workload "$tmp/root/bin/$n"; done
    for n in python python3 torchrun tune mpirun accelerate deepspeed env getent; do ln -s /workload "$tmp/root/usr/bin/$n"; done
    for n in python python3 torchrun tune; do ln -s /workload "$tmp/root/usr/local/bin/$n"; done
    ln -s /workload "$tmp/root/usr/sbin/sshd"
    chmod 1777 "$tmp/root/tmp"
    mkdir -p "$OUT/images"
    c="$(bah from scratch)"
    bah copy "$c" "$tmp/root/" /
    bah config --entrypoint '["/workload"]' --user 65532:65532 --workingdir / --env PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin "$c"
    bah commit -q "$c" "$ref" >/dev/null
    bah rm "$c" >/dev/null
    rm -rf "$tmp" "$tar"
    bah push -q "$ref" "docker-archive:$tar:$ref" >/dev/null
    echo "$want" >"$stamp"
    say "workload image built in $((SECONDS - t0))s ($(du -h "$tar" | cut -f1))"
}

build_image() {
    local name="$1" version
    read -r _ version _ _ <<<"$(spec "$name")"
    local bin="$OUT/bin/$(binname "$name")" tar="$OUT/images/$name.tar" stamp="$OUT/images/.$name.version"
    local ref="localhost/preflight/$name-controller:$version" want entry=/manager
    [[ "$name" == coredns ]] && ref="localhost/preflight/coredns:$version" entry=/coredns
    want="$(sha256sum "$bin" | cut -c1-16) $ref"
    if [[ -s "$tar" ]] && fresh "$stamp" "$want"; then say "$name image: cached"; return; fi
    say "building the $name image (FROM scratch + the static $entry)..."
    local t0=$SECONDS c mnt
    mkdir -p "$OUT/images"
    c="$(bah from scratch)"
    bah copy "$c" "$bin" "$entry"
    if [[ "$name" == coredns ]]; then
        # coredns/Dockerfile: `setcap cap_net_bind_service=+ep /coredns`, so that as 65532 it can
        # still bind :53 (the addon manifest adds NET_BIND_SERVICE and drops ALL); set on the
        # image's own copy (vfs storage: a plain directory), kept by the layer as an xattr
        mnt="$(bah mount "$c")"
        setcap cap_net_bind_service=+ep "$mnt$entry"
        bah umount "$c" >/dev/null
    fi
    bah config --entrypoint "[\"$entry\"]" --user 65532:65532 --workingdir / "$c"
    bah commit -q "$c" "$ref" >/dev/null
    bah rm "$c" >/dev/null
    rm -f "$tar"
    bah push -q "$ref" "docker-archive:$tar:$ref" >/dev/null
    echo "$want" >"$stamp"
    say "$name image built in $((SECONDS - t0))s ($(du -h "$tar" | cut -f1))"
}

# build_pip_image <name> <ref> <stamp-value> <pip requirement>...: the local Python base
# (e2e/images.sh base) + pip install, saved as $OUT/images/<name>.tar
build_pip_image() {
    local name="$1" ref="$2" want="$3"
    shift 3
    local tar="$OUT/images/$name.tar" stamp="$OUT/images/.$name.version"
    if [[ -s "$tar" ]] && fresh "$stamp" "$want"; then say "$name image: cached"; return; fi
    local base=localhost/preflight/python-base:3.11-bookworm
    bah inspect "$base" >/dev/null 2>&1 || die "the local Python base is missing (bash e2e/images.sh base)"
    say "building the $name image: $base + pip install $*..."
    local t0=$SECONDS c trust=()
    # a machine whose egress re-signs TLS: pip must trust the system bundle (as e2e/images.sh does)
    local bundle="${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}"
    if [[ -f "$bundle" ]]; then
        printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$OUT/pip.conf"
        trust=(-v "$bundle:/etc/ssl/certs/ca-certificates.crt:ro" -v "$OUT/pip.conf:/etc/pip.conf:ro")
    fi
    mkdir -p "$OUT/images"
    c="$(bah from "$base")"
    bah run --isolation chroot --network host "${trust[@]}" "$c" -- pip install -q --no-cache-dir "$@" >&2
    bah config --user 65532:65532 --env HOME=/tmp "$c"
    bah commit -q "$c" "$ref" >/dev/null
    bah rm "$c" >/dev/null
    rm -f "$tar"
    bah push -q "$ref" "docker-archive:$tar:$ref" >/dev/null
    echo "$want" >"$stamp"
    say "$name image built in $((SECONDS - t0))s ($(du -h "$tar" | cut -f1))"
}

build_aiperf() {
    build_pip_image aiperf "localhost/preflight/aiperf:$AIPERF_VERSION" "aiperf==$AIPERF_VERSION recipe=1" \
        "aiperf==$AIPERF_VERSION"
    build_pip_image standin "localhost/preflight/fakellm:$FAKELLM_VERSION" "fakellm==$FAKELLM_VERSION recipe=1" \
        "fakellm==$FAKELLM_VERSION"
}

images_lock() {
    [[ "$(id -u)" == 0 ]] || die "images need root (buildah storage, chroot isolation)"
    command -v buildah >/dev/null || die "buildah missing (as root: bash e2e/build.sh node)"
    mkdir -p "$IMAGES_OUT"
    exec 9>"$IMAGES_OUT/.build.lock"
    flock 9
}

main() {
    local what="${1:-all}"
    [[ "$what" == path ]] && { echo "$OUT"; return; }
    mkdir -p "$OUT"
    # one build of the binaries/manifests at a time; the pip images wait only for the images lock
    if [[ "$what" != aiperf ]]; then
        exec 8>"$OUT/.build.lock"
        flock 8
    fi
    case "$what" in
        binaries) for n in "${BINARIES[@]}"; do build_binary "$n"; done ;;
        manifests) build_manifests; build_dns_manifest ;;
        images)
            for n in "${BINARIES[@]}"; do build_binary "$n"; done
            images_lock
            for n in "${BINARIES[@]}"; do build_image "$n"; done
            build_workload
            ;;
        workload) images_lock; build_workload ;;
        aiperf) images_lock; build_aiperf ;;
        all)
            for n in "${BINARIES[@]}"; do build_binary "$n"; done
            build_manifests
            build_dns_manifest
            images_lock
            for n in "${BINARIES[@]}"; do build_image "$n"; done
            build_workload
            ;;
        *) die "usage: $0 [all|binaries|images|workload|aiperf|manifests|path]" ;;
    esac
}

main "$@"
