"""What a large matrix costs per item: collect-only, a cold run and a fully cached rerun.

Builds a benchmark project in a temporary folder: the shipped RAG interpretation module, the
bag-of-words baseline as its only model, and `--items` explicit yes/no cases, each written with
two instruction wordings (which the baseline reads as one item, as it reads no prompt). Then,
alternating so that a load change on the machine hits every kind alike, it runs `--repeats`
times each:

- `pytest benchmark --collect-only`;
- a cold run (an empty results folder and an empty cache);
- a fully cached rerun (every item `cached`).

It prints the median wall time of each, the ratio cached / collect-only (goal: at most 1.10),
and the CPU per item of each, as the slope between `--items` and a small run of
`--small-items` (so that start-up, paid once, is not spread over the items), with the peak
memory of each and collect-only's memory per item (the slope again). With `--memory N` it also
runs one cold run of N items and prints its peak resident memory (goal for 100,000: under 1 GB).
Every process writes and reads bytecode as a user's machine does.

    python tests/perf/many_items.py [--items 10000] [--repeats 3] [--memory 100000]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORDS = (
    "gene protein pathway cancer cell tumour receptor kinase signal immune response drug dose "
    "trial patient enzyme membrane transport mutation variant sequence expression tissue organ "
    "blood heart liver kidney brain neuron synapse hormone insulin glucose lipid metabolism"
).split()
PER_FILE = 10_000
MODELS = "models:\n  - id: bow\n    kind: embedder\n    builtin: bow\n"
HEADER = """_prompts:
  explicit: &explicit
    simple: "Judge the fragment for relevance. Answer yes or no."
    strict: "Answer with exactly one word, yes or no. Is the fragment relevant?"
rag_interpretation:
"""


def cases_yaml(first: int, count: int) -> str:
    chosen = random.Random(first)
    lines = [HEADER]
    for index in range(first, first + count):
        question = " ".join(chosen.choice(WORDS) for _ in range(8))
        fragment = " ".join(chosen.choice(WORDS) for _ in range(20))
        lines.append(
            f"  - case: case_{index}\n"
            f"    input:\n"
            f"      prompt: Which {question} number {index}?\n"
            f"      instruction: *explicit\n"
            f'      fragments: ["{fragment}"]\n'
            f'    expected: {{answer: "{"yes" if index % 2 else "no"}"}}\n'
        )
    return "".join(lines)


def project(folder: Path, items: int) -> Path:
    (folder / "benchmark" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "benchmark" / "test_rag_interpretation.py", folder / "benchmark")
    (folder / "benchmark" / "models.yaml").write_text(MODELS)
    # The strict YAML reader bounds what aliases expand to per file: several files past 10,000.
    for number, first in enumerate(range(0, items, PER_FILE)):
        name = "rag_interpretation_data.yaml" if number == 0 else f"rag_interpretation_{number}_data.yaml"
        (folder / "benchmark" / "data" / name).write_text(cases_yaml(first, min(PER_FILE, items - first)))
    (folder / "pytest.ini").write_text("[pytest]\n")
    return folder


@dataclass
class Measured:
    wall_s: float
    cpu_s: float
    peak_mb: float


def run(folder: Path, results: Path, cache: Path, *args: str) -> Measured:
    """One pytest process; its own CPU time and peak memory come from wait4."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "RAGMATRIX_CACHE_DIR": str(cache)}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-m", "pytest", "benchmark", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    command += ["--results-dir", str(results), *args]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=folder, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    errors = process.stderr.read().decode() if process.stderr else ""
    if process.returncode not in (0, 5):
        sys.exit(f"pytest exited {process.returncode}: {' '.join(command)}\n{errors[-3000:]}")
    return Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


class Kinds:
    """collect-only, cold and cached runs of one project, alternated."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.filled = folder / "results-filled"
        self.cache = folder / "cache"
        self.runs = 0

    def collect(self) -> Measured:
        return run(self.folder, self.filled, self.cache, "--collect-only")

    def cold(self) -> Measured:
        self.runs += 1
        results, cache = self.folder / f"results-cold-{self.runs}", self.folder / f"cache-cold-{self.runs}"
        measured = run(self.folder, results, cache)
        if not self.filled.exists():  # the first cold run's results serve the cached reruns
            results.rename(self.filled)
            cache.rename(self.cache)
        else:
            shutil.rmtree(results)
            shutil.rmtree(cache, ignore_errors=True)
        return measured

    def cached(self) -> Measured:
        return run(self.folder, self.filled, self.cache)


def measure(items: int, repeats: int) -> dict[str, list[Measured]]:
    with tempfile.TemporaryDirectory() as temporary:
        kinds = Kinds(project(Path(temporary), items))
        found: dict[str, list[Measured]] = {"collect": [], "cold": [], "cached": []}
        found["cold"].append(kinds.cold())
        for repeat in range(repeats):
            found["collect"].append(kinds.collect())
            found["cached"].append(kinds.cached())
            if repeat:  # the first cold run was taken before the loop
                found["cold"].append(kinds.cold())
        return found


def median(values: list[Measured], field: str) -> float:
    return statistics.median(getattr(m, field) for m in values)


def timings(options: argparse.Namespace) -> None:
    small = measure(options.small_items, options.repeats)
    large = measure(options.items, options.repeats)
    extra = options.items - options.small_items
    print(f"{options.items} items, bag-of-words baseline, medians of {options.repeats} alternated runs:")
    for kind in ("collect", "cold", "cached"):
        per_item = (median(large[kind], "cpu_s") - median(small[kind], "cpu_s")) / extra * 1000
        print(
            f"  {kind:8} wall {median(large[kind], 'wall_s'):7.2f} s   CPU {median(large[kind], 'cpu_s'):7.2f} s   "
            f"CPU per extra item {per_item:5.2f} ms   peak {median(large[kind], 'peak_mb'):6.0f} MB"
        )
    ratio = median(large["cached"], "wall_s") / median(large["collect"], "wall_s")
    cpu_ratio = median(large["cached"], "cpu_s") / median(large["collect"], "cpu_s")
    print(f"  ratio cached / collect-only: {ratio:.2f} wall, {cpu_ratio:.2f} CPU (goal: at most 1.10)")
    per_item_kb = (median(large["collect"], "peak_mb") - median(small["collect"], "peak_mb")) * 1024 / extra
    print(f"  collect-only memory per extra item: {per_item_kb:.1f} KB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000, help="0: only the memory run")
    parser.add_argument("--small-items", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory", type=int, default=0, metavar="N", help="also a cold run of N items: peak memory")
    options = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    if options.items:
        timings(options)
    if options.memory:
        with tempfile.TemporaryDirectory() as temporary:
            folder = project(Path(temporary), options.memory)
            cold = run(folder, folder / "results", folder / "cache")
        print(
            f"cold run of {options.memory} items: wall {cold.wall_s:.1f} s, CPU {cold.cpu_s:.1f} s, "
            f"peak resident memory {cold.peak_mb:.0f} MB, {cold.peak_mb / 1024:.2f}x 1 GB (goal at 100,000: under 1)"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
