"""Every speed goal, each measured against its baseline in this one run, printed together.

Runs the scripts that measure them, one after another, shows their output as it comes, and
ends with every line that states a goal:

- `physical_limit.py`: the whole process against a bare asyncio + aiohttp client (96 prompts at
  200 ms and 960 at 20 ms), the CPU before the first request, the marginal CPU per item and the
  reported p50 latency against the client's;
- `text_retrieval.py`: a cold text retrieval run against mteb's (with `--mteb-python`), and the
  share of the run spent timing lone queries;
- `cached_rerun.py`: a fully cached run of the shipped benchmark against collect-only;
- `many_items.py`: the same at 10,000 items, and the peak memory of a cold run of 100,000;
- `bow_stdlib.py`: the bag-of-words baseline on the whole standard library.

It takes most of an hour on a shared 2-core machine; `--skip NAME` leaves a script out. The
machine's load average is printed before and after each script: compare ratios, not seconds.

    python tests/perf/goals.py [--repeat 3] [--mteb-python PATH] [--skip many_items]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def scripts(options: argparse.Namespace) -> dict[str, list[str]]:
    repeat = str(options.repeat)
    mteb = ["--mteb-python", options.mteb_python] if options.mteb_python else []
    found = {
        "physical_limit": ["--repeat", repeat],
        "text_retrieval": ["--repeats", repeat, *mteb],
        "cached_rerun": ["--repeats", str(max(3, options.repeat))],
        "many_items": ["--items", "10000", "--repeats", repeat, "--memory", "100000"],
        "bow_stdlib": ["--repeat", "1"],
    }
    return {name: arguments for name, arguments in found.items() if name not in options.skip}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="alternated rounds in each script")
    parser.add_argument("--mteb-python", default=None, help="an interpreter whose environment has mteb")
    parser.add_argument("--skip", action="append", default=[], help="a script to leave out (repeatable)")
    options = parser.parse_args()
    goals: list[str] = []
    for name, arguments in scripts(options).items():
        print(f"\n=== {name} (load average {os.getloadavg()[0]:.1f})", flush=True)
        process = subprocess.Popen(
            [sys.executable, str(HERE / f"{name}.py"), *arguments], stdout=subprocess.PIPE, text=True, cwd=HERE
        )
        assert process.stdout is not None
        for line in process.stdout:
            print(line, end="", flush=True)
            if "goal" in line:
                goals.append(f"{name}: {line.strip()}")
        process.wait()
        if process.returncode != 0:
            goals.append(f"{name}: exited {process.returncode}, no figures")
    print("\n=== every goal, measured in this run")
    for line in goals:
        print(line)


if __name__ == "__main__":
    main()
