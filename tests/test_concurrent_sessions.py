"""Sessions that share a results folder never lose each other's rows, whatever the file system
does with inode numbers.

A compaction replaces `<family>.jsonl` with a new file. Once the last handle on the old file is
closed, ext4 readily gives the next new file (another session's compaction) the old inode
number, so a session that remembers the file it read by (device, inode) takes the newer file
for the one it read. These tests run that interleaving on the real file system under the
temporary folder, many times over, and three real pytest runs on one results folder.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from project import write
from test_cost import record
from test_store import row

from ragmatrix.cost.store import CostStore
from ragmatrix.results.store import ResultStore

TRIES = 50


def _one_session(folder: Path, item: str) -> None:
    """A whole session that appends one row and compacts, then ends (its files closed)."""
    session = ResultStore(folder)
    session.append("fam", row(item, 1))
    session.compact("fam")
    session.close()


def test_a_session_that_read_the_file_before_two_others_compacted_keeps_their_rows(tmp_path):
    lost: list[str] = []
    for attempt in range(TRIES):
        folder = tmp_path / str(attempt)
        seed = ResultStore(folder)
        for index in range(20):
            seed.append("fam", row(f"stored-{index:02}", 1))
        seed.compact("fam")
        seed.close()

        first = ResultStore(folder)
        first.load("fam")  # at collection: what is stored already
        # Each adds a row that sorts before the stored ones, so each compaction writes a new file.
        _one_session(folder, "added-by-second")
        _one_session(folder, "added-by-third")
        first.append("fam", row("added-by-first", 1))
        compacted = first.compact("fam")
        first.close()

        final = ResultStore(folder).load("fam")
        items = {r.item for r in final.rows}
        missing = {"added-by-first", "added-by-second", "added-by-third"} - items
        if missing or len(items) != 23 or compacted.problems or final.problems:
            lost.append(f"try {attempt}: lost {sorted(missing)}, notes {compacted.problems}")
    assert lost == []


def test_cost_records_of_sessions_that_compact_in_between_are_all_kept(tmp_path):
    for attempt in range(TRIES):
        costs = CostStore(tmp_path / str(attempt))
        costs.append([record(texts=1, sessions=["seed"])])
        costs.compact("code_retrieval")
        first = CostStore(tmp_path / str(attempt))
        first.load("code_retrieval")
        for session in ("second", "third"):
            other = CostStore(tmp_path / str(attempt))
            other.append([record(texts=10, sessions=[session])])
            other.compact("code_retrieval")
        first.append([record(texts=100, sessions=["first"])])
        assert first.compact("code_retrieval") == []
        (kept,) = CostStore(tmp_path / str(attempt)).load("code_retrieval").records
        assert (kept.texts, kept.sessions) == (121, ["first", "second", "seed", "third"])


# Rows sort by model: the quick runs' rows before the slow run's, so that each quick run's
# compaction writes a new file (rows appended in order leave a file compact), and the rows stored
# before any of them (words) last, so that the file the slow run read is no prefix of the next.
SLOW_AND_QUICK = """
models:
  - id: slow
    kind: llm
    litellm: openai/slow
    api_base: {slow}
    timeout: 300
    retries: 0
    concurrency: 1
  - id: quick1
    kind: llm
    litellm: openai/quick1
    api_base: {quick1}
  - id: quick2
    kind: llm
    litellm: openai/quick2
    api_base: {quick2}
  - id: words
    kind: embedder
    builtin: bow
"""


@pytest.mark.slow
def test_a_long_run_and_two_short_runs_ending_during_it_keep_every_row(bench, server):
    """One long run and two short ones on one results folder: the long run has read the file
    and written rows before each short run ends, and writes more after; no row is lost and no
    line is taken for a torn one. Each server answers when the test lets it, so the order of
    events does not depend on how fast anything runs."""
    from ragmatrix.testing.openai_server import OpenAIServer

    slow, quick = _Gate(), _Gate()
    server.answer = slow.answer
    results = bench.path / "benchmark" / "results"
    command = [sys.executable, "-m", "pytest", "benchmark", "-p", "no:cacheprovider", "-q"]
    with OpenAIServer() as free, OpenAIServer(quick.answer) as gated:
        models = SLOW_AND_QUICK.format(slow=server.base_url, quick1=free.base_url, quick2=gated.base_url)
        write(bench.path / "benchmark" / "models.yaml", models)
        seed = subprocess.run([*command, "--models", "words"], cwd=bench.path, capture_output=True, text=True)
        assert seed.returncode == 0, seed.stdout + seed.stderr
        read_at_collection = (results / "rag_interpretation.jsonl").stat().st_ino

        runs = {"long": _start([*command, "--models", "slow", "--send-ahead", "1"], bench.path)}
        try:
            slow.let(1)
            _wait_for(lambda: _rows(results, "slow") == 1, runs["long"])
            runs["quick1"] = _start([*command, "--models", "quick1"], bench.path)
            runs["quick1"].wait(timeout=300)
            runs["quick2"] = _start([*command, "--models", "quick2"], bench.path)
            _wait_for(lambda: gated.count() >= 1, runs["quick2"])  # started, its first answer held
            # Files come and go on a busy machine: take the free inode numbers below the file the
            # long run read, so that when the long run lets go of that file (its next row goes to
            # the file the first short run wrote), the next new file (the second short run's
            # compaction) gets its number, as it would on a quiet machine.
            fillers = _take_free_inodes_below(results, read_at_collection)
            slow.let(1)
            _wait_for(lambda: _rows(results, "slow") == 2, runs["long"])
            quick.let(10)
            runs["quick2"].wait(timeout=300)
            for filler in fillers:
                filler.unlink()
            slow.let(10)  # the long run's other items end after both short runs
            runs["long"].wait(timeout=300)
        finally:
            for run in runs.values():
                if run.poll() is None:
                    run.kill()
                    run.wait()
    outputs = {name: run.stdout.read() if run.stdout else "" for name, run in runs.items()}
    assert {name: run.returncode for name, run in runs.items()} == dict.fromkeys(runs, 0), outputs
    final = ResultStore(results).load("rag_interpretation")
    kept = sorted((r.model, r.item) for r in final.rows)
    assert len(kept) == len(set(kept))
    per_model = {model: sum(1 for m, _ in kept if m == model) for model in ("words", "slow", "quick1", "quick2")}
    assert per_model == {"words": 2, "slow": 5, "quick1": 5, "quick2": 5}
    assert final.problems == []
    assert not [name for name, text in outputs.items() if "torn" in text], outputs


class _Gate:
    """A server's answer given only when the test lets it: one `let` per answer."""

    def __init__(self) -> None:
        self._allowed = threading.Semaphore(0)

    def answer(self, messages: list[dict]) -> str:
        self._allowed.acquire(timeout=300)
        return "yes"

    def let(self, answers: int) -> None:
        self._allowed.release(answers)


def _start(command: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _rows(results: Path, model: str) -> int:
    return sum(1 for r in ResultStore(results).load("rag_interpretation").rows if r.model == model)


def _wait_for(condition, run: subprocess.Popen) -> None:
    """Until `condition` holds; a run that ended first fails the test."""
    deadline = time.monotonic() + 300
    while not condition():
        if run.poll() is not None:
            raise AssertionError(f"a run ended early:\n{run.stdout.read() if run.stdout else ''}")
        if time.monotonic() > deadline:
            raise AssertionError("nothing happened in 300 s")
        time.sleep(0.02)


def _take_free_inodes_below(folder: Path, number: int) -> list[Path]:
    """Files in `folder` holding every free inode number below `number` there (a new file takes
    the lowest free number of its folder's group), for the test to remove later."""
    taken: list[Path] = []
    while len(taken) < 10_000:
        filler = folder / f".filler-{len(taken)}"
        filler.touch()
        if filler.stat().st_ino > number:
            filler.unlink()
            break
        taken.append(filler)
    return taken
