# preflight-webhook: every entry point a newcomer needs.
#   make demo        the local control plane + the webhook registered + sample applies (accepted, denied, warned)
#   make demo-cluster  the same on a real single node: our image, `helm install`, the webhook's pods (root)
#   make test        the suite CI runs (lint, unit, in-process TLS server, oracles, end-to-end against a real
#                    kube-apiserver, a real-node smoke, the fidelity matrix against its recorded outcomes)
#   make conformance the long real-stack runs: every fidelity scenario run for real, every other node e2e
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: help install constraints lint build-control-plane build-test build-cluster oracle test conformance tiers test-unit test-e2e demo demo-down demo-cluster demo-cluster-down bench bench-cluster bench-scale release clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml constraints.txt
	@echo "==> creating $(VENV) and installing preflight-webhook with test extras (versions: constraints.txt)"
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip -c constraints.txt
	$(PIP) install -q -e '.[test]' -c constraints.txt
	@touch $@

install: $(VENV)/.installed ## create .venv and install the package with test dependencies at constraints.txt's versions

constraints: ## rewrite constraints.txt from .venv's versions and what the extras resolve to (scripts/constraints.py)
	$(PY) scripts/constraints.py

lint: install ## ruff (lint + format check) and mypy --strict on webhook/, versions pinned in pyproject.toml
	$(VENV)/bin/ruff check webhook tests e2e bench
	$(VENV)/bin/ruff format --check webhook tests e2e bench
	$(VENV)/bin/mypy

build-control-plane: ## only what `make demo` runs: etcd, kube-apiserver, kubectl and the CRDs
	bash e2e/build.sh control-plane

build-test: ## build or reuse what `make test` runs: build-cluster without the Prometheus server and Kyverno (docs/development.md, "Test tiers")
	bash e2e/build.sh test

build-cluster: ## build or reuse everything the tests and `make demo-cluster` run: the control plane, helm, the node, the registry, the JobSet/Trainer/Kueue stack (cached in ~/.cache/preflight-webhook)
	bash e2e/build.sh

test-unit: install lint ## lint, then unit and in-process server tests only (no cluster)
	$(PY) -m pytest tests -q

test-e2e: install build-test ## the end-to-end tests of `make test` (a real kube-apiserver + etcd, the node smoke, the fidelity matrix)
	$(PY) -m pytest e2e -q -m "not conformance"

oracle: ## build (once) the oracles in ~/.cache/preflight-webhook: AIPerf 0.13.0 venv, Trainer v2.3.0, Kubernetes quota and storage, Kueue v0.17.0 capacity, Pod Security, the kubelet's image reference parse, the DRA structured allocator
	@bash tests/oracle/setup.sh >/dev/null
	@bash tests/oracle/trainer/build.sh >/dev/null
	@bash tests/oracle/quota/build.sh >/dev/null
	@bash tests/oracle/storage/build.sh >/dev/null
	@bash tests/oracle/kueue/build.sh >/dev/null
	@bash tests/oracle/podsecurity/build.sh >/dev/null
	@bash tests/oracle/reference/build.sh >/dev/null
	@bash tests/oracle/dra/build.sh >/dev/null

# the oracles' paths (tests skip without theirs): `make test` and `make conformance` pass them
ORACLES = PREFLIGHT_ORACLE_PYTHON="$$(bash tests/oracle/setup.sh)" \
	PREFLIGHT_TRAINER_ORACLE="$$(bash tests/oracle/trainer/build.sh)" \
	PREFLIGHT_QUOTA_ORACLE="$$(bash tests/oracle/quota/build.sh)" \
	PREFLIGHT_STORAGE_ORACLE="$$(bash tests/oracle/storage/build.sh)" \
	PREFLIGHT_KUEUE_ORACLE="$$(bash tests/oracle/kueue/build.sh)" \
	PREFLIGHT_PODSECURITY_ORACLE="$$(bash tests/oracle/podsecurity/build.sh)" \
	PREFLIGHT_REFERENCE_ORACLE="$$(bash tests/oracle/reference/build.sh)" \
	PREFLIGHT_DRA_ORACLE="$$(bash tests/oracle/dra/build.sh)"

test: install lint build-test oracle ## what CI runs (.ci/run): lint, unit, server, the oracles, the control-plane e2e, the node smoke, the fidelity verdicts against the record (≤ 20 min warm)
	$(ORACLES) scripts/test.sh $(PY)

conformance: install lint build-cluster oracle ## the long real-stack runs: every fidelity scenario run for real (rewrites e2e/fidelity/outcomes.json, docs/fidelity.md), every other node e2e (root)
	$(ORACLES) $(PY) -m pytest e2e -q -m conformance --durations=25

tiers: install ## list every test and its tier into docs/test-tiers.md; fails if a test collected before the split is in neither
	$(PY) -m e2e.tiers --write

demo: install build-control-plane ## start the local control plane with the webhook and show it accept, deny and warn; then the audit controller's Events
	$(PY) -m e2e.harness.demo up

demo-down: ## stop what `make demo` left running
	$(PY) -m e2e.harness.demo down

demo-cluster: install build-cluster ## (root) a real single node, our image and chart pushed to a registry on it, `helm install oci://…`, the samples applied
	$(PY) -m e2e.harness.demo_cluster up

demo-cluster-down: ## stop what `make demo-cluster` left running (by PID) and remove it
	$(PY) -m e2e.harness.demo_cluster down

# each bench script answers one question (its --help says which) and writes docs/benchmarks/<question>.md;
# QUICK=1 runs them at toy sizes in seconds and writes nothing
BENCH_WRITE = $(if $(QUICK),--quick,--write)
bench: install ## the load and in-process benchmarks (~20 min; QUICK=1: a smoke run that writes nothing)
	$(PY) bench/run.py $(if $(QUICK),--quick,)
	$(PY) bench/inproc.py $(BENCH_WRITE)
	$(PY) bench/large.py --stall $(BENCH_WRITE)
	$(PY) bench/hostile.py $(if $(QUICK),--quick,)
	$(PY) bench/worst_at_once.py $(if $(QUICK),--quick,)
	$(PY) bench/registry_fanout.py $(BENCH_WRITE)
	$(PY) bench/fuzz_parsers.py $(BENCH_WRITE)
	$(PY) bench/cli_input.py $(BENCH_WRITE)
	$(PY) bench/sweep.py $(BENCH_WRITE)
	$(PY) bench/kueue_wait.py $(BENCH_WRITE)
	$(PY) bench/audit_reports.py $(BENCH_WRITE)
	$(PY) bench/node_readers.py $(if $(QUICK),--quick,)

bench-cluster: install build-cluster ## the cluster benchmarks on the local control plane (~20 min; NODE=1 adds the real node, root)
	$(PY) bench/cluster_bench.py
	$(PY) bench/inproc.py --cluster --write
	$(PY) bench/apply_latency.py
	$(PY) bench/audit_scale.py $(if $(QUICK),--quick,--write)
	$(PY) bench/vs_kyverno.py $(if $(QUICK),--quick,--profile)
	$(PY) bench/review_cpu.py $(if $(QUICK),--quick,--write)
	$(PY) bench/gc_pauses.py $(if $(QUICK),--quick,)
	$(PY) bench/import_weight.py --cluster $(if $(QUICK),--quick,--write)
	$(if $(NODE),$(PY) bench/apply_latency.py --on node,)

bench-scale: install build-control-plane ## the webhook and audit controller at 1 and 10 % of Kubernetes' scalability thresholds (~25 min; SCALE=1,10,100 for the full run)
	$(PY) bench/scale.py $(if $(SCALE),--scale $(SCALE),)

DIST ?= dist
release: ## push the image (buildah) and the chart (helm push) to REGISTRY=host[:port][/path] as VERSION=x.y.z, and build the sdist, the wheel and the krew plugin into DIST (dist/; DIST_ONLY=1: only those, nothing pushed) (scripts/release.sh)
	REGISTRY="$(REGISTRY)" VERSION="$(VERSION)" DIST="$(DIST)" bash scripts/release.sh

clean: ## remove the virtualenv and caches in the work tree
	rm -rf $(VENV) .pytest_cache .hypothesis build dist *.egg-info
