"""Image Pull: the registry has each image, and the pods' credentials can pull it.

A mistyped tag, a deleted image, a private registry without credentials or with expired ones:
each is accepted today and seen only as ErrImagePull/ImagePullBackOff once the pods exist. This
check asks the registry, with the credentials the kubelet would use, whether the manifest is there
(webhook.registry: the OCI distribution API's HEAD on the manifest, the token flow its
WWW-Authenticate names).

Which credentials, as Kubernetes picks them:
- the pod's imagePullSecrets, or when it has none, its ServiceAccount's (the ServiceAccount
  admission plugin copies them into the pod: plugin/pkg/admission/serviceaccount/admission.go);
  a Secret that does not exist is skipped, as the kubelet skips it (kubelet_pods.go
  getPullSecretsForPod; the Secrets check reports it);
- the entries of those Secrets that match the image's registry, most specific first
  (pkg/credentialprovider keyring.go, webhook.registry.keyring), tried in order; no matching
  entry: an anonymous pull (kuberuntime_image.go PullImage).

Verdicts: manifest unknown → FAIL (with the repository's nearby tags when they can be read);
refused (401/403) with the pods' credentials, or anonymously when no Secret has an entry for the
registry → FAIL naming the Secrets tried; an index without a platform of the nodes the pods can
run on → FAIL; unreachable, timeout, 5xx, a Secret that cannot be read → WARN (cannot verify);
not asked by the client's own rules (an internal address not listed, a token realm over http or on
another host, a redirect where none is followed, an unreadable challenge) → WARN, naming the rule.
Registry access is a setting (registryAccess: off | allowlist | all; off by default: no egress).
A review asks about at most registryAccess.maxImagesPerReview distinct images (the rest are named
in a detail, "not asked (limit N)"), and the process has at most maxConcurrentLookups in flight.
Secret values stay in memory for the lookup; messages name Secrets, never their contents.
"""

from __future__ import annotations

import asyncio
import difflib
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from webhook.checks.base import Check, CheckContext, Permission
from webhook.config import RegistryAccessSettings
from webhook.deadline import REPORT_MARGIN
from webhook.imageref import ImageRef, parse
from webhook.kube import ApiError
from webhook.models.context import before_deadline, needs_a_task
from webhook.models.grants import grant_fix, not_granted
from webhook.models.nodes import node_listing, per_shape, selects
from webhook.objects import Node, PodSpec
from webhook.registry import client as registry
from webhook.registry.keyring import Credential, Keyring, PullSecret
from webhook.registry.platform import ARCH_LABEL, OS_LABEL, node_platform, text
from webhook.results import CheckResult, Status
from webhook.workloads.podspec import service_account

#: what a node's platform is read from (registry/platform.py node_platform)
PLATFORM_LABELS = (OS_LABEL, ARCH_LABEL)

NAME = "Image Pull"
#: nearby tags named in a "manifest unknown" message
NEARBY_TAGS = 3


@dataclass
class _Need:
    """One image with one list of pull Secrets (what one pull by the kubelet would use)."""

    image: str
    ref: ImageRef
    secrets: tuple[str, ...]
    #: where the Secrets come from, for messages: 'imagePullSecrets' or 'ServiceAccount "x"'
    source: str
    groups: list[str] = field(default_factory=list)
    pod_specs: list[PodSpec] = field(default_factory=list)


def _pull_secret_names(pod_spec: PodSpec, ctx: CheckContext) -> tuple[tuple[str, ...], str]:
    own = tuple(str(s["name"]) for s in pod_spec.get("imagePullSecrets") or [] if isinstance(s, dict) and s.get("name"))
    if own or ctx.view is None:
        return own, "imagePullSecrets"
    sa_name = service_account(pod_spec) or "default"
    sa = ctx.view.get_cached("serviceaccounts", ctx.workload.namespace, sa_name)
    names = tuple(
        str(s["name"]) for s in (sa or {}).get("imagePullSecrets") or [] if isinstance(s, dict) and s.get("name")
    )
    return names, f'ServiceAccount "{sa_name}"'


def collect(ctx: CheckContext) -> list[_Need]:
    """Distinct (image, pull Secrets) pairs, in pod-group order; invalid references are left to Image Reference."""
    needs: dict[tuple[str, tuple[str, ...]], _Need] = {}
    for group in ctx.workload.pod_groups:
        secrets, source = _pull_secret_names(group.pod_spec, ctx)
        for c in group.containers(init=True):
            image = c.get("image")
            if not isinstance(image, str) or not image:
                continue
            ref = parse(image)
            if ref is None:
                continue
            need = needs.setdefault((image, secrets), _Need(image, ref, secrets, source))
            if group.name not in need.groups:
                need.groups.append(group.name)
                need.pod_specs.append(group.pod_spec)
    return list(needs.values())


def _groups(need: _Need) -> str:
    label = "pod group" if len(need.groups) == 1 else "pod groups"
    return f"{label} " + ", ".join(f'"{g}"' for g in need.groups)


def _reference_text(ref: ImageRef) -> str:
    return f'digest "{ref.digest}"' if ref.digest else f'tag "{ref.tag or "latest"}"'


def nearby(tag: str, tags: tuple[str, ...]) -> list[str]:
    """The tags closest to `tag` (difflib's ratio), at most NEARBY_TAGS."""
    return difflib.get_close_matches(tag, tags, n=NEARBY_TAGS, cutoff=0.5)


def _not_asked(over: list[_Need], limit: int) -> str:
    images = list(dict.fromkeys(n.image for n in over))
    shown = ", ".join(f'"{i}"' for i in images[:3]) + (f" and {len(images) - 3} more" if len(images) > 3 else "")
    label = "image" if len(images) == 1 else "images"
    return f"{len(images)} more {label} not asked (limit {limit}, registryAccess.maxImagesPerReview): {shown}"


def _secrets_text(names: list[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


@dataclass
class _Verdict:
    status: Status
    message: str


class ImagePull(Check):
    name = NAME
    needs_cluster = True
    #: registry access off (the default): answered in the review's task; on, it runs as a task
    kept_reads = True
    permissions = (Permission("get", "secrets"),)
    apis = ("v1",)
    default_action = "deny"
    summary = (
        "Asks each image's registry (OCI distribution API) whether the manifest exists and the pods' "
        "pull Secrets can pull it; off unless registryAccess allows it."
    )
    unverified = (
        (
            "node-credentials",
            "credentials the nodes hold themselves (kubelet credential providers, the node's config.json) are not seen",
        ),
        ("single-manifest-platform", "the platform of an image that is a single manifest (not an index) is not read"),
    )

    def __init__(self) -> None:
        self._clients: dict[tuple[Any, ...], registry.RegistryClient] = {}
        self._closing: set[asyncio.Future[None]] = set()

    def client(self, ra: RegistryAccessSettings) -> registry.RegistryClient:
        """One client per registry-access configuration: its cache and breakers live as long as it does."""
        key = (
            ra.timeout_seconds, ra.cache_seconds, ra.breaker_failures, ra.breaker_open_seconds, ra.ca_file,
            tuple(ra.internal_registries), tuple(ra.token_realms), tuple(ra.cluster_networks),
            ra.max_concurrent_lookups,
        )  # fmt: skip
        c = self._clients.get(key)
        if c is None:
            if len(self._clients) >= 8:  # settings reloaded many times: the old clients go, their sessions closed
                for old in self._clients.values():
                    closing = asyncio.ensure_future(old.close())
                    self._closing.add(closing)
                    closing.add_done_callback(self._closing.discard)
                self._clients.clear()
            c = self._clients[key] = registry.RegistryClient(
                timeout=ra.timeout_seconds,
                cache_seconds=ra.cache_seconds,
                breaker_failures=ra.breaker_failures,
                breaker_open_seconds=ra.breaker_open_seconds,
                ssl_context=registry.make_ssl_context(ra.ca_file),
                internal_registries=ra.internal_registries,
                token_realms=ra.token_realms,
                cluster_networks=ra.cluster_networks,
                max_concurrent=ra.max_concurrent_lookups,
            )
        return c

    async def run(self, ctx: CheckContext) -> list[CheckResult]:
        assert ctx.view is not None
        ra = ctx.settings.registry_access
        if ra.mode == "off":
            return [
                CheckResult(
                    self.name, Status.SKIP, "Registry access is off (registryAccess.mode); images are not looked up"
                )
            ]
        # registry access on: the images and the nodes' platforms are collected once, in a task
        needs_a_task(ctx, "registry lookups")
        needs = collect(ctx)
        asked = [n for n in needs if ra.allows(n.ref.registry)]
        skipped = sorted({n.ref.registry for n in needs if not ra.allows(n.ref.registry)})
        if not asked:
            why = (
                "No containers to check"
                if not needs
                else ("Registries not in registryAccess.allowlist, not asked: " + ", ".join(f'"{r}"' for r in skipped))
            )
            return [CheckResult(self.name, Status.SKIP, why)]
        # a review names at most maxImagesPerReview distinct images to its registries: the rest are
        # named in a detail (a JobSet of 2,000 images is 20 lookups, not 2,000 at once)
        over = asked[ra.max_images_per_review :]
        asked = asked[: ra.max_images_per_review]
        names = sorted({s for n in asked for s in n.secrets})
        read = await asyncio.gather(*(self._read(ctx, s) for s in names))
        secrets = dict(zip(names, read, strict=True))
        verdicts = await asyncio.gather(*(self._judge(ctx, ra, n, secrets) for n in asked))
        secrets.clear()
        return self._results(verdicts, len(asked), skipped, over, ra.max_images_per_review)

    async def _read(self, ctx: CheckContext, name: str) -> PullSecret | None | ApiError:
        assert ctx.view is not None
        try:
            return await before_deadline(ctx, ctx.view.pull_secret(ctx.workload.namespace, name, ctx.deadline))
        except ApiError as exc:
            return exc

    def _results(
        self, verdicts: list[_Verdict | None], asked: int, skipped: list[str], over: list[_Need], limit: int
    ) -> list[CheckResult]:
        out: list[CheckResult] = []
        unasked = [_not_asked(over, limit)] if over else []
        for status in (Status.FAIL, Status.WARN):
            msgs = [v.message for v in verdicts if v is not None and v.status == status]
            if msgs:
                out.append(CheckResult(self.name, status, " ".join(msgs), details=msgs + unasked))
                unasked = []
        if out:
            return out
        if over:
            text = f"The {asked} images asked are in their registries and can be pulled; {_not_asked(over, limit)}"
        elif asked == 1:
            text = "The image is in its registry and can be pulled"
        else:
            text = f"All {asked} images are in their registries and can be pulled"
        details = [f'Registry "{r}" is not in registryAccess.allowlist: not asked' for r in skipped] + unasked
        return [CheckResult(self.name, Status.PASS, text, details=details)]

    async def _judge(
        self,
        ctx: CheckContext,
        ra: RegistryAccessSettings,
        need: _Need,
        secrets: dict[str, PullSecret | None | ApiError],
    ) -> _Verdict | None:
        """Steps: the keyring of the pods' readable pull Secrets (`_keyring`), the manifest asked with each
        matching credential, most specific first (an anonymous pull when none matches), until one finds it
        (`_platform` judges an index), else what the answers say (`_not_pulled`)."""
        ref = need.ref
        keyring, unreadable = _keyring(need, secrets)
        creds: list[Credential | None] = list(keyring.lookup(f"{ref.registry}/{ref.path}")) or [None]
        answers: list[tuple[Credential | None, registry.Answer]] = []
        for cred in creds:
            wait = min(ra.timeout_seconds, ctx.deadline.remaining() - REPORT_MARGIN)
            answer = await registry_manifest(self.client(ra), ref, cred, wait)
            answers.append((cred, answer))
            if answer.outcome == registry.FOUND:
                return self._platform(ctx, need, answer)
        return self._not_pulled(_Asked(need, answers, unreadable), ctx.workload.namespace, ra, secrets)

    def _not_pulled(
        self, asked: _Asked, ns: str, ra: RegistryAccessSettings, secrets: dict[str, PullSecret | None | ApiError]
    ) -> _Verdict:
        """No credential found the manifest: unreachable or not asked → WARN; manifest unknown → FAIL;
        refused with the pods' credentials → FAIL; a login the nodes may hold or a Secret that could not be
        read → WARN; refused anonymously → FAIL."""
        need, answers = asked.need, asked.answers
        unsure = [a for _, a in answers if a.outcome in (registry.UNREACHABLE, registry.NOT_ASKED)]
        if unsure:
            return _unsure(asked, unsure[0].detail)
        unknown = [a for _, a in answers if a.outcome == registry.UNKNOWN]
        if unknown:
            return _Verdict(Status.FAIL, self._unknown(need, unknown[0]))
        tried = [c.secret for c, _ in answers if c is not None]
        tried = list(dict.fromkeys(tried))
        status = answers[-1][1].status
        if tried:
            return _refused(asked, tried, status, ns)
        if need.ref.registry.lower() in {r.lower() for r in ra.node_credentials} or asked.unreadable:
            return _needs_login(asked, ns, secrets)
        return _anonymous(asked, status, ns)

    def _unknown(self, need: _Need, answer: registry.Answer) -> str:
        ref = need.ref
        what = (
            f'Image "{need.image}" not found: registry "{ref.registry}" has no manifest for '
            f'{_reference_text(ref)} of repository "{ref.path}" ({_groups(need)})'
        )
        if answer.tags is None:
            return f"{what}. Fix: push the image, or use a {'digest' if ref.digest else 'tag'} that exists."
        if not answer.tags:
            return f"{what}; the repository has no tags. Fix: push the image, or correct the repository name."
        close = nearby(ref.tag or "latest", answer.tags) if not ref.digest else []
        shown = close or list(answer.tags[:NEARBY_TAGS])
        label = "nearby tags" if close else "tags"
        return f'{what}; {label}: {", ".join(shown)}. Fix: use a tag that exists, e.g. "{shown[0]}".'

    def _platform(self, ctx: CheckContext, need: _Need, answer: registry.Answer) -> _Verdict | None:
        """An index: each pod group can land on a node whose (os, arch) the index offers."""
        if answer.platforms is None:
            return None
        assert ctx.view is not None
        nodes = node_listing(ctx.view)
        offered = set(answer.platforms)
        offered_text = ", ".join(text(p) for p in answer.platforms) or "none"
        for group, pod_spec in zip(need.groups, need.pod_specs, strict=True):
            eligible = eligible_platforms(nodes, pod_spec)
            if not eligible:
                continue  # no node to judge by (Node Selector Match says why)
            runnable = eligible & offered
            if runnable and runnable == eligible:
                continue
            missing = ", ".join(text(p) for p in sorted(eligible - offered))
            if not runnable:
                return _Verdict(
                    Status.FAIL,
                    f'Image "{need.image}" has no manifest for the platform of the nodes pod group "{group}" can run on '
                    f"({missing}); its index offers {offered_text}. Fix: push the image for {missing}, or select "
                    f"nodes of a platform the index offers (nodeSelector kubernetes.io/arch).",
                )
            return _Verdict(
                Status.WARN,
                f'Pods of "{group}" may land on {missing} nodes; image "{need.image}" offers only {offered_text}.',
            )
        return None


@dataclass
class _Asked:
    """One image's lookups that found no manifest: each credential tried with its answer, and the pull
    Secrets that could not be read."""

    need: _Need
    answers: list[tuple[Credential | None, registry.Answer]]
    unreadable: list[str]

    @property
    def where(self) -> str:
        return f'image "{self.need.image}" ({_groups(self.need)})'


def _keyring(need: _Need, secrets: dict[str, PullSecret | None | ApiError]) -> tuple[Keyring, list[str]]:
    """(the keyring of the image's pull Secrets that were read, the names of those that could not be); a
    Secret that does not exist is skipped, as the kubelet skips it (kubelet_pods.go getPullSecretsForPod)."""
    keyring = Keyring()
    unreadable: list[str] = []
    for name in need.secrets:
        s = secrets.get(name)
        if isinstance(s, ApiError) or (isinstance(s, PullSecret) and s.error):
            unreadable.append(name)
        elif isinstance(s, PullSecret) and s.entries:
            keyring.add(name, s.entries)
    return keyring, unreadable


def _unsure(asked: _Asked, detail: str) -> _Verdict:
    """Unreachable, or not asked by the client's own rules: cannot verify (an untrusted certificate names its fix)."""
    registry_name = asked.need.ref.registry
    if detail == registry.UNTRUSTED_CERTIFICATE:
        return _Verdict(
            Status.WARN,
            f'Cannot verify {asked.where}: the TLS certificate of "{registry_name}" is not trusted; '
            "add its CA (registryAccess.caFile; chart: registryCA).",
        )
    return _Verdict(Status.WARN, f'Cannot verify {asked.where}: registry "{registry_name}" {detail}.')


def _refused(asked: _Asked, tried: list[str], status: int, ns: str) -> _Verdict:
    """Refused with the credentials of the pods' pull Secrets: the kubelet's pull fails too."""
    need, ref = asked.need, asked.need.ref
    return _Verdict(
        Status.FAIL,
        f'Registry "{ref.registry}" refused {asked.where} (HTTP {status}) with the credentials of Secret '
        f"{_secrets_text(tried)} (from {need.source}); the kubelet would fail the pull. Fix: update Secret "
        f'{_secrets_text(tried)} in namespace "{ns}" with credentials that can pull "{ref.registry}/{ref.path}" '
        f"(kubectl create secret docker-registry NAME --docker-server={ref.registry} ...).",
    )


def _needs_login(asked: _Asked, ns: str, secrets: dict[str, PullSecret | None | ApiError]) -> _Verdict:
    """Refused anonymously, but the nodes may hold credentials (registryAccess.nodeCredentials) or a pull
    Secret could not be read: cannot verify."""
    unreadable = asked.unreadable
    why = (
        "the nodes may hold credentials for it (registryAccess.nodeCredentials)"
        if not unreadable
        else f"Secret {_secrets_text(unreadable)} could not be read"
    )
    if any(isinstance(e := secrets.get(n), ApiError) and not_granted(e) for n in unreadable):
        why += f" (not permitted to get secrets). {grant_fix(ns)}"
    return _Verdict(
        Status.WARN, f'Cannot verify {asked.where}: registry "{asked.need.ref.registry}" needs a login; {why}.'
    )


def _anonymous(asked: _Asked, status: int, ns: str) -> _Verdict:
    """Refused anonymously and no pull Secret has an entry for the registry: the kubelet pulls without
    credentials (kuberuntime_image.go PullImage) and fails."""
    need, ref = asked.need, asked.need.ref
    if need.secrets:
        has = f"imagePullSecrets {_secrets_text(list(need.secrets))} (from {need.source}) have no entry for it"
    else:
        has = (
            f"the pods have no imagePullSecrets (nor has {need.source})"
            if need.source != "imagePullSecrets"
            else ("the pods have no imagePullSecrets")
        )
    return _Verdict(
        Status.FAIL,
        f'Registry "{ref.registry}" refused anonymous access to {asked.where} (HTTP {status}), and {has}; '
        f"the kubelet would pull without credentials and fail. Fix: kubectl create secret docker-registry NAME "
        f"-n {ns} --docker-server={ref.registry} ... and list it in the pods' imagePullSecrets.",
    )


def eligible_platforms(nodes: list[Node], pod_spec: PodSpec) -> set[tuple[str, str]]:
    """The (os, arch) of the nodes `pod_spec`'s node selection selects (nodes without the
    well-known labels are left out), judged once per kind of node (nodes.per_shape: the
    selection's labels and the platform labels), not once per Node."""
    return {
        p for p in per_shape(nodes, pod_spec, partial(_selected_platform, pod_spec), PLATFORM_LABELS) if p is not None
    }


def _selected_platform(pod_spec: PodSpec, node: Node) -> tuple[str, str] | None:
    return node_platform(node) if selects(pod_spec, node) else None


async def registry_manifest(
    client: registry.RegistryClient, ref: ImageRef, cred: Credential | None, wait: float
) -> registry.Answer:
    """The client's answer, never an exception (a bug in the HTTP layer is 'cannot verify', not a deny)."""
    try:
        return await client.manifest(ref, cred, wait)
    except (OSError, ValueError) as exc:
        return registry.Answer(registry.UNREACHABLE, detail=f"was not asked: the client failed ({type(exc).__name__})")


CHECKS = [ImagePull()]
