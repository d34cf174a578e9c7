"""Image Reference: every container image parses with the reference grammar the kubelet uses.

An invalid reference only shows up as ErrImagePull/InvalidImageName once the pods exist
(after the job was accepted, quota reserved and nodes picked). AIPerf never rejects a
reference; we parse as the kubelet does (webhook.imageref follows distribution/reference's
`ParseNormalizedNamed`, the same normalisation containerd and CRI-O apply, in linear time), and
when it refuses, name the part that is wrong so the fix is obvious.

Explicit `:latest` warns too (AIPerf lets it pass): it moves exactly like an implicit one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from webhook.checks.base import Check, CheckContext
from webhook.imageref import parse_or_explain as parse_image
from webhook.imageref import quoted
from webhook.objects import PodSpec
from webhook.results import CheckResult, Status
from webhook.workloads.base import Workload

NAME = "Image Reference"
EXAMPLE = "nvcr.io/nvidia/aiperf:0.13.0"


@dataclass
class _Use:
    """Where one image string is used: (pod group, container, is_init) in report order."""

    image: str
    where: list[tuple[str, str, bool]] = field(default_factory=list)
    groups_without_pull_secrets: list[str] = field(default_factory=list)


#: past this many containers in one pod group, a message names the first two and counts the rest
NAMES_SHOWN = 3


def _quote_list(names: list[str]) -> str:
    if len(names) > NAMES_SHOWN:
        return ", ".join(f'"{n}"' for n in names[:2]) + f" and {len(names) - 2} more"
    return ", ".join(f'"{n}"' for n in names)


def describe_uses(where: Iterable[tuple[str, str, bool]]) -> str:
    """`container "node" in pod group "trainer"`; several containers are grouped per pod group."""
    by_group: dict[str, tuple[list[str], list[str]]] = {}
    for group, container, is_init in where:
        app, init = by_group.setdefault(group, ([], []))
        (init if is_init else app).append(container)
    parts = []
    for group, (app, init) in by_group.items():
        names = []
        if app:
            names.append(("container " if len(app) == 1 else "containers ") + _quote_list(app))
        if init:
            names.append(("init container " if len(init) == 1 else "init containers ") + _quote_list(init))
        parts.append(f'{" and ".join(names)} in pod group "{group}"')
    return "; ".join(parts)


def _capitalized(text: str) -> str:
    return f"{text[0].upper()}{text[1:]}"


def _combine(name: str, status: Status, findings: list[tuple[str, str]]) -> CheckResult:
    """One result for several (what, fix) findings: whats joined by '; ', then one Fix."""
    whats = [w for w, _ in findings]
    fixes: list[str] = []
    for _, f in findings:
        if f not in fixes:
            fixes.append(f)
    message = "; ".join(whats) + ". Fix: " + "; ".join(fixes)
    return CheckResult(name, status, message, details=[f"{w}. Fix: {f}" for w, f in findings])


def _has_pull_secrets(pod_spec: PodSpec, ctx: CheckContext) -> bool:
    if any(isinstance(s, dict) and s.get("name") for s in pod_spec.get("imagePullSecrets") or []):
        return True
    # a ServiceAccount's imagePullSecrets are added by the apiserver; visible only with a cluster
    if ctx.view is not None:
        sa_name = pod_spec.get("serviceAccountName") or "default"
        try:
            sa = ctx.view.get_cached("serviceaccounts", ctx.workload.namespace, sa_name)
        except Exception:  # the cache may not hold service accounts
            sa = None
        if sa and any(isinstance(s, dict) and s.get("name") for s in sa.get("imagePullSecrets") or []):
            return True
    return False


def _pull_secret_fix(wl: Workload) -> str:
    return f"add {wl.facts.pull_secrets_at} (or list the registry in publicRegistries if it needs no login)"


class ImageReference(Check):
    name = NAME
    synchronous = True  # reads only the Workload and cached state
    summary = "Every container image is a valid reference; warns on the moving 'latest' tag and on private registries without imagePullSecrets."

    async def run(self, ctx: CheckContext) -> list[CheckResult]:
        """Steps: the images and where each is used (`_collect`), each image judged (`_judge`), then one
        FAIL, one WARN, both, or the PASS (`_results`)."""
        uses = _collect(ctx)
        found = _Findings()
        public = {r.lower() for r in ctx.settings.public_registries}
        for use in uses.values():
            _judge(use, public, ctx.workload, found)
        return _results(self.name, len(uses), found)


def _collect(ctx: CheckContext) -> dict[str, _Use]:
    """Each distinct image string, where it is used, and the pod groups using it without pull Secrets."""
    uses: dict[str, _Use] = {}
    for group in ctx.workload.pod_groups:
        pull_ok = _has_pull_secrets(group.pod_spec, ctx)
        inits = {id(c) for c in group.pod_spec.get("initContainers") or []}
        for c in group.containers(init=True):
            image = c.get("image")
            image = image if isinstance(image, str) else ""
            use = uses.get(image)
            if use is None:  # not setdefault: building a _Use per container costs more than the check
                use = uses[image] = _Use(image)
            use.where.append((group.name, str(c.get("name") or "?"), id(c) in inits))
            if not pull_ok and group.name not in use.groups_without_pull_secrets:
                use.groups_without_pull_secrets.append(group.name)
    return uses


@dataclass
class _Findings:
    """The (what, fix) findings of every image, and how many are pinned by digest."""

    fails: list[tuple[str, str]] = field(default_factory=list)
    warns: list[tuple[str, str]] = field(default_factory=list)
    pinned: int = 0


def _judge(use: _Use, public: set[str], wl: Workload, found: _Findings) -> None:
    """One image: missing or invalid (FAIL), unpinned or "latest" (WARN), a private registry without
    imagePullSecrets (WARN)."""
    # where the image is used: written only for a message (a passing image needs none)
    if use.image == "":
        found.fails.append((f"{_capitalized(describe_uses(use.where))} has no image", "set the container's image"))
        return
    try:
        ref = parse_image(use.image)
    except ValueError as exc:
        found.fails.append(
            (
                f"Image {quoted(use.image)} used by {describe_uses(use.where)} is invalid: {exc}",
                f'use [registry[:port]/]repository[:tag][@digest] with a lowercase repository, e.g. "{EXAMPLE}"',
            )
        )
        return
    if ref.digest:
        found.pinned += 1
    elif ref.tag is None:
        found.warns.append(
            (
                f'Image "{use.image}" has no tag, so it pulls whatever "latest" is when each pod starts (used by {describe_uses(use.where)})',
                "pin a version tag or a digest",
            )
        )
    elif ref.tag == "latest":
        found.warns.append(
            (
                f'Image "{use.image}" uses the moving tag "latest"; pods can start different builds (used by {describe_uses(use.where)})',
                "pin a version tag or a digest",
            )
        )
    if use.groups_without_pull_secrets and ref.registry.lower() not in public:
        groups = _quote_list(use.groups_without_pull_secrets)
        label = "pod group" if len(use.groups_without_pull_secrets) == 1 else "pod groups"
        found.warns.append(
            (
                f'Registry "{ref.registry}" of image "{use.image}" may need a login, but {label} {groups} has no imagePullSecrets',
                _pull_secret_fix(wl),
            )
        )


def _results(name: str, n: int, found: _Findings) -> list[CheckResult]:
    """One FAIL (every failure), one WARN (every warning), both, or the PASS over the `n` images."""
    results: list[CheckResult] = []
    if found.fails:
        results.append(_combine(name, Status.FAIL, found.fails))
    if found.warns:
        results.append(_combine(name, Status.WARN, found.warns))
    if not results:
        if n == 0:
            return [CheckResult(name, Status.PASS, "No containers to check")]
        noun = "image is a valid reference" if n == 1 else f"{n} images are valid references"
        prefix = "The" if n == 1 else "All"
        results.append(CheckResult(name, Status.PASS, f"{prefix} {noun} ({found.pinned} pinned by digest)"))
    return results


CHECKS = [ImageReference()]
