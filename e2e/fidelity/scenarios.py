"""The fidelity matrix's scenarios: the ONE table (docs/fidelity.md is generated from it).

``SCENARIOS`` is the TrainJob scenarios here, then the admission-rule ones
(e2e/fidelity/policy_scenarios.py), the Kyverno ones (e2e/fidelity/kyverno_scenarios.py), the
JobSets applied directly (e2e/fidelity/jobset_scenarios.py), the DRA ones
(e2e/fidelity/dra_scenarios.py), the images from a real registry
(e2e/fidelity/imagepull_scenarios.py), then the AIPerfJob ones
(e2e/fidelity/aiperf_scenarios.py); :class:`Scenario` and the shared builders are in
e2e/fidelity/scenarios_base.py (re-exported here).

Each :class:`Scenario` is a namespace of its own (``fx-<name>``), the objects that must exist
before the job (``prereqs``: Secrets, quotas, LimitRanges, Kueue queues, policies...), and the
job. The runner (e2e/fidelity/run.py) asks the webhook in ``enforce`` mode for its verdict, then
lets the job run with the webhook in ``audit`` mode and observes what the real stack does within
a bound. Nothing here says what *should* happen: the outcome is observed. ``known`` names a
known limitation where the verdict is known to disagree with the outcome (the matrix lists it;
the test does not count it as a miss or false deny); ``note`` says what the scenario is about.

TrainJob workloads run ``localhost/preflight/workload:local`` (e2e/nodeimage/workload): it prints its
argv, sleeps 1 s and exits 0, under whatever command a runtime gives it.
"""

from __future__ import annotations

from typing import Any

from e2e.fidelity.aiperf_scenarios import AIPERF_SCENARIOS
from e2e.fidelity.dra_scenarios import DRA_SCENARIOS
from e2e.fidelity.imagepull_scenarios import IMAGEPULL_SCENARIOS
from e2e.fidelity.jobset_scenarios import JOBSET_SCENARIOS
from e2e.fidelity.kyverno_scenarios import KYVERNO_SCENARIOS
from e2e.fidelity.mutation_scenarios import MUTATION_SCENARIOS
from e2e.fidelity.policy_scenarios import POLICY_SCENARIOS
from e2e.fidelity.scenarios_base import (
    MATRIX_LABEL,
    NS_PREFIX,
    WORKLOAD_IMAGE,
    Scenario,
    quota,
    requests,
    secret,
    secret_env,
    trainjob,
    twins,
)
from e2e.harness.vap import deny_policy

__all__ = [
    "MATRIX_LABEL",
    "NS_PREFIX",
    "Scenario",
    "quota",
    "secret",
    "secret_env",
    "WORKLOAD_IMAGE",
    "SCENARIOS",
    "AIPERF_SCENARIOS",
    "POLICY_SCENARIOS",
    "KYVERNO_SCENARIOS",
    "MUTATION_SCENARIOS",
    "JOBSET_SCENARIOS",
    "DRA_SCENARIOS",
    "IMAGEPULL_SCENARIOS",
    "requests",
    "trainjob",
    "TRAINJOB_SCENARIOS",
    "KNOWN_LIMITATIONS",
    "RESOLVED",
    "RESOLVED_BY",
    "by_name",
]

NODE_HOSTNAME = "preflight-node"

# --------------------------------------------------------------------------- builders


def limitrange(default_request: dict[str, str], default: dict[str, str] | None = None) -> dict[str, Any]:
    limit: dict[str, Any] = {"type": "Container", "defaultRequest": default_request}
    if default:
        limit["default"] = default
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults"}, "spec": {"limits": [limit]}}


def gpus(n: int, cpu: str = "50m", memory: str = "32Mi") -> dict[str, Any]:
    r = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(n)}
    return {"requests": dict(r), "limits": dict(r)}


KUEUE = "kueue.x-k8s.io/v1beta2"


def flavor(name: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


def cluster_queue(
    name: str,
    *,
    cpu: str,
    memory: str = "1Gi",
    flavor_name: str = "fx-default",
    cohort: str | None = None,
    stop: str | None = None,
    checks: list[str] | None = None,
    borrowing_limit: str | None = None,
) -> dict[str, Any]:
    cpu_res: dict[str, Any] = {"name": "cpu", "nominalQuota": cpu}
    if borrowing_limit is not None:
        cpu_res["borrowingLimit"] = borrowing_limit
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [{"name": flavor_name, "resources": [cpu_res, {"name": "memory", "nominalQuota": memory}]}],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    if stop:
        spec["stopPolicy"] = stop
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name}, "spec": {"clusterQueue": cq}}


QUEUED = {"kueue.x-k8s.io/queue-name": "lq"}
SMALL = requests(cpu="100m", memory="64Mi")


def holder(name: str = "hold") -> dict[str, Any]:
    """A TrainJob that runs first and holds its queue (``Scenario.before``): on LocalQueue ``lq``, the
    same 100m CPU and 64Mi as the row's job, sleeping far past any bound (the workload's
    WORKLOAD_SLEEP_SECONDS) until the runner ends it."""
    return trainjob(name, labels=QUEUED, resources=SMALL, env=[{"name": "WORKLOAD_SLEEP_SECONDS", "value": "3600"}])


#: Kueue Capacity's "will wait" warning for kueue-waits-behind-running, word for word: Kueue's own view
#: with the before job admitted (webhook/models/kueue/wait.py wait_message): the ClusterQueue status's
#: usage, and the count ahead from Kueue's visibility API, which the node serves (e2e/harness/stack.py
#: applies its APIServices): nothing pending, the job's priority 0 (no PriorityClass)
WILL_WAIT_BEHIND_RUNNING = (
    '[Kueue Capacity] TrainJob "train" will wait in ClusterQueue "fx-cq-full": it needs cpu 100m, 0 free now '
    '(flavor "fx-default": 100m of 100m in use and 0 reserved), and 0 workloads of priority ≥ 0 (no priority '
    'class) are pending ahead of it (Kueue\'s visibility API, read within 5s); ClusterQueue "fx-cq-full" is in no '
    "cohort: it cannot borrow; it preempts nothing (withinClusterQueue Never). Fix: nothing to fix; it starts "
    "once cpu is released (ClusterQueue status as watched {s}s ago)."
)

RESTRICTED_POD = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}}
RESTRICTED_CONTAINER = {
    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}
}

#: a ValidatingAdmissionPolicy "no bare pods": a Pod must have an owner (a Job, ...), in the
#: namespaces labelled preflight-fidelity/no-bare-pods
NO_BARE_PODS = deny_policy(
    "fx-no-bare-pods",
    resource="pods",
    validation={
        "expression": "has(object.metadata.ownerReferences) && size(object.metadata.ownerReferences) > 0",
        "message": "bare pods are not allowed: a Pod must be owned by a controller",
    },
    namespace_labels={"preflight-fidelity/no-bare-pods": "true"},
)


# --------------------------------------------------------------------------- the table

TRAINJOB_SCENARIOS: list[Scenario] = [
    # ---- good jobs
    Scenario("good-torch", "torch-distributed, 1 node, nothing special", trainjob(), covers="good"),
    Scenario(
        "good-torch-2-nodes-gpus",
        "torch-distributed, 2 nodes with 1 nvidia.com/gpu each (the node advertises 4)",
        trainjob(num_nodes=2, resources=gpus(1)),
        covers="good, GPUs",
    ),
    Scenario(
        "good-secrets",
        "env from a Secret key that exists",
        trainjob(env=[secret_env("HF_TOKEN", "hf-token", "token")]),
        prereqs=[secret("hf-token", token="x")],
        covers="good, Secrets",
    ),
    Scenario(
        "good-mpi",
        "Trainer's MPI runtime deepspeed-distributed (launcher + node, SSH keys Secret made by Trainer)",
        trainjob(runtime="deepspeed-distributed", num_nodes=2),
        covers="good, MPI runtime",
    ),
    Scenario(
        "good-torchtune",
        "Trainer's torchtune runtime torchtune-llama3.2-1b (dataset and model initializers, then the node), "
        "its 20Gi volumeClaimPolicies claim bound to a PersistentVolume made for it",
        trainjob(runtime="torchtune-llama3.2-1b", num_nodes=None, resources=gpus(1)),
        cluster_prereqs=[
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": "fx-good-torchtune"},
                "spec": {
                    "capacity": {"storage": "20Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    # JobSet names the claim <template>-<jobset> (volume_claim_policy.go GeneratePVCName)
                    "claimRef": {"namespace": NS_PREFIX + "good-torchtune", "name": "initializer-train"},
                    # an existing directory, mounted read-only by nothing that writes: the workload only prints
                    "hostPath": {"path": "/tmp", "type": "Directory"},
                },
            }
        ],
        covers="good, torchtune runtime",
    ),
    Scenario(
        "torchtune-no-storage",
        "Trainer's torchtune runtime with no PersistentVolume or StorageClass for its 20Gi claim",
        trainjob(runtime="torchtune-llama3.2-1b", num_nodes=None, resources=gpus(1)),
        covers="torchtune runtime (storage)",
    ),
    Scenario(
        "good-name-fits",
        "a 45-character name: every derived Job and pod name fits 63",
        trainjob(name="t" * 45),
        covers="name length",
    ),
    # ---- Secrets
    Scenario(
        "secret-missing",
        "env from a Secret that does not exist",
        trainjob(env=[secret_env("HF_TOKEN", "hf-token", "token")]),
        covers="Secrets",
    ),
    Scenario(
        "secret-key-missing",
        "env from a Secret that exists without the key",
        trainjob(env=[secret_env("HF_TOKEN", "hf-token", "hf_token")]),
        prereqs=[secret("hf-token", token="x")],
        covers="Secrets",
    ),
    Scenario(
        "secret-optional-missing",
        "env from a missing Secret marked optional",
        trainjob(env=[secret_env("HF_TOKEN", "hf-token", "token", optional=True)]),
        covers="Secrets (optional)",
    ),
    Scenario(
        "secret-volume-missing",
        "a secret volume whose Secret does not exist",
        trainjob(
            pod={"volumes": [{"name": "creds", "secret": {"secretName": "creds"}}]},
            container={"volumeMounts": [{"name": "creds", "mountPath": "/creds"}]},
        ),
        covers="Secrets (volume)",
    ),
    Scenario(
        "pull-secret-missing",
        "imagePullSecrets names a missing Secret; the image is already on the node",
        trainjob(pod={"imagePullSecrets": [{"name": "regcred"}]}),
        covers="pull Secrets",
        warns=("Secrets",),
    ),
    # ---- quotas
    Scenario(
        "quota-pods-fits",
        "pods quota 2, a 2-node job",
        trainjob(num_nodes=2),
        prereqs=[quota({"pods": "2"})],
        covers="quota pods",
    ),
    Scenario(
        "quota-pods-zero",
        "pods quota 0: not one pod may be created",
        trainjob(),
        prereqs=[quota({"pods": "0"})],
        covers="quota pods",
    ),
    Scenario(
        "quota-pods-partial",
        "pods quota 1, a 2-node job: the pods can only run one after the other",
        trainjob(num_nodes=2),
        prereqs=[quota({"pods": "1"})],
        covers="quota pods (gang)",
        known="no-gang",
    ),
    Scenario(
        "quota-cpu",
        "requests.cpu quota 150m, the pod asks 200m",
        trainjob(num_nodes=1, resources=requests(cpu="200m", memory="64Mi")),
        prereqs=[quota({"requests.cpu": "150m", "requests.memory": "1Gi"})],
        covers="quota cpu",
    ),
    Scenario(
        "quota-memory",
        "limits.memory quota 64Mi, the pod's limit 128Mi",
        trainjob(resources=requests(cpu="50m", memory="128Mi")),
        prereqs=[quota({"limits.memory": "64Mi"})],
        covers="quota memory",
    ),
    Scenario(
        "quota-gpu",
        "requests.nvidia.com/gpu quota 1, the pod asks 2",
        trainjob(resources=gpus(2)),
        prereqs=[quota({"requests.nvidia.com/gpu": "1"})],
        covers="quota GPUs",
    ),
    Scenario(
        "quota-cpu-needs-requests",
        "a requests.cpu quota and a pod that states no requests: the apiserver refuses the pod",
        trainjob(),
        prereqs=[quota({"requests.cpu": "1"})],
        covers="quota cpu (requests required)",
    ),
    Scenario(
        "quota-limitrange-defaults",
        "a requests.cpu quota and a LimitRange whose defaults fill the pod's requests",
        trainjob(num_nodes=2),
        prereqs=[quota({"requests.cpu": "500m"}), limitrange({"cpu": "100m"}, {"cpu": "100m"})],
        covers="LimitRange defaults",
    ),
    Scenario(
        "quota-limitrange-too-big",
        "a requests.cpu quota 100m and a LimitRange default request of 200m",
        trainjob(),
        prereqs=[quota({"requests.cpu": "100m"}), limitrange({"cpu": "200m"}, {"cpu": "200m"})],
        covers="LimitRange defaults",
    ),
    Scenario(
        "quota-count-jobsets",
        "count/jobsets.jobset.x-k8s.io 0: Trainer can never create the JobSet",
        trainjob(),
        prereqs=[quota({"count/jobsets.jobset.x-k8s.io": "0"})],
        covers="quota count/*",
    ),
    Scenario(
        "quota-count-jobs",
        "count/jobs.batch 0: JobSet can never create the Jobs",
        trainjob(),
        prereqs=[quota({"count/jobs.batch": "0"})],
        covers="quota count/*",
    ),
    Scenario(
        "quota-scope-besteffort",
        "pods quota 0 scoped to BestEffort, a pod without requests (BestEffort)",
        trainjob(),
        prereqs=[quota({"pods": "0"}, scopes=["BestEffort"])],
        covers="quota scopes",
    ),
    Scenario(
        "quota-scope-not-matching",
        "pods quota 0 scoped to BestEffort, a pod with requests (not BestEffort)",
        trainjob(resources=SMALL),
        prereqs=[quota({"pods": "0"}, scopes=["BestEffort"])],
        covers="quota scopes",
    ),
    # ---- Kueue
    Scenario(
        "kueue-good",
        "a LocalQueue on a ClusterQueue with room",
        trainjob(labels=QUEUED, resources=SMALL),
        prereqs=[local_queue("lq", "fx-cq-good")],
        cluster_prereqs=[flavor("fx-default"), cluster_queue("fx-cq-good", cpu="1")],
        covers="Kueue",
    ),
    Scenario(
        "kueue-queue-missing",
        "queue-name names a LocalQueue that does not exist",
        trainjob(labels=QUEUED, resources=SMALL),
        covers="Kueue queue missing",
    ),
    Scenario(
        "kueue-stopped",
        "the ClusterQueue has stopPolicy Hold",
        trainjob(labels=QUEUED, resources=SMALL),
        prereqs=[local_queue("lq", "fx-cq-stopped")],
        cluster_prereqs=[flavor("fx-default"), cluster_queue("fx-cq-stopped", cpu="1", stop="Hold")],
        covers="Kueue stopped",
    ),
    Scenario(
        "kueue-too-small",
        "the ClusterQueue's nominal cpu 100m, the job asks 2 x 100m",
        trainjob(labels=QUEUED, num_nodes=2, resources=SMALL),
        prereqs=[local_queue("lq", "fx-cq-small")],
        cluster_prereqs=[flavor("fx-default"), cluster_queue("fx-cq-small", cpu="100m")],
        covers="Kueue too small",
    ),
    Scenario(
        "kueue-cohort-borrowing",
        "the ClusterQueue's nominal cpu 100m, 1 more to borrow in its cohort; the job asks 2 x 100m",
        trainjob(labels=QUEUED, num_nodes=2, resources=SMALL),
        prereqs=[local_queue("lq", "fx-cq-borrower")],
        cluster_prereqs=[
            flavor("fx-default"),
            cluster_queue("fx-cq-borrower", cpu="100m", cohort="fx-cohort"),
            cluster_queue("fx-cq-lender", cpu="1", cohort="fx-cohort"),
        ],
        covers="Kueue cohort borrowing",
    ),
    Scenario(
        "kueue-admission-check",
        "the ClusterQueue requires an AdmissionCheck no controller ever answers",
        trainjob(labels=QUEUED, resources=SMALL),
        prereqs=[local_queue("lq", "fx-cq-checked")],
        cluster_prereqs=[
            flavor("fx-default"),
            {
                "apiVersion": KUEUE,
                "kind": "AdmissionCheck",
                "metadata": {"name": "fx-never"},
                "spec": {"controllerName": "example.com/nobody"},
            },
            cluster_queue("fx-cq-checked", cpu="1", checks=["fx-never"]),
        ],
        covers="Kueue admission checks",
    ),
    # ---- Kueue: a queue already in use (issue 39): a job runs first and holds it (Scenario.before)
    Scenario(
        "kueue-fits-beside-running",
        "the ClusterQueue's nominal cpu 200m, a running job holds 100m; the job asks the 100m left: "
        "no warning, Kueue admits it at once",
        trainjob(labels=QUEUED, resources=SMALL),
        prereqs=[local_queue("lq", "fx-cq-room")],
        cluster_prereqs=[flavor("fx-default"), cluster_queue("fx-cq-room", cpu="200m")],
        before=[holder()],
        covers="Kueue wait",
    ),
    Scenario(
        "kueue-waits-behind-running",
        "the ClusterQueue's nominal cpu 100m, held by a running job; the job asks 100m: warned that it "
        "will wait, Kueue admits it once that job ends",
        trainjob(labels=QUEUED, resources=SMALL),
        prereqs=[local_queue("lq", "fx-cq-full")],
        cluster_prereqs=[flavor("fx-default"), cluster_queue("fx-cq-full", cpu="100m")],
        before=[holder()],
        covers="Kueue wait",
        bound=180.0,  # it waits for the runner to end the job ahead of it, then runs
        warns=("Kueue Capacity",),
        says=(WILL_WAIT_BEHIND_RUNNING,),
    ),
    Scenario(
        "kueue-borrows-beside-running",
        "the ClusterQueue's nominal cpu 100m, held by a running job; its cohort lends 1 cpu; the job asks "
        "100m: no warning, Kueue admits it at once, borrowing",
        trainjob(labels=QUEUED, resources=SMALL),
        prereqs=[local_queue("lq", "fx-cq-borrows")],
        cluster_prereqs=[
            flavor("fx-default"),
            cluster_queue("fx-cq-borrows", cpu="100m", cohort="fx-cohort-lends"),
            cluster_queue("fx-cq-lends", cpu="1", cohort="fx-cohort-lends"),
        ],
        before=[holder()],
        covers="Kueue wait",
    ),
    # ---- placement
    Scenario(
        "node-selector-none-matches",
        "nodeSelector pool=gpu-a100: no node has the label",
        trainjob(pod={"nodeSelector": {"pool": "gpu-a100"}}),
        covers="node selectors",
    ),
    Scenario(
        "node-selector-matches",
        f"nodeSelector kubernetes.io/hostname={NODE_HOSTNAME}",
        trainjob(pod={"nodeSelector": {"kubernetes.io/hostname": NODE_HOSTNAME}}),
        covers="node selectors",
    ),
    Scenario(
        "toleration-unneeded",
        "tolerates a taint no node has",
        trainjob(
            pod={"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]}
        ),
        covers="taints/tolerations",
        warns=("Tolerations",),
    ),
    Scenario(
        "gpus-more-than-a-node-has",
        "8 nvidia.com/gpu per node; the node advertises 4",
        trainjob(resources=gpus(8)),
        covers="GPUs",
    ),
    Scenario(
        "cpu-more-than-a-node-has",
        "16 CPUs per node on a 2-CPU node",
        trainjob(resources=requests(cpu="16", memory="64Mi")),
        covers="node capacity",
    ),
    # ---- policies
    Scenario(
        "no-bare-pods-policy",
        "a ValidatingAdmissionPolicy refusing Pods without an owner; the job's pods are owned by Jobs",
        trainjob(),
        cluster_prereqs=NO_BARE_PODS,
        namespace_labels={"preflight-fidelity/no-bare-pods": "true"},
        covers="no bare pods policy",
    ),
    *twins(
        Scenario,
        "pod-security-restricted",
        ("namespace enforces Pod Security restricted; the runtime's pod sets no securityContext", trainjob()),
        (
            "namespace enforces Pod Security restricted; the pod is non-root, seccomp RuntimeDefault, no capabilities",
            trainjob(pod=RESTRICTED_POD, container=RESTRICTED_CONTAINER),
        ),
        namespace_labels={"pod-security.kubernetes.io/enforce": "restricted"},
        covers="Pod Security restricted",
    ),
    Scenario(
        "service-account-missing",
        "the pod's serviceAccountName does not exist",
        trainjob(pod={"serviceAccountName": "trainer-sa"}),
        covers="service account",
    ),
    # ---- names
    Scenario(
        "name-too-long",
        "a 58-character name: the pods' hostnames <name>-node-0-0 pass 63",
        trainjob(name="t" * 58),
        covers="name length",
    ),
]

#: the whole matrix: the TrainJobs above, the admission rules, Kyverno, the JobSets applied
#: directly, the DRA rows (e2e/fidelity/dra_scenarios.py), the images from a real registry
#: (e2e/fidelity/imagepull_scenarios.py), then the AIPerfJobs (e2e/fidelity/aiperf_scenarios.py)
SCENARIOS: list[Scenario] = [
    *TRAINJOB_SCENARIOS,
    *POLICY_SCENARIOS,
    *MUTATION_SCENARIOS,
    *KYVERNO_SCENARIOS,
    *JOBSET_SCENARIOS,
    *DRA_SCENARIOS,
    *IMAGEPULL_SCENARIOS,
    *AIPERF_SCENARIOS,
]

#: known limitations: where the matrix's real outcome is not the outcome a user would see, or
#: where the webhook is known to disagree with the outcome; each named in docs/fidelity.md
KNOWN_LIMITATIONS: dict[str, str] = {
    "no-gang": (
        "The matrix's workload exits after 1 s without a rendezvous, so pods that a quota lets run only "
        "one after the other all complete here. A real torchrun waits for every peer (its rendezvous "
        "times out after 15 min) while the first pod holds the quota the second needs: the job never "
        "completes. The webhook judges the gang (all pods at once) and denies; the matrix's outcome "
        "'runs' is the workload's artefact, not a false deny."
    ),
    "endpoint-not-ready-warns": (
        "An endpoint Service with no ready endpoint is a warning by design, and the matrix shows what it "
        "costs: the AIPerf operator notes EndpointUnreachable, runs the benchmark anyway, and the job ends "
        "Failed minutes later. Decided from that outcome, and kept a warning: a deny would also refuse the "
        "common `kubectl apply -f dir/` of a model server and its benchmark together, reviewed before the "
        "server's ReplicaSet has made a pod (a false deny of a job whose server may be up in time). The "
        "warning names the Service and the fix at apply time. Closing it needs to know that nothing will "
        "ever serve the Service (no Deployment, StatefulSet or pod whose labels match its selector), which "
        "the webhook does not read yet."
    ),
}


#: what earlier runs of the matrix found and the fix that closed it (docs/fidelity.md keeps the record)
RESOLVED: dict[str, str] = {
    "placement-warns": (
        "Per-Node Schedulability denies only when nothing could add a node that fits, and it counts any "
        "Kueue ResourceFlavor in the cluster as something that could (here `fx-default`, made for the Kueue "
        "scenarios: no nodeLabels, and these jobs are not even queued). A ResourceFlavor adds no node: with "
        "no cluster-autoscaler and no Karpenter the pod asking 8 GPUs or 16 CPUs of a 4-GPU, 2-CPU node is "
        "Unschedulable for good, yet the job is admitted with a warning. Node Selector Match, with the same "
        "inputs, already denies (scenario node-selector-none-matches: its flavors are matched by labels)."
    ),
    "dry-run-blinded": (
        "With the real stack the Dry Run check cannot see Pod Security: its dry-run JobSet carries an "
        "ownerReference to the TrainJob and its dry-run Pods one to their Job, neither of which exists yet, "
        "and Kueue's JobSet webhook (mjobset.kb.io, the same name as JobSet's own, which reads nothing) and "
        "its pod webhook (mpod.kb.io, on by default in Kueue's config) refuse them for that ('workload owner "
        "not found': FindAncestorJobManagedByKueue), hiding every later admission layer, so the check only "
        "warned 'Cannot verify' on every apply. The job is admitted and the Job controller's pods are then "
        "refused by Pod Security restricted (FailedCreate) forever. Dropping the ownerReferences would meet a "
        "'no bare pods' policy instead (scenario no-bare-pods-policy); evaluating Pod Security from the "
        "namespace labels and the pod spec (k8s.io/pod-security-admission) would close it."
    ),
    "aiperf-spec-required": (
        "An AIPerfJob without spec.benchmark.datasets (e2e/samples/aiperfjob-good.yaml had none) was admitted, "
        "and the AIPerf operator's ConfigValid step refused it (AIPerfConfig: `benchmark.datasets Field "
        "required`): the job ends Failed. Seen when the operator first ran on the node."
    ),
    "no-storage-check": (
        "Trainer's torchtune runtimes claim a 20Gi volume through JobSet's volumeClaimPolicies; with no "
        "PersistentVolume and no (default) StorageClass that could provision it, the claim stays Pending and "
        "the pods are Unschedulable ('pod has unbound immediate PersistentVolumeClaims'). No check looks at "
        "the claims a runtime makes yet: admitted, never starts."
    ),
}
#: the change that closed each entry of RESOLVED
RESOLVED_BY: dict[str, str] = {
    "placement-warns": "Placement counts a Kueue ResourceFlavor as 'could add a node' only when its nodeLabels "
    "name nodes that do not exist yet (merge of checks10 and its follow-up)",
    "dry-run-blinded": "the Pod Security check (k8s.io/pod-security-admission ported, branch psa), then the "
    "Dry Run check's twin (issue 19): a probe refused by Kueue's owner lookup is sent again without the "
    "controller flag, so every later layer (Pod Security, LimitRanger, quota, ValidatingAdmissionPolicies, "
    "webhooks) judges the JobSet, the Jobs and the Pods, with no warning on a good job",
    "no-storage-check": "the Volume Claims check (branch storage)",
    "aiperf-spec-required": "Job Render requires what AIPerfConfig requires (models, the endpoint's URLs, a "
    "dataset, a phase; 19 mutations checked against AIPerf itself); scenario aiperf-no-datasets",
}


def by_name() -> dict[str, Scenario]:
    return {s.name: s for s in SCENARIOS}
