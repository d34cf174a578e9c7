"""The real-node smoke of `make test` (issue 34): the product as users install and meet it, once.

One node for the module (e2e/harness/node.py). On it, as `make demo-cluster` does
(e2e/harness/demo_cluster.py) and through the same code (e2e/harness/oci_install.py):
scripts/release.sh pushes our image and the `helm package`d chart to a registry on the node's
bridge (e2e/harness/registry.py: TLS of its own CA, htpasswd), `helm install oci://…` installs the
chart with its default values (only the pull Secret set), and containerd pulls the image from that
registry. Then, through `kubectl` against the node's apiserver, for each judged kind (TrainJob,
AIPerfJob, AIPerfSweep, and a JobSet applied directly) a good job is created and a broken one is
denied with the webhook's own text; and a suspended TrainJob whose Secret is deleted after its
admission gets the audit controller's PreflightFailed Event, written by the chart's audit pod.

No job controller runs on this node (no Stack): a created job stays as it is, which is what a
verdict needs; the sample ClusterTrainingRuntime (e2e/samples/01-clustertrainingruntime.yaml)
is the runtime the TrainJobs are judged on. What runs a job to its outcome lives in
`make conformance` (e2e/tiers.py): e2e/test_install_from_registry.py (registryCA, Image Pull
through the registry) and e2e/test_node_chart.py (rotation, upgrades, leader election).

Marked ``node``.
"""

from __future__ import annotations

import copy
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import trustme
import yaml

from e2e.fidelity.scenarios_base import jobset, secret_env
from e2e.harness.audit import preflight_events_now, suspended_trainjob
from e2e.harness.controlplane import ControlPlane
from e2e.harness.node import CHART_NAMESPACE, CHART_RELEASE, SAMPLES_DIR, Node, poll_until
from e2e.harness.oci_install import Published, install, publish
from e2e.harness.registry import Registry
from webhook.audit.events import COMPONENT, FAILED

pytestmark = pytest.mark.node

USER, PASSWORD = "smoke", "smoke-e2e-5b19e0"
VERSION = "0.0.0-smoke.1"
NS = CHART_NAMESPACE
HOOK = "validate.preflight.webhook.io"
JOBSET_HOOK = "validate-jobsets.preflight.webhook.io"
TRAIN_NS, BENCH_NS = "demo-train", "demo-bench"  # the samples' namespaces (00-prerequisites.yaml)


@dataclass
class Installed:
    node: Node
    cp: ControlPlane
    published: Published

    def apply(self, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return self.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj, sort_keys=False), check=False)

    def stored(self, obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        kind = f"{obj['kind'].lower()}.{obj['apiVersion'].split('/')[0]}"
        return self.cp.kubectl("get", kind, meta["name"], "-n", meta["namespace"], check=False).returncode == 0


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The node started, the samples' prerequisites applied (their namespaces exist before the install,
    so the chart's default RBAC grants them), our image and chart released to the registry on the
    node's bridge, `helm install oci://…` from it, until the apiserver calls the webhook's pods.

    About 1 min warm, 4-5 min when the source changed (our image is rebuilt from the Dockerfile: its tag
    hashes the source); over 60 s because the product is judged as users install it: a real node, the
    released image pulled by containerd, the chart's pods serving the apiserver."""
    node = Node(start_timeout=180)
    node.start()
    try:
        assert node.cp is not None
        cp = node.cp
        ca = trustme.CA()
        with Registry(tmp_path_factory.mktemp("registry"), ca, {USER: PASSWORD}, host=node.bridge_ip) as reg:
            cp.apply_samples_prerequisites(SAMPLES_DIR)
            t0 = time.monotonic()
            published = publish(node, reg, USER, PASSWORD, VERSION)
            print(f"==> scripts/release.sh (image + chart pushed): {time.monotonic() - t0:.0f}s")
            t0 = time.monotonic()
            install(node, reg, published, USER, PASSWORD)

            def answers() -> bool | str:
                proc = cp.kubectl(
                    "apply", "--dry-run=server", "-f", str(SAMPLES_DIR / "trainjob-good.yaml"), check=False
                )
                return True if proc.returncode == 0 else proc.stderr.strip()[-300:]

            poll_until("the apiserver calling the webhook through its Service", answers, 180)
            print(f"==> helm install oci://… to the webhook answering: {time.monotonic() - t0:.0f}s")
            yield Installed(node, cp, published)
    finally:
        left = node.stop()
        assert left == [], left


def test_the_chart_from_the_registry_runs_the_image_containerd_pulled_from_it(installed: Installed) -> None:
    """The release helm installed is the chart pushed to the registry, and every pod of it (the two
    webhook pods, the certificate pod, the audit pod) is ready on the image the chart names by digest,
    which the kubelet pulled from that registry (nothing was loaded into containerd beforehand)."""
    cp, published = installed.cp, installed.published
    listed = json.loads(installed.node.helm("list", "-n", NS, "-o", "json").stdout)
    assert [(r["name"], r["chart"], r["status"]) for r in listed] == [
        (CHART_RELEASE, f"preflight-webhook-{VERSION}", "deployed")
    ]
    pods = json.loads(cp.kubectl("get", "pods", "-n", NS, "-o", "json").stdout)["items"]
    components = sorted(p["metadata"]["labels"].get("app.kubernetes.io/component", "") for p in pods)
    assert components == ["audit", "certs", "webhook", "webhook"], components
    for pod in pods:
        (c,) = pod["spec"]["containers"]
        assert c["image"] == published.image
        (st,) = pod["status"]["containerStatuses"]
        assert st["ready"] is True and st["imageID"].endswith(published.digest), st
    events = json.loads(cp.kubectl("get", "events", "-n", NS, "-o", "json").stdout)["items"]
    pulled = [e["message"] for e in events if e.get("reason") == "Pulled"]
    assert any(m.startswith(f'Successfully pulled image "{published.image}"') for m in pulled), pulled


# --------------------------------------------------------------------------- a good and a broken job of each kind


def _sample(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((SAMPLES_DIR / name).read_text())
    return obj


def _aiperf(sample: str, name: str, pod_template: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sample AIPerfJob/AIPerfSweep with ``resourceMode: none``: AIPerf sizes a worker pod at 3350m
    CPU otherwise, which no pod of this 2-CPU node can hold (Per-Node Schedulability would deny)."""
    obj = _sample(sample)
    obj["metadata"]["name"] = name
    obj["spec"]["resourceMode"] = "none"
    if pod_template is not None:
        obj["spec"]["podTemplate"] = pod_template
    return obj


#: a Secret mounted in every pod of the job, which does not exist
MOUNTED = {
    "volumes": [{"name": "creds", "secret": {"secretName": "bench-creds"}}],
    "volumeMounts": [{"name": "creds", "mountPath": "/creds", "readOnly": True}],
}
IMAGE = "ghcr.io/acme/mnist-ft:1.0.0"


def _jobset(name: str, secret: str) -> dict[str, Any]:
    return jobset(name, TRAIN_NS, {"name": "trainer", "image": IMAGE, "env": [secret_env("HF_TOKEN", secret, "token")]})


#: kind → (hook, good job, broken job, the broken job's denial: the header's subject and its one failure)
CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any], str, str]] = {
    "TrainJob": (
        HOOK,
        _sample("trainjob-good.yaml"),
        _sample("trainjob-broken.yaml"),
        f'TrainJob "mnist-ft-typo" in namespace "{TRAIN_NS}"',
        f'[Secrets] Secret "hf-token" in namespace "{TRAIN_NS}" has no key "hf_token" (referenced by env HF_TOKEN of '
        f"container node). Fix: kubectl patch secret hf-token -n {TRAIN_NS} --type merge -p "
        '\'{"stringData":{"hf_token":"…"}}\'',
    ),
    "AIPerfJob": (
        HOOK,
        _aiperf("aiperfjob-good.yaml", "llama-bench"),
        _aiperf("aiperfjob-good.yaml", "llama-bench-creds", MOUNTED),
        f'AIPerfJob "llama-bench-creds" in namespace "{BENCH_NS}"',
        f'[Secrets] Secret "bench-creds" not found in namespace "{BENCH_NS}" (referenced by volume creds of the '
        f"controller, workers pods). Fix: kubectl create secret generic bench-creds -n {BENCH_NS} "
        "--from-literal=<key>=…",
    ),
    "AIPerfSweep": (
        HOOK,
        _aiperf("aiperfsweep-good.yaml", "llama-grid"),
        _aiperf("aiperfsweep-good.yaml", "llama-grid-creds", MOUNTED),
        f'AIPerfSweep "llama-grid-creds" in namespace "{BENCH_NS}"',
        f'[Secrets] Secret "bench-creds" not found in namespace "{BENCH_NS}" (referenced by volume creds of the '
        f"v02-controller, v02-workers pods). Fix: kubectl create secret generic bench-creds -n {BENCH_NS} "
        "--from-literal=<key>=…",
    ),
    "JobSet": (
        JOBSET_HOOK,
        _jobset("ddp", "hf-token"),
        _jobset("ddp-rotated", "hf-token-rotated"),
        f'JobSet "ddp-rotated" in namespace "{TRAIN_NS}"',
        f'[Secrets] Secret "hf-token-rotated" not found in namespace "{TRAIN_NS}" (referenced by env HF_TOKEN of '
        f"container trainer). Fix: kubectl create secret generic hf-token-rotated -n {TRAIN_NS} "
        "--from-literal=token=…",
    ),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_good_job_is_created_and_a_broken_one_denied_with_the_fix(installed: Installed, kind: str) -> None:
    """Through kubectl and the chart's webhook (the JobSet through its second hook): the good job is
    created and stored; the broken one (a missing Secret or key) is refused, not stored, with the
    webhook's denial: its subject, exactly one failed check, and that check's line with its fix."""
    hook, good, broken, subject, line = CASES[kind]
    created = installed.apply(copy.deepcopy(good))
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip().endswith(f"/{good['metadata']['name']} created"), created.stdout
    assert installed.stored(good)

    denied = installed.apply(copy.deepcopy(broken))
    assert denied.returncode != 0
    assert f'admission webhook "{hook}" denied the request: {subject} failed 1 preflight check:' in denied.stderr, (
        denied.stderr
    )
    assert line in denied.stderr.splitlines(), denied.stderr
    assert not installed.stored(broken)


# --------------------------------------------------------------------------- the audit controller's Event

AUDIT_JOB, AUDIT_SECRET = "waiting-ft", "smoke-token"


def test_a_waiting_job_whose_secret_goes_gets_the_audit_pods_preflight_failed_event(installed: Installed) -> None:
    """A suspended TrainJob (it waits: the audit controller judges it) is admitted while its Secret
    exists; the Secret is then deleted, and the chart's audit pod writes a PreflightFailed Warning
    Event on the job naming the missing Secret and the fix (the webhook's own line), as `kubectl
    describe` shows it. Polled with a deadline: the audit pod may still be taking its Lease."""
    cp = installed.cp
    cp.kubectl("create", "secret", "generic", AUDIT_SECRET, "-n", TRAIN_NS, "--from-literal=token=not-logged")
    job = suspended_trainjob(
        AUDIT_JOB, TRAIN_NS, "torch-distributed", "100m", env=[secret_env("TOKEN", AUDIT_SECRET, "token")]
    )
    admitted = installed.apply(job)
    assert admitted.returncode == 0, admitted.stderr
    cp.kubectl("delete", "secret", AUDIT_SECRET, "-n", TRAIN_NS)

    def failed() -> bool | str:
        got = preflight_events_now(cp, TRAIN_NS, AUDIT_JOB)
        return True if got else "no PreflightFailed/PreflightPassed Event on the job yet"

    poll_until("the audit controller's PreflightFailed Event", failed, 180)
    (ev,) = preflight_events_now(cp, TRAIN_NS, AUDIT_JOB)
    uid = json.loads(cp.kubectl("get", "trainjob", AUDIT_JOB, "-n", TRAIN_NS, "-o", "json").stdout)["metadata"]["uid"]
    assert (ev["reason"], ev["type"], ev["reportingComponent"]) == (FAILED, "Warning", COMPONENT)
    assert ev["involvedObject"]["uid"] == uid
    assert ev["message"] == (
        f'TrainJob "{AUDIT_JOB}" in namespace "{TRAIN_NS}" failed 1 preflight check:\n'
        f'[Secrets] Secret "{AUDIT_SECRET}" not found in namespace "{TRAIN_NS}" (referenced by env TOKEN of '
        f"container node). Fix: kubectl create secret generic {AUDIT_SECRET} -n {TRAIN_NS} --from-literal=token=…"
    )
    audit_pods = json.loads(
        cp.kubectl("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=audit", "-o", "json").stdout
    )["items"]
    assert ev["reportingInstance"] in {p["metadata"]["name"] for p in audit_pods}
    assert "not-logged" not in json.dumps(ev)
    described = cp.kubectl("describe", "trainjob", AUDIT_JOB, "-n", TRAIN_NS).stdout
    assert FAILED in described and f'Secret "{AUDIT_SECRET}" not found' in described
