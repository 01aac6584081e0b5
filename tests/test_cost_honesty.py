"""Cost figures that do not mislead: dollars with significant digits, texts counted as embedded
once they are encoded (a failed encode and a Ctrl-C included), a zELO row's invalid judgements
counted, the first request's tokens kept on the litellm client, the load average kept with each
record and a busy machine said, and the older records that the committed results hold still
reported, unchanged.

Memory as what a model's work added is checked in test_cost.py (its parts) and test_cost_runs.py
(MiniLM and BM25 in one process)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from project import REPO, models_yaml, write

from ragmatrix.cost.meter import Meter, Work, current_meter, current_work
from ragmatrix.cost.price import dollars
from ragmatrix.cost.record import CostRecord
from ragmatrix.cost.store import CostStore
from ragmatrix.families import all_families
from ragmatrix.models.client import ModelError
from ragmatrix.models.embedder import BLOCK, EmbeddingModel
from ragmatrix.models.lexical import HashingBagOfWords
from ragmatrix.models.spec import ModelSpec
from ragmatrix.models.usage import Usage, current_usage
from ragmatrix.report import write_report
from ragmatrix.report.leaderboard_json import LeaderboardFile
from ragmatrix.testing.openai_server import Reply

LLM_ITEMS = 5  # the scripted LLM's items of the small project (see test_plugin.py)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:cacheprovider", *args)


def rows(pytester: pytest.Pytester, family: str = "rag_interpretation") -> list[dict]:
    path = pytester.path / "benchmark" / "results" / f"{family}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def cost_records(pytester: pytest.Pytester, family: str = "rag_interpretation") -> dict[str, dict]:
    path = pytester.path / "benchmark" / "results" / "costs" / f"{family}.jsonl"
    return {r["model"]: r for r in map(json.loads, path.read_text().splitlines())}


# --- dollars ---------------------------------------------------------------------------------------


def test_dollars_are_written_with_significant_digits_never_as_zero():
    assert dollars(0.00004) == "$0.0000400"  # not $0.0000
    assert dollars(0.001344) == "$0.00134"
    assert (dollars(0.5), dollars(12.345), dollars(1234.5)) == ("$0.500", "$12.35", "$1,234.50")
    assert (dollars(0.0), dollars(None)) == ("$0.00", "-")


def test_a_tiny_real_cost_shows_its_digits_in_the_table_and_the_usage_line(bench, server):
    server.usage = {"prompt_tokens": 10, "completion_tokens": 2}
    priced = models_yaml(server.base_url).replace(
        "    concurrency: 4\n", "    concurrency: 4\n    price: {input_per_million: 0.5, output_per_million: 1.5}\n"
    )
    write(bench.path / "benchmark" / "models.yaml", priced)
    result = run(bench, "-k", "scripted")
    result.assert_outcomes(passed=LLM_ITEMS)
    # 50 tokens in at $0.5 and 10 out at $1.5 a million: $0.00004
    result.stdout.fnmatch_lines(["*scripted*50/10*$0.0000400*remote*", "this run: *; cost $0.0000400"])


# --- texts embedded ---------------------------------------------------------------------------------


class FailingOnSecondBlock(HashingBagOfWords):
    """The bag-of-words model, failing on the block that holds the shortest text, "x" (texts are
    encoded longest first): a server that gives up mid-build."""

    def embed(self, batch: list[str]) -> np.ndarray:
        if "x" in batch:
            raise RuntimeError("the server went away")
        return super().embed(batch)


def test_a_failed_encode_counts_only_the_blocks_it_encoded():
    usage, meter = Usage(), Meter(None)
    tokens = (current_usage.set(usage), current_meter.set(meter), current_work.set(Work("code_retrieval")))
    try:
        with pytest.raises(ModelError, match="the server went away"):  # an error row, for the item
            model = EmbeddingModel(ModelSpec(id="bow", kind="embedder", builtin="bow"), FailingOnSecondBlock(), None)
            model.embed_documents([*(f"text {i}" for i in range(BLOCK + 43)), "x"])
    finally:
        current_work.reset(tokens[2])
        current_meter.reset(tokens[1])
        current_usage.reset(tokens[0])
    assert usage.texts_embedded == BLOCK  # the first block; the failed one embedded nothing
    assert meter.texts_embedded == BLOCK
    (record,) = meter.take()
    assert record.texts == BLOCK


CORPUS_LINES = BLOCK + 44  # two blocks of line chunks: the first is stored, the second never answers


def ctrl_c_as_a_user_has_it() -> None:
    """In the child before it starts: SIGINT's default action, which Python turns into
    KeyboardInterrupt, even where the test run was launched with Ctrl-C ignored (a background job)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def output_or_where_it_hangs(process: subprocess.Popen[str]) -> str:
    """The run's output once it ends; a run that does not end within minutes is a hang, and the
    test fails with every thread's stack (faulthandler, on SIGABRT) instead of a bare timeout."""
    try:
        return process.communicate(timeout=180)[0]
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        output = process.communicate(timeout=60)[0]
        dump = output[output.find("Fatal Python error") :][:20000]  # every thread, the main one first
        pytest.fail(f"the run did not end after SIGINT; where it hung:\n{dump}")


def embedding_rows(cache: Path) -> int:
    path = cache / "embeddings.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as db:
            return int(db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
    except sqlite3.OperationalError:  # not made yet
        return 0


def test_a_run_stopped_with_ctrl_c_says_how_many_texts_it_embedded(pytester, server):
    """The index build's second block hangs on the server; once the first block is stored, the
    run gets a SIGINT, as a user's Ctrl-C. Its summary counts the texts encoded, which no item
    finished to report."""
    # the shortest line sorts last: into the second block, whose request then hangs
    lines = [f"VALUE_NUMBER_{n} = {n}  # line {n} of the generated module" for n in range(CORPUS_LINES - 1)]
    write(pytester.path / "benchmark" / "data" / "big.py", "\n".join([*lines, "POISON = 1"]) + "\n")
    write(
        pytester.path / "benchmark" / "data" / "code_retrieval_data.yaml",
        "code_retrieval:\n  - case: big\n    input:\n      corpus: {path: big.py}\n"
        "      chunking: {one: {strategy: line, lines: 1, overlap: 0}}\n      query: value seven\n"
        "    expected: {expected_files: [big.py], answer_keywords: [VALUE_NUMBER_7 ]}\n",
    )
    write(
        pytester.path / "benchmark" / "models.yaml",
        f"models:\n  - id: remote-emb\n    kind: embedder\n    litellm: openai/emb\n    api_base: {server.base_url}\n"
        f"    batch_size: {BLOCK}\n    timeout: 600\n",
    )
    shutil.copy(REPO / "benchmark" / "test_code_retrieval.py", pytester.path / "benchmark" / "test_code_retrieval.py")
    server.on("POISON", Reply.hang(600))
    cache = pytester.path / "cache"
    environment = {**os.environ, "PYTHONFAULTHANDLER": "1", "RAGMATRIX_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "benchmark", "-p", "no:cacheprovider"],
        cwd=pytester.path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=ctrl_c_as_a_user_has_it,
    )
    try:
        deadline = time.monotonic() + 300  # a guard against a hang only: the wait ends on the rows
        # the query, embedded ahead of the item, and the index's first block
        while embedding_rows(cache) < BLOCK + 1 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert embedding_rows(cache) == BLOCK + 1
        process.send_signal(signal.SIGINT)
        output = output_or_where_it_hangs(process)
    finally:
        if process.poll() is None:
            process.kill()
    assert "KeyboardInterrupt" in output
    assert f"; {BLOCK + 1} texts embedded, " in output, output[-3000:]


# --- invalid judgements ----------------------------------------------------------------------------

DOCUMENTS = {
    "d1": "Metformin suppresses glucose production in the liver.",
    "d2": "Metformin tablets are taken with meals.",
    "d3": "Metformin raises insulin sensitivity in muscle.",
    "d4": "The French lilac grows in southern Europe.",
}
LABELS = {"d1": 3, "d2": 1, "d3": 2, "d4": 0}
BY_TEXT = {text: doc for doc, text in DOCUMENTS.items()}
ZELO_CASES = f"""
zelo_battles:
  - case: metformin
    input:
      query: How does metformin lower glucose?
      instruction: "Judge. Reply with JSON: reasoning and score."
      documents: {json.dumps(DOCUMENTS)}
    expected:
      relevance: {json.dumps(LABELS)}
"""


def judge(messages: list[dict]) -> str:
    """Knows the labels, but answers garbage whenever d4 is shown."""
    user = next(m["content"] for m in messages if m["role"] == "user")
    a, b = (BY_TEXT[text] for text in user.split("Document A:\n", 1)[1].split("\n\nDocument B:\n", 1))
    if "d4" in (a, b):
        return "<html>upstream error</html>"
    return json.dumps({"reasoning": "by the labels", "score": (LABELS[b] - LABELS[a]) / 3})


def test_a_zelo_row_counts_each_invalid_judgement_though_it_still_has_a_score(pytester, server):
    server.answer = judge
    write(pytester.path / "benchmark/test_zelo_battles.py", (REPO / "benchmark/test_zelo_battles.py").read_text())
    write(pytester.path / "benchmark/data/zelo_battles_data.yaml", ZELO_CASES)
    write(
        pytester.path / "benchmark/models.yaml",
        f"models:\n  - id: judge\n    kind: llm\n    litellm: openai/judge\n    api_base: {server.base_url}\n",
    )
    result = run(pytester)
    result.assert_outcomes(passed=1, skipped=1)  # no reranker: the module's reranking test is skipped
    (row,) = rows(pytester, "zelo_battles")
    (entry,) = row["iterations"]
    invalid = entry["invalid_answers"]
    assert entry["valid"] and 0 < invalid < entry["judgements"]  # the pairs without d4 still rank
    assert row["invalid"] == invalid and row["status"] == "ok"
    line = next(line for line in result.outlines if line.split()[1:2] == ["judge"])
    assert line.split()[8] == str(invalid)  # the table's invalid column: its judgements, not 0


# --- first-request tokens ----------------------------------------------------------------------------


def test_the_litellm_clients_cost_record_keeps_its_first_requests_tokens(bench, server):
    server.usage = {"prompt_tokens": 10, "completion_tokens": 2}
    text = models_yaml(server.base_url).replace("    retries: 2\n", "    retries: 2\n    client: litellm\n")
    write(bench.path / "benchmark" / "models.yaml", text)
    run(bench, "-k", "scripted").assert_outcomes(passed=LLM_ITEMS)
    record = cost_records(bench)["scripted"]
    in_rows = [r["usage"] for r in rows(bench) if r["model"] == "scripted"]
    assert (record["tokens_in"], record["tokens_out"]) == (
        sum(u["prompt_tokens"] for u in in_rows),
        sum(u["completion_tokens"] for u in in_rows),
    )
    assert record["requests"] == LLM_ITEMS
    # its latency leaves out the cold first request, which paid for litellm's start
    assert sum(record["request_ms"]["counts"].values()) == LLM_ITEMS - 1


# --- the load average ------------------------------------------------------------------------------


def test_each_record_keeps_the_load_average_and_figures_from_a_busy_machine_are_said(bench, tmp_path):
    run(bench, "-k", "bow").assert_outcomes(passed=2)
    bow = cost_records(bench)["bow"]
    assert bow["load_average"] >= 0 and bow["cpus"] == os.cpu_count()
    # the same figures, as if measured while the machine ran twice as many processes as CPUs
    results = bench.path / "benchmark" / "results"
    store = CostStore(results)
    (record,) = [r for r in store.load("rag_interpretation").records if r.model == "bow"]
    busy = record.model_copy(update={"load_average": 2.0 * (record.cpus or 1) + 0.5})
    store.write("rag_interpretation", [busy])
    terminal = run(bench, "-k", "bow")
    busy_line = "cost: measured on a busy machine, speeds and latencies read slow: bow (load average *"
    terminal.stdout.fnmatch_lines([busy_line])
    written = write_report(results, tmp_path / "report", all_families())
    board = LeaderboardFile.model_validate_json(written.json.read_text())
    cost = next(m for m in board.families["rag_interpretation"].models if m.model == "bow").cost
    assert cost.busy and cost.load_average == busy.load_average and cost.cpus == busy.cpus
    assert "Measured on a busy machine" in written.markdown.read_text()


# --- the committed results' older records ------------------------------------------------------------


def test_older_cost_records_still_report_and_a_cached_run_leaves_them_as_they_are(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(REPO / "benchmark" / "results", results)
    costs = {path.name: path.read_bytes() for path in (results / "costs").glob("*.jsonl")}
    stored = [CostRecord.model_validate(json.loads(line)) for data in costs.values() for line in data.splitlines()]
    old = [r for r in stored if r.version == 1]  # beside them, records measured since (bm25-minilm's)
    assert old and all(r.memory_added_mb is None and r.peak_rss_mb for r in old)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmark", "-p", "no:cacheprovider", "--results-dir", str(results)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "RAGMATRIX_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert " cached in " in done.stdout and " passed" not in done.stdout  # every item stored
    assert {path.name: path.read_bytes() for path in (results / "costs").glob("*.jsonl")} == costs  # unchanged
    assert "peak MB" not in done.stdout and "cost: no memory added for " in done.stdout
    written = write_report(results, tmp_path / "report", all_families())
    board = LeaderboardFile.model_validate_json(written.json.read_text())
    minilm = next(m for m in board.families["code_retrieval"].models if m.model == "minilm").cost
    assert minilm.embeddings_per_s and minilm.memory_added_mb is None and minilm.process_peak_mb
    assert "Older cost records keep only the process's peak memory" in written.markdown.read_text()
