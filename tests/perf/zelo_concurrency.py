"""How much faster are zELO battles when a case's pairs are judged concurrently?

Starts the local OpenAI-compatible test server in its own process with a fixed latency per
request, then judges the same 200 distinct pairs through the real client stack (litellm, the
client layer's semaphore and timeouts, no response cache) with concurrency 1 and with
concurrency 16, and prints both times and their ratio. The goal is a ratio of at least 8.

    python tests/perf/zelo_concurrency.py [--pairs 200] [--latency 0.1] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ragmatrix.models import aio  # noqa: E402
from ragmatrix.models.chat import LLM  # noqa: E402
from ragmatrix.models.providers.litellm_chat import LitellmChat  # noqa: E402
from ragmatrix.models.spec import ModelSpec  # noqa: E402
from ragmatrix.zelo import battles as zelo  # noqa: E402
from ragmatrix.zelo.judges import LLMJudge  # noqa: E402

ANSWER = json.dumps({"reasoning": "Document B answers the query.", "score": 0.5})


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    server = [sys.executable, "-W", "ignore::RuntimeWarning", "-m", "ragmatrix.testing.openai_server"]
    command = [*server, "--latency", str(latency), "--answer", ANSWER]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def judge_pairs(api_base: str, concurrency: int, pairs: int) -> float:
    """Seconds to judge `pairs` distinct pairs of one query with this concurrency limit."""
    documents = next(d for d in range(2, 200) if d * (d - 1) // 2 >= pairs)
    texts = [f"Document {i}: a paragraph about topic {i}." for i in range(documents)]
    plan = [
        zelo.Matchup(index, 0, a, b, False)
        for index, (a, b) in enumerate(itertools.islice(itertools.combinations(range(documents), 2), pairs))
    ]
    spec = ModelSpec(
        id="judge", kind="llm", litellm="openai/judge", api_base=api_base, concurrency=concurrency, timeout=30
    )
    judge = LLMJudge(LLM(spec, LitellmChat(spec), cache=None), "Judge.", "A query?", texts)
    started = time.perf_counter()
    judgements = aio.run(zelo.run_matchups(judge, plan))
    elapsed = time.perf_counter() - started
    assert len(judgements) == pairs and all(j.score == 0.5 for j in judgements)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=16)
    options = parser.parse_args()
    process, api_base = start_server(options.latency)
    try:
        judge_pairs(api_base, options.concurrency, 20)  # warm up: litellm's clients, the loop
        serial = judge_pairs(api_base, 1, options.pairs)
        parallel = judge_pairs(api_base, options.concurrency, options.pairs)
    finally:
        aio.close()
        process.terminate()
        process.wait()
    print(f"{options.pairs} pairs, {options.latency * 1000:.0f} ms per request")
    print(f"concurrency 1:  {serial:7.2f} s")
    print(f"concurrency {options.concurrency}: {parallel:7.2f} s")
    print(f"ratio:          {serial / parallel:7.2f} (goal: at least 8)")


if __name__ == "__main__":
    main()
