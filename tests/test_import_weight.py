"""What the offline paths never import (issue 38, item 3: "Do not import what is never used").

`import kubernetes_asyncio` runs its package `__init__`, which imports every generated API and
model module (kubernetes_asyncio/__init__.py imports `client`, whose `__init__` imports all of
them, and client/api_client.py imports `kubernetes_asyncio.client.models` itself): 61 MiB of RSS
over a bare interpreter, 34 MiB over what `serve` loads anyway (docs/benchmarks/import-weight.md).
The webhook uses it for its configuration and transport only, which webhook/cluster/kubeconfig.py
and KubeClient now do themselves: neither a webhook (offline or not) nor the audit controller loads
it; only `certs manage` and a kubeconfig user with an auth-provider (gcp, oidc) still do. Each check here runs in a fresh interpreter, since this
test process may have imported anything.

The idle offline webhook (issue 38: ≤ 60 MiB) also defers, one test each: the `cel` library (to the
first CEL compile), `cryptography` (to generating a certificate: serving reads its certificate's
serial, validity and subject from the DER itself) and the other commands of the command line (the
manifest reader and report formats of `check` and `plan`, the audit report, `certs`).
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import trustme
import yaml

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "oracle" / "samples" / "aiperfjob.yaml"
HEAVY = "kubernetes_asyncio"

#: what a serving webhook defers until it is used: the packages and modules (with their submodules)
DEFERRED = (HEAVY, "cryptography", "cel", "webhook.manifests", "webhook.cli.check", "webhook.cli.certs")


def report_at_exit(*names: str) -> str:
    """Code that prints, at exit, the loaded modules that are `names` or under them (a JSON list) as the last line."""
    return (
        "import atexit, json, sys\n"
        f"_names = {names!r}\n"
        "atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules "
        "if any(m == n or m.startswith(n + '.') for n in _names)))))\n"
    )


REPORT_AT_EXIT = report_at_exit(HEAVY)


def heavy_modules(code: str, *argv: str, names: tuple[str, ...] = (HEAVY,)) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", report_at_exit(*names) + code, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.stdout.strip(), out.stderr
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def test_the_probe_sees_kubernetes_asyncio_where_it_is_imported():
    """`certs manage` still uses the library (webhook/cli/certs_manage.py): the detector is not blind."""
    assert "kubernetes_asyncio.client.models" in heavy_modules("import kubernetes_asyncio.config")


def test_the_cluster_view_and_the_audit_controller_leave_kubernetes_asyncio_out():
    """webhook/cluster/kubeconfig.py loads the configuration and KubeClient sends the requests itself."""
    assert heavy_modules("import webhook.cluster.live, webhook.cluster.client, webhook.audit.runner") == []


def test_serve_offline_import_set_leaves_kubernetes_asyncio_out():
    """What webhook/cli/serve.py `_serve` imports when --offline, the adapters included."""
    code = (
        "import webhook.cli, webhook.cli.serve, webhook.tls, webhook.listener, webhook.metrics, webhook.server\n"
        "from webhook.workloads import import_adapters; import_adapters()\n"
    )
    assert heavy_modules(code) == []


def test_the_cel_library_is_loaded_on_the_first_compile_only():
    """webhook/celsubset.py imports `cel` (whose __init__ loads its command line, prompt_toolkit: 12.3 MiB) when
    an expression is first compiled: the serve import set leaves it out, a compile brings it in."""
    code = (
        "import sys\n"
        "import webhook.cli, webhook.cli.serve, webhook.server, webhook.schema.rules, webhook.models.dra.cel\n"
        "from webhook.workloads import import_adapters; import_adapters()\n"
        "before = 'cel' in sys.modules\n"
        "from webhook.celsubset import compile_within, run\n"
        "got = compile_within('x > 1', frozenset({'_>_'}))\n"
        "print(before, 'cel' in sys.modules, run(got.program, x=2))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True", "True"], out.stderr


def test_the_serving_certificate_is_loaded_without_cryptography(tmp_path: Path):
    """webhook/tls.py imports cryptography to generate a pair only: `serve` with a given pair reads its
    serial, validity and subject from the DER (tests/test_tls.py compares them with cryptography's)."""
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    crt, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    leaf.cert_chain_pems[0].write_to_path(str(crt))
    leaf.private_key_pem.write_to_path(str(key))
    code = (
        "import sys\n"
        "from webhook.tls import CertReloader, server_context\n"
        "ctx = server_context(sys.argv[1], sys.argv[2])\n"
        "print(CertReloader(ctx, sys.argv[1], sys.argv[2]).load_initial().serial)\n"
    )
    assert heavy_modules(code, str(crt), str(key), names=("cryptography",)) == []
    certs = "from webhook.tls import generate_ca\ngenerate_ca()\n"
    assert "cryptography.x509" in heavy_modules(certs, names=("cryptography",))  # the detector is not blind


def test_a_command_loads_no_other_command():
    """webhook/cli/__init__.py imports a command's module when that command runs: `serve` parses its
    arguments without the manifest reader and report formats of `check` and `plan`, or `certs`."""
    code = "from webhook.cli import main\nmain(['serve', '--offline', '--tls-cert', 'missing.crt', '--tls-key', 'k'])\n"
    loaded = heavy_modules(code, names=("webhook.cli", "webhook.manifests"))
    assert loaded == ["webhook.cli", "webhook.cli.serve"]
    everything = heavy_modules("from webhook.cli import build_parser\nbuild_parser()\n", names=("webhook.cli",))
    assert {"webhook.cli.check", "webhook.cli.certs", "webhook.cli.report"} <= set(everything)  # --help lists all


def test_check_offline_leaves_kubernetes_asyncio_out():
    code = "import sys\nfrom webhook.cli import main\nrc = main(sys.argv[1:])\n"
    assert heavy_modules(code, "check", "--offline", "-f", str(SAMPLE), "-o", "json") == []


def review(obj: dict[str, Any]) -> bytes:
    """The AdmissionReview the apiserver sends for a CREATE of `obj`."""
    group, version = obj["apiVersion"].split("/")
    request = {
        "uid": "import-weight",
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": obj["kind"].lower() + "s"},
        "namespace": obj["metadata"].get("namespace", "default"),
        "name": obj["metadata"]["name"],
        "operation": "CREATE",
        "userInfo": {"username": "test"},
        "object": obj,
    }
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_serving_offline_webhook_never_loads_kubernetes_asyncio(tmp_path: Path):
    """The real command: ready, one AdmissionReview answered, SIGTERM; then its modules are read: nothing
    of DEFERRED (kubernetes_asyncio, cryptography, cel, the other commands) was loaded."""
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    crt, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    crt.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    key.write_bytes(leaf.private_key_pem.bytes())
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    port = _free_port()
    code = "import sys\nfrom webhook.cli import main\nrc = main(sys.argv[1:])\n"
    argv = ["serve", "--offline", "--host", "127.0.0.1", "--port", str(port), "--tls-cert", str(crt)]
    proc = subprocess.Popen(
        [sys.executable, "-c", report_at_exit(*DEFERRED) + code, *argv, "--tls-key", str(key)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "serve --offline was not ready within 60 s"
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", timeout=5, context=ctx) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)  # retry pacing only: the loop waits on /readyz answering, with a deadline
        req = urllib.request.Request(
            f"https://127.0.0.1:{port}/validate?timeout=10s",
            data=review(yaml.safe_load(SAMPLE.read_text())),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
            assert "allowed" in json.loads(r.read())["response"]
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == []
