"""e2e/build.sh's shell helpers, run by bash as the build runs them (set -euo pipefail).

`cmd | grep -q LINE` under pipefail is a flake: grep exits at its first match, and a command
still writing after that line dies of SIGPIPE, which fails the pipeline although the line was
there (a cold `make demo` failed so: "the etcd built on k8s.io/kubernetes' module graph is not
v3.7.0", right after building etcd v3.7.0). The build reads the output whole first: prints_line.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "e2e" / "build.sh"
# prints the version line, then 4 MiB more: far past a pipe's buffer, so a writer after the
# reader has gone gets SIGPIPE
CHATTY = "printf 'etcd Version: 3.7.0\\n'; head -c 4194304 /dev/zero | tr '\\0' x; echo"


def _bash(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source {BUILD}; {script}"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_prints_line_finds_a_line_followed_by_more_output() -> None:
    proc = _bash(f"prints_line 'etcd Version: 3.7.0' bash -c \"{CHATTY}\" && echo FOUND")
    assert proc.stdout.strip() == "FOUND", proc.stderr


def test_the_old_pipeline_fails_on_the_same_program() -> None:
    """The reason for prints_line: the pipeline form says 'not found' for a line that is there."""
    proc = _bash(f"if bash -c \"{CHATTY}\" | grep -qx 'etcd Version: 3.7.0'; then echo FOUND; else echo MISSED; fi")
    assert proc.stdout.strip() == "MISSED"


def test_prints_line_wants_the_whole_line() -> None:
    assert _bash("prints_line 'etcd Version: 3.7' echo 'etcd Version: 3.7.0'").returncode == 1
    assert _bash("prints_line 'etcd Version: 3.7.0' echo 'etcd Version: 3.7.0'").returncode == 0


def test_prints_line_fails_when_the_command_fails() -> None:
    assert _bash("prints_line 'x' bash -c 'echo x; exit 3'").returncode == 1


def test_no_script_pipes_into_an_early_exiting_grep() -> None:
    """No `… | grep -q` (or -m) in the project's scripts: each is the flake above."""
    scripts = [*REPO.glob("e2e/*.sh"), *REPO.glob("tests/oracle/**/*.sh"), *REPO.glob("scripts/*.sh"), REPO / ".ci/run"]
    offenders = [
        f"{path.relative_to(REPO)}:{n}"
        for path in scripts
        if "venv" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if not line.lstrip().startswith("#") and re.search(r"\|\s*grep\s+-[A-Za-z]*[qm]", line)
    ]
    assert offenders == []
