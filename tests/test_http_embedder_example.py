"""The provider guide's embedder example (docs/examples/http_embedder.py) runs as written: loaded
with `-p http_embedder`, its entry embeds the shipped BEIR folder's 30 queries through a server
of its own; against a server that never answers, the breaker gives the model up after a few
timeouts instead of one per item, and the cost figures name the server, not this machine."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from project import REPO, write

from ragmatrix.models import providers
from ragmatrix.testing.openai_server import embed_text

EXAMPLES = REPO / "docs" / "examples"
ITEMS = 30  # the judged queries of the shipped pydoc_topics folder


class EmbedServer(ThreadingHTTPServer):
    """Answers `POST /embed {"texts": [...]}` with a vector per text, counting the requests."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _EmbedHandler)
        self.requests = 0


class _EmbedHandler(BaseHTTPRequestHandler):
    server: EmbedServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.server.requests += 1
        texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["texts"]
        body = json.dumps({"embeddings": [embed_text(t, 32) for t in texts]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class SilentServer:
    """Accepts connections and reads what is sent, and never answers."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.requests = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.connections.append(connection)
            threading.Thread(target=self._read, args=(connection,), daemon=True).start()

    def _read(self, connection: socket.socket) -> None:
        while True:
            try:
                data = connection.recv(65536)
            except OSError:
                return
            if not data:
                return
            self.requests += data.count(b"POST /embed")

    def close(self) -> None:
        self.socket.close()
        for connection in self.connections:
            connection.close()


@pytest.fixture
def embed_server() -> Iterator[EmbedServer]:
    server = EmbedServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The shipped text retrieval family and its BEIR folder, with the example on sys.path; the
    provider it registers is forgotten after the test."""
    providers.providers()
    monkeypatch.setattr(providers, "_providers", dict(providers._providers))
    pytester.makeini("[pytest]\n")
    shutil.copy(REPO / "benchmark" / "test_text_retrieval.py", pytester.path / "test_text_retrieval.py")
    (pytester.path / "benchmark").mkdir()
    shutil.move(pytester.path / "test_text_retrieval.py", pytester.path / "benchmark")
    data = pytester.path / "benchmark" / "data"
    shutil.copytree(REPO / "benchmark" / "data" / "beir", data / "beir")
    shutil.copy(REPO / "benchmark" / "data" / "text_retrieval_data.yaml", data)
    pytester.syspathinsert(EXAMPLES)
    return pytester


def models(url: str, **settings: object) -> str:
    fields = "".join(f"    {name}: {value}\n" for name, value in settings.items())
    return f"models:\n  - id: mine\n    kind: embedder\n    http_embedder: {url}\n    model: toy-v1\n{fields}"


def rows(project: pytest.Pytester) -> list[dict]:
    path = project.path / "benchmark" / "results" / "text_retrieval.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_example_embeds_through_its_server_and_names_it_as_the_device(project, embed_server):
    url = f"http://127.0.0.1:{embed_server.server_port}"
    write(project.path / "benchmark" / "models.yaml", models(url))
    result = project.runpytest("benchmark", "-p", "http_embedder", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["ragmatrix: models: mine (embedder)"])
    assert result.ret == 0, result.stdout.str()
    stored = rows(project)
    assert len(stored) == ITEMS and all(r["status"] == "ok" for r in stored)
    assert embed_server.requests >= 4  # 78 documents in batches of 32, then the queries
    costs = project.path / "benchmark" / "results" / "costs" / "text_retrieval.jsonl"
    devices = {json.loads(line)["device"] for line in costs.read_text().splitlines()}
    assert devices == {"remote: 127.0.0.1"}  # the server, never this machine's CPU


def test_against_a_server_that_never_answers_the_breaker_gives_the_model_up(project, silent_server):
    url = f"http://127.0.0.1:{silent_server.port}"
    write(project.path / "benchmark" / "models.yaml", models(url, timeout=1, retries=3, breaker_after=3))
    result = project.runpytest("benchmark", "-p", "http_embedder", "-p", "no:cacheprovider")
    stored = rows(project)
    assert len(stored) == ITEMS and all(r["status"] == "error" for r in stored), result.stdout.str()
    errors = [i["error"] for r in stored for i in r["iterations"]]
    assert all(e.startswith("model down after 3 failures") for e in errors), errors[0]
    # One request per item and attempt would be 30 x 4; the breaker lets a few through, then
    # probes, then gives up: every later item ends at once.
    assert silent_server.requests < 20


def test_the_guide_shows_the_example_module_as_it_is():
    guide = (REPO / "docs" / "extending-providers.md").read_text()
    assert (EXAMPLES / "http_embedder.py").read_text().strip() in guide


@pytest.mark.slow
def test_mypy_passes_the_example_provider(tmp_path: Path):
    pytest.importorskip("mypy")
    command = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")]
    command += ["--cache-dir", str(tmp_path / "mypy_cache"), "--no-error-summary", "http_embedder.py"]
    checked = subprocess.run(command, cwd=EXAMPLES, capture_output=True, text=True, env={"PYTHONPATH": str(REPO)})
    assert checked.returncode == 0, checked.stdout + checked.stderr
