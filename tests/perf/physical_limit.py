"""How close is ragmatrix to the physical limit of asking a server, as a user waits for it?

The reference is the least any Python client needs (`tests/perf/bare_client.py`: asyncio and
aiohttp, start-up included). Both send the same RAG interpretation prompts to the same local
OpenAI-compatible test server at 16 connections, ragmatrix with no response cache and its
leaderboard's intervals computed afresh (as in any run with new results):

- 96 prompts (the shipped cases) on a server answering in 200 ms;
- 960 prompts (the shipped cases ten times, each copy its own case) on a server answering in 20 ms.

Each tool runs once untimed (disk caches), then the two alternate (`--repeat` rounds) and the
medians are printed, each goal as a ratio measured in this run. Every ragmatrix run starts with
no response cache, no remembered statistics or leaderboard and no results; the data files'
parsed copies (`.benchmark_cache/documents/`) stay, as between two runs on a user's machine
(`--parse-data-files` removes them too, so that every run parses the YAML):

- whole process, start to exit: ragmatrix / bare client (goals: at most 1.5x at 96 prompts and
  2x at 960);
- CPU spent before the server saw the first request: ragmatrix / bare client (goal: at most 2x);
- marginal CPU per item: the whole process's CPU at 960 prompts minus at 96, per extra prompt
  (goal: at most 1 ms for ragmatrix; the bare client's is printed beside it);
- reported latency: the p50 of ragmatrix's cost figures (from send to the full answer) against
  the bare client's own p50 on the same server (goal: within 10 %).

Beside each median ratio, and beside each marginal, the lowest and highest single round are
printed (a round runs the two tools side by side; a round's marginal is its run at 960 prompts
less its run at 96): how far one run on this machine moves from the median.

Beside the goal on the CPU before the first request, the floor under it is measured in the same
run: what pytest itself costs to start and collect an empty folder with this environment's
plugins (ragmatrix's entry point among them), plus the import of httptools, the HTTP parser
of ragmatrix's direct route (the bare client imports aiohttp, about 0.1 s more), and what
ragmatrix spends above that floor. The floor's line names the distributions whose pytest plugins
were loaded, and says where one of them imported trio (anyio's plugin does wherever trio is
installed, as the test extra's selenium installs it: about 0.06 s that a plain install of
ragmatrix does not pay), and what anyio's plugin itself costs (pytest loads it wherever anyio is
installed, and httpx and openai install it): the median difference of floors measured in pairs,
with and without `-p no:anyio`, alternated. Run with the Python of a plain install (`pip
install ragmatrix`, no extras) to measure what a user's environment pays.

    python tests/perf/physical_limit.py [--repeat 3] [--sizes 96,960] [--parse-data-files]
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
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from process_cost import ProcessCost, load_average, run_measured  # noqa: E402
from promptfoo_comparison import CONNECTIONS, SIZES, ragmatrix_project, sent  # noqa: E402

from ragmatrix.cost.record import CostRecord  # noqa: E402
from ragmatrix.testing.openai_server import OpenAIServer  # noqa: E402

FAMILY = "rag_interpretation"
PARSE_DATA_FILES = False  # --parse-data-files: every run parses the YAML again (no `documents/`)


@dataclass
class Figures:
    wall_s: float
    cpu_s: float
    first_request_cpu_s: float
    p50_ms: float


def run_ragmatrix(folder: Path, server: OpenAIServer) -> tuple[ProcessCost, float]:
    """A cold run, and the p50 request latency its cost figures report."""
    cache = folder / ".benchmark_cache"
    if PARSE_DATA_FILES:
        shutil.rmtree(cache, ignore_errors=True)
    else:  # the data files stay parsed, as on a user's machine between runs; nothing else is kept
        for kept in cache.iterdir() if cache.is_dir() else ():
            if kept.name == "documents":
                continue
            if kept.is_dir():
                shutil.rmtree(kept)
            else:
                kept.unlink()
    shutil.rmtree(folder / "results", ignore_errors=True)
    command = [sys.executable, "-m", "pytest", "benchmark", "-q", "-p", "no:cacheprovider"]
    command += ["--no-response-cache", "--results-dir", "results", "--run-all", "-k", "served"]
    done = run_measured(command, cwd=folder, env={**os.environ, "PYTHONPATH": str(ROOT)}, server=server)
    costs = folder / "results" / "costs" / f"{FAMILY}.jsonl"
    p50 = float("nan")
    if costs.is_file():
        for line in costs.read_text().splitlines():
            record = CostRecord.model_validate(json.loads(line))
            if record.model == "served":
                p50 = record.request_latencies.quantile(0.5) or float("nan")
    return done, p50


def run_bare(folder: Path, server: OpenAIServer) -> tuple[ProcessCost, float]:
    command = [sys.executable, str(HERE / "bare_client.py"), str(folder / "conversations.json"), server.base_url]
    command += ["--concurrency", str(CONNECTIONS)]
    done = run_measured(command, cwd=folder, env=dict(os.environ), server=server)
    try:
        p50 = float(json.loads(done.stdout.strip().splitlines()[-1])["p50_ms"])
    except (ValueError, IndexError, KeyError):
        p50 = float("nan")
    return done, p50


def measure(tool: str, run: object, server: OpenAIServer, expected: list[str]) -> Figures:
    server.reset()
    done, p50 = run()  # type: ignore[operator]
    if done.returncode != 0:
        sys.exit(f"{tool} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    asked = sent(server)
    if asked != expected:
        sys.exit(f"{tool} sent {len(asked)} requests, not the {len(expected)} expected ones")
    first = done.first_request_cpu_s if done.first_request_cpu_s is not None else float("nan")
    return Figures(done.wall_s, done.cpu_s, first, p50)


def median_of(runs: list[Figures], name: str) -> float:
    return statistics.median(getattr(run, name) for run in runs)


def compare(size: int, repeat: int) -> tuple[dict[str, dict[str, float]], dict[str, list[Figures]]]:
    """Medians of each figure per tool, at one size, and each round's figures."""
    latency = SIZES[size]
    with tempfile.TemporaryDirectory() as temporary, OpenAIServer("yes", latency=latency) as server:
        folder = Path(temporary)
        conversations = ragmatrix_project(folder, size // 96, server.base_url)
        (folder / "conversations.json").write_text(json.dumps(conversations))
        expected = sorted(json.dumps(messages, sort_keys=True) for messages in conversations)
        tools = {"ragmatrix": lambda: run_ragmatrix(folder, server), "bare client": lambda: run_bare(folder, server)}
        for name in tools:
            measure(name, tools[name], server, expected)  # untimed: warm disk caches
        runs: dict[str, list[Figures]] = {name: [] for name in tools}
        for round_ in range(repeat):
            order = list(tools) if round_ % 2 == 0 else list(reversed(tools))
            for name in order:
                runs[name].append(measure(name, tools[name], server, expected))
    print(f"\n{size} prompts, server latency {latency * 1000:.0f} ms, load average {load_average()}")
    print(f"  {'':12} {'wall s':>8} {'CPU s':>8} {'CPU before 1st request s':>26} {'p50 ms':>8}")
    figures = {name: {f: median_of(runs[name], f) for f in Figures.__dataclass_fields__} for name in tools}
    for name, values in figures.items():
        print(
            f"  {name:12} {values['wall_s']:8.2f} {values['cpu_s']:8.2f} "
            f"{values['first_request_cpu_s']:26.2f} {values['p50_ms']:8.1f}"
        )
    return figures, runs


def rounds_range(values: list[float], unit: str) -> str:
    """How far single rounds went from the median: their lowest and highest figure."""
    return f"single rounds {min(values):.2f}{unit} to {max(values):.2f}{unit}" if len(values) > 1 else ""


def per_round(runs: dict[str, list[Figures]], name: str) -> list[float]:
    """ragmatrix's figure over the bare client's, round by round (the two ran side by side)."""
    pairs = zip(runs["ragmatrix"], runs["bare client"], strict=True)
    return [getattr(ours, name) / getattr(bare, name) for ours, bare in pairs]


# pytest collecting an empty folder with the environment's plugins, then the HTTP parser of
# ragmatrix's direct route (httptools) imported: the process's own CPU at that point, printed
# before it exits (its shutdown is no part of a start), with the distributions whose pytest
# plugins were loaded, and whether one of them imported trio (anyio's plugin does where trio
# is installed: here by the test extra's selenium, not by ragmatrix's own dependencies).
FLOOR = (
    "import resource, sys, pytest\n"
    "class Plugins:\n"
    "    def pytest_configure(self, config):\n"
    "        self.names = sorted({d.project_name for _, d in config.pluginmanager.list_plugin_distinfo()})\n"
    "plugins = Plugins()\n"
    "pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', *sys.argv[1:]], plugins=[plugins])\n"
    "import httptools\n"
    "used = resource.getrusage(resource.RUSAGE_SELF)\n"
    "trio = ' (trio imported)' if 'trio' in sys.modules else ''\n"
    "print(f\"{used.ru_utime + used.ru_stime} {', '.join(plugins.names)}{trio}\", file=sys.stderr)\n"
)


def floor_once(empty: str, *pytest_args: str) -> tuple[float, str]:
    """The CPU one floor process spent (`FLOOR`, in the folder `empty`), and the plugins it
    loaded; `pytest_args` are added to pytest's command line."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-c", FLOOR, *pytest_args], cwd=empty, env=env, capture_output=True, text=True
    )
    try:
        cpu, _, plugins = done.stderr.strip().splitlines()[-1].partition(" ")
        return float(cpu), plugins
    except (ValueError, IndexError):
        sys.exit(f"the floor's measure failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def floor(repeat: int) -> tuple[float, str, float | None]:
    """The least CPU a pytest plugin sending its requests as ragmatrix does spends before the first
    (median of `repeat` runs, after one untimed run that warms the disk caches), the plugins
    loaded in it, and where anyio's plugin is among them, what it costs: the median of
    `repeat` differences, each between a run and one with `-p no:anyio` beside it, alternated
    (the difference of two medians measured one after the other read 0.03 s below zero on a
    shared 2-core machine)."""
    spent: list[float] = []
    anyio: list[float] = []
    with tempfile.TemporaryDirectory() as empty:
        _, plugins = floor_once(empty)
        with_anyio = "anyio" in plugins.removesuffix(" (trio imported)").split(", ")
        if with_anyio:
            floor_once(empty, "-p", "no:anyio")
        for round_ in range(repeat):
            if not with_anyio:
                spent.append(floor_once(empty)[0])
                continue
            order = [(), ("-p", "no:anyio")] if round_ % 2 == 0 else [("-p", "no:anyio"), ()]
            cpu = {arguments: floor_once(empty, *arguments)[0] for arguments in order}
            spent.append(cpu[()])
            anyio.append(cpu[()] - cpu[("-p", "no:anyio")])
    return statistics.median(spent), plugins, statistics.median(anyio) if anyio else None


def verdict(value: float, goal: float, spread: str = "") -> str:
    return f"goal: at most {goal:g}x, {'met' if value <= goal else 'NOT met'}" + (f"; {spread}" if spread else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="alternated rounds per size; medians are printed")
    parser.add_argument("--sizes", default="96,960", help="prompt counts to run, of 96 and 960")
    parser.add_argument(
        "--parse-data-files", action="store_true", help="parse the data files in every run (no parsed copy kept)"
    )
    options = parser.parse_args()
    global PARSE_DATA_FILES
    PARSE_DATA_FILES = options.parse_data_files
    sizes = [int(size) for size in options.sizes.split(",")]
    print(f"{CONNECTIONS} connections, medians of {options.repeat} alternated runs, load average {load_average()}")
    compared = {size: compare(size, options.repeat) for size in sizes}
    results = {size: figures for size, (figures, _) in compared.items()}
    rounds = {size: runs for size, (_, runs) in compared.items()}
    print("\ngoals (ragmatrix / bare client, measured in this run; medians, and beside them the range of")
    print("single rounds, each the two tools' runs side by side):")
    wall_goals = {96: 1.5, 960: 2.0}
    for size, figures in results.items():
        ours, bare = figures["ragmatrix"], figures["bare client"]
        wall = ours["wall_s"] / bare["wall_s"]
        spread = rounds_range(per_round(rounds[size], "wall_s"), "x")
        print(f"  whole process, {size} prompts: {wall:.2f}x ({verdict(wall, wall_goals[size], spread)})")
        before = ours["first_request_cpu_s"] / bare["first_request_cpu_s"]
        spread = rounds_range(per_round(rounds[size], "first_request_cpu_s"), "x")
        print(f"  CPU before the first request, {size} prompts: {before:.2f}x ({verdict(before, 2.0, spread)})")
        p50 = ours["p50_ms"] / bare["p50_ms"]
        print(f"  reported p50 latency, {size} prompts: {p50:.3f}x ({verdict(p50, 1.10)})")
    least, plugins, anyio = floor(options.repeat)
    bare_first = min(figures["bare client"]["first_request_cpu_s"] for figures in results.values())
    print(
        f"  floor under the CPU before the first request (pytest with this environment's plugins, "
        f"collecting nothing, plus httptools' import): {least:.2f} s = {least / bare_first:.2f}x the bare client's"
        f"\n    (plugins of: {plugins})"
    )
    if anyio is not None:
        # anyio's plugin comes with anyio (httpx and openai install it), whatever the tests use
        print(
            f"    of which anyio's plugin: {anyio:.2f} s = {anyio / bare_first:.2f}x the bare client's (median of "
            "paired runs with `-p no:anyio`, which leaves it out where no test uses anyio's marker)"
        )
    for size, figures in results.items():
        above = figures["ragmatrix"]["first_request_cpu_s"] - least
        print(f"  ragmatrix's CPU before the first request above that floor, {size} prompts: {above:.2f} s")
    if len(results) == 2:
        small, large = sorted(results)
        extra = large - small
        for name in ("ragmatrix", "bare client"):
            per_item = 1000 * (results[large][name]["cpu_s"] - results[small][name]["cpu_s"]) / extra
            # each round's run at the larger size less the same round's at the smaller
            pairs = zip(rounds[small][name], rounds[large][name], strict=True)
            spread = rounds_range([1000 * (b.cpu_s - a.cpu_s) / extra for a, b in pairs], " ms")
            parts = [f"goal: at most 1 ms, {'met' if per_item <= 1.0 else 'NOT met'}"] if name == "ragmatrix" else []
            parts += [spread] if spread else []
            goal = f" ({'; '.join(parts)})" if parts else ""
            print(f"  marginal CPU per item, {name}: {per_item:.2f} ms{goal}")
    print(f"load average {load_average()} at the end")


if __name__ == "__main__":
    main()
