"""The direct client of `openai/...` models (`ragmatrix.models.openai_chat`) against the real
local server: it is chosen where it asks what litellm would ask, it asks exactly that, it reads
the same answer, and rows, keys and cached responses do not depend on which client asked.

Retries, timeouts, the breaker, usage and redaction run through both clients in
`tests/test_client.py`.
"""

from __future__ import annotations

import json

import pytest
from project import models_yaml, server_spec, write

from ragmatrix.foundations.cache import SqliteCache
from ragmatrix.models import aio
from ragmatrix.models.chat import LLM
from ragmatrix.models.client import ModelError
from ragmatrix.models.http import StatusError
from ragmatrix.models.openai_chat import OpenAIChat
from ragmatrix.models.providers.litellm_chat import LitellmChat, chat_client
from ragmatrix.models.registry import Registry
from ragmatrix.models.spec import ModelSpec
from ragmatrix.models.usage import Usage, current_usage
from ragmatrix.testing.openai_server import Reply

QUESTION = [{"role": "user", "content": "Is the sky blue?"}]

pytestmark = pytest.mark.usefixtures("fresh_event_loop")


def spec_of(**fields) -> ModelSpec:
    return ModelSpec(**{"id": "m", "kind": "llm", **fields})


@pytest.mark.parametrize(
    ("fields", "client"),
    [
        ({"litellm": "openai/gpt-4o-mini"}, OpenAIChat),  # OpenAI itself
        ({"litellm": "openai/qwen", "api_base": "http://127.0.0.1:9/v1"}, OpenAIChat),
        ({"litellm": "openai/qwen", "params": {"temperature": 0, "max_tokens": 9, "seed": 1}}, OpenAIChat),
        ({"litellm": "openai/qwen", "client": "litellm"}, LitellmChat),  # asked for
        ({"litellm": "openai/qwen", "params": {"drop_params": True}}, LitellmChat),  # a litellm setting
        ({"litellm": "anthropic/claude-3-5-haiku-20241022"}, LitellmChat),
        ({"litellm": "ollama/llama3"}, LitellmChat),
    ],
)
def test_openai_models_are_asked_directly_and_every_other_through_litellm(fields, client):
    assert type(chat_client(spec_of(**fields))) is client


def test_the_client_setting_is_no_part_of_the_key():
    auto = spec_of(litellm="openai/qwen", params={"temperature": 0})
    forced = spec_of(litellm="openai/qwen", params={"temperature": 0}, client="litellm")
    assert auto.output_fingerprint() == forced.output_fingerprint()


@pytest.mark.parametrize(
    ("model", "params"),
    [
        ("scripted", {"temperature": 0, "max_tokens": 5, "seed": 3, "stop": ["\n"], "top_p": 0.5}),
        ("o3-mini", {"max_tokens": 5}),  # a reasoning model: max_completion_tokens instead
        ("gpt-5-mini", {"max_tokens": 5}),
    ],
)
def test_the_direct_client_sends_what_litellm_sends(server, model, params):
    sent = []
    for client in (LitellmChat, OpenAIChat):
        spec = server_spec(server, "llm", model, params=params)
        server.reset()
        assert aio.run(client(spec).complete(QUESTION, 5.0))[0] == "yes"
        (request,) = server.requests
        sent.append((request["path"], request["body"], request["headers"]["authorization"]))
    assert sent[0] == sent[1]


def test_usage_is_what_the_server_reports_and_an_unpriced_cost_stays_unknown(server):
    server.answer = "yes it is"
    usage = Usage()
    token = current_usage.set(usage)
    try:
        spec = server_spec(server, "llm", "scripted")
        answer = LLM(spec, OpenAIChat(spec), None).chat(QUESTION)
    finally:
        current_usage.reset(token)
    assert answer == "yes it is"
    # The test server counts words: 4 in the question, 3 in the answer.
    assert (usage.prompt_tokens, usage.completion_tokens) == (4, 3)
    assert usage.cost_usd is None and "cost_usd" not in usage.to_json()


def test_a_priced_model_costs_its_tokens_at_its_price(server):
    server.answer = "yes it is"
    usage = Usage()
    token = current_usage.set(usage)
    try:
        spec = server_spec(server, "llm", "scripted", price={"input_per_million": 1.0, "output_per_million": 2.0})
        LLM(spec, OpenAIChat(spec), None).chat(QUESTION)
    finally:
        current_usage.reset(token)
    assert usage.cost_usd == (4 * 1.0 + 3 * 2.0) / 1_000_000


def test_a_response_cached_through_litellm_is_served_to_the_direct_client(server, tmp_path):
    spec = server_spec(server, "llm", "scripted")
    litellm_model = LLM(spec, LitellmChat(spec), SqliteCache("responses", tmp_path))
    server.answer = "first"
    assert litellm_model.chat(QUESTION) == "first"
    server.answer = "second"
    direct_model = LLM(spec, OpenAIChat(spec), SqliteCache("responses", tmp_path))
    assert direct_model.chat(QUESTION) == "first"
    assert server.count() == 1


def test_a_key_echoed_in_an_error_is_redacted_whatever_its_variable(server, monkeypatch):
    secret = "opaque-local-value-5150"  # no key shape: only its variable makes it secret
    monkeypatch.setenv("LOCAL_LLM_PASS", secret)
    server.on("", Reply.echo_key(401))
    model = Registry(use_cache=False).build(server_spec(server, "llm", "guarded", api_key_env="LOCAL_LLM_PASS"))
    with pytest.raises(ModelError) as raised:
        aio.run(model.achat(QUESTION))  # type: ignore[attr-defined]
    assert server.requests[-1]["headers"]["authorization"] == f"Bearer {secret}"
    assert secret not in str(raised.value)
    assert str(raised.value).startswith("HTTP 401 AuthenticationError: Incorrect API key provided: ***")


def test_a_key_changed_while_the_model_is_in_use_goes_with_the_next_request(server, monkeypatch):
    """The headers are made once, but the key is read for every request."""
    monkeypatch.setenv("LOCAL_LLM_PASS", "first-key-1234")
    spec = server_spec(server, "llm", "keyed", api_key_env="LOCAL_LLM_PASS")
    model = LLM(spec, OpenAIChat(spec), None)
    model.chat([{"role": "user", "content": "one"}])
    monkeypatch.setenv("LOCAL_LLM_PASS", "second-key-5678")
    monkeypatch.setenv("OPENAI_ORGANIZATION", "org-lab")
    model.chat([{"role": "user", "content": "two"}])
    sent = [request["headers"] for request in server.requests[-2:]]
    assert sent[0]["authorization"] == "Bearer first-key-1234" and "openai-organization" not in sent[0]
    assert sent[1]["authorization"] == "Bearer second-key-5678" and sent[1]["openai-organization"] == "org-lab"


def test_a_connection_refused_is_retried_and_counts_towards_the_breaker():
    spec = spec_of(litellm="openai/m", api_base="http://127.0.0.1:9/v1", retries=1, breaker_after=2, timeout=5)
    model = LLM(spec, OpenAIChat(spec), None)
    with pytest.raises(ModelError, match=r"APIConnectionError.*after 2 attempts|^model down after 2"):
        model.chat(QUESTION)
    assert model.breaker.opened == 1  # both refusals counted: the breaker opened (probes decide the rest)


# -- a whole run ------------------------------------------------------------------------------

SESSION_MODULES = """
import json, sys

def pytest_sessionfinish(session):
    loaded = sorted({name.split(".")[0] for name in sys.modules} & {"litellm", "openai", "httpx"})
    with open("loaded.json", "w") as handle:
        json.dump(loaded, handle)
"""


def rows(bench) -> list[dict]:
    path = bench.path / "benchmark/results/rag_interpretation.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_of_an_openai_model_never_imports_litellm(bench, server):
    write(bench.path / "conftest.py", SESSION_MODULES)
    result = bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "-k", "scripted")
    result.assert_outcomes(passed=5)
    assert json.loads((bench.path / "loaded.json").read_text()) == []
    assert server.count() == 5


def test_rows_and_cached_responses_are_the_same_whichever_client_asked(bench, server):
    models = bench.path / "benchmark" / "models.yaml"
    forced = models_yaml(server.base_url).replace("    concurrency: 4\n", "    concurrency: 4\n    client: litellm\n")
    write(models, forced)
    bench.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "scripted").assert_outcomes(passed=5)
    through_litellm = {row["item"]: row["key"] for row in rows(bench)}
    asked = server.count()

    write(models, models_yaml(server.base_url))  # the same model, asked directly
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "scripted", "-rs")
    assert result.parseoutcomes().get("cached") == 5  # the stored rows are this model's rows
    (bench.path / "benchmark/results/rag_interpretation.jsonl").unlink()
    bench.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "scripted").assert_outcomes(passed=5)
    assert {row["item"]: row["key"] for row in rows(bench)} == through_litellm
    assert server.count() == asked  # every answer came from the responses litellm's run cached


def test_a_direct_models_first_requests_go_together(server):
    """The direct client's imports are done when it is built, so its first request need not
    go alone, as a cold client's must (see LLM._ask)."""
    server.gather(4)  # no answer before four requests are in: a first request alone would wait in vain
    spec = server_spec(server, "llm", "scripted", concurrency=4, timeout=10)
    answers = LLM(spec, OpenAIChat(spec), None).chat_many([[{"role": "user", "content": f"q{i}"}] for i in range(4)])
    assert answers == ["yes"] * 4
    assert server.max_concurrency == 4


def test_a_proxy_the_environment_names_carries_the_requests_and_no_proxy_is_obeyed(server, monkeypatch):
    """Looked up once per model (as aiohttp's trust_env would on every request): the test
    server stands in for the proxy of a host that does not exist, and receives the request in
    a proxy's form (the whole address), which it has no route for."""
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.base_url.removesuffix("/v1"))
    spec = spec_of(litellm="openai/scripted", api_base="http://model.invalid/v1")
    with pytest.raises(StatusError, match="no route for POST http://model.invalid/v1/chat/completions"):
        aio.run(OpenAIChat(spec).complete(QUESTION, 5.0))
    (request,) = server.requests
    assert request["path"] == "http://model.invalid/v1/chat/completions"  # asked through the proxy
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    server.reset()
    direct = server_spec(server, "llm", "scripted")  # the server itself: not through the proxy
    assert aio.run(OpenAIChat(direct).complete(QUESTION, 5.0))[0] == "yes"
    assert [r["path"] for r in server.requests] == ["/v1/chat/completions"]
