"""webhook/cluster/kubeconfig.py: the apiserver's address and credentials without kubernetes_asyncio.

Each case is a behaviour of kubernetes_asyncio 36.1.0's loaders (config/kube_config.py,
incluster_config.py, exec_provider.py) or of client-go's where the module follows client-go instead
(the first kubeconfig file's current-context wins; an exec token is asked for again once expired).
The requests themselves are checked against a local aiohttp server: what KubeClient sends.
"""

from __future__ import annotations

import base64
import json
import ssl
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from aiohttp import web

from webhook.cluster.client import KubeClient, load_configuration
from webhook.cluster.kubeconfig import (
    ClusterConfig,
    ExecPlugin,
    KubeconfigError,
    TokenFile,
    from_kubeconfig,
    in_cluster,
    parse_rfc3339,
)

CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def b64(data: bytes) -> str:
    return base64.standard_b64encode(data).decode()


def kubeconfig(
    path: Path,
    *,
    user: dict[str, Any],
    server: str = "https://10.0.0.1:6443",
    current: str | None = "ctx",
    **cluster: Any,
) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
    }
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


# ---- kubeconfig: cluster and TLS ------------------------------------------------------------------------


async def test_a_token_user_and_the_cluster_s_tls_settings(tmp_path: Path) -> None:
    p = kubeconfig(
        tmp_path / "kc",
        user={"token": "abc"},
        server="https://10.0.0.1:6443/",
        **{
            "certificate-authority-data": b64(CA_PEM),
            "tls-server-name": "kubernetes",
            "proxy-url": "http://proxy:3128",
        },
    )
    cfg = await from_kubeconfig(str(p))
    assert cfg.host == "https://10.0.0.1:6443"  # the trailing slash dropped, as kube_config.py does
    assert (cfg.ca_data, cfg.ca_file) == (CA_PEM, None)
    assert (cfg.tls_server_name, cfg.proxy, cfg.verify_ssl) == ("kubernetes", "http://proxy:3128", True)
    assert await cfg.authorization() == "Bearer abc"


async def test_relative_files_are_relative_to_the_kubeconfig_and_insecure_skips_verification(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pki").mkdir()
    for name in ("ca.crt", "user.crt", "user.key"):
        (tmp_path / "pki" / name).write_text("x")
    p = kubeconfig(
        tmp_path / "kc",
        user={"client-certificate": "pki/user.crt", "client-key": "pki/user.key"},
        **{"certificate-authority": "pki/ca.crt", "insecure-skip-tls-verify": True},
    )
    monkeypatch.chdir("/")
    cfg = await from_kubeconfig(str(p))
    assert cfg.ca_file == str(tmp_path / "pki" / "ca.crt")
    assert (cfg.cert_file, cfg.key_file) == (str(tmp_path / "pki" / "user.crt"), str(tmp_path / "pki" / "user.key"))
    assert cfg.verify_ssl is False
    assert await cfg.authorization() is None


async def test_a_missing_certificate_file_is_named(tmp_path: Path) -> None:
    p = kubeconfig(tmp_path / "kc", user={}, **{"certificate-authority": "nope.crt"})
    with pytest.raises(KubeconfigError, match="nope.crt"):
        await from_kubeconfig(str(p))


async def test_plain_http_reads_no_tls_files(tmp_path: Path) -> None:
    p = kubeconfig(tmp_path / "kc", user={"client-certificate": "gone.crt"}, server="http://127.0.0.1:8080")
    cfg = await from_kubeconfig(str(p))
    assert (cfg.host, cfg.cert_file, cfg.ca_file) == ("http://127.0.0.1:8080", None, None)


# ---- kubeconfig: users -----------------------------------------------------------------------------------


async def test_token_data_wins_over_token_file_and_basic_auth(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("from-file")
    both = {"token": "inline", "tokenFile": "tok", "username": "a", "password": "b"}
    assert await (await from_kubeconfig(str(kubeconfig(tmp_path / "kc", user=both)))).authorization() == "Bearer inline"
    file_only = {"tokenFile": "tok", "username": "a", "password": "b"}
    cfg = await from_kubeconfig(str(kubeconfig(tmp_path / "kc", user=file_only)))
    assert await cfg.authorization() == "Bearer from-file"
    basic = await from_kubeconfig(str(kubeconfig(tmp_path / "kc", user={"username": "a", "password": "b"})))
    assert await basic.authorization() == "Basic " + b64(b"a:b")


async def test_a_token_file_is_read_again_once_it_is_older_than_its_refresh(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one")
    kept, fresh = TokenFile(str(path), refresh=3600), TokenFile(str(path), refresh=0)
    assert (await kept.header(), await fresh.header()) == ("Bearer one", "Bearer one")
    path.write_text("two")  # the kubelet rotated the projected token
    assert (await kept.header(), await fresh.header()) == ("Bearer one", "Bearer two")


def plugin(
    tmp_path: Path, status: dict[str, Any], *, api: str = "client.authentication.k8s.io/v1", code: int = 0
) -> dict:
    """An exec plugin that counts its runs, checks KUBERNETES_EXEC_INFO and prints an ExecCredential."""
    script = tmp_path / "plugin.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import json, os, sys
            info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
            assert info["kind"] == "ExecCredential" and os.environ["EXTRA"] == "yes", info
            with open({str(tmp_path / "runs")!r}, "a") as f:
                f.write(info["apiVersion"] + "\\n")
            if {code}:
                print("denied by the plugin", file=sys.stderr)
                sys.exit({code})
            print(json.dumps({{"apiVersion": {api!r}, "kind": "ExecCredential", "status": {status!r}}}))
            """
        )
    )
    return {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": [str(script)],
        "env": [{"name": "EXTRA", "value": "yes"}],
    }


def runs(tmp_path: Path) -> int:
    p = tmp_path / "runs"
    return len(p.read_text().splitlines()) if p.exists() else 0


async def test_an_exec_token_is_kept_until_it_expires(tmp_path: Path) -> None:
    spec = plugin(tmp_path, {"token": "t1", "expirationTimestamp": "2999-01-01T00:00:00Z"})
    cfg = await from_kubeconfig(str(kubeconfig(tmp_path / "kc", user={"exec": spec, "token": "ignored"})))
    assert await cfg.authorization() == "Bearer t1"
    assert await cfg.authorization() == "Bearer t1"
    assert runs(tmp_path) == 1


async def test_an_expired_exec_token_is_asked_for_again(tmp_path: Path) -> None:
    spec = plugin(tmp_path, {"token": "t1", "expirationTimestamp": "2000-01-01T00:00:00.123456789Z"})
    cfg = await from_kubeconfig(str(kubeconfig(tmp_path / "kc", user={"exec": spec})))
    assert runs(tmp_path) == 1
    assert await cfg.authorization() == "Bearer t1"
    assert runs(tmp_path) == 2


async def test_an_exec_client_certificate_replaces_the_user_s(tmp_path: Path) -> None:
    status = {"clientCertificateData": "CERT PEM", "clientKeyData": "KEY PEM"}
    user = {"exec": plugin(tmp_path, status), "client-certificate": "gone.crt"}
    cfg = await from_kubeconfig(str(kubeconfig(tmp_path / "kc", user=user)))
    assert (cfg.cert_data, cfg.key_data, cfg.cert_file) == (b"CERT PEM", b"KEY PEM", None)
    assert await cfg.authorization() is None


@pytest.mark.parametrize(
    "kw, said",
    [
        ({"code": 3}, "exec: process returned 3. denied by the plugin"),
        ({"api": "client.authentication.k8s.io/v1beta1"}, "does not match client.authentication.k8s.io/v1"),
    ],
)
async def test_a_failing_exec_plugin_is_a_kubeconfig_error(tmp_path: Path, kw: dict[str, Any], said: str) -> None:
    spec = plugin(tmp_path, {"token": "t"}, **kw)
    with pytest.raises(KubeconfigError, match=said):
        await from_kubeconfig(str(kubeconfig(tmp_path / "kc", user={"exec": spec})))


def test_an_exec_spec_without_a_command_is_refused() -> None:
    with pytest.raises(KubeconfigError, match="missing key 'command'"):
        ExecPlugin({"apiVersion": "client.authentication.k8s.io/v1"})


def test_rfc3339_times() -> None:
    assert parse_rfc3339("2026-12-05T16:00:00Z").isoformat() == "2026-12-05T16:00:00+00:00"
    assert parse_rfc3339("2026-12-05T17:00:00+01:00").timestamp() == parse_rfc3339("2026-12-05T16:00:00Z").timestamp()


# ---- kubeconfig: files, contexts ----------------------------------------------------------------------


async def test_several_files_merge_by_name_and_the_first_current_context_wins(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "a", user={"token": "first"}, server="https://first:6443")
    second = tmp_path / "b"
    second.write_text(
        yaml.safe_dump(
            {
                "current-context": "other",
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://shadowed"}},
                    {"name": "o", "cluster": {"server": "https://other"}},
                ],
                "users": [{"name": "u", "user": {"token": "shadowed"}}],
                "contexts": [{"name": "other", "context": {"cluster": "o", "user": "u"}}],
            }
        )
    )
    paths = f"{first}:{tmp_path / 'missing'}:{second}"
    cfg = await from_kubeconfig(paths)
    assert (cfg.host, await cfg.authorization()) == ("https://first:6443", "Bearer first")
    other = await from_kubeconfig(paths, context="other")
    assert (other.host, await other.authorization()) == ("https://other", "Bearer first")


@pytest.mark.parametrize(
    "context, current, said",
    [
        (None, None, "Expected key current-context"),
        ("prod", "ctx", "Expected object with name prod in contexts list"),
    ],
)
async def test_a_context_that_cannot_be_had_is_an_error(
    tmp_path: Path, context: str | None, current: str | None, said: str
) -> None:
    p = kubeconfig(tmp_path / "kc", user={}, current=current)
    with pytest.raises(KubeconfigError, match=said):
        await from_kubeconfig(str(p), context)


async def test_no_kubeconfig_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="no kubeconfig found"):
        await from_kubeconfig(str(tmp_path / "none"))


# ---- in cluster ------------------------------------------------------------------------------------------


def test_in_cluster(tmp_path: Path) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("ca")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    cfg = in_cluster(env, str(token), str(ca))
    assert (cfg.host, cfg.ca_file) == ("https://[fd00::1]:443", str(ca))
    assert isinstance(cfg.credentials, TokenFile) and cfg.credentials.refresh == 60.0
    assert (
        in_cluster({**env, "KUBERNETES_SERVICE_HOST": "10.0.0.1"}, str(token), str(ca)).host == "https://10.0.0.1:443"
    )
    with pytest.raises(KubeconfigError, match="Service host/port is not set"):
        in_cluster({}, str(token), str(ca))
    with pytest.raises(KubeconfigError, match="Service token file does not exist"):
        in_cluster(env, str(tmp_path / "none"), str(ca))


# ---- the auth-provider users left to kubernetes_asyncio ---------------------------------------------


async def test_an_auth_provider_user_is_loaded_by_kubernetes_asyncio(tmp_path: Path) -> None:
    provider = {"name": "gcp", "config": {"access-token": "gcp-token", "expiry": "2999-01-01T00:00:00Z"}}
    p = kubeconfig(tmp_path / "kc", user={"auth-provider": provider}, server="http://127.0.0.1:1")
    cfg = await load_configuration(str(p))
    assert (cfg.host, await cfg.authorization()) == ("http://127.0.0.1:1", "Bearer gcp-token")


# ---- what KubeClient sends ---------------------------------------------------------------------------


async def serve(handler: Any, ssl_context: ssl.SSLContext | None = None) -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


async def test_the_request_on_the_wire(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(
            {
                "method": request.method,
                "path_qs": request.path_qs,
                "authorization": request.headers.get("Authorization"),
                "accept": request.headers.get("Accept"),
                "body": await request.text(),
            }
        )
        return web.json_response({"kind": "Status"})

    runner, port = await serve(record)
    p = kubeconfig(tmp_path / "kc", user={"token": "abc"}, server=f"http://127.0.0.1:{port}")
    client = KubeClient(await load_configuration(str(p)), 2)
    try:
        await client.request("GET", "/api/v1/pods", query={"limit": 5, "continue": None, "watch": False}, timeout=5)
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
        await client.request("POST", "/api/v1/namespaces/n/pods", query={"dryRun": "All"}, body=obj, timeout=5)
    finally:
        await client.close()
        await runner.cleanup()
    assert seen[0] == {
        "method": "GET",
        "path_qs": "/api/v1/pods?limit=5&watch=False",  # what urlencode made of them in kubernetes_asyncio's rest.py
        "authorization": "Bearer abc",
        "accept": "application/json",
        "body": "",
    }
    assert seen[1]["path_qs"] == "/api/v1/namespaces/n/pods?dryRun=All"
    assert json.loads(seen[1]["body"]) == obj


async def test_tls_with_the_kubeconfig_s_ca_data_and_client_certificate_data(tmp_path: Path) -> None:
    """The client certificate reaches the server; the CA given as data verifies it."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    ca.configure_trust(server_ctx)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    user_cert = ca.issue_cert("user@example.com")
    subjects: list[Any] = []

    async def whoami(request: web.Request) -> web.Response:
        subjects.append(request.transport.get_extra_info("peercert"))  # type: ignore[union-attr]
        return web.json_response({"items": []})

    runner, port = await serve(whoami, server_ctx)
    user = {
        "client-certificate-data": b64(b"".join(b.bytes() for b in user_cert.cert_chain_pems)),
        "client-key-data": b64(user_cert.private_key_pem.bytes()),
    }
    p = kubeconfig(
        tmp_path / "kc",
        user=user,
        server=f"https://127.0.0.1:{port}",
        **{"certificate-authority-data": b64(ca.cert_pem.bytes())},
    )
    cfg = await load_configuration(str(p))
    client = KubeClient(cfg, 2)
    try:
        assert await client.request("GET", "/api/v1/secrets", timeout=10) == {"items": []}
    finally:
        await client.close()
        await runner.cleanup()
    assert len(subjects) == 1 and "user@example.com" in str(subjects[0])
    assert list(tmp_path.glob("**/tls.key")) == []


def test_a_cluster_config_needs_no_kubernetes_asyncio_configuration() -> None:
    cfg = ClusterConfig(host="http://127.0.0.1:1")
    KubeClient(cfg, 3, watches=24)
    assert cfg.connection_pool_maxsize == 27
