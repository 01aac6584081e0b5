"""LLM judges of zELO battles, through real litellm against the local OpenAI-compatible server:
concurrency, parsing of garbage, refusals and out-of-range scores with one real retry, model
errors, the ensemble, and the whole family end to end under pytest."""

from __future__ import annotations

import json

import pytest
from project import assert_outcomes, server_spec, write

from ragmatrix.foundations.cache import SqliteCache
from ragmatrix.models.chat import LLM
from ragmatrix.models.client import ModelError
from ragmatrix.models.providers.ensemble import Ensemble
from ragmatrix.models.providers.litellm_chat import LitellmChat
from ragmatrix.models.spec import ModelSpec
from ragmatrix.testing.openai_server import OpenAIServer, Reply
from ragmatrix.zelo import battles as zelo

pytestmark = pytest.mark.usefixtures("fresh_event_loop")

DOCUMENTS = {
    "d1": "Metformin suppresses glucose production in the liver.",
    "d2": "Metformin tablets are taken with meals.",
    "d3": "Metformin raises insulin sensitivity in muscle.",
    "d4": "The French lilac grows in southern Europe.",
    "d5": "Metformin is the first-line drug for type 2 diabetes.",
    "d6": "Sulfonylureas make the pancreas release insulin.",
}
LABELS = {"d1": 3, "d2": 1, "d3": 2, "d4": 0, "d5": 1, "d6": 0}
BY_TEXT = {text: doc for doc, text in DOCUMENTS.items()}


def case(**settings) -> zelo.ZeloCase:
    data = {"query": "How does metformin lower glucose?", "instruction": "Judge.", "documents": DOCUMENTS}
    return zelo.ZeloCase.model_validate({"input": {**data, **settings}, "expected": {"relevance": LABELS}})


def shown(messages) -> tuple[str, str]:
    """The ids of documents A and B in a judge prompt."""
    user = next(m["content"] for m in messages if m["role"] == "user")
    a, b = user.split("Document A:\n", 1)[1].split("\n\nDocument B:\n", 1)
    return BY_TEXT[a], BY_TEXT[b]


def knows_the_labels(messages) -> str:
    a, b = shown(messages)
    score = (LABELS[b] - LABELS[a]) / 3
    return json.dumps({"reasoning": f"{b if score > 0 else a} answers more of the query", "score": score})


def chat_model(server, tmp_path=None, model="judge", **settings) -> LLM:
    spec = server_spec(server, "llm", model, **settings).model_copy(update={"id": model})
    cache = SqliteCache("responses", tmp_path) if tmp_path is not None else None
    return LLM(spec, LitellmChat(spec), cache)


def test_an_llm_judge_runs_the_pairs_concurrently_and_ranks_by_its_answers(server):
    server.answer = knows_the_labels
    model = chat_model(server, concurrency=8, timeout=30)
    server.on("warm up", "ok")
    model.chat([{"role": "user", "content": "warm up"}])  # a cold client's first request goes alone
    server.reset()
    server.gather(4)  # no answer before four requests are in
    battles = zelo.battle(model, case(both_orders=True))
    requests = server.count()
    assert requests == battles.judge_calls == len({m.shown for m in battles.matchups})
    assert 4 <= server.max_concurrency <= 8  # the pairs at once, up to the model's limit
    outcome = zelo.score(case(), battles)
    assert outcome.score == 1.0 and outcome.details["metrics"]["pairwise_accuracy"] == 1.0
    assert outcome.details["position_consistency"] == 1.0 and outcome.details["invalid_answers"] == 0


def test_a_malformed_answer_is_asked_again_once_in_a_real_second_request(server, tmp_path):
    def garbage_first(messages):
        if "d2" in shown(messages) and len(messages) == 2:
            return "<html>upstream error</html>"
        return knows_the_labels(messages)

    server.answer = garbage_first
    model = chat_model(server, tmp_path)  # with the response cache: the retry must still be asked
    battles = zelo.battle(model, case())
    retried = [j for j in battles.judgements if j.calls == 2]
    assert retried and all(j.valid for j in battles.judgements)
    retries = [r["body"]["messages"] for r in server.requests if len(r["body"]["messages"]) == 4]
    assert len(retries) == len({m.shown for m in battles.matchups if "d2" in _ids(m)})
    assert retries[0][2] == {"role": "assistant", "content": "<html>upstream error</html>"}
    assert "could not be read (no score found)" in retries[0][3]["content"]
    assert zelo.score(case(), battles).score == 1.0


def _ids(matchup: zelo.Matchup) -> tuple[str, str]:
    ids = sorted(DOCUMENTS)
    return ids[matchup.a], ids[matchup.b]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("Sure! Document B seems nicer.", "no score found"),
        ("I'm sorry, but I can't help with that request.", "refusal: no score given"),
        ('{"reasoning": "B is far better", "score": 4}', "score 4 is outside [-1, 1]"),
        # An empty answer is no answer: a server fault retried by the client layer (test_client.py).
    ],
)
def test_answers_that_stay_malformed_are_invalid_never_votes(server, bad, reason):
    server.answer = lambda messages: bad if "d4" in shown(messages) else knows_the_labels(messages)
    battles = zelo.battle(chat_model(server), case())
    outcome = zelo.score(case(), battles)
    with_d4 = [i for i, m in enumerate(battles.matchups) if "d4" in _ids(m)]
    assert with_d4 and all(battles.judgements[i].score is None for i in with_d4)
    assert all(battles.judgements[i].calls == 2 for i in with_d4)
    assert outcome.details["invalid_answers"] == len(with_d4)
    assert outcome.details["invalid_reasons"] == {reason: len(with_d4)}
    assert all(outcome.details["battles"][i][2] is None for i in with_d4)
    assert outcome.valid  # the other pairs still rank the documents
    unique = len({m.shown for m in battles.matchups})
    assert server.count() == unique + len({battles.matchups[i].shown for i in with_d4})


# The error cancels the other judgements; a request cancelled before it started leaves a
# coroutine that was never awaited, which is harmless.
@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
def test_a_model_error_fails_the_case_instead_of_voting(server):
    server.answer = knows_the_labels
    server.on(DOCUMENTS["d3"], Reply.error(500))
    with pytest.raises(ModelError, match="HTTP 500"):
        zelo.battle(chat_model(server, retries=1), case())


def test_an_ensemble_votes_and_reports_its_agreement():
    def flips_d1(messages):
        a, b = shown(messages)
        answer = json.loads(knows_the_labels(messages))
        if "d1" in (a, b):
            answer["score"] = -answer["score"]
        return json.dumps(answer)

    with OpenAIServer(knows_the_labels) as one, OpenAIServer(knows_the_labels) as two, OpenAIServer(flips_d1) as three:
        members = [chat_model(srv, model=f"m{i}") for i, srv in enumerate((one, two, three))]
        spec = ModelSpec(id="trio", kind="ensemble", ensemble=["m0", "m1", "m2"], combine="vote")
        battles = zelo.battle(Ensemble(spec, members), case())
        outcome = zelo.score(case(), battles)
        assert one.count() == two.count() == three.count() == len({m.shown for m in battles.matchups})
    assert battles.judge_calls == 3 * one.count()
    agreement = outcome.details["agreement"]
    assert agreement["members"] == ["m0", "m1", "m2"]
    assert 0.0 < agreement["unanimous"] < 1.0  # the pairs with d1 split 2 to 1
    assert agreement["fleiss_kappa"] is not None and agreement["fleiss_kappa"] < 1.0
    assert outcome.details["metrics"]["pairwise_accuracy"] > 0.8  # the majority is right


SMALL_ZELO_CASES = f"""
zelo_battles:
  - case: metformin
    input:
      query: How does metformin lower glucose?
      instruction:
        json: "Judge. Reply with JSON: reasoning and score."
        tagged: "Judge. End with SCORE: <number>."
      both_orders: true
      documents: {json.dumps(DOCUMENTS)}
    expected:
      relevance: {json.dumps(LABELS)}
"""


def test_the_family_end_to_end_with_an_llm_an_ensemble_and_an_embedder(pytester, server):
    from project import REPO

    server.answer = knows_the_labels
    write(pytester.path / "benchmark/test_zelo_battles.py", (REPO / "benchmark/test_zelo_battles.py").read_text())
    write(pytester.path / "benchmark/data/zelo_battles_data.yaml", SMALL_ZELO_CASES)
    llm = "    kind: llm\n    litellm: openai/{name}\n    api_base: " + server.base_url + "\n    timeout: 5\n"
    write(
        pytester.path / "benchmark/models.yaml",
        "models:\n"
        + "  - id: scripted\n"
        + llm.format(name="scripted")
        + "  - id: scripted2\n"
        + llm.format(name="scripted2")
        + "  - id: pair\n    kind: ensemble\n    ensemble: [scripted, scripted2]\n"
        + "  - id: bow\n    kind: embedder\n    builtin: bow\n",
    )
    result = pytester.runpytest("benchmark", "-p", "no:cacheprovider")
    # 3 prompt readers x 2 prompts; bow reads no prompt: 1; no reranker: its test is skipped
    result.assert_outcomes(passed=7, skipped=1)
    for line in ("*ragmatrix leaderboard*", "*scripted *1.000*", "*pair *1.000*"):
        result.stdout.fnmatch_lines([line])
    stored = (pytester.path / "benchmark/results/zelo_battles.jsonl").read_text()
    rows = [json.loads(line) for line in stored.splitlines()]
    assert {(r["model"], r["item"]) for r in rows} == {
        (m, f"metformin:{v}") for m in ("scripted", "scripted2", "pair") for v in ("json", "tagged")
    } | {("bow", "metformin")}
    entry = next(r for r in rows if r["model"] == "pair")["iterations"][0]
    assert entry["metrics"]["ndcg@5"] == 1.0 and entry["agreement"]["unanimous"] == 1.0
    assert entry["position_consistency"] == 1.0 and entry["invalid_answers"] == 0
    assert entry["judge_calls"] > 0 and set(entry["zelo"]) == set(DOCUMENTS)
    calls = server.count()
    assert_outcomes(pytester.runpytest("benchmark", "-p", "no:cacheprovider"), cached=7, skipped=1)
    assert server.count() == calls
