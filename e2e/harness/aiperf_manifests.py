"""The objects the AIPerf 0.13.0 operator runs with on the real node, written as plain dicts.

AIPerf's wheel ships no install manifests (no CRD, RBAC or Deployment: /work/shared/notes
§0); its source repository has a Helm chart, ``deploy/helm/aiperf-operator/`` in
github.com/ai-dynamo/aiperf. The objects here are written for this harness, modelled on it
(the revisions the search index holds; which chart commit carries appVersion 0.13.0 could not be
found there: the stored Chart.yaml versions say 0.7.0 and 0.8.0, so every rule and variable
was checked against the 0.13.0 wheel itself, e2e/test_aiperf_manifests.py):

* ``templates/clusterrole.yaml`` (commit 8862af02397e3464d75f558067dfd2f4d03b7c26): the
  ClusterRole, rule for rule, plus ``aiperfsweeps`` (the 0.13.0 operator also watches
  AIPerfSweeps; that revision's rules do not name them);
* ``templates/deployment.yaml`` (commit 6a5359abf7179a9399546a576c38f5468c118c1b): the
  operator container, its command (``kopf run -m aiperf.operator.main --verbose
  --all-namespaces --liveness=http://0.0.0.0:8080/healthz``, the module the wheel's own
  docstring names), its environment, probes and security contexts; the ``results-server``
  sidecar is left out (it only serves stored results over HTTP; nothing here reads them, and
  the node has 2 CPUs);
* ``values.yaml`` (commit 9443b06d98b1fb3f82218f1bcca61a4c8630fb08): the env defaults and the
  operator's resources (requests 250m/256Mi as there; the limits raised from 500m/512Mi to
  1 CPU / 1Gi so the start, which imports kopf and AIPerf, is not throttled on this loaded
  machine; not measured with the chart's limits).

``templates/benchmark-rbac.yaml`` is not needed: the 0.13.0 operator creates the benchmark
pods' Role and RoleBinding itself for each AIPerfJob (``aiperf/kubernetes/resources.py``
``RBACSpec``). The CRD stays the project's permissive ``e2e/crds/aiperfjob-crd.yaml``
(installed with the node's control plane): the operator needs only the ``status``
subresource, which it has; the upstream CRD's CEL rules would judge the spec, which is the
webhook's job here.

The stand-in endpoint is PyPI ``fakellm`` (``fakellm serve --config FILE --host --port``;
FastAPI: ``POST /v1/chat/completions`` and ``/v1/messages``), as a Deployment + Service
(``http://fakellm.aiperf-standin.svc.cluster.local:8000``); its rules answer at once (the
``deterministic_echo`` fallback, no latency rule).

AIPerf's benchmark loads a tokenizer, three ways in Kubernetes mode: the controller's
``dataset-manager`` by its name, the ``api`` container pre-warms it by name and serves it to the
worker pods as a bundle built with ``snapshot_download(local_files_only=True)`` from the Hub cache
(``aiperf/api/routers/tokenizer.py``), and the record processors load that bundle by its local
path. The default (``builtin``: tiktoken's o200k_base) downloads its encoding and a Hub name
needs the Hub, which no pod here reaches; ``HF_HUB_OFFLINE=1`` would avoid the Hub but AIPerf then
looks every name up as a repository in the cache, so the record processors' bundle path fails
(``HFValidationError``). So :func:`ensure_tokenizer` puts a tiny word-level ``tokenizer.json``
in a ConfigMap, and :func:`good_aiperfjob` names it ``preflight/tiny-tokenizer``, mounts it at
``/preflight/tiny-tokenizer`` (the pods' working directory is ``/``, and transformers loads an
existing directory before it asks the Hub) and again laid out as a Hub cache at ``/opt/hf``
(``HF_HUB_CACHE=/opt/hf/hub``: the rendered JobSet owns ``HF_HOME``) for the api's bundle.
No pod needs the outside network.

:mod:`e2e.harness.aiperf_stack` deploys them and watches the jobs.
"""

from __future__ import annotations

import json
from typing import Any

from e2e.harness.controlplane import ControlPlane

OPERATOR_NAMESPACE = "aiperf-system"
OPERATOR_NAME = "aiperf-operator"
STANDIN_NAMESPACE = "aiperf-standin"
STANDIN_NAME = "fakellm"
STANDIN_PORT = 8000
STANDIN_URL = f"http://{STANDIN_NAME}.{STANDIN_NAMESPACE}.svc.cluster.local:{STANDIN_PORT}"
TOKENIZER_CONFIGMAP = "aiperf-tokenizer"
#: the tokenizer's name: a Hub repository id that is also a directory relative to the pods' working
#: directory ("/"): see the module docstring
TOKENIZER_NAME = "preflight/tiny-tokenizer"
#: where the same ConfigMap is laid out as a Hugging Face Hub cache (HF_HUB_CACHE)
HF_CACHE_MOUNT = "/opt/hf"
_SNAPSHOT = "0" * 40
_HUB_DIR = "hub/models--" + TOKENIZER_NAME.replace("/", "--")
_FILES = ("tokenizer.json", "tokenizer_config.json")
#: the phases in which the operator is done with an AIPerfJob (aiperf/kubernetes/phase.py)


def aiperf_image(version: str) -> str:
    return f"localhost/preflight/aiperf:{version}"


def fakellm_image(version: str) -> str:
    return f"localhost/preflight/fakellm:{version}"


# --------------------------------------------------------------------------- manifests


def _labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": OPERATOR_NAME, "app.kubernetes.io/component": component}


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


_READ = ["get", "list", "watch"]
_ALL = ["create", "delete", "get", "list", "patch", "update", "watch"]

#: the upstream chart's ClusterRole (templates/clusterrole.yaml, see the module docstring)
OPERATOR_RULES: list[dict[str, Any]] = [
    _rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], _READ),  # kopf's discovery
    _rule(
        ["aiperf.nvidia.com"],
        ["aiperfjobs", "aiperfjobs/status", "aiperfjobs/finalizers"]
        + ["aiperfsweeps", "aiperfsweeps/status", "aiperfsweeps/finalizers"],
        _ALL,
    ),
    _rule(["jobset.x-k8s.io"], ["jobsets"], _ALL),
    _rule(["jobset.x-k8s.io"], ["jobsets/status"], _READ),
    _rule(["kueue.x-k8s.io"], ["workloads"], _READ),
    _rule(["batch"], ["jobs"], _READ),
    _rule(["apps"], ["deployments"], _READ),  # preflight: the JobSet controller
    _rule([""], ["serviceaccounts", "resourcequotas", "secrets"], _READ),  # preflight
    _rule(["networking.k8s.io"], ["networkpolicies"], _READ),  # preflight
    _rule([""], ["configmaps"], _ALL),
    _rule([""], ["services", "endpoints"], ["create", "delete", "get", "list", "watch"]),
    _rule(["rbac.authorization.k8s.io"], ["roles", "rolebindings"], ["create", "delete", "get", "list", "watch"]),
    _rule([""], ["namespaces"], _READ),
    _rule([""], ["pods", "pods/log"], _READ),
    _rule([""], ["nodes"], ["get", "list"]),
    _rule([""], ["events"], ["get", "list", "watch", "create", "patch"]),
    _rule(["coordination.k8s.io"], ["leases"], _ALL),  # namespace claims
]


def operator_manifests(version: str, namespace: str = OPERATOR_NAMESPACE) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, ClusterRole(+Binding) and Deployment of the operator."""
    image = aiperf_image(version)
    env = {
        "PYTHONUNBUFFERED": "1",
        # kopf names itself by getpass.getuser(), which reads $USER before the passwd entry the
        # chart's uid 1000 has in NVIDIA's image and not in ours (KeyError: 'getpwuid(): uid not found')
        "USER": "aiperf",
        "AIPERF_OPERATOR_MONITOR_INTERVAL": "10.0",
        "AIPERF_OPERATOR_MONITOR_INITIAL_DELAY": "5.0",
        "AIPERF_RESULTS_DIR": "/data",
        "AIPERF_DEFAULT_IMAGE": image,
        "AIPERF_JOB_TIMEOUT_SECONDS": "0",
        "AIPERF_POD_RESTART_THRESHOLD": "3",
        "AIPERF_RESULTS_TTL_DAYS": "30",
        "AIPERF_RESULTS_MAX_RETRIES": "5",
        "AIPERF_RESULTS_RETRY_DELAY": "2.0",
        "AIPERF_ENDPOINT_CHECK_TIMEOUT": "10.0",
        "AIPERF_RESULTS_COMPRESS_ON_DISK": "true",
        "AIPERF_K8S_SHARE_PROCESS_NAMESPACE": "false",
    }
    probe = {"httpGet": {"path": "/healthz", "port": 8080}, "timeoutSeconds": 5, "failureThreshold": 3}
    container = {
        "name": "operator",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": [
            "kopf",
            "run",
            "-m",
            "aiperf.operator.main",
            "--verbose",
            "--all-namespaces",
            "--liveness=http://0.0.0.0:8080/healthz",
        ],
        "ports": [{"name": "health", "containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": k, "value": v} for k, v in env.items()],
        # the chart's delays; startupProbe added: the first start imports kopf + AIPerf
        "startupProbe": {**probe, "periodSeconds": 2, "failureThreshold": 150},
        "livenessProbe": {**probe, "initialDelaySeconds": 10, "periodSeconds": 30},
        "readinessProbe": {**probe, "initialDelaySeconds": 5, "periodSeconds": 10},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, {"name": "results", "mountPath": "/data"}],
    }
    meta = {"name": OPERATOR_NAME, "namespace": namespace, "labels": _labels("operator")}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": OPERATOR_NAME, "labels": _labels("operator")},
            "rules": OPERATOR_RULES,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": OPERATOR_NAME, "labels": _labels("operator")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": OPERATOR_NAME},
            "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_NAME, "namespace": namespace}],
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": _labels("operator")},
                "template": {
                    "metadata": {"labels": _labels("operator")},
                    "spec": {
                        "serviceAccountName": OPERATOR_NAME,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 1000,
                            "runAsGroup": 1000,
                            "fsGroup": 1000,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "terminationGracePeriodSeconds": 30,
                        "containers": [container],
                        "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "results", "emptyDir": {}}],
                    },
                },
            },
        },
    ]


#: fakellm's rules: every request falls through to the deterministic echo, answered at once
FAKELLM_CONFIG = "version: 1\ndefaults:\n  fallback: deterministic_echo\nrules: []\n"


def standin_manifests(version: str, namespace: str = STANDIN_NAMESPACE) -> list[dict[str, Any]]:
    """The OpenAI-compatible stand-in (fakellm): ConfigMap (its rules), Deployment, Service."""
    labels = {"app.kubernetes.io/name": STANDIN_NAME}
    meta = {"name": STANDIN_NAME, "namespace": namespace, "labels": labels}
    probe = {"tcpSocket": {"port": STANDIN_PORT}, "periodSeconds": 2}
    container = {
        "name": "fakellm",
        "image": fakellm_image(version),
        "imagePullPolicy": "IfNotPresent",
        "command": [
            "fakellm",
            "serve",
            "--config",
            "/etc/fakellm/fakellm.yaml",
            "--host",
            "0.0.0.0",
            "--port",
            str(STANDIN_PORT),
        ],
        "ports": [{"name": "http", "containerPort": STANDIN_PORT}],
        "readinessProbe": probe,
        "startupProbe": {**probe, "failureThreshold": 90},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/fakellm", "readOnly": True}],
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"fakellm.yaml": FAKELLM_CONFIG}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532},
                        "containers": [container],
                        "volumes": [{"name": "config", "configMap": {"name": STANDIN_NAME}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {"selector": labels, "ports": [{"name": "http", "port": STANDIN_PORT, "targetPort": "http"}]},
        },
    ]


# --------------------------------------------------------------------------- the jobs


def tokenizer_files(words: int = 512) -> dict[str, str]:
    """A word-level HuggingFace tokenizer (``tokenizer.json`` + config) that needs no download."""
    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(words)}}
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": 0,
                "content": "[UNK]",
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 131072}
    return {"tokenizer.json": json.dumps(tok), "tokenizer_config.json": json.dumps(config)}


_DIR_ITEMS = [{"key": f, "path": f} for f in _FILES]
_HUB_ITEMS = [
    {"key": "ref", "path": f"{_HUB_DIR}/refs/main"},
    *({"key": f, "path": f"{_HUB_DIR}/snapshots/{_SNAPSHOT}/{f}"} for f in _FILES),
]


def tokenizer_configmap(namespace: str | None = None) -> dict[str, Any]:
    """The tokenizer ConfigMap :func:`good_aiperfjob` mounts (in ``namespace`` if given: the
    fidelity matrix sets each scenario's own), as an object to apply."""
    meta: dict[str, Any] = {"name": TOKENIZER_CONFIGMAP}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {**tokenizer_files(), "ref": _SNAPSHOT}}


def ensure_tokenizer(cp: ControlPlane, namespace: str) -> None:
    """Apply :func:`tokenizer_configmap` in ``namespace``."""
    cm = tokenizer_configmap(namespace)
    cp.kubectl("apply", "--server-side", "--field-manager=preflight-aiperf", "-f", "-", input=json.dumps(cm))


def good_aiperfjob(
    name: str,
    namespace: str,
    *,
    version: str = "0.13.0",
    url: str = STANDIN_URL,
    requests: int = 4,
    env: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A short benchmark against the stand-in that runs on the 2-CPU node.

    ``resourceMode: none`` (AIPerf sizes a worker pod at 3350m), one worker and one record
    processor, concurrency 1, ``requests`` requests, the offline tokenizer (:func:`ensure_tokenizer`).
    ``env`` adds to ``podTemplate.env`` (e.g. a ``secretKeyRef`` the operator's preflight reads).
    """
    return {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": aiperf_image(version),
            "imagePullPolicy": "IfNotPresent",
            "resourceMode": "none",
            "connectionsPerWorker": 1,
            "ttlSecondsAfterFinished": 600,
            "podTemplate": {
                "env": [{"name": "HF_HUB_CACHE", "value": f"{HF_CACHE_MOUNT}/hub"}, *(env or [])],
                "volumes": [
                    {"name": "tokenizer", "configMap": {"name": TOKENIZER_CONFIGMAP, "items": _DIR_ITEMS}},
                    {"name": "tokenizer-hub", "configMap": {"name": TOKENIZER_CONFIGMAP, "items": _HUB_ITEMS}},
                ],
                "volumeMounts": [
                    {"name": "tokenizer", "mountPath": f"/{TOKENIZER_NAME}", "readOnly": True},
                    {"name": "tokenizer-hub", "mountPath": HF_CACHE_MOUNT, "readOnly": True},
                ],
            },
            "benchmark": {
                "models": ["mock-model"],
                "endpoint": {"urls": [url]},
                "tokenizer": {"name": TOKENIZER_NAME},
                "datasets": [
                    {
                        "name": "main",
                        "type": "synthetic",
                        "entries": requests,
                        "prompts": {"isl": {"mean": 32, "stddev": 0}, "osl": 8},
                    }
                ],
                "gpuTelemetry": {"enabled": False},
                "serverMetrics": {"enabled": False},
                "runtime": {"workers": 1, "recordProcessors": 1},
                "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 1, "requests": requests}],
            },
        },
    }
