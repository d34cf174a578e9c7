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
#   DIST         also build the Python distributions and the krew plugin into this directory (`make release`
#                passes dist/): the sdist and the wheel (python -m build, from pyproject.toml, README.md and
#                webhook/, versioned VERSION as PEP 440 spells it), kubectl-preflight-v$VERSION.tar.gz (the
#                launcher scripts/krew/kubectl-preflight and the wheel), preflight.yaml (the krew plugin
#                manifest, rendered from scripts/krew/preflight.yaml), the chart's .tgz and SHA256SUMS; they are
#                built before anything is pushed. Publish them where DOWNLOAD_URL says.
#   DIST_ONLY=1  only that (DIST defaults to dist/): no REGISTRY, buildah or helm needed, nothing pushed
#   REPO_URL     the repository's URL, the krew manifest's homepage (default: a placeholder,
#                https://github.com/<your-org>/preflight-webhook)
#   DOWNLOAD_URL where DIST's files are published, the krew archive's URL prefix
#                (default: $REPO_URL/releases/download/v$VERSION, a GitHub release's assets)
#   PYTHON       the Python that runs the build (default: python3); without the `build` package, the script
#                installs it from your package index into a throw-away virtual environment
# Prints the image digest and the chart reference, and with DIST each file built. Needs buildah and helm
# (not with DIST_ONLY); no Docker daemon.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART_SRC="$REPO/charts/preflight-webhook"
read -r -a BUILDAH_CMD <<<"${BUILDAH:-buildah}"
read -r -a HELM_CMD <<<"${HELM:-helm}"

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'scripts/release.sh: error: %s\n' "$*" >&2; exit 2; }

DIST_ONLY="${DIST_ONLY:-}"
[[ -z "$DIST_ONLY" || "$DIST_ONLY" == 1 ]] || die "DIST_ONLY=$DIST_ONLY: set it to 1 or leave it unset"
[[ -n "$DIST_ONLY" ]] && DIST="${DIST:-$REPO/dist}"
DIST="${DIST:-}"
[[ -n "$DIST_ONLY" || -n "${REGISTRY:-}" ]] || die "REGISTRY is required (e.g. REGISTRY=registry.example/preflight)"
[[ -n "${VERSION:-}" ]] || die "VERSION is required (e.g. VERSION=0.3.0)"
if [[ -z "$DIST_ONLY" ]]; then
    REGISTRY="${REGISTRY%/}"
    REGISTRY="${REGISTRY#oci://}"
    [[ "$REGISTRY" =~ ^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$ ]] ||
        die "REGISTRY=$REGISTRY is not host[:port][/path] (lowercase path)"
fi
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$ ]] ||
    die "VERSION=$VERSION is not a SemVer 2 version (e.g. 0.3.0 or 0.3.0-rc.1)"
REPO_URL="${REPO_URL:-https://github.com/<your-org>/preflight-webhook}"
REPO_URL="${REPO_URL%/}"
DOWNLOAD_URL="${DOWNLOAD_URL:-$REPO_URL/releases/download/v$VERSION}"
DOWNLOAD_URL="${DOWNLOAD_URL%/}"
[[ "$REPO_URL" =~ ^https?://[^[:space:]]+$ ]] || die "REPO_URL=$REPO_URL is not an http(s) URL"
[[ "$DOWNLOAD_URL" =~ ^https?://[^[:space:]]+$ ]] || die "DOWNLOAD_URL=$DOWNLOAD_URL is not an http(s) URL"
read -r -a PYTHON_CMD <<<"${PYTHON:-python3}"
[[ -z "$DIST" ]] || command -v "${PYTHON_CMD[0]}" >/dev/null || die "python missing (${PYTHON_CMD[0]}; set PYTHON)"
[[ -z "${IMAGE_DIGEST:-}" || "$IMAGE_DIGEST" =~ ^sha256:[0-9a-f]{64}$ ]] ||
    die "IMAGE_DIGEST=$IMAGE_DIGEST is not sha256:<64 hex>"
[[ -z "${CA_FILE:-}" || -f "$CA_FILE" ]] || die "CA_FILE=$CA_FILE: no such file"
[[ -n "${REGISTRY_USER:-}" && -z "${REGISTRY_PASSWORD:-}" ]] && die "REGISTRY_USER is set but REGISTRY_PASSWORD is not"
if [[ -z "$DIST_ONLY" ]]; then
    [[ -n "${IMAGE_DIGEST:-}" ]] || command -v "${BUILDAH_CMD[0]}" >/dev/null || die "buildah missing (${BUILDAH_CMD[0]})"
    command -v "${HELM_CMD[0]}" >/dev/null || die "helm missing (${HELM_CMD[0]})"
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# 0. with DIST: the sdist, the wheel and the krew plugin, before anything is pushed
sha256() { if command -v sha256sum >/dev/null; then sha256sum "$1"; else shasum -a 256 "$1"; fi | cut -d' ' -f1; }
if [[ -n "$DIST" ]]; then
    mkdir -p "$DIST" && DIST="$(cd "$DIST" && pwd)"
    build_py=("${PYTHON_CMD[@]}")
    if ! "${build_py[@]}" -c 'import build' 2>/dev/null; then
        say "the Python package 'build' is not installed: installing it into a throw-away virtual environment"
        "${PYTHON_CMD[@]}" -m venv "$WORK/build-venv"
        "$WORK/build-venv/bin/python" -m pip install -q --disable-pip-version-check build >&2 ||
            die "could not install the Python package 'build' (pip's output above)"
        build_py=("$WORK/build-venv/bin/python")
    fi
    # the wheel's version is VERSION as PEP 440 spells it (0.3.0-rc.1 -> 0.3.0rc1); `packaging` comes with `build`
    PY_VERSION="$("${build_py[@]}" -c 'import sys
from packaging.version import InvalidVersion, Version
try:
    print(Version(sys.argv[1]))
except InvalidVersion:
    sys.exit(1)' "$VERSION")" ||
        die "VERSION=$VERSION has no PEP 440 spelling for the wheel (use x.y.z, x.y.z-rc.N, x.y.z-alpha.N, x.y.z-beta.N, x.y.z-dev.N)"
    # the package's sources, as the image's build copies them (.dockerignore; the image adds constraints.txt):
    # pyproject.toml, README.md, webhook/
    mkdir "$WORK/src"
    cp "$REPO/pyproject.toml" "$REPO/README.md" "$WORK/src/"
    (cd "$REPO" && tar --exclude=__pycache__ --exclude='*.pyc' -cf - webhook) | tar -C "$WORK/src" -xf -
    # the version is in two places: pyproject.toml's (the distribution's) and webhook.__version__ (--version,
    # SARIF's tool version); both are set in the copy
    declared="$(sed -nE 's/^__version__ = "(.*)"$/\1/p' "$WORK/src/webhook/__init__.py")"
    [[ -n "$declared" ]] || die "webhook/__init__.py has no line '__version__ = \"...\"' to set"
    sed -i -E "s/^__version__ = \".*\"$/__version__ = \"$PY_VERSION\"/" "$WORK/src/webhook/__init__.py"
    sed -i -E "s/^version = \".*\"$/version = \"$PY_VERSION\"/" "$WORK/src/pyproject.toml"
    [[ "$declared" == "$PY_VERSION" ]] || say "note: the source says version $declared; the wheel and sdist are $PY_VERSION" \
        "(pip install git+<repository>@v$VERSION builds the source as it is: set its version before tagging)"
    say "building the sdist and the wheel $PY_VERSION (python -m build)"
    "${build_py[@]}" -m build --outdir "$WORK/py" "$WORK/src" >"$WORK/build.log" 2>&1 ||
        { tail -n 40 "$WORK/build.log" >&2; die "python -m build failed (its last lines above)"; }
    sdist="$(cd "$WORK/py" && ls -- *.tar.gz)"
    wheel="$(cd "$WORK/py" && ls -- *.whl)"
    [[ "$sdist" == "preflight_webhook-$PY_VERSION.tar.gz" && "$wheel" == "preflight_webhook-$PY_VERSION-"*.whl ]] ||
        die "python -m build made $sdist and $wheel, not preflight_webhook-$PY_VERSION"

    # the krew plugin: the launcher and the wheel in one archive (sorted, no times or owners: its sha256 is
    # the same for the same wheel), and its manifest naming the archive's URL and sha256
    archive="kubectl-preflight-v$VERSION.tar.gz"
    mkdir "$WORK/krew"
    install -m 0755 "$REPO/scripts/krew/kubectl-preflight" "$WORK/krew/kubectl-preflight"
    install -m 0644 "$WORK/py/$wheel" "$WORK/krew/$wheel"
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$WORK/krew" -cf - kubectl-preflight "$wheel" |
        gzip -n -9 >"$WORK/py/$archive"
    "${build_py[@]}" - "$REPO/scripts/krew/preflight.yaml" "$WORK/py/preflight.yaml" "v$VERSION" "$REPO_URL" \
        "$DOWNLOAD_URL/$archive" "$(sha256 "$WORK/py/$archive")" <<'PY'
import sys

template, out, version, homepage, uri, sha = sys.argv[1:]
lines = open(template).read().splitlines(keepends=True)
body = "".join(lines[next(i for i, line in enumerate(lines) if not line.startswith("#")):])
for key, value in (("VERSION", version), ("HOMEPAGE", homepage), ("URI", uri), ("SHA256", sha)):
    body = body.replace(f"@{key}@", value.replace("\\", "\\\\").replace('"', '\\"'))
header = f"# kubectl preflight {version}, rendered by scripts/release.sh from scripts/krew/preflight.yaml\n"
open(out, "w").write(header + body)
PY
    [[ "$REPO_URL" != *"<your-org>"* ]] || say "note: REPO_URL is not set: the krew manifest names" \
        "$DOWNLOAD_URL/$archive; set REPO_URL (or DOWNLOAD_URL) to where you publish $DIST"
    for f in "$sdist" "$wheel" "$archive" preflight.yaml; do cp "$WORK/py/$f" "$DIST/$f"; done
fi
if [[ -n "$DIST_ONLY" ]]; then
    (cd "$DIST" && for f in "$sdist" "$wheel" "$archive" preflight.yaml; do printf '%s  %s\n' "$(sha256 "$f")" "$f"; done) \
        >"$DIST/SHA256SUMS"
    say "the sdist, the wheel and the krew plugin are in $DIST"
    echo "sdist: $DIST/$sdist"
    echo "wheel: $DIST/$wheel"
    echo "krew plugin: $DIST/$archive"
    echo "krew manifest: $DIST/preflight.yaml"
    exit 0
fi

HOST="${REGISTRY%%/*}"
TAG="${VERSION//+/_}"  # a tag cannot hold '+' (the OCI distribution spec's tag grammar); helm does the same
IMAGE_REF="$REGISTRY/preflight-webhook:$TAG"

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
if [[ -n "$DIST" ]]; then
    chart_tgz="preflight-webhook-$VERSION.tgz"
    cp "$WORK/out/$chart_tgz" "$DIST/$chart_tgz"
    (cd "$DIST" && for f in "$sdist" "$wheel" "$archive" preflight.yaml "$chart_tgz"; do
        printf '%s  %s\n' "$(sha256 "$f")" "$f"
    done) >"$DIST/SHA256SUMS"
    say "the sdist, the wheel, the krew plugin and the chart's package are in $DIST"
    echo "sdist: $DIST/$sdist"
    echo "wheel: $DIST/$wheel"
    echo "krew plugin: $DIST/$archive"
    echo "krew manifest: $DIST/preflight.yaml"
fi
