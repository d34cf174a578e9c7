"""The Go oracles' shared harness: each is a binary built from tests/oracle/<name>/main.go by
tests/oracle/<name>/build.sh (against the upstream Go module it stands for), named to the tests by
PREFLIGHT_<NAME>_ORACLE (`make test` builds them and sets the variables; a bare `pytest tests` skips).
It reads a JSON document on stdin and answers with one on stdout."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest


class GoOracle:
    """The oracle ``name`` (dra, quota, reference, storage, podsecurity, kueue): ``skip`` is the
    module's pytestmark, ``run`` one JSON request and its answer."""

    def __init__(self, name: str, what: str) -> None:
        self.env = f"PREFLIGHT_{name.upper()}_ORACLE"
        self.build = f"tests/oracle/{name}/build.sh"
        self.path = os.environ.get(self.env)
        self.skip = pytest.mark.skipif(
            not self.path,
            reason=f"{self.env} is not set: build {what} with `bash {self.build}` (make test does) "
            "and pass the path it prints",
        )

    @property
    def binary(self) -> str:
        assert self.path, f"{self.env} is not set (the module's pytestmark skips without it)"
        return os.path.expanduser(self.path)

    def call(self, payload: Any, *args: str, timeout: float = 300) -> str:
        """Run the oracle once with ``payload`` as JSON on stdin; its stdout (it must exit 0)."""
        proc = subprocess.run(
            [self.binary, *args],
            input=None if payload is None else json.dumps(payload),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert proc.returncode == 0, f"{self.binary} {' '.join(args)} exited {proc.returncode}: {proc.stderr[-4000:]}"
        return proc.stdout

    def run(self, payload: Any, timeout: float = 300) -> Any:
        """One JSON request, one JSON answer."""
        return json.loads(self.call(payload, timeout=timeout))
