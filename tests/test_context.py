"""One run's context: what a run remembers is its own, and its end closes what it made."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys

import pytest

from ragmatrix.families import all_families, register
from ragmatrix.foundations import secrets
from ragmatrix.foundations.atomic_write import write_atomically
from ragmatrix.foundations.context import current, start_run
from ragmatrix.models.registry import run_registry


def test_a_run_keeps_its_own_parts_and_a_later_run_shares_none(tmp_path):
    with start_run(tmp_path) as first:
        registry = run_registry(first)
        assert run_registry(current()) is registry  # one per run
    with start_run(tmp_path) as second:
        assert run_registry(second) is not registry


def test_a_family_registered_in_a_run_is_gone_in_the_next(tmp_path):
    with start_run(tmp_path):
        rag = all_families()["rag_interpretation"]
        register(type(rag)(**{**rag.__dict__, "name": "toy_run_family"}))
        assert "toy_run_family" in all_families()
    with start_run(tmp_path):
        assert "toy_run_family" not in all_families() and "rag_interpretation" in all_families()


def test_a_run_inside_a_run_gives_the_outer_one_back_at_its_end(tmp_path):
    with start_run(tmp_path / "outer") as outer:
        with start_run(tmp_path / "inner") as inner:
            assert current() is inner
        assert current() is outer


def test_the_variables_a_run_refers_to_are_secret_in_that_run_only(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAIN_NAMED_SETTING", "opaque-value-42")
    with start_run(tmp_path):
        secrets.refer_to(["PLAIN_NAMED_SETTING"])
        assert secrets.redact("x opaque-value-42") == "x ***"
    with start_run(tmp_path):
        assert secrets.redact("x opaque-value-42") == "x opaque-value-42"


def test_a_runs_env_file_is_read_and_a_variable_already_set_wins(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("RAGMATRIX_TEST_FROM_ENV_FILE=from-file\nRAGMATRIX_TEST_SET=from-file\n")
    monkeypatch.delenv("RAGMATRIX_TEST_FROM_ENV_FILE", raising=False)
    monkeypatch.setenv("RAGMATRIX_TEST_SET", "already")
    with start_run(tmp_path):
        assert os.environ["RAGMATRIX_TEST_FROM_ENV_FILE"] == "from-file"
        assert os.environ["RAGMATRIX_TEST_SET"] == "already"
    monkeypatch.delenv("RAGMATRIX_TEST_FROM_ENV_FILE", raising=False)


def test_the_end_cancels_what_still_runs_then_closes_the_clients_then_the_loop(tmp_path):
    events: list[str] = []

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            events.append("task cancelled")
            raise

    async def close_client() -> None:
        events.append(f"client closed, loop running: {asyncio.get_running_loop().is_running()}")

    async def start() -> asyncio.AbstractEventLoop:
        asyncio.ensure_future(forever())
        await asyncio.sleep(0)
        return asyncio.get_running_loop()

    with start_run(tmp_path) as run:
        loop = run.run(start())
        run.at_close(close_client)
        run.at_close(close_client)  # given twice, awaited once
    assert events == ["task cancelled", "client closed, loop running: True"]
    assert loop.is_closed()


def test_a_replaced_file_is_whole_and_a_failed_write_leaves_the_old_one(tmp_path):
    path = tmp_path / "rows.jsonl"
    write_atomically(path, ["a\n", "b\n"])
    assert path.read_text() == "a\nb\n"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # not the temporary file's 0600

    def lines():
        yield "c\n"
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(path, lines())
    assert path.read_text() == "a\nb\n"
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]  # no temporary file left
    write_atomically(tmp_path / "new" / "f.txt", "text", make_folder=True)
    assert (tmp_path / "new" / "f.txt").read_text() == "text"


CTRL_C_TO_ANOTHER_THREAD = """
import asyncio, signal, threading
from ragmatrix.foundations.context import LoopThread

signal.signal(signal.SIGINT, signal.default_int_handler)  # even where the launcher ignores Ctrl-C

thread = LoopThread()
started = threading.Event()

async def forever():
    started.set()
    await asyncio.sleep(3600)

# The kernel may hand a process's SIGINT to any thread that does not block it: here, the loop's.
threading.Thread(target=lambda: started.wait() and signal.pthread_kill(thread._thread.ident, signal.SIGINT)).start()
try:
    thread.run(forever())
except KeyboardInterrupt:
    print("interrupted")
"""


def test_a_ctrl_c_the_kernel_hands_to_the_loops_thread_still_interrupts_the_caller_waiting_for_it():
    # before: the caller slept in a lock wait that only a signal to its own thread wakes, and
    # the run went on until the request it waited for timed out
    finished = subprocess.run(
        [sys.executable, "-c", CTRL_C_TO_ANOTHER_THREAD], capture_output=True, text=True, timeout=120, check=False
    )
    assert finished.stdout.strip() == "interrupted", finished.stderr[-2000:]
