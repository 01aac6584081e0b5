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
Before each script it waits (`--settle`, 90 s at most) for the 1-minute load average to fall
below 0.5: the script before may leave the machine busy for a while (text_retrieval's threads
and its cache files), and a fully cached run of the shipped benchmark read 1.11 of collect-only
just after it and 0.96 to 1.03 minutes later (load average 0.7 to 0.8).

    python tests/perf/goals.py [--repeat 3] [--mteb-python PATH] [--skip many_items]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
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


QUIET = 0.5  # the 1-minute load average a script starts under, where the wait allows


def settle(most_s: float) -> None:
    """Wait up to `most_s` seconds for the 1-minute load average to fall below `QUIET`."""
    started = time.monotonic()
    while os.getloadavg()[0] >= QUIET and (left := most_s - (time.monotonic() - started)) > 0:
        time.sleep(min(5.0, left))
    waited = time.monotonic() - started
    if waited >= 1:
        print(f"(waited {waited:.0f} s for the load average to fall below {QUIET})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="alternated rounds in each script")
    parser.add_argument("--mteb-python", default=None, help="an interpreter whose environment has mteb")
    parser.add_argument("--skip", action="append", default=[], help="a script to leave out (repeatable)")
    parser.add_argument("--settle", type=float, default=90.0, help="most seconds to wait for a quiet machine")
    options = parser.parse_args()
    goals: list[str] = []
    for name, arguments in scripts(options).items():
        settle(options.settle)
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
