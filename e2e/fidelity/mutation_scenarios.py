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
- a label that a ValidatingAdmissionPolicy on pods requires: it runs, admitted.

Left out: a toleration added that lets the pods onto a tainted node. The matrix has one node, and
tainting it would disturb every other scenario; e2e/test_admitted_live.py and tests/test_admitted.py
cover the tolerations read from the admitted pod.
"""

from __future__ import annotations

from typing import Any

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
    ]


MUTATION_SCENARIOS: list[Scenario] = _scenarios()
