#!/usr/bin/env bash
# Build (once) the images the real node (e2e/harness/node.py) runs, without pulling any image:
#
#   e2e/images.sh [all|pause|base|webhook|webhook-ref|path]
#
#   pause        the sandbox image: e2e/nodeimage/pause.go, FROM scratch
#   base         Debian bookworm + Python 3.11 made by mmdebstrap, laid out like the official python
#                image (a venv at /usr/local, so `python` and pip install into /usr/local)
#   webhook      the repository's Dockerfile, built by buildah with --build-arg BASE_IMAGE=<base>;
#                prints `ref=<repository:tag>` and `archive=<path>` on stdout
#   webhook-ref  the same two lines without building (no root needed): what `webhook` would give
#
# Each lands as a docker-archive in $CACHE/images/*.tar (ctr -n k8s.io images import loads it).
# pause and base have a stamp of their recipe. The webhook image's TAG is derived from its source:
# src-<hash of the files the Dockerfile copies, the Dockerfile and the base recipe>, in
# webhook-src-<hash>.tar. So worktrees with different sources never overwrite each other's image
# (one tag and one archive per source), and a build is skipped when that hash is built already;
# the least recently used ones beyond $WEBHOOK_KEEP are pruned. A warm run takes seconds.
# buildah's storage is $CACHE/images/storage (vfs driver,
# chroot isolation: no mounts or network namespaces are left behind). Needs root, buildah,
# mmdebstrap and Go (bash e2e/build.sh node installs the packages).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/preflight-webhook"
OUT="${PREFLIGHT_IMAGES_CACHE:-$CACHE_ROOT/images}"
STORE="$OUT/storage"

PAUSE_IMAGE=localhost/preflight/pause:local
BASE_IMAGE=localhost/preflight/python-base:3.11-bookworm
WEBHOOK_REPOSITORY=localhost/preflight/preflight-webhook  # the tag: webhook_tag (from the source)
WEBHOOK_KEEP="${PREFLIGHT_WEBHOOK_IMAGES_KEEP:-8}"  # webhook images kept (least recently used pruned)
DEBIAN_SUITE=bookworm
BASE_RECIPE="recipe=1 suite=$DEBIAN_SUITE python3.11"  # its stamp; part of the webhook image's tag

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'e2e/images.sh: error: %s\n' "$*" >&2; exit 1; }
fresh() { [[ -f "$1" && "$(cat "$1")" == "$2" ]]; }
bah() { buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs "$@"; }

export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

build_pause() {
    local want stamp="$OUT/.pause.version"
    want="$(cat "$HERE/nodeimage/pause.go" "$HERE/nodeimage/go.mod" | sha256sum | cut -c1-16)"
    if [[ -f "$OUT/pause.tar" ]] && fresh "$stamp" "$want"; then say "pause image: cached"; return; fi
    say "building the pause image (Go, FROM scratch)..."
    local t0=$SECONDS tmp
    tmp="$(mktemp -d)"
    (cd "$HERE/nodeimage" && go build -trimpath -ldflags "-s -w" -o "$tmp/pause" .)
    local c
    c="$(bah from scratch)"
    bah copy "$c" "$tmp/pause" /pause
    bah config --entrypoint '["/pause"]' --user 65535:65535 "$c"
    bah commit -q "$c" "$PAUSE_IMAGE" >/dev/null
    bah rm "$c" >/dev/null
    rm -f "$OUT/pause.tar"
    bah push -q "$PAUSE_IMAGE" "docker-archive:$OUT/pause.tar:$PAUSE_IMAGE"
    rm -rf "$tmp"
    echo "$want" >"$stamp"
    say "pause image built in $((SECONDS - t0))s ($(du -h "$OUT/pause.tar" | cut -f1))"
}

build_base() {
    local want="$BASE_RECIPE" stamp="$OUT/.base.version"
    if bah inspect "$BASE_IMAGE" >/dev/null 2>&1 && fresh "$stamp" "$want"; then say "base image: cached"; return; fi
    command -v mmdebstrap >/dev/null || die "mmdebstrap missing (as root: bash e2e/build.sh node)"
    say "building the base image: Debian $DEBIAN_SUITE + Python 3.11 with mmdebstrap (~1.5 min)..."
    local t0=$SECONDS tmp
    tmp="$(mktemp -d)"
    # shellcheck disable=SC2016
    mmdebstrap --variant=minbase --include=python3.11,python3.11-venv,ca-certificates \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --customize-hook='chroot "$1" python3.11 -m venv /usr/local' \
        --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*' \
        "$DEBIAN_SUITE" "$tmp/base.tar" >&2
    local c
    c="$(bah from scratch)"
    bah add "$c" "$tmp/base.tar" /
    bah config --env PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 --cmd '["python3"]' "$c"
    bah commit -q "$c" "$BASE_IMAGE" >/dev/null
    bah rm "$c" >/dev/null
    rm -rf "$tmp"
    echo "$want" >"$stamp"
    say "base image built in $((SECONDS - t0))s"
}

# what the Dockerfile copies (.dockerignore: pyproject.toml, README.md, constraints.txt, webhook/), the Dockerfile
# and the base recipe: the image's whole input
webhook_sources_hash() {
    (cd "$REPO" && find Dockerfile pyproject.toml README.md constraints.txt webhook -type f -not -name '*.pyc' -not -path '*/__pycache__/*' -print0 \
        | sort -z | xargs -0 sha256sum; echo "$BASE_RECIPE") | sha256sum | cut -c1-16
}

webhook_tag() { echo "src-$(webhook_sources_hash)"; }

# the two lines `webhook` prints: the reference to run and the archive to import
webhook_ref() {
    local tag="$1"
    echo "ref=$WEBHOOK_REPOSITORY:$tag"
    echo "archive=$OUT/webhook-$tag.tar"
}

build_webhook() {
    local tag="$1"  # computed once by the caller, so the printed reference is the one built
    local image="$WEBHOOK_REPOSITORY:$tag" tar="$OUT/webhook-$tag.tar"
    if [[ -f "$tar" ]] && bah inspect "$image" >/dev/null 2>&1; then
        touch "$tar"  # recently used: kept by the pruning
        say "webhook image $tag: cached"
        return
    fi
    build_base
    say "building the webhook image $tag from the Dockerfile (buildah, BASE_IMAGE=$BASE_IMAGE)..."
    local t0=$SECONDS trust=()
    # A machine whose egress re-signs TLS (its CA in the system bundle, as here): pip inside the
    # build must trust that CA too. Mounted for the RUN steps only, so the image stays as a user's.
    local bundle="${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}"
    if [[ -f "$bundle" ]]; then
        printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$OUT/pip.conf"
        trust=(-v "$bundle:/etc/ssl/certs/ca-certificates.crt:ro" -v "$OUT/pip.conf:/etc/pip.conf:ro")
    fi
    bah bud -q --isolation chroot --network host --layers=false "${trust[@]}" --build-arg "BASE_IMAGE=$BASE_IMAGE" \
        -t "$image" -f "$REPO/Dockerfile" "$REPO" >/dev/null
    rm -f "$tar.tmp"
    bah push -q "$image" "docker-archive:$tar.tmp:$image"
    mv "$tar.tmp" "$tar"  # the archive exists only once complete
    say "webhook image $tag built in $((SECONDS - t0))s ($(du -h "$tar" | cut -f1) archive)"
    prune_webhook "$tag"
}

# keep the $WEBHOOK_KEEP most recently used webhook images (archive + buildah tag), never $1
prune_webhook() {
    local keep="$1" tar tag n=0
    while IFS= read -r tar; do
        n=$((n + 1))
        tag="$(basename "$tar" .tar)"
        tag="${tag#webhook-}"
        ((n > WEBHOOK_KEEP)) && [[ "$tag" != "$keep" ]] || continue
        say "pruning the webhook image $tag (least recently used of $n)"
        rm -f "$tar"
        bah rmi "$WEBHOOK_REPOSITORY:$tag" >/dev/null 2>&1 || true
    done < <(ls -1t "$OUT"/webhook-src-*.tar 2>/dev/null)
}

main() {
    local what="${1:-all}" tag
    [[ "$what" == path ]] && { echo "$OUT"; return; }
    tag="$(webhook_tag)"
    [[ "$what" == webhook-ref ]] && { webhook_ref "$tag"; return; }
    [[ "$(id -u)" == 0 ]] || die "needs root (buildah storage, chroot isolation)"
    command -v buildah >/dev/null || die "buildah missing (as root: bash e2e/build.sh node)"
    mkdir -p "$OUT"
    exec 9>"$OUT/.build.lock"
    flock 9
    case "$what" in
        pause) build_pause ;;
        base) build_base ;;
        webhook) build_webhook "$tag"; webhook_ref "$tag" ;;
        all) build_pause; build_webhook "$tag"; webhook_ref "$tag" ;;
        *) die "usage: $0 [all|pause|base|webhook|webhook-ref|path]" ;;
    esac
}

main "$@"
