"""Before a run, each server a model of the matrix is reached at is asked whether anything answers
HTTP there (`probe_server`): a model whose server is down is left out with one line, not failed
item by item. A server is asked over a socket, as the package's own connections reach it (over
TLS, trusting what they trust, for `https://`); through a proxy the environment names, urllib
finds the way."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from project import closed_port, localhost_certificate, models_yaml

from ragmatrix.models.http import PROXY_VARIABLES, ssl_context
from ragmatrix.models.models_file import load_models, select_models
from ragmatrix.models.spec import probe_server

PROBE_IN_A_FRESH_PROCESS = """
import json, sys
from ragmatrix.models.spec import probe_server

reason = probe_server(sys.argv[1])
loaded = {name: name in sys.modules for name in ("urllib.request", "http.client")}
print(json.dumps({"reason": reason, **loaded}))
"""


@pytest.fixture
def no_proxy(monkeypatch):
    for name in (*PROXY_VARIABLES, "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def test_a_plain_http_server_is_asked_over_a_socket_with_its_credentials_and_without_urllib(server, no_proxy):
    address = server.base_url.replace("http://", "http://user:pass-word@")
    done = subprocess.run(
        [sys.executable, "-c", PROBE_IN_A_FRESH_PROCESS, address], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"reason": None, "urllib.request": False, "http.client": False}
    (request,) = server.requests
    assert request["path"] == "/v1/models"
    assert request["headers"]["authorization"] == "Basic dXNlcjpwYXNzLXdvcmQ="  # user:pass-word
    assert request["headers"]["host"] == server.base_url.removeprefix("http://").removesuffix("/v1")


def _answer_each(listener: socket.socket, answer: list[bytes], heard: list[bytes], tls: Any = None) -> None:
    """Read each connection's request into `heard` and answer it with the bytes of `answer`
    (nothing: close), over TLS where a server context is given; a client that refused the
    certificate sent nothing to read."""
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        with (
            connection,  # closed even where the handshake fails
            contextlib.suppress(OSError),
            tls.wrap_socket(connection, server_side=True) if tls else connection as served,
        ):
            heard.append(served.recv(65536))
            served.sendall(b"".join(answer))


@pytest.fixture
def tls_server(tmp_path) -> Iterator[tuple[str, str, list[bytes]]]:
    """An https server with a certificate of its own for 127.0.0.1 that answers any request with
    200: its address, the certificate's file and the requests it read."""
    key, cert = localhost_certificate(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    heard: list[bytes] = []
    answer = [b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]
    threading.Thread(target=_answer_each, args=(listener, answer, heard, served), daemon=True).start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}/v1", str(cert), heard
    listener.close()


def test_an_https_server_is_asked_over_tls_with_the_certificates_the_connections_trust(tls_server, no_proxy):
    address, certificate, heard = tls_server
    probe = [sys.executable, "-c", PROBE_IN_A_FRESH_PROCESS, address]
    trusted = {**os.environ, "SSL_CERT_FILE": certificate}
    done = subprocess.run(probe, env=trusted, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"reason": None, "urllib.request": False, "http.client": False}
    (request,) = heard
    assert request.startswith(b"GET /v1/models HTTP/1.1\r\n")
    # certifi's bundle, as the connections would trust without SSL_CERT_FILE, knows no such certificate
    untrusted = {name: value for name, value in os.environ.items() if name != "SSL_CERT_FILE"}
    done = subprocess.run(probe, env=untrusted, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    refused = f"server {address} unreachable ([SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"
    assert json.loads(done.stdout)["reason"].startswith(refused)
    assert len(heard) == 1  # the refused handshake sent no request


def test_the_probe_and_the_connections_share_one_context_per_bundle(monkeypatch, tmp_path):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    assert ssl_context("https://one.example/v1") is ssl_context("https://two.example:8443/v1")
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    with pytest.raises(FileNotFoundError):  # a bundle of its own, read afresh
        ssl_context("https://one.example/v1")
    assert ssl_context("http://plain.example/v1") is True  # no TLS set up for plain http


def test_any_status_counts_as_an_answer(server, no_proxy):
    assert probe_server(server.base_url + "/no/such/route") is None  # 404 is an answer


@pytest.fixture
def answers_with() -> Iterator[tuple[list[bytes], str]]:
    """A server that reads a request and answers with the bytes given (nothing: it closes)."""
    listener = socket.create_server(("127.0.0.1", 0))
    answer: list[bytes] = []
    threading.Thread(target=_answer_each, args=(listener, answer, []), daemon=True).start()
    yield answer, f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    listener.close()


def test_a_server_that_closes_at_once_or_answers_in_another_protocol_is_unreachable(answers_with, no_proxy):
    answer, address = answers_with
    assert probe_server(address) == (
        f"server {address} unreachable (the server closed the connection without answering)"
    )
    answer.append(b"SSH-2.0-OpenSSH_9.6\r\n")
    assert probe_server(address, name="mine") == "server mine unreachable (the server does not answer in HTTP)"
    answer[:] = [b"HTTP/1.0 503 Service Unavailable\r\n\r\n"]
    assert probe_server(address) is None


def test_nothing_listening_a_bad_port_and_no_host_are_unreachable(no_proxy):
    port = closed_port()
    assert probe_server(f"http://127.0.0.1:{port}/v1").startswith(f"server http://127.0.0.1:{port}/v1 unreachable (")
    assert probe_server("http://127.0.0.1:99999/v1").startswith("server http://127.0.0.1:99999/v1 unreachable (")
    assert probe_server("http:///v1") == "server http:///v1 unreachable (no host in the address)"


def test_a_proxy_the_environment_names_is_asked_instead(server, no_proxy, monkeypatch):
    """The test server stands in for the proxy of a host that does not exist: it receives the
    probe in a proxy's form (the whole address). The proxy is the one named when the probe
    runs, even where urllib's shared opener was made before without one."""
    with contextlib.suppress(OSError):
        urllib.request.urlopen(server.base_url + "/models", timeout=10).close()
    monkeypatch.setenv("HTTP_PROXY", server.base_url.removesuffix("/v1"))
    server.reset()
    assert probe_server("http://model.invalid/v1") is None
    (request,) = server.requests
    assert request["path"] == "http://model.invalid/v1/models"


def test_a_server_of_several_models_and_of_the_evaluator_is_asked_once_as_the_run_starts(bench, server, no_proxy):
    extra = "".join(
        f"  - id: also-{n}\n    kind: llm\n    litellm: openai/also-{n}\n    api_base: {server.base_url}\n"
        for n in (1, 2)
    )
    (bench.path / "benchmark" / "models.yaml").write_text(models_yaml(server.base_url, extra))
    result = bench.runpytest("benchmark", "--collect-only", "-q", "--evaluator", "also-2", "-p", "no:cacheprovider")
    result.assert_outcomes()
    assert result.ret == 0, result.stdout.str()
    assert "left out" not in result.stdout.str()  # every model's server answered
    assert server.count("/models") == 1


def test_a_server_is_asked_again_by_a_later_choice_and_one_that_is_down_leaves_each_of_its_models_out(
    server, no_proxy, tmp_path
):
    down = f"http://127.0.0.1:{closed_port()}/v1"
    listed = "".join(
        f"  - id: {name}-{n}\n    kind: llm\n    litellm: openai/m{n}\n    api_base: {base}\n"
        for name, base in (("up", server.base_url), ("down", down))
        for n in (1, 2)
    )
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n{listed}")
    for asked in (1, 2):  # an answer is kept for one choice only: a server may go down between runs
        chosen = select_models(load_models(path), None)
        assert [spec.id for spec in chosen.available] == ["up-1", "up-2"]
        assert sorted(chosen.left_out) == ["down-1", "down-2"]
        assert all(f"server {down} unreachable" in why for why in chosen.left_out.values())
        assert server.count("/models") == asked
