# preflight-webhook image: `docker build -t preflight-webhook:0.1.0 .`
#
# Two stages. The builder turns the source into a wheel and installs it (with its
# dependencies, all published as binary wheels, at constraints.txt's versions: the ones the
# tests ran on, as `make install` installs them) into /install. The final stage copies only
# /install onto the same pinned slim Python: no compiler, no build backend, no source tree.
# It runs as a numeric non-root UID (runAsNonRoot can verify it) and needs no shell: the
# ENTRYPOINT is exec form and the chart's preStop uses the kubelet's own sleep action.
# Pin the base by digest as well (--build-arg BASE_IMAGE=python:3.11.11-slim-bookworm@sha256:...).

# BASE_IMAGE: any Python 3.11+ image whose `python` is first on PATH and installs into /usr/local
# (e2e/images.sh builds one locally with mmdebstrap for the in-cluster tests).
ARG BASE_IMAGE=python:3.11.11-slim-bookworm

FROM ${BASE_IMAGE} AS builder
# EXTRAS: the package's optional extras to install; "fast" adds uvloop (less CPU per review on
# the TLS server path, docs/benchmarks.md); --build-arg EXTRAS= builds without it (the server
# falls back to asyncio's own loop).
ARG EXTRAS=fast
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY webhook ./webhook
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && wheel="$(echo /wheels/*.whl)" \
 && python -m pip install --prefix=/install --only-binary=:all: -c constraints.txt "${wheel}${EXTRAS:+[$EXTRAS]}" \
 && python -m compileall -q /install

FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="preflight-webhook" \
      org.opencontainers.image.description="Validating admission webhook for AIPerfJobs and TrainJobs" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
COPY --from=builder /install /usr/local
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["preflight-webhook", "serve"]
