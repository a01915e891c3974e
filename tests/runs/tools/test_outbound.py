"""Outbound requests of tools (runs.tools.outbound through http_request): non-public
addresses refused after resolution and on every redirect unless allowed, the vetted
address pinned, bodies capped while streaming; provider base URLs unaffected."""

import ipaddress
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, urlparse

import pytest
from prometheus_client import REGISTRY

from runs.providers import get_provider
from runs.providers.base import LLMRequest, Message
from runs.tools import ToolContext, get_tool
from runs.tools.outbound import AllowList, address_refusal
from runs.vocabulary import NodeError

CTX = ToolContext(idempotency_key="run-1:step-7")


class Handler(BaseHTTPRequestHandler):
    """``/json`` answers what it saw; ``/goto?to=URL`` redirects there; ``/loop``
    redirects to itself; ``/big?n=N[&chunked=1]`` sends N bytes (with or without a
    Content-Length)."""

    received: list = []
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        Handler.received.append({"path": url.path, "host": self.headers.get("Host")})
        if url.path == "/json":
            body = json.dumps({"host": self.headers.get("Host")}).encode()
            self._send(200, body, {"Content-Type": "application/json", "Content-Length": str(len(body))})
        elif url.path == "/goto":
            self._send(302, b"", {"Location": query["to"][0], "Content-Length": "0"})
        elif url.path == "/loop":
            self._send(302, b"", {"Location": "/loop", "Content-Length": "0"})
        elif url.path == "/big":
            size = int(query["n"][0])
            headers = {"Content-Type": "text/plain"}
            if "chunked" not in query:
                headers["Content-Length"] = str(size)
            self._send(200, b"x" * size, headers)  # without a length: the body ends at close
        else:
            self._send(404, b"", {"Content-Length": "0"})

    def _send(self, status, body, headers):
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that stops reading (the byte cap) breaks the pipe: expected


@pytest.fixture
def server():
    Handler.received = []
    httpd = QuietServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def ipv6_server():
    """The same handler on [::1], when this machine has IPv6 loopback."""
    Handler.received = []

    class Server6(QuietServer):
        address_family = socket.AF_INET6

    try:
        httpd = Server6(("::1", 0), Handler)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def http(args):
    return get_tool("http_request").call(args, CTX)


def refused(url):
    with pytest.raises(NodeError) as caught:
        http({"url": url, "timeout": 5})
    error = caught.value
    assert (error.code, error.retryable) == ("outbound_refused", False), error.message
    assert "BALLAST_OUTBOUND_ALLOW" in error.message
    return error


# --- the address rules --------------------------------------------------------------
@pytest.mark.parametrize(
    "address, reason",
    [
        ("127.0.0.1", "loopback"),
        ("127.1.2.3", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),  # cloud metadata
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "non-public"),  # carrier-grade NAT
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "link-local"),
        ("::ffff:10.1.2.3", "private"),
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
    ],
)
def test_non_public_addresses_are_refused(address, reason):
    assert address_refusal(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address):
    assert address_refusal(ipaddress.ip_address(address)) is None


def test_allow_list_entries():
    allowed = AllowList.parse(["127.0.0.1", " 10.20.0.0/16 ", "[::1]", "Intranet.Example", "*.corp.example", ""])
    assert allowed.allows_address(ipaddress.ip_address("127.0.0.1"))
    assert allowed.allows_address(ipaddress.ip_address("::ffff:127.0.0.1"))  # the same host
    assert allowed.allows_address(ipaddress.ip_address("10.20.3.4"))
    assert not allowed.allows_address(ipaddress.ip_address("10.21.0.1"))
    assert allowed.allows_address(ipaddress.ip_address("::1"))
    assert not allowed.allows_address(ipaddress.ip_address("127.0.0.2"))
    assert allowed.allows_host("intranet.example") and allowed.allows_host("db.corp.example")
    assert not allowed.allows_host("corp.example") and not allowed.allows_host("example")
    with pytest.raises(ValueError, match="neither an IP address"):
        AllowList.parse(["http://10.0.0.1/"])


def test_a_malformed_allow_list_fails_the_call_clearly(settings):
    settings.BALLAST_OUTBOUND_ALLOW = ["10.0.0.0/33x"]
    with pytest.raises(NodeError) as caught:
        http({"url": "http://example.invalid/"})
    assert (caught.value.code, caught.value.retryable) == ("outbound_config", False)


# --- http_request ----------------------------------------------------------------------
def test_loopback_is_refused_by_default_and_nothing_is_sent(server):
    error = refused(f"http://127.0.0.1:{server}/json")
    assert error.details["reason"] == "loopback" and error.details["address"] == "127.0.0.1"
    assert Handler.received == []


def test_a_refused_call_is_counted_by_reason_and_an_allowed_one_is_not(server, settings):
    def count(reason: str) -> float:
        return REGISTRY.get_sample_value("ballast_outbound_refused_total", {"reason": reason}) or 0.0

    loopback, private = count("loopback"), count("private")
    refused(f"http://127.0.0.1:{server}/json")
    refused("http://10.0.0.1/")
    assert (count("loopback"), count("private")) == (loopback + 1, private + 1)
    settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    assert http({"url": f"http://127.0.0.1:{server}/json"})["status"] == 200
    assert count("loopback") == loopback + 1


@pytest.mark.parametrize(
    "url, reason",
    [
        ("http://10.0.0.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://0.0.0.0:{port}/json", "unspecified"),
        ("http://[::ffff:127.0.0.1]:{port}/json", "loopback"),
        ("http://[::1]:{port}/json", "loopback"),
        ("http://224.0.0.1/", "multicast"),
    ],
)
def test_non_public_urls_are_refused_before_connecting(server, url, reason):
    error = refused(url.format(port=server))
    assert error.details["reason"] == reason
    assert Handler.received == []


def test_a_host_name_resolving_to_loopback_is_refused(server):
    error = refused(f"http://localhost:{server}/json")
    assert error.details["host"] == "localhost" and error.details["reason"] == "loopback"
    assert Handler.received == []


def test_the_allow_list_lets_127_0_0_1_through(server, settings):
    settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    assert http({"url": f"http://127.0.0.1:{server}/json"})["status"] == 200
    refused(f"http://127.0.0.2:{server}/json")  # only what is named


def test_ipv6_loopback_needs_its_own_entry(ipv6_server, settings):
    settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    refused(f"http://[::1]:{ipv6_server}/json")
    settings.BALLAST_OUTBOUND_ALLOW = ["::1"]
    assert http({"url": f"http://[::1]:{ipv6_server}/json"})["status"] == 200


@pytest.mark.parametrize(
    "target, reason",
    [
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://10.1.2.3:{port}/json", "private"),
        ("http://[::1]:{port}/json", "loopback"),
    ],
)
def test_a_redirect_from_an_allowed_server_to_a_refused_address_is_refused(server, settings, target, reason):
    settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    to = target.format(port=server)
    error = refused(f"http://127.0.0.1:{server}/goto?to={quote(to, safe='')}")
    assert error.details["reason"] == reason
    assert [r["path"] for r in Handler.received] == ["/goto"]  # the refused hop got nothing


def test_an_allowed_redirect_is_followed(server, settings):
    settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    to = quote(f"http://127.0.0.1:{server}/json", safe="")
    assert http({"url": f"http://127.0.0.1:{server}/goto?to={to}"})["json"] == {"host": f"127.0.0.1:{server}"}


def test_redirects_are_bounded(server, settings):
    settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    settings.BALLAST_OUTBOUND_MAX_REDIRECTS = 3
    with pytest.raises(NodeError) as caught:
        http({"url": f"http://127.0.0.1:{server}/loop"})
    assert caught.value.code == "http_4xx" and "more than 3 redirects" in caught.value.message
    assert len(Handler.received) == 4  # the first request and three redirects


@pytest.mark.parametrize("chunked", [False, True])
def test_a_response_bigger_than_the_cap_fails_the_call(server, settings, chunked):
    settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    settings.BALLAST_OUTBOUND_MAX_RESPONSE_BYTES = 10_000
    url = f"http://127.0.0.1:{server}/big?n=200000" + ("&chunked=1" if chunked else "")
    with pytest.raises(NodeError) as caught:
        http({"url": url, "max_chars": 100_000})
    error = caught.value
    assert (error.code, error.retryable, error.details["limit"]) == ("response_too_large", False, 10_000)
    assert "larger than 10000 bytes" in error.message
    # Within the cap, and a caller keeping less than the cap: no error.
    assert http({"url": f"http://127.0.0.1:{server}/big?n=9000", "max_chars": 100_000})["text"] == "x" * 9000
    small = http({"url": url, "max_chars": 50})
    assert small["truncated"] is True and small["text"] == "x" * 50


def test_the_vetted_address_is_pinned_and_the_host_name_kept(server, settings, monkeypatch):
    """A name is resolved once per connection; the connection goes to that very address
    (no second lookup a rebinding DNS server could answer differently), and the server
    sees the name in Host."""
    real = socket.getaddrinfo
    lookups = []

    def resolver(host, *args, **kwargs):
        if host == "service.test":
            lookups.append(host)
            return real("127.0.0.1", *args, **kwargs)
        if host == "mixed.test":  # a public and a private answer: refused for the private one
            return real("93.184.216.34", *args, **kwargs) + real("10.0.0.7", *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    refused(f"http://service.test:{server}/json")  # resolves to loopback: refused
    settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    lookups.clear()
    result = http({"url": f"http://service.test:{server}/json"})
    assert result["json"] == {"host": f"service.test:{server}"}
    assert lookups == ["service.test"]
    error = refused("http://mixed.test/")
    assert error.details["address"] == "10.0.0.7"
    # An allowed host name is trusted whatever it resolves to.
    settings.BALLAST_OUTBOUND_ALLOW = ["service.test"]
    assert http({"url": f"http://service.test:{server}/json"})["status"] == 200


def test_a_local_model_server_still_works_with_no_allow_list(sdk_providers, settings):  # noqa: F811
    """Provider base URLs are the operator's configuration: an OpenAI-compatible server on
    127.0.0.1 answers while a tool may not reach the same address."""
    settings.BALLAST_OUTBOUND_ALLOW = []
    assert sdk_providers.openai_base_url.startswith("http://127.0.0.1:")
    settings.BALLAST_PROVIDER_SETTINGS = {
        "local": {"base_url": sdk_providers.openai_base_url, "api_key_env": "OPENAI_API_KEY"}
    }
    settings.BALLAST_PROVIDERS = {
        **settings.BALLAST_PROVIDERS,
        "local": "runs.providers.openai_provider.OpenAIProvider",
    }
    response = get_provider("local").complete(
        LLMRequest(model="llama3.2", messages=[Message("user", "Hello")], max_tokens=16)
    )
    assert response.text
    assert len(sdk_providers.calls("/v1/chat/completions")) == 1
    refused(sdk_providers.openai_base_url + "/models")


def _tls_files(tmp_path):
    """A private CA and a certificate for ``service.test`` only (no IP address in it)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "service.test")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("service.test")]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = {name: tmp_path / f"{name}.pem" for name in ("ca", "cert", "key")}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


def test_tls_checks_the_url_host_name_on_the_pinned_address(tmp_path, monkeypatch):
    """The connection goes to the vetted IP, while TLS sends and verifies the URL's host
    name: a certificate for service.test is accepted at https://service.test and refused
    at https://127.0.0.1 (it does not name that address)."""
    import ssl

    import httpx

    from runs.tools import outbound

    files = _tls_files(tmp_path)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(files["cert"], files["key"])
    httpd = QuietServer(("127.0.0.1", 0), Handler)
    httpd.socket = server_context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    port = httpd.server_address[1]
    real = socket.getaddrinfo
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda host, *a, **k: real("127.0.0.1" if host == "service.test" else host, *a, **k)
    )
    client_context = ssl.create_default_context(cafile=str(files["ca"]))
    allowed = AllowList.parse(["127.0.0.1"])
    try:
        with outbound.outbound_client(timeout=5, allowed=allowed, verify=client_context) as client:
            with outbound.open_response(
                client, client.build_request("GET", f"https://service.test:{port}/json"), follow_redirects=True
            ) as response:
                body, _ = outbound.read_body(response, keep_bytes=1000, deadline=time.monotonic() + 5)
            assert json.loads(body) == {"host": f"service.test:{port}"}
            with pytest.raises(httpx.ConnectError, match="certificate verify failed"):
                client.get(f"https://127.0.0.1:{port}/json")
    finally:
        httpd.shutdown()
        httpd.server_close()
