"""Oracle: `check --offline`'s CRD schema validation (webhook/schema) against the real kube-apiserver.

Every generated object (a valid one of each kind, then mutations of it: a required field removed, a wrong
type, an enum value, a pattern, a maximum length or minimum broken, an unknown field, a list-map key
repeated, an x-kubernetes-validations rule broken, nested down to replicatedJobs' pod templates) is sent as a
server-side dry-run create with fieldValidation=Strict, as `kubectl apply` sends it by default since 1.27, to
the local control plane (e2e/harness/controlplane.py: kube-apiserver v1.37.2 with the CRDs e2e/build.sh
fetched and e2e/crds/*.yaml, the ones scripts/gen_crd_schemas.py compiles into webhook/schema/crds_data.py).
Its answer is compared with webhook.schema.validate's, exactly:

- HTTP 400 strict decoding error: the same message (`TrainJob in version "v1alpha1" cannot be handled as a
  TrainJob: strict decoding error: unknown field "spec.trainr"`);
- HTTP 422 Invalid: the same multiset of the Status' causes, each (field, reason, message)
  (`spec.runtimeRef`, `FieldValueRequired`, `Required value`);
- HTTP 201: no finding.

A control-plane test (no node), in `make test`: a few hundred dry-runs take seconds.
"""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

from e2e.harness.controlplane import ControlPlane
from webhook.schema import validate
from webhook.schema.validate import _data

NS = "default"
PLURALS = {
    "JobSet": "jobsets",
    "TrainJob": "trainjobs",
    "TrainingRuntime": "trainingruntimes",
    "ClusterTrainingRuntime": "clustertrainingruntimes",
    "AIPerfJob": "aiperfjobs",
    "AIPerfSweep": "aiperfsweeps",
}
#: the most mutations generated from one valid object (spread evenly over the ones the walk finds)
PER_KIND = 90


def _pod_spec(name: str = "node") -> dict[str, Any]:
    return {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": name,
                "image": "pytorch/pytorch:2.7.1",
                "command": ["torchrun", "train.py"],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
                "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"nvidia.com/gpu": 1}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "volumes": [{"name": "data", "emptyDir": {"medium": "Memory"}}],
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }


def _jobset_spec() -> dict[str, Any]:
    return {
        "replicatedJobs": [
            {
                "name": "node",
                "replicas": 2,
                "template": {
                    "metadata": {"labels": {"app": "x"}},
                    "spec": {
                        "parallelism": 1,
                        "completions": 1,
                        "backoffLimit": 0,
                        "completionMode": "Indexed",
                        "template": {"metadata": {"labels": {"app": "x"}}, "spec": _pod_spec()},
                    },
                },
            }
        ],
        "successPolicy": {"operator": "All"},
        "failurePolicy": {"maxRestarts": 1},
        "network": {"enableDNSHostnames": True},
        "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
    }


def _runtime_spec() -> dict[str, Any]:
    return {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": _jobset_spec()}}


def valid_objects() -> list[dict[str, Any]]:
    meta = {"name": "oracle", "namespace": NS, "labels": {"team": "a"}, "annotations": {"note": "x"}}
    return [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta, "spec": _jobset_spec()},
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": meta,
            "spec": {
                "runtimeRef": {"name": "torch-distributed", "kind": "ClusterTrainingRuntime"},
                "suspend": False,
                "managedBy": "trainer.kubeflow.org/trainjob-controller",
                "initializer": {"dataset": {"storageUri": "hf://x/y", "env": [{"name": "A", "value": "1"}]}},
                "trainer": {
                    "image": "pytorch/pytorch:2.7.1",
                    "numNodes": 2,
                    "command": ["torchrun"],
                    "env": [{"name": "A", "value": "1"}],
                    "resourcesPerNode": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": 1}},
                },
            },
        },
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainingRuntime",
            "metadata": meta,
            "spec": _runtime_spec(),
        },
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "ClusterTrainingRuntime",
            "metadata": {k: v for k, v in meta.items() if k != "namespace"},
            "spec": _runtime_spec(),
        },
        {"apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": "AIPerfJob", "metadata": meta, "spec": {"image": "x"}},
        {"apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": "AIPerfSweep", "metadata": meta, "spec": {"a": [1]}},
    ]


# ---- the mutations ------------------------------------------------------------------------------------------

Path = tuple[str | int, ...]


def _get(obj: Any, path: Path) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def _with(obj: dict[str, Any], path: Path, value: Any = None, delete: bool = False) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    parent = _get(out, path[:-1])
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, (int, float)):
        return "five"
    if isinstance(value, str):
        return 5
    if isinstance(value, list):
        return {"x": 1}
    return "text"


def _walk(obj: Any, x: Any, s: dict[str, Any], path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(what, mutated object) for each node of `x` (the value at `path` of `obj`) and schema `s`."""
    where = ".".join(str(p) for p in path)
    if path and path[-1] != "metadata":
        yield f"{where}: wrong type", _with(obj, path, _wrong(x))
    if path and path[-1] != "metadata" and isinstance(x, (int, str)) and not isinstance(x, bool):
        yield f"{where}: null", _with(obj, path, None)
    if isinstance(x, int) and not isinstance(x, bool):
        yield f"{where}: a float", _with(obj, path, x + 0.5)
        yield f"{where}: an integral float", _with(obj, path, float(x))
    if "enum" in s:
        yield f"{where}: not in enum", _with(obj, path, "Bogus")
    if "pattern" in s and isinstance(x, str):
        yield f"{where}: pattern", _with(obj, path, "!!not valid!!")
    if "maxLength" in s:
        yield f"{where}: too long", _with(obj, path, "a" * (s["maxLength"] + 1))
    if "minimum" in s and isinstance(x, int):
        yield f"{where}: below minimum", _with(obj, path, int(s["minimum"]) - 1)
    if isinstance(x, dict):
        props = s.get("properties") or {}
        if props and not s.get("x-kubernetes-preserve-unknown-fields") and path[-1:] != ("metadata",):
            yield f"{where}: unknown field", _with(obj, (*path, "bogusField"), 1)
        for k in s.get("required") or []:
            if k in x:
                yield f"{where}.{k}: required removed", _with(obj, (*path, k), delete=True)
        for k, v in x.items():
            if not path and k in ("apiVersion", "kind", "metadata"):
                continue  # the request's own identity; metadata is mutated by _rule_breakers
            child = props.get(k) or (
                s["additionalProperties"] if isinstance(s.get("additionalProperties"), dict) else None
            )
            if child is not None:
                yield from _walk(obj, v, child, (*path, k))
    elif isinstance(x, list) and isinstance(s.get("items"), dict):
        if s.get("x-kubernetes-list-type") in ("map", "set") and x:
            yield f"{where}: duplicate", _with(obj, path, [*x, copy.deepcopy(x[0])])
        for i, v in enumerate(x):
            yield from _walk(obj, v, s["items"], (*path, i))


def _rule_breakers(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """x-kubernetes-validations rules broken on purpose, and ObjectMeta mistakes."""
    kind = obj["kind"]
    yield "metadata.name: not a DNS subdomain", _with(obj, ("metadata", "name"), "Bad_Name")
    yield "metadata.labels: bad key", _with(obj, ("metadata", "labels"), {"a b": "x"})
    yield "metadata.labels: bad value", _with(obj, ("metadata", "labels"), {"a": "-x-"})
    yield "metadata.foo: unknown", _with(obj, ("metadata", "foo"), 1)
    yield "metadata.labels: value too long", _with(obj, ("metadata", "labels"), {"a": "v" * 64})
    yield (
        "metadata: generateName only",
        _with(obj, ("metadata", "name"), delete=True)
        | {"metadata": {**{k: v for k, v in obj["metadata"].items() if k != "name"}, "generateName": "gen-"}},
    )
    yield "metadata: no name", _with(obj, ("metadata", "name"), delete=True)
    yield "metadata.name: too long", _with(obj, ("metadata", "name"), "a" * 254)
    for key in ("a" * 64, "a/b/c", "a" * 254 + "/b", "/b", "Ab.com/b", "example.com/"):
        yield f"metadata.labels: key {key[:12]}", _with(obj, ("metadata", "labels"), {key: "x"})
    yield "metadata.annotations: bad key", _with(obj, ("metadata", "annotations"), {"a b": "x"})
    if kind == "TrainJob":
        yield "managedBy rule", _with(obj, ("spec", "managedBy"), "someone/else")
        yield "storageUri rule", _with(obj, ("spec", "initializer", "dataset", "storageUri"), "no-scheme")
        yield "name rule (dots)", _with(obj, ("metadata", "name"), "a.b")
        yield "unknown and type", _with(_with(obj, ("spec", "trainr"), {}), ("spec", "suspend"), "yes")
    if kind == "JobSet":
        dep = _with(obj, ("spec", "startupPolicy", "startupPolicyOrder"), "InOrder")
        yield (
            "startupPolicy rule",
            _with(dep, ("spec", "replicatedJobs", 0, "dependsOn"), [{"name": "x", "status": "Ready"}]),
        )
        yield "rule and type", _with(dep, ("spec", "replicatedJobs", 0, "replicas"), "2")
        yield "int32 overflow", _with(obj, ("spec", "replicatedJobs", 0, "replicas"), 2**40)
    if kind in ("TrainingRuntime", "ClusterTrainingRuntime"):
        yield "one policy rule", _with(obj, ("spec", "mlPolicy", "mpi"), {})


def cases() -> list[tuple[str, dict[str, Any]]]:
    schemas = _data()
    out: list[tuple[str, dict[str, Any]]] = []
    for obj in valid_objects():
        out.append((f"{obj['kind']}: valid", obj))
        entry = schemas["kinds"][f"{obj['apiVersion']}/{obj['kind']}"]
        walked = list(_walk(obj, obj, schemas["schemas"][entry["schema"]], ()))
        step = max(1, len(walked) // PER_KIND)
        out += [(f"{obj['kind']} {what}", o) for what, o in walked[::step]]
        out += [(f"{obj['kind']} {what}", o) for what, o in _rule_breakers(obj)]
    return out


# ---- the apiserver's answer ---------------------------------------------------------------------------------


def dry_run_create(cp: ControlPlane, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    group_version = obj["apiVersion"]
    plural = PLURALS[obj["kind"]]
    ns = "" if obj["kind"] == "ClusterTrainingRuntime" else f"/namespaces/{NS}"
    url = f"{cp.server_url}/apis/{group_version}{ns}/{plural}?dryRun=All&fieldValidation=Strict"
    req = urllib.request.Request(
        url, data=json.dumps(obj).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30, context=cp._admin_ssl()) as r:  # the harness' admin client
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def apiserver_findings(code: int, status: dict[str, Any]) -> tuple[str, Counter[tuple[str, str, str]]]:
    if code in (200, 201):
        return "accepted", Counter()
    if code == 400:
        return "decoding", Counter({("", "", status.get("message", "")): 1})
    assert code == 422, (code, status)
    causes = (status.get("details") or {}).get("causes") or []
    return "invalid", Counter((c.get("field", ""), c.get("reason", ""), c.get("message", "")) for c in causes)


def our_findings(obj: dict[str, Any]) -> tuple[str, Counter[tuple[str, str, str]], list[str]]:
    verdict = validate(obj)
    assert verdict is not None
    if verdict.unknown:
        return "decoding", Counter({("", "", verdict.decoding_error()): 1}), verdict.not_evaluated
    if not verdict.errors:
        return "accepted", Counter(), verdict.not_evaluated
    return "invalid", Counter((e.path, e.reason, e.body) for e in verdict.errors), verdict.not_evaluated


def test_offline_schema_validation_answers_as_kube_apiserver(control_plane: ControlPlane) -> None:
    """Each generated object: the same outcome, and the same (field, reason, message) findings, as the real
    apiserver's dry-run create with fieldValidation=Strict. Rules the project cannot evaluate would be named in
    not_evaluated; the CRDs installed here have none (asserted, so a new one is noticed)."""
    all_cases = cases()
    mismatches: list[str] = []
    outcomes: Counter[str] = Counter()
    not_evaluated: set[str] = set()
    for what, obj in all_cases:
        code, status = dry_run_create(control_plane, obj)
        theirs_kind, theirs = apiserver_findings(code, status)
        ours_kind, ours, skipped_rules = our_findings(obj)
        not_evaluated.update(skipped_rules)
        outcomes[theirs_kind] += 1
        if (theirs_kind, theirs) != (ours_kind, ours):
            mismatches.append(
                f"{what}:\n  apiserver {theirs_kind}: {sorted(theirs.elements())}\n"
                f"  ours      {ours_kind}: {sorted(ours.elements())}"
            )
    assert outcomes["accepted"] >= 6 and outcomes["invalid"] > 50 and outcomes["decoding"] > 20, outcomes
    assert not mismatches, f"{len(mismatches)} of {len(all_cases)} differ:\n" + "\n".join(mismatches[:30])
    assert not not_evaluated, sorted(not_evaluated)


def test_the_valid_objects_are_accepted(control_plane: ControlPlane) -> None:
    """The mutations start from objects the apiserver accepts, so each finding is the mutation's."""
    for obj in valid_objects():
        code, status = dry_run_create(control_plane, obj)
        assert code in (200, 201), (obj["kind"], status.get("message"))
        assert validate(obj) is not None and validate(obj).ok  # type: ignore[union-attr]


def test_the_vendored_schemas_are_the_crds_the_harness_installs(control_plane: ControlPlane) -> None:
    """webhook/schema/crds_data.py is what scripts/gen_crd_schemas.py makes of the CRDs this control plane has
    (e2e/build.sh's cache and e2e/crds): a bump of e2e/versions.env without regenerating it fails here."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [sys.executable, str(root / "scripts" / "gen_crd_schemas.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
