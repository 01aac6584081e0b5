"""Strict YAML reading: what refusing repeated keys and bounding aliases costs collection.

Every run, cached ones included, parses every data file, so the strict reader must stay close
to libyaml's plain safe loader. Prints, as CPU time (steadier than wall time on a busy
machine), the minimum over many repeats of:

1. parsing the shipped data files with the plain safe loader, and with `read_yaml` (repeated
   keys refused, alias expansion counted); the ratio's goal is at most 1.2;
2. `load_suite` over the shipped data (parse, validate, expand every case);
3. refusing the expansion bomb (5 fields x 30 variants = 24,300,000 items): milliseconds, and
   the peak memory traced, which stays under a megabyte.

    python tests/perf/strict_reading.py
"""

from __future__ import annotations

import sys
import tempfile
import time
import timeit
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from ragmatrix.foundations.yamlfile import read_yaml  # noqa: E402
from ragmatrix.suite.loader import load_suite  # noqa: E402

DATA = ROOT / "benchmark" / "data"
PLAIN = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def best_ms(action, repeat: int = 30, number: int = 5) -> float:
    times = timeit.repeat(action, number=number, repeat=repeat, timer=time.process_time)
    return min(times) / number * 1000


def main() -> None:
    files = sorted(DATA.glob("*_data.yaml"))
    families = sorted(p.stem[len("test_") :] for p in (ROOT / "benchmark").glob("test_*.py"))
    print(f"libyaml: {PLAIN is not yaml.SafeLoader}; {len(files)} data files")

    plain = best_ms(lambda: [yaml.load(p.read_text(encoding="utf-8"), Loader=PLAIN) for p in files])
    strict = best_ms(lambda: [read_yaml(p) for p in files])
    print(f"1. parse: plain {plain:.2f} ms, strict {strict:.2f} ms, ratio {strict / plain:.2f} (goal <= 1.2)")

    suite = load_suite(DATA, families, root=ROOT)
    items = sum(len(cases) for cases in suite.cases.values())
    suite_ms = best_ms(lambda: load_suite(DATA, families, root=ROOT), repeat=15, number=3)
    print(f"2. load_suite: {suite_ms:.1f} ms for {items} expanded cases, {len(suite.problems)} problems")

    with tempfile.TemporaryDirectory() as folder:
        fields = "".join(f"      f{i}: {{{', '.join(f'v{j}: x' for j in range(30))}}}\n" for i in range(5))
        bomb = Path(folder) / "bomb_data.yaml"
        bomb.write_text(f"rag_interpretation:\n  - case: bomb\n    input:\n{fields}    expected: {{answer: 'yes'}}\n")
        tracemalloc.start()
        start = time.process_time()
        refused = load_suite(Path(folder), ["rag_interpretation"])
        took = (time.process_time() - start) * 1000
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"3. bomb ({bomb.stat().st_size} bytes): refused in {took:.1f} ms, peak {peak / 1e6:.2f} MB traced")
        print(f"   {refused.problems[0].line()}")


if __name__ == "__main__":
    main()
