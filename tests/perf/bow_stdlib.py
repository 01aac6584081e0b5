"""The bag-of-words baseline on the whole standard library: memory, query time, and the query
latency it reports.

Runs the code retrieval family's own search (index once per chunking, then each query embedded,
scored against every chunk and ranked) over the whole standard library with the `bow` baseline
two ways, each in a process of its own, alternated (`--repeat`):

- `sparse`: as shipped: no embedding cache, each corpus indexed as sparse rows;
- `dense`: the baseline's rows kept as any embedder's are (a 16 KB float32 row per text, written
  to the embedding cache, the corpus a dense matrix): how it ran before, the reference.

It prints each way's peak resident memory, the embedding cache it left on disk, the time one
query takes from its text to its ranking (measured around the family's `search`), and the
query latency the cost figures report, then the goals as ratios measured in this run: peak
memory under 1.5 GB and under 50 ms per query for `sparse`, sparse / dense for both, and the
reported latency against the measured one (the dense way reported re-encoding a lone query,
which left the ranking out).

    python tests/perf/bow_stdlib.py [--repeat 1] [--chunkings line,semantic,bounded]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from process_cost import load_average  # noqa: E402

GOAL_MB = 1536
GOAL_MS = 50.0


def child(way: str, chunkings: list[str], folder: Path) -> dict[str, float]:
    """One way's figures, in this process."""
    os.environ["RAGMATRIX_CACHE_DIR"] = str(folder / "cache")
    from big_corpus import CHUNKINGS, QUERIES, corpus_spec

    from ragmatrix import cost
    from ragmatrix.families.code_retrieval import retrieval as code_retrieval
    from ragmatrix.foundations.context import start_run
    from ragmatrix.models.embedder import EmbeddingModel, EmbeddingProvider
    from ragmatrix.models.embedding_cache import EmbeddingCache
    from ragmatrix.models.lexical import HashingBagOfWords
    from ragmatrix.models.spec import ModelSpec
    from ragmatrix.suite.loader import expand_case

    class DenseBagOfWords(HashingBagOfWords):
        index = EmbeddingProvider.index  # rows kept by the wrapper: a dense matrix, through the cache

    with start_run(folder):
        spec = ModelSpec(id="bow", kind="embedder", builtin="bow")
        if way == "sparse":
            model = EmbeddingModel(spec, HashingBagOfWords(), None)
        else:
            model = EmbeddingModel(spec, DenseBagOfWords(), EmbeddingCache())
        meter = cost.start_session(None)
        chunking = {name: CHUNKINGS[name] for name in chunkings}
        searched_ms: list[float] = []
        index_s = 0.0
        for number, (query, path) in enumerate(QUERIES, start=1):
            raw = {
                "case": f"q{number}",
                "input": {"corpus": corpus_spec(True), "chunking": chunking, "query": query},
                "expected": {"expected_files": [path], "answer_keywords": ["def "]},
            }
            cases, problem = expand_case("code_retrieval", raw, "perf.yaml", directory=ROOT)
            if problem is not None:
                sys.exit(problem.line())
            for case in cases:
                with cost.working_on("code_retrieval", case.variant):
                    began = time.perf_counter()
                    code_retrieval.search(model, case)
                    spent = time.perf_counter() - began
                if number == 1:
                    index_s += spent  # the first query of a chunking builds its index
                else:
                    searched_ms.append(spent * 1000.0)
        records = cost.current_meter.get().take()  # type: ignore[union-attr]
        cost.end_session(meter)
        reported = [value for r in records if (value := r.queries.quantile(0.5)) is not None]
    cache = folder / "cache" / "embeddings.sqlite"
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "peak_mb": peak_mb,
        "cache_mb": cache.stat().st_size / 2**20 if cache.exists() else 0.0,
        "index_s": index_s,
        "query_ms": statistics.median(searched_ms),
        "reported_ms": statistics.median(reported) if reported else float("nan"),
    }


def measure(way: str, chunkings: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, __file__, "--child", way, "--chunkings", ",".join(chunkings), "--folder", folder]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if done.returncode != 0:
            sys.exit(f"{way} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="alternated runs of each way; medians are printed")
    parser.add_argument("--chunkings", default="line,semantic,bounded")
    parser.add_argument("--child", choices=["sparse", "dense"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    chunkings = options.chunkings.split(",")
    if options.child:
        print(json.dumps(child(options.child, chunkings, options.folder)))
        return
    print(f"bow on the whole standard library, chunkings {', '.join(chunkings)}; load average {load_average()}")
    runs: dict[str, list[dict[str, float]]] = {"sparse": [], "dense": []}
    for round_ in range(options.repeat):
        for way in ("sparse", "dense") if round_ % 2 == 0 else ("dense", "sparse"):
            runs[way].append(measure(way, chunkings))
    figures = {way: {name: statistics.median(r[name] for r in done) for name in done[0]} for way, done in runs.items()}
    print(f"  {'':8} {'peak MB':>8} {'cache MB':>9} {'index s':>8} {'query ms':>9} {'reported ms':>12}")
    for way, values in figures.items():
        print(
            f"  {way:8} {values['peak_mb']:8.0f} {values['cache_mb']:9.0f} {values['index_s']:8.1f} "
            f"{values['query_ms']:9.2f} {values['reported_ms']:12.2f}"
        )
    sparse, dense = figures["sparse"], figures["dense"]
    print("goals (measured in this run):")
    print(f"  peak memory {sparse['peak_mb']:.0f} MB: {sparse['peak_mb'] / GOAL_MB:.2f}x the 1.5 GB goal")
    print(f"  one query {sparse['query_ms']:.1f} ms: {sparse['query_ms'] / GOAL_MS:.2f}x the 50 ms goal")
    memory, query = sparse["peak_mb"] / dense["peak_mb"], sparse["query_ms"] / dense["query_ms"]
    print(f"  sparse / dense: memory {memory:.2f}x, one query {query:.2f}x")
    print(
        f"  reported / measured query latency: sparse {sparse['reported_ms'] / sparse['query_ms']:.2f}x, "
        f"dense {dense['reported_ms'] / dense['query_ms']:.2f}x"
    )
    print(f"load average {load_average()} at the end")


if __name__ == "__main__":
    main()
