"""Fidelity scenarios for the admission layers behind Kueue's webhooks (issue 19): rules on the
Pods, Jobs and JobSets a job's controllers create, each with a passing twin (a job that satisfies
the rule is admitted and runs).

- ValidatingAdmissionPolicies on Pods, on Jobs and on JobSets (the rule: no container sets the
  env var FORBIDDEN), each bound to the namespaces carrying its label;
- LimitRange max and min, on containers and on pods (LimitRanger, plugin/pkg/admission/limitranger);
- an AIPerfJob whose pods the Pod policy refuses, and its twin.

The violating jobs are admitted by the apiserver (the TrainJob or AIPerfJob itself breaks no rule)
and never start: Trainer cannot create the JobSet, JobSet the Jobs, or the Job controller the pods
(FailedCreate). The webhook sees each rule through Dry Run (the twin past Kueue's owner lookups).
"""

from __future__ import annotations

from typing import Any

from e2e.fidelity.aiperf_scenarios import _scenario, aiperfjob
from e2e.fidelity.scenarios_base import Scenario, requests, trainjob, twins
from e2e.harness.vap import deny_policy

#: (resource, API group, version, the object's containers in CEL) of each policy target
_TARGETS = {
    "pods": ("", "v1", "object.spec.containers"),
    "jobs": ("batch", "v1", "object.spec.template.spec.containers"),
    "jobsets": ("jobset.x-k8s.io", "v1alpha2", None),
}
_NO_FORBIDDEN = "!{containers}.exists(c, has(c.env) && c.env.exists(e, e.name == 'FORBIDDEN'))"
FORBIDDEN_ENV = [{"name": "FORBIDDEN", "value": "1"}]
ALLOWED_ENV = [{"name": "ALLOWED", "value": "1"}]


def policy_label(resource: str) -> dict[str, str]:
    return {f"preflight-fidelity/no-forbidden-env-{resource}": "true"}


def no_forbidden_env(resource: str) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy refusing `resource` objects whose containers set FORBIDDEN, and its binding."""
    group, version, containers = _TARGETS[resource]
    if containers is None:  # a JobSet: every replicatedJob's pod template
        expression = "!object.spec.replicatedJobs.exists(r, r.template.spec.template.spec.containers.exists(c, " \
            "has(c.env) && c.env.exists(e, e.name == 'FORBIDDEN')))"  # fmt: skip
    else:
        expression = _NO_FORBIDDEN.format(containers=containers)
    return deny_policy(
        f"fx-no-forbidden-env-{resource}",
        group=group,
        version=version,
        resource=resource,
        validation={"expression": expression, "message": f"{resource} may not set the env var FORBIDDEN"},
        namespace_labels=policy_label(resource),
    )


def limit_range(kind: str, bound: str, cpu: str) -> dict[str, Any]:
    """A LimitRange with one `bound` (max | min) on cpu for `kind` (Container | Pod)."""
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "bounds"},
        "spec": {"limits": [{"type": kind, bound: {"cpu": cpu}}]},
    }


def _vap_scenarios() -> list[Scenario]:
    out: list[Scenario] = []
    for resource, who in (
        ("pods", "the Job controller's pods"),
        ("jobs", "JobSet's Jobs"),
        ("jobsets", "Trainer's JobSet"),
    ):
        out += twins(
            Scenario,
            f"vap-{resource}",
            (
                f"a ValidatingAdmissionPolicy on {resource} refuses the env var FORBIDDEN; the job sets it, so "
                f"{who} are refused",
                trainjob(env=FORBIDDEN_ENV),
            ),
            (
                f"the same ValidatingAdmissionPolicy on {resource}; the job sets another env var",
                trainjob(env=ALLOWED_ENV),
            ),
            cluster_prereqs=no_forbidden_env(resource),
            namespace_labels=policy_label(resource),
            covers=f"ValidatingAdmissionPolicy on {resource}",
        )
    return out


def _limit_range_scenarios() -> list[Scenario]:
    out: list[Scenario] = []
    for kind in ("Container", "Pod"):
        for bound, bad, good in (("max", "200m", "50m"), ("min", "50m", "150m")):
            what = f"LimitRange {bound} cpu 100m per {kind}"
            out += twins(
                Scenario,
                f"limitrange-{kind.lower()}-{bound}",
                (f"{what}; the pod asks {bad}", trainjob(resources=requests(cpu=bad, memory="64Mi"))),
                (f"{what}; the pod asks {good}", trainjob(resources=requests(cpu=good, memory="64Mi"))),
                prereqs=[limit_range(kind, bound, "100m")],
                covers=f"LimitRange {bound} per {kind}",
            )
    return out


def _aiperf_scenarios() -> list[Scenario]:
    return twins(
        _scenario,
        "aiperf-vap-pods",
        (
            "AIPerfJob: a ValidatingAdmissionPolicy on pods refuses the env var FORBIDDEN, which its podTemplate sets",
            aiperfjob(env=FORBIDDEN_ENV),
        ),
        (
            "AIPerfJob: the same ValidatingAdmissionPolicy on pods; its podTemplate sets another env var",
            aiperfjob(env=ALLOWED_ENV),
        ),
        cluster_prereqs=no_forbidden_env("pods"),
        namespace_labels=policy_label("pods"),
        covers="ValidatingAdmissionPolicy on pods (AIPerfJob)",
    )


POLICY_SCENARIOS: list[Scenario] = [*_vap_scenarios(), *_limit_range_scenarios(), *_aiperf_scenarios()]
