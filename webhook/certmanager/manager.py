"""The manager: keeps the Secret, the caBundle and (optionally) a directory of files in step,
one reconcile at a time, adopting what a concurrent manager wrote (409)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from webhook.certmanager.layout import (
    CA_CRT,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    TLS_CRT,
    TLS_KEY,
    Plan,
    RotationSettings,
    annotations_of,
    decode_data,
    is_managed,
    patch_ca_bundle,
    secret_body,
)
from webhook.certmanager.rotation import plan
from webhook.certmanager.store import CertStore
from webhook.kube import ApiError

log = logging.getLogger(__name__)


@dataclass
class ReconcileResult:
    step: str
    secret_changed: str  # the reason, "" when untouched
    bundle_changed: bool
    next_due: dt.datetime | None
    conflicts: int = 0


@dataclass
class CertManager:
    """Keeps the Secret, the caBundle and (optionally) a directory of files in step."""

    store: CertStore
    namespace: str
    secret_name: str
    webhook_config: str
    settings: RotationSettings
    write_dir: Path | None = None
    max_conflicts: int = 5
    _written: bytes = field(default=b"", repr=False)

    async def reconcile(self, now: dt.datetime | None = None) -> ReconcileResult:
        """One pass: Secret first (the source of truth), then the caBundle, then the files."""
        conflicts = 0
        while True:
            t = now or dt.datetime.now(dt.UTC)
            current = await self.store.get_secret(self.namespace, self.secret_name)
            if current is not None and not is_managed(current):
                raise ApiError(
                    409,
                    f'Secret "{self.namespace}/{self.secret_name}" exists but is not managed by {MANAGED_BY} '
                    f"(label {MANAGED_BY_LABEL}); refusing to overwrite it",
                    "NotManaged",
                )
            p = plan(decode_data(current), annotations_of(current), t, self.settings)
            if not p.changed:
                break
            body = secret_body(self.secret_name, self.namespace, p, current)
            try:
                if current is None:
                    await self.store.create_secret(self.namespace, body)
                else:
                    await self.store.replace_secret(self.namespace, self.secret_name, body)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                # another manager wrote first: re-read and adopt what it wrote
                conflicts += 1
                log.info(
                    "Secret %s/%s changed under us (%s); re-reading",
                    self.namespace,
                    self.secret_name,
                    exc.reason or 409,
                )
                if conflicts >= self.max_conflicts:
                    raise
                continue
            log.info("Secret %s/%s: %s (step %s)", self.namespace, self.secret_name, p.reason, p.step)
            break
        bundle_changed = await self._sync_bundle(p.bundle)
        self._write_files(p)
        return ReconcileResult(p.step, p.reason, bundle_changed, p.next_due, conflicts)

    async def _sync_bundle(self, bundle: bytes) -> bool:
        for _ in range(self.max_conflicts):
            vwc = await self.store.get_webhook_config(self.webhook_config)
            if vwc is None:
                log.warning("ValidatingWebhookConfiguration %s not found; caBundle not injected", self.webhook_config)
                return False
            if not patch_ca_bundle(vwc, bundle):
                return False
            vwc.get("metadata", {}).pop("managedFields", None)
            try:
                await self.store.replace_webhook_config(self.webhook_config, vwc)
            except ApiError as exc:
                if exc.status == 409:
                    continue
                raise
            log.info(
                "ValidatingWebhookConfiguration %s: caBundle set (%d CA)",
                self.webhook_config,
                bundle.count(b"BEGIN CERTIFICATE"),
            )
            return True
        raise ApiError(409, f"ValidatingWebhookConfiguration {self.webhook_config} kept changing; caBundle not set")

    def _write_files(self, p: Plan) -> None:
        """Mirror tls.crt, tls.key and the bundle (ca.crt) into write_dir, swapped atomically."""
        if self.write_dir is None:
            return
        files = {TLS_CRT: p.data[TLS_CRT], TLS_KEY: p.data[TLS_KEY], CA_CRT: p.bundle}
        stamp = b"\0".join(files[k] for k in sorted(files))
        if stamp == self._written:
            return
        write_atomic_dir(self.write_dir, files)
        self._written = stamp

    async def run(self, check_interval: float, stop: asyncio.Event | None = None) -> None:
        """Reconcile forever: at every check interval, or sooner when a rotation step is due."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            wait = check_interval
            try:
                res = await self.reconcile()
                if res.next_due is not None:
                    until = (res.next_due - dt.datetime.now(dt.UTC)).total_seconds()
                    wait = min(check_interval, max(0.0, until) + 0.05)
            except ApiError as exc:
                log.error(
                    "certificate reconcile failed (HTTP %s): %s; retrying in %.0fs",
                    exc.status,
                    exc.message,
                    check_interval,
                )
            try:
                await asyncio.wait_for(stop.wait(), timeout=wait)
            except TimeoutError:
                pass


def write_atomic_dir(target: Path, files: dict[str, bytes]) -> None:
    """Write files the way the kubelet updates a Secret volume: a new timestamped directory,
    then one atomic swap of the `..data` symlink, so a reader never sees a cert with the old key."""
    target.mkdir(parents=True, exist_ok=True)
    new_dir = Path(tempfile.mkdtemp(prefix="..", dir=target))
    os.chmod(new_dir, 0o700)
    for name, data in files.items():
        fd = os.open(new_dir / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    data_link = target / "..data"
    old = os.readlink(data_link) if data_link.is_symlink() else None
    tmp_link = target / "..data_tmp"
    if tmp_link.is_symlink() or tmp_link.exists():
        tmp_link.unlink()
    os.symlink(new_dir.name, tmp_link)
    os.replace(tmp_link, data_link)
    for name in files:
        link = target / name
        if not link.is_symlink():
            if link.exists():
                link.unlink()
            os.symlink(f"..data/{name}", link)
    if old and old != new_dir.name:
        old_path = target / old
        for child in old_path.iterdir():
            child.unlink()
        old_path.rmdir()


def parse_secret_ref(ref: str) -> tuple[str, str]:
    from webhook.cluster.names import is_dns1123_label, is_dns1123_subdomain

    ns, sep, name = ref.partition("/")
    if not sep or not ns or not name:
        raise ValueError(f"--secret must be NAMESPACE/NAME, got {ref!r}")
    if not is_dns1123_label(ns) or not is_dns1123_subdomain(name):
        raise ValueError(f"--secret {ref!r}: the namespace must be a DNS-1123 label and the name a DNS-1123 subdomain")
    return ns, name
