"""The pods as admission creates them: the diff of a dry-run Pod and its answer, the judged spec, and the
engine judging the pods as admitted (webhook/workloads/admitted.py, webhook/engine.py judge_admitted)."""

from __future__ import annotations

import copy
from typing import Any

from tests.fakeview import FakeView, container, meta, pod, workload
from webhook.checks.dryrun import DryRun
from webhook.checks.nodes import NodeSelectorMatch
from webhook.checks.quotas import ResourceQuotas
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.engine import ADMITTED, UNSEEN, run_checks
from webhook.results import PreflightResults, Status
from webhook.workloads.admitted import Change, admitted_group, changes, judged_spec
from webhook.workloads.base import PodGroup

SA_VOLUME = {
    "name": "kube-api-access-x7k2p",
    "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
}
SA_MOUNT = {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
DEFAULT_TOLERATIONS = [
    {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
]


def _sent(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "train"}},
        "spec": {"containers": [container("main", {"cpu": "250m"})], "restartPolicy": "Never", **spec},
    }


def _defaulted(sent: dict[str, Any]) -> dict[str, Any]:
    """What the apiserver adds to every pod (v1 defaults, ServiceAccount, DefaultTolerationSeconds, Priority)."""
    out = copy.deepcopy(sent)
    spec = out["spec"]
    spec.update(
        dnsPolicy="ClusterFirst", terminationGracePeriodSeconds=30, schedulerName="default-scheduler",
        securityContext={}, serviceAccountName="default", serviceAccount="default", enableServiceLinks=True,
        priority=0, preemptionPolicy="PreemptLowerPriority",
    )  # fmt: skip
    spec["tolerations"] = [*spec.get("tolerations", []), *DEFAULT_TOLERATIONS]
    spec["volumes"] = [*spec.get("volumes", []), SA_VOLUME]
    for c in spec["containers"]:
        c.update(terminationMessagePath="/dev/termination-log", imagePullPolicy="IfNotPresent")
        c["volumeMounts"] = [*c.get("volumeMounts", []), SA_MOUNT]
    out["status"] = {"phase": "Pending"}
    return out


def test_what_the_apiserver_adds_to_every_pod_is_no_change() -> None:
    sent = _sent(containers=[container("main", limits={"cpu": "1"})])
    got = _defaulted(sent)
    got["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1"}  # requests default to limits
    assert changes(sent, got) == []


def test_what_admission_changed_is_named_field_by_field() -> None:
    sent = _sent()
    got = _defaulted(sent)
    main = got["spec"]["containers"][0]
    main["resources"]["limits"] = {"cpu": "500m"}
    main["image"] = "mirror.acme.io/acme/x:1"
    got["spec"]["containers"].append(container("sidecar", {"cpu": "1", "memory": "64Mi"}))
    got["spec"]["nodeSelector"] = {"pool": "h100"}
    got["spec"]["tolerations"].append({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"})
    got["metadata"]["labels"]["team"] = "ml"
    assert [c.text for c in changes(sent, got)] == [
        "label team=ml added",
        'image of container "main" rewritten to "mirror.acme.io/acme/x:1"',
        'limits.cpu 500m on container "main"',
        'container "sidecar" added (requests cpu 1, memory 64Mi)',
        "nodeSelector pool=h100 added",
        "toleration gpu:NoSchedule added",
    ]
    assert {c.by for c in changes(sent, got)} == {"admission"}


def test_a_limit_range_default_is_named_as_its_layer() -> None:
    sent = _sent()
    got = _defaulted(sent)
    got["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "500m", "memory": "1Gi"}
    lr = {
        "metadata": meta("defaults", "team-a"),
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "0.5"}}]},
    }
    assert changes(sent, got, [lr]) == [
        Change(
            "spec.containers[main].resources.limits.cpu", 'limits.cpu 500m on container "main"', 'LimitRange "defaults"'
        ),
        Change("spec.containers[main].resources.limits.memory", 'limits.memory 1Gi on container "main"', "admission"),
    ]


def test_the_judged_spec_is_the_admitted_one_without_the_apiservers_own_additions() -> None:
    template = pod(container("main", {"cpu": "250m"}), restartPolicy="Never")
    sent = _sent(hostname="llama-ft-node-0-0")
    sent["spec"]["containers"][0]["env"] = [{"name": "JOB_COMPLETION_INDEX", "value": "0"}]
    got = _defaulted(sent)
    got["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "500m"}
    spec = judged_spec(sent, got, template)
    assert "hostname" not in spec and "tolerations" not in spec and spec["volumes"] == []
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}}
    assert "volumeMounts" not in spec["containers"][0] and "env" not in spec["containers"][0]
    group = PodGroup("node", 2, template, pod_metadata={"labels": {"app": "train"}})
    got["metadata"]["labels"]["team"] = "ml"
    a = admitted_group(group, sent, got)
    assert a.metadata == {"labels": {"app": "train", "team": "ml"}}
    unchanged = admitted_group(group, sent, _defaulted(sent))
    assert (unchanged.spec, unchanged.changes) == (template, [])


# --- the engine judges the pods as admitted ---


def _gang(requests: dict[str, str], pods: int = 2, **spec: Any) -> Any:
    js = {"metadata": {"name": "llama-ft"}, "spec": {"replicatedJobs": [{"name": "node", "replicas": 1}]}}
    return workload([PodGroup("node", pods, pod(container("node", requests), **spec))], derived={"jobSet": js})


def _view(objects: dict[str, Any], **kw: Any) -> FakeView:
    return FakeView(objects, served={"v1", "batch/v1", "jobset.x-k8s.io/v1alpha2"}, **kw)


def _quota(hard: dict[str, str]) -> dict[str, Any]:
    return {"metadata": meta("team-quota", "team-a"), "spec": {"hard": hard}, "status": {"hard": hard, "used": {}}}


def _admits(change: Any) -> Any:
    """A mutating layer: `change(pod)` on every Pod dry-run, the apiserver's own defaults on top."""

    def admit(kind: str, body: dict[str, Any]) -> dict[str, Any] | None:
        if kind != "Pod":
            return None
        change(body)
        return _defaulted(body)

    return admit


async def _run(
    wl: Any, view: FakeView | None, checks: list[Any] | None = None, budget: float = 5.0
) -> PreflightResults:
    checks = checks or [ResourceQuotas(), NodeSelectorMatch(), DryRun()]
    return await run_checks(wl, checks, settings=Settings(), deadline=Deadline(budget), view=view)


def _by(results: PreflightResults, name: str) -> Any:
    (r,) = [r for r in results.checks if r.name == name]
    return r


def _fill_limits(body: dict[str, Any]) -> None:
    for c in body["spec"]["containers"]:
        c.setdefault("resources", {}).setdefault("limits", {}).update({"cpu": "500m", "memory": "1Gi"})


async def test_limits_filled_by_admission_under_a_limits_quota_are_admitted() -> None:
    view = _view({"resourcequotas": [_quota({"limits.cpu": "4", "limits.memory": "8Gi"})]})
    wl = _gang({"cpu": "250m", "memory": "512Mi"})
    denied = await _run(wl, view)  # the dry run does not say what admission makes of the pods: as before
    assert _by(denied, "Resource Quotas").status is Status.FAIL

    view = _view({"resourcequotas": [_quota({"limits.cpu": "4", "limits.memory": "8Gi"})]})  # its own dry-run cache
    view.admit = _admits(_fill_limits)
    got = await _run(wl, view)
    quotas, dry = _by(got, "Resource Quotas"), _by(got, "Dry Run")
    assert (quotas.status, quotas.message) == (
        Status.PASS,
        'The job fits 1 ResourceQuota in namespace "team-a": team-quota',
    )
    assert dry.status is Status.PASS
    assert dry.details[-1] == (
        "Admission changes the pods, and the other checks judged them as admitted: the node pods: "
        'limits.cpu 500m on container "node", set by admission; limits.memory 1Gi on container "node", set by admission'
    )
    assert wl.pod_groups[0].pod_spec["containers"][0]["resources"] == {"requests": {"cpu": "250m", "memory": "512Mi"}}


async def test_a_sidecar_added_by_admission_that_pushes_the_gang_over_a_quota_denies_and_says_so() -> None:
    view = _view({"resourcequotas": [_quota({"requests.cpu": "2"})]})

    def sidecar(body: dict[str, Any]) -> None:
        body["spec"]["containers"].append(container("proxy", {"cpu": "500m"}))

    view.admit = _admits(sidecar)
    got = await _run(_gang({"cpu": "750m"}), view)
    quotas = _by(got, "Resource Quotas")
    assert quotas.status is Status.FAIL
    assert quotas.message == (
        'ResourceQuota "team-quota": requests.cpu would be 2500m (used 0 + job 2500m) but hard is 2. Fix: raise hard '
        "requests.cpu to at least 2500m (kubectl edit resourcequota team-quota -n team-a), or reduce the job's pods or "
        f'requests. {ADMITTED}: the node pods: container "proxy" added (requests cpu 500m), set by admission.'
    )


async def test_a_node_selector_added_by_admission_that_no_node_matches_denies() -> None:
    node = {"metadata": meta("cpu-1", labels={"pool": "cpu"}), "spec": {}, "status": {"allocatable": {"cpu": "8"}}}
    view = _view({"nodes": [node]})
    view.admit = _admits(lambda body: body["spec"].setdefault("nodeSelector", {}).update({"pool": "h100"}))
    got = await _run(_gang({"cpu": "1"}), view)
    sel = _by(got, "Node Selector Match")
    assert sel.status is Status.FAIL
    assert sel.message.startswith("No node matches nodeSelector {pool=h100} of the node pods (0 of 1 node)")
    assert sel.message.endswith(f"{ADMITTED}: the node pods: nodeSelector pool=h100 added, set by admission.")


async def test_offline_the_verdict_says_once_it_did_not_see_admission() -> None:
    got = await _run(_gang({"cpu": "1"}), None, [DryRun()])
    dry = _by(got, "Dry Run")
    assert dry.status is Status.SKIP
    assert dry.details == [f"{UNSEEN}: Skipped: needs a cluster (running offline)"]


async def test_a_refused_pod_is_judged_as_written_and_said_once() -> None:
    from webhook.cluster.view import ApiError

    view = _view(
        {"resourcequotas": [_quota({"limits.cpu": "4"})]},
        dry_run_errors={("Pod", "*"): ApiError(403, 'admission webhook "x" denied the request: no')},
    )
    view.admit = _admits(_fill_limits)
    got = await _run(_gang({"cpu": "1"}), view)
    assert _by(got, "Resource Quotas").status is Status.FAIL  # the template: no limits
    dry = _by(got, "Dry Run")
    assert dry.details[-1] == f"{UNSEEN}: the node pods (their dry run was not accepted)"


async def test_the_audit_controller_reusing_a_dry_run_judges_the_pods_as_admitted_as_that_run_did() -> None:
    """webhook/audit/passes.py: a kept Dry Run (`Remembered`) gives its admission back to the engine, so a scan
    that sends no dry run does not fall back to the templates (a false deny one scan out of two)."""
    from webhook.audit.passes import Remembered, Tracked, admission_of, shared_results

    quota = {"resourcequotas": [_quota({"limits.cpu": "4", "limits.memory": "8Gi"})]}
    view = _view(quota)
    view.admit = _admits(_fill_limits)
    wl = _gang({"cpu": "250m", "memory": "512Mi"})
    ran: dict[str, Any] = {}
    first = await _run(wl, view, [ResourceQuotas(), Tracked(DryRun(), ran)])
    assert _by(first, "Resource Quotas").status is Status.PASS

    quiet = _view(quota)  # would answer nothing of admission: the kept answer must be used
    kept = ran["Dry Run"]  # as the controller keeps it: the shared results, the admission beside them
    assert admission_of(kept) is not None
    remembered = Remembered(DryRun(), shared_results(kept), admission_of(kept))
    again = await _run(wl, quiet, [ResourceQuotas(), remembered])
    assert quiet.dry_runs == []
    assert _by(again, "Resource Quotas").status is Status.PASS
    assert _by(again, "Dry Run").details == _by(first, "Dry Run").details


async def test_a_secret_env_added_by_admission_is_required_like_the_templates_own() -> None:
    from webhook.checks.secrets import Secrets

    def secret_env(body: dict[str, Any]) -> None:
        ref = {"secretKeyRef": {"name": "e2e-token", "key": "token"}}
        for c in body["spec"]["containers"]:
            c.setdefault("env", []).append({"name": "TOKEN", "valueFrom": ref})

    view = _view({})
    view.admit = _admits(secret_env)
    got = await _run(_gang({"cpu": "1"}), view, [Secrets(), DryRun()])
    secrets = _by(got, "Secrets")
    assert (secrets.status, secrets.message) == (
        Status.FAIL,
        'Secret "e2e-token" not found in namespace "team-a" (referenced by env TOKEN of container node). Fix: kubectl '
        f'create secret generic e2e-token -n team-a --from-literal=token=… {ADMITTED}: the node pods: env "TOKEN" added '
        'to container "node", set by admission.',
    )


def _jobset_doc() -> dict[str, Any]:
    spec = {"restartPolicy": "Never", "containers": [container("node", {"cpu": "250m"})]}
    job = {"parallelism": 2, "completions": 2, "template": {"spec": spec}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "plan-job", "namespace": "team-a"},
        "spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": job}}]},
    }


async def test_plan_against_a_cluster_lists_what_admission_changes_or_why_it_was_not_seen() -> None:
    """`plan --cluster` (webhook/cli/plan.py admission): per pod group, or the one reason."""
    from webhook.cli.plan import admission
    from webhook.cluster.view import ApiError

    view = _view({})
    view.admit = _admits(_fill_limits)
    assert await admission(_jobset_doc(), view, Settings(), 5.0) == {
        "changed": {
            "node": [
                'limits.cpu 500m on container "node", set by admission',
                'limits.memory 1Gi on container "node", set by admission',
            ]
        },
        "unseen": None,
    }
    assert await admission(_jobset_doc(), _view({}), Settings(), 5.0) == {"changed": {}, "unseen": None}
    refused = _view({}, dry_run_errors={("Pod", "*"): ApiError(403, 'admission webhook "x" denied the request: no')})
    assert await admission(_jobset_doc(), refused, Settings(), 5.0) == {
        "changed": {},
        "unseen": "the node pods (their dry run was not accepted)",
    }


# --- the layer, where the apiserver's answer names it: its Warning headers ---

#: what Kyverno says of a mutate rule it applied with emitWarning (kyverno pkg/webhooks/utils/warning.go)
KYVERNO_SAID = "policy add-sidecar.proxy: mutated Pod/llama-ft-node-0-0-dryrn in namespace team-a"


def test_the_warning_headers_are_read_as_the_apiserver_writes_them() -> None:
    """k8s.io/apimachinery pkg/util/net/http.go NewWarningHeader: `299 - "<text>"`, `"` and `\\` escaped."""
    from webhook.kube import warning_texts

    headers = [f'299 - "{KYVERNO_SAID}"', '299 - "a \\"quoted\\" \\\\ word"', f'299 - "{KYVERNO_SAID}"', "not a header"]
    assert warning_texts(headers) == (KYVERNO_SAID, 'a "quoted" \\ word', "not a header")


async def test_a_layer_that_names_itself_in_a_warning_is_listed_after_the_changes() -> None:
    from webhook.cli.plan import admission
    from webhook.kube import WARNINGS_KEY

    view = _view({})

    def sidecar_said(kind: str, body: dict[str, Any]) -> dict[str, Any] | None:
        if kind != "Pod":
            return None
        body["spec"]["containers"].append(container("proxy", {"cpu": "500m"}))
        return {**_defaulted(body), WARNINGS_KEY: [KYVERNO_SAID]}

    view.admit = sidecar_said
    assert await admission(_jobset_doc(), view, Settings(), 5.0) == {
        "changed": {
            "node": [
                'container "proxy" added (requests cpu 500m), set by admission',
                f'the dry run warned: "{KYVERNO_SAID}"',
            ]
        },
        "unseen": None,
    }
    # warnings on a pod admission did not change: nothing changed, nothing listed
    view = _view({})
    view.admit = lambda kind, body: {**_defaulted(body), WARNINGS_KEY: ["x"]} if kind == "Pod" else None
    assert await admission(_jobset_doc(), view, Settings(), 5.0) == {"changed": {}, "unseen": None}


async def test_a_refusal_says_what_the_layers_before_it_warned() -> None:
    """A pod refused after a mutating layer (a quota over the sidecar): the refusal quotes that layer's warning."""
    from webhook.cluster.view import ApiError

    refused = ApiError(403, "exceeded quota: q, requested: requests.cpu=600m", "Forbidden", (KYVERNO_SAID,))
    got = await _run(_gang({"cpu": "100m"}), _view({}, dry_run_errors={("Pod", "*"): refused}), [DryRun()])
    dry = _by(got, "Dry Run")
    assert dry.status is Status.FAIL
    assert f'requested: requests.cpu=600m. The dry run warned: "{KYVERNO_SAID}". Fix: ' in dry.message


def test_the_priority_label_jobsets_own_pod_webhook_sets_is_no_change() -> None:
    """jobset v0.12.0 pkg/webhooks/pod_webhook.go Default: `jobset.sigs.k8s.io/priority=<spec.priority>` on
    every JobSet pod; seen on the real stack (e2e/test_dryrun_stack.py)."""
    sent = _sent()
    sent["metadata"]["annotations"] = {"jobset.sigs.k8s.io/jobset-name": "train"}
    got = _defaulted(sent)
    got["metadata"]["labels"]["jobset.sigs.k8s.io/priority"] = "0"
    assert changes(sent, got) == []
    # another value than the pod's priority, or on a pod that is not a JobSet's, is a change admission made
    got["metadata"]["labels"]["jobset.sigs.k8s.io/priority"] = "7"
    assert [c.text for c in changes(sent, got)] == ["label jobset.sigs.k8s.io/priority=7 added"]
    got["metadata"]["labels"]["jobset.sigs.k8s.io/priority"] = "0"
    plain, plain_got = copy.deepcopy(sent), copy.deepcopy(got)
    del plain["metadata"]["annotations"], plain_got["metadata"]["annotations"]
    assert [c.text for c in changes(plain, plain_got)] == ["label jobset.sigs.k8s.io/priority=0 added"]
