"""The claims a job's pods use, from every pod group's PodSpec: `persistentVolumeClaim.claimName`
volumes (a JobSet `volumeClaimPolicies` template's `<template>-<jobset>`: sigs.k8s.io/jobset v0.12.0
pkg/controllers/volume_claim_policy.go GeneratePVCName) and `ephemeral.volumeClaimTemplate`
(pkg/controller/volume/ephemeral), as the scheduler's binder.go GetPodVolumeClaims lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webhook.checks.storage.classes import (
    _dict,
    _str,
)
from webhook.workloads.base import Workload


@dataclass
class Claim:
    """One claim the pods use: an existing one by name, a JobSet template, or an ephemeral template."""

    kind: str  # "claim" | "template" | "ephemeral"
    name: str  # the claim's name ("" for ephemeral: one per pod)
    volume: str  # the pod volume (or the JobSet template) name
    groups: list[str] = field(default_factory=list)
    template: dict[str, Any] = field(default_factory=dict)  # {metadata, spec} of a template
    pods: int = 0  # claims an ephemeral template makes: one per pod

    @property
    def users(self) -> str:
        return f"the {', '.join(self.groups)} pods"

    @property
    def what(self) -> str:
        if self.kind == "template":
            return (
                f'PersistentVolumeClaim "{self.name}" (JobSet volumeClaimPolicies template "{self.volume}", '
                f"used by {self.users})"
            )
        if self.kind == "ephemeral":
            return f'Ephemeral volume "{self.volume}" of {self.users} (a claim <pod>-{self.volume} per pod)'
        return f'PersistentVolumeClaim "{self.name}" (volume "{self.volume}" of {self.users})'


def _jobset_templates(wl: Workload) -> dict[str, tuple[str, dict[str, Any]]]:
    """`<template>-<jobset>` → (template name, template) for the JobSet's volumeClaimPolicies."""
    js = _dict(wl.derived.get("jobSet"))
    js_name = _str(_dict(js.get("metadata")).get("name"))
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    policies = _dict(js.get("spec")).get("volumeClaimPolicies")
    for policy in policies if isinstance(policies, list) else []:
        templates = _dict(policy).get("templates")
        for t in templates if isinstance(templates, list) else []:
            name = _str(_dict(_dict(t).get("metadata")).get("name"))
            if name and js_name:
                out.setdefault(f"{name}-{js_name}", (name, _dict(t)))
    return out


def collect(wl: Workload) -> list[Claim]:
    """Every claim of every pod group, in first-use order; a claim shared by groups is listed once."""
    templates = _jobset_templates(wl)
    claims: dict[tuple[str, str], Claim] = {}
    for g in wl.pod_groups:
        volumes = g.pod_spec.get("volumes")
        for item in volumes if isinstance(volumes, list) else []:
            vol = _dict(item)
            vname = _str(vol.get("name"))
            pvc = vol.get("persistentVolumeClaim")
            eph = vol.get("ephemeral")
            if isinstance(pvc, dict):
                claim_name = _str(pvc.get("claimName"))
                if not claim_name:
                    continue  # the apiserver refuses the pod (Dry Run says so)
                if claim_name in templates:
                    tname, template = templates[claim_name]
                    c = claims.setdefault(("template", claim_name), Claim("template", claim_name, tname, [], template))
                else:
                    c = claims.setdefault(("claim", claim_name), Claim("claim", claim_name, vname))
            elif isinstance(eph, dict):
                template = _dict(eph.get("volumeClaimTemplate"))
                c = claims.setdefault(("ephemeral", f"{g.name}\0{vname}"), Claim("ephemeral", "", vname, [], template))
                c.pods += g.pods
            else:
                continue
            if g.name not in c.groups:
                c.groups.append(g.name)
    return list(claims.values())
