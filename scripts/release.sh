#!/usr/bin/env bash
# Publish a release to an OCI registry: the webhook image and the Helm chart, as users install them.
#
#   make release REGISTRY=registry.example/preflight VERSION=0.3.0
#   # or: REGISTRY=... VERSION=... bash scripts/release.sh
#
# pushes
#   image  $REGISTRY/preflight-webhook:$VERSION        (buildah: built from the Dockerfile, or IMAGE)
#   chart  oci://$REGISTRY/charts/preflight-webhook     (helm package + helm push), version $VERSION,
#          whose values name that image by digest (image.repository + image.digest), so an install
#          runs exactly the pushed bytes: helm install rel oci://$REGISTRY/charts/preflight-webhook --version $VERSION
#
# Settings (environment or make variables):
#   REGISTRY     required: host[:port][/path] the image and the chart go under
#   VERSION      required: a SemVer 2 version (the chart's version and appVersion, the image's tag)
#   IMAGE        a local buildah image to push instead of building one (e.g. e2e/images.sh webhook's ref=...)
#   IMAGE_DIGEST the image is already at $REGISTRY/preflight-webhook with this digest (e.g. a multi-arch index
#                pushed by .github/workflows/release.yml): only the chart is packaged and pushed
#   BASE_IMAGE   --build-arg BASE_IMAGE for the build (default: the Dockerfile's)
#   CA_FILE      PEM of the registry's CA when it is not the system's (a private registry's own CA)
#   REGISTRY_USER, REGISTRY_PASSWORD  credentials; the password is read from the environment and given to
#                buildah and helm on stdin only (never on a command line), into a throw-away auth file.
#                Without them, the logins you already have (buildah login / helm registry login) are used.
#   BUILDAH      the buildah command (default: buildah; add --root/--runroot/--storage-driver for another store)
#   HELM         the helm command (default: helm; Helm 3.8+ or 4 for OCI)
# Prints the image digest and the chart reference. Needs buildah and helm; no Docker daemon.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART_SRC="$REPO/charts/preflight-webhook"
read -r -a BUILDAH_CMD <<<"${BUILDAH:-buildah}"
read -r -a HELM_CMD <<<"${HELM:-helm}"

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'scripts/release.sh: error: %s\n' "$*" >&2; exit 2; }

[[ -n "${REGISTRY:-}" ]] || die "REGISTRY is required (e.g. REGISTRY=registry.example/preflight)"
[[ -n "${VERSION:-}" ]] || die "VERSION is required (e.g. VERSION=0.3.0)"
REGISTRY="${REGISTRY%/}"
REGISTRY="${REGISTRY#oci://}"
[[ "$REGISTRY" =~ ^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$ ]] ||
    die "REGISTRY=$REGISTRY is not host[:port][/path] (lowercase path)"
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$ ]] ||
    die "VERSION=$VERSION is not a SemVer 2 version (e.g. 0.3.0 or 0.3.0-rc.1)"
[[ -z "${IMAGE_DIGEST:-}" || "$IMAGE_DIGEST" =~ ^sha256:[0-9a-f]{64}$ ]] ||
    die "IMAGE_DIGEST=$IMAGE_DIGEST is not sha256:<64 hex>"
[[ -z "${CA_FILE:-}" || -f "$CA_FILE" ]] || die "CA_FILE=$CA_FILE: no such file"
[[ -n "${REGISTRY_USER:-}" && -z "${REGISTRY_PASSWORD:-}" ]] && die "REGISTRY_USER is set but REGISTRY_PASSWORD is not"
[[ -n "${IMAGE_DIGEST:-}" ]] || command -v "${BUILDAH_CMD[0]}" >/dev/null || die "buildah missing (${BUILDAH_CMD[0]})"
command -v "${HELM_CMD[0]}" >/dev/null || die "helm missing (${HELM_CMD[0]})"

HOST="${REGISTRY%%/*}"
TAG="${VERSION//+/_}"  # a tag cannot hold '+' (the OCI distribution spec's tag grammar); helm does the same
IMAGE_REF="$REGISTRY/preflight-webhook:$TAG"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

buildah_tls=() helm_tls=() buildah_auth=() helm_auth=()
if [[ -n "${CA_FILE:-}" ]]; then
    mkdir "$WORK/certs" && cp "$CA_FILE" "$WORK/certs/ca.crt"  # buildah reads *.crt of a directory
    buildah_tls=(--cert-dir "$WORK/certs")
    helm_tls=(--ca-file "$CA_FILE")
fi
if [[ -n "${REGISTRY_USER:-}" ]]; then
    buildah_auth=(--authfile "$WORK/auth.json")
    helm_auth=(--registry-config "$WORK/helm-registry.json")
    if [[ -z "${IMAGE_DIGEST:-}" ]]; then
        printf '%s' "$REGISTRY_PASSWORD" | "${BUILDAH_CMD[@]}" login "${buildah_auth[@]}" "${buildah_tls[@]}" \
            -u "$REGISTRY_USER" --password-stdin "$HOST" >/dev/null
    fi
    printf '%s' "$REGISTRY_PASSWORD" | "${HELM_CMD[@]}" registry login "${helm_auth[@]}" "${helm_tls[@]}" \
        --username "$REGISTRY_USER" --password-stdin "$HOST" >/dev/null 2>&1 ||
        die "helm registry login to $HOST failed"
fi

# 1. the image
if [[ -n "${IMAGE_DIGEST:-}" ]]; then
    say "image already pushed: $REGISTRY/preflight-webhook@$IMAGE_DIGEST"
    echo "$IMAGE_DIGEST" >"$WORK/digest"
elif [[ -z "${IMAGE:-}" ]]; then
    IMAGE="localhost/preflight-webhook:$TAG"
    say "building $IMAGE from the Dockerfile (buildah)"
    build_args=()
    [[ -n "${BASE_IMAGE:-}" ]] && build_args=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
    "${BUILDAH_CMD[@]}" bud -q --layers=false "${build_args[@]}" -t "$IMAGE" -f "$REPO/Dockerfile" "$REPO" >/dev/null
fi
if [[ -z "${IMAGE_DIGEST:-}" ]]; then
    say "pushing $IMAGE to $IMAGE_REF"
    "${BUILDAH_CMD[@]}" push -q "${buildah_auth[@]}" "${buildah_tls[@]}" --format oci --digestfile "$WORK/digest" \
        "$IMAGE" "docker://$IMAGE_REF"
fi
DIGEST="$(cat "$WORK/digest")"
[[ "$DIGEST" =~ ^sha256:[0-9a-f]{64}$ ]] || die "buildah wrote no image digest ($DIGEST)"

# 2. the chart, naming that image by digest
cp -r "$CHART_SRC" "$WORK/preflight-webhook"
values="$WORK/preflight-webhook/values.yaml"
# only inside the top-level `image:` block: its `repository:` and `digest:` lines
sed -i -E "/^image:/,/^[^ #]/{s|^(  repository:).*|\1 $REGISTRY/preflight-webhook|;s|^(  digest:).*|\1 \"$DIGEST\"|}" "$values"
grep -q "^  repository: $REGISTRY/preflight-webhook$" "$values" && grep -q "^  digest: \"$DIGEST\"$" "$values" ||
    die "could not set image.repository/image.digest in the chart's values.yaml"
"${HELM_CMD[@]}" package "$WORK/preflight-webhook" --version "$VERSION" --app-version "$VERSION" -d "$WORK/out" >/dev/null
say "pushing the chart to oci://$REGISTRY/charts"
"${HELM_CMD[@]}" push "${helm_auth[@]}" "${helm_tls[@]}" "$WORK/out/preflight-webhook-$VERSION.tgz" "oci://$REGISTRY/charts" >&2

echo "image: $REGISTRY/preflight-webhook@$DIGEST"
echo "chart: oci://$REGISTRY/charts/preflight-webhook --version $VERSION"
