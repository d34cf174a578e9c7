"""Volume Claims: every PersistentVolumeClaim the job's pods use exists or will be created, and can bind.

A claim that cannot bind does not fail the job: its pods stay Pending forever. The scheduler's
VolumeBinding plugin (k8s.io/kubernetes v1.34 pkg/scheduler/framework/plugins/volumebinding/
volume_binding.go podHasPVCs, PreFilter; binder.go GetPodVolumeClaims, checkVolumeProvisions) says
`persistentvolumeclaim "x" not found`, `... is being deleted`, `pod has unbound immediate
PersistentVolumeClaims` or `node(s) didn't find available persistent volumes to bind`.

The claims, from every pod group's PodSpec (after the adapter's rendering):
- `persistentVolumeClaim.claimName` volumes: read by name (a live GET, never cached: a claim the
  user creates is judged on the next apply). A claimName that is one of the JobSet's
  `volumeClaimPolicies` templates (`<template>-<jobset>`, sigs.k8s.io/jobset v0.12.0
  pkg/controllers/volume_claim_policy.go GeneratePVCName) is created by the JobSet controller from
  the template, unless a claim of that name exists: `createPVCsIfNecessary` then keeps it.
- `ephemeral.volumeClaimTemplate`: one claim `<pod>-<volume>` per pod, made by the ephemeral
  volume controller (pkg/controller/volume/ephemeral); the pod names are not known yet, so the
  template alone is judged.

The rules:
- an existing claim: Bound → fine; being deleted → fail (the scheduler refuses it, then it is
  gone); Lost, or Pending with no way to bind (the same rules as a template, with its own class) →
  warn: the claim is the cluster's state, and an administrator may still add what it waits for;
- a missing claimName → fail (same stance as a missing Secret): create the claim;
- a template: its class is the beta annotation `volume.beta.kubernetes.io/storage-class`, else
  `storageClassName`, else the default StorageClass the DefaultStorageClass admission plugin
  (plugin/pkg/admission/storage/storageclass/setdefault/admission.go; pkg/volume/util/
  storageclass.go GetDefaultClass: of several defaults the newest, then the first by name)
  assigns; none → class "". A class that exists and has a provisioner other than
  `kubernetes.io/no-provisioner` can provision the claim: fine (the provisioner's health, capacity
  and allowedTopologies are not judged). Otherwise (class "", a class that does not exist, or one
  that cannot provision) only a PersistentVolume can bind it, matched as the PV controller and the
  scheduler match one (k8s.io/component-helpers v0.34 storage/volume/pv_helpers.go
  FindMatchingVolume, used by pkg/controller/volume/persistentvolume/index.go findBestMatchForClaim):
  not being deleted; claimRef empty or this claim (a PV pre-bound to the claim is taken first);
  capacity ≥ the request; the same volumeMode (Filesystem when unset) and volumeAttributesClassName;
  phase Available (an unclaimed PV still Pending counts: the PV controller makes it Available);
  labels matching the claim's selector; the same class; access modes including the claim's
  (index.go allPossibleMatchingAccessModes, pv_helpers.go CheckAccessModes); a required node
  affinity some node of the cluster satisfies (helpers.go CheckNodeAffinity). Immediate binding is the
  PV controller's: every PV, from the access-mode groups that include the claim's, fewest modes first;
  WaitForFirstConsumer the scheduler's: only PVs of the claim's class (`mismatch`, `pick`). The job's
  claims take PVs smallest request first (binder.go findMatchingVolumes). None → fail; candidates that
  only miss on node affinity → warn (a node may join).

tests/oracle/storage/ compares the matching and the default class with that code itself.

StorageClasses and PersistentVolumes come from watch caches; a cache that cannot be read makes the
verdict "cannot verify" (warn), never a deny. Claims of other workloads that may take a matching PV
first, ReadWriteOnce claims shared by pods on different nodes, a ReadWriteOncePod claim used by several
pods at once and the pods' own node placement against a PV's node affinity are not judged.

The package: `classes` (claim and PV classes, the default StorageClass), `claims` (the claims the pods
use), `match` (PersistentVolume matching), `check` (the verdicts and the check). This package
re-exports the public names.
"""

from __future__ import annotations

from webhook.checks.storage.check import (
    CHECKS,
    Verdict,
    VolumeClaims,
)
from webhook.checks.storage.claims import (
    Claim,
    collect,
)
from webhook.checks.storage.classes import (
    BETA_CLASS_ANNOTATION,
    DEFAULT_CLASS_ANNOTATIONS,
    DELAYED_REASON,
    IMMEDIATE_REASON,
    NO_PROVISIONER,
    STORAGE_API,
    claim_class,
    default_class,
    pv_class,
)
from webhook.checks.storage.match import (
    NODE_AFFINITY,
    Want,
    mismatch,
    pick,
)

__all__ = [
    "BETA_CLASS_ANNOTATION",
    "CHECKS",
    "Claim",
    "DEFAULT_CLASS_ANNOTATIONS",
    "DELAYED_REASON",
    "IMMEDIATE_REASON",
    "NODE_AFFINITY",
    "NO_PROVISIONER",
    "STORAGE_API",
    "Verdict",
    "VolumeClaims",
    "Want",
    "claim_class",
    "collect",
    "default_class",
    "mismatch",
    "pick",
    "pv_class",
]
