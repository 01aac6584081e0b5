"""The least any Python client needs to ask a server a list of chat requests: the reference
ragmatrix's whole process is compared with (`tests/perf/physical_limit.py`).

A plain asyncio + aiohttp script, start-up included: it reads the conversations from a JSON
file (a list of message lists), posts each to `<api_base>/chat/completions` at most
`--concurrency` at a time over one connection pool, reads every answer's text, and prints one
JSON line: how many answers it got and the median latency of one request (from send to the
full answer), as ragmatrix's cost figures time it.

    python tests/perf/bare_client.py conversations.json http://127.0.0.1:PORT/v1 [--concurrency 16]
"""

import argparse
import asyncio
import json
import statistics
import time

import aiohttp


async def ask_all(conversations: list[list[dict[str, str]]], api_base: str, concurrency: int) -> dict[str, float]:
    url = api_base.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer no-key"}
    slots = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    answers = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def ask(messages: list[dict[str, str]]) -> None:
            nonlocal answers
            async with slots:
                began = time.perf_counter()
                body = json.dumps({"model": "served", "messages": messages}).encode()
                async with session.post(url, data=body, headers=headers) as response:
                    reply = json.loads(await response.read())
                latencies.append((time.perf_counter() - began) * 1000.0)
                if reply["choices"][0]["message"]["content"]:
                    answers += 1

        await asyncio.gather(*(ask(messages) for messages in conversations))
    return {"answers": answers, "p50_ms": statistics.median(latencies) if latencies else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("conversations", help="a JSON file: a list of message lists")
    parser.add_argument("api_base")
    parser.add_argument("--concurrency", type=int, default=16)
    options = parser.parse_args()
    with open(options.conversations, encoding="utf-8") as handle:
        conversations = json.load(handle)
    print(json.dumps(asyncio.run(ask_all(conversations, options.api_base, options.concurrency))))


if __name__ == "__main__":
    main()
