"""The Kyverno rows' pure parts (no cluster): each policy pairs with a violating job and a passing
twin in namespaces only it matches, the run starts Kyverno exactly when a scenario needs it, and
the harness renders the chart's default ConfigMap (charts/kyverno/templates/config/configmap.yaml)."""

from __future__ import annotations

import json

from e2e.fidelity.jobset_scenarios import JOBSET_SCENARIOS
from e2e.fidelity.kyverno_scenarios import (
    KYVERNO_SCENARIOS,
    PRIVILEGED_MESSAGE,
    disallow_privileged,
    needs_kyverno,
    no_forbidden_env,
    policy_names,
)
from e2e.fidelity.mutation_scenarios import MUTATION_SCENARIOS
from e2e.fidelity.policy_scenarios import no_forbidden_env as vap_no_forbidden_env
from e2e.fidelity.run import select
from e2e.fidelity.scenarios import SCENARIOS
from e2e.harness.kyverno import NAMESPACE, RESOURCE_FILTERS, config_map


def test_every_policy_has_a_violating_job_and_a_passing_twin() -> None:
    by_policy: dict[str, list[str]] = {}
    for s in KYVERNO_SCENARIOS:
        (policy,) = s.cluster_prereqs
        by_policy.setdefault(policy["metadata"]["name"], []).append(s.name)
        # the policy matches the scenario's namespace label and nothing else
        (rule,) = policy["spec"]["rules"]
        (match,) = rule["match"]["any"]
        assert match["resources"]["namespaceSelector"] == {"matchLabels": s.namespace_labels}
        assert rule["validate"]["failureAction"] == "Enforce"
    assert len(by_policy) == 4
    for names in by_policy.values():
        assert sorted(n.rsplit("-", 1)[1] for n in names) == ["compliant", "violating"]
    kinds = {
        s.cluster_prereqs[0]["spec"]["rules"][0]["match"]["any"][0]["resources"]["kinds"][0] for s in KYVERNO_SCENARIOS
    }
    assert kinds == {"Pod", "Job", "jobset.x-k8s.io/v1alpha2/JobSet"}
    assert {s.kind for s in KYVERNO_SCENARIOS} == {"TrainJob", "AIPerfJob"}


def test_the_rows_are_in_the_matrix_and_no_other_scenario_carries_their_labels() -> None:
    names = [s.name for s in SCENARIOS]
    for s in KYVERNO_SCENARIOS:
        assert names.count(s.name) == 1
    jobset_rows = [s for s in JOBSET_SCENARIOS if needs_kyverno(s.cluster_prereqs)]
    assert len(jobset_rows) == 4  # the JobSets applied directly: Kyverno on Pods and on JobSets
    mutate_rows = [s for s in MUTATION_SCENARIOS if needs_kyverno(s.cluster_prereqs)]
    assert [s.name for s in mutate_rows] == ["kyverno-mutate-sidecar-over-quota"]  # a mutate rule (issue 35)
    rows = [*KYVERNO_SCENARIOS, *jobset_rows, *mutate_rows]
    # "kyverno" in a name selects exactly the rows that start Kyverno, in the matrix's order
    assert [s.name for s in select("kyverno")] == [s.name for s in SCENARIOS if s in rows]
    assert len(select("kyverno")) == len(rows)
    assert select("") == SCENARIOS
    labels = {k for s in rows for k in s.namespace_labels}
    others = [s for s in SCENARIOS if s not in rows]
    assert not any(labels & set(s.namespace_labels) for s in others)
    assert not any(needs_kyverno(s.cluster_prereqs) for s in others)


def test_needs_kyverno_and_policy_names() -> None:
    assert needs_kyverno([disallow_privileged()])
    assert not needs_kyverno(vap_no_forbidden_env("pods"))
    assert not needs_kyverno([])
    objs = [*vap_no_forbidden_env("jobs"), no_forbidden_env("Job"), disallow_privileged()]
    assert policy_names(objs) == ["fx-no-forbidden-env-jobs", "fx-privileged-containers"]


def test_the_patterns() -> None:
    pod = disallow_privileged()["spec"]["rules"][0]["validate"]
    assert pod["message"] == PRIVILEGED_MESSAGE
    assert pod["pattern"]["spec"]["containers"] == [{"=(securityContext)": {"=(privileged)": "false"}}]
    jobset = no_forbidden_env("jobset.x-k8s.io/v1alpha2/JobSet")
    assert jobset["metadata"]["name"] == "fx-no-forbidden-env-jobsets"
    rj = jobset["spec"]["rules"][0]["validate"]["pattern"]["spec"]["replicatedJobs"][0]
    assert rj["template"]["spec"]["template"]["spec"]["containers"] == [{"=(env)": [{"name": "!FORBIDDEN"}]}]
    job = no_forbidden_env("Job")["spec"]["rules"][0]["validate"]
    assert job["message"] == "jobs may not set the env var FORBIDDEN"
    assert job["pattern"]["spec"]["template"]["spec"]["containers"] == [{"=(env)": [{"name": "!FORBIDDEN"}]}]


def test_the_chart_default_config_map() -> None:
    cm = config_map()
    assert cm["metadata"] == {"name": "kyverno", "namespace": NAMESPACE}
    # the chart folds its one-a-line list (`resourceFilters: >-`), the kyverno namespace's filter first
    assert cm["data"]["resourceFilters"].startswith("[*/*,kyverno,*] [Event,*,*] [*/*,kube-system,*]")
    assert cm["data"]["resourceFilters"].count("[") == len(RESOURCE_FILTERS) + 1
    (expr,) = json.loads(cm["data"]["webhooks"])["namespaceSelector"]["matchExpressions"]
    assert expr == {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kyverno"]}
    assert cm["data"]["excludeGroups"] == "system:nodes"
