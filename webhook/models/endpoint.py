"""Where an AIPerfJob sends its benchmark: the endpoint URLs of spec.benchmark.endpoint, and the in-cluster
Service and port a URL names (`<svc>.<ns>.svc[.<cluster domain>]`, the cluster DNS naming of
kubernetes/dns docs/specification.md). Endpoint Service checks the Service; Network Policies check the
path to it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult, urlsplit


def endpoint_urls(obj: dict[str, Any]) -> list[str]:
    ep = (((obj.get("spec") or {}).get("benchmark") or {}).get("endpoint")) or {}
    urls = ep.get("urls")
    if isinstance(urls, str):
        urls = [urls]
    out = [u for u in (urls or []) if isinstance(u, str) and u]
    if isinstance(ep.get("url"), str) and ep["url"]:
        out.append(ep["url"])
    return out


#: the longest scheme://userinfo@host:port read: DNS names are at most 253 characters, and
#: urlsplit's IPv6 check is ~130 ms on a 1 MB "[:::…]" (bench/fuzz_parsers.py)
_NETLOC_MAX = 1024


def _split(url: str) -> SplitResult:
    """urlsplit of the scheme and authority only (a path or query can be any length and is not read)."""
    full = url if "://" in url else f"http://{url}"
    start = full.index("://") + 3
    ends = [i for i in (full.find(c, start) for c in "/?#") if i >= 0]
    head = full[: min(ends)] if ends else full
    if len(head) - start > _NETLOC_MAX:
        raise ValueError("the URL's host part is too long to be a host")
    return urlsplit(head)


def service_of(url: str) -> tuple[str, str] | None:
    """(service, namespace) for `<svc>.<ns>.svc[.<cluster domain>]` (or `<pod>.<svc>.<ns>.svc…`) hosts."""
    try:
        host = _split(url).hostname or ""
    except ValueError:
        return None
    labels = host.lower().rstrip(".").split(".")
    for i in (2, 3):
        if len(labels) > i and labels[i] == "svc":
            return labels[i - 2], labels[i - 1]
    return None


def url_port(url: str) -> int | None:
    try:
        parts = _split(url)
        return parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None
