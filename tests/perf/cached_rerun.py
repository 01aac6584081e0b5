"""How close is a fully cached `pytest benchmark` to a bare `pytest --collect-only benchmark`?

Copies the committed results (which hold every item of the shipped benchmark) into a temporary
folder, then runs both commands `--repeats` times, alternated (which goes first changes every
round), and prints the medians of their wall and CPU time and the ratios cached / collect-only
(goal: at most 1.10). A ratio near 1.0 means the cache check, the store and the leaderboard add
almost nothing to collection. Both write and read bytecode as a user's machine does.

    python tests/perf/cached_rerun.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
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


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one process."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


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
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as temporary:
        results = str(Path(temporary) / "results")
        shutil.copytree(ROOT / "benchmark" / "results", results)
        kinds = {
            "collect": pytest_command("--collect-only", "--results-dir", results),
            "cached": pytest_command("--results-dir", results),
        }
        for command in kinds.values():
            timed(command)  # untimed: bytecode and disk caches warm, a first compaction done
        runs: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
        for round_ in range(options.repeats):
            for kind in kinds if round_ % 2 == 0 else reversed(kinds):
                runs[kind].append(timed(kinds[kind]))
        heavy = heavy_imports(results)
    wall = {kind: statistics.median(w for w, _ in found) for kind, found in runs.items()}
    cpu = {kind: statistics.median(c for _, c in found) for kind, found in runs.items()}
    print(f"pytest --collect-only:       {wall['collect']:7.2f} s wall, {cpu['collect']:6.2f} s CPU")
    print(f"fully cached pytest run:     {wall['cached']:7.2f} s wall, {cpu['cached']:6.2f} s CPU")
    print(
        f"ratio cached / collect-only: {wall['cached'] / wall['collect']:.2f} wall, "
        f"{cpu['cached'] / cpu['collect']:.2f} CPU (goal: at most 1.10; medians of {options.repeats} alternated)"
    )
    print(f"heavy modules imported by the cached run: {heavy or 'none'}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
