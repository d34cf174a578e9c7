"""Write constraints.txt: the exact version of every package the project installs, runtime and extras.

    .venv/bin/python scripts/constraints.py   (make constraints)

`make install` (CI: .ci/run → make test → make install), the Dockerfile and `pip install -c
constraints.txt` read it, so the image installs the versions the tests ran on. It holds what
pyproject.toml's dependencies and every extra (test, fast, bench) resolve to for this Python, with
each package .venv has at the version .venv has, and pip at .venv's version (make install's upgrade).

To move a pin: install the version wanted into .venv (`.venv/bin/pip install 'aiohttp==3.x.y'`),
run the tests, then `make constraints`. A dependency added to pyproject.toml is resolved to its newest
version that fits the rest.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "constraints.txt"
HEADER = """\
# Every package preflight-webhook installs, runtime and extras (test, fast, bench), at one version:
# read by `make install` (and so CI), the Dockerfile and e2e/images.sh's image. Generated from the
# versions .venv has and what the extras resolve to: `make constraints` (scripts/constraints.py).
"""


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """The project's dependencies and every extra's, as pyproject.toml states them."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    reqs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        reqs.extend(extra)
    return reqs


def installed() -> dict[str, str]:
    """.venv's packages (this interpreter's), pip included, the project itself left out."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "list", "--format=json", "--exclude-editable"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {row["name"]: row["version"] for row in json.loads(out) if row["name"] != "setuptools"}


def resolve(reqs: list[str], pins: dict[str, str]) -> dict[str, str]:
    """What pip installs for `reqs` into an empty environment, each package in `pins` at its version."""
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "venv.txt"
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in pins.items() if n != "pip"), encoding="utf-8")
        report = Path(tmp) / "report.json"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed"]
            + ["--report", str(report), "-c", str(constraints), *reqs],
            check=True,
        )
        items = json.loads(report.read_text(encoding="utf-8"))["install"]
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in items}


def render(versions: dict[str, str]) -> str:
    lines = [f"{name}=={version}\n" for name, version in sorted(versions.items(), key=lambda nv: _canonical(nv[0]))]
    return HEADER + "".join(lines)


def main() -> int:
    pins = installed()
    versions = resolve(requirements(), pins)
    versions["pip"] = pins["pip"]  # make install upgrades pip to this one
    OUT.write_text(render(versions), encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)}: {len(versions)} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
