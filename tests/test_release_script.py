"""scripts/release.sh (`make release`) refuses bad input before it builds or pushes anything.

Its whole path (buildah push, helm push, helm install oci://, containerd's pull) runs against a real
registry in e2e/test_install_from_registry.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "release.sh"


def _run(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("REGISTRY", "VERSION", "REGISTRY_USER", "CA_FILE")}
    # tools that must never be reached: a bad input stops before them
    base.update(BUILDAH="/nonexistent/buildah-never-run", HELM="/nonexistent/helm-never-run")
    return subprocess.run(["bash", str(SCRIPT)], env={**base, **env}, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"VERSION": "0.3.0"}, "REGISTRY is required (e.g. REGISTRY=registry.example/preflight)"),
        ({"REGISTRY": "registry.example/preflight"}, "VERSION is required (e.g. VERSION=0.3.0)"),
        (
            {"REGISTRY": "registry.example/preflight", "VERSION": "v0.3"},
            "VERSION=v0.3 is not a SemVer 2 version (e.g. 0.3.0 or 0.3.0-rc.1)",
        ),
        (
            {"REGISTRY": "registry.example/Preflight", "VERSION": "0.3.0"},
            "REGISTRY=registry.example/Preflight is not host[:port][/path] (lowercase path)",
        ),
        (
            {"REGISTRY": "registry.example", "VERSION": "0.3.0", "CA_FILE": "/nonexistent/ca.pem"},
            "CA_FILE=/nonexistent/ca.pem: no such file",
        ),
        (
            {"REGISTRY": "registry.example", "VERSION": "0.3.0", "REGISTRY_USER": "ci", "REGISTRY_PASSWORD": ""},
            "REGISTRY_USER is set but REGISTRY_PASSWORD is not",
        ),
        ({"REGISTRY": "oci://registry.example:5000/p", "VERSION": "1.0.0-rc.1"}, "buildah missing"),
    ],
)
def test_bad_input_is_refused_with_the_fix(env: dict[str, str], message: str) -> None:
    proc = _run(**env)
    assert proc.returncode == 2
    assert proc.stderr == f"scripts/release.sh: error: {message}\n" or (
        message == "buildah missing" and proc.stderr.startswith("scripts/release.sh: error: buildah missing")
    ), proc.stderr
    assert proc.stdout == ""


def test_make_release_runs_the_script() -> None:
    proc = subprocess.run(
        ["make", "-s", "release", "VERSION=0.3.0"], cwd=ROOT, capture_output=True, text=True, timeout=30,
        env={k: v for k, v in os.environ.items() if k != "REGISTRY"},
    )  # fmt: skip
    assert proc.returncode != 0
    assert "scripts/release.sh: error: REGISTRY is required" in proc.stderr


def test_a_malformed_image_digest_is_refused_before_any_push() -> None:
    proc = _run(REGISTRY="registry.example/p", VERSION="0.3.0", IMAGE_DIGEST="sha256:abc")
    assert proc.returncode == 2
    assert proc.stderr.endswith("scripts/release.sh: error: IMAGE_DIGEST=sha256:abc is not sha256:<64 hex>\n")
