"""A small benchmark project for pytester tests: the files, and helpers to write them."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ragmatrix.models.spec import ModelSpec

REPO = Path(__file__).resolve().parents[1]

# A benchmark module like the shipped one, so plugin tests exercise the real shape.
RAG_TEST_MODULE = (REPO / "benchmark" / "test_rag_interpretation.py").read_text()

SMALL_CASES = """
_prompts:
  explicit: &explicit
    simple: "Judge the fragment for relevance. Answer yes or no."
    strict: "Answer with exactly one word, yes or no. Is the fragment relevant?"
rag_interpretation:
  - case: pathway_yes
    input:
      prompt: Which molecular pathways are associated with cancer?
      instruction: *explicit
      fragments: ["The EGFR pathway is deregulated in a number of cancers."]
    expected: {answer: "yes"}
  - case: pathway_no
    input:
      prompt: Which molecular pathways are associated with cancer?
      instruction: *explicit
      fragments: ["The earth is a globe."]
    expected: {answer: "no"}
  - case: capital_answer
    input:
      prompt: What is the capital of Australia?
      instruction: "Answer from the fragments, or say: I cannot answer this from the provided fragments."
      fragments: ["Canberra is the capital city of Australia."]
    expected: {behaviour: answer, keywords: [Canberra]}
"""


def models_yaml(api_base: str | None, extra: str = "") -> str:
    llm = ""
    if api_base:
        llm = f"""
  - id: scripted
    kind: llm
    litellm: openai/scripted
    api_base: {api_base}
    timeout: 10
    retries: 2
    concurrency: 4
"""
    return f"models:{llm}\n  - id: bow\n    kind: embedder\n    builtin: bow\n{extra}"


def closed_port() -> int:
    """A port of 127.0.0.1 that nothing listens on: a connection there is refused at once."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        return int(taken.getsockname()[1])


def localhost_certificate(folder: Path) -> tuple[Path, Path]:
    """A key and a self-signed certificate for 127.0.0.1 in `folder`, made by the openssl command
    (the test is skipped without it): a TLS server no certificate bundle trusts."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a certificate")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2"]
        + ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return key, cert


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def server_spec(server: Any, kind: str, model: str, **settings: Any) -> ModelSpec:
    """A model spec reaching `model` on the local test server through litellm."""
    fields = {"id": "scripted", "kind": kind, "litellm": f"openai/{model}", "api_base": server.base_url}
    return ModelSpec(**{**fields, "timeout": 1.0, "retries": 2, **settings})


def assert_outcomes(result: Any, **expected: int) -> None:
    """Like `RunResult.assert_outcomes`, with items whose result is stored counted as `cached`
    (the plugin's own status), apart from real skips."""
    found = {("errors" if name == "error" else name): count for name, count in result.parseoutcomes().items()}
    names = {"passed", "failed", "skipped", "cached", "errors", *expected}
    assert {name: found.get(name, 0) for name in names} == {name: expected.get(name, 0) for name in names}


# A fenced block of a docs page whose first line names the file it is: `# benchmark/test_echo.py`.
_SHOWN_FILE = re.compile(r"^```\w*\n# ([\w./-]+)\n(.*?)^```", re.M | re.S)


def files_shown(page: Path) -> dict[str, str]:
    """The files a docs page shows, by the path each block names in its first line, as written."""
    return {path: f"# {path}\n{body}" for path, body in _SHOWN_FILE.findall(page.read_text(encoding="utf-8"))}


def bag_of_words(spec: ModelSpec | None = None, cache: Any = None, provider: Any = None) -> Any:
    """The bag-of-words baseline as the `embedder` fixture gives it (`EmbeddingModel`), with
    another provider object where a test records what reaches the model."""
    from ragmatrix.models.embedder import EmbeddingModel
    from ragmatrix.models.lexical import HashingBagOfWords

    spec = spec or ModelSpec(id="bow", kind="embedder", builtin="bow")
    return EmbeddingModel(spec, provider or HashingBagOfWords(), cache)  # type: ignore[arg-type]


def counting_bag_of_words() -> Any:
    """A bag-of-words provider that records every batch the cache lets through (`batches`),
    keeping its rows dense as any embedder's (see `dense_words.py`)."""
    from dense_words import DenseWords

    class Counting(DenseWords):
        def __init__(self) -> None:
            self.batches: list[list[str]] = []

        def embed(self, texts: list[str]) -> Any:
            self.batches.append(list(texts))
            return super().embed(texts)

    return Counting()


def dense_words_project(folder: Path) -> None:
    """The `dense_words` test provider in a benchmark project (its module copied beside a conftest
    that registers it), for a run in another process; in this process, with the
    `dense_words_provider` fixture."""
    import dense_words

    write(folder / "dense_words.py", Path(dense_words.__file__).read_text())
    write(folder / "conftest.py", dense_words.CONFTEST)
