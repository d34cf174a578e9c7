"""scripts/release.sh against the CNCF distribution registry (TLS from its own CA, htpasswd auth), without
a node: the chart-only path (IMAGE_DIGEST, as the multi-arch workflow uses it). The full path, with
buildah's push and containerd's pull on the real node, is e2e/test_install_from_registry.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import trustme
import yaml

from e2e.harness.controlplane import cache_dir, ensure_built
from e2e.harness.registry import Registry, push_image

ROOT = Path(__file__).resolve().parents[1]
USER, PASSWORD = "releaser", "release-chart-31b9"


def test_chart_only_release_names_the_given_digest(tmp_path: Path) -> None:
    ensure_built(quiet=True, what="control-plane")  # helm (seconds when warm)
    helm = cache_dir() / "bin" / "helm"
    with Registry(tmp_path / "registry", trustme.CA(), {USER: PASSWORD}) as reg:
        digest = push_image(reg, "preflight/preflight-webhook", "0.3.0-rc.1")
        env = {
            **os.environ,
            "REGISTRY": f"{reg.address}/preflight",
            "VERSION": "0.3.0-rc.1",
            "IMAGE_DIGEST": digest,
            "BUILDAH": "/nonexistent/buildah-never-run",
            "HELM": str(helm),
            "CA_FILE": str(reg.ca_file),
            "REGISTRY_USER": USER,
            "REGISTRY_PASSWORD": PASSWORD,
            "HOME": str(tmp_path),  # no login of the user's is used or written
        }
        proc = subprocess.run(["bash", str(ROOT / "scripts" / "release.sh")], env=env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines() == [
            f"image: {reg.address}/preflight/preflight-webhook@{digest}",
            f"chart: oci://{reg.address}/preflight/charts/preflight-webhook --version 0.3.0-rc.1",
        ]
        assert PASSWORD not in proc.stdout + proc.stderr
        assert not (tmp_path / ".config").exists()  # the logins went to a throw-away file
        chart = f"oci://{reg.address}/preflight/charts/preflight-webhook"
        show = [str(helm), "show", "values", chart, "--version", "0.3.0-rc.1", "--ca-file", str(reg.ca_file)]
        henv = {**os.environ, "HOME": str(tmp_path)}
        anonymous = subprocess.run(show, env=henv, capture_output=True, text=True, timeout=60)
        assert anonymous.returncode != 0  # the registry wants a login for the chart too
        values = subprocess.run([*show, "--username", USER, "--password", PASSWORD], env=henv,
                                capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        image = yaml.safe_load(values.stdout)["image"]
        assert (image["repository"], image["digest"], image["tag"]) == (
            f"{reg.address}/preflight/preflight-webhook",
            digest,
            "",
        )
