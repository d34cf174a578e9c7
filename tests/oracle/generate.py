"""Re-create tests/oracle/golden/*.json with AIPerf 0.13.0's own renderer (the oracle).

Run with the interpreter of a separate venv that has the aiperf wheel (never the
project's .venv; the wheel's dependencies are heavy):

    python3 -m venv ~/.cache/preflight-webhook/oracle-venv
    ~/.cache/preflight-webhook/oracle-venv/bin/pip install --no-deps aiperf==0.13.0
    ~/.cache/preflight-webhook/oracle-venv/bin/pip install pydantic pydantic-settings "kubernetes-asyncio<33" \
        aiohttp orjson ruamel-yaml jinja2 jmespath msgspec numpy rich pyyaml cyclopts
    ~/.cache/preflight-webhook/oracle-venv/bin/python tests/oracle/generate.py

Each spec in tests/oracle/specs/ may start with a comment `# aiperfEnv: K=V K=V`: those
AIPERF_* variables are set for the operator (and given to our adapter as
Settings.aiperf_env by the tests). AIPerf reads them at import time, so every case runs in
its own subprocess. The steps mirror aiperf.operator.handlers.create._build_deployment
(that module itself imports kopf, which the oracle venv does not need).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPECS = HERE / "specs"
GOLDEN = HERE / "golden"


def spec_env(path: Path) -> dict[str, str]:
    """The `# aiperfEnv: K=V ...` line of a spec file, as a dict."""
    for line in path.read_text().splitlines():
        if line.startswith("# aiperfEnv:"):
            return dict(item.split("=", 1) for item in line.split(":", 1)[1].split())
    return {}


def render_one(path: Path) -> dict:
    """Runs inside the oracle venv with the case's env already set."""
    import yaml
    from aiperf.common.endpoint_credentials import validate_kubernetes_credential_transport
    from aiperf.config.user_files import RunMeta
    from aiperf.kubernetes.resources import KubernetesDeployment
    from aiperf.kubernetes.spec_converter import AIPerfJobSpecConverter, apply_worker_config, build_benchmark_run
    from aiperf.operator.results_layout import epoch_key_from_body

    body = yaml.safe_load(path.read_text())
    name, ns = body["metadata"]["name"], body["metadata"]["namespace"]
    out: dict = {"case": path.stem, "aiperfEnv": spec_env(path)}
    try:
        conv = AIPerfJobSpecConverter(body["spec"], name, ns, job_id=name)
        config, dc = conv.to_aiperf_config(), conv.to_deployment_config()
        total = conv.calculate_workers(dc)
        out["totalWorkers"] = total
        pods = apply_worker_config(config, total)
        run = build_benchmark_run(
            run_config=config.model_dump(
                mode="python", exclude_unset=True, exclude_none=True, context={"include_secrets": True}
            ),
            run_id=name,
            namespace=ns,
            run_meta=RunMeta(epoch=epoch_key_from_body(body), job_name=name, namespace=ns),
        )
        validate_kubernetes_credential_transport(run.cfg.endpoint, dc.pod_template.env)
        dep = KubernetesDeployment(
            job_id=name, namespace=ns, worker_replicas=pods, config=config, run=run, deployment=dc,
            job_uid=body["metadata"].get("uid"),
        )  # fmt: skip
        out["workerPods"] = pods
        out["jobSet"] = dep.get_jobset_spec().to_k8s_manifest()
        out["configMap"] = dep.get_configmap_spec().to_k8s_manifest()
    except ValueError as exc:
        out["error"] = str(exc)
    return out


def verdicts(path: Path) -> dict[str, str]:
    """{case: "accepts" | "rejects: <reason>"} for a JSON file of {case: AIPerfJob} (default env)."""
    import tempfile

    out: dict[str, str] = {}
    for case, body in json.loads(path.read_text()).items():
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as fh:
            fh.write(json.dumps(body))
            fh.flush()
            try:
                result = render_one(Path(fh.name))
            except Exception as exc:  # a converter that raises something else still refuses the spec
                result = {"error": f"{type(exc).__name__}: {exc}"}
        out[case] = f"rejects: {result['error']}" if "error" in result else "accepts"
    return out


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(render_one(Path(sys.argv[2]))))
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--verdicts":
        print(json.dumps(verdicts(Path(sys.argv[2]))))
        return 0
    GOLDEN.mkdir(exist_ok=True)
    for path in sorted(SPECS.glob("*.yaml")):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIPERF_")}
        env.update(spec_env(path))
        proc = subprocess.run(
            [sys.executable, __file__, "--one", str(path)], env=env, capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return 1
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        (GOLDEN / f"{path.stem}.json").write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")
        print(f"{path.stem}: {result.get('error') or str(result['workerPods']) + ' worker pod(s)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
