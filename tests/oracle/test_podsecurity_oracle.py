"""Pod Security oracle: webhook.models.podsecurity against k8s.io/pod-security-admission itself.

tests/oracle/podsecurity/main.go (built against k8s.io/pod-security-admission v0.<minor>.<patch> of
the e2e Kubernetes version by tests/oracle/podsecurity/build.sh) runs upstream's evaluator,
policy.NewEvaluator(policy.DefaultChecks()).EvaluatePod, and api.PolicyToEvaluate. Here a few
hundred generated pods (every field a check reads, with allowed and forbidden values, in every
container list) go through both at every level and at versions where the checks differ, and the
namespace-label cases through both label parsers; every answer must be the same: allowed, the
failing checks' forbidden reasons and details, and admission's message. A fixed grid adds every
hostUsers × procMount × runAsNonRoot/runAsUser combination at both levels, around 1.35 (where
v0.35 moved the user-namespace relaxation), with the gate on and off, and the sysctls around 1.37.

The oracle says which module it was built against (`podsecurity-oracle --version`), and our side
judges as an apiserver of that minor does (`evaluate_pod(..., library=<minor>)`): the same cases
compare at v0.34.x (the gated relaxation) and v0.35+ (the unconditional one).

    PREFLIGHT_PODSECURITY_ORACLE="$(bash tests/oracle/podsecurity/build.sh)" \\
        .venv/bin/python -m pytest tests/oracle/test_podsecurity_oracle.py -q
    PREFLIGHT_PODSECURITY_ORACLE="$(PREFLIGHT_KUBERNETES_VERSION=v1.37.2 bash tests/oracle/podsecurity/build.sh)" \\
        .venv/bin/python -m pytest tests/oracle/test_podsecurity_oracle.py -q

`make test` builds the oracle and sets the variable; a bare `pytest tests` skips these.
"""

from __future__ import annotations

import json
import random
from typing import Any

from tests.oracle._common import GoOracle
from webhook.models import podsecurity as P

ORACLE = GoOracle("podsecurity", "the Pod Security oracle")
pytestmark = ORACLE.skip

SEED = 20261201
POD_CASES = 480
LABEL_CASES = 160

LEVELS = ["privileged", "baseline", "restricted"]
# versions where the checks change: 1.8 allowPrivilegeEscalation, 1.19 seccomp fields, 1.22/1.23
# restricted capabilities and runAsUser, 1.25 Windows pods, 1.27/1.29/1.32 sysctls, 1.31 SELinux
# types, 1.34 probe hosts, 1.35 user-namespace relaxation and procMount_restricted (v0.35+), 1.37
# sysctls (v0.37+); beyond the newest check (1.36, 1.38, 1.99) and latest
VERSIONS = ["latest", "v1.0", "v1.7", "v1.8", "v1.18", "v1.19", "v1.21", "v1.22", "v1.23", "v1.24", "v1.25"] + [
    f"v1.{m}" for m in (26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 99)
]

_CAPS = ["CHOWN", "NET_BIND_SERVICE", "SYS_ADMIN", "NET_RAW", "KILL", "SYS_CHROOT", "ALL", "BPF"]
_SYSCTLS = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_notsent_lowat",
    "kernel.msgmax",
    "net.core.somaxconn",
]
_SECCOMP = ["RuntimeDefault", "Localhost", "Unconfined", ""]
_APPARMOR = ["RuntimeDefault", "Localhost", "Unconfined", ""]
_SELINUX_TYPES = ["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t", "spc_t"]
_VOLUME_KINDS = [
    "configMap",
    "secret",
    "emptyDir",
    "projected",
    "downwardAPI",
    "persistentVolumeClaim",
    "csi",
    "ephemeral",
    "image",
    "hostPath",
    "nfs",
    "gitRepo",
    "iscsi",
    "awsElasticBlockStore",
    "cephfs",
    "flexVolume",
    "azureFile",
    "storageos",
    "photonPersistentDisk",
    None,  # a volume of a type the API does not know: "unknown"
]
_ANNOTATION_VALUES = ["runtime/default", "docker/default", "localhost/prof", "unconfined", "", 'un"conf\u00e9\n']
_NAMES = ["main", "sidecar", "init", "a", "b"]


def _maybe(rng: random.Random, p: float = 0.5) -> bool:
    return rng.random() < p


def _seccomp(rng: random.Random) -> dict[str, Any]:
    t = rng.choice(_SECCOMP)
    return {"type": t, "localhostProfile": "p.json"} if t == "Localhost" else {"type": t}


def _selinux(rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {"type": rng.choice(_SELINUX_TYPES)}
    if _maybe(rng, 0.2):
        out["user"] = "system_u"
    if _maybe(rng, 0.2):
        out["role"] = "system_r"
    if _maybe(rng, 0.3):
        out["level"] = "s0:c1,c2"
    return out


def _handler(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["httpGet", "tcpSocket", "exec"])
    if kind == "exec":
        return {"exec": {"command": ["true"]}}
    action: dict[str, Any] = {"port": 8080}
    if _maybe(rng, 0.4):
        action["host"] = rng.choice(["10.0.0.1", "localhost", "example.com", "127.0.0.1"])
    if kind == "httpGet":
        action["path"] = "/healthz"
    return {kind: action}


def _compliant_sc() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _container(rng: random.Random, compliant: bool) -> dict[str, Any]:
    c: dict[str, Any] = {"name": rng.choice(_NAMES), "image": "busybox:1.36"}
    sc: dict[str, Any] = _compliant_sc() if compliant else {}
    mutations = rng.randint(0, 2) if compliant else rng.randint(0, 6)
    for _ in range(mutations):
        field = rng.choice(
            [
                "ape",
                "privileged",
                "caps",
                "runAsNonRoot",
                "runAsUser",
                "procMount",
                "seccomp",
                "apparmor",
                "selinux",
                "hostProcess",
                "ports",
                "probe",
                "lifecycle",
                "nosc",
            ]
        )
        if field == "ape":
            sc["allowPrivilegeEscalation"] = rng.choice([True, False, None])
        elif field == "privileged":
            sc["privileged"] = rng.choice([True, False])
        elif field == "caps":
            caps: dict[str, Any] = {}
            if _maybe(rng, 0.7):
                caps["drop"] = rng.sample(_CAPS, rng.randint(0, 2))
            if _maybe(rng, 0.6):
                caps["add"] = rng.sample(_CAPS, rng.randint(0, 3))
            sc["capabilities"] = caps
        elif field == "runAsNonRoot":
            sc["runAsNonRoot"] = rng.choice([True, False])
        elif field == "runAsUser":
            sc["runAsUser"] = rng.choice([0, 1000])
        elif field == "procMount":
            sc["procMount"] = rng.choice(["Default", "Unmasked"])
        elif field == "seccomp":
            sc["seccompProfile"] = _seccomp(rng)
        elif field == "apparmor":
            sc["appArmorProfile"] = {"type": rng.choice(_APPARMOR)}
        elif field == "selinux":
            sc["seLinuxOptions"] = _selinux(rng)
        elif field == "hostProcess":
            sc["windowsOptions"] = {"hostProcess": rng.choice([True, False])}
        elif field == "ports":
            c["ports"] = [
                {"containerPort": p, **({"hostPort": rng.choice([p, 9000])} if _maybe(rng, 0.5) else {})}
                for p in rng.sample([80, 8080, 29500], rng.randint(1, 2))
            ]
        elif field == "probe":
            c[rng.choice(["livenessProbe", "readinessProbe", "startupProbe"])] = _handler(rng)
        elif field == "lifecycle":
            c["lifecycle"] = {rng.choice(["postStart", "preStop"]): _handler(rng)}
        elif field == "nosc":
            sc = {}
    if sc or _maybe(rng, 0.3):
        c["securityContext"] = {k: val for k, val in sc.items() if val is not None}
    return c


def _pod(rng: random.Random) -> dict[str, Any]:
    compliant = _maybe(rng, 0.5)
    spec: dict[str, Any] = {"containers": [_container(rng, compliant) for _ in range(rng.randint(1, 3))]}
    if _maybe(rng, 0.3):
        spec["initContainers"] = [_container(rng, compliant)]
    if _maybe(rng, 0.1):
        spec["ephemeralContainers"] = [_container(rng, compliant)]
    psc: dict[str, Any] = {}
    if compliant and _maybe(rng, 0.5):
        # the pod level instead of each container
        psc = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    for _ in range(rng.randint(0, 3 if compliant else 6)):
        field = rng.choice(
            ["hostNS", "hostUsers", "os", "runAsNonRoot", "runAsUser", "seccomp", "apparmor", "selinux", "sysctls"]
            + ["hostProcess", "volumes", "annotations"]
        )
        if field == "hostNS":
            spec[rng.choice(["hostNetwork", "hostPID", "hostIPC"])] = rng.choice([True, False])
        elif field == "hostUsers":
            spec["hostUsers"] = rng.choice([True, False])
        elif field == "os":
            spec["os"] = {"name": rng.choice(["linux", "windows"])}
        elif field == "runAsNonRoot":
            psc["runAsNonRoot"] = rng.choice([True, False])
        elif field == "runAsUser":
            psc["runAsUser"] = rng.choice([0, 1000])
        elif field == "seccomp":
            psc["seccompProfile"] = _seccomp(rng)
        elif field == "apparmor":
            psc["appArmorProfile"] = {"type": rng.choice(_APPARMOR)}
        elif field == "selinux":
            psc["seLinuxOptions"] = _selinux(rng)
        elif field == "sysctls":
            psc["sysctls"] = [{"name": n, "value": "1"} for n in rng.sample(_SYSCTLS, rng.randint(1, 3))]
        elif field == "hostProcess":
            psc["windowsOptions"] = {"hostProcess": rng.choice([True, False])}
    if psc:
        spec["securityContext"] = psc
    meta: dict[str, Any] = {"name": "p"}
    if _maybe(rng, 0.5 if compliant else 0.8):
        volumes = []
        for i in range(rng.randint(1, 3)):
            kind = rng.choice(_VOLUME_KINDS)
            vol: dict[str, Any] = {"name": f"v{i}"}
            if kind is not None:
                vol[kind] = {"path": "/x"} if kind == "hostPath" else {}
            volumes.append(vol)
        spec["volumes"] = volumes
    if _maybe(rng, 0.3):
        names = [c["name"] for c in spec["containers"]]
        ann: dict[str, str] = {}
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(
                [
                    "seccomp.security.alpha.kubernetes.io/pod",
                    f"container.seccomp.security.alpha.kubernetes.io/{rng.choice(names)}",
                    f"container.apparmor.security.beta.kubernetes.io/{rng.choice(names)}",
                    "example.com/other",
                ]
            )
            ann[key] = rng.choice(_ANNOTATION_VALUES)
        meta["annotations"] = ann
    return {"metadata": meta, "spec": spec}


def _label_value(rng: random.Random, key: str) -> str:
    if key.endswith("-version"):
        return rng.choice(["latest", "v1.25", "v1.0", "v1.34", "v1.99", "v1.x", "v2.0", "v1.01", "", "1.25"])
    return rng.choice(["privileged", "baseline", "restricted", "Restricted", "", "bogus"])


def _label_case(rng: random.Random) -> dict[str, Any]:
    keys = [P.ENFORCE_LABEL, P.ENFORCE_VERSION_LABEL, P.AUDIT_LABEL, P.AUDIT_VERSION_LABEL, P.WARN_LABEL]
    keys.append(P.WARN_VERSION_LABEL)
    labels = {k: _label_value(rng, k) for k in rng.sample(keys, rng.randint(0, len(keys)))}
    if _maybe(rng, 0.3):
        labels["team"] = "a"
    defaults = {}
    for mode in ("enforce", "audit", "warn"):
        if _maybe(rng, 0.4):
            defaults[mode] = rng.choice(LEVELS)
        if _maybe(rng, 0.3):
            defaults[f"{mode}-version"] = rng.choice(["latest", "v1.22", "v1.30"])
    return {"labels": labels, "defaults": defaults}


def _ours_labels(case: dict[str, Any]) -> dict[str, Any]:
    d = case["defaults"]

    def lv(mode: str) -> P.LevelVersion:
        return P.LevelVersion(d.get(mode, "privileged"), P.parse_version(d.get(f"{mode}-version", "latest"))[0])

    policy, errs = P.policy_to_evaluate(case["labels"], P.Policy(lv("enforce"), lv("audit"), lv("warn")))
    return {"enforce": str(policy.enforce), "audit": str(policy.audit), "warn": str(policy.warn), "errors": len(errs)}


def _ours_pod(case: dict[str, Any], library: int) -> dict[str, Any]:
    level, _ = P.parse_level(case["level"])
    version, _ = P.parse_version(case["version"])
    lv = P.LevelVersion(level, version)
    results = P.evaluate_pod(
        lv,
        case["pod"]["metadata"],
        case["pod"]["spec"],
        relax_user_namespaces=case["relaxUserNamespaces"],
        library=library,
    )
    bad = P.failing(results)
    out: dict[str, Any] = {"allowed": not bad, "evaluated": str(lv)}
    if bad:
        out["reasons"] = [r.reason for r in bad]
        out["details"] = [r.detail for r in bad]
        out["message"] = f'violates PodSecurity "{lv}": {P.forbidden_detail(results)}'
    return out


def _cases() -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    cases: list[dict[str, Any]] = []
    for i in range(POD_CASES):
        cases.append(
            {
                "pod": _pod(rng),
                # every level at every version a few times over, the rest random
                "level": LEVELS[i % 3] if i < 3 * len(VERSIONS) else rng.choice(LEVELS[1:]),
                "version": VERSIONS[(i // 3) % len(VERSIONS)] if i < 3 * len(VERSIONS) else rng.choice(VERSIONS),
                "relaxUserNamespaces": _maybe(rng, 0.2),
            }
        )
    cases += _grid()
    cases += [_label_case(rng) for _ in range(LABEL_CASES)]
    return cases


GRID_VERSIONS = ["v1.0", "v1.23", "v1.34", "v1.35", "v1.36", "v1.37", "latest"]


def _grid() -> list[dict[str, Any]]:
    """hostUsers × procMount × runAsNonRoot/runAsUser × level × version × gate, and sysctls around 1.37."""
    cases: list[dict[str, Any]] = []
    for host_users in (None, True, False):
        for proc_mount in (None, "Default", "Unmasked"):
            for root in (False, True):
                sc: dict[str, Any] = {**_compliant_sc()}
                if proc_mount is not None:
                    sc["procMount"] = proc_mount
                if root:  # runAsNonRoot=false and runAsUser=0 in the container, runAsUser=0 in the pod
                    sc.update(runAsNonRoot=False, runAsUser=0)
                spec: dict[str, Any] = {
                    "containers": [{"name": "main", "image": "busybox:1.36", "securityContext": sc}]
                }
                if root:
                    spec["securityContext"] = {"runAsUser": 0}
                if host_users is not None:
                    spec["hostUsers"] = host_users
                for level in ("baseline", "restricted"):
                    for version in GRID_VERSIONS:
                        for relax in (False, True):
                            pod = {"metadata": {"name": "p"}, "spec": spec}
                            cases.append({"pod": pod, "level": level, "version": version, "relaxUserNamespaces": relax})
    for names in (
        ["net.ipv4.tcp_slow_start_after_idle"],
        ["net.ipv4.tcp_notsent_lowat", "net.ipv4.tcp_rmem"],
        ["net.ipv4.tcp_notsent_lowat", "kernel.msgmax", "net.ipv4.tcp_slow_start_after_idle"],
    ):
        spec = {
            "containers": [{"name": "main", "image": "busybox:1.36"}],
            "securityContext": {"sysctls": [{"name": n, "value": "1"} for n in names]},
        }
        for version in ("v1.32", "v1.36", "v1.37", "v1.38", "latest"):
            pod = {"metadata": {"name": "p"}, "spec": spec}
            cases.append({"pod": pod, "level": "baseline", "version": version, "relaxUserNamespaces": False})
    return cases


def _oracle_library() -> int:
    """The minor of the k8s.io/pod-security-admission module the oracle was built against."""
    version = ORACLE.call(None, "--version", timeout=30).strip()
    assert version.startswith("v0."), version
    return int(version.split(".")[1])


def _run_oracle(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = ORACLE.run({"cases": cases}, timeout=120)["results"]
    assert len(results) == len(cases)
    return results


def test_every_case_matches_upstream() -> None:
    library = _oracle_library()
    cases = _cases()
    theirs = _run_oracle(cases)
    mismatches = []
    stats = {"allowed": 0, "forbidden": 0, "labels": 0}
    reasons: set[str] = set()
    for case, want in zip(cases, theirs, strict=True):
        assert "error" not in want, (want, case)
        if "pod" in case:
            got = _ours_pod(case, library)
            stats["allowed" if want["allowed"] else "forbidden"] += 1
            reasons.update(want.get("reasons") or [])
        else:
            got = _ours_labels(case)
            stats["labels"] += 1
        if got != want:
            mismatches.append((case, want, got))
    assert not mismatches, f"{len(mismatches)} mismatches; first: {json.dumps(mismatches[0], indent=1)}"
    # the generator reaches both outcomes and every upstream forbidden reason
    assert stats["allowed"] >= 60 and stats["forbidden"] >= 200, stats
    assert reasons >= {
        "allowPrivilegeEscalation != false",
        "forbidden AppArmor profile",
        "forbidden AppArmor profiles",
        "non-default capabilities",
        "unrestricted capabilities",
        "host namespaces",
        "hostPath volumes",
        "hostPort",
        "probe or lifecycle host",
        "privileged",
        "procMount",
        "restricted volume types",
        "runAsNonRoot != true",
        "runAsUser=0",
        "seLinuxOptions",
        "seccompProfile",
        "forbidden sysctls",
        "hostProcess",
    }, sorted(reasons)
    print(f"k8s.io/pod-security-admission v0.{library}: {len(cases)} cases ({stats}), 0 mismatches")


def test_invalid_levels_and_versions_are_refused_alike() -> None:
    """api.ParseLevel / ParseVersion: what the oracle calls an error is what we call one."""
    bad = [
        {"pod": {"spec": {}}, "level": lvl, "version": ver, "relaxUserNamespaces": False}
        for lvl, ver in [("Restricted", "latest"), ("restricted", "v1.x"), ("restricted", "1.25"), ("", "latest")]
    ]
    theirs = _run_oracle(bad)
    for case, want in zip(bad, theirs, strict=True):
        _, level_err = P.parse_level(case["level"])
        _, version_err = P.parse_version(case["version"])
        assert "error" in want
        assert (level_err or version_err) is not None
