"""How close is a fully cached `pytest benchmark` to a bare `pytest --collect-only benchmark`?

Fills a temporary results directory with one real run of the shipped benchmark, then times
both commands several times and prints the medians and their ratio. A ratio near 1.0 means
the cache check, the store and the leaderboard add almost nothing to collection.

    python tests/perf/cached_rerun.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "sentence_transformers", "litellm", "scipy", "transformers")


def pytest_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "benchmark", "-q", "-p", "no:cacheprovider", *args]


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def heavy_imports(results: str) -> list[str]:
    script = (
        "import sys, pytest\n"
        f"pytest.main(['benchmark', '-q', '-p', 'no:cacheprovider', '--results-dir', {results!r}])\n"
        f"print('HEAVY', [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("HEAVY"))
    return eval(line[len("HEAVY ") :])  # a list literal printed just above


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as results:
        print("filling the store with one real run ...", flush=True)
        first = timed(pytest_command("--results-dir", results))
        collect = [timed(pytest_command("--collect-only", "--results-dir", results)) for _ in range(options.repeats)]
        cached = [timed(pytest_command("--results-dir", results)) for _ in range(options.repeats)]
        heavy = heavy_imports(results)
    collect_s, cached_s = statistics.median(collect), statistics.median(cached)
    print(f"first (computing) run:       {first:7.2f} s")
    print(f"pytest --collect-only:       {collect_s:7.2f} s (median of {options.repeats})")
    print(f"fully cached pytest run:     {cached_s:7.2f} s (median of {options.repeats})")
    print(f"ratio cached / collect-only: {cached_s / collect_s:7.2f}")
    print(f"heavy modules imported by the cached run: {heavy or 'none'}")


if __name__ == "__main__":
    main()
