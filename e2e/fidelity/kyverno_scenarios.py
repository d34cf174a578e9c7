"""Fidelity scenarios for a real policy engine (issue 19): Kyverno ClusterPolicies in Enforce,
each with a passing twin (a job that satisfies the rule is admitted and runs).

Kyverno's admission controller runs on the node (e2e/harness/kyverno.py) whenever a scenario
carries a ``kyverno.io`` object (:func:`needs_kyverno`; e2e/fidelity/run.py starts it before the
prerequisites and waits until every ClusterPolicy is Ready, i.e. in the webhooks it registered).

- on Pods: kyverno/policies' ``disallow-privileged-containers`` (pod-security/baseline), its
  pattern and message; Kyverno also generates its rule for the pod controllers
  (``autogen-``, Jobs included);
- on Jobs (batch/v1) and on JobSets (jobset.x-k8s.io/v1alpha2): no container sets the env var
  FORBIDDEN (a ``!`` pattern under an ``=()`` anchor: containers without env pass);
- an AIPerfJob whose pods the Pod rule (the env var) refuses, and its twin.

Each policy matches only the namespaces carrying its label (``namespaceSelector``), so no other
scenario meets it. The violating jobs are admitted by the apiserver (the TrainJob or AIPerfJob
itself breaks no rule) and never start: JobSet cannot create the Jobs, or the Job controller the
pods (FailedCreate). The webhook sees each refusal through Dry Run, with Kyverno's message.
"""

from __future__ import annotations

from typing import Any

from e2e.fidelity.aiperf_scenarios import _scenario, aiperfjob
from e2e.fidelity.policy_scenarios import ALLOWED_ENV, FORBIDDEN_ENV
from e2e.fidelity.scenarios_base import Scenario, trainjob, twins

KYVERNO_GROUP = "kyverno.io"

#: kyverno/policies pod-security/baseline/disallow-privileged-containers: its message
PRIVILEGED_MESSAGE = (
    "Privileged mode is disallowed. The fields spec.containers[*].securityContext.privileged, "
    "spec.initContainers[*].securityContext.privileged, and spec.ephemeralContainers[*].securityContext.privileged "
    "must be unset or set to `false`."
)
_NOT_PRIVILEGED = [{"=(securityContext)": {"=(privileged)": "false"}}]
_NO_FORBIDDEN_ENV = [{"=(env)": [{"name": "!FORBIDDEN"}]}]


def kyverno_label(slug: str) -> dict[str, str]:
    return {f"preflight-fidelity/kyverno-{slug}": "true"}


def cluster_policy(slug: str, kind: str, message: str, pattern: dict[str, Any]) -> dict[str, Any]:
    """A ClusterPolicy in Enforce with one validate rule on ``kind`` in the namespaces labelled ``slug``."""
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": f"fx-{slug}"},
        "spec": {
            "background": False,
            "rules": [
                {
                    "name": slug,
                    "match": {
                        "any": [
                            {"resources": {"kinds": [kind], "namespaceSelector": {"matchLabels": kyverno_label(slug)}}}
                        ]
                    },
                    "validate": {"failureAction": "Enforce", "message": message, "pattern": pattern},
                }
            ],
        },
    }


def disallow_privileged() -> dict[str, Any]:
    """kyverno/policies' disallow-privileged-containers (its rule, pattern and message)."""
    return cluster_policy(
        "privileged-containers",
        "Pod",
        PRIVILEGED_MESSAGE,
        {
            "spec": {
                "=(ephemeralContainers)": _NOT_PRIVILEGED,
                "=(initContainers)": _NOT_PRIVILEGED,
                "containers": _NOT_PRIVILEGED,
            }
        },
    )


def no_forbidden_env(kind: str) -> dict[str, Any]:
    """No container of a Pod, Job or JobSet sets the env var FORBIDDEN."""
    pod_spec = {"spec": {"=(initContainers)": _NO_FORBIDDEN_ENV, "containers": _NO_FORBIDDEN_ENV}}
    pattern: dict[str, Any]
    if kind == "Pod":
        pattern = pod_spec
    elif kind == "Job":
        pattern = {"spec": {"template": pod_spec}}
    else:  # a JobSet: every replicatedJob's Job template's pod template
        pattern = {"spec": {"replicatedJobs": [{"template": {"spec": {"template": pod_spec}}}]}}
    plural = kind.split("/")[-1].lower() + "s"
    return cluster_policy(f"no-forbidden-env-{plural}", kind, f"{plural} may not set the env var FORBIDDEN", pattern)


def needs_kyverno(objects: list[dict[str, Any]]) -> bool:
    """True when one of ``objects`` is a Kyverno resource (the run needs Kyverno's CRDs and controller)."""
    return any(str(o.get("apiVersion", "")).split("/")[0] == KYVERNO_GROUP for o in objects)


def policy_names(objects: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in objects if o.get("kind") == "ClusterPolicy" and needs_kyverno([o])]


def _pair(
    slug: str,
    what: str,
    policy: dict[str, Any],
    bad: dict[str, Any],
    good: dict[str, Any],
    bad_note: str,
    good_note: str,
) -> list[Scenario]:
    covers = f"Kyverno ClusterPolicy (Enforce) on {what}"
    make = _scenario if bad["kind"] == "AIPerfJob" else Scenario
    prefix = "aiperf-" if bad["kind"] == "AIPerfJob" else ""
    return twins(
        make,
        f"{prefix}kyverno-{slug}",
        (bad_note, bad),
        (good_note, good),
        cluster_prereqs=[policy],
        namespace_labels=kyverno_label(policy["spec"]["rules"][0]["name"]),
        covers=covers,
    )


_ENV_RULE = "a Kyverno ClusterPolicy on {k} (Enforce) refuses the env var FORBIDDEN"


def _trainjob_env_pair(kinds: str, match: str, refused: str) -> list[Scenario]:
    """A ClusterPolicy on ``kinds`` (the policy's ``match``) refusing the env var FORBIDDEN, and a
    TrainJob that sets it (``refused``: what of the job's objects the policy refuses) or another one."""
    return _pair(
        f"{kinds.lower()}-env",
        kinds,
        no_forbidden_env(match),
        trainjob(env=FORBIDDEN_ENV),
        trainjob(env=ALLOWED_ENV),
        _ENV_RULE.format(k=kinds) + f"; the job sets it, so {refused}",
        f"the same ClusterPolicy on {kinds}; the job sets another env var",
    )


def _scenarios() -> list[Scenario]:
    return [
        *_pair(
            "pods-privileged",
            "Pods",
            disallow_privileged(),
            trainjob(container={"securityContext": {"privileged": True}}),
            trainjob(),
            "Kyverno's disallow-privileged-containers on Pods (Enforce); the trainer container is privileged",
            "the same ClusterPolicy; the trainer container sets no securityContext",
        ),
        *_trainjob_env_pair("Jobs", "Job", "JobSet's Jobs are refused"),
        *_trainjob_env_pair("JobSets", "jobset.x-k8s.io/v1alpha2/JobSet", "Trainer's JobSet is refused"),
        *_pair(
            "pods-env",
            "Pods (AIPerfJob)",
            no_forbidden_env("Pod"),
            aiperfjob(env=FORBIDDEN_ENV),
            aiperfjob(env=ALLOWED_ENV),
            "AIPerfJob: " + _ENV_RULE.format(k="Pods") + ", which its podTemplate sets",
            "AIPerfJob: the same ClusterPolicy on Pods; its podTemplate sets another env var",
        ),
    ]


KYVERNO_SCENARIOS: list[Scenario] = _scenarios()
