"""The client layer against servers under load, through the direct client and the local test
server, counting outcomes and timing the whole:

- `rate 3/s`: a server that accepts 3 requests a second, 34 questions at concurrency 16 (3
  retries), its 429s with and without Retry-After: answers, refusals, seconds, and the seconds
  against the 34 / 3 the rate allows;
- `one at a time`: a server that answers one request at a time, 1 s each, the others queueing;
  20 questions at concurrency 4 and timeout 3 s: answers, and requests the server saw;
- `50 MB answer`: the bytes of the body the client read, and the characters kept.

    python tests/perf/busy_servers.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ragmatrix.foundations.context import start_run  # noqa: E402
from ragmatrix.models import aio  # noqa: E402
from ragmatrix.models.chat import LLM  # noqa: E402
from ragmatrix.models.openai_chat import OpenAIChat  # noqa: E402
from ragmatrix.models.spec import ModelSpec  # noqa: E402
from ragmatrix.testing.openai_server import OpenAIServer, Reply  # noqa: E402


def model(server: OpenAIServer, **settings: object) -> LLM:
    spec = ModelSpec(id="m", kind="llm", litellm="openai/m", api_base=server.base_url, **settings)
    return LLM(spec, OpenAIChat(spec), None)


def ask(llm: LLM, n: int) -> tuple[int, float]:
    async def gather() -> list[object]:
        asks = (llm.achat([{"role": "user", "content": f"question {i}"}]) for i in range(n))
        return list(await asyncio.gather(*asks, return_exceptions=True))

    began = time.perf_counter()
    answers = aio.run(gather())
    return sum(a == "yes" for a in answers), time.perf_counter() - began


def rate_limited(retry_after: bool) -> str:
    with OpenAIServer() as server:
        server.rate_limit(3, retry_after=retry_after)
        answered, seconds = ask(model(server, timeout=10, concurrency=16, retries=3), 34)
        refused = server.rate_limited
    return f"{answered}/34 answered, {refused} refused, {seconds:.1f} s ({seconds / (34 / 3):.2f} x 34/3 s)"


def one_at_a_time() -> str:
    with OpenAIServer(latency=1.0) as server:
        server.one_at_a_time = True
        answered, seconds = ask(model(server, timeout=3, concurrency=4, retries=3), 20)
        return f"{answered}/20 answered, {server.count()} requests, {seconds:.1f} s"


def oversized() -> str:
    with OpenAIServer() as server:
        server.inject(Reply.long_answer(50 * 2**20))
        llm = model(server)
        answer = llm.chat([{"role": "user", "content": "yes, many times"}])
        assert isinstance(llm.provider, OpenAIChat)
        return f"{llm.provider.http.received:,} bytes read of 52,428,800; {len(answer):,} characters kept"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at the start: {os.getloadavg()}")
    with start_run(ROOT):
        for _ in range(args.repeats):
            print(f"rate 3/s, Retry-After: {rate_limited(True)}")
            print(f"rate 3/s, no Retry-After: {rate_limited(False)}")
            print(f"one at a time, 1 s each: {one_at_a_time()}")
            aio.close()
        print(f"50 MB answer: {oversized()}")
    print(f"load average at the end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
