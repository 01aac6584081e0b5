"""Is ragmatrix as fast as promptfoo on the same RAG prompts, as a user waits for it?

Both tools send the same chat requests (the RAG interpretation family's messages) to the same
local OpenAI-compatible test server, at 16 connections and with no response cache:

- 96 prompts (the shipped cases) on a server answering in 200 ms;
- 960 prompts (the shipped cases ten times, each copy with its own case name and question) on a
  server answering in 20 ms.

Each tool first runs once untimed (disk caches, promptfoo's database); then runs alternate
between the tools (`--repeat` rounds), and the medians of the whole process (start to exit,
wall time and CPU of the process and its children) and of the CPU spent before the server saw
the first request are printed, with the ratios ragmatrix / promptfoo. Every ragmatrix run
starts without `.benchmark_cache`, so its leaderboard's intervals are computed as in any run
with new results, not replayed from the memo of the previous run.
Goal: ragmatrix's whole-process wall time at or below promptfoo's at both sizes.

promptfoo sometimes exits 1 after a complete eval (its logger's "write after end" at exit): a
run that asked every request and said its eval was complete counts, with its wall time to the
exit, and the number of such runs is printed.

promptfoo is installed with npm into a folder under the system's temporary directory (or the
folder `--promptfoo-dir` names) the first time; without npm the comparison is skipped with a
message. It runs offline: no telemetry, no update check, its own configuration folder.

`--client litellm` sends ragmatrix's requests through litellm instead of its direct client.

    python tests/perf/promptfoo_comparison.py [--repeat 3] [--sizes 96,960] [--client litellm]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from process_cost import ProcessCost, load_average, run_measured  # noqa: E402

from ragmatrix.families import rag  # noqa: E402
from ragmatrix.suite.loader import load_suite  # noqa: E402
from ragmatrix.testing.openai_server import OpenAIServer  # noqa: E402

FAMILY = "rag_interpretation"
CONNECTIONS = 16
SIZES = {96: 0.2, 960: 0.02}  # prompts -> the server's latency in seconds
MODELS = f"""models:
  - id: served
    kind: llm
    litellm: openai/served
    api_base: {{api_base}}
    concurrency: {CONNECTIONS}
    timeout: 30
    retries: 2
    client: {{client}}
"""
PROMPTFOO_ENV = {"PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1"}


@dataclass
class Figures:
    wall_s: float
    cpu_s: float
    first_request_cpu_s: float
    requests: int


def promptfoo_command(folder: Path) -> list[str] | None:
    """The promptfoo executable, installed into `folder` with npm when it is not there yet;
    None (with a message) when that cannot be done."""
    executable = folder / "node_modules" / ".bin" / "promptfoo"
    if executable.exists():
        return [str(executable)]
    npm = shutil.which("npm")
    if npm is None:
        print("promptfoo comparison skipped: npm is not installed")
        return None
    folder.mkdir(parents=True, exist_ok=True)
    print(f"installing promptfoo with npm into {folder} ...", flush=True)
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), "promptfoo"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not executable.exists():
        print(f"promptfoo comparison skipped: npm install promptfoo failed\n{done.stderr[-1500:]}")
        return None
    return [str(executable)]


def write_cases(data: Path, copies: int) -> None:
    """The shipped RAG cases, or `copies` copies of them, each with its own name and question
    (identical requests would be asked once by ragmatrix and `copies` times by promptfoo)."""
    shipped = ROOT / "benchmark" / "data" / f"{FAMILY}_data.yaml"
    if copies == 1:
        shutil.copy(shipped, data / shipped.name)
        return
    cases = yaml.safe_load(shipped.read_text())[FAMILY]  # anchors resolved
    repeated = []
    for copy_index in range(copies):
        for case in cases:
            twin = copy.deepcopy(case)
            twin["case"] = f"{case['case']}_copy{copy_index}"
            twin["input"]["prompt"] = f"{case['input']['prompt']} (copy {copy_index})"
            repeated.append(twin)
    (data / shipped.name).write_text(yaml.safe_dump({FAMILY: repeated}, sort_keys=False))


def ragmatrix_project(folder: Path, copies: int, api_base: str, client: str = "auto") -> list[list[dict[str, str]]]:
    """A benchmark project with the RAG family only; returns the messages of its items."""
    data = folder / "benchmark" / "data"
    data.mkdir(parents=True)
    shutil.copy(ROOT / "benchmark" / f"test_{FAMILY}.py", folder / "benchmark")
    write_cases(data, copies)
    (folder / "benchmark" / "models.yaml").write_text(MODELS.format(api_base=api_base, client=client))
    (folder / "pytest.ini").write_text("[pytest]\n")
    suite = load_suite(data, [FAMILY], root=folder)
    if suite.problems:
        sys.exit("\n".join(problem.line() for problem in suite.problems))
    return [rag.messages(case) for case in suite.cases[FAMILY]]


def promptfoo_config(folder: Path, conversations: list[list[dict[str, str]]], api_base: str) -> Path:
    """The same requests for promptfoo: a prompt whose text is a JSON list of messages is sent
    as those messages."""
    config = {
        "description": "ragmatrix comparison",
        "prompts": ["{{ messages }}"],
        "providers": [{"id": "openai:chat:served", "config": {"apiBaseUrl": api_base, "apiKey": "no-key"}}],
        "tests": [{"vars": {"messages": json.dumps(messages)}} for messages in conversations],
    }
    path = folder / "promptfooconfig.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_ragmatrix(folder: Path, server: OpenAIServer) -> ProcessCost:
    shutil.rmtree(folder / ".benchmark_cache", ignore_errors=True)
    command = [sys.executable, "-m", "pytest", "benchmark", "-q", "-p", "no:cacheprovider"]
    command += ["--no-response-cache", "--results-dir", "results", "--run-all", "-k", "served"]
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return run_measured(command, cwd=folder, env=environment, server=server)


def run_promptfoo(executable: list[str], config: Path, server: OpenAIServer) -> ProcessCost:
    command = [*executable, "eval", "-c", str(config), "--max-concurrency", str(CONNECTIONS)]
    command += ["--no-cache", "--no-table", "--no-progress-bar"]
    settings = config.parent / "promptfoo-home"
    environment = {**os.environ, **PROMPTFOO_ENV, "PROMPTFOO_CONFIG_DIR": str(settings)}
    return run_measured(command, cwd=config.parent, env=environment, server=server)


def sent(server: OpenAIServer) -> list[str]:
    """The message lists the server was asked, in a comparable form."""
    bodies = [r["body"] for r in server.requests if r["path"].endswith("chat/completions")]
    return sorted(json.dumps(body.get("messages"), sort_keys=True) for body in bodies if isinstance(body, dict))


# What promptfoo prints once its eval is done and stored.
EVAL_COMPLETE = "Evaluation complete"
CRASHED_AT_EXIT: dict[str, int] = {}  # per tool: runs that completed their eval and then exited with an error


def measure(tool: str, run: Any, server: OpenAIServer, expected: list[str]) -> Figures:
    server.reset()
    done = run()
    asked = sent(server)
    if done.returncode not in (0, 100):  # promptfoo exits 100 when an assertion fails; none is set
        completed = EVAL_COMPLETE in done.stdout + done.stderr and asked == expected
        if not completed:
            sys.exit(f"{tool} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
        CRASHED_AT_EXIT[tool] = CRASHED_AT_EXIT.get(tool, 0) + 1  # the eval was whole: it counts
    if asked != expected:
        sys.exit(f"{tool} sent {len(asked)} requests, not the {len(expected)} expected ones")
    first = done.first_request_cpu_s if done.first_request_cpu_s is not None else float("nan")
    return Figures(done.wall_s, done.cpu_s, first, len(asked))


def median_of(runs: list[Figures], name: str) -> float:
    return statistics.median(getattr(run, name) for run in runs)


def compare(size: int, executable: list[str], repeat: int, client: str) -> None:
    latency = SIZES[size]
    with tempfile.TemporaryDirectory() as temporary, OpenAIServer("yes", latency=latency) as server:
        folder = Path(temporary)
        conversations = ragmatrix_project(folder, size // 96, server.base_url, client)
        config = promptfoo_config(folder, conversations, server.base_url)
        expected = sorted(json.dumps(messages, sort_keys=True) for messages in conversations)
        tools = {
            "ragmatrix": lambda: run_ragmatrix(folder, server),
            "promptfoo": lambda: run_promptfoo(executable, config, server),
        }
        for name in tools:
            measure(name, tools[name], server, expected)  # untimed: warm disk caches
        runs: dict[str, list[Figures]] = {name: [] for name in tools}
        for round_ in range(repeat):
            order = list(tools) if round_ % 2 == 0 else list(reversed(tools))
            for name in order:
                runs[name].append(measure(name, tools[name], server, expected))
    print(f"\n{size} prompts, server latency {latency * 1000:.0f} ms ({len(expected)} requests per run)")
    print(f"  {'':10} {'wall s':>8} {'CPU s':>8} {'CPU before 1st request s':>26}")
    for name in tools:
        print(
            f"  {name:10} {median_of(runs[name], 'wall_s'):8.2f} {median_of(runs[name], 'cpu_s'):8.2f} "
            f"{median_of(runs[name], 'first_request_cpu_s'):26.2f}"
        )
    ratio = {
        figure: median_of(runs["ragmatrix"], figure) / median_of(runs["promptfoo"], figure)
        for figure in ("wall_s", "cpu_s", "first_request_cpu_s")
    }
    crashed = {tool: count for tool, count in CRASHED_AT_EXIT.items() if count}
    if crashed:
        print(f"  runs that completed their eval and exited with an error, counted: {crashed}")
    CRASHED_AT_EXIT.clear()
    verdict = "met" if ratio["wall_s"] <= 1.0 else "not met"
    print(
        f"  ragmatrix / promptfoo: wall {ratio['wall_s']:.2f}x (goal: at most 1.00x, {verdict}), "
        f"CPU {ratio['cpu_s']:.2f}x, CPU before the first request {ratio['first_request_cpu_s']:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="alternated rounds per size; medians are printed")
    parser.add_argument("--sizes", default="96,960", help="prompt counts to run, of 96 and 960")
    parser.add_argument(
        "--promptfoo-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "ragmatrix-perf-promptfoo",
        help="where promptfoo is (or gets) installed",
    )
    parser.add_argument("--client", choices=["auto", "litellm"], default="auto", help="ragmatrix's client setting")
    options = parser.parse_args()
    executable = promptfoo_command(options.promptfoo_dir)
    if executable is None:
        return
    sizes = [int(size) for size in options.sizes.split(",")]
    print(
        f"{CONNECTIONS} connections, no response cache, medians of {options.repeat} alternated runs; "
        f"ragmatrix's client: {options.client}"
    )
    print(f"load average {load_average()} at the start")
    for size in sizes:
        compare(size, executable, options.repeat, options.client)
    print(f"\nload average {load_average()} at the end")


if __name__ == "__main__":
    main()
