"""A run killed with SIGKILL halfway leaves a store that loads; the next run completes only
what is missing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from project import assert_outcomes

from ragmatrix.results.store import ResultStore

ALL_ITEMS = 7  # 5 LLM items and 2 embedder items (see test_plugin.py)


@pytest.mark.slow
def test_sigkill_midway_then_resume(bench, server):
    answers = threading.Semaphore(2)  # two items end; the others wait for answers until the kill

    def two_answers_then_none(messages: list[dict]) -> str:
        answers.acquire(timeout=300)
        return "yes"

    server.answer = two_answers_then_none
    results = bench.path / "benchmark" / "results"
    store_file = results / "rag_interpretation.jsonl"
    process = subprocess.Popen(
        # one request sent ahead at a time: a window of all five would end at once
        [sys.executable, "-m", "pytest", "benchmark", "-p", "no:cacheprovider", "-q", "--send-ahead", "1"],
        cwd=bench.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if store_file.exists() and len(store_file.read_bytes().splitlines()) >= 2:
            break
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    answers.release(100)  # the next run is answered at once
    # the kill may also land mid-write: leave a torn line as such a writer would
    with open(store_file, "ab") as handle:
        handle.write(b'{"key": "torn", "family": "rag_interp')

    loaded = ResultStore(results).load("rag_interpretation")
    done = len(loaded.rows)
    assert 2 <= done < ALL_ITEMS
    assert len(loaded.problems) == 1

    result = bench.runpytest("benchmark", "-p", "no:cacheprovider")
    assert_outcomes(result, passed=ALL_ITEMS - done, cached=done)
    result.stdout.fnmatch_lines(["store: rag_interpretation.jsonl: line * is torn or not JSON (ignored)"])
    final = ResultStore(results).load("rag_interpretation")
    assert final.problems == []
    assert len(final.rows) == ALL_ITEMS
    assert len({r.key for r in final.rows}) == ALL_ITEMS
