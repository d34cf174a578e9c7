"""The registry client against a hostile registry (issue 33, "Registry client"): real TLS servers on 127.0.0.1.

Each reproduction of the issue is a test here: a token realm pointing at an internal plain-HTTP
service (SSRF with read-back), a realm over http (a password in cleartext), redirects of the tag list
and the index to http, to other hosts and to 169.254.169.254, messages that tell a closed port from a
TLS service from a plain-HTTP one, a JobSet of 2,000 images (2,000 lookups at once, and a broken job
admitted), tags with terminal escapes, and a malformed WWW-Authenticate read as a refusal.

127.0.0.1 is loopback, internal: a test that wants the client to talk to its server lists the server
in `internal_registries`, as a cluster lists its in-cluster registry; without the listing the client
refuses before connecting (tested too). Names (`registry.test`, `realm.test`, `other.test`) resolve to
127.0.0.1 through the client's injected lookup, which records each resolution.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qs

import pytest
import trustme
from aiohttp.abc import ResolveResult

from e2e.harness.hostile_registry import HostileServer, Reply, Seen, index_reply, json_reply
from tests.fakeview import FakeView
from webhook.checks.base import CheckContext
from webhook.checks.imagepull import ImagePull
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.imageref import ImageRef, parse
from webhook.preflight import evaluate
from webhook.registry import client as registry
from webhook.registry.address import AddressPolicy, PinningResolver, literal_result
from webhook.registry.keyring import DOCKER_CONFIG_JSON, Credential, read_pull_secret
from webhook.results import Status
from webhook.workloads.base import PodGroup, Workload

USER, PASSWORD = "puller", "pull-pass-7f3a9c"
CRED = Credential("regcred", USER, PASSWORD)
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
MANIFEST = "/v2/team/app/manifests/1.0"
BLOCKED = (
    "was not asked: its address is not allowed (internal or private; list it in "
    "registryAccess.internalRegistries to check it)"
)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def reg(ca: trustme.CA) -> Any:
    with HostileServer(ca) as r:
        yield r


@pytest.fixture
def internal() -> Any:
    """The plain-HTTP internal service an attack aims at: answers a token to anyone who asks."""
    with HostileServer(tls=False) as s:
        s.route("GET", "/token", json_reply({"token": "INTERNAL-SECRET-4f1c"}))
        s.route("GET", "/v2/team/app/tags/list", json_reply({"name": "team/app", "tags": ["internal-only"]}))
        yield s


class Lookups:
    """The client's resolver in tests: *.test → 127.0.0.1 (or what `answers` says), every call recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.answers: dict[str, list[list[str]]] = {}

    async def __call__(self, host: str, port: int) -> list[ResolveResult]:
        self.calls.append((host, port))
        queue = self.answers.get(host)
        ips = queue.pop(0) if queue and len(queue) > 1 else (queue[0] if queue else ["127.0.0.1"])
        if not host.endswith(".test"):
            raise OSError(f"no such host {host!r}")
        return [literal_result(host, ipaddress.ip_address(ip), port) for ip in ips]


@pytest.fixture
async def make(ca: trustme.CA) -> AsyncIterator[Callable[..., registry.RegistryClient]]:
    made: list[registry.RegistryClient] = []

    def factory(**kw: Any) -> registry.RegistryClient:
        ctx = ssl.create_default_context()
        ca.configure_trust(ctx)
        kw.setdefault("timeout", 2.0)
        kw.setdefault("cache_seconds", 0)
        kw.setdefault("lookup", Lookups())
        c = registry.RegistryClient(ssl_context=ctx, **kw)
        made.append(c)
        return c

    yield factory
    for c in made:
        await c.close()


def ref(image: str) -> ImageRef:
    r = parse(image)
    assert r is not None
    return r


def bearer(realm: str) -> dict[str, str]:
    return {"WWW-Authenticate": f'Bearer realm="{realm}",service="hostile",scope="repository:team/app:pull"'}


def only_with(auth: str, challenge: dict[str, str]) -> Callable[[Seen], Reply]:
    """The manifest: 401 with `challenge`, 200 once the request carries `auth`."""

    def answer(seen: Seen) -> Reply:
        if seen.authorization == auth:
            return Reply(200, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
        return Reply(401, challenge)

    return answer


# ---------------------------------------------------------------------------------------------- addresses


@pytest.mark.parametrize(
    ("ip", "internal"),
    [
        ("127.0.0.1", True), ("127.8.9.10", True), ("0.0.0.0", True), ("10.1.2.3", True), ("172.16.0.1", True),
        ("192.168.1.1", True), ("169.254.169.254", True), ("100.64.0.1", True), ("224.0.0.1", True),
        ("255.255.255.255", True), ("240.0.0.1", True),
        ("::1", True), ("::", True), ("fe80::1", True), ("fd00::1", True), ("ff02::1", True),
        ("::ffff:127.0.0.1", True), ("::ffff:169.254.169.254", True), ("64:ff9b::a9fe:a9fe", True),
        ("2002:7f00:1::", True),
        ("8.8.8.8", False), ("1.1.1.1", False), ("2606:4700:4700::1111", False),
    ],
)  # fmt: skip
def test_internal_addresses(ip: str, internal: bool) -> None:
    assert AddressPolicy().internal(ipaddress.ip_address(ip)) is internal


def test_cluster_networks_are_internal_even_when_public() -> None:
    policy = AddressPolicy(["8.8.0.0/16", "2606:4700::/32"])
    assert policy.internal(ipaddress.ip_address("8.8.8.8"))
    assert policy.internal(ipaddress.ip_address("2606:4700:4700::1111"))
    assert not policy.internal(ipaddress.ip_address("1.1.1.1"))


async def test_the_connector_reaches_only_checked_hosts() -> None:
    r = PinningResolver()
    with pytest.raises(OSError, match="was not checked"):
        await r.resolve("registry.test", 443)
    r.pin("Registry.TEST", 443, [literal_result("registry.test", ipaddress.ip_address("127.0.0.1"), 443)])
    assert [a["host"] for a in await r.resolve("registry.test", 443)] == ["127.0.0.1"]
    with pytest.raises(OSError):
        await r.resolve("registry.test", 444)


async def test_loopback_is_refused_before_any_connection_unless_listed(
    reg: HostileServer, make: Callable[..., registry.RegistryClient]
) -> None:
    reg.route("HEAD", MANIFEST, Reply(200))
    a = await make().manifest(ref(f"{reg.address}/team/app:1.0"), CRED, 5)
    assert (a.outcome, a.detail) == (registry.NOT_ASKED, BLOCKED)
    assert reg.seen == []
    a = await make(internal_registries=[reg.address]).manifest(ref(f"{reg.address}/team/app:1.0"), CRED, 5)
    assert a.outcome == registry.FOUND
    assert [s.method for s in reg.seen] == ["HEAD"]
    # the listing is by host:port: the same host on another port is not listed
    other = await make(internal_registries=["127.0.0.1:1"]).manifest(ref(f"{reg.address}/team/app:1.0"), CRED, 5)
    assert other.detail == BLOCKED and len(reg.seen) == 1


async def test_an_ipv6_loopback_registry_is_refused_unless_listed(
    ca: trustme.CA, make: Callable[..., registry.RegistryClient]
) -> None:
    with HostileServer(ca, family=socket.AF_INET6) as reg6:
        reg6.route("HEAD", MANIFEST, Reply(200))
        image = f"{reg6.address}/team/app:1.0"
        assert (await make().manifest(ref(image), None, 5)).detail == BLOCKED
        assert reg6.seen == []
        assert (await make(internal_registries=[reg6.address]).manifest(ref(image), None, 5)).outcome == registry.FOUND
        assert len(reg6.seen) == 1


async def test_an_anonymous_token_from_the_registrys_own_realm(
    reg: HostileServer, make: Callable[..., registry.RegistryClient]
) -> None:
    """No credential: the realm is asked without one (distribution's anonymous token), and a
    NOT_ASKED answer (here the next lookup's unreadable challenge) never opens the breaker."""
    reg.route("HEAD", MANIFEST, only_with("Bearer anon", bearer(f"https://{reg.address}/token")))
    reg.route("GET", "/token", json_reply({"token": "anon"}))
    c = make(internal_registries=[reg.address], breaker_failures=1)
    assert (await c.manifest(ref(f"{reg.address}/team/app:1.0"), None, 5)).outcome == registry.FOUND
    assert [s.authorization for s in reg.seen] == [None, None, "Bearer anon"]
    reg.route("HEAD", "/v2/team/other/manifests/1.0", Reply(401, {"WWW-Authenticate": "Bearer"}))
    for _ in range(2):
        a = await c.manifest(ref(f"{reg.address}/team/other:1.0"), None, 5)
        assert (a.outcome, a.detail) == (registry.NOT_ASKED, registry.UNREADABLE_CHALLENGE)


async def test_every_address_of_a_name_is_checked(
    reg: HostileServer, make: Callable[..., registry.RegistryClient]
) -> None:
    """A name answering a public and an internal address is refused: a connection may go to either."""
    lookups = Lookups()
    lookups.answers["registry.test"] = [["8.8.8.8", "127.0.0.1"]]
    a = await make(lookup=lookups).manifest(ref(f"registry.test:{reg.port}/team/app:1.0"), None, 5)
    assert (a.outcome, a.detail) == (registry.NOT_ASKED, BLOCKED)
    assert reg.seen == [] and lookups.calls == [("registry.test", reg.port)]


async def test_the_connection_goes_to_the_address_checked(
    reg: HostileServer, make: Callable[..., registry.RegistryClient]
) -> None:
    """One resolution per request, and the connector uses its answer, not a second one (DNS rebinding):
    the name's next answer (127.0.0.3, where nothing listens) is never what a checked request reaches.
    The TLS name and the Host header stay the registry's name."""
    reg.route("HEAD", MANIFEST, Reply(200))
    lookups = Lookups()
    lookups.answers["registry.test"] = [["127.0.0.1"], ["127.0.0.3"]]
    c = make(lookup=lookups, internal_registries=[f"registry.test:{reg.port}"])
    a = await c.manifest(ref(f"registry.test:{reg.port}/team/app:1.0"), None, 5)
    assert a.outcome == registry.FOUND, a
    assert lookups.calls == [("registry.test", reg.port)]
    assert [s.headers["host"] for s in reg.seen] == [f"registry.test:{reg.port}"]


# ---------------------------------------------------------------------------------------------- token realms


async def test_a_plain_http_realm_on_an_internal_service_gets_nothing(
    reg: HostileServer, internal: HostileServer, make: Callable[..., registry.RegistryClient]
) -> None:
    """Issue 33: the realm pointed at an internal plain-HTTP URL; the webhook sent the Secret's Basic
    credentials there and the token it read back to the registry. Now: not asked, nothing sent."""
    reg.route("HEAD", MANIFEST, Reply(401, bearer(f"http://127.0.0.1:{internal.port}/token")))
    c = make(internal_registries=[reg.address, f"127.0.0.1:{internal.port}"])
    a = await c.manifest(ref(f"{reg.address}/team/app:1.0"), CRED, 5)
    assert (a.outcome, a.detail) == (
        registry.NOT_ASKED,
        "names a plain-HTTP token realm; it was not asked and no credential was sent (token realms must be https)",
    )
    assert internal.seen == []
    assert [s.authorization for s in reg.seen] == [None]


async def test_a_realm_on_another_host_is_asked_only_when_listed(
    reg: HostileServer, make: Callable[..., registry.RegistryClient]
) -> None:
    realm = f"https://realm.test:{reg.port}/token"
    reg.route("HEAD", MANIFEST, Reply(401, bearer(realm)))
    reg.route("GET", "/token", json_reply({"token": "t0k3n"}))
    name = f"registry.test:{reg.port}"
    c = make(internal_registries=[name])
    a = await c.manifest(ref(f"{name}/team/app:1.0"), CRED, 5)
    assert (a.outcome, a.detail) == (
        registry.NOT_ASKED,
        f'names its token realm on host "realm.test:{reg.port}", which is not in registryAccess.tokenRealms; '
        "it was not asked and no credential was sent",
    )
    assert reg.requests_for("/token") == []
    # listed as a realm but at an internal address that is not listed: refused before connecting
    c = make(internal_registries=[name], token_realms=[f"realm.test:{reg.port}"])
    a = await c.manifest(ref(f"{name}/team/app:1.0"), CRED, 5)
    assert (a.outcome, a.detail) == (
        registry.NOT_ASKED,
        "names a token realm whose address is not allowed (internal or private; list its host in "
        "registryAccess.internalRegistries to use it); no credential was sent",
    )
    assert reg.requests_for("/token") == []
    # both listed: the token flow, the credential to the realm, the token to the registry
    reg.route("HEAD", MANIFEST, only_with("Bearer t0k3n", bearer(realm)))
    c = make(internal_registries=[name, f"realm.test:{reg.port}"], token_realms=[f"realm.test:{reg.port}"])
    a = await c.manifest(ref(f"{name}/team/app:1.0"), CRED, 5)
    assert a.outcome == registry.FOUND, a
    [token_req] = reg.requests_for("/token")
    assert token_req.authorization == BASIC and token_req.headers["host"] == f"realm.test:{reg.port}"


async def test_the_registrys_own_realm_needs_no_listing(
    reg: HostileServer, make: Callable[..., registry.RegistryClient]
) -> None:
    reg.route("HEAD", MANIFEST, only_with("Bearer own-t0k3n", bearer(f"https://{reg.address}/token")))
    reg.route("GET", "/token", json_reply({"access_token": "own-t0k3n"}))
    a = await make(internal_registries=[reg.address]).manifest(ref(f"{reg.address}/team/app:1.0"), CRED, 5)
    assert a.outcome == registry.FOUND, a
    assert [s.authorization for s in reg.seen] == [None, BASIC, "Bearer own-t0k3n"]
    query = parse_qs(reg.requests_for("/token")[0].path.split("?", 1)[1])
    assert query == {"scope": ["repository:team/app:pull"], "service": ["hostile"]}


@pytest.mark.parametrize(
    ("status", "location"),
    [(302, "http://127.0.0.1:{internal}/token"), (307, "https://{reg}/elsewhere")],
)
async def test_a_realm_that_redirects_is_not_followed(
    reg: HostileServer,
    internal: HostileServer,
    make: Callable[..., registry.RegistryClient],
    status: int,
    location: str,
) -> None:
    reg.route("HEAD", MANIFEST, Reply(401, bearer(f"https://{reg.address}/token")))
    reg.route("GET", "/token", Reply(status, {"Location": location.format(internal=internal.port, reg=reg.address)}))
    reg.route("GET", "/elsewhere", json_reply({"token": "moved"}))
    a = await make(internal_registries=[reg.address]).manifest(ref(f"{reg.address}/team/app:1.0"), CRED, 5)
    assert (a.outcome, a.detail) == (
        registry.NOT_ASKED,
        f"has a token realm that answered with a redirect (HTTP {status}), which is not followed",
    )
    assert internal.seen == [] and reg.requests_for("/elsewhere") == []


@pytest.mark.parametrize(
    "header",
    ['Bearer realm="unterminated', "Bearer", 'Bearer service="x"', "Negotiate abc", "", ",,,"],
)
async def test_an_unreadable_challenge_is_not_a_refusal(
    reg: HostileServer, make: Callable[..., registry.RegistryClient], header: str
) -> None:
    """Issue 33: a malformed WWW-Authenticate gave "refused … with Secret regcred" though nothing was sent."""
    reg.route("HEAD", MANIFEST, Reply(401, {"WWW-Authenticate": header} if header else {}))
    a = await make(internal_registries=[reg.address]).manifest(ref(f"{reg.address}/team/app:1.0"), CRED, 5)
    assert (a.outcome, a.detail) == (registry.NOT_ASKED, registry.UNREADABLE_CHALLENGE)
    assert [s.authorization for s in reg.seen] == [None]


async def test_an_unreadable_challenge_warns_through_the_check(reg: HostileServer) -> None:
    reg.route("HEAD", MANIFEST, Reply(401, {"WWW-Authenticate": 'Bearer realm="unterminated'}))
    image = f"{reg.address}/team/app:1.0"
    [r] = await _run_check(reg, [image], secret=True)
    assert (r.status, r.message) == (
        Status.WARN,
        f'Cannot verify image "{image}" (pod group "g"): registry "{reg.address}" answered HTTP 401 with a '
        "WWW-Authenticate challenge that could not be read; no credential was sent.",
    )
    assert "regcred" not in r.message


async def test_token_bodies_and_tokens_are_bounded(
    reg: HostileServer, make: Callable[..., registry.RegistryClient]
) -> None:
    reg.route("HEAD", MANIFEST, Reply(401, bearer(f"https://{reg.address}/token")))
    c = make(internal_registries=[reg.address])
    for body in (json.dumps({"token": "x" * 70_000}).encode(), b'{"token": "a\\r\\nX-Injected: 1"}'):
        reg.route("GET", "/token", Reply(200, {"Content-Type": "application/json"}, body))
        a = await c.manifest(ref(f"{reg.address}/team/app:1.0"), CRED, 5)
        assert (a.outcome, a.detail) == (registry.UNREACHABLE, "has a token realm that answered no readable token")
    assert [s.authorization for s in reg.requests_for(MANIFEST)] == [None, None]


# ---------------------------------------------------------------------------------------------- redirects


@pytest.mark.parametrize(
    "location",
    ["http://127.0.0.1:{internal}/v2/team/app/tags/list", "https://other.test:{reg}/v2/team/app/tags/list",
     "https://169.254.169.254/latest/meta-data/", "https://{reg_addr}/v2/team/app/tags/list?moved=1"],
)  # fmt: skip
async def test_the_tag_list_follows_no_redirect(
    reg: HostileServer, internal: HostileServer, make: Callable[..., registry.RegistryClient], location: str
) -> None:
    """Issue 33: tags/list followed up to 10 redirects, to http, other hosts, the metadata address; the
    tags read there appeared in the denial. A redirect is now "not readable": no tags, nothing asked."""
    reg.route("HEAD", MANIFEST, Reply(404))
    target = location.format(internal=internal.port, reg=reg.port, reg_addr=reg.address)
    reg.route("GET", "/v2/team/app/tags/list", Reply(302, {"Location": target}))
    c = make(internal_registries=[reg.address, f"127.0.0.1:{internal.port}", f"other.test:{reg.port}"])
    a = await c.manifest(ref(f"{reg.address}/team/app:1.0"), CRED, 5)
    assert (a.outcome, a.tags) == (registry.UNKNOWN, None)
    assert internal.seen == []
    assert [s.path.split("?")[0] for s in reg.seen] == [MANIFEST, "/v2/team/app/tags/list"]
    assert c.requests == 2


async def test_the_index_follows_https_redirects_by_digest_only_and_checks_the_body(
    reg: HostileServer, internal: HostileServer, make: Callable[..., registry.RegistryClient]
) -> None:
    """The index GET, by digest, may be redirected (to blob storage): only to https, to allowed
    addresses, without the credential on another host, and the body must hash to the digest."""
    index, digest = index_reply([("linux", "amd64"), ("linux", "arm64")])
    head = Reply(200, {k: v for k, v in index.headers.items()})
    reg.route("HEAD", MANIFEST, head)
    by_digest = f"/v2/team/app/manifests/{digest}"
    c = make(internal_registries=[reg.address, f"other.test:{reg.port}"])
    name = f"{reg.address}/team/app:1.0"

    async def platforms(location: str | None, served: Reply = index) -> Any:
        reg.seen.clear()
        reg.route("GET", by_digest, Reply(307, {"Location": location}) if location else served)
        reg.route("GET", "/blob", served)
        return (await c.manifest(ref(name), CRED, 5)).platforms

    assert await platforms(None) == (("linux", "amd64"), ("linux", "arm64"))
    # to another allowed host: followed, the credential left behind
    basic = only_with(BASIC, {"WWW-Authenticate": 'Basic realm="r"'})
    reg.route("HEAD", MANIFEST, lambda seen: head if seen.authorization == BASIC else basic(seen))
    assert await platforms(f"https://other.test:{reg.port}/blob") == (("linux", "amd64"), ("linux", "arm64"))
    assert [(s.path, s.authorization) for s in reg.seen if s.method == "GET"] == [(by_digest, BASIC), ("/blob", None)]
    # to plain http, to the metadata address, to a host not allowed: not followed
    for location in (f"http://127.0.0.1:{internal.port}/blob", "https://169.254.169.254/blob",
                     f"https://unlisted.test:{reg.port}/blob"):  # fmt: skip
        assert await platforms(location) is None
        assert [s.path for s in reg.seen if s.method == "GET"] == [by_digest]
    assert internal.seen == []
    # a body that is not the digest's is not read
    other, _ = index_reply([("linux", "s390x")])
    assert await platforms(f"https://{reg.address}/blob", other) is None


async def test_the_manifest_head_follows_no_redirect(
    reg: HostileServer, internal: HostileServer, make: Callable[..., registry.RegistryClient]
) -> None:
    reg.route("HEAD", MANIFEST, Reply(307, {"Location": f"http://127.0.0.1:{internal.port}/"}))
    a = await make(internal_registries=[reg.address]).manifest(ref(f"{reg.address}/team/app:1.0"), CRED, 5)
    assert (a.outcome, a.detail) == (
        registry.NOT_ASKED,
        "answered the manifest request with a redirect (HTTP 307), which is not followed",
    )
    assert internal.seen == []


# ---------------------------------------------------------------------------------------------- what messages say


async def test_closed_tls_and_plain_http_ports_read_alike(
    reg: HostileServer, internal: HostileServer, make: Callable[..., registry.RegistryClient]
) -> None:
    """Issue 33: "connection refused", "certificate not trusted" and "no answer within 2.0s" told a
    closed port, a TLS service and a plain-HTTP one apart. Unlisted, each is refused before connecting
    with one text; listed, every network failure reads alike."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # bound, never listening: refused
        untrusted = HostileServer(trustme.CA())  # another CA: a TLS service whose certificate is not trusted
        with untrusted:
            ports = {"closed": closed, "tls": untrusted.port, "http": internal.port}
            unlisted = make(timeout=1.0)
            texts = {k: (await unlisted.manifest(ref(f"127.0.0.1:{p}/team/app:1.0"), None, 5)).detail
                     for k, p in ports.items()}  # fmt: skip
            assert set(texts.values()) == {BLOCKED}, texts
            assert internal.seen == [] and untrusted.seen == []
            listed = make(timeout=1.0, internal_registries=[f"127.0.0.1:{p}" for p in ports.values()])
            closed_text = (await listed.manifest(ref(f"127.0.0.1:{closed}/team/app:1.0"), None, 5)).detail
            http_text = (await listed.manifest(ref(f"127.0.0.1:{internal.port}/team/app:1.0"), None, 5)).detail
    assert closed_text == http_text == "could not be reached or did not answer within 1.0s"


@pytest.mark.parametrize(
    "bad",
    ["\x1b[31mred", "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\", "1.0\nDENIED", "1.0\r", "-x", "." * 3,
     "a" * 129, "", "ok tag", "v\u202e1"],
)  # fmt: skip
async def test_tags_that_are_not_tags_are_dropped(
    reg: HostileServer, make: Callable[..., registry.RegistryClient], bad: str
) -> None:
    """Issue 33: tags chosen by the registry (ESC, OSC-8 links, newlines) landed raw in denial texts."""
    reg.route("HEAD", MANIFEST, Reply(404))
    reg.route("GET", "/v2/team/app/tags/list", json_reply({"name": "team/app", "tags": [bad, "1.1", 7, "_x"]}))
    a = await make(internal_registries=[reg.address]).manifest(ref(f"{reg.address}/team/app:1.0"), None, 5)
    assert a.tags == ("1.1", "_x")


async def test_hostile_tags_and_platforms_never_reach_the_message(reg: HostileServer) -> None:
    reg.route("HEAD", MANIFEST, Reply(404))
    reg.route("GET", "/v2/team/app/tags/list",
              json_reply({"tags": ["1.0\x1b]8;;https://evil.example/\x07x", "1.0\nDENY", "1.1"]}))  # fmt: skip
    image = f"{reg.address}/team/app:1.0"
    [r] = await _run_check(reg, [image])
    assert r.status == Status.FAIL
    assert r.message.endswith('; nearby tags: 1.1. Fix: use a tag that exists, e.g. "1.1".'), r.message
    assert not any(c in r.message for c in "\x1b\x07\n\r")


async def test_bodies_are_bounded_and_not_inflated(
    reg: HostileServer, make: Callable[..., registry.RegistryClient]
) -> None:
    import gzip

    reg.route("HEAD", MANIFEST, Reply(404))
    c = make(internal_registries=[reg.address])
    big = json.dumps({"tags": ["1.1"] * 300_000}).encode()  # 2.1 MB, past TAGS_BODY_MAX
    reg.route("GET", "/v2/team/app/tags/list", Reply(200, {"Content-Type": "application/json"}, big))
    assert (await c.manifest(ref(f"{reg.address}/team/app:1.0"), None, 5)).tags is None
    bomb = gzip.compress(json.dumps({"tags": ["1.1"], "pad": "0" * 50_000_000}).encode())
    reg.route("GET", "/v2/team/app/tags/list",
              Reply(200, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, bomb))  # fmt: skip
    assert (await c.manifest(ref(f"{reg.address}/team/app:1.0"), None, 5)).tags is None
    assert all(s.headers.get("accept-encoding") == "identity" for s in reg.seen)


# ---------------------------------------------------------------------------------------------- load


async def test_lookups_in_flight_are_capped(reg: HostileServer, make: Callable[..., registry.RegistryClient]) -> None:
    """One session and at most max_concurrent lookups at once in the process: the others wait for a
    slot within their own deadline, then are not asked."""
    for i in range(6):
        reg.route("HEAD", f"/v2/team/app{i}/manifests/1.0", Reply(hang=True))
    c = make(timeout=3.0, max_concurrent=2, internal_registries=[reg.address], breaker_failures=100)
    answers = await asyncio.gather(*(c.manifest(ref(f"{reg.address}/team/app{i}:1.0"), None, 0.5) for i in range(6)))
    details = sorted(a.detail for a in answers)
    assert details == [
        "could not be reached or did not answer within 0.5s",
        "could not be reached or did not answer within 0.5s",
        *["was not asked: 2 lookups were in flight for 0.5s (registryAccess.maxConcurrentLookups)"] * 4,
    ]
    assert len(reg.seen) <= 2


def _jobset(images: list[str], secrets: list[str]) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": im} for i, im in enumerate(images)]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "fanout", "namespace": "ns"},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": {
            "containers": containers, "imagePullSecrets": [{"name": s} for s in secrets]}}}}}]},
    }  # fmt: skip


async def test_a_jobset_of_2000_images_is_20_lookups_and_still_denied(reg: HostileServer) -> None:
    """Issue 33: a JobSet with N distinct images made N lookups at once (+320 MiB at 1,000), the review
    ran out of its budget and timeoutAction warn admitted a broken job (missing Secret) that one
    image got denied. Now at most maxImagesPerReview are asked, the rest named, and the missing
    Secret still denies, inside the server's own outer bound on the evaluation."""
    for i in range(2000):
        reg.route("HEAD", f"/v2/team/app{i}/manifests/1.0", Reply(hang=True))
    images = [f"{reg.address}/team/app{i}:1.0" for i in range(2000)]
    ra = {"mode": "all", "internalRegistries": [reg.address], "caFile": str(_ca_file(reg)), "timeoutSeconds": 2}
    settings = Settings(registryAccess=ra, privateRegistries=[reg.address])
    view = FakeView({"namespaces": [{"metadata": {"name": "ns"}}]})
    deadline = Deadline(4.0)
    async with asyncio.timeout(deadline.budget + settings.safety_margin_seconds / 2):  # the server's outer bound
        ev = await evaluate(_jobset(images, ["missing-pull"]), settings=settings, deadline=deadline, view=view)
    assert not ev.decision.allowed
    assert "Secrets" in ev.decision.denied_checks
    assert len(reg.seen) <= 20
    [pull] = [r for r in ev.results.checks if r.name == "Image Pull"]
    assert pull.details[-1] == (
        f'1980 more images not asked (limit 20, registryAccess.maxImagesPerReview): "{images[20]}", '
        f'"{images[21]}", "{images[22]}" and 1977 more'
    )


async def test_over_the_limit_is_a_detail_of_a_pass(reg: HostileServer) -> None:
    for i in range(3):
        reg.route("HEAD", f"/v2/team/app{i}/manifests/1.0", Reply(200))
    images = [f"{reg.address}/team/app{i}:1.0" for i in range(3)]
    [r] = await _run_check(reg, images, maxImagesPerReview=2)
    assert (r.status, r.message) == (
        Status.PASS,
        "The 2 images asked are in their registries and can be pulled; 1 more image not asked (limit 2, "
        f'registryAccess.maxImagesPerReview): "{images[2]}"',
    )
    assert len(reg.seen) == 2


# ---------------------------------------------------------------------------------------------- the check


def _ca_file(reg: HostileServer) -> Any:
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "ca.pem"
    return reg.write_ca(path)


async def _run_check(reg: HostileServer, images: list[str], *, secret: bool = False, **ra: Any) -> Any:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(images)]}
    view = FakeView()
    if secret:
        spec["imagePullSecrets"] = [{"name": "regcred"}]
        auth = base64.b64encode(json.dumps({"auths": {reg.address: {"username": USER, "password": PASSWORD}}}).encode())
        view.pull_secrets[("ns", "regcred")] = read_pull_secret(
            "regcred", {"type": DOCKER_CONFIG_JSON, "data": {".dockerconfigjson": auth.decode()}}
        )
    wl = Workload(kind="AIPerfJob", api_version="aiperf.nvidia.com/v1alpha1", name="j", namespace="ns", obj={},
                  pod_groups=[PodGroup(name="g", pods=1, pod_spec=spec)])  # fmt: skip
    settings = Settings(registryAccess={"mode": "all", "internalRegistries": [reg.address],
                                        "caFile": str(_ca_file(reg)), "cacheSeconds": 0, **ra})  # fmt: skip
    check = ImagePull()
    try:
        return await check.run(CheckContext(wl, Deadline(5), settings, view))
    finally:
        for c in check._clients.values():
            await c.close()


async def test_what_the_client_remembers_is_bounded(
    reg: HostileServer, make: Callable[..., registry.RegistryClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job author can name hosts and repositories without end: the breakers and the answer cache
    keep at most ENTRIES_MAX entries each, and a registry in good health has no breaker entry."""
    monkeypatch.setattr(registry, "ENTRIES_MAX", 8)
    c = make(breaker_failures=100, cache_seconds=30, internal_registries=[reg.address])
    for i in range(30):  # names that do not resolve: a failure each, never a connection
        a = await c.manifest(ref(f"h{i}.invalid.example/team/app:1.0"), None, 5)
        assert a.detail == "could not be reached or did not answer within 2.0s"
    assert 0 < len(c._breakers) <= 8
    for i in range(30):  # manifest unknown: a definite answer, cached
        assert (await c.manifest(ref(f"{reg.address}/team/app{i}:1.0"), None, 5)).outcome == registry.UNKNOWN
    assert 0 < len(c._cache) <= 8
    assert reg.address not in c._breakers


async def test_a_client_per_configuration_and_at_most_eight(reg: HostileServer) -> None:
    """The check keeps one client (session, cache, breakers) per registryAccess configuration; past
    eight (settings reloaded again and again) the old ones are closed and dropped."""
    check = ImagePull()
    settings = [
        Settings(registryAccess={"mode": "all", "timeoutSeconds": 1 + i / 10}).registry_access for i in range(9)
    ]
    first = check.client(settings[0])
    assert check.client(settings[0]) is first
    for ra in settings[1:8]:
        check.client(ra)
    assert len(check._clients) == 8
    check.client(settings[8])
    assert len(check._clients) == 1
    await asyncio.gather(*check._closing)
    for c in check._clients.values():
        await c.close()
