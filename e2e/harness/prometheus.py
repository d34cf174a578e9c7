"""The real Prometheus server (cmd/prometheus, built by `e2e/build.sh prometheus`) for the e2e tests:
started on 127.0.0.1 with a data dir of the caller's, stopped by its PID, queried through its HTTP API."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.controlplane import _die_with_parent, cache_dir, free_ports, stop_pid

#: `helm template` flags rendering the chart's monitoring objects (the e2e clusters have no
#: monitoring.coreos.com CRDs, so the tests render them and do what prometheus-operator would)
MONITORING = [
    "--set",
    "metrics.serviceMonitor.enabled=true",
    "--set",
    "metrics.prometheusRule.enabled=true",
    "--set",
    "metrics.grafanaDashboard.enabled=true",
    "--set",
    "metrics.auditPodMonitor.enabled=true",
]
#: Grafana's $__rate_interval: at least 4 scrape intervals (Grafana docs); a minute of 1 s scrapes
RATE_INTERVAL = "1m"


class Prometheus:
    """cmd/prometheus on 127.0.0.1 with a temporary data dir; stopped by PID."""

    def __init__(self, workdir: Path, config: dict[str, Any], rules: dict[str, Any]) -> None:
        binary = cache_dir() / "bin" / "prometheus"
        assert binary.is_file(), f"{binary} missing: run `bash e2e/build.sh prometheus` (part of `all`)"
        (workdir / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
        config = {**config, "rule_files": [str(workdir / "rules.yaml")]}
        (workdir / "prometheus.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        (port,) = free_ports(1)
        self.url = f"http://127.0.0.1:{port}"
        self.log = workdir / "prometheus.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    str(binary),
                    f"--config.file={workdir / 'prometheus.yaml'}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=info",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,  # never outlives this test process
            )

    def stop(self) -> None:
        stop_pid(self.proc.pid, proc=self.proc)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as e:  # 400/422: a query that does not parse or evaluate
            text = e.read()
            try:
                body = json.loads(text)
            except ValueError:  # 503 "Service Unavailable" while the TSDB opens
                raise AssertionError(f"{path}: {e.code} {text[:200]!r}") from None
        assert body["status"] == "success", f"{path} {params}: {body}"
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        assert data["resultType"] in ("vector", "scalar"), data
        return data["result"] if data["resultType"] == "vector" else [{"value": data["result"]}]

    def wait(self, what: str, ok: Callable[[], Any], timeout: float = 90) -> Any:
        """Poll ``ok`` until it returns something truthy, up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"prometheus exited {self.proc.returncode}:\n{self.tail()}"
            try:
                last = ok()
            except (urllib.error.URLError, ConnectionError, AssertionError) as e:
                last = e
            if last and not isinstance(last, Exception):
                return last
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}: {last!r}\n{self.tail()}")
