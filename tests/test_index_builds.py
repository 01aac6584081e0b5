"""Index builds that stream: blocks written to the embedding cache as they are encoded, a
progress bar, a killed build resumed, and the session line's three counts."""

from __future__ import annotations

import fcntl
import os
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import numpy as np
import pytest
from dense_words import DenseWords
from project import dense_words_project

from ragmatrix.models.embedder import BLOCK, PROGRESS_FROM, EmbeddingModel
from ragmatrix.models.embedding_cache import EmbeddingCache
from ragmatrix.models.lexical import HashingBagOfWords
from ragmatrix.models.spec import ModelSpec
from ragmatrix.models.usage import Usage, current_usage

SPEC = ModelSpec(id="bow", kind="embedder", builtin="bow")
REPO = Path(__file__).resolve().parents[1]


def texts(n: int, start: int = 0) -> list[str]:
    return [f"chunk {i} " + "word " * (i % 7) for i in range(start, start + n)]


class RecordingBagOfWords(DenseWords):
    """The bag-of-words model with dense rows (as any embedder's), recording each block; it dies
    after `fail_after` blocks."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.blocks: list[list[str]] = []
        self.fail_after = fail_after

    def embed(self, batch: list[str]) -> np.ndarray:
        if self.fail_after is not None and len(self.blocks) == self.fail_after:
            raise KeyboardInterrupt  # as a user's Ctrl-C would land between two blocks
        self.blocks.append(list(batch))
        return super().embed(batch)


def Recording(cache: EmbeddingCache | None, fail_after: int | None = None) -> EmbeddingModel:
    """The bag-of-words embedder whose model records each block (`model.provider.blocks`)."""
    return EmbeddingModel(SPEC, RecordingBagOfWords(fail_after), cache)


def test_misses_are_encoded_longest_first_in_blocks_each_stored_when_done(tmp_path):
    cache = EmbeddingCache(tmp_path)
    model = Recording(cache)
    documents = texts(2 * BLOCK + 10)
    rows = model.embed_documents(documents)
    assert [len(b) for b in model.provider.blocks] == [BLOCK, BLOCK, 10]
    lengths = [len(t) for block in model.provider.blocks for t in block]
    assert lengths == sorted(lengths, reverse=True)
    assert np.allclose(rows, EmbeddingModel(SPEC, HashingBagOfWords()).embed_documents(documents))  # in the order asked
    assert len(cache) == len(documents)


def test_an_interrupted_build_keeps_its_finished_blocks_and_the_rerun_embeds_only_the_rest(tmp_path):
    documents = texts(3 * BLOCK)
    with pytest.raises(KeyboardInterrupt):
        Recording(EmbeddingCache(tmp_path), fail_after=2).embed_documents(documents)
    assert len(EmbeddingCache(tmp_path)) == 2 * BLOCK
    again = Recording(EmbeddingCache(tmp_path))
    again.embed_documents(documents)
    assert sum(len(b) for b in again.provider.blocks) == BLOCK


KILLED_BUILD = """
import sys, time
from ragmatrix.models.embedder import BLOCK, EmbeddingModel
from ragmatrix.models.embedding_cache import EmbeddingCache
from ragmatrix.models.lexical import HashingBagOfWords
from ragmatrix.models.spec import ModelSpec

class Slow(HashingBagOfWords):
    encoded = 0

    def embed(self, batch):
        if sys.argv[2] == "stall" and Slow.encoded >= BLOCK:
            time.sleep(3600)  # past the first block the model stalls, to be killed mid-build
        Slow.encoded += len(batch)
        return super().embed(batch)

texts = [f"chunk {i} " + "word " * (i % 7) for i in range(4 * BLOCK)]
spec = ModelSpec(id="bow", kind="embedder", builtin="bow")
EmbeddingModel(spec, Slow(), EmbeddingCache(sys.argv[1])).embed_documents(texts)
print("ENCODED", Slow.encoded)
"""


def stored_rows(directory: Path) -> int:
    path = directory / "embeddings.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as db:
            return int(db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
    except sqlite3.OperationalError:  # the table is not made yet
        return 0


def test_a_build_killed_with_sigkill_embeds_only_the_rest_when_run_again(tmp_path):
    script = tmp_path / "build.py"
    script.write_text(KILLED_BUILD)
    cache = tmp_path / "cache"
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, str(script), str(cache), "stall"], env=environment)
    deadline = time.monotonic() + 60
    while stored_rows(cache) < BLOCK and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    kept = stored_rows(cache)
    assert BLOCK <= kept < 4 * BLOCK
    done = subprocess.run(
        [sys.executable, str(script), str(cache), "go"], env=environment, capture_output=True, text=True, check=True
    )
    assert f"ENCODED {4 * BLOCK - kept}" in done.stdout


def test_index_builds_and_windows_of_any_size_show_a_progress_bar_other_work_from_progress_from(fresh_run, capsys):
    assert fresh_run.suspend_capture is None  # on stderr as it is, where capsys reads it
    Recording(None).embed_documents(texts(PROGRESS_FROM - 1))
    assert capsys.readouterr().err == ""
    Recording(None).embed_documents(texts(PROGRESS_FROM))
    shown = capsys.readouterr().err
    assert "bow: embedding: 100%" in shown and f"{PROGRESS_FROM}/{PROGRESS_FROM}" in shown and "text/s" in shown
    Recording(None).index_documents(texts(3))  # a cold run must never sit silent through an index build
    shown = capsys.readouterr().err
    assert "bow: embedding: 100%" in shown and "3/3" in shown and "chunk/s" in shown
    Recording(None).prefetch(texts(2), [])  # nor through a window of texts embedded ahead
    shown = capsys.readouterr().err
    assert "bow: embedding: 100%" in shown and "2/2" in shown


def test_the_progress_bar_reaches_the_terminal_through_the_suspended_capture(fresh_run):
    suspended: list[str] = []

    class Suspend:
        def __enter__(self) -> None:
            suspended.append("in")

        def __exit__(self, *exc: object) -> None:
            suspended.append("out")

    fresh_run.suspend_capture = Suspend
    Recording(None).embed_documents(texts(PROGRESS_FROM))
    assert suspended == ["in", "out"]


def test_usage_tells_embedded_texts_from_earlier_runs_and_from_this_run(tmp_path):
    Recording(EmbeddingCache(tmp_path)).embed_documents(["from an earlier run"])
    usage = Usage()
    token = current_usage.set(usage)
    try:
        model = Recording(EmbeddingCache(tmp_path))  # this run's cache
        model.embed_documents(["from an earlier run", "new", "also new"])
        model.embed_documents(["new", "from an earlier run"])
    finally:
        current_usage.reset(token)
    assert (usage.texts_embedded, usage.embedding_cache_hits, usage.embedding_shared) == (2, 2, 1)
    assert usage.to_json()["embedding_shared"] == 1


def test_a_benchmark_run_draws_the_bar_on_the_terminal_past_the_capture(pytester):
    (pytester.path / "benchmark" / "data").mkdir(parents=True)
    dense_words_project(pytester.path)  # an embedder whose index is built in blocks, with a bar
    (pytester.path / "benchmark" / "models.yaml").write_text(
        "models:\n  - {id: bow, kind: embedder, dense_words: true}\n"
    )
    source = (REPO / "benchmark" / "test_code_retrieval.py").read_text()
    (pytester.path / "benchmark" / "test_code_retrieval.py").write_text(source)
    (pytester.path / "benchmark" / "data" / "big.py").write_text(
        "".join(f"VALUE_{n} = {n}  # line {n}\n" for n in range(PROGRESS_FROM + 10))
    )
    (pytester.path / "benchmark" / "data" / "code_retrieval_data.yaml").write_text(
        "code_retrieval:\n"
        "  - case: big\n"
        "    input:\n"
        "      corpus: {path: big.py}\n"
        "      chunking: {one: {strategy: line, lines: 1, overlap: 0}}\n"
        "      query: value seven\n"
        "    expected: {expected_files: [big.py], answer_keywords: [VALUE_7 ]}\n"
    )
    result = pytester.runpytest_subprocess("benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    shown = result.stdout.str() + result.stderr.str()
    assert "bow: embedding: 100%" in shown and f"{PROGRESS_FROM + 10}/{PROGRESS_FROM + 10}" in shown
    assert "chunk/s" in shown


def read_all(leader: int) -> str:
    """Everything written to a terminal whose other end is closed: a terminal hands it over in
    pieces, and says EIO once it is all read."""
    pieces = []
    while True:
        try:
            piece = os.read(leader, 65536)
        except OSError:
            break
        if not piece:
            break
        pieces.append(piece)
    os.close(leader)
    return b"".join(pieces).decode()


def test_an_index_build_says_on_a_terminal_which_corpus_it_indexes_and_nothing_off_one(fresh_run, tmp_path, capsys):
    from ragmatrix.families.code_retrieval.chunking import Chunking
    from ragmatrix.families.code_retrieval.corpus import CorpusSpec, load_corpus
    from ragmatrix.families.code_retrieval.retrieval import index_of

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("".join(f"def a{i}():\n    return {i}\n" for i in range(30)))
    corpus = load_corpus(CorpusSpec(path="src"), tmp_path)
    index_of(Recording(None), corpus, Chunking(strategy="line"))
    assert "indexing" not in capsys.readouterr().err  # stderr is no terminal here: no line
    leader, follower = os.openpty()  # a real terminal, as a user's would be, 120 columns wide
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    with os.fdopen(follower, "w") as terminal:
        original, sys.stderr = sys.stderr, terminal
        try:
            index_of(Recording(None), corpus, Chunking(strategy="line", lines=20, overlap=5))
        finally:
            sys.stderr = original
    shown = read_all(leader)
    assert "ragmatrix: bow: indexing 4 chunks of path src (line)" in shown
    assert "bow: embedding: 100%" in shown and "4/4" in shown
