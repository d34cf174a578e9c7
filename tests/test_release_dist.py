"""What a release publishes for the CLI (issue 36, item 7): `scripts/release.sh` with DIST builds the
sdist, the wheel and the krew plugin; the wheel installs into a clean virtual environment and runs
`check`; the README's CI snippets run as written against it; the krew manifest holds what krew
validates, and its launcher installs the wheel on first run.

The build is real: `python -m build` (bootstrapped into a throw-away venv when the running Python
lacks it) in an isolated environment, which fetches setuptools from the package index, as the
Dockerfile's `pip wheel` does: about 25 s, once per module.

The wheel is installed with `--no-deps`, and the test runner's own site-packages (minus pip,
setuptools and this project's editable install) is added to the new environment's path after its
own site-packages. Installing the dependencies from the index takes about 45 s more per
environment and needs the network; with the test runner's copies, the wheel's files, entry points
and metadata are what is tested, and `pip check` proves the wheel's declared dependencies are met
by the versions the rest of the suite runs with.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "release.sh"
SAMPLES = ROOT / "e2e" / "samples"
VERSION, PY_VERSION = "0.3.0-rc.1", "0.3.0rc1"
REPO_URL = "https://git.example/acme/preflight-webhook"
#: what an install line of the README may say: the repository at a release tag
INSTALL = re.compile(r'pip install "git\+https://github\.com/<your-org>/preflight-webhook@v\d+\.\d+\.\d+"')

pytestmark = pytest.mark.timeout(600)


@dataclass(frozen=True)
class Dist:
    dir: Path
    stdout: str
    stderr: str

    @property
    def wheel(self) -> Path:
        return self.dir / f"preflight_webhook-{PY_VERSION}-py3-none-any.whl"

    @property
    def sdist(self) -> Path:
        return self.dir / f"preflight_webhook-{PY_VERSION}.tar.gz"

    @property
    def archive(self) -> Path:
        return self.dir / f"kubectl-preflight-v{VERSION}.tar.gz"

    @property
    def manifest(self) -> Path:
        return self.dir / "preflight.yaml"


def _env(**extra: str) -> dict[str, str]:
    drop = ("REGISTRY", "VERSION", "DIST", "DIST_ONLY", "REPO_URL", "DOWNLOAD_URL", "PYTHON", "IMAGE", "IMAGE_DIGEST")
    base = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("PIP_", "PYTHON"))}
    return {**base, "BUILDAH": "/nonexistent/buildah-never-run", "HELM": "/nonexistent/helm-never-run", **extra}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    out = tmp_path_factory.mktemp("dist")
    env = _env(DIST_ONLY="1", VERSION=VERSION, DIST=str(out), REPO_URL=REPO_URL, PYTHON=sys.executable)
    proc = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stderr
    return Dist(out, proc.stdout, proc.stderr)


@pytest.fixture(scope="module")
def deps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test runner's installed distributions, without pip, setuptools and this project (its editable
    install would shadow the wheel's metadata), as symbolic links."""
    site = Path(sysconfig.get_paths()["purelib"])
    out = tmp_path_factory.mktemp("deps")
    skip = ("preflight_webhook", "__editable__", "pip", "setuptools", "_distutils_hack", "distutils-precedence",
            "pkg_resources", "__pycache__", "_virtualenv")  # fmt: skip
    for entry in site.iterdir():
        if not entry.name.startswith(skip) and not entry.name.endswith(".pth"):
            (out / entry.name).symlink_to(entry)
    return out


@pytest.fixture(scope="module")
def venv(dist: Dist, deps: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the wheel installed (and `deps` on its path, after its own packages)."""
    env_dir = tmp_path_factory.mktemp("venv") / "v"
    base = sys._base_executable  # the interpreter the test runner's venv was made from
    subprocess.run([base, "-m", "venv", str(env_dir)], check=True, timeout=120, env=_env())
    python = env_dir / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", str(dist.wheel)]
    subprocess.run(install, check=True, timeout=120, env=_env())
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, env=_env(),
    ).stdout.strip()  # fmt: skip
    (Path(purelib) / "zz-test-deps.pth").write_text(f"{deps}\n")
    return env_dir


def _manifests(workdir: Path) -> None:
    """manifests/: a job the webhook admits and one it denies offline (its name is too long for its pods)."""
    (workdir / "manifests").mkdir()
    good = (SAMPLES / "aiperfjob-good.yaml").read_text()
    (workdir / "manifests" / "good.yaml").write_text(good)
    long_name = "llama-bench-with-a-name-far-too-long-for-its-pods"
    bad = re.sub(r"(?m)^  name: llama-bench$", f"  name: {long_name}", good)
    assert bad != good
    (workdir / "manifests" / "long-name.yaml").write_text(bad)


def _run(cmd: list[str] | str, venv: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    path = f"{venv / 'bin'}:{os.environ['PATH']}"
    return subprocess.run(cmd, cwd=cwd, env=_env(PATH=path, **env), capture_output=True, text=True, timeout=120,
                          shell=isinstance(cmd, str), executable="/bin/bash" if isinstance(cmd, str) else None)  # fmt: skip


# ------------------------------------------------------------------------------------ the build


def test_release_builds_the_sdist_the_wheel_and_the_krew_plugin_and_says_where(dist: Dist) -> None:
    assert dist.stdout.splitlines() == [
        f"sdist: {dist.sdist}",
        f"wheel: {dist.wheel}",
        f"krew plugin: {dist.archive}",
        f"krew manifest: {dist.manifest}",
    ]
    assert f"==> the sdist, the wheel and the krew plugin are in {dist.dir}\n" in dist.stderr
    assert sorted(p.name for p in dist.dir.iterdir()) == sorted(
        ["SHA256SUMS", dist.sdist.name, dist.wheel.name, dist.archive.name, "preflight.yaml"]
    )
    sums = dict(reversed(line.split("  ", 1)) for line in (dist.dir / "SHA256SUMS").read_text().splitlines())
    assert sums == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in dist.dir.iterdir() if p.name in sums}
    assert len(sums) == 4


def test_the_wheel_and_the_sdist_hold_the_whole_package_at_the_release_version(dist: Dist) -> None:
    source = {str(p.relative_to(ROOT)) for p in (ROOT / "webhook").rglob("*.py") if "__pycache__" not in p.parts}
    with zipfile.ZipFile(dist.wheel) as whl:
        names = set(whl.namelist())
        info = f"preflight_webhook-{PY_VERSION}.dist-info"
        metadata = whl.read(f"{info}/METADATA").decode()
        entry_points = whl.read(f"{info}/entry_points.txt").decode()
        init = whl.read("webhook/__init__.py").decode()
    assert {n for n in names if n.startswith("webhook/")} == source
    assert f"\nVersion: {PY_VERSION}\n" in metadata
    assert f'__version__ = "{PY_VERSION}"' in init
    assert "preflight-webhook = webhook.cli:main" in entry_points
    assert "kubectl-preflight = webhook.cli:kubectl_main" in entry_points
    with tarfile.open(dist.sdist) as sdist:
        top = f"preflight_webhook-{PY_VERSION}"
        members = {m.name.removeprefix(f"{top}/") for m in sdist.getmembers()}
        pyproject = sdist.extractfile(f"{top}/pyproject.toml")
        assert pyproject is not None
        assert f'\nversion = "{PY_VERSION}"\n' in pyproject.read().decode()
    assert source <= members and {"pyproject.toml", "README.md"} <= members


# ----------------------------------------------------------------------------- the installed wheel


def test_the_wheel_installs_into_a_clean_venv_and_runs_check(venv: Path, tmp_path: Path) -> None:
    python = str(venv / "bin" / "python")
    where = _run([python, "-c", "import webhook; print(webhook.__file__)"], venv, tmp_path)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr  # the wheel's, not the checkout's
    check = _run([python, "-m", "pip", "check", "--disable-pip-version-check"], venv, tmp_path)
    assert not [line for line in check.stdout.splitlines() if line.startswith("preflight-webhook")], check.stdout
    assert _run(["preflight-webhook", "--version"], venv, tmp_path).stdout == f"preflight-webhook {PY_VERSION}\n"

    shutil.copy(SAMPLES / "aiperfjob-good.yaml", tmp_path / "job.yaml")
    proc = _run(["preflight-webhook", "check", "--offline", "-f", "job.yaml"], venv, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "AIPerfJob demo-bench/llama-bench"
    assert re.search(r"✓ Job Render +Renders 2 pod\(s\)", proc.stdout)
    assert "  - Secrets                  Skipped: needs a cluster (running offline)" in lines
    assert lines[-1] == "Summary: 1 job checked in 1 file: 1 passed, 0 passed with warnings, 0 failed"
    # the kubectl plugin's entry point, as kubectl finds it on PATH
    plugin = _run(["kubectl-preflight", "check", "--offline", "-f", "job.yaml", "-o", "json"], venv, tmp_path)
    assert plugin.returncode == 0, plugin.stderr
    [entry] = json.loads(plugin.stdout)
    assert (entry["kind"], entry["name"], entry["passed"]) == ("AIPerfJob", "llama-bench", True)


def _readme_pipelines() -> list[tuple[str, list[str]]]:
    """The README's CI snippets: (where, their shell commands in order), from its YAML blocks."""
    readme = (ROOT / "README.md").read_text()
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```yaml\n(.*?)```", readme, re.S):
        doc = yaml.safe_load(block)
        if isinstance(doc, dict) and "jobs" in doc:  # GitHub Actions
            for name, job in doc["jobs"].items():
                out.append((f"GitHub Actions job {name}", [s["run"] for s in job["steps"] if "run" in s]))
        elif isinstance(doc, list):  # GitHub Actions steps
            out.append(("GitHub Actions steps", [s["run"] for s in doc if "run" in s]))
        elif isinstance(doc, dict):  # GitLab CI
            for name, job in doc.items():
                out.append((f"GitLab CI job {name}", list(job["script"])))
    return out


def test_the_readme_installs_from_the_repository_never_from_an_index() -> None:
    pipelines = _readme_pipelines()
    assert len(pipelines) == 4
    # nothing in the README or docs/ installs the name from an index (where anyone may register it)
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        found = re.search(r"pip install ['\"]?preflight-webhook\b.*", page.read_text())
        assert not found, f"{page.relative_to(ROOT)}: {found.group(0)}"
    for where, commands in pipelines:
        installs = [c for c in commands if c.startswith("pip ")]
        if where != "GitHub Actions steps":  # the cluster steps extend the job above
            assert len(installs) == 1, where
        assert all(INSTALL.fullmatch(c) for c in installs), (where, installs)


def test_the_readme_ci_snippets_run_as_written_against_the_wheel(venv: Path, tmp_path: Path) -> None:
    """Every command of the offline pipelines, as the README writes it, except its install line (the
    wheel stands for the tag it installs); the cluster ones need a cluster and are not run."""
    _manifests(tmp_path)
    ran = 0
    for where, commands in _readme_pipelines():
        if any("--kubeconfig" in c for c in commands):
            continue
        for command in commands:
            if INSTALL.fullmatch(command):
                continue
            proc = _run(command, venv, tmp_path)
            ran += 1
            # the long name is denied: exit 1, as the README says, and the report is complete
            assert proc.returncode == 1, (where, command, proc.stderr)
            assert "Summary: 2 jobs checked in 2 files: 1 passed, 0 passed with warnings, 1 failed" in (
                proc.stdout + proc.stderr
            ), (where, command)
            if "-o github" in command:
                assert proc.stdout.startswith("::error file=manifests/long-name.yaml,line=2,title=Job Render"), command
    assert ran == 3
    sarif = json.loads((tmp_path / "preflight.sarif").read_text())
    assert sarif["version"] == "2.1.0"
    assert sarif["runs"][0]["tool"]["driver"]["version"] == PY_VERSION
    [result] = [r for r in sarif["runs"][0]["results"] if r["level"] == "error"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "manifests/long-name.yaml"
    junit = ElementTree.parse(tmp_path / "preflight-junit.xml").getroot()
    assert (junit.tag, junit.get("failures"), junit.get("errors")) == ("testsuites", "1", "0")


# ------------------------------------------------------------------------------------------- krew

#: internal/index/validation/validate.go (krew): a plugin name, a SemVer with `v`, a sha256
_KREW_NAME = re.compile(r"^[\w-]+$")
_SEMVER = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
_SHA256 = re.compile(r"^[a-f0-9]{64}$")


def krew_problems(manifest: dict, file_name: str) -> list[str]:
    """What krew's ValidatePlugin (internal/index/validation/validate.go) refuses, and the fields its
    plugin manifest guide calls required (description)."""
    spec = manifest.get("spec") or {}
    name = (manifest.get("metadata") or {}).get("name", "")
    problems = []
    if manifest.get("apiVersion") != "krew.googlecontainertools.github.com/v1alpha2":
        problems.append(f"apiVersion {manifest.get('apiVersion')!r}")
    if manifest.get("kind") != "Plugin":
        problems.append(f"kind {manifest.get('kind')!r}")
    if not _KREW_NAME.match(name) or f"{name}.yaml" != file_name:
        problems.append(f"metadata.name {name!r} (file {file_name})")
    short = spec.get("shortDescription") or ""
    if not short or "\n" in short or "\r" in short:
        problems.append("shortDescription")
    if not spec.get("description"):
        problems.append("description")
    if not _SEMVER.match(str(spec.get("version", ""))):
        problems.append(f"version {spec.get('version')!r}")
    if not spec.get("platforms"):
        problems.append("no platforms")
    for p in spec.get("platforms") or []:
        if not p.get("uri"):
            problems.append("uri")
        if not _SHA256.match(str(p.get("sha256", ""))):
            problems.append(f"sha256 {p.get('sha256')!r}")
        if not p.get("bin"):
            problems.append("bin")
        files = p.get("files")
        if files is not None and (not files or not all(f.get("from") and f.get("to") for f in files)):
            problems.append("files")
        sel = p.get("selector")
        if not sel or (not sel.get("matchLabels") and not sel.get("matchExpressions")):
            problems.append("selector empty")
        else:
            keys = list(sel.get("matchLabels") or {}) + [e["key"] for e in sel.get("matchExpressions") or []]
            if not set(keys) <= {"os", "arch"}:
                problems.append(f"selector keys {keys}")
    return problems


def test_the_krew_manifest_has_what_krew_requires(dist: Dist) -> None:
    manifest = yaml.safe_load(dist.manifest.read_text())
    assert krew_problems(manifest, dist.manifest.name) == []
    assert manifest["metadata"]["name"] == "preflight"  # `kubectl preflight`
    spec = manifest["spec"]
    assert spec["version"] == f"v{VERSION}"
    assert spec["homepage"] == REPO_URL
    [platform] = spec["platforms"]
    assert platform["uri"] == f"{REPO_URL}/releases/download/v{VERSION}/{dist.archive.name}"
    assert platform["sha256"] == hashlib.sha256(dist.archive.read_bytes()).hexdigest()
    assert platform["selector"] == {
        "matchExpressions": [{"key": "os", "operator": "In", "values": ["darwin", "linux"]}]
    }
    # krew extracts every file (no `files:`) and links `bin`: the launcher, executable, beside the wheel
    assert "files" not in platform
    with tarfile.open(dist.archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == sorted([platform["bin"], dist.wheel.name])
        assert members[platform["bin"]].mode & 0o111
        wheel = tar.extractfile(dist.wheel.name)
        assert wheel is not None and wheel.read() == dist.wheel.read_bytes()
    # the template in the repository is what was rendered
    template = (ROOT / "scripts" / "krew" / "preflight.yaml").read_text()
    assert set(re.findall(r"@([A-Z0-9]+)@", template)) == {"VERSION", "HOMEPAGE", "URI", "SHA256"}
    assert "@" not in dist.manifest.read_text().replace("<your-org>", "")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"apiVersion": "krew.googlecontainertools.github.com/v1alpha1"}, "apiVersion"),
        ({"kind": "Plugins"}, "kind"),
        ({"spec.version": "0.3.0"}, "version '0.3.0'"),
        ({"spec.shortDescription": "two\nlines"}, "shortDescription"),
        ({"spec.platforms.0.sha256": "ABC"}, "sha256 'ABC'"),
        ({"spec.platforms.0.bin": ""}, "bin"),
        ({"spec.platforms.0.selector": {"matchLabels": {"distro": "debian"}}}, "selector keys ['distro']"),
    ],
)
def test_the_krew_check_catches_what_krew_refuses(dist: Dist, change: dict, problem: str) -> None:
    manifest = yaml.safe_load(dist.manifest.read_text())
    [(path, value)] = change.items()
    *parents, last = path.split(".")
    node = manifest
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    node[last] = value
    assert any(p.startswith(problem) for p in krew_problems(manifest, "preflight.yaml"))


def test_the_krew_launcher_installs_the_wheel_on_first_run_and_runs_check(
    dist: Dist, deps: Path, tmp_path: Path
) -> None:
    """As krew lays it out: the archive extracted into the plugin's versioned directory, and a symbolic
    link in krew's bin directory. pip installs the wheel without its dependencies (PIP_NO_DEPS, pip's own
    setting) and they are read from the test runner's (PYTHONPATH): see the module's docstring."""
    store = tmp_path / "store" / "preflight" / f"v{VERSION}"
    store.mkdir(parents=True)
    with tarfile.open(dist.archive) as tar:
        tar.extractall(store, filter="data")
    (tmp_path / "bin").mkdir()
    link = tmp_path / "bin" / "kubectl-preflight"
    link.symlink_to(store / "kubectl-preflight")
    shutil.copy(SAMPLES / "aiperfjob-good.yaml", tmp_path / "job.yaml")
    base_python = Path(sys._base_executable)
    env = {"PIP_NO_DEPS": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONPATH": str(deps),
           "PREFLIGHT_PYTHON": str(base_python), "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}  # fmt: skip

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl-preflight", "check", "--offline", "-f", "job.yaml", "-o", "json"],
                              cwd=tmp_path, env=_env(**env), capture_output=True, text=True, timeout=300)  # fmt: skip

    first = run()
    assert first.returncode == 0, first.stderr
    assert f"kubectl-preflight: first run: installing {dist.wheel.name} and its dependencies into {store}/venv" in (
        first.stderr
    )
    [entry] = json.loads(first.stdout)
    assert (entry["kind"], entry["name"], entry["passed"]) == ("AIPerfJob", "llama-bench", True)
    assert (store / "venv" / ".installed").is_file()
    again = run()
    assert again.returncode == 0 and "first run" not in again.stderr, again.stderr
    # the same report, but for each check's duration_ms (a clock reading: it differs under load)
    assert _timeless(json.loads(again.stdout)) == _timeless(json.loads(first.stdout))
    # no Python 3.11+: a clear error, nothing half-installed
    shutil.rmtree(store / "venv")
    old = subprocess.run(["kubectl-preflight", "check"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env=_env(**{**env, "PREFLIGHT_PYTHON": "/nonexistent/python3"}))  # fmt: skip
    assert old.returncode == 2
    assert old.stderr == (
        "kubectl-preflight: error: needs Python 3.11 or newer (none found on PATH; set PREFLIGHT_PYTHON)\n"
    )
    assert not (store / "venv").exists()


def _timeless(report: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The check report without the duration_ms of each check."""
    return [{**e, "checks": [{k: v for k, v in c.items() if k != "duration_ms"} for c in e["checks"]]} for e in report]


def _krew() -> Path:
    """krew from the Go module sigs.k8s.io/krew at e2e/versions.env KREW_VERSION (`e2e/build.sh krew`, part of
    `make build-test`; built by it here when the cache lacks it)."""
    from e2e.harness.controlplane import cached_binary

    return cached_binary("krew")


def test_krew_installs_the_plugin_and_kubectl_runs_it(dist: Dist, deps: Path, tmp_path: Path) -> None:
    """The real krew validates the manifest, checks the archive's sha256 and installs it; kubectl finds
    `kubectl preflight` through krew's bin directory, and its first run installs the wheel (without its
    dependencies, read from the test runner's: see the module's docstring)."""
    from e2e.harness.controlplane import cached_binary

    krew, kubectl = _krew(), cached_binary("kubectl")
    root = tmp_path / "krew-root"
    env = _env(KREW_ROOT=str(root), HOME=str(tmp_path))

    def install(manifest: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(krew), "install", f"--manifest={manifest}", f"--archive={dist.archive}"], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)  # fmt: skip

    # a sha256 that is not the archive's is refused, and nothing is installed
    wrong = tmp_path / "preflight.yaml"
    text = dist.manifest.read_text()
    sha = hashlib.sha256(dist.archive.read_bytes()).hexdigest()
    wrong.write_text(text.replace(sha, "0" * 64))
    refused = install(wrong)
    assert refused.returncode != 0 and "checksum does not match" in refused.stderr, refused.stderr
    assert not (root / "bin" / "kubectl-preflight").exists()

    installed = install(dist.manifest)
    assert installed.returncode == 0, installed.stderr
    assert "Installed plugin: preflight" in installed.stderr
    assert "kubectl preflight is a Python program: it needs Python 3.11 or newer" in installed.stderr  # the caveats
    assert (root / "bin" / "kubectl-preflight").resolve() == root / "store" / "preflight" / f"v{VERSION}" / (
        "kubectl-preflight"
    )

    shutil.copy(SAMPLES / "aiperfjob-good.yaml", tmp_path / "job.yaml")
    run_env = {**env, "PATH": f"{root / 'bin'}:{os.environ['PATH']}", "PIP_NO_DEPS": "1", "PYTHONPATH": str(deps),
               "PREFLIGHT_PYTHON": str(Path(sys._base_executable))}  # fmt: skip
    listed = subprocess.run([str(kubectl), "plugin", "list", "--name-only"], env=run_env, capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert "kubectl-preflight" in listed.stdout.splitlines(), listed.stdout + listed.stderr
    proc = subprocess.run([str(kubectl), "preflight", "check", "--offline", "-f", "job.yaml", "-o", "json"],
                          cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "kubectl-preflight: first run: installing" in proc.stderr
    [entry] = json.loads(proc.stdout)
    assert (entry["kind"], entry["name"], entry["passed"]) == ("AIPerfJob", "llama-bench", True)


# ----------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DIST_ONLY": "1"}, "VERSION is required (e.g. VERSION=0.3.0)"),
        ({"DIST_ONLY": "yes", "VERSION": "0.3.0"}, "DIST_ONLY=yes: set it to 1 or leave it unset"),
        ({"DIST_ONLY": "1", "VERSION": "0.3.0", "REPO_URL": "git.example/acme"}, "REPO_URL=git.example/acme is not an http(s) URL"),
        ({"DIST_ONLY": "1", "VERSION": "0.3.0", "PYTHON": "/nonexistent/python3"}, "python missing (/nonexistent/python3; set PYTHON)"),
    ],
)  # fmt: skip
def test_bad_dist_input_is_refused_before_any_build(env: dict[str, str], message: str, tmp_path: Path) -> None:
    proc = subprocess.run(["bash", str(SCRIPT)], env=_env(DIST=str(tmp_path / "dist"), **env), capture_output=True,
                          text=True, timeout=30)  # fmt: skip
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, f"scripts/release.sh: error: {message}\n", "")
    assert not (tmp_path / "dist").exists()


def test_a_full_release_with_dist_builds_them_before_it_pushes(tmp_path: Path) -> None:
    """The whole script with DIST (as `make release` runs it): the chart-only path (IMAGE_DIGEST) with a
    helm that logs its calls. The dist files are built before helm runs, and the chart's package joins them."""
    log = tmp_path / "helm.log"
    helm = tmp_path / "helm"
    helm.write_text(f"""#!/bin/bash
echo "helm $1 (dist: $(ls {tmp_path}/dist 2>/dev/null | tr '\\n' ' '))" >>{log}
if [[ $1 == package ]]; then
    while [[ $# -gt 0 ]]; do [[ $1 == -d ]] && out=$2; [[ $1 == --version ]] && version=$2; shift; done
    mkdir -p "$out" && echo chart >"$out/preflight-webhook-$version.tgz"
fi
""")
    helm.chmod(0o755)
    env = _env(REGISTRY="registry.example/p", VERSION="0.3.0", IMAGE_DIGEST="sha256:" + "ab" * 32, HELM=str(helm),
               DIST=str(tmp_path / "dist"), REPO_URL=REPO_URL, PYTHON=sys.executable)  # fmt: skip
    proc = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "dist"
    assert proc.stdout.splitlines() == [
        f"image: registry.example/p/preflight-webhook@sha256:{'ab' * 32}",
        "chart: oci://registry.example/p/charts/preflight-webhook --version 0.3.0",
        f"sdist: {out}/preflight_webhook-0.3.0.tar.gz",
        f"wheel: {out}/preflight_webhook-0.3.0-py3-none-any.whl",
        f"krew plugin: {out}/kubectl-preflight-v0.3.0.tar.gz",
        f"krew manifest: {out}/preflight.yaml",
    ]
    # every helm call saw the Python distributions and the krew plugin built already (SHA256SUMS is written last)
    calls = log.read_text().splitlines()
    assert [c.split(" (")[0] for c in calls] == ["helm package", "helm push"]
    built = "kubectl-preflight-v0.3.0.tar.gz preflight.yaml preflight_webhook-0.3.0-py3-none-any.whl"
    assert all(c.endswith(f"(dist: {built} preflight_webhook-0.3.0.tar.gz )") for c in calls), calls
    sums = (out / "SHA256SUMS").read_text().splitlines()
    assert [line.split("  ")[1] for line in sums] == [
        "preflight_webhook-0.3.0.tar.gz",
        "preflight_webhook-0.3.0-py3-none-any.whl",
        "kubectl-preflight-v0.3.0.tar.gz",
        "preflight.yaml",
        "preflight-webhook-0.3.0.tgz",
    ]
    assert (out / "preflight-webhook-0.3.0.tgz").read_text() == "chart\n"
    assert "==> the sdist, the wheel, the krew plugin and the chart's package are in " + str(out) in proc.stderr
