"""Fidelity scenarios for the pods as admission creates them (issue 35): MutatingAdmissionPolicies
(admissionregistration.k8s.io/v1, served and enabled by default in Kubernetes v1.37.2) change the
pods of a TrainJob, and the webhook judges the pods the Dry Run's answer shows (docs/mutations.md).
Each policy is bound to the namespaces carrying its label, so it acts on its own scenario only.

- limits filled under a limits quota: the job states requests only, which the quota alone refuses
  ("must specify limits"); the policy fills them: it runs, admitted (a false deny before issue 35);
- a sidecar whose requests push the pods over a requests quota: it never starts, denied (a pod with its
  sidecar is over the quota, so the apiserver refuses the Dry Run's pod too: the denial is the Dry Run's,
  and the mutation is unseen; a quota a pod fits but the gang does not would run here, pod after pod, as
  the known limitation no-gang says; e2e/test_admitted_live.py asserts that case's "set by admission");
- a nodeSelector that no node matches: it never starts, denied;
- a label that a ValidatingAdmissionPolicy on pods requires: it runs, admitted;
- the same sidecar added by a Kyverno ClusterPolicy ``mutate`` rule (Kyverno v1.19.1's admission
  controller on the node, as the kyverno-* rows run it: e2e/harness/kyverno.py): it never starts,
  denied (:func:`kyverno_sidecar`).

Left out: a toleration added that lets the pods onto a tainted node. The matrix has one node, and
tainting it would disturb every other scenario; e2e/test_admitted_live.py and tests/test_admitted.py
cover the tolerations read from the admitted pod.
"""

from __future__ import annotations

from typing import Any

from e2e.fidelity.kyverno_scenarios import kyverno_label
from e2e.fidelity.scenarios_base import WORKLOAD_IMAGE, Scenario, quota, trainjob
from e2e.harness.vap import deny_policy, mutate_policy


def _label(slug: str) -> dict[str, str]:
    return {f"preflight-fidelity/map-{slug}": "true"}


def mutating_policy(slug: str, expression: str, patch_type: str = "ApplyConfiguration") -> list[dict[str, Any]]:
    """A MutatingAdmissionPolicy `fx-map-<slug>` applying the CEL `expression` to the Pods created in the
    namespaces labelled `_label(slug)`, and its binding (same name)."""
    return mutate_policy(f"fx-map-{slug}", expression, namespace_labels=_label(slug), patch_type=patch_type)


FILL_LIMITS = (
    "Object{spec: Object.spec{containers: object.spec.containers.filter(c, !has(c.resources) || "
    "!has(c.resources.limits)).map(c, Object.spec.containers{name: c.name, resources: "
    'Object.spec.containers.resources{limits: {"cpu": "500m", "memory": "256Mi"}}})}}'
)
ADD_SIDECAR = (
    f'Object{{spec: Object.spec{{containers: [Object.spec.containers{{name: "proxy", image: "{WORKLOAD_IMAGE}", '
    'resources: Object.spec.containers.resources{requests: {"cpu": "500m", "memory": "32Mi"}}}]}}'
)
#: a JSONPatch: an ApplyConfiguration may not set nodeSelector, an atomic map ("may not mutate atomic arrays,
#: maps or structs: .spec.nodeSelector", the apiserver's words)
ADD_NODE_SELECTOR = '[JSONPatch{op: "add", path: "/spec/nodeSelector", value: {"preflight-fidelity/pool": "none"}}]'
ADD_TEAM_LABEL = 'Object{metadata: Object.metadata{labels: {"preflight-fidelity/team": "ml"}}}'


#: the sidecar both layers add: its requests alone are over the rows' 250m quota
SIDECAR = {"name": "proxy", "image": WORKLOAD_IMAGE, "resources": {"requests": {"cpu": "500m", "memory": "32Mi"}}}


def kyverno_sidecar(slug: str = "mutate-sidecar") -> dict[str, Any]:
    """A Kyverno ClusterPolicy whose ``mutate`` rule (``patchStrategicMerge``, containers merged by name)
    adds :data:`SIDECAR` to the Pods created in the namespaces labelled ``kyverno_label(slug)``.

    Whether Kyverno mutates a dry run (kyverno/kyverno release-1.19, v1.19.1): yes, like any other
    request. Its webhook controller registers ``kyverno-resource-mutating-webhook-cfg`` with
    ``sideEffects: NoneOnDryRun`` (pkg/controllers/webhook/controller.go, ``buildResourceMutatingWebhookRules``
    is passed ``&noneOnDryRun``), so the apiserver calls it for ``dryRun=All``; its handler
    (pkg/webhooks/resource/handlers.go ``Mutate`` → pkg/webhooks/resource/mutation/mutation.go
    ``applyMutations``) returns the same patches for a dry run, and only skips the reports
    (mutation/utils.go ``needsReports``: ``IsDryRun`` → no report). So the Dry Run's answer is the pod
    with the sidecar, as the Job controller's pods will be.

    ``emitWarning: true`` (api/kyverno/v1/spec_types.go): Kyverno returns one AdmissionResponse warning
    per applied rule, ``policy <name>.<rule>: mutated Pod/<pod> in namespace <ns>``
    (pkg/webhooks/utils/warning.go ``GetWarningMessages``, pkg/engine/handlers/mutation/common.go
    ``buildSuccessMessage``), which the apiserver passes on as a ``Warning`` header
    (k8s.io/apiserver pkg/admission/plugin/webhook/mutating/dispatcher.go ``warning.AddWarning``), on a
    refused request too: the one place the apiserver's answer names the layer (docs/mutations.md).
    ``autogen-controllers: none``: the rule acts on Pods only, as the MutatingAdmissionPolicy rows do (else
    Kyverno also generates it for the Job template, pkg/autogen)."""
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {
            "name": f"fx-{slug}",
            "annotations": {"pod-policies.kyverno.io/autogen-controllers": "none"},
        },
        "spec": {
            "background": False,
            "emitWarning": True,
            "rules": [
                {
                    "name": "add-sidecar",
                    "match": {
                        "any": [
                            {"resources": {"kinds": ["Pod"], "namespaceSelector": {"matchLabels": kyverno_label(slug)}}}
                        ]
                    },
                    "mutate": {"patchStrategicMerge": {"spec": {"containers": [dict(SIDECAR)]}}},
                }
            ],
        },
    }


def _scenarios() -> list[Scenario]:
    small = {"cpu": "100m", "memory": "64Mi"}
    team_vap = deny_policy(
        "fx-pods-need-team",
        resource="pods",
        validation={
            "expression": "has(object.metadata.labels) && 'preflight-fidelity/team' in object.metadata.labels",
            "message": "pods need the label preflight-fidelity/team",
        },
        namespace_labels=_label("team-label"),
    )
    return [
        Scenario(
            "map-limits-filled",
            "a limits.cpu/limits.memory quota; the job states requests only; a MutatingAdmissionPolicy fills the limits",
            trainjob(resources={"requests": dict(small)}),
            prereqs=[quota({"limits.cpu": "1", "limits.memory": "512Mi"})],
            cluster_prereqs=mutating_policy("limits-filled", FILL_LIMITS),
            namespace_labels=_label("limits-filled"),
            covers="MutatingAdmissionPolicy: limits filled under a limits quota",
        ),
        Scenario(
            "map-sidecar-over-quota",
            "a requests.cpu quota 250m the job's 2 pods fit (2 x 100m); a MutatingAdmissionPolicy adds a sidecar "
            "asking 500m to each",
            trainjob(num_nodes=2, resources={"requests": dict(small), "limits": dict(small)}),
            prereqs=[quota({"requests.cpu": "250m"})],
            cluster_prereqs=mutating_policy("sidecar-over-quota", ADD_SIDECAR),
            namespace_labels=_label("sidecar-over-quota"),
            covers="MutatingAdmissionPolicy: a sidecar over a requests quota",
        ),
        Scenario(
            "map-node-selector",
            "a MutatingAdmissionPolicy adds nodeSelector preflight-fidelity/pool=none: no node has the label",
            trainjob(resources={"requests": dict(small), "limits": dict(small)}),
            cluster_prereqs=mutating_policy("node-selector", ADD_NODE_SELECTOR, "JSONPatch"),
            namespace_labels=_label("node-selector"),
            covers="MutatingAdmissionPolicy: a nodeSelector no node matches",
        ),
        Scenario(
            "map-label-a-policy-requires",
            "a ValidatingAdmissionPolicy requires the pod label preflight-fidelity/team; a MutatingAdmissionPolicy "
            "adds it",
            trainjob(resources={"requests": dict(small), "limits": dict(small)}),
            cluster_prereqs=[*mutating_policy("team-label", ADD_TEAM_LABEL), *team_vap],
            namespace_labels=_label("team-label"),
            covers="MutatingAdmissionPolicy: a label a ValidatingAdmissionPolicy requires",
        ),
        Scenario(
            "kyverno-mutate-sidecar-over-quota",
            "a requests.cpu quota 250m the job's 2 pods fit (2 x 100m); a Kyverno ClusterPolicy mutate rule adds a "
            "sidecar asking 500m to each pod",
            trainjob(num_nodes=2, resources={"requests": dict(small), "limits": dict(small)}),
            prereqs=[quota({"requests.cpu": "250m"})],
            cluster_prereqs=[kyverno_sidecar()],
            namespace_labels=kyverno_label("mutate-sidecar"),
            covers="Kyverno ClusterPolicy mutate rule: a sidecar over a requests quota",
        ),
    ]


MUTATION_SCENARIOS: list[Scenario] = _scenarios()
