"""Does a blip cost a run? The shipped RAG interpretation family (96 items) against the local
test server, through pytest, the plugin and the real client stack (litellm, no response cache),
while the server misbehaves:

- `500 for 3 s`: every request gets a 500 for the first 3 seconds after the first request,
  then the server recovers;
- `resets for 3 s`: every connection is reset for the first 3 seconds, then it recovers;
- `dead`: the server never answers a chat request (timeout 1 s): how long until the run ends.

For each it prints how many items ended with a result, the requests the server saw, and the
run's wall time. Goal: at least 90 of 96 items with a result after a 3 s blip (the breaker that
gave a model up at once left 0), and a dead server that still ends the run in seconds.

    python tests/perf/blips.py [--code OTHER_CHECKOUT] [--concurrency 4]

`--code` runs the benchmark with the package of another checkout (the server stays this one's),
to compare before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ragmatrix.testing.openai_server import OpenAIServer, Reply  # noqa: E402

MODELS = """models:
  - id: served
    kind: llm
    litellm: openai/served
    api_base: {api_base}
    concurrency: {concurrency}
    timeout: {timeout}
    retries: 3
"""


def project(folder: Path) -> None:
    (folder / "benchmark" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "benchmark" / "test_rag_interpretation.py", folder / "benchmark")
    shutil.copy(ROOT / "benchmark" / "data" / "rag_interpretation_data.yaml", folder / "benchmark" / "data")
    (folder / "pytest.ini").write_text("[pytest]\n")


def run(
    folder: Path, server: OpenAIServer, code: Path, concurrency: int, timeout: float
) -> tuple[int, int, float, float]:
    """(items with a result, items, seconds from the first request to the last, and to the end
    of the run)."""
    (folder / "benchmark" / "models.yaml").write_text(
        MODELS.format(api_base=server.base_url, concurrency=concurrency, timeout=timeout)
    )
    results = folder / "results"
    shutil.rmtree(results, ignore_errors=True)
    environment = {**os.environ, "PYTHONPATH": str(code)}
    command = [sys.executable, "-m", "pytest", "benchmark", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    command += ["--no-response-cache", "--results-dir", "results", "--run-all"]
    subprocess.run(command, cwd=folder, env=environment, capture_output=True, text=True)
    ended = time.time()
    asked = [r["time"] for r in server.requests if r["path"].endswith("chat/completions")] or [ended]
    # start-up (imports, collection) left out: it is the same with or without faults
    last, seconds = max(asked) - min(asked), ended - min(asked)
    path = results / "rag_interpretation.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return sum(r["status"] == "ok" for r in rows), len(rows), last, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose package runs the benchmark")
    parser.add_argument("--concurrency", type=int, default=4)
    options = parser.parse_args()
    scenarios = {
        "500 for 3 s": (lambda server: server.outage(3, from_first_request=True), 10.0),
        "resets for 3 s": (lambda server: server.outage(3, Reply.reset(), from_first_request=True), 10.0),
        "dead": (lambda server: server.on("", Reply.hang(3600)), 1.0),
    }
    print(f"package: {options.code}; concurrency {options.concurrency}, retries 3, breaker_after 5 (default)")
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        project(folder)
        for name, (misbehave, timeout) in scenarios.items():
            with OpenAIServer("yes") as server:
                misbehave(server)
                ok, items, last, seconds = run(folder, server, options.code, options.concurrency, timeout)
                print(
                    f"{name:15s} {ok:3d} of {items} items with a result   {server.count():4d} requests   "
                    f"last request {last:5.1f} s after the first, end of run {seconds:5.1f} s after it "
                    f"(timeout {timeout:g} s)"
                )


if __name__ == "__main__":
    main()
