"""What the result store costs per row: appending, loading, loading again, compacting.

Appends `--rows` rows shaped like the shipped RAG family's (one per item, as a run does) to a
store in a temporary folder, then loads it with a new store (as the next session does), loads it
again with the same store (as the session's end does), and compacts it twice (the second time it
is compact already). Prints the CPU microseconds per row of each, the median of `--repeats`,
and, for scale, what serialising a row alone costs.

    python tests/perf/store_rows.py [--rows 3000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ragmatrix.results.rows import Row  # noqa: E402
from ragmatrix.results.store import ResultStore  # noqa: E402

SHIPPED = ROOT / "benchmark" / "results" / "rag_interpretation.jsonl"


def per_row(action: Callable[[], object], rows: int) -> float:
    started = time.process_time()
    action()
    return (time.process_time() - started) / rows * 1e6


def once(rows: list[Row]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        writer = ResultStore(Path(folder))

        def append_all() -> None:
            for row in rows:
                writer.append("rag_interpretation", row)

        found = {"append": per_row(append_all, len(rows))}
        reader = ResultStore(Path(folder))
        found["load"] = per_row(lambda: reader.load("rag_interpretation"), len(rows))
        found["load again"] = per_row(lambda: reader.load("rag_interpretation"), len(rows))
        found["compact"] = per_row(lambda: reader.compact("rag_interpretation"), len(rows))
        found["compact a compact file"] = per_row(lambda: reader.compact("rag_interpretation"), len(rows))
        found["serialise (for scale)"] = per_row(
            lambda: [json.dumps(r.to_json(), sort_keys=True, ensure_ascii=False) for r in rows], len(rows)
        )
        return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    template = json.loads(SHIPPED.read_text().splitlines()[0])
    # Items in reverse order, as a run appends them unsorted: the first compaction must rewrite.
    rows = [Row.model_validate({**template, "item": f"item{i:06d}"}) for i in reversed(range(options.rows))]
    runs = [once(rows) for _ in range(options.repeats)]
    print(f"{options.rows} rows, CPU microseconds per row, median of {options.repeats}:")
    for name in runs[0]:
        print(f"  {name:24} {statistics.median(run[name] for run in runs):8.1f}")


if __name__ == "__main__":
    main()
