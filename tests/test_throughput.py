"""Model calls across the whole run: requests sent ahead at each model's concurrency, the
breaker that ends a dead model's items at once, and empty or oversized answers.

Each test is a small benchmark project (see `bench` in conftest.py) whose LLM is the local
OpenAI-compatible server, reached through litellm.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import Counter

import pytest
from project import REPO, assert_outcomes, models_yaml, write

from ragmatrix.testing.openai_server import Reply

LLM_ITEMS = 5  # see test_plugin.py


def rows(pytester: pytest.Pytester) -> list[dict]:
    path = pytester.path / "benchmark/results/rag_interpretation.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:cacheprovider", *args)


def settings(pytester: pytest.Pytester, server, **values: object) -> None:
    """The scripted model of models.yaml with other settings."""
    text = models_yaml(server.base_url)
    for name, value in values.items():
        if f"    {name}:" in text:
            text = "\n".join(
                f"    {name}: {value}" if line.startswith(f"    {name}:") else line for line in text.splitlines()
            )
        else:
            text = text.replace("    concurrency:", f"    {name}: {value}\n    concurrency:")
    write(pytester.path / "benchmark/models.yaml", text)


def cached_responses(pytester: pytest.Pytester) -> list[dict]:
    path = pytester.path / ".benchmark_cache/responses.sqlite"
    if not path.exists():
        return []
    with sqlite3.connect(path) as database:
        return [json.loads(value) for (value,) in database.execute("SELECT value FROM entries")]


# --- concurrency ------------------------------------------------------------------------------


def test_the_items_of_a_model_are_asked_at_its_full_concurrency(bench, server):
    # no answer before four requests are in: one after another, the first would wait in vain
    server.gather(4)
    run(bench, "-k", "scripted").assert_outcomes(passed=LLM_ITEMS)
    assert server.max_concurrency == 4  # the model's limit, reached across items, never passed
    assert server.count() == LLM_ITEMS


def test_the_first_request_goes_out_before_the_rest_of_the_window_is_built(bench, server, monkeypatch):
    # With nothing in flight the server would wait while every item of the window was planned:
    # the first item's request is sent at once, then batches as large as what is in flight.
    from ragmatrix.plugin import scheduling

    batches: list[int] = []
    send = scheduling.Scheduler._send

    def counted(self: scheduling.Scheduler, requests: list) -> None:
        batches.append(len(requests))
        send(self, requests)

    monkeypatch.setattr(scheduling.Scheduler, "_send", counted)
    run(bench, "-k", "scripted").assert_outcomes(passed=LLM_ITEMS)
    assert batches == [1, 1, 2, 1]
    assert server.count() == LLM_ITEMS


# A plugin that writes down, once every item is collected, how many requests were sent by then.
COLLECTION_END = """
import pytest

from ragmatrix.plugin import scheduling


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    ahead = session.config.stash.get(scheduling.SCHEDULER_KEY, None)
    with open("sent_when_collected.txt", "w") as out:
        out.write(str(ahead.requests_sent if ahead is not None else 0))
"""

# A plugin of the project's own that drops one case's items once they are all collected.
DROPS_EARTH = """
def pytest_collection_modifyitems(config, items):
    dropped = [item for item in items if "pathway_no" in item.nodeid]
    config.hook.pytest_deselected(items=dropped)
    items[:] = [item for item in items if item not in dropped]
"""


def count_written(pytester: pytest.Pytester, plugin: str, source: str, written: str, *args: str) -> int:
    """Run with a plugin of the project's (`source`), and read the count it wrote."""
    write(pytester.path / f"{plugin}.py", source)
    pytester.syspathinsert()
    run(pytester, "-p", plugin, *args)
    return int((pytester.path / written).read_text())


def sent_when_collected(pytester: pytest.Pytester, *args: str) -> int:
    return count_written(pytester, "collection_end", COLLECTION_END, "sent_when_collected.txt", *args)


def test_the_first_requests_go_out_while_the_items_are_still_collected(bench, server):
    # The server starts on the first item collected, not once pytest has built them all.
    assert sent_when_collected(bench, "-k", "scripted") == LLM_ITEMS
    assert server.count() == LLM_ITEMS  # each asked once: none again when its item ran
    # -k is pytest's own: only the selected items were asked, while they were collected
    assert sent_when_collected(bench, "-k", "scripted and pathway_no", "--run-all", "--no-response-cache") == 2
    assert server.count() == LLM_ITEMS + 2


# A plugin that writes down how many requests were sent when pytest had built the items of the
# RAG test function (its `Function`s, after the matrix was parametrized), and what the
# scheduler holds ahead once collection has ended.
WHEN_BUILT = """
import json

import pytest

from ragmatrix.plugin import scheduling


def sent(config):
    ahead = config.stash.get(scheduling.SCHEDULER_KEY, None)
    return ahead.requests_sent if ahead is not None else 0


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector, name, obj):
    built = yield
    if name == "test_rag_interpretation":
        with open("sent_when_built.txt", "w") as out:
            out.write(str(sent(collector.config)))
    return built


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    ahead = session.config.stash.get(scheduling.SCHEDULER_KEY, None)
    held = {nodeid: len(requests) for nodeid, requests in (ahead.ahead if ahead else {}).items()}
    state = {"held": held, "outstanding": ahead.outstanding if ahead else 0, "items": [i.nodeid for i in session.items]}
    with open("held_when_collected.json", "w") as out:
        json.dump(state, out)
"""


def sent_when_built(pytester: pytest.Pytester, *args: str) -> int:
    return count_written(pytester, "when_built", WHEN_BUILT, "sent_when_built.txt", *args)


def test_the_first_requests_go_out_before_pytest_builds_the_items(bench, server):
    # Where only this plugin parametrizes the test function, its matrix knows the items pytest
    # will build: their requests go as it is made, before pytest builds them.
    assert sent_when_built(bench, "-k", "scripted") >= 1
    assert server.count() == LLM_ITEMS  # each asked once: none again as it was collected or ran
    # -k is evaluated on the names the items will have: only the selected ones are asked
    assert sent_when_built(bench, "-k", "scripted and pathway_no", "--run-all", "--no-response-cache") == 2
    assert server.count() == LLM_ITEMS + 2
    # ... where an expression without `not` decides on those names as on the items' own
    assert sent_when_built(bench, "-k", "scripted and not pathway_no", "--run-all", "--no-response-cache") == 0
    assert server.count() == LLM_ITEMS + 2 + 3  # sent as they were collected instead


def test_an_item_built_under_another_id_than_the_one_it_was_sent_by_is_not_held_ahead(bench, server):
    # Model `scripted` with case `a-b`, and model `scripted-a` with case `b`: both items are
    # `scripted-a-b`, and pytest builds them as `scripted-a-b0` and `scripted-a-b1`.
    cases = "rag_interpretation:\n" + "".join(
        f"  - case: {name}\n    input:\n      prompt: What is the capital of Australia ({name})?\n"
        "      instruction: Judge the fragment for relevance. Answer yes or no.\n"
        "      fragments: [Canberra is the capital city of Australia.]\n    expected: {answer: 'yes'}\n"
        for name in ("a-b", "b")
    )
    write(bench.path / "benchmark/data/rag_interpretation_data.yaml", cases)
    second = f"  - id: scripted-a\n    kind: llm\n    litellm: openai/other\n    api_base: {server.base_url}\n"
    write(bench.path / "benchmark/models.yaml", models_yaml(server.base_url, second))
    assert sent_when_built(bench, "-k", "scripted") >= 1
    held = json.loads((bench.path / "held_when_collected.json").read_text())
    assert all("scripted-a-b]" not in nodeid for nodeid in held["items"])  # pytest made them unique
    assert set(held["held"]) <= set(held["items"])  # what was sent by the id pytest dropped is not held
    assert held["outstanding"] == sum(held["held"].values())
    # each of the four items was asked once: none again when it was built under its own id
    assert len([r for r in server.requests if r["path"].endswith("chat/completions")]) == 4


# A plugin that writes down, as each item is about to run (once it has topped up what is sent
# ahead), how many items are held ahead (sent for, not run yet, itself included) and how many of
# those have no result key worked out yet.
KEYS_AHEAD = """
import json

from ragmatrix.plugin import runner, scheduling
from ragmatrix.plugin.session import STATE_KEY

ITEMS, SEEN = {}, []
before = scheduling.Scheduler.before


def recorded(self, item, plan):
    before(self, item, plan)
    state = item.config.stash[STATE_KEY]
    held = [runner.plan_for(ITEMS[nodeid], state) for nodeid in self.ahead]
    SEEN.append([len(held), sum(1 for plan in held if "key" not in vars(plan))])


def pytest_collection_finish(session):
    ITEMS.update((item.nodeid, item) for item in session.items)
    scheduling.Scheduler.before = recorded


def pytest_unconfigure(config):
    scheduling.Scheduler.before = before
    with open("keys_ahead.json", "w") as out:
        json.dump(SEEN, out)
"""


def test_the_result_keys_of_items_sent_ahead_are_worked_out_with_their_requests(bench, server):
    # Worked out between an item's other work, a key cost about three times its CPU: the keys
    # of the items held ahead are worked out in a batch, once their requests have gone.
    write(bench.path / "keys_ahead.py", KEYS_AHEAD)
    bench.syspathinsert()
    run(bench, "-p", "keys_ahead", "-k", "scripted", "--send-ahead", "2").assert_outcomes(passed=LLM_ITEMS)
    seen = json.loads((bench.path / "keys_ahead.json").read_text())
    assert len(seen) == LLM_ITEMS
    assert all(held >= 1 for held, _ in seen)  # its own requests at least: the check means something
    assert max(held for held, _ in seen) == 2  # and others' (--send-ahead 2)
    assert [unkeyed for _, unkeyed in seen] == [0] * LLM_ITEMS


@pytest.mark.parametrize(
    ("dropping", "asked"),
    [(("-p", "drops_earth"), LLM_ITEMS - 2), (("-m", "not slow"), LLM_ITEMS)],
    ids=["a plugin of the project", "a mark expression"],
)
def test_where_another_plugin_or_option_may_drop_items_nothing_is_sent_before_collection_ends(
    bench, server, dropping, asked
):
    write(bench.path / "drops_earth.py", DROPS_EARTH)
    assert sent_when_collected(bench, "-k", "scripted", *dropping) == 0
    assert server.count() == asked  # the items dropped were never asked
    if asked < LLM_ITEMS:
        assert all("earth" not in json.dumps(r["body"]["messages"]) for r in server.requests if r["body"])


def test_an_item_dropped_after_its_requests_went_no_longer_counts_as_held_ahead():
    from types import SimpleNamespace

    from ragmatrix.plugin.scheduling import Scheduler

    ahead = Scheduler(state=None, config=None)  # type: ignore[arg-type]
    sent, unsent, kept = (object(), 0, 0), (object(), 1, 0), (object(), 2, 0)
    ahead.scheduled_items = {"dropped", "kept"}
    ahead.ahead = {"dropped": [sent, unsent], "kept": [kept]}
    ahead.outstanding = 2  # `sent` and `kept` went; `unsent` waits for the next batch
    ahead._collected = [unsent]
    ahead.forget([SimpleNamespace(nodeid="dropped"), SimpleNamespace(nodeid="never scheduled")])  # type: ignore[list-item]
    assert ahead.scheduled_items == {"kept"} and list(ahead.ahead) == ["kept"]
    assert ahead.outstanding == 1 and ahead._collected == []


def test_iterations_are_asked_concurrently_too(bench, server):
    server.gather(4)
    run(bench, "--iterations", "3", "-k", "scripted and pathway_yes").assert_outcomes(passed=2)
    assert server.count() == 6
    assert server.max_concurrency == 4
    assert all(r["n_iterations"] == 3 for r in rows(bench))


def test_only_selected_and_uncached_items_are_asked(bench, server):
    run(bench, "-k", "scripted and pathway_no").assert_outcomes(passed=2)
    assert server.count() == 2
    assert all("earth" in json.dumps(r["body"]["messages"]) for r in server.requests if r["body"])
    assert_outcomes(run(bench, "-k", "scripted"), passed=3, cached=2)
    assert server.count() == 5  # the cached items were not asked again


def test_without_the_response_cache_answers_are_kept_for_the_run_only(bench, server):
    server.gather(4)
    run(bench, "-k", "scripted", "--no-response-cache").assert_outcomes(passed=LLM_ITEMS)
    assert server.count() == LLM_ITEMS and server.max_concurrency == 4
    assert not (bench.path / ".benchmark_cache/responses.sqlite").exists()
    run(bench, "-k", "scripted", "--no-response-cache", "--run-all").assert_outcomes(passed=LLM_ITEMS)
    assert server.count() == 2 * LLM_ITEMS


def test_usage_is_counted_once_per_item_as_before(bench, server):
    run(bench, "-k", "scripted").assert_outcomes(passed=LLM_ITEMS)
    assert all(r["usage"]["calls"] == 1 and r["usage"]["cached_calls"] == 0 for r in rows(bench))
    result = run(bench, "-k", "scripted", "--run-all")
    result.stdout.fnmatch_lines(["this run: 5 LLM calls (5 from the response cache)*"])


# A family whose test asks other messages than its first round declares: every answer sent
# ahead is left unused, and each case is asked twice.
DRIFT_FAMILY = """
from pydantic import BaseModel

from ragmatrix import Case, ChatModel, Family, Headline, Messages, Model, Outcome


class DriftInput(BaseModel):
    prompt: str


class DriftExpected(BaseModel):
    answer: str


class DriftCase(BaseModel):
    input: DriftInput
    expected: DriftExpected


def first_requests(case: Case[DriftInput, DriftExpected], model: Model) -> list[Messages]:
    return [[{"role": "system", "content": "Answer yes or no."}, {"role": "user", "content": case.input.prompt}]]


def ask_differently(llm: ChatModel, case: Case[DriftInput, DriftExpected]) -> str:
    return llm.chat([{"role": "user", "content": case.input.prompt}])  # no system message


FAMILY = Family(
    name="drift",
    scoring_version=1,
    case_schema=DriftCase,
    headline=Headline("accuracy", "the share of answers that match"),
    first_requests=first_requests,
)


def pytest_ragmatrix_families(config):
    return [FAMILY]
"""

DRIFT_TEST = """
from ragmatrix import Outcome

import drift_family


def test_drift(llm, case, record):
    answer = drift_family.ask_differently(llm, case)
    record(Outcome(float(answer.strip().lower() == case.expected.answer)))
"""

DRIFT_CASES = """
drift:
  - case: sky
    input: {prompt: "Is the sky blue?"}
    expected: {answer: "yes"}
  - case: grass
    input: {prompt: "Is grass red?"}
    expected: {answer: "no"}
"""


def test_answers_sent_ahead_that_the_test_never_takes_are_counted_in_the_usage_line(bench, server):
    write(bench.path / "drift_family.py", DRIFT_FAMILY)
    write(bench.path / "benchmark" / "test_drift.py", DRIFT_TEST)
    write(bench.path / "benchmark" / "data" / "drift_data.yaml", DRIFT_CASES)
    bench.syspathinsert()
    result = run(bench, "-p", "drift_family", "-k", "drift and scripted", "--iterations", "2")
    result.assert_outcomes(passed=2)
    # 2 cases x 2 iterations: each declared request sent ahead, then the test's own asked too
    assert server.count() == 8
    result.stdout.fnmatch_lines(
        [
            "this run: 4 LLM calls (0 from the response cache), * tokens, 4 answers sent ahead were never used; *",
            "warning: 4 answer(s) sent ahead were never used: *first_requests*",
        ]
    )


def test_the_shipped_llm_families_use_every_answer_sent_ahead(bench, server):
    from test_zelo_llm import SMALL_ZELO_CASES, knows_the_labels

    server.answer = lambda messages: knows_the_labels(messages) if "Document A:" in str(messages) else "yes"
    write(bench.path / "benchmark/test_zelo_battles.py", (REPO / "benchmark/test_zelo_battles.py").read_text())
    write(bench.path / "benchmark/data/zelo_battles_data.yaml", SMALL_ZELO_CASES)
    second = f"  - id: scripted2\n    kind: llm\n    litellm: openai/scripted2\n    api_base: {server.base_url}\n"
    extra = second + "  - id: pair\n    kind: ensemble\n    ensemble: [scripted, scripted2]\n"
    write(bench.path / "benchmark/models.yaml", models_yaml(server.base_url, extra))
    result = run(
        bench, "-k", "(rag and scripted and not scripted2) or (zelo and (scripted or pair))", "--iterations", "2"
    )
    # rag: the scripted LLM's items; zelo: two LLMs and their ensemble, two prompts each
    assert result.parseoutcomes()["passed"] == LLM_ITEMS + 6
    text = result.stdout.str()
    assert "this run: " in text and "never used" not in text
    asked = [json.dumps(r["body"], sort_keys=True) for r in server.requests if r["path"].endswith("chat/completions")]
    # each request asked once per iteration: never again for an item, nor for the ensemble's members
    assert set(Counter(asked).values()) == {2}


@pytest.mark.slow
def test_under_xdist_each_worker_asks_for_its_own_items(bench, server):
    pytest.importorskip("xdist")
    server.gather(2)  # the worker that has the model's items sends them together
    result = bench.runpytest_subprocess("benchmark", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=LLM_ITEMS + 2)
    # Each item asked once: by no two workers, and never again after a timeout. (On a busy
    # machine a worker's first request used to time out while the client was still importing
    # its modules, and its retry asked the server a second time.)
    asked = [json.dumps(r["body"], sort_keys=True) for r in server.requests if r["path"].endswith("chat/completions")]
    assert len(asked) == len(set(asked)) == LLM_ITEMS
    assert server.max_concurrency > 1


def test_an_embedders_texts_are_embedded_in_one_batch_across_items(bench, server):
    extra = f"""
  - id: served-embed
    kind: embedder
    litellm: openai/test-embed
    api_base: {server.base_url}
    batch_size: 64
"""
    write(bench.path / "benchmark/models.yaml", models_yaml(server.base_url, extra))
    result = run(bench, "-k", "served")
    result.assert_outcomes(passed=2)
    # one request for the question and both fragments of the two items, instead of two per item
    assert server.count("embeddings") == 1
    assert len(server.requests[-1]["body"]["input"]) == 3
    stored = [r for r in rows(bench) if r["model"] == "served-embed"]
    assert sum(r["usage"]["texts_embedded"] for r in stored) == 3  # counted once, by the items
    assert sum(r["usage"]["embedding_shared"] for r in stored) == 1  # the shared question, within this run
    assert sum(r["usage"]["embedding_cache_hits"] for r in stored) == 0  # nothing from an earlier run
    assert {r["status"] for r in stored} == {"ok"}
    run(bench, "-k", "served", "--run-all", "--no-response-cache").assert_outcomes(passed=2)
    assert server.count("embeddings") == 2


def test_an_embedder_embeds_ahead_one_window_of_texts_at_a_time(bench, server, monkeypatch):
    from ragmatrix.plugin import scheduling

    extra = f"""
  - id: served-embed
    kind: embedder
    litellm: openai/test-embed
    api_base: {server.base_url}
"""
    write(bench.path / "benchmark/models.yaml", models_yaml(server.base_url, extra))
    monkeypatch.setattr(scheduling, "EMBED_AHEAD", 2)  # each item declares 2 texts: a window each
    run(bench, "-k", "served").assert_outcomes(passed=2)
    # the second window keeps the question the first embedded, and embeds only its fragment
    assert [len(r["body"]["input"]) for r in server.requests if r["path"].endswith("embeddings")] == [2, 1]
    stored = [r for r in rows(bench) if r["model"] == "served-embed"]
    assert sum(r["usage"]["texts_embedded"] for r in stored) == 3
    assert sum(r["usage"]["embedding_shared"] for r in stored) == 1


# --- the breaker ------------------------------------------------------------------------------


def test_a_server_that_never_answers_ends_the_run_in_about_k_timeouts(bench, server):
    settings(bench, server, timeout=1, retries=3, breaker_after=5)
    server.on("", Reply.hang(60))  # the models list answers, chat never does
    result = run(bench, "-k", "scripted")
    result.assert_outcomes(failed=LLM_ITEMS)
    # About K timeouts, not items x attempts (5 x 4 = 20) of them, counted in requests rather than
    # seconds: the breaker opens at the fifth failure, with at most the others of a round of
    # concurrency 4 still in flight, its probe times out too, and it gives up there, as the next
    # probe would come after two timeouts of trying (its patience, by default)
    assert server.count() <= 5 + 3 + 1
    stored = rows(bench)
    assert len(stored) == LLM_ITEMS and all(r["status"] == "error" and r["score"] is None for r in stored)
    assert sum(r["iterations"][0]["error"].startswith("model down after 5 failures") for r in stored) >= 1
    result.stdout.fnmatch_lines(
        [
            "scripted: model down after 5 failures and 1 failed probe over * s: last error timed out after 1 s; "
            "* item(s) recorded as errors*"
        ]
    )
    assert server.count() <= 8 + 1  # two rounds of four at most, one probe, then nothing more
    server.reset()  # the server is back: the next run retries every item
    settings(bench, server, timeout=10)
    run(bench, "-k", "scripted").assert_outcomes(passed=LLM_ITEMS)
    assert all(r["status"] == "ok" for r in rows(bench))


SHIPPED_RAG_ITEMS = 96  # the shipped RAG interpretation cases, for one LLM


@pytest.mark.slow
def test_a_server_down_for_its_first_3_seconds_costs_no_item_of_the_shipped_rag_cases(bench, server):
    shipped = (REPO / "benchmark/data/rag_interpretation_data.yaml").read_text()
    write(bench.path / "benchmark/data/rag_interpretation_data.yaml", shipped)
    settings(bench, server, timeout=5)  # the breaker's patience: two timeouts of failed probes
    server.outage(3, from_first_request=True)  # every request gets a 500 for its first 3 seconds
    result = run(bench, "-k", "scripted")
    stored = [r for r in rows(bench) if r["model"] == "scripted"]
    assert len(stored) == SHIPPED_RAG_ITEMS
    assert sum(r["status"] == "ok" for r in stored) >= 90  # before the probe: 0, every item down
    assert result.parseoutcomes().get("passed", 0) >= 90 and "model down" not in result.stdout.str()
    asked = [r["time"] for r in server.requests if r["path"].endswith("chat/completions")]
    assert sum(t < asked[0] + 3 for t in asked) >= 5  # enough 500s to open the breaker


# --- empty and oversized answers --------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "what"),
    [(Reply.empty_choices(), "no choices"), (Reply.null_content(), "content null"), (Reply.text(""), "empty text")],
)
def test_an_empty_answer_is_an_error_row_never_cached_and_asked_again(bench, server, fault, what):
    settings(bench, server, breaker_after=50)
    server.answer = "no"
    server.on("EGFR", fault)
    result = run(bench, "-k", "scripted")
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines([f"*empty answer ({what})*after 3 attempts*"])
    errors = [r for r in rows(bench) if r["status"] == "error"]
    assert len(errors) == 2 and all(r["score"] is None and r["invalid"] == 0 for r in errors)
    assert server.count() == 3 + 2 * 3  # every attempt of the two items was asked
    assert [c["text"] for c in cached_responses(bench)] == ["no"] * 3  # nothing empty was cached
    server.reset()
    server.answer = "yes"
    assert_outcomes(run(bench, "-k", "scripted"), passed=2, cached=3)
    assert server.count() == 2  # asked again, not replayed
    assert all(r["status"] == "ok" for r in rows(bench))


def test_a_1_mib_answer_is_cut_and_counted_as_a_format_violation(bench, server):
    server.answer = "yes " * (1 << 18)  # 1 MiB
    run(bench, "-k", "scripted and pathway").assert_outcomes(passed=4)
    stored = rows(bench)
    assert len(stored) == 4
    for row in stored:
        (iteration,) = row["iterations"]
        assert row["status"] == "ok" and row["invalid"] == 1 and row["score"] == 0.0
        assert iteration["valid"] is False and "words where one label was asked" in iteration["invalid_reason"]
        assert iteration["answers_cut"] == 1 and row["usage"]["answers_cut"] == 1
        assert len(iteration["answer"]) <= 16 * 1024
    assert (bench.path / "benchmark/results/rag_interpretation.jsonl").stat().st_size < 50_000
    assert all(len(c["text"]) == 16 * 1024 and c["cut"] for c in cached_responses(bench))


def test_items_are_recorded_while_later_answers_are_still_on_their_way(bench, server):
    """The loop reads answers on its own thread: the first item is recorded while the last
    request is still unanswered. The server holds the last answer until a row is stored (at
    most 30 s); had the items waited for every answer sent ahead, no row could come first."""
    results = bench.path / "benchmark/results/rag_interpretation.jsonl"
    released_by_a_row: list[bool] = []

    def answer(messages: list[dict]) -> str:
        if "Australia" not in json.dumps(messages):
            return "yes"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (results.exists() and results.read_text().strip()):
            time.sleep(0.01)
        released_by_a_row.append(results.exists() and bool(results.read_text().strip()))
        return "Canberra"

    server.answer = answer
    run(bench, "-k", "scripted").assert_outcomes(passed=LLM_ITEMS)
    assert released_by_a_row == [True]
    assert len(rows(bench)) == LLM_ITEMS


def test_items_that_wait_for_their_answers_take_the_next_few_together(bench, server, monkeypatch):
    """Against a server slower than the items, each item would wait for its own answer, and the
    items' thread would be woken once per item (its work then ran on cold caches). Having
    waited, an item lets a few more answers settle, while the server has plenty more queued,
    and the items after it find theirs there."""
    from ragmatrix.models import chat

    cases = 96
    write(bench.path / "benchmark/data/rag_interpretation_data.yaml", many_cases(cases))
    settings(bench, server, concurrency=1)  # answers come one at a time
    server.latency = 0.01
    woken: list[int] = []

    class Counted(threading.Condition):
        def wait(self, timeout: float | None = None) -> bool:
            notified = super().wait(timeout)  # not on a timeout, this thread's look for a Ctrl-C
            if notified and threading.current_thread() is threading.main_thread():
                woken.append(1)
            return notified

    built = chat.LLM.__init__

    def counting(self: chat.LLM, *args: object, **kwargs: object) -> None:
        built(self, *args, **kwargs)  # type: ignore[arg-type]
        self._answer_came = Counted()

    monkeypatch.setattr(chat.LLM, "__init__", counting)
    run(bench, "-k", "scripted", "--run-all", "--no-response-cache").assert_outcomes(passed=cases)
    assert server.count() == cases  # each asked once, ahead of its item
    assert len(woken) <= cases // 2, len(woken)  # about one wait in nine items, not one an item


def many_cases(count: int) -> str:
    """`count` relevance cases of the RAG family, each its own question."""
    return "rag_interpretation:\n" + "".join(
        f"  - case: capital_{number}\n    input:\n      prompt: What is the capital of Australia (#{number})?\n"
        "      instruction: Judge the fragment for relevance. Answer yes or no.\n"
        "      fragments: [Canberra is the capital city of Australia.]\n    expected: {answer: 'yes'}\n"
        for number in range(count)
    )


def test_an_explicit_answer_of_more_than_a_few_words_is_a_format_violation():
    from types import SimpleNamespace

    from ragmatrix.families import rag

    case = SimpleNamespace(expected=rag.RagExpected(answer="yes", match="yes_no"))
    assert rag.score(case, "Yes, the fragment is relevant.").valid
    long = rag.score(case, "yes " * 11)
    assert (long.score, long.valid) == (0.0, False)
    assert long.details["invalid_reason"] == "answer of 11 words where one label was asked"
    exact = SimpleNamespace(expected=rag.RagExpected(answer="yes"))  # BioChatter's exact match, the default
    assert rag.score(exact, "yes " * 11).details["invalid_reason"] == "answer of 11 words where one label was asked"


@pytest.mark.usefixtures("fresh_event_loop")
def test_an_embedding_server_that_stops_answering_trips_the_embedders_breaker(server):
    from project import server_spec

    from ragmatrix.models.client import ModelError
    from ragmatrix.models.embedder import EmbeddingModel
    from ragmatrix.models.providers.litellm_embedder import LitellmEmbedding

    server.inject(*[Reply.hang(5)] * 6)
    spec = server_spec(server, "embedder", "test-embed", timeout=0.3, retries=3, breaker_after=2)
    embedder = EmbeddingModel(spec, LitellmEmbedding(spec), None)
    with pytest.raises(ModelError, match=r"^model down after 2 failures and 1 failed probe .*: last error timed out"):
        embedder.embed_documents(["a"])
    with pytest.raises(ModelError, match=r"^model down after 2"):
        embedder.embed_documents(["b"])
    assert server.count("embeddings") == 2 + 1  # two failures, one probe; the second call asked nothing
