"""Fidelity scenarios for a JobSet applied directly (issue 24: JobSet as the third kind).

The webhook judges a JobSet that a user applies (webhook/workloads/jobset/); one that a TrainJob or
AIPerfJob owns is skipped by the chart's matchCondition ``not-owned-by-a-judged-job`` (the matrix
registers the chart's JobSet hook as ``helm template`` renders it, so every TrainJob and AIPerfJob
row also shows that their JobSets are not judged twice). JobSet's controller
(sigs.k8s.io/jobset v0.12.0, pkg/controllers/jobset_controller.go) creates one Job per replica of
each replicatedJob; the Job controller creates the pods. The runner reads a JobSet's outcome from
its conditions (``Completed`` = runs, ``Failed`` = fails) and its pods (Running or Succeeded at the
bound = runs), as it reads a TrainJob's.

- a good JobSet (2 workers): admitted with no warning, completes;
- a JobSet reading a Secret key that does not exist: denied by Secrets; created anyway its pods
  wait in CreateContainerConfigError;
- a ValidatingAdmissionPolicy on pods, and a Kyverno ClusterPolicy on Pods, refusing the env var
  FORBIDDEN, each with its passing twin: the JobSet itself breaks no rule and is stored; the Job
  controller's pods are refused (FailedCreate). The webhook sees the rule through Dry Run's Pod
  probe;
- a Kyverno ClusterPolicy on JobSets and its twin: the violating JobSet is refused by Kyverno at
  apply, which the user sees (the apiserver's answer), not a miss.
"""

from __future__ import annotations

from typing import Any

from e2e.fidelity.kyverno_scenarios import kyverno_label
from e2e.fidelity.kyverno_scenarios import no_forbidden_env as kyverno_no_forbidden_env
from e2e.fidelity.policy_scenarios import ALLOWED_ENV, FORBIDDEN_ENV, no_forbidden_env, policy_label
from e2e.fidelity.scenarios_base import WORKLOAD_IMAGE, Scenario, secret, secret_env, twins

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"


def jobset(name: str = "js", *, replicas: int = 1, env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A JobSet of ``replicas`` one-pod Jobs running the matrix's workload (10m CPU each)."""
    container: dict[str, Any] = {"name": "worker", "image": WORKLOAD_IMAGE, "resources": {"requests": {"cpu": "10m"}}}
    if env:
        container["env"] = env
    return {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "parallelism": 1,
                            "completions": 1,
                            "backoffLimit": 0,
                            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                        }
                    },
                }
            ]
        },
    }


def _scenarios() -> list[Scenario]:
    vap = no_forbidden_env("pods")
    ky_pods = kyverno_no_forbidden_env("Pod")
    ky_jobsets = kyverno_no_forbidden_env("jobset.x-k8s.io/v1alpha2/JobSet")
    out = [
        Scenario(
            "good-jobset",
            "a JobSet applied directly: 2 one-pod workers, nothing special",
            jobset(replicas=2),
            covers="JobSet (applied directly)",
        ),
        Scenario(
            "jobset-secret-key-missing",
            "a JobSet applied directly; env from a Secret that exists without the key",
            jobset(env=[secret_env("HF_TOKEN", "hf-token", "hf_token")]),
            prereqs=[secret("hf-token", other="x")],
            covers="JobSet (applied directly): Secrets",
        ),
    ]
    for slug, what, policy, labels in (
        ("vap-pods", "a ValidatingAdmissionPolicy on pods", vap, policy_label("pods")),
        ("kyverno-pods", "a Kyverno ClusterPolicy on Pods (Enforce)", [ky_pods], _kyverno_labels(ky_pods)),
    ):
        out += twins(
            Scenario,
            f"jobset-{slug}",
            (
                f"a JobSet applied directly; {what} refuses the env var FORBIDDEN, which it sets: "
                "the Job controller's pods are refused",
                jobset(env=FORBIDDEN_ENV),
            ),
            (
                f"a JobSet applied directly; the same {what.split(' ', 1)[1]}; it sets another env var",
                jobset(env=ALLOWED_ENV),
            ),
            cluster_prereqs=policy,
            namespace_labels=labels,
            covers=f"JobSet (applied directly): {what}",
        )
    out += twins(
        Scenario,
        "jobset-kyverno-jobsets",
        (
            "a JobSet applied directly; a Kyverno ClusterPolicy on JobSets refuses the env var FORBIDDEN, "
            "which it sets: Kyverno refuses the JobSet itself at apply",
            jobset(env=FORBIDDEN_ENV),
        ),
        (
            "a JobSet applied directly; the same Kyverno ClusterPolicy on JobSets; it sets another env var",
            jobset(env=ALLOWED_ENV),
        ),
        cluster_prereqs=[ky_jobsets],
        namespace_labels=_kyverno_labels(ky_jobsets),
        covers="JobSet (applied directly): a Kyverno ClusterPolicy on JobSets (Enforce)",
    )
    return out


def _kyverno_labels(policy: dict[str, Any]) -> dict[str, str]:
    return kyverno_label(policy["spec"]["rules"][0]["name"])


JOBSET_SCENARIOS: list[Scenario] = _scenarios()
