"""Settings, loaded from a YAML file and validated with pydantic.

A bad config stops start-up with the field path and the reason (`ConfigError`).
Every setting is documented in docs/configuration.md.

Settings are plain data: this module imports nothing from the project. Check names are
checked against the checks actually wired in, which the caller of `load_settings` passes
(`known_checks`); a check's own default action comes from the check (`action_for`).
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

Mode = Literal["enforce", "warn", "audit"]
Action = Literal["deny", "warn", "audit", "off"]

PUBLIC_REGISTRIES = [
    "docker.io",
    "registry-1.docker.io",
    "ghcr.io",
    "quay.io",
    "nvcr.io",
    "registry.k8s.io",
]


class ConfigError(ValueError):
    pass


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class KueueSettings(_Model):
    #: when set, an AdmissionCheck's spec.controllerName must equal this
    admission_check_controller: str | None = Field(None, alias="admissionCheckController")
    #: "namespace/name" of the Lease the admission-check controller renews (a stale Lease: the controller is down and readmits nothing)
    admission_lease: str | None = Field(None, alias="admissionLease")
    #: the Lease must have been renewed within this many seconds
    lease_max_age_seconds: float = Field(60.0, gt=0, alias="leaseMaxAgeSeconds")
    #: a read of admissionLease is reused this long (0: read for every job); the staleness bound
    #: widens by as much, so a reused read never looks stale by itself (checks/kueue/)
    lease_ttl_seconds: float = Field(5.0, ge=0, le=300, alias="leaseTtlSeconds")
    #: LocalQueue name used when a job names none (AIPERF_K8S_JOBSET_KUEUE_DEFAULT_QUEUE_NAME)
    default_queue_name: str | None = Field(None, alias="defaultQueueName")


class NodeProvisioningSettings(_Model):
    """Where the placement checks look for something that could add a node (models/provisioning.py)."""

    #: "namespace/name" of cluster-autoscaler's status ConfigMap (its --namespace and
    #: --status-config-map-name); "" = do not look for cluster-autoscaler
    cluster_autoscaler_status: str = Field(
        "kube-system/cluster-autoscaler-status", alias="clusterAutoscalerStatus", pattern=r"^$|^[^/]+/[^/]+$"
    )


class ControllerRef(_Model):
    """Where one controller runs: its namespace, its Deployment, its leader-election Lease."""

    namespace: str
    #: Deployment name in `namespace` ("" = do not read a Deployment)
    deployment: str = ""
    #: leader-election Lease name in `namespace` ("" = the controller elects no leader)
    lease: str = ""


class ControllersSettings(_Model):
    """The controllers a job needs, as their upstream manifests install them (checks/controllers.py)."""

    #: sigs.k8s.io/jobset v0.12.0 config/default (namespace jobset-system, namePrefix jobset-),
    #: api/config/v1alpha1/defaults.go DefaultLeaderElectionID
    jobset: ControllerRef = Field(
        default_factory=lambda: ControllerRef(
            namespace="jobset-system", deployment="jobset-controller-manager", lease="6d4f6a47.jobset.x-k8s.io"
        )
    )
    #: kubeflow/trainer v2.3.0 manifests/overlays/manager (kubeflow-system) and
    #: manifests/base/manager/controller_manager_config.yaml leaderElection.resourceName
    trainer: ControllerRef = Field(
        default_factory=lambda: ControllerRef(
            namespace="kubeflow-system", deployment="kubeflow-trainer-controller-manager", lease="trainer.kubeflow.org"
        )
    )
    #: sigs.k8s.io/kueue v0.17.0 config/default (kueue-system, namePrefix kueue-),
    #: apis/config/v1beta2/defaults.go DefaultLeaderElectionID
    kueue: ControllerRef = Field(
        default_factory=lambda: ControllerRef(
            namespace="kueue-system", deployment="kueue-controller-manager", lease="c1f6bfd2.kueue.x-k8s.io"
        )
    )
    #: AIPerf 0.13.0 kubernetes/constants.py DEFAULT_OPERATOR_NAMESPACE (aiperf-system) and its
    #: chart's Deployment; the global operator elects no leader (operator/namespace_claim.py)
    aiperf: ControllerRef = Field(
        default_factory=lambda: ControllerRef(namespace="aiperf-system", deployment="aiperf-operator")
    )
    #: a Deployment or Lease read is reused this long (0: read on every review)
    ttl_seconds: float = Field(5.0, ge=0, le=300, alias="ttlSeconds")


PodSecurityLevel = Literal["privileged", "baseline", "restricted"]
#: k8s.io/pod-security-admission api/helpers.go ParseVersion: "latest" or "v1.<minor>"
_PSA_VERSION = r"^(latest|v1\.([0-9]|[1-9][0-9]*))$"


class PodSecurityDefaults(_Model):
    """The PodSecurity AdmissionConfiguration's `defaults` (same keys): the levels of a namespace
    without labels. Upstream's default: privileged, latest (pod-security-admission
    admission/api/v1/defaults.go)."""

    enforce: PodSecurityLevel = "privileged"
    enforce_version: str = Field("latest", alias="enforce-version", pattern=_PSA_VERSION)
    audit: PodSecurityLevel = "privileged"
    audit_version: str = Field("latest", alias="audit-version", pattern=_PSA_VERSION)
    warn: PodSecurityLevel = "privileged"
    warn_version: str = Field("latest", alias="warn-version", pattern=_PSA_VERSION)


class PodSecurityExemptions(_Model):
    """The PodSecurity AdmissionConfiguration's `exemptions` (same keys); upstream's default: none."""

    usernames: list[str] = Field(default_factory=list)
    runtime_classes: list[str] = Field(default_factory=list, alias="runtimeClasses")
    namespaces: list[str] = Field(default_factory=list)


class PodSecuritySettings(_Model):
    """What the Pod Security check cannot read from the cluster (checks/podsecurity.py)."""

    defaults: PodSecurityDefaults = Field(default_factory=PodSecurityDefaults)
    exemptions: PodSecurityExemptions = Field(default_factory=PodSecurityExemptions)
    #: who creates the job's pods: the Job controller, as kube-controller-manager runs it with
    #: --use-service-account-credentials (kubeadm and most distributions); without that flag it is
    #: "system:kube-controller-manager". Matched against exemptions.usernames.
    pod_creator: str = Field("system:serviceaccount:kube-system:job-controller", alias="podCreator", min_length=1)
    #: the apiserver's UserNamespacesPodSecurityStandards feature gate (alpha, off by default)
    relax_for_user_namespaces: bool = Field(False, alias="relaxForUserNamespaces")


#: objectLimits settings that no longer exist (read with a warning and ignored)
REMOVED_OBJECT_LIMITS = ("maxValues", "max_values", "maxItems", "max_items")


class ObjectLimits(_Model):
    """The object's upstream size limit, checked before any rendering (the `Object Size` verdict).

    etcd stores an object of at most its --max-request-bytes (1.5 MiB by default) and the apiserver
    reads at most 3 MiB of request body; the AIPerfJob CRD keeps unknown fields, so its size is the
    only bound on what a user can put in one. Within it the webhook's work is linear in the object
    (bench/large.py), so every object the apiserver could store is checked in full; an object over
    it could not be stored, and is denied as such.
    """

    #: what an object over maxBytes counts as: deny | warn | audit (deny denies only in enforce mode)
    action: Literal["deny", "warn", "audit"] = "deny"
    #: bytes of the object as JSON: etcd's --max-request-bytes (1.5 MiB by default); raise it with etcd's
    max_bytes: int = Field(1_572_864, ge=65_536, le=64 * 2**20, alias="maxBytes")

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, v: Any) -> Any:
        """maxValues and maxItems (before 0.2) were round numbers that denied jobs AIPerf runs. A config
        that still sets them is read with a warning, not refused: a webhook that cannot start after an
        upgrade would block every apply under failurePolicy Fail."""
        if isinstance(v, dict):
            gone = [k for k in REMOVED_OBJECT_LIMITS if k in v]
            if gone:
                logging.getLogger("webhook.config").warning(
                    "objectLimits.%s no longer exist and are ignored: the only bound is maxBytes (etcd's object "
                    "limit), and every object within it is checked in full; remove them from the configuration",
                    " and ".join(gone),
                )
                v = {k: val for k, val in v.items() if k not in REMOVED_OBJECT_LIMITS}
        return v

    @property
    def max_values(self) -> int:
        """The most JSON values max_bytes of JSON can hold (`0,` per value): what a body within it parses into."""
        return self.max_bytes // 2 + 1


class ClientAuthSettings(_Model):
    #: PEM file of the CA that signs the apiserver's client certificate; unset = no caller authentication
    ca_file: str | None = Field(None, alias="caFile")
    #: certificate names (subject CN or DNS/IP SAN) allowed to call /validate; empty = any certificate from caFile
    allowed_names: list[str] = Field(default_factory=list, alias="allowedNames")


class AuditSettings(_Model):
    """The audit controller (`preflight-webhook audit`, webhook/audit/): docs/configuration.md `audit`."""

    #: a full re-check of every job that has not started, for what no watch reports (node capacity)
    period_seconds: float = Field(600.0, ge=10, le=86_400, alias="periodSeconds")
    #: changes within this many seconds of the first are judged once
    debounce_seconds: float = Field(2.0, ge=0, le=300, alias="debounceSeconds")
    #: requests per second to the apiserver, on average (client-go's rest.Config QPS)
    qps: float = Field(20.0, gt=0, le=10_000)
    #: requests allowed at once above qps (client-go's Burst)
    burst: int = Field(40, ge=1, le=100_000)
    #: jobs judged at the same time
    workers: int = Field(4, ge=1, le=256)
    #: how long the result of a check that sends requests (Dry Run, Secrets, Image Pull, ...) is reused
    #: while nothing it read changed (its reads' resourceVersions): the periodic scan re-sends its
    #: requests only after this; 0: every scan re-sends them
    request_checks_reuse_seconds: float = Field(3600.0, ge=0, le=86_400, alias="requestChecksReuseSeconds")
    #: the time one evaluation may take (the webhook's is the apiserver's timeout)
    budget_seconds: float = Field(15.0, gt=0, le=300, alias="budgetSeconds")
    #: the coordination.k8s.io Lease of the leader election
    lease_name: str = Field("preflight-webhook-audit", alias="leaseName", min_length=1, max_length=253)
    #: its namespace; "" = the controller's own ($POD_NAMESPACE, else "default")
    lease_namespace: str = Field("", alias="leaseNamespace", max_length=63)
    lease_duration_seconds: float = Field(15.0, ge=2, le=600, alias="leaseDurationSeconds")
    renew_deadline_seconds: float = Field(10.0, ge=1, le=600, alias="renewDeadlineSeconds")
    retry_period_seconds: float = Field(2.0, gt=0, le=60, alias="retryPeriodSeconds")
    #: write one openreports.io Report per namespace (webhook/audit/reports.py); false: Events and metrics only
    #: (the chart sets it from audit.reports.enabled)
    reports: bool = True

    @model_validator(mode="after")
    def _election_timing(self) -> AuditSettings:
        # client-go NewLeaderElector: leaseDuration > renewDeadline > retryPeriod * JitterFactor (1.2)
        if not self.lease_duration_seconds > self.renew_deadline_seconds > self.retry_period_seconds * 1.2:
            raise ValueError(
                "leaseDurationSeconds must be greater than renewDeadlineSeconds, and renewDeadlineSeconds "
                "greater than 1.2 x retryPeriodSeconds (client-go's leader election rules)"
            )
        return self


#: host[:port] as an image reference names a registry: a DNS name, an IPv4 address or a bracketed IPv6 one
_HOST_PORT = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                        r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")  # fmt: skip


class RegistryAccessSettings(_Model):
    """Whether and how the Image Pull check asks registries (checks/imagepull.py, docs/configuration.md).

    Off by default: asking a registry is egress from the webhook to hosts the users name, and it
    reads pull-Secret values; a cluster opts in (docs/security.md, "Registry access")."""

    #: off: never ask (the check is skipped); allowlist: ask only the registries in `allowlist`; all: any
    mode: Literal["off", "allowlist", "all"] = "off"
    #: registry hosts (host[:port], as in the image reference; "docker.io" for Docker Hub) asked in allowlist mode
    allowlist: list[str] = Field(default_factory=list)
    #: the longest one registry lookup may take (the admission deadline can only shorten it)
    timeout_seconds: float = Field(2.0, gt=0, le=30, alias="timeoutSeconds")
    #: how long a definite answer (found, manifest unknown, unauthorized) is reused (0: never)
    cache_seconds: float = Field(30.0, ge=0, le=3600, alias="cacheSeconds")
    #: failures in a row (unreachable, timeout, 5xx) after which a registry is not asked for a while
    breaker_failures: int = Field(3, ge=1, le=1000, alias="breakerFailures")
    #: how long a registry is not asked once its breaker opened
    breaker_open_seconds: float = Field(30.0, gt=0, le=3600, alias="breakerOpenSeconds")
    #: a PEM bundle of CAs trusted besides the system's (a private registry's CA)
    ca_file: str | None = Field(None, alias="caFile")
    #: registries the nodes hold credentials for (a kubelet credential provider, the node's config.json):
    #: refused anonymous access to them only warns, the kubelet may still authenticate
    node_credentials: list[str] = Field(default_factory=list, alias="nodeCredentials")
    #: registries (host[:port]) that may be asked at internal addresses (loopback, private, link-local,
    #: CGNAT, clusterNetworks): every other host resolving to one is refused before any connection
    internal_registries: list[str] = Field(default_factory=list, alias="internalRegistries")
    #: token realm hosts (host[:port]) a registry may name besides its own host name; the pull
    #: Secret's credentials go there (a realm elsewhere, or over http, is not asked)
    token_realms: list[str] = Field(default_factory=list, alias="tokenRealms")
    #: the cluster's own networks (pod and Service CIDRs), internal even when they are public ranges
    cluster_networks: list[str] = Field(default_factory=list, alias="clusterNetworks")
    #: distinct images looked up per review at most; the rest are named "not asked" in a detail
    max_images_per_review: int = Field(20, ge=1, le=1000, alias="maxImagesPerReview")
    #: lookups in flight at once in the whole process at most
    max_concurrent_lookups: int = Field(16, ge=1, le=256, alias="maxConcurrentLookups")

    @field_validator("mode", mode="before")
    @classmethod
    def _yaml_off(cls, v: Any) -> Any:
        """YAML 1.1 reads a bare `off` as false."""
        return "off" if v is False else v

    @field_validator("internal_registries", "token_realms")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        for h in v:
            if not _HOST_PORT.fullmatch(h):
                raise ValueError(f"{h!r} is not a host[:port] (no scheme, no path)")
        return [h.lower() for h in v]

    @field_validator("cluster_networks")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        for n in v:
            try:
                ipaddress.ip_network(n, strict=False)
            except ValueError:
                raise ValueError(f"{n!r} is not a CIDR") from None
        return v

    def allows(self, registry: str) -> bool:
        if self.mode == "off":
            return False
        return self.mode == "all" or registry.lower() in {r.lower() for r in self.allowlist}


class Settings(_Model):
    #: global mode: enforce denies on a failed deny-action check; warn returns warnings; audit only records
    mode: Mode = "enforce"
    #: per-check action by check name: deny | warn | audit | off (default: the check's own, mostly deny)
    checks: dict[str, Action] = Field(default_factory=dict)
    #: what a check that did not finish by the deadline counts as
    timeout_action: Literal["deny", "warn", "audit"] = Field("warn", alias="timeoutAction")
    #: the longest the webhook works on one request (seconds); the apiserver's ?timeout= can only shorten it
    budget_seconds: float = Field(4.0, gt=0, le=30, alias="budgetSeconds")
    #: kept free of the apiserver's timeout for the response to travel back
    safety_margin_seconds: float = Field(0.5, ge=0, le=10, alias="safetyMarginSeconds")
    #: largest AdmissionReview body accepted (bytes): the apiserver sends at most its 3 MiB request
    #: limit for `object` plus etcd's 1.5 MiB for `oldObject` (an UPDATE) and the envelope
    max_body_bytes: int = Field(6 * 1024 * 1024, gt=1024, alias="maxBodyBytes")
    #: the object's size limit (etcd's), checked before rendering (Object Size)
    object_limits: ObjectLimits = Field(default_factory=ObjectLimits, alias="objectLimits")
    #: longest SIGTERM waits for in-flight requests
    drain_seconds: float = Field(10.0, ge=0, le=300, alias="drainSeconds")
    #: a new connection must finish its TLS handshake, and then deliver its first complete request
    #: head, each within this (the apiserver writes its request head right after the handshake)
    first_head_timeout_seconds: float = Field(2.0, gt=0, le=300, alias="firstHeadTimeoutSeconds")
    #: the next request on a kept-alive connection must deliver a complete head within this of its first byte
    header_timeout_seconds: float = Field(10.0, gt=0, le=300, alias="headerTimeoutSeconds")
    #: once the head is in, the request body must have arrived within this
    body_timeout_seconds: float = Field(10.0, gt=0, le=300, alias="bodyTimeoutSeconds")
    #: a kept-alive connection with no request closes after this long idle
    idle_timeout_seconds: float = Field(60.0, gt=0, le=3600, alias="idleTimeoutSeconds")
    #: open connections at most (the memory one costs: docs/benchmarks/hostile.md, "Slow clients"); when they
    #: are all open, a new connection closes the oldest one still waiting for a request (then the
    #: oldest kept-alive idle one, then the oldest still receiving its body), and is refused only
    #: when every open connection is working on a request
    max_connections: int = Field(256, ge=1, le=100_000, alias="maxConnections")
    #: open connections from one source address at most (trustedNetworks are exempt); past it a new
    #: connection from that address closes that address's own oldest waiting one, or is refused
    max_connections_per_peer: int = Field(64, ge=1, le=100_000, alias="maxConnectionsPerPeer")
    #: CIDRs the apiserver calls from (its addresses, or the konnectivity agents' that carry its
    #: calls): exempt from maxConnectionsPerPeer, and closed to make room only after every other
    trusted_networks: list[str] = Field(default_factory=list, alias="trustedNetworks")
    #: verify the caller's client certificate on /validate (docs/security.md, "Who can call the webhook")
    client_auth: ClientAuthSettings = Field(default_factory=ClientAuthSettings, alias="clientAuth")
    #: registries that need no imagePullSecrets
    public_registries: list[str] = Field(default_factory=lambda: list(PUBLIC_REGISTRIES), alias="publicRegistries")
    #: registries (or registry/path prefixes) whose images cannot be pulled without credentials: a
    #: missing imagePullSecret for such an image denies; for any other image it only warns (the
    #: kubelet then pulls anonymously, pkg/kubelet/kubelet_pods.go getPullSecretsForPod)
    private_registries: list[str] = Field(default_factory=list, alias="privateRegistries")
    #: namespace label whose value (enforce|warn|audit) overrides `mode` for that namespace
    namespace_mode_label: str = Field("preflight.webhook.io/mode", alias="namespaceModeLabel")
    #: object annotation listing check names to skip (comma-separated); honoured only for `skippableChecks`
    skip_annotation: str = Field("preflight.webhook.io/skip-checks", alias="skipAnnotation")
    skippable_checks: list[str] = Field(default_factory=list, alias="skippableChecks")
    #: AIPERF_K8S_* settings the AIPerf operator runs with (same names, same meaning)
    aiperf_env: dict[str, str] = Field(default_factory=dict, alias="aiperfEnv")
    #: cached data older than this (no successful watch event/relist) is reported as stale
    cache_stale_seconds: float = Field(120.0, gt=0, alias="cacheStaleSeconds")
    #: at most this many requests in flight from the webhook to the apiserver
    api_concurrency: int = Field(16, ge=1, le=256, alias="apiConcurrency")
    #: TTL of on-demand Secret reads
    secret_ttl_seconds: float = Field(5.0, ge=0, le=300, alias="secretTtlSeconds")
    #: TTL of on-demand EndpointSlice lists (the Endpoint Service check's ready endpoints)
    endpoint_slice_ttl_seconds: float = Field(5.0, ge=0, le=300, alias="endpointSliceTtlSeconds")
    #: how long a Dry Run outcome is reused for the same content and the same versions of the
    #: objects its admission reads (0: never)
    dry_run_cache_seconds: float = Field(10.0, ge=0, le=300, alias="dryRunCacheSeconds")
    #: at most this many renders (Workloads) kept by object content (webhook/workloads/render_cache.py; 0: off)
    render_cache_entries: int = Field(256, ge=0, le=4096, alias="renderCacheEntries")
    #: namespaces whose Secrets are never read (the chart lists those its namespaceSelector excludes);
    #: kube-system and the webhook's own namespace are always added
    excluded_namespaces: list[str] = Field(default_factory=list, alias="excludedNamespaces")
    #: the namespaces where `get secrets` was granted (the chart's rbac.jobNamespaces: a RoleBinding each):
    #: the capability probe asks there instead of cluster-wide; null: granted cluster-wide (or not at all)
    job_namespaces: list[str] | None = Field(None, alias="jobNamespaces")
    #: smallest Kubernetes version supported by the checks
    min_kubernetes_version: str = Field("1.27", alias="minKubernetesVersion")
    kueue: KueueSettings = Field(default_factory=KueueSettings)
    node_provisioning: NodeProvisioningSettings = Field(
        default_factory=NodeProvisioningSettings, alias="nodeProvisioning"
    )
    controllers: ControllersSettings = Field(default_factory=ControllersSettings)
    pod_security: PodSecuritySettings = Field(default_factory=PodSecuritySettings, alias="podSecurity")
    #: the audit controller (`preflight-webhook audit`)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    registry_access: RegistryAccessSettings = Field(default_factory=RegistryAccessSettings, alias="registryAccess")

    @field_validator("checks", mode="before")
    @classmethod
    def _yaml_off(cls, v: Any) -> Any:
        """YAML 1.1 reads a bare `off` as false; `Check Name: off` means the action off."""
        if isinstance(v, dict):
            return {k: ("off" if a is False else a) for k, a in v.items()}
        return v

    @field_validator("trusted_networks")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        out = []
        for entry in v:
            try:
                out.append(str(ipaddress.ip_network(entry.strip(), strict=False)))
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or CIDR (e.g. 10.0.0.0/16 or fd00::/64)") from None
        return out

    @field_validator("private_registries")
    @classmethod
    def _registry_prefixes(cls, v: list[str]) -> list[str]:
        out = []
        for entry in v:
            e = entry.strip().rstrip("/").lower()
            if not e or "://" in e or any(ch.isspace() for ch in e):
                raise ValueError(f"{entry!r} is not a registry host[:port][/path] (e.g. nvcr.io or ghcr.io/my-org)")
            out.append(e)
        return out

    @field_validator("checks", "skippable_checks")
    @classmethod
    def _known_checks(cls, v: Any, info: ValidationInfo) -> Any:
        """With `known_checks` in the validation context (load_settings), every name must be one."""
        known = (info.context or {}).get("known_checks")
        if known is not None:
            unknown = sorted(n for n in v if n not in known)
            if unknown:
                raise ValueError(
                    f"unknown check name(s) {', '.join(repr(n) for n in unknown)}; known: {', '.join(sorted(known))}"
                )
        return v

    def action_for(self, check_name: str, default: Action = "deny") -> Action:
        """The configured action for a check, else `default` (the check's own, Check.default_action)."""
        return self.checks.get(check_name, default)


def load_settings(path: str | Path | None, *, known_checks: Iterable[str] | None = None) -> Settings:
    """Read and validate the config file; None means all defaults.

    `known_checks`: the names of the checks wired in; a name in `checks` or `skippableChecks`
    that is not one of them is a config error (a typo must not silently configure nothing)."""
    if path is None:
        return Settings()
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {p} does not exist") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {p} is not valid YAML: {exc}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {p}: the top level must be a mapping, not {type(raw).__name__}")
    try:
        context = None if known_checks is None else {"known_checks": frozenset(known_checks)}
        return Settings.model_validate(raw, context=context)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
            lines.append(f"  {loc}: {err['msg']}")
        raise ConfigError(f"config file {p} is invalid:\n" + "\n".join(lines)) from None
