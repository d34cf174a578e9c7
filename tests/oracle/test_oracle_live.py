"""Live oracle: run AIPerf 0.13.0's renderer now and compare with our adapter.

Runs when PREFLIGHT_ORACLE_PYTHON names the python of a venv with the aiperf wheel.
`make test` (and so CI) creates that venv with tests/oracle/setup.sh and sets the variable;
a bare `pytest tests` without it skips these and relies on the committed goldens.

    PREFLIGHT_ORACLE_PYTHON="$(bash tests/oracle/setup.sh)" \
        .venv/bin/python -m pytest tests/oracle/test_oracle_live.py -q
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from webhook.config import Settings
from webhook.workloads.aiperf import build

HERE = Path(__file__).parent
ORACLE_PYTHON = os.environ.get("PREFLIGHT_ORACLE_PYTHON")

pytestmark = pytest.mark.skipif(not ORACLE_PYTHON, reason="PREFLIGHT_ORACLE_PYTHON is not set")


def _oracle(path: Path, env: dict[str, str]) -> dict:
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith("AIPERF_")} | env
    out = subprocess.run(
        [os.path.expanduser(ORACLE_PYTHON or ""), str(HERE / "generate.py"), "--one", str(path)],
        env=proc_env, capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("path", sorted((HERE / "specs").glob("*.yaml")), ids=lambda p: p.stem)
def test_live_oracle_agrees(path, monkeypatch):
    import importlib.util

    mod_spec = importlib.util.spec_from_file_location("oracle_generate", HERE / "generate.py")
    generate = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(generate)  # type: ignore[union-attr]
    spec_env = generate.spec_env
    for k in list(os.environ):
        if k.startswith("AIPERF_"):
            monkeypatch.delenv(k)
    env = spec_env(path)
    want = _oracle(path, env)
    wl = build(yaml.safe_load(path.read_text()), settings=Settings(aiperfEnv=env))
    if "error" in want:
        assert wl.render_errors and want["error"].split(". ")[0] in wl.render_errors[0]
    else:
        assert wl.derived["jobSet"] == want["jobSet"]
        assert wl.derived["configMap"]["data"] == want["configMap"]["data"]


def test_live_oracle_typed_field_mutations(tmp_path):
    """Every recorded verdict of tests/oracle/mutations.py is AIPerf's own (one subprocess for all)."""
    from tests.oracle.mutations import MUTATIONS, mutated

    bodies = {case: mutated(path, value) for case, (path, value, _) in MUTATIONS.items()}
    src = tmp_path / "mutations.json"
    src.write_text(json.dumps(bodies))
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith("AIPERF_")}
    out = subprocess.run(
        [os.path.expanduser(ORACLE_PYTHON or ""), str(HERE / "generate.py"), "--verdicts", str(src)],
        env=proc_env, capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    got = json.loads(out.stdout.strip().splitlines()[-1])
    wrong = {case: got[case] for case, (_, _, want) in MUTATIONS.items() if got[case].split(":")[0] != want}
    assert not wrong, f"recorded verdicts that AIPerf 0.13.0 does not give: {wrong}"
