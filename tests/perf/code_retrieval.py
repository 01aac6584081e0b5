"""Code retrieval on the shipped corpus: chunking speed, embedding economy, and retrieval cost.

Prints three figures:

- chunking throughput, in files per second, for each strategy of the shipped cases;
- the ratio of chunk texts sent to the model to unique chunks, over every query of every
  strategy, starting from an empty embedding cache: 1.00 means each chunk is embedded once, not
  once per query;
- the time to rank the corpus for one query (scores, sort, metrics) against the time to encode
  that query.

Also how many chunks of each strategy are longer than the model reads (they are truncated).

    python tests/perf/code_retrieval.py [--model minilm|bow|bm25] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ragmatrix.families.code_retrieval import retrieval as code_retrieval  # noqa: E402
from ragmatrix.families.code_retrieval.chunking import chunk_corpus  # noqa: E402
from ragmatrix.models.models_file import load_models  # noqa: E402
from ragmatrix.models.registry import Registry  # noqa: E402
from ragmatrix.suite.loader import expand_case  # noqa: E402

DATA = ROOT / "benchmark" / "data" / "code_retrieval_data.yaml"


def shipped_cases() -> list:
    cases = []
    for raw in yaml.safe_load(DATA.read_text())["code_retrieval"]:
        expanded, problem = expand_case("code_retrieval", raw, DATA.name, directory=DATA.parent)
        if problem is not None:
            raise SystemExit(problem.line())
        cases.extend(expanded)
    return cases


def chunking_throughput(cases: list, repeats: int) -> None:
    corpus = code_retrieval.corpus_of(cases[0])
    strategies = {c.variant: c.input.chunking for c in cases}
    chunk_corpus(corpus, strategies["semantic"])  # parsers load once per process: not counted
    lines = sum(f.text.count("\n") for f in corpus.files)
    print(f"corpus: {corpus.label}, {len(corpus.files)} files, {lines} lines")
    for name, chunking in strategies.items():
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            chunks = chunk_corpus(corpus, chunking)
            times.append(time.perf_counter() - started)
        seconds = statistics.median(times)
        print(f"chunking {name:9} {len(chunks):4} chunks  {len(corpus.files) / seconds:8.0f} files/s")


def embedding_and_retrieval(cases: list, model_id: str) -> None:
    spec = next(s for s in load_models(ROOT / "benchmark" / "models.yaml") if s.id == model_id)
    model = Registry().build(spec)
    sent: list[str] = []
    encode = getattr(model, "_encode", None)
    if encode is not None:

        def counting(texts: list[str]):  # type: ignore[no-untyped-def]
            sent.extend(texts)
            return encode(texts)

        model._encode = counting
    corpus = code_retrieval.corpus_of(cases[0])
    prefix = spec.document_prefix
    unique_chunks = {prefix + c.text for case in cases for c in code_retrieval.chunks_of(corpus, case.input.chunking)}
    build_seconds = 0.0
    rank_ms: list[float] = []
    for case in cases:
        started = time.perf_counter()
        code_retrieval.index_of(model, corpus, case.input.chunking)
        build_seconds += time.perf_counter() - started
        index = code_retrieval.index_of(model, corpus, case.input.chunking)
        scores = index.scorer.score([case.input.query])[0]  # the query's encoding, not timed here
        started = time.perf_counter()
        code_retrieval.score(case, code_retrieval.rank(index, scores))
        rank_ms.append((time.perf_counter() - started) * 1000)
    chunk_texts = [t for t in sent if t in unique_chunks]
    print(f"model {model_id}: indexing every strategy took {build_seconds:.1f} s")
    if encode is not None:
        print(
            f"texts embedded / unique chunks: {len(chunk_texts)} / {len(unique_chunks)}"
            f" = {len(chunk_texts) / len(unique_chunks):.2f} over {len(cases)} items"
            f" (and {len(sent) - len(chunk_texts)} query texts for {len({c.input.query for c in cases})} queries)"
        )
        encode_ms = []
        for case in cases[:20]:
            started = time.perf_counter()
            encode([spec.query_prefix + case.input.query])
            encode_ms.append((time.perf_counter() - started) * 1000)
        rank_median, encode_median = statistics.median(rank_ms), statistics.median(encode_ms)
        print(
            f"per query: ranking and scoring {rank_median:.2f} ms, encoding the query {encode_median:.2f} ms"
            f" (ratio {rank_median / encode_median:.3f})"
        )
    else:
        print(f"per query: ranking and scoring {statistics.median(rank_ms):.2f} ms (no query encoding)")
    counting_tokens = getattr(model, "token_counts", None)
    limit = getattr(model, "context_limit", None)
    if counting_tokens is not None and limit:
        for name, chunking in {c.variant: c.input.chunking for c in cases}.items():
            counts = counting_tokens([c.text for c in code_retrieval.chunks_of(corpus, chunking)]) or []
            print(f"chunks over the model's {limit} tokens, {name}: {sum(1 for n in counts if n > limit)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm", help="a models.yaml id (default minilm)")
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    cases = shipped_cases()
    chunking_throughput(cases, options.repeats)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["RAGMATRIX_CACHE_DIR"] = cache  # an empty embedding cache: every chunk is new
        embedding_and_retrieval(cases, options.model)


if __name__ == "__main__":
    main()
