"""secret_refs / config_map_refs / pod_requests: what every check reads from a PodSpec."""

from decimal import Decimal

from webhook.workloads.podspec import SecretRef, config_map_refs, pod_limits, pod_requests, secret_refs, service_account

POD = {
    "imagePullSecrets": [{"name": "ngc"}, {}],
    "serviceAccountName": "runner",
    "volumes": [
        {"name": "creds", "secret": {"secretName": "s3", "optional": True}},
        {"name": "keys", "secret": {"secretName": "tls", "items": [{"key": "tls.crt", "path": "a"}, {"key": "tls.key", "path": "b"}]}},
        {
            "name": "bundle",
            "projected": {
                "sources": [
                    {"configMap": {"name": "ca"}},
                    {"secret": {"name": "proj", "items": [{"key": "k", "path": "k"}], "optional": False}},
                    {"secret": {"name": "proj-opt", "optional": True}},
                ]
            },
        },
        {"name": "cfg", "configMap": {"name": "settings", "optional": True}},
    ],
    "initContainers": [
        {"name": "fetch", "envFrom": [{"secretRef": {"name": "fetch-env"}}, {"configMapRef": {"name": "fetch-cm"}}]},
    ],
    "containers": [
        {
            "name": "node",
            "env": [
                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
                {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "other", "optional": True}}},
                {"name": "PLAIN", "value": "x"},
                {"name": "CM", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "a"}}},
            ],
            "envFrom": [{"secretRef": {"name": "bulk", "optional": True}}],
        }
    ],
}


def test_secret_refs_cover_every_source_in_order():
    assert secret_refs(POD) == [
        SecretRef("ngc", None, False, "imagePullSecrets[0]"),
        SecretRef("s3", None, True, "volumes[creds].secret"),
        SecretRef("tls", "tls.crt", False, "volumes[keys].secret.items[0]"),
        SecretRef("tls", "tls.key", False, "volumes[keys].secret.items[1]"),
        SecretRef("proj", "k", False, "volumes[bundle].projected.sources[1].secret.items[0]"),
        SecretRef("proj-opt", None, True, "volumes[bundle].projected.sources[2].secret"),
        SecretRef("fetch-env", None, False, "initContainers[fetch].envFrom[0]"),
        SecretRef("hf", "token", False, "containers[node].env[HF_TOKEN]"),
        SecretRef("hf", "other", True, "containers[node].env[OPT]"),
        SecretRef("bulk", None, True, "containers[node].envFrom[0]"),
    ]


def test_describe_reads_like_prose():
    refs = {r.field_path: r.describe() for r in secret_refs(POD)}
    assert refs["containers[node].env[HF_TOKEN]"] == "env HF_TOKEN of container node"
    assert refs["initContainers[fetch].envFrom[0]"] == "envFrom of init container fetch"
    assert refs["volumes[keys].secret.items[0]"] == "volume keys"
    assert refs["imagePullSecrets[0]"] == "imagePullSecrets"


def test_empty_and_malformed_pod_specs_have_no_refs():
    assert secret_refs({}) == []
    assert secret_refs({"containers": [None, {"env": [None, {"valueFrom": "x"}]}], "volumes": ["x"]}) == []


def test_config_map_refs_and_service_account():
    assert config_map_refs(POD) == [
        ("ca", False, "volumes[bundle].projected.sources[0].configMap"),
        ("settings", True, "volumes[cfg].configMap"),
        ("fetch-cm", False, "initContainers[fetch].envFrom[1]"),
        ("settings", False, "containers[node].env[CM]"),
    ]
    assert service_account(POD) == "runner"
    assert service_account({}) is None


def _c(name, req=None, lim=None, **kw):
    res = {}
    if req:
        res["requests"] = req
    if lim:
        res["limits"] = lim
    return {"name": name, "resources": res, **kw}


def test_pod_requests_sum_containers_and_max_with_init():
    pod = {
        "initContainers": [_c("big-init", {"cpu": "3", "memory": "1Gi"})],
        "containers": [_c("a", {"cpu": "500m", "memory": "1Gi"}), _c("b", {"cpu": "1", "memory": "2Gi"})],
    }
    assert pod_requests(pod) == {"cpu": Decimal("3"), "memory": Decimal(3 * 1024**3)}


def test_sidecar_init_containers_add_to_the_app_containers():
    pod = {
        "initContainers": [_c("proxy", {"cpu": "250m"}, restartPolicy="Always"), _c("once", {"cpu": "1"})],
        "containers": [_c("app", {"cpu": "1"})],
    }
    # app + sidecar = 1.25; init peak = sidecar + once = 1.25
    assert pod_requests(pod) == {"cpu": Decimal("1.25")}
    pod["initContainers"][1] = _c("once", {"cpu": "2"})
    assert pod_requests(pod) == {"cpu": Decimal("2.25")}


def test_requests_default_to_limits_and_limits_are_summed():
    pod = {"containers": [_c("gpu", None, {"nvidia.com/gpu": "8"}), _c("x", {"cpu": "1"}, {"cpu": "2"})]}
    assert pod_requests(pod) == {"nvidia.com/gpu": Decimal(8), "cpu": Decimal(1)}
    assert pod_limits(pod) == {"nvidia.com/gpu": Decimal(8), "cpu": Decimal(2)}
