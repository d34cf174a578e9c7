"""Where the registry client may connect: public addresses, and internal ones only for listed registries.

A job author names the registry (`registryAccess.mode: all`), and a registry names its token realm
and its redirects: each is a host the webhook would connect to from inside the cluster. So before
any connection the host's name is resolved once, every address it resolves to is checked, and the
connection goes to exactly the addresses that were checked (`PinningResolver`: the connector asks
it, not the DNS, so a name that answers a public address to the check and an internal one to the
connection, DNS rebinding, gets nowhere).

Internal, refused unless the host is listed (registryAccess.internalRegistries): loopback,
unspecified, link-local (169.254/16, fe80::/10), private (RFC 1918, fc00::/7), shared/CGNAT
(100.64/10), multicast, reserved and every other range Python's `ipaddress` does not call global,
the IPv4 address inside an IPv4-mapped, 6to4, Teredo or NAT64 (64:ff9b::/96) IPv6 address, and the
cluster's own networks (registryAccess.clusterNetworks: pod and Service CIDRs, when they are public
ranges).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: NAT64's well-known prefix (RFC 6052): the last 32 bits are an IPv4 address
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
#: hosts whose pinned addresses are kept at most (one entry per host the client asked)
PINS_MAX = 4096

#: (host, port) -> its addresses, as aiohttp's resolvers answer
Lookup = Callable[[str, int], Awaitable[list[ResolveResult]]]


class AddressNotAllowed(OSError):
    """A host resolves to an internal address and is not listed: refused before any connection."""

    def __init__(self, host: str) -> None:
        super().__init__(f"the address of {host!r} is not allowed")
        self.host = host


def ip_of(host: str) -> IPAddress | None:
    """The address a host literal names (brackets of an IPv6 literal allowed), else None."""
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


def _embedded_v4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    out: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        out.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        out.append(ip.sixtofour)
    if ip.teredo is not None:
        out.extend(ip.teredo)
    if ip in _NAT64:
        out.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return out


class AddressPolicy:
    """Which addresses are internal: the fixed ranges above plus `cluster_networks`."""

    def __init__(self, cluster_networks: Iterable[str] = ()) -> None:
        self.cluster_networks: tuple[IPNetwork, ...] = tuple(
            ipaddress.ip_network(n, strict=False) for n in cluster_networks
        )

    def internal(self, ip: IPAddress) -> bool:
        if isinstance(ip, ipaddress.IPv6Address) and any(self.internal(v4) for v4 in _embedded_v4(ip)):
            return True
        if (
            not ip.is_global
            or ip.is_multicast
            or ip.is_unspecified
            or ip.is_loopback
            or ip.is_link_local
            or ip.is_private
            or ip.is_reserved
        ):
            return True
        return any(ip.version == n.version and ip in n for n in self.cluster_networks)


async def system_lookup(host: str, port: int) -> list[ResolveResult]:
    """The system resolver's answer (getaddrinfo in a worker thread), every address family."""
    from aiohttp.resolver import ThreadedResolver

    return await ThreadedResolver().resolve(host, port, family=socket.AF_UNSPEC)


def literal_result(host: str, ip: IPAddress, port: int) -> ResolveResult:
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    flags = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
    return ResolveResult(hostname=host, host=str(ip), port=port, family=family, proto=0, flags=flags)


class PinningResolver(AbstractResolver):
    """The connector's resolver: answers the addresses `pin` checked for (host, port), never the DNS.

    A host nobody checked has no addresses (the connection fails: nothing unchecked is reached).
    """

    def __init__(self) -> None:
        self._pins: dict[tuple[str, int], list[ResolveResult]] = {}

    def pin(self, host: str, port: int, addresses: list[ResolveResult]) -> None:
        if len(self._pins) >= PINS_MAX:
            self._pins.clear()
        self._pins[(host.lower(), port)] = addresses

    async def resolve(self, host: str, port: int = 0, family: Any = socket.AF_INET) -> list[ResolveResult]:
        got = self._pins.get((host.lower(), port))
        if not got:
            raise OSError(f"{host!r} was not checked before connecting")
        return list(got)

    async def close(self) -> None:
        self._pins.clear()


async def checked_addresses(
    host: str, port: int, *, policy: AddressPolicy, internal_ok: bool, lookup: Lookup
) -> list[ResolveResult]:
    """`host`'s addresses, each checked: AddressNotAllowed when one is internal and not `internal_ok`.

    Every address counts, not only the first: a connection may go to any of them."""
    ip = ip_of(host)
    if ip is not None:
        results = [literal_result(host, ip, port)]
    else:
        results = await lookup(host, port)
    if not results:
        raise OSError(f"{host!r} has no address")
    for r in results:
        addr = ip_of(r["host"])
        if addr is None or (policy.internal(addr) and not internal_ok):
            raise AddressNotAllowed(host)
    return results
