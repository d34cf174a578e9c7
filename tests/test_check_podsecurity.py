"""Pod Security: every status, the exact wording, the labels, versions, exemptions and settings.

The evaluator itself (every policy check at every version) is compared with upstream in
tests/oracle/test_podsecurity_oracle.py; the real apiserver's verdict in e2e/test_podsecurity_live.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakeview import FakeView, container, pod, run_check_all, workload
from webhook.checks import all_checks
from webhook.checks.podsecurity import PodSecurity, as_created
from webhook.config import ConfigError, Settings, load_settings
from webhook.models import podsecurity as P
from webhook.results import Status
from webhook.workloads.base import PodGroup

ENFORCE = "pod-security.kubernetes.io/enforce"
ASSUMED = (
    "Assumed: the cluster's PodSecurity configuration exempts none of namespace \"team-a\", the pods' creator "
    '"system:serviceaccount:kube-system:job-controller" (podSecurity settings).'
)
SECCOMP_ONLY = {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
COMPLIANT = {**SECCOMP_ONLY, "seccompProfile": {"type": "RuntimeDefault"}}


def _view(labels: dict[str, str] | None, **kw: Any) -> FakeView:
    objects = {} if labels is None else {"namespaces": [{"metadata": {"name": "team-a", "labels": labels}}]}
    return FakeView(objects, **kw)


def _wl(*groups: PodGroup) -> Any:
    return workload(list(groups) or [PodGroup("node", 2, pod(container("node", securityContext=SECCOMP_ONLY)))])


async def _run(wl: Any, view: FakeView, settings: Settings | None = None) -> list[Any]:
    return await run_check_all(PodSecurity(), wl, view, settings)


def test_wired_with_its_needs() -> None:
    check = next(c for c in all_checks() if c.name == "Pod Security")
    assert isinstance(check, PodSecurity)
    assert (check.default_action, check.needs_cluster, check.local_capacity, check.synchronous) == (
        "deny",
        True,
        True,
        True,
    )
    assert [str(p) for p in check.permissions] == ["list namespaces", "watch namespaces"]
    names = [c.name for c in all_checks()]
    assert names.index("Pod Security") == names.index("Dry Run") - 1


async def test_enforce_violation_fails_naming_namespace_level_group_container_field_and_fix() -> None:
    [r] = await _run(_wl(), _view({ENFORCE: "restricted"}))
    assert r.status is Status.FAIL
    line = (
        'Pod Security "restricted:latest" of namespace "team-a" (label pod-security.kubernetes.io/enforce=restricted) '
        'forbids the node pods: seccompProfile (pod or container "node" must set securityContext.seccompProfile.type '
        'to "RuntimeDefault" or "Localhost"); the Job controller cannot create them (FailedCreate) and the job never '
        "starts. Fix: give the node pod template seccompProfile.type: RuntimeDefault in the pod's securityContext "
        '(or have an admin relax pod-security.kubernetes.io/enforce on namespace "team-a").'
    )
    assert r.message == f"{line} {ASSUMED}"
    assert r.details == [line, "assumed: " + ASSUMED[len("Assumed: ") : -1]]


async def test_every_violating_group_is_one_line_with_its_own_fix() -> None:
    wl = _wl(
        PodGroup("node", 4, pod(container("node"))),
        PodGroup("dataset-initializer", 1, pod(container("init", securityContext=SECCOMP_ONLY))),
        PodGroup("ok", 1, pod(container("ok", securityContext=COMPLIANT))),
    )
    [r] = await _run(wl, _view({ENFORCE: "restricted", P.ENFORCE_VERSION_LABEL: "v1.30"}))
    assert r.status is Status.FAIL
    assert len(r.details) == 3  # two groups, the assumption
    assert r.details[0].startswith(
        'Pod Security "restricted:v1.30" of namespace "team-a" (label pod-security.kubernetes.io/enforce=restricted, '
        'enforce-version=v1.30) forbids the node pods: allowPrivilegeEscalation != false (container "node" must set '
        'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "node" must set '
        'securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "node" must set '
        'securityContext.runAsNonRoot=true), seccompProfile (pod or container "node" must set '
        'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
    )
    assert r.details[0].endswith(
        "Fix: give the node pod template allowPrivilegeEscalation: false in each container's securityContext; "
        'capabilities.drop: ["ALL"] in each container\'s securityContext (add only NET_BIND_SERVICE); '
        "runAsNonRoot: true in the pod's securityContext (and false in no container); seccompProfile.type: "
        "RuntimeDefault in the pod's securityContext (or have an admin relax pod-security.kubernetes.io/enforce on "
        'namespace "team-a").'
    )
    assert "forbids the dataset-initializer pods: seccompProfile" in r.details[1]
    assert "ok pods" not in r.message


async def test_compliant_pods_pass() -> None:
    wl = _wl(
        PodGroup("node", 2, pod(container("node", securityContext=COMPLIANT))),
        PodGroup("idle", 0, pod(container("bad", securityContext={"privileged": True}))),  # creates no pod
    )
    [r] = await _run(wl, _view({ENFORCE: "restricted"}))
    assert (r.status, r.message) == (
        Status.PASS,
        'Pod Security "restricted:latest" of namespace "team-a" (label pod-security.kubernetes.io/enforce=restricted) '
        "admits the pods of node",
    )
    assert r.details == ["assumed: " + ASSUMED[len("Assumed: ") : -1]]


async def test_unlabelled_namespace_is_privileged_by_default() -> None:
    [r] = await _run(_wl(), _view({"team": "a"}))
    assert (r.status, r.message) == (
        Status.PASS,
        'Namespace "team-a" enforces Pod Security "privileged:latest" (no pod-security.kubernetes.io/enforce label: '
        "the default podSecurity.defaults.enforce): every pod is admitted",
    )


async def test_configured_default_level_applies_to_unlabelled_namespaces() -> None:
    settings = Settings.model_validate(
        {"podSecurity": {"defaults": {"enforce": "baseline", "enforce-version": "v1.29"}}}
    )
    wl = _wl(PodGroup("node", 1, pod(container("node", securityContext={"privileged": True}))))
    [r] = await _run(wl, _view({}), settings)
    assert r.status is Status.FAIL
    assert r.message.startswith(
        'Pod Security "baseline:v1.29" of namespace "team-a" (no pod-security.kubernetes.io/enforce label: the default '
        'podSecurity.defaults.enforce) forbids the node pods: privileged (container "node" must not set '
        "securityContext.privileged=true);"
    )
    assert "Fix: give the node pod template no securityContext.privileged: true (or" in r.message


async def test_invalid_level_label_is_enforced_as_restricted_like_upstream() -> None:
    [r] = await _run(_wl(), _view({ENFORCE: "Restricted"}))
    assert r.status is Status.FAIL
    assert r.message.startswith(
        'Pod Security "restricted:latest" of namespace "team-a" (label pod-security.kubernetes.io/enforce=Restricted)'
    )
    assert r.message.endswith(
        f"{ASSUMED} Invalid labels, read as Pod Security reads them (an enforce level as restricted, a version as "
        'latest): metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "Restricted": must be one of '
        "privileged, baseline, restricted"
    )


async def test_invalid_version_label_is_latest() -> None:
    [r] = await _run(_wl(), _view({ENFORCE: "restricted", P.ENFORCE_VERSION_LABEL: "1.30"}))
    assert r.status is Status.FAIL
    assert '"restricted:latest"' in r.message
    assert 'Invalid value: "1.30": must be "latest" or "v1.x"' in r.message


async def test_warn_and_audit_labels_never_fail_they_inform() -> None:
    labels = {
        ENFORCE: "baseline",
        P.WARN_LABEL: "restricted",
        P.AUDIT_LABEL: "restricted",
        P.AUDIT_VERSION_LABEL: "v1.24",
    }
    pass_, info = await _run(_wl(), _view(labels))
    assert pass_.status is Status.PASS
    assert info.status is Status.INFO
    assert info.details == [
        'Pod Security "restricted:latest" of namespace "team-a" (label pod-security.kubernetes.io/warn=restricted) '
        'would warn about the node pods: seccompProfile (pod or container "node" must set '
        'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"); they are created anyway',
        'Pod Security "restricted:v1.24" of namespace "team-a" (label pod-security.kubernetes.io/audit=restricted, '
        "audit-version=v1.24) would annotate the audit events of the node pods: seccompProfile (pod or container "
        '"node" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"); they are created '
        "anyway",
    ]
    assert info.message == " ".join(info.details)


async def test_exempt_namespace_and_user_pass_without_reading_labels() -> None:
    s = Settings.model_validate({"podSecurity": {"exemptions": {"namespaces": ["team-a"]}}})
    [r] = await _run(_wl(), _view({ENFORCE: "restricted"}), s)
    assert (r.status, r.message) == (
        Status.PASS,
        'Namespace "team-a" is exempt from Pod Security (podSecurity.exemptions.namespaces): its pods are not judged',
    )
    s = Settings.model_validate(
        {
            "podSecurity": {
                "exemptions": {"usernames": ["system:kube-controller-manager"]},
                "podCreator": "system:kube-controller-manager",
            }
        }
    )
    [r] = await _run(_wl(), _view({ENFORCE: "restricted"}), s)
    assert (r.status, r.message) == (
        Status.PASS,
        'The Job controller\'s user "system:kube-controller-manager" is exempt from Pod Security '
        "(podSecurity.exemptions.usernames): the pods it creates are not judged",
    )
    # exempting another user changes nothing
    s = Settings.model_validate({"podSecurity": {"exemptions": {"usernames": ["alice"]}}})
    [r] = await _run(_wl(), _view({ENFORCE: "restricted"}), s)
    assert r.status is Status.FAIL


async def test_exempt_runtime_class_group_is_not_judged_and_named_in_the_assumption() -> None:
    kata = pod(container("node"), runtimeClassName="kata")
    gvisor = pod(container("side"), runtimeClassName="gvisor")
    s = Settings.model_validate({"podSecurity": {"exemptions": {"runtimeClasses": ["kata"]}}})
    [r] = await _run(_wl(PodGroup("node", 1, kata)), _view({ENFORCE: "restricted"}), s)
    assert (r.status, r.message) == (
        Status.PASS,
        'Pod Security "restricted:latest" of namespace "team-a" (label pod-security.kubernetes.io/enforce=restricted) '
        "admits the pods of none; not judged (exempt runtimeClassName): node (kata)",
    )
    [r] = await _run(_wl(PodGroup("node", 1, kata), PodGroup("side", 1, gvisor)), _view({ENFORCE: "restricted"}), s)
    assert r.status is Status.FAIL
    assert "forbids the side pods" in r.message and "node pods" not in r.message
    assert r.message.endswith(
        'exempts none of namespace "team-a", the pods\' creator "system:serviceaccount:kube-system:job-controller", '
        'runtime class "gvisor" (podSecurity settings).'
    )


async def test_namespace_missing_from_cache_warns() -> None:
    [r] = await _run(_wl(), _view(None))
    assert (r.status, r.message) == (
        Status.WARN,
        'Cannot verify Pod Security: namespace "team-a" is not in the cache (its labels decide the level)',
    )


async def test_apiserver_newer_than_the_ported_rules_warns_instead_of_denying() -> None:
    [r] = await _run(_wl(), _view({ENFORCE: "restricted"}, version=(1, 38)))
    assert r.status is Status.WARN
    assert (
        "the job never starts (judged by the v1.37 rules of k8s.io/pod-security-admission v0.37.2; the apiserver is "
        "v1.38, whose rules may differ). Fix:" in r.message
    )
    # a pinned version the rules know is still certain on a newer apiserver
    [r] = await _run(_wl(), _view({ENFORCE: "restricted", P.ENFORCE_VERSION_LABEL: "v1.30"}, version=(1, 38)))
    assert r.status is Status.FAIL


@pytest.mark.parametrize("minor", [35, 36, 37])
async def test_apiservers_up_to_v1_37_are_judged_with_certainty(minor: int) -> None:
    [r] = await _run(_wl(), _view({ENFORCE: "restricted"}, version=(1, minor)))
    assert r.status is Status.FAIL
    assert "whose rules may differ" not in r.message


async def test_unknown_apiserver_version_warns() -> None:
    [r] = await _run(_wl(), _view({ENFORCE: "restricted"}, version=None))
    assert r.status is Status.WARN
    assert "(the apiserver's version is unknown; judged by the rules of k8s.io/pod-security-admission v0.37.2)" in (
        r.message
    )


async def test_an_older_apiserver_judges_latest_by_its_own_rules() -> None:
    """A probe host is forbidden from v1.34 on (check_hostProbesAndhostLifecycle.go): a v1.33 apiserver's
    latest does not know that check."""
    probe = {"httpGet": {"port": 8080, "host": "10.0.0.1"}}
    wl = _wl(PodGroup("node", 1, pod(container("node", livenessProbe=probe))))
    [r] = await _run(wl, _view({ENFORCE: "baseline"}, version=(1, 34)))
    assert r.status is Status.FAIL
    assert 'probe or lifecycle host (container "node" uses probe or lifecycle host "10.0.0.1")' in r.message
    [r] = await _run(wl, _view({ENFORCE: "baseline"}, version=(1, 33)))
    assert r.status is Status.PASS


async def test_host_network_ports_are_defaulted_to_host_ports_first() -> None:
    spec = pod(container("node", ports=[{"containerPort": 8080}]), hostNetwork=True)
    assert as_created(spec)["containers"][0]["ports"] == [{"containerPort": 8080, "hostPort": 8080}]
    assert spec["containers"][0]["ports"] == [{"containerPort": 8080}]  # not mutated
    [r] = await _run(_wl(PodGroup("node", 1, spec)), _view({ENFORCE: "baseline"}))
    assert (
        'forbids the node pods: host namespaces (hostNetwork=true), hostPort (container "node" uses hostPort 8080);'
        in r.message
    )


USERNS_SC = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
RELAX = Settings.model_validate({"podSecurity": {"relaxForUserNamespaces": True}})


def _userns_wl(**sc: Any) -> Any:
    """A restricted-compliant pod but for runAsNonRoot, in a user namespace (hostUsers: false)."""
    spec = pod(
        container("node", securityContext={**USERNS_SC, **sc}),
        hostUsers=False,
        securityContext={"seccompProfile": {"type": "RuntimeDefault"}},
    )
    return _wl(PodGroup("node", 1, spec))


async def test_user_namespace_relaxation_follows_the_feature_gate_setting() -> None:
    """A v1.34 apiserver (k8s.io/pod-security-admission v0.34.4): the UserNamespacesPodSecurityStandards gate."""
    wl = _userns_wl()
    [r] = await _run(wl, _view({ENFORCE: "restricted"}))
    assert r.status is Status.FAIL and "runAsNonRoot != true" in r.message
    [r] = await _run(wl, _view({ENFORCE: "restricted"}), RELAX)
    assert r.status is Status.PASS
    # the gate relaxed every policy version, 1.0 on
    [r] = await _run(wl, _view({ENFORCE: "restricted", P.ENFORCE_VERSION_LABEL: "v1.25"}), RELAX)
    assert r.status is Status.PASS


@pytest.mark.parametrize("minor", [35, 37])
@pytest.mark.parametrize("settings", [None, RELAX])
async def test_user_namespace_relaxation_is_unconditional_from_v1_35_at_policy_1_35_and_later(
    minor: int, settings: Settings | None
) -> None:
    """v0.35+ check_runAsNonRoot.go / check_runAsUser.go: runAsNonRoot1_35 and runAsUser1_35 always relax a
    hostUsers: false pod; the 1.0 / 1.23 versions never do. relaxForUserNamespaces has no effect."""
    wl = _userns_wl(runAsUser=0)
    [r] = await _run(wl, _view({ENFORCE: "restricted"}, version=(1, minor)), settings)
    assert (r.status, r.message) == (
        Status.PASS,
        'Pod Security "restricted:latest" of namespace "team-a" (label pod-security.kubernetes.io/enforce=restricted) '
        "admits the pods of node",
    )
    [r] = await _run(wl, _view({ENFORCE: "restricted", P.ENFORCE_VERSION_LABEL: "v1.34"}, version=(1, minor)), settings)
    assert r.status is Status.FAIL
    assert (
        'forbids the node pods: runAsNonRoot != true (pod or container "node" must set '
        'securityContext.runAsNonRoot=true), runAsUser=0 (container "node" must not set runAsUser=0);' in r.message
    )


async def test_unmasked_proc_mount_in_a_user_namespace_is_baseline_but_not_restricted_from_v1_35() -> None:
    """v0.35 check_procMount_baseline.go relaxes procMount for hostUsers: false at 1.35; the restricted level's
    procMount_restricted (check_procMount_restricted.go) keeps the unconditional check and overrides it."""
    wl = _userns_wl(runAsNonRoot=True, procMount="Unmasked")
    [r] = await _run(wl, _view({ENFORCE: "baseline"}, version=(1, 35)))
    assert r.status is Status.PASS
    [r] = await _run(wl, _view({ENFORCE: "baseline", P.ENFORCE_VERSION_LABEL: "v1.34"}, version=(1, 35)))
    assert r.status is Status.FAIL
    [r] = await _run(wl, _view({ENFORCE: "restricted"}, version=(1, 37)), RELAX)
    assert r.status is Status.FAIL
    assert r.message.startswith(
        'Pod Security "restricted:latest" of namespace "team-a" (label pod-security.kubernetes.io/enforce=restricted) '
        'forbids the node pods: procMount (container "node" must not set securityContext.procMount to "Unmasked"); '
        "the Job controller cannot create them (FailedCreate) and the job never starts. Fix: give the node pod "
        "template no securityContext.procMount other than Default (or have an admin relax "
        'pod-security.kubernetes.io/enforce on namespace "team-a").'
    )
    # a v1.34 apiserver with the gate on relaxed procMount at every level
    [r] = await _run(wl, _view({ENFORCE: "restricted"}, version=(1, 34)), RELAX)
    assert r.status is Status.PASS


async def test_sysctls_added_in_v1_37_are_baseline_on_a_v1_37_apiserver_only() -> None:
    """v0.37 check_sysctls.go: net.ipv4.tcp_slow_start_after_idle and net.ipv4.tcp_notsent_lowat from 1.37."""
    sysctls = [{"name": "net.ipv4.tcp_slow_start_after_idle", "value": "0"}]
    wl = _wl(PodGroup("node", 1, pod(container("node"), securityContext={"sysctls": sysctls})))
    [r] = await _run(wl, _view({ENFORCE: "baseline"}, version=(1, 37)))
    assert r.status is Status.PASS
    for labels, minor in (({ENFORCE: "baseline"}, 36), ({ENFORCE: "baseline", P.ENFORCE_VERSION_LABEL: "v1.36"}, 37)):
        [r] = await _run(wl, _view(labels, version=(1, minor)))
        assert r.status is Status.FAIL
        assert "forbids the node pods: forbidden sysctls (net.ipv4.tcp_slow_start_after_idle);" in r.message
        assert "Fix: give the node pod template only the sysctls the level allows (or" in r.message


async def test_stale_namespace_cache_is_noted() -> None:
    [r] = await _run(_wl(), _view({ENFORCE: "restricted"}, cache_ages={"namespaces": 400.0}))
    assert r.caveats == ["cached namespaces are 400s old (over cacheStaleSeconds 120); this verdict may be out of date"]


def test_settings_validate_levels_and_versions_as_upstream_parses_them(tmp_path: Any) -> None:
    s = Settings()
    assert s.pod_security.defaults.enforce == "privileged"
    assert s.pod_security.defaults.enforce_version == "latest"
    assert s.pod_security.exemptions.usernames == []
    for bad in (
        "podSecurity: {defaults: {enforce: Restricted}}\n",
        "podSecurity: {defaults: {warn-version: '1.30'}}\n",
    ):
        p = tmp_path / "c.yaml"
        p.write_text(bad)
        with pytest.raises(ConfigError, match="podSecurity.defaults"):
            load_settings(p)
    p = tmp_path / "ok.yaml"
    p.write_text("podSecurity: {defaults: {audit: restricted, audit-version: v1.25}}\n")
    assert load_settings(p).pod_security.defaults.audit_version == "v1.25"


def test_policy_to_evaluate_defaults_warn_to_a_stricter_enforce() -> None:
    """api/helpers.go: enforce set without warn raises warn to it (with its version)."""
    d = P.LevelVersion("privileged", P.LATEST)
    policy, errs = P.policy_to_evaluate({ENFORCE: "baseline", P.ENFORCE_VERSION_LABEL: "v1.25"}, P.Policy(d, d, d))
    assert (str(policy.enforce), str(policy.warn), str(policy.audit), errs) == (
        "baseline:v1.25",
        "baseline:v1.25",
        "privileged:latest",
        [],
    )
