"""Volume Claims: every status and the exact wording, from claims read by name and cached
StorageClasses / PersistentVolumes (pure logic; the real apiserver is in e2e/test_storage_live.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakeview import FakeView, container, meta, pod, run_check, run_check_all, workload
from webhook.checks.storage import VolumeClaims, Want, default_class, mismatch
from webhook.config import Settings
from webhook.kube import ApiError
from webhook.results import Status
from webhook.workloads.base import PodGroup

NS = "team-a"
SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}
TUNE = (
    'PersistentVolumeClaim "initializer-tune" (JobSet volumeClaimPolicies template "initializer", '
    "used by the dataset-initializer, model-initializer, node pods)"
)
DATA = 'PersistentVolumeClaim "data" (volume "data" of the node pods)'
DEFAULT_ANN = {"storageclass.kubernetes.io/is-default-class": "true"}


def torchtune(spec: dict[str, Any] | None = None, **template_meta: Any) -> Any:
    """The torchtune shape: a JobSet template mounted by three groups (webhook/workloads/trainjob/jobset.py)."""
    vol = {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer-tune"}}
    groups = [
        PodGroup(n, 1, pod(container("c"), volumes=[vol])) for n in ("dataset-initializer", "model-initializer", "node")
    ]
    template = {"metadata": {"name": "initializer", **template_meta}, "spec": SPEC if spec is None else spec}
    js = {"metadata": {"name": "tune"}, "spec": {"volumeClaimPolicies": [{"templates": [template]}]}}
    return workload(groups, name="tune", derived={"jobSet": js})


def claim_job(*claims: str, pods: int = 2) -> Any:
    vols = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return workload([PodGroup("node", pods, pod(container("c"), volumes=vols))])


def ephemeral_job(pods: int, spec: dict[str, Any] | None = None) -> Any:
    vol = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": SPEC if spec is None else spec}}}
    return workload([PodGroup("node", pods, pod(container("c"), volumes=[vol]))])


def sc(
    name: str, provisioner: str = "rancher.io/local-path", *, default: bool = False, created: str = "", **extra: Any
) -> dict:
    m = meta(name, annotations=dict(DEFAULT_ANN) if default else {})
    if created:
        m["creationTimestamp"] = created
    return {"metadata": m, "provisioner": provisioner, "volumeBindingMode": "Immediate", **extra}


def pv(
    name: str,
    size: str = "20Gi",
    cls: str = "",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    phase: str = "Available",
    labels: dict | None = None,
    **spec: Any,
) -> dict:
    return {
        "metadata": meta(name, labels=labels or {"tier": "fast"}),
        "spec": {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls, **spec},
        "status": {"phase": phase},
    }


def pvc(name: str, phase: str = "Bound", volume: str = "pv-1", **spec: Any) -> dict:
    return {
        "metadata": meta(name, NS, uid="u-1"),
        "spec": {**SPEC, **({"volumeName": volume} if volume else {}), **spec},
        "status": {"phase": phase},
    }


def view(classes: list | None = None, pvs: list | None = None, claims: dict | None = None, **kw: Any) -> FakeView:
    live = {("persistentvolumeclaims", NS, n): v for n, v in (claims or {}).items()}
    return FakeView({"storageclasses": classes or [], "persistentvolumes": pvs or []}, live=live, **kw)


# --------------------------------------------------------------------------- statuses


async def test_skip_without_claims() -> None:
    r = await run_check(VolumeClaims(), workload([PodGroup("node", 1, pod(container("c")))]), view())
    assert (r.status, r.message) == (Status.SKIP, "No PersistentVolumeClaims used by the pods")


async def test_torchtune_without_storage_fails_with_the_fix() -> None:
    r = await run_check(VolumeClaims(), torchtune(), view())
    assert (r.status, r.message) == (
        Status.FAIL,
        f"{TUNE} can never bind: it names no StorageClass and the cluster has no default StorageClass, so only a "
        'PersistentVolume can bind it, and none matches (class "", 20Gi, ReadWriteOnce): no PersistentVolume has '
        'class ""; the pods would stay Pending (pod has unbound immediate PersistentVolumeClaims). Fix: mark a '
        'StorageClass default (annotation storageclass.kubernetes.io/is-default-class: "true"), set storageClassName '
        'in the template, or create a PersistentVolume of class "" with at least 20Gi and ReadWriteOnce',
    )


async def test_torchtune_with_a_default_class_passes() -> None:
    r = await run_check(VolumeClaims(), torchtune(), view([sc("standard", default=True), sc("other")]))
    assert (r.status, r.message) == (
        Status.PASS,
        f'Every claim can bind: {TUNE}: the default StorageClass "standard" provisions it (rancher.io/local-path; '
        "provisioner health not judged)",
    )


async def test_torchtune_with_a_matching_pv_passes() -> None:
    pvs = [pv("pv-big", "100Gi"), pv("pv-fit", "20Gi"), pv("pv-small", "10Gi")]
    r = await run_check(VolumeClaims(), torchtune(), view(pvs=pvs))
    assert (r.status, r.message) == (
        Status.PASS,
        f"Every claim can bind: {TUNE}: it names no StorageClass and the cluster has no default StorageClass; "
        'PersistentVolume "pv-fit" matches it',
    )


def test_several_defaults_the_newest_then_the_first_name() -> None:
    """pkg/volume/util/storageclass.go GetDefaultClass."""
    old, new = "2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z"
    got = default_class(
        [sc("a", default=True, created=old), sc("c", default=True, created=new), sc("b", default=True, created=new)]
    )
    assert got is not None and got["metadata"]["name"] == "b"
    beta = sc("beta")
    beta["metadata"]["annotations"] = {"storageclass.beta.kubernetes.io/is-default-class": "true"}
    assert default_class([sc("x"), beta]) is beta
    assert default_class([sc("x")]) is None


async def test_missing_storage_class_fails() -> None:
    r = await run_check(VolumeClaims(), torchtune({**SPEC, "storageClassName": "fast"}), view([sc("standard")]))
    assert (r.status, r.message) == (
        Status.FAIL,
        f'{TUNE} can never bind: StorageClass "fast" does not exist, so only a PersistentVolume can bind it, and none '
        'matches (class "fast", 20Gi, ReadWriteOnce): no PersistentVolume has class "fast"; the pods would stay '
        'Pending (pod has unbound immediate PersistentVolumeClaims). Fix: create StorageClass "fast", use an existing '
        'one (existing: standard), or create a PersistentVolume of class "fast" with at least 20Gi and ReadWriteOnce',
    )


async def test_missing_storage_class_with_a_pv_of_that_class_passes() -> None:
    """The PV controller binds by class name; the StorageClass object is only needed to provision."""
    r = await run_check(
        VolumeClaims(), torchtune({**SPEC, "storageClassName": "fast"}), view(pvs=[pv("pv-1", cls="fast")])
    )
    assert r.status is Status.PASS, r.message


async def test_beta_annotation_names_the_class() -> None:
    wl = torchtune(annotations={"volume.beta.kubernetes.io/storage-class": "fast"})
    r = await run_check(VolumeClaims(), wl, view([sc("standard", default=True)]))
    assert r.status is Status.FAIL and 'StorageClass "fast" does not exist' in r.message


async def test_empty_class_needs_a_pv_even_with_a_default() -> None:
    r = await run_check(
        VolumeClaims(),
        torchtune({**SPEC, "storageClassName": ""}),
        view([sc("standard", default=True)], [pv("pv-1", "5Gi")]),
    )
    assert (r.status, r.message) == (
        Status.FAIL,
        f'{TUNE} can never bind: storageClassName "" asks for a pre-provisioned PersistentVolume, so only a '
        'PersistentVolume can bind it, and none matches (class "", 20Gi, ReadWriteOnce): 1 PersistentVolume of class '
        '"" does not fit ("pv-1": 5Gi, less than 20Gi); the pods would stay Pending (pod has unbound immediate '
        "PersistentVolumeClaims). Fix: set storageClassName in the template to a StorageClass that provisions "
        '(existing: standard), or create a PersistentVolume of class "" with at least 20Gi and ReadWriteOnce',
    )


async def test_no_provisioner_wait_for_first_consumer_needs_a_pv() -> None:
    local = sc("local", "kubernetes.io/no-provisioner", volumeBindingMode="WaitForFirstConsumer")
    r = await run_check(VolumeClaims(), torchtune({**SPEC, "storageClassName": "local"}), view([local]))
    assert (r.status, r.message) == (
        Status.FAIL,
        f'{TUNE} can never bind: StorageClass "local" cannot provision (provisioner kubernetes.io/no-provisioner), so '
        'only a PersistentVolume can bind it, and none matches (class "local", 20Gi, ReadWriteOnce): no '
        'PersistentVolume has class "local"; the pods would stay Pending (node(s) didn\'t find available persistent '
        'volumes to bind). Fix: use a StorageClass that provisions, or create a PersistentVolume of class "local" '
        "with at least 20Gi and ReadWriteOnce",
    )


async def test_a_default_class_that_cannot_provision_needs_a_pv() -> None:
    local = sc("local", "kubernetes.io/no-provisioner", default=True)
    r = await run_check(VolumeClaims(), torchtune(), view([local], [pv("pv-1", cls="local")]))
    assert r.message == (
        f'Every claim can bind: {TUNE}: the default StorageClass "local" cannot provision (provisioner '
        'kubernetes.io/no-provisioner); PersistentVolume "pv-1" matches it'
    )


async def test_wait_for_first_consumer_with_a_provisioner_passes() -> None:
    wfc = sc("wfc", "ebs.csi.aws.com", volumeBindingMode="WaitForFirstConsumer")
    r = await run_check(VolumeClaims(), torchtune({**SPEC, "storageClassName": "wfc"}), view([wfc]))
    assert r.message == (
        f'Every claim can bind: {TUNE}: StorageClass "wfc" provisions it (ebs.csi.aws.com, WaitForFirstConsumer; '
        "provisioner health not judged)"
    )


async def test_a_template_claim_that_exists_is_kept_by_jobset() -> None:
    """volume_claim_policy.go createPVCsIfNecessary: AlreadyExists is fine, the existing claim is used."""
    r = await run_check(VolumeClaims(), torchtune(), view(claims={"initializer-tune": pvc("initializer-tune")}))
    assert (
        r.message == f'Every claim can bind: {TUNE}: Bound to PersistentVolume "pv-1" (exists already: JobSet keeps it)'
    )


# --------------------------------------------------------------------------- claims by name


async def test_missing_claim_fails_with_the_fix() -> None:
    r = await run_check(VolumeClaims(), claim_job("data"), view())
    assert (r.status, r.message) == (
        Status.FAIL,
        f'PersistentVolumeClaim "data" not found in namespace "{NS}" (volume "data" of the node pods): the pods would '
        'stay Pending (persistentvolumeclaim "data" not found). Fix: create PersistentVolumeClaim "data" in '
        f'namespace "{NS}", or correct the claimName',
    )


async def test_bound_claim_passes() -> None:
    r = await run_check(VolumeClaims(), claim_job("data"), view(claims={"data": pvc("data")}))
    assert (r.status, r.message) == (Status.PASS, f'Every claim can bind: {DATA}: Bound to PersistentVolume "pv-1"')


async def test_claim_being_deleted_fails() -> None:
    c = pvc("data")
    c["metadata"]["deletionTimestamp"] = "2026-12-01T08:00:00Z"
    r = await run_check(VolumeClaims(), claim_job("data"), view(claims={"data": c}))
    assert (r.status, r.message) == (
        Status.FAIL,
        f'{DATA} is being deleted: the scheduler refuses it (persistentvolumeclaim "data" is being deleted), then it '
        "is gone. Fix: wait until it is deleted and create it again, or use another claim",
    )


async def test_lost_claim_warns() -> None:
    r = await run_check(VolumeClaims(), claim_job("data"), view(claims={"data": pvc("data", "Lost")}))
    assert (r.status, r.message) == (
        Status.WARN,
        f'{DATA} is Lost: its PersistentVolume "pv-1" is gone and the pods would stay Pending (bound to non-existent '
        'persistentvolume). Fix: recreate PersistentVolume "pv-1", or use another claim',
    )


async def test_pending_claim_that_can_never_bind_warns() -> None:
    r = await run_check(VolumeClaims(), claim_job("data"), view(claims={"data": pvc("data", "Pending", "")}))
    assert (r.status, r.message) == (
        Status.WARN,
        f"{DATA} is Pending and can never bind: it names no StorageClass and the cluster has no default StorageClass, "
        'so only a PersistentVolume can bind it, and none matches (class "", 20Gi, ReadWriteOnce): no PersistentVolume '
        'has class ""; the pods would stay Pending (pod has unbound immediate PersistentVolumeClaims). Fix: mark a '
        'StorageClass default (annotation storageclass.kubernetes.io/is-default-class: "true"), set storageClassName in '
        'the claim, or create a PersistentVolume of class "" with at least 20Gi and ReadWriteOnce',
    )


async def test_pending_claim_a_default_class_will_take_passes() -> None:
    """pv_controller.go syncUnboundClaim: assignDefaultStorageClass (retroactive) for a claim with no class."""
    r = await run_check(
        VolumeClaims(),
        claim_job("data"),
        view([sc("standard", default=True)], claims={"data": pvc("data", "Pending", "")}),
    )
    assert r.message == (
        f'Every claim can bind: {DATA}: Pending; the default StorageClass "standard" provisions it '
        "(rancher.io/local-path; provisioner health not judged)"
    )


async def test_pending_claim_asking_for_a_pv() -> None:
    job = claim_job("data")
    claims = {"data": pvc("data", "Pending", "pv-9")}
    r = await run_check(VolumeClaims(), job, view(claims=claims))
    assert (r.status, r.message) == (
        Status.WARN,
        f'{DATA} is Pending: it asks for PersistentVolume "pv-9", which does not exist; the pods would stay Pending '
        '(pod has unbound immediate PersistentVolumeClaims). Fix: create PersistentVolume "pv-9", or clear spec.volumeName',
    )
    taken = pv("pv-9", claimRef={"namespace": "other", "name": "x"})
    r = await run_check(VolumeClaims(), job, view(pvs=[taken], claims=claims))
    assert (r.status, r.message) == (
        Status.WARN,
        f'{DATA} is Pending: PersistentVolume "pv-9" it asks for is bound to claim other/x; the pods would stay Pending '
        "(pod has unbound immediate PersistentVolumeClaims). Fix: use another claim",
    )
    r = await run_check(VolumeClaims(), job, view(pvs=[pv("pv-9")], claims=claims))
    assert (r.status, r.message) == (
        Status.PASS,
        f'Every claim can bind: {DATA}: Pending, binding to PersistentVolume "pv-9"',
    )


@pytest.mark.parametrize(
    ("error", "why"),
    [
        (ApiError(403, "forbidden"), "not permitted to get persistentvolumeclaims"),
        (ApiError(0, "timed out"), "timed out"),
        (ApiError(500, "etcdserver: leader changed"), "etcdserver: leader changed"),
    ],
)
async def test_unreadable_claim_warns(error: ApiError, why: str) -> None:
    r = await run_check(VolumeClaims(), claim_job("data"), view(claims={"data": error}))
    assert (r.status, r.message) == (
        Status.WARN,
        f'Cannot verify PersistentVolumeClaim "data" in namespace "{NS}" ({why})',
    )


async def test_a_failure_and_a_warning_both_reported() -> None:
    rs = await run_check_all(VolumeClaims(), claim_job("gone", "data"), view(claims={"data": pvc("data", "Lost")}))
    assert [r.status for r in rs] == [Status.FAIL, Status.WARN]
    assert rs[0].message.startswith('PersistentVolumeClaim "gone" not found')
    assert rs[1].message.startswith('PersistentVolumeClaim "data" (volume "data" of the node pods) is Lost')


# --------------------------------------------------------------------------- ephemeral volumes and PV matching


async def test_ephemeral_needs_one_pv_per_pod() -> None:
    spec = {**SPEC, "storageClassName": ""}
    r = await run_check(VolumeClaims(), ephemeral_job(2, spec), view(pvs=[pv("pv-a")]))
    assert (r.status, r.message) == (
        Status.FAIL,
        'Ephemeral volume "scratch" of the node pods (a claim <pod>-scratch per pod) can never bind (1 of the 2 needed): '
        'storageClassName "" asks for a pre-provisioned PersistentVolume, so only a PersistentVolume can bind it, and '
        'none matches (class "", 20Gi, ReadWriteOnce): no PersistentVolume has class ""; the pods would stay Pending '
        "(pod has unbound immediate PersistentVolumeClaims). Fix: set storageClassName in the template to a "
        'StorageClass that provisions, or create a PersistentVolume of class "" with at least 20Gi and ReadWriteOnce',
    )
    r = await run_check(VolumeClaims(), ephemeral_job(2, spec), view(pvs=[pv("pv-a"), pv("pv-b")]))
    assert r.message == (
        'Every claim can bind: Ephemeral volume "scratch" of the node pods (a claim <pod>-scratch per pod): storageClassName '
        '"" asks for a pre-provisioned PersistentVolume; PersistentVolumes "pv-a", "pv-b" match it'
    )


async def test_claims_take_pvs_smallest_request_first() -> None:
    """binder.go findMatchingVolumes: sorted by request, each the smallest matching PV, not reused."""
    big = {
        "name": "big",
        "ephemeral": {
            "volumeClaimTemplate": {
                "spec": {**SPEC, "storageClassName": "", "resources": {"requests": {"storage": "50Gi"}}}
            }
        },
    }
    small = {"name": "small", "ephemeral": {"volumeClaimTemplate": {"spec": {**SPEC, "storageClassName": ""}}}}
    wl = workload([PodGroup("node", 1, pod(container("c"), volumes=[big, small]))])
    r = await run_check(VolumeClaims(), wl, view(pvs=[pv("pv-50", "50Gi"), pv("pv-100", "100Gi")]))
    assert r.status is Status.PASS
    assert r.details == [
        'Ephemeral volume "big" of the node pods (a claim <pod>-big per pod): storageClassName "" asks for a '
        'pre-provisioned PersistentVolume; PersistentVolume "pv-100" matches it',
        'Ephemeral volume "small" of the node pods (a claim <pod>-small per pod): storageClassName "" asks for a '
        'pre-provisioned PersistentVolume; PersistentVolume "pv-50" matches it',
    ]


async def test_the_pv_controller_prefers_fewer_access_modes() -> None:
    """index.go findByClaim: mode sets fewest first, then the smallest PV; the scheduler: the smallest."""
    pvs = [pv("rwo-100", "100Gi"), pv("rwo-rox-20", "20Gi", modes=("ReadWriteOnce", "ReadOnlyMany"))]
    r = await run_check(VolumeClaims(), torchtune({**SPEC, "storageClassName": ""}), view(pvs=pvs))
    assert r.message.endswith('PersistentVolume "rwo-100" matches it')
    local = sc("local", "kubernetes.io/no-provisioner", volumeBindingMode="WaitForFirstConsumer")
    pvs = [
        pv("rwo-100", "100Gi", cls="local"),
        pv("rwo-rox-20", "20Gi", cls="local", modes=("ReadWriteOnce", "ReadOnlyMany")),
    ]
    r = await run_check(VolumeClaims(), torchtune({**SPEC, "storageClassName": "local"}), view([local], pvs))
    assert r.message.endswith('PersistentVolume "rwo-rox-20" matches it')


@pytest.mark.parametrize(
    ("volume", "why"),
    [
        (pv("p", "10Gi"), "10Gi, less than 20Gi"),
        (pv("p", modes=("ReadOnlyMany",)), "access modes ReadOnlyMany, not ReadWriteOnce"),
        (pv("p", volumeMode="Block"), "volumeMode Block, not Filesystem"),
        (pv("p", volumeAttributesClassName="gold"), 'volumeAttributesClassName "gold", not ""'),
        (pv("p", phase="Released"), "phase Released"),
        (pv("p", cls="fast"), 'class "fast"'),
        (pv("p", claimRef={"namespace": "other", "name": "x"}), "bound to claim other/x"),
        (pv("p", labels={"tier": "slow"}), "its labels do not match the claim's selector"),
        (pv("p", phase="Pending"), ""),  # the PV controller makes an unclaimed PV Available
        (pv("p", "30Gi", modes=("ReadWriteOnce", "ReadOnlyMany")), ""),
    ],
)
def test_pv_matching_follows_find_matching_volume(volume: dict, why: str) -> None:
    spec = {**SPEC, "selector": {"matchLabels": {"tier": "fast"}}}
    assert mismatch(volume, Want(NS, "c", "", spec), None) == why


def test_pv_being_deleted_and_pre_bound() -> None:
    gone = pv("p")
    gone["metadata"]["deletionTimestamp"] = "2026-12-01T08:00:00Z"
    assert mismatch(gone, Want(NS, "c", "", SPEC), None) == "being deleted"
    # pre-bound to this claim (pv_helpers.go IsVolumeBoundToClaim): phase, selector and class do not matter
    # to the PV controller, but its access-mode index lists only PVs that have the claim's modes
    want = Want(NS, "c", "", SPEC)
    pre = pv("p", cls="other", phase="Released", claimRef={"namespace": NS, "name": "c"})
    assert mismatch(pre, want, None) == ""
    # the scheduler (WaitForFirstConsumer) lists only PVs of the claim's class, then takes a pre-bound
    # one before it looks at access modes
    assert mismatch(pre, want, None, delayed=True) == 'class "other"'
    rox = pv("p", phase="Released", modes=("ReadOnlyMany",), claimRef={"namespace": NS, "name": "c"})
    assert mismatch(rox, want, None) == "access modes ReadOnlyMany, not ReadWriteOnce"
    assert mismatch(rox, want, None, delayed=True) == ""
    pre["spec"]["claimRef"]["uid"] = "u-other"
    assert mismatch(pre, want, None) == "bound to claim team-a/c"


async def test_a_pv_pre_bound_to_the_template_claim_wins() -> None:
    pre = pv("mine", "100Gi", cls="other", claimRef={"namespace": NS, "name": "initializer-tune"})
    r = await run_check(VolumeClaims(), torchtune(), view(pvs=[pv("pv-fit"), pre]))
    assert r.message.endswith('PersistentVolume "mine" matches it')


def _local_pv(node: str) -> dict:
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
    return pv("local-1", nodeAffinity={"required": {"nodeSelectorTerms": [term]}})


async def test_pv_node_affinity_no_node_matches_warns() -> None:
    nodes = [{"metadata": meta("n1", labels={"kubernetes.io/hostname": "n1"})}]
    wl = torchtune({**SPEC, "storageClassName": ""})
    r = await run_check(VolumeClaims(), wl, FakeView({"persistentvolumes": [_local_pv("n2")], "nodes": nodes}))
    assert r.status is Status.WARN
    assert '"local-1": its node affinity matches no node of the cluster' in r.message
    assert r.message.endswith(" (or a node matching a PersistentVolume's node affinity may still join)")
    r = await run_check(VolumeClaims(), wl, FakeView({"persistentvolumes": [_local_pv("n1")], "nodes": nodes}))
    assert r.status is Status.PASS, r.message


# --------------------------------------------------------------------------- unreadable caches


async def test_storage_classes_unreadable_warns() -> None:
    r = await run_check(VolumeClaims(), torchtune(), view(cache_ages={"storageclasses": None}))
    assert (r.status, r.message) == (
        Status.WARN,
        f"Cannot verify {TUNE}: StorageClasses cannot be read (not permitted to list storageclasses.storage.k8s.io)",
    )
    assert r.caveats == []  # nothing read from a cache that is not there


async def test_persistent_volumes_unreadable_warns() -> None:
    r = await run_check(VolumeClaims(), torchtune(), view(cache_ages={"persistentvolumes": None}))
    assert (r.status, r.message) == (
        Status.WARN,
        f"Cannot verify {TUNE}: it names no StorageClass and the cluster has no default StorageClass, and "
        "PersistentVolumes cannot be read (not permitted to list persistentvolumes)",
    )


async def test_stale_caches_are_caveats() -> None:
    r = await run_check(
        VolumeClaims(), torchtune(), view([sc("standard", default=True)], cache_ages={"storageclasses": 300.0}),
        Settings(),
    )  # fmt: skip
    assert r.status is Status.PASS
    assert r.caveats == [
        "cached storageclasses are 300s old (over cacheStaleSeconds 120); this verdict may be out of date"
    ]


def test_declares_what_it_reads() -> None:
    c = VolumeClaims()
    assert [str(p) for p in c.permissions] == ["get persistentvolumeclaims"]
    assert sorted(str(p) for p in c.optional_permissions) == [
        "list persistentvolumes",
        "list storageclasses.storage.k8s.io",
        "watch persistentvolumes",
        "watch storageclasses.storage.k8s.io",
    ]
    assert c.default_action == "deny" and not c.synchronous
    assert c.local_capacity  # skipped for a MultiKueue job: its claims live in the worker cluster


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["fast", "x"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["fast"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, False),
        ({"matchLabels": {"tier": "fast"}, "matchExpressions": [{"key": "tier", "operator": "Bogus"}]}, False),
        ({"matchLabels": 1}, False),
        ({}, True),
    ],
)
def test_claim_selector(selector: dict, matches: bool) -> None:
    got = mismatch(pv("p"), Want(NS, "c", "", {**SPEC, "selector": selector}), None)
    assert got == ("" if matches else "its labels do not match the claim's selector")


@pytest.mark.parametrize(
    "volumes",
    [
        "x",
        [1, None, {"name": "v"}],
        [{"name": "v", "persistentVolumeClaim": {"claimName": 3}}],
        [{"name": "v", "ephemeral": {"volumeClaimTemplate": "x"}}],
        [
            {
                "name": "v",
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "metadata": 1,
                        "spec": {"resources": {"requests": {"storage": [1]}}, "selector": {"matchExpressions": 2}},
                    }
                },
            }
        ],
    ],
)
async def test_malformed_volumes_never_raise(volumes: Any) -> None:
    """The adapter keeps volume shapes it does not read; the apiserver (Dry Run) judges them."""
    wl = workload([PodGroup("node", 1, {"containers": [container("c")], "volumes": volumes})])
    for r in await run_check_all(VolumeClaims(), wl, view(pvs=[pv("p", cls="")])):
        assert r.status in (Status.SKIP, Status.PASS, Status.FAIL, Status.WARN)
