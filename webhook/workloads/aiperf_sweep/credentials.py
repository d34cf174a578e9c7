"""No sweep axis may vary a credential: `validate_kubernetes_sweep_credential_axes` of AIPerf
0.13.0's `common/endpoint_credentials.py`, which the operator's create handler runs (the path
test only; values are never inspected, so no credential is read or reported)."""

from __future__ import annotations

from typing import Any

from webhook.workloads.aiperf_sweep.spec import SpecInvalid

# common/endpoint_credentials.py: sweep axes that could carry a credential
_CREDENTIAL_SEGMENTS = frozenset(
    "apikey xapikey authorization proxyauthorization token apitoken authtoken accesstoken bearertoken idtoken "
    "refreshtoken secret clientsecret password passwd credential awsaccesskeyid signature ocpapimsubscriptionkey "
    "xgoogapikey xfunctionskey aegsaskey xamzsecuritytoken".split()
)
_CREDENTIAL_SUFFIXES = ("apikey", "apitoken", "authorization", "authtoken", "accesstoken", "bearertoken", "idtoken",
                        "refreshtoken", "clientsecret", "secret", "password", "passwd", "credential", "signature")  # fmt: skip
_CREDENTIAL_PREFIXES = ("apikey", "authorization", "clientsecret", "secret", "password", "passwd", "credential")


def _credential_path(path: str) -> bool:
    """endpoint_credentials._is_sweep_credential_path (the path test; values are not inspected)."""
    segs = [
        "".join(ch for ch in s.lower() if ch.isalnum()) for s in path.replace("[", ".").replace("]", "").split(".") if s
    ]
    if any(a == "endpoint" and b == "headers" for a, b in zip(segs, segs[1:])):
        return True
    return any(
        s in _CREDENTIAL_SEGMENTS or s.endswith(_CREDENTIAL_SUFFIXES) or s.startswith(_CREDENTIAL_PREFIXES)
        for s in segs
    )


def _first_credential_path(value: Any, path: str) -> str | None:
    if _credential_path(path):
        return path
    if isinstance(value, dict):
        for k, v in value.items():
            found = _first_credential_path(v, f"{path}.{k}" if path else str(k))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _first_credential_path(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def check_credential_axes(sweep: dict[str, Any]) -> None:
    """validate_kubernetes_sweep_credential_axes: no sweep axis may vary a credential."""
    candidates: list[tuple[str, Any]] = []
    params = sweep.get("parameters")
    if isinstance(params, dict):
        candidates += [(str(p), v) for p, v in params.items()]
    for key in ("searchSpace", "search_space", "dimensions"):
        for d in sweep.get(key) or [] if isinstance(sweep.get(key), list) else []:
            if isinstance(d, dict) and isinstance(d.get("path"), str):
                candidates.append((d["path"], d.get("choices", [])))
    runs = sweep.get("runs")
    if isinstance(runs, list):
        candidates += [(f"sweep.runs[{i}]", run) for i, run in enumerate(runs)]
    for path, values in candidates:
        found = _first_credential_path(values, path)
        if found is not None:
            raise SpecInvalid(
                f"Kubernetes sweeps cannot vary credential-bearing values; sweep path {found!r} is not supported. "
                "Keep endpoint credentials fixed and inject them through Secret-backed pod environment variables"
            )
