"""Secrets: every Secret (and key) the pods need exists in the namespace, as the kubelet needs it.

A missing Secret does not fail the job; it leaves pods in CreateContainerConfigError or
ContainerCreating forever. References come from every pod group's PodSpec, the same ones
k8s.io/kubernetes pkg/api/v1/pod/util.go VisitPodSecretNames lists (see
`podspec.secret_refs`; the adapter has already applied runtime templates and patches, and
turned a TrainJob initializer's `secretRef` into `envFrom`), plus `Workload.extra_secret_refs`;
Secrets the job's own controller creates (`Workload.managed_secrets`) are skipped.

What counts is what the kubelet does with each reference:
- `optional: true` never stops the pod, so it is not read;
- a volume no container mounts is never set up (pkg/kubelet/volumemanager/populator
  desired_state_of_world_populator.go skips it), so its Secret is not read; nor the Secret of
  an iscsi volume without CHAP or of a cinder volume (`SecretRef.unused` says why);
- a missing imagePullSecret is only a warning event (pkg/kubelet/kubelet_pods.go
  getPullSecretsForPod) and the image is pulled without credentials, which works for public
  images: it warns, and denies only for an image of a registry the configuration declares
  private (`privateRegistries`);
- env, envFrom and every mounted volume's Secret stop the pod: deny.

The reads run concurrently and stop at the deadline. A 403 or a transient error makes
that Secret "cannot verify" (a WARN result) and never hides a missing Secret or key found
in another read (a FAIL result next to it). Only key names are ever seen here: the view drops values on arrival.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from webhook.checks.base import Check, CheckContext
from webhook.checks.common import fail_and_warn
from webhook.cluster.names import is_dns1123_subdomain
from webhook.imageref import parse
from webhook.kube import ApiError, Permission
from webhook.models.context import LiveRead, read_live
from webhook.models.grants import grant_fix, not_granted
from webhook.results import CheckResult, Status
from webhook.workloads.base import Workload
from webhook.workloads.podspec import SecretRef, describe_path, secret_refs
from webhook.workloads.render_cache import PerRender


@dataclass
class _Use:
    """All references to one Secret."""

    name: str
    refs: list[tuple[SecretRef, str]] = field(default_factory=list)  # (ref, where it is, in prose)
    #: images of the pods that name this Secret in imagePullSecrets (first use first)
    pull_images: list[str] = field(default_factory=list)

    @property
    def required(self) -> list[tuple[SecretRef, str]]:
        """References the kubelet reads and needs: not optional, not in an unused volume."""
        return [(r, w) for r, w in self.refs if not r.optional and not r.unused]

    @property
    def blocking(self) -> list[tuple[SecretRef, str]]:
        """Required references whose absence stops the pod (all but imagePullSecrets)."""
        return [(r, w) for r, w in self.required if not _is_pull(r)]

    @property
    def pull_secret(self) -> bool:
        return any(_is_pull(r) for r, _ in self.refs)


def _is_pull(ref: SecretRef) -> bool:
    return ref.field_path.startswith("imagePullSecrets")


def _where(ref: SecretRef, group: str | None) -> str:
    text = describe_path(ref.field_path)
    if group is not None and (ref.field_path.startswith("imagePullSecrets") or ref.field_path.startswith("volumes")):
        text += f" of the {group} pods"
    return text


#: each render's references (`collect`): they stand on the pod specs alone, the same for every create of a render
#: (a hit fills in only the uid and the run epoch, never a Secret's name): walking an AIPerfJob's 41 containers and
#: their env for them was the Secrets check's main cost (issue 38)
_USES: PerRender[dict[str, _Use]] = PerRender(256)


def uses_of(wl: Workload) -> dict[str, _Use]:
    """`collect(wl)`, kept by the render (read it, never change it)."""
    return _USES.get(wl, collect)


def collect(wl: Workload) -> dict[str, _Use]:
    uses: dict[str, _Use] = {}
    for g in wl.pod_groups:
        for ref in secret_refs(g.pod_spec):
            use = uses.setdefault(ref.name, _Use(ref.name))
            use.refs.append((ref, _where(ref, g.name)))
            if _is_pull(ref):
                for c in g.containers(init=True):
                    image = c.get("image")
                    if isinstance(image, str) and image and image not in use.pull_images:
                        use.pull_images.append(image)
    for name, key, optional, path in wl.extra_secret_refs:
        ref = SecretRef(name, key, optional, path)
        uses.setdefault(name, _Use(name)).refs.append((ref, _where(ref, None)))
    for managed in wl.managed_secrets:
        uses.pop(managed, None)
    return uses


def _by(refs: list[tuple[SecretRef, str]]) -> str:
    """Distinct referencing fields; `X of the a pods` and `X of the b pods` become `X of the a, b pods`."""
    merged: dict[str, list[str]] = {}
    for _, where in refs:
        head, sep, tail = where.partition(" of the ")
        if sep and tail.endswith(" pods"):
            groups = merged.setdefault(head + "\0", [])
            if tail[: -len(" pods")] not in groups:
                groups.append(tail[: -len(" pods")])
        else:
            merged.setdefault(where, [])
    return ", ".join(
        f"{key[:-1]} of the {', '.join(groups)} pods" if key.endswith("\0") else key for key, groups in merged.items()
    )


def _missing_secret(use: _Use, ns: str) -> str:
    refs = use.required
    if not is_dns1123_subdomain(use.name):
        return _invalid_name(use, refs)
    if use.pull_secret:
        fix = _pull_fix(use, ns)
    else:
        keys = sorted({r.key for r, _ in refs if r.key})
        literals = " ".join(f"--from-literal={k}=…" for k in keys) or "--from-literal=<key>=…"
        fix = f"kubectl create secret generic {use.name} -n {ns} {literals}"
    return f'Secret "{use.name}" not found in namespace "{ns}" (referenced by {_by(refs)}). Fix: {fix}'


def private_registry(image: str, private: list[str]) -> str | None:
    """The `privateRegistries` entry an image belongs to: its registry host, or a registry/path
    prefix of its normalised name (`docker.io/my-org` for `my-org/app`). None when it matches
    none or does not parse (the Image Reference check reports that)."""
    if not private:
        return None
    ref = parse(image)
    if ref is None:
        return None
    registry = ref.registry.lower()
    full = f"{registry}/{ref.path}"
    for entry in private:
        if entry == registry or full == entry or full.startswith(entry + "/"):
            return entry
    return None


def _pull_fix(use: _Use, ns: str, server: str = "<registry>") -> str:
    return (
        f"kubectl create secret docker-registry {use.name} -n {ns} "
        f"--docker-server={server} --docker-username=<user> --docker-password=…"
    )


def _missing_pull_secret(use: _Use, ns: str, private: list[str]) -> tuple[Status, str]:
    """A missing Secret named only in imagePullSecrets: the kubelet records a warning event and
    pulls without it, so only an image of a declared private registry is sure to fail."""
    found = [(image, entry) for image in use.pull_images if (entry := private_registry(image, private)) is not None]
    head = f'Secret "{use.name}" not found in namespace "{ns}" (referenced by {_by(use.required)})'
    if not found:
        return Status.WARN, (
            f"{head}; the kubelet pulls without it, which works only for public images. Fix: {_pull_fix(use, ns)}"
        )
    image, entry = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    ref = parse(image)
    registry = ref.registry if ref is not None else "<registry>"
    server = "https://index.docker.io/v1/" if registry == "docker.io" else registry
    return Status.FAIL, (
        f'{head}; private registry "{entry}" needs it for image "{image}"{more}. Fix: {_pull_fix(use, ns, server)}'
    )


def _invalid_name(use: _Use, refs: list[tuple[SecretRef, str]]) -> str:
    """A name no Secret can have (pkg/apis/core/validation ValidateSecretName): never looked up.

    ValidatePodSpec refuses it in env secretKeyRef and envFrom secretRef, so those pods are
    never created; in volumes and imagePullSecrets it only has to be non-empty, and the
    kubelet then cannot find it.
    """
    in_env = any(".env[" in r.field_path or ".envFrom[" in r.field_path for r, _ in refs)
    why = "the apiserver refuses pods that reference it in env" if in_env else "the kubelet will never find it"
    return (
        f'"{use.name}" is not a valid Secret name (referenced by {_by(refs)}): {why}. '
        "Fix: reference the Secret by its real name (a lowercase RFC 1123 subdomain)"
    )


def _missing_key(use: _Use, ns: str, key: str, refs: list[tuple[SecretRef, str]]) -> str:
    return (
        f'Secret "{use.name}" in namespace "{ns}" has no key "{key}" (referenced by {_by(refs)}). '
        f'Fix: kubectl patch secret {use.name} -n {ns} --type merge -p \'{{"stringData":{{"{key}":"…"}}}}\''
    )


def _cannot_verify(name: str, ns: str, exc: BaseException) -> str:
    if isinstance(exc, ApiError) and exc.forbidden:
        return f'Cannot verify Secret "{name}" in namespace "{ns}" (not permitted to get secrets)'
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f'Cannot verify Secret "{name}" in namespace "{ns}" (timed out)'
    text = exc.message if isinstance(exc, ApiError) else (str(exc) or type(exc).__name__)
    return f'Cannot verify Secret "{name}" in namespace "{ns}" ({text})'


class Secrets(Check):
    name = "Secrets"
    needs_cluster = True
    kept_reads = True
    permissions = (Permission("get", "secrets"),)
    apis = ("v1",)
    summary = (
        "Every Secret and key the kubelet needs exists: env secretKeyRef and envFrom of all containers, mounted secret, "
        "projected and volume-plugin (csi nodePublishSecretRef, ...) volumes, optional honoured; a missing imagePullSecret "
        "warns (denies for privateRegistries)."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        """Steps: the references (`collect`), the Secrets the kubelet needs read concurrently until the
        deadline, each answer judged (`_Reads.judge`), then one FAIL, one WARN, both, or the PASS."""
        assert ctx.view is not None
        wl = ctx.workload
        ns = wl.namespace
        uses = uses_of(wl)
        if not uses:
            skipped = f" ({len(wl.managed_secrets)} created by the job's controller)" if wl.managed_secrets else ""
            return CheckResult(self.name, Status.SKIP, f"No Secrets referenced{skipped}")
        to_read = [u for u in uses.values() if u.required]
        not_read = _not_read(uses)
        if not to_read:
            return _none_required(self.name, uses, not_read)

        answers = await read_live(ctx, [LiveRead("secret_keys", (ns, u.name, ctx.deadline)) for u in to_read])
        found = _Reads(ns, ctx.settings.private_registries)
        for answer, use in sorted(zip(answers, to_read), key=lambda kv: kv[1].name):
            found.judge(use, answer)

        # the cannot-verify are reported next to the failures, never instead of them
        out = fail_and_warn(
            self.name, found.fails, found.unknown, warn_tail=f". {grant_fix(ns)}" if found.denied else ""
        )
        if out:
            return out
        n = len(to_read)
        return CheckResult(
            self.name,
            Status.PASS,
            f"{n} Secret{'s exist' if n != 1 else ' exists'} with the keys used: {', '.join(sorted(u.name for u in to_read))}",
            details=not_read,
        )


def _none_required(check: str, uses: dict[str, _Use], not_read: list[str]) -> CheckResult:
    """The PASS when no reference is one the kubelet reads and needs (all optional, or in unused volumes)."""
    if not not_read:
        return CheckResult(check, Status.PASS, f"Only optional Secret references ({', '.join(sorted(uses))})")
    optional = sorted(n for n, u in uses.items() if all(r.optional for r, _ in u.refs))
    parts = not_read + ([f"optional: {', '.join(optional)}"] if optional else [])
    return CheckResult(check, Status.PASS, f"No referenced Secret is required: {'; '.join(parts)}", details=not_read)


@dataclass
class _Reads:
    """The Secrets' reads judged one by one: missing Secrets and keys, those that cannot be verified."""

    ns: str
    #: settings.private_registries: a missing imagePullSecret of an image there denies
    private: list[str]
    fails: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    denied: bool = False  # a 403 of RBAC: the fix is to grant the namespace

    def judge(self, use: _Use, answer: set[str] | BaseException | None) -> None:
        """One Secret's read (its keys, None when not found, or the error it raised: ApiError(0, "timed out") when
        not answered by the deadline): cannot verify, missing (a missing pull Secret as `_missing_pull_secret`
        judges it), or the keys its references need that it lacks."""
        ns = self.ns
        if isinstance(answer, BaseException) and not (isinstance(answer, ApiError) and answer.not_found):
            self.unknown.append(_cannot_verify(use.name, ns, answer))
            self.denied = self.denied or not_granted(answer)
            return
        keys = None if isinstance(answer, BaseException) else answer
        if keys is None:
            if use.blocking:
                self.fails.append(_missing_secret(use, ns))
            else:
                status, text = _missing_pull_secret(use, ns, self.private)
                (self.fails if status is Status.FAIL else self.unknown).append(text)
            return
        by_key: dict[str, list[tuple[SecretRef, str]]] = {}
        for ref, where in use.required:
            if ref.key is not None and ref.key not in keys:
                by_key.setdefault(ref.key, []).append((ref, where))
        self.fails += [_missing_key(use, ns, k, refs) for k, refs in sorted(by_key.items())]


def _not_read(uses: dict[str, _Use]) -> list[str]:
    """`Secret "x" is not read: volume v is mounted by no container`, for every Secret some
    non-optional reference of which the kubelet never resolves (and no other reference needs)."""
    out = []
    for name in sorted(uses):
        use = uses[name]
        if use.required:
            continue
        reasons = sorted({r.unused for r, _ in use.refs if r.unused and not r.optional})
        if reasons:
            out.append(f'Secret "{name}" is not read: {", ".join(reasons)}')
    return out


CHECKS = [Secrets()]
