"""The fidelity matrix's AIPerfJob scenarios (joined into ``SCENARIOS`` by e2e/fidelity/scenarios.py).

Each is :func:`e2e.harness.aiperf_stack.good_aiperfjob` (``resourceMode: none``, one worker, the
stand-in endpoint fakellm, the offline tokenizer) with one thing changed, in a namespace of its
own whose prerequisites start with the tokenizer ConfigMap the job mounts. The runner observes
them through the operator's status (``Completed`` = runs, ``Failed``/``Cancelled`` = fails,
anything else at the bound = never starts; pods running are not "runs" for an AIPerfJob) within
:data:`AIPERF_BOUND_SECONDS` (the runner's default for the kind). As for the TrainJobs, nothing
here says what should happen.
"""

from __future__ import annotations

import copy
from typing import Any

from e2e.fidelity.scenarios_base import NS_PREFIX, Scenario, quota, secret, secret_env
from e2e.harness.aiperf_manifests import good_aiperfjob, tokenizer_configmap

#: how long the runner watches an AIPerfJob by default (``--aiperf-bound``; a good one completes in
#: ~30 s alone, ~90 s beside the 51 scenarios on the 2-CPU node, 180-250 s beside the 67 with the
#: machine shared: at 240 s a good one was once still starting, its pods Running)
AIPERF_BOUND_SECONDS = 420.0


def aiperfjob(
    name: str = "bench",
    *,
    url: str | None = None,
    env: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The good job (its namespace is set by :meth:`Scenario.job_object`); ``extra`` becomes
    ``spec.benchmark.endpoint.extra``."""
    kw: dict[str, Any] = {"env": env}
    if url is not None:
        kw["url"] = url
    job = good_aiperfjob(name, "", **kw)
    del job["metadata"]["namespace"]
    if extra is not None:
        job["spec"]["benchmark"]["endpoint"]["extra"] = copy.deepcopy(extra)
    return job


def _without_datasets(job: dict[str, Any]) -> dict[str, Any]:
    del job["spec"]["benchmark"]["datasets"]
    return job


def _scenario(
    name: str, note: str, job: dict[str, Any], prereqs: list[dict[str, Any]] | None = None, **kw: Any
) -> Scenario:
    return Scenario(name, note, job, prereqs=[tokenizer_configmap(), *(prereqs or [])], **kw)


def _url(scenario: str, service: str) -> str:
    return f"http://{service}.{NS_PREFIX}{scenario}.svc.cluster.local:8000"


#: a Service whose selector matches no pod: it exists, has a ClusterIP, no ready endpoint
_NO_READY_SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "llm"},
    "spec": {"selector": {"app": "no-such-pod"}, "ports": [{"name": "http", "port": 8000, "targetPort": 8000}]},
}

AIPERF_SCENARIOS: list[Scenario] = [
    _scenario(
        "good-aiperf",
        "AIPerfJob: 4 requests to the stand-in endpoint, resourceMode none, one worker",
        aiperfjob(),
        covers="good",
    ),
    _scenario(
        "aiperf-secret-missing",
        "AIPerfJob: podTemplate env from a Secret that does not exist",
        aiperfjob(env=[secret_env("API_KEY", "llm-creds", "token")]),
        covers="secret refs",
    ),
    _scenario(
        "aiperf-secret-key-missing",
        "AIPerfJob: podTemplate env from a Secret that exists without that key",
        aiperfjob(env=[secret_env("API_KEY", "llm-creds", "token")]),
        [secret("llm-creds", other="x")],
        covers="secret refs",
    ),
    _scenario(
        "aiperf-secret-optional",
        "AIPerfJob: podTemplate env from a missing Secret, optional: true",
        aiperfjob(env=[secret_env("API_KEY", "llm-creds", "token", optional=True)]),
        covers="secret refs",
    ),
    _scenario(
        "aiperf-pods-quota",
        'AIPerfJob: ResourceQuota pods: "1" (the controller and the worker pod make 2)',
        aiperfjob(),
        [quota({"pods": "1"})],
        covers="quota",
    ),
    _scenario(
        "aiperf-name-too-long",
        "AIPerfJob: a 40-character name (AIPerf's job_id is a DNS label of at most 35)",
        aiperfjob(name="b" * 40),
        covers="name length",
    ),
    _scenario(
        "aiperf-endpoint-missing",
        "AIPerfJob: the endpoint URL names a Service that does not exist",
        aiperfjob(url=_url("aiperf-endpoint-missing", "nosuch")),
        covers="endpoint",
    ),
    _scenario(
        "aiperf-endpoint-no-ready",
        "AIPerfJob: the endpoint URL names a Service whose selector matches no pod",
        aiperfjob(url=_url("aiperf-endpoint-no-ready", "llm")),
        [_NO_READY_SERVICE],
        covers="endpoint",
        known="endpoint-not-ready-warns",
        warns=("Endpoint Service",),
    ),
    _scenario(
        "aiperf-no-datasets",
        "AIPerfJob without spec.benchmark.datasets (as the README's good sample had it)",
        _without_datasets(aiperfjob()),
        covers="spec validity",
    ),
    _scenario(
        "aiperf-configmap-too-large",
        "AIPerfJob: spec.benchmark.endpoint.extra of 1.1 MB (the rendered run_config.json ConfigMap passes 1 MiB)",
        aiperfjob(extra={"pad": "x" * 1_100_000}),
        covers="ConfigMap size",
    ),
]
