"""How much faster is the LLM matrix when every item's requests run at the model's concurrency?

Starts the local OpenAI-compatible test server with a fixed latency per request (200 ms), then
runs the shipped benchmark's RAG interpretation family (96 items) and part of its zELO family
through pytest, the plugin and the real client stack (no response cache), at concurrency 1 and
at concurrency 16, alternated `--repeat` times (medians are printed: the machine may be
shared), and prints, per family and for both families in one session (the whole LLM matrix):

- the test phase (collection and interpreter start-up left out) and, within it, the request
  phase: from the first request the server sees to the last item's end;
- the whole process, start to exit, as a user waits for it, with its CPU time;
- the fixed CPU before the first request: what the process had spent when the server saw its
  first chat request, paid once per run whatever the number of items (interpreter, pytest,
  the plugin, the client);
- the speed-ups, and the harness overhead per item: the request phase minus the server's own
  time (requests x latency / concurrency), divided by the number of items.

Goals: request phase at least 10x for RAG interpretation and 8x for the whole LLM matrix; whole
process at least 5x for RAG interpretation; fixed CPU before the first request under 2 s.

Every run's answers are the same, so from the second run on the leaderboard's interval comes
from the memo in `.benchmark_cache`, as in any rerun with unchanged results. With
`--fresh-intervals` every run computes it (importing scipy for its bootstrap at the end), as a
run with new results does.

    python tests/perf/llm_throughput.py [--latency 0.2] [--concurrency 16] [--zelo EXPR] [--repeat 3]
                                        [--fresh-intervals]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from process_cost import load_average, run_measured  # noqa: E402

from ragmatrix.testing.openai_server import OpenAIServer  # noqa: E402

# Read as "yes" by an explicit RAG case and as a score by a zELO judge (a tagged line).
ANSWER = "yes\nSCORE: 0.5"

# Records the test phase of the run: from the first item to the last, collection left out.
CONFTEST = """
import json, os, time

import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session):
    started = time.time()
    yield
    with open(os.environ["RAGMATRIX_PERF_TIMINGS"], "w") as handle:
        json.dump({"started": started, "ended": time.time(), "items": len(session.items)}, handle)
"""

MODELS = """models:
  - id: served
    kind: llm
    litellm: openai/served
    api_base: {api_base}
    concurrency: {concurrency}
    timeout: 30
    retries: 2
"""


@dataclass
class Timing:
    run_s: float  # the test phase
    start_s: float  # of which before the first request: paid once per process
    wall_s: float  # the whole process
    cpu_s: float  # the whole process's CPU
    fixed_cpu_s: float  # CPU spent when the server saw the first chat request
    items: int
    requests: int
    max_in_flight: int

    @property
    def requests_s(self) -> float:
        return self.run_s - self.start_s


def project(folder: Path) -> None:
    """A benchmark project with the shipped RAG and zELO modules and data."""
    (folder / "benchmark" / "data").mkdir(parents=True)
    for family in ("rag_interpretation", "zelo_battles"):
        shutil.copy(ROOT / "benchmark" / f"test_{family}.py", folder / "benchmark")
        shutil.copy(ROOT / "benchmark" / "data" / f"{family}_data.yaml", folder / "benchmark" / "data")
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "pytest.ini").write_text("[pytest]\n")


def run(folder: Path, server: OpenAIServer, concurrency: int, selection: str, fresh: bool) -> Timing:
    (folder / "benchmark" / "models.yaml").write_text(MODELS.format(api_base=server.base_url, concurrency=concurrency))
    timings = folder / "timings.json"
    if fresh:  # no memo of the last run's leaderboard intervals: computed, as after new results
        shutil.rmtree(folder / ".benchmark_cache", ignore_errors=True)
    server.reset()
    environment = {**os.environ, "RAGMATRIX_PERF_TIMINGS": str(timings), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pytest", "benchmark", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    command += ["--no-response-cache", "--results-dir", "results", "--run-all", "-k", selection]
    done = run_measured(command, cwd=folder, env=environment, server=server)
    if done.returncode != 0:
        sys.exit(f"the run failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    recorded = json.loads(timings.read_text())
    first = min(r["time"] for r in server.requests if r["path"].endswith("chat/completions"))
    return Timing(
        run_s=recorded["ended"] - recorded["started"],
        start_s=first - recorded["started"],
        wall_s=done.wall_s,
        cpu_s=done.cpu_s,
        fixed_cpu_s=done.first_request_cpu_s if done.first_request_cpu_s is not None else float("nan"),
        items=recorded["items"],
        requests=server.count(),
        max_in_flight=server.max_concurrency,
    )


def medians(timings: list[Timing]) -> Timing:
    """Each figure's median over alternated runs."""
    values = {f.name: statistics.median(getattr(t, f.name) for t in timings) for f in fields(Timing)}
    return Timing(**values)


def overhead_ms(timing: Timing, latency: float, concurrency: int) -> float:
    server_time = timing.requests * latency / concurrency
    return 1000 * (timing.requests_s - server_time) / timing.items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--zelo",
        default="antibiotic_resistance or database_index",
        help="a -k expression choosing the zELO cases (all of them take minutes at concurrency 1)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="alternated runs per setting; medians are printed")
    parser.add_argument("--only", choices=["rag_interpretation", "zelo_battles", "whole LLM matrix"], default=None)
    parser.add_argument("--fresh-intervals", action="store_true", help="compute the leaderboard's intervals every run")
    options = parser.parse_args()
    selections = {
        "rag_interpretation": "test_rag_interpretation and served",
        "zelo_battles": f"test_zelo_battles and served and ({options.zelo})",
    }
    selections["whole LLM matrix"] = f"({selections['rag_interpretation']}) or ({selections['zelo_battles']})"
    if options.only:
        selections = {options.only: selections[options.only]}
    goals = {"rag_interpretation": 10.0, "whole LLM matrix": 8.0}
    with tempfile.TemporaryDirectory() as temporary, OpenAIServer(ANSWER, latency=options.latency) as server:
        folder = Path(temporary)
        project(folder)
        print(
            f"{options.latency * 1000:.0f} ms per request; concurrency 1 vs {options.concurrency}; "
            f"medians of {options.repeat} alternated runs; intervals "
            f"{'computed every run' if options.fresh_intervals else 'from the memo after the first run'}; "
            f"load average {load_average()} at the start"
        )
        for name, selection in selections.items():
            runs: dict[int, list[Timing]] = {1: [], options.concurrency: []}
            for round_ in range(options.repeat):
                order = [1, options.concurrency] if round_ % 2 == 0 else [options.concurrency, 1]
                for concurrency in order:
                    runs[concurrency].append(run(folder, server, concurrency, selection, options.fresh_intervals))
            serial, parallel = medians(runs[1]), medians(runs[options.concurrency])
            goal = f"  (goal: at least {goals[name]:g}x)" if name in goals else ""
            print(f"{name}: {serial.items} items, {serial.requests} requests{goal}")
            print(
                f"  request phase   {serial.requests_s:7.2f} s / {parallel.requests_s:6.2f} s   "
                f"speed-up {serial.requests_s / parallel.requests_s:5.2f}x   "
                f"(at most {serial.max_in_flight:g} / {parallel.max_in_flight:g} in flight)"
            )
            print(
                f"  test phase      {serial.run_s:7.2f} s / {parallel.run_s:6.2f} s   "
                f"speed-up {serial.run_s / parallel.run_s:5.2f}x   "
                f"(of which before the first request: {serial.start_s:.2f} s / {parallel.start_s:.2f} s)"
            )
            whole_goal = "   (goal: at least 5x)" if name == "rag_interpretation" else ""
            print(
                f"  whole process   {serial.wall_s:7.2f} s / {parallel.wall_s:6.2f} s   "
                f"speed-up {serial.wall_s / parallel.wall_s:5.2f}x{whole_goal}"
            )
            print(f"  whole-process CPU {serial.cpu_s:5.2f} s / {parallel.cpu_s:5.2f} s")
            print(
                f"  fixed CPU before the first request: {serial.fixed_cpu_s:.2f} s / {parallel.fixed_cpu_s:.2f} s"
                "   (goal: under 2 s)"
            )
            print(
                f"  harness overhead per item: {overhead_ms(serial, options.latency, 1):.1f} ms / "
                f"{overhead_ms(parallel, options.latency, options.concurrency):.1f} ms"
            )
        print(f"load average {load_average()} at the end")


if __name__ == "__main__":
    main()
