"""Pinned dependencies: bounds in pyproject.toml, exact versions in constraints.txt, read alike everywhere.

pyproject.toml bounds every runtime dependency (and the `fast` and `bench` extras) below its next
major version, the next minor for 0.x. constraints.txt (scripts/constraints.py, `make constraints`)
holds the exact version of every package the project and its extras install; `make install` (so CI:
.ci/run runs `make test`), the Dockerfile and e2e/images.sh's image read it, so the image ships the
versions these tests ran on.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
#: extras installed where the webhook runs (the image's EXTRAS=fast) or by its own scripts
RUNTIME_EXTRAS = ("fast", "bench")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for n, line in enumerate((REPO / "constraints.txt").read_text(encoding="utf-8").splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        assert m, f"constraints.txt:{n}: not name==version: {line!r}"
        key = _canonical(m[1])
        assert key not in pins, f"constraints.txt:{n}: {m[1]} twice"
        pins[key] = m[2]
    return pins


def _ceiling(pinned: Version) -> Version:
    """The next major version, the next minor for 0.x."""
    return Version(f"0.{pinned.minor + 1}") if pinned.major == 0 else Version(f"{pinned.major + 1}")


def test_every_runtime_dependency_has_an_upper_bound_at_the_next_major() -> None:
    pins = _pins()
    reqs = [*PROJECT["dependencies"], *(r for e in RUNTIME_EXTRAS for r in PROJECT["optional-dependencies"][e])]
    for text in reqs:
        req = Requirement(text)
        uppers = [Version(s.version) for s in req.specifier if s.operator in ("<", "<=", "==", "~=")]
        assert uppers, f"pyproject.toml: {text!r} has no upper bound (the next major, the next minor for 0.x)"
        pinned = Version(pins[_canonical(req.name)])
        assert pinned in req.specifier, f"constraints.txt pins {req.name} {pinned}, outside pyproject's {text!r}"
        assert min(uppers) <= _ceiling(pinned), (
            f"pyproject.toml: {text!r} allows a major past the pinned {pinned}: bound it below {_ceiling(pinned)}"
        )


def _closure(extras: tuple[str, ...]) -> dict[str, str]:
    """Every distribution installed for the project with these extras (installed name → version)."""
    env = {k: str(v) for k, v in default_environment().items()}
    out: dict[str, str] = {}
    todo = [(_canonical("preflight-webhook"), extras)]
    while todo:
        name, wanted = todo.pop()
        dist = importlib.metadata.distribution(name)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not any(req.marker.evaluate({**env, "extra": e}) for e in ("", *wanted)):
                continue
            key = _canonical(req.name)
            if key not in out:
                out[key] = importlib.metadata.version(req.name)
                todo.append((key, tuple(req.extras)))
    return out


def test_constraints_pin_every_installed_runtime_and_test_dependency_at_its_installed_version() -> None:
    pins = _pins()
    installed = _closure(("test",))
    assert installed, "preflight-webhook's metadata lists no dependencies: is it installed (make install)?"
    missing = sorted(set(installed) - set(pins))
    assert not missing, f"constraints.txt lacks {missing}: run `make constraints`"
    moved = {k: (v, pins[k]) for k, v in installed.items() if Version(v) != Version(pins[k])}
    assert not moved, (
        f"installed (left) is not what constraints.txt pins (right): {moved}; `make constraints` or reinstall"
    )


def test_constraints_pin_every_package_pyproject_names() -> None:
    pins = _pins()
    named = [*PROJECT["dependencies"], *(r for extra in PROJECT["optional-dependencies"].values() for r in extra)]
    missing = sorted(Requirement(t).name for t in named if _canonical(Requirement(t).name) not in pins)
    assert not missing, f"constraints.txt lacks {missing}: run `make constraints`"


def _continued(text: str) -> list[str]:
    """Lines with their backslash continuations joined."""
    return text.replace("\\\n", " ").splitlines()


def test_make_install_reads_the_constraints() -> None:
    lines = _continued((REPO / "Makefile").read_text(encoding="utf-8"))
    start = next(i for i, line in enumerate(lines) if line.startswith("$(VENV)/.installed:"))
    assert "constraints.txt" in lines[start].split(":", 1)[1].split(), "a new constraints.txt must reinstall"
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line)
    installs = [line for line in recipe if "$(PIP) install" in line]
    assert len(installs) == 2, recipe  # pip itself, then the project with its test extras
    for line in installs:
        assert "-c constraints.txt" in line, f"make install without the constraints: {line.strip()}"
    assert any("'.[test]'" in line for line in installs)
    # CI runs make test, which runs make install first
    assert "make test" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
    test_rule = next(line for line in lines if line.startswith("test:"))
    assert "install" in test_rule.split(":", 1)[1].split("##")[0].split()


def test_the_image_reads_the_constraints_the_same_way() -> None:
    lines = _continued((REPO / "Dockerfile").read_text(encoding="utf-8"))
    copies = [shlex.split(line)[1:] for line in lines if line.startswith("COPY ") and "--from" not in line]
    assert any("constraints.txt" in c[:-1] and c[-1] == "./" for c in copies), "the Dockerfile copies constraints.txt"
    runs = [line for line in lines if line.startswith("RUN ")]
    installs = [cmd for line in runs for cmd in line.split("&&") if "pip install" in cmd]
    assert installs, "the Dockerfile installs nothing"
    for cmd in installs:
        assert "-c constraints.txt" in cmd, f"an install in the Dockerfile without the constraints: {cmd.strip()}"
    ignore = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert "!constraints.txt" in ignore, ".dockerignore must let constraints.txt into the build context"
    # the e2e image's tag hashes what the Dockerfile copies: a new pin is a new image
    images = (REPO / "e2e" / "images.sh").read_text(encoding="utf-8")
    hashed = re.search(r"find Dockerfile ([^|]*?) -type f", images)
    assert hashed and "constraints.txt" in hashed[1].split(), "e2e/images.sh's webhook tag must hash constraints.txt"
