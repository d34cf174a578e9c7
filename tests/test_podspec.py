"""secret_refs / config_map_refs / pod_requests: what every check reads from a PodSpec."""

from decimal import Decimal

from webhook.workloads.podspec import (
    SecretRef,
    config_map_refs,
    mounted_volumes,
    pod_limits,
    pod_requests,
    secret_refs,
    service_account,
)

POD = {
    "imagePullSecrets": [{"name": "ngc"}, {}],
    "serviceAccountName": "runner",
    "volumes": [
        {"name": "creds", "secret": {"secretName": "s3", "optional": True}},
        {
            "name": "keys",
            "secret": {
                "secretName": "tls",
                "items": [{"key": "tls.crt", "path": "a"}, {"key": "tls.key", "path": "b"}],
            },
        },
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
            "volumeMounts": [{"name": "keys", "mountPath": "/keys"}, {"name": "bundle", "mountPath": "/bundle"}],
        }
    ],
}


def test_secret_refs_cover_every_source_in_order():
    assert secret_refs(POD) == [
        SecretRef("ngc", None, False, "imagePullSecrets[0]"),
        SecretRef("s3", None, True, "volumes[creds].secret", "volume creds is mounted by no container"),
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


# every volume plugin VisitPodSecretNames lists (k8s.io/kubernetes pkg/api/v1/pod/util.go)
PLUGINS = {
    "containers": [
        {
            "name": "c",
            "volumeMounts": [
                {"name": n, "mountPath": f"/{n}"}
                for n in ("az", "ceph", "cin", "flex", "rbd", "sio", "iscsi-chap", "iscsi", "sos", "csi")
            ],
            "volumeDevices": [{"name": "blk", "devicePath": "/dev/x"}],
        }
    ],
    "volumes": [
        {"name": "az", "azureFile": {"secretName": "az-key", "shareName": "s"}},
        {"name": "ceph", "cephfs": {"monitors": ["m"], "secretRef": {"name": "ceph-key"}}},
        {"name": "cin", "cinder": {"volumeID": "v", "secretRef": {"name": "cinder-key"}}},
        {"name": "flex", "flexVolume": {"driver": "d", "secretRef": {"name": "flex-key"}}},
        {"name": "rbd", "rbd": {"monitors": ["m"], "image": "i", "secretRef": {"name": "rbd-key"}}},
        {"name": "sio", "scaleIO": {"gateway": "g", "system": "s", "secretRef": {"name": "sio-key"}}},
        {
            "name": "iscsi-chap",
            "iscsi": {
                "targetPortal": "p",
                "iqn": "q",
                "lun": 0,
                "chapAuthSession": True,
                "secretRef": {"name": "chap"},
            },
        },
        {"name": "iscsi", "iscsi": {"targetPortal": "p", "iqn": "q", "lun": 0, "secretRef": {"name": "no-chap"}}},
        {"name": "sos", "storageos": {"volumeName": "v", "secretRef": {"name": "sos-key"}}},
        {"name": "csi", "csi": {"driver": "secrets-store.csi.k8s.io", "nodePublishSecretRef": {"name": "csi-creds"}}},
        {"name": "blk", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "blk-creds"}}},
        {"name": "idle", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "idle-creds"}}},
        {"name": "bad", "csi": {"driver": "d", "nodePublishSecretRef": "x"}, "rbd": {"secretRef": {}}},
    ],
}


def test_secret_refs_cover_every_volume_plugin_visit_pod_secret_names_lists():
    assert secret_refs(PLUGINS) == [
        SecretRef("az-key", None, False, "volumes[az].azureFile.secretName"),
        SecretRef("ceph-key", None, False, "volumes[ceph].cephfs.secretRef"),
        SecretRef(
            "cinder-key",
            None,
            False,
            "volumes[cin].cinder.secretRef",
            "cinder volume cin is served by the Cinder CSI driver, which is not given the Secret",
        ),
        SecretRef("flex-key", None, False, "volumes[flex].flexVolume.secretRef"),
        SecretRef("rbd-key", None, False, "volumes[rbd].rbd.secretRef"),
        SecretRef("sio-key", None, False, "volumes[sio].scaleIO.secretRef"),
        SecretRef("chap", None, False, "volumes[iscsi-chap].iscsi.secretRef"),
        SecretRef(
            "no-chap", None, False, "volumes[iscsi].iscsi.secretRef", "iscsi volume iscsi uses no CHAP authentication"
        ),
        SecretRef("sos-key", None, False, "volumes[sos].storageos.secretRef"),
        SecretRef("csi-creds", None, False, "volumes[csi].csi.nodePublishSecretRef"),
        SecretRef("blk-creds", None, False, "volumes[blk].csi.nodePublishSecretRef"),
        SecretRef(
            "idle-creds",
            None,
            False,
            "volumes[idle].csi.nodePublishSecretRef",
            "volume idle is mounted by no container",
        ),
    ]
    assert {r.describe() for r in secret_refs(PLUGINS)} >= {"volume csi", "volume az", "volume iscsi"}


def test_mounted_volumes_are_mounts_and_devices_of_every_container():
    spec = {
        "initContainers": [{"name": "i", "volumeMounts": [{"name": "a"}]}],
        "containers": [{"name": "c", "volumeDevices": [{"name": "b"}], "volumeMounts": [None, {"name": 3}]}],
    }
    assert mounted_volumes(spec) == {"a", "b"}
