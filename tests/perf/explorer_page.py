"""How the explorer page scales: `ragmatrix view` on a store of `--items` items (50,000 by
default), opened in headless Chromium, against the committed results (694 items) in the same run.

The large store is the committed rows of every family, copied under `--items / 694` model ids
(m001, m002, ...), so its items read like real ones: code retrieval rows with their ranked
files and chunks (whose text the page shows from the corpus), RAG, zELO and RSS rows. For each
store it prints the page's size, the seconds `ragmatrix view` took, the milliseconds from
navigation to the page drawn (the grid of the first family), to a family switch, and to an
item's detail opened by a click (which unpacks its block), the median of `--repeats` loads;
then each ratio of the large store to the committed one.

    python tests/perf/explorer_page.py [--items 50000] [--repeats 3]

Needs Debian's chromium and chromium-driver and selenium (in the test extra).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmark" / "results"
DATA = ROOT / "benchmark" / "data"
sys.path.insert(0, str(ROOT / "tests"))

from test_explorer_page import CHROMIUM, DRIVER, headless_chromium  # noqa: E402


def large_store(folder: Path, items: int) -> int:
    """The committed rows under enough model ids to hold about `items` items; the count made."""
    lines = {path.name: path.read_text(encoding="utf-8").splitlines() for path in RESULTS.glob("*.jsonl")}
    per_copy = sum(len(rows) for rows in lines.values())
    copies = max(1, round(items / per_copy))
    made = 0
    for name, rows in lines.items():
        with (folder / name).open("w", encoding="utf-8") as handle:
            for copy in range(copies):
                for line in rows:
                    row = json.loads(line)
                    row["model"] = f"m{copy + 1:03d}"
                    handle.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
                    made += 1
    return made


def write_page(results: Path, page: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        # the benchmark's own data files: the large store's cases are the committed ones
        [
            sys.executable,
            "-m",
            "ragmatrix",
            "view",
            "--results-dir",
            str(results),
            "--out",
            str(page),
            "--data-dir",
            str(DATA),
        ],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    return time.perf_counter() - started


def browse(driver, page: Path) -> dict[str, float]:
    """Milliseconds: the page drawn, a family switch, an item opened."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    driver.get(page.as_uri())
    wait = WebDriverWait(driver, 300)
    wait.until(lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "yes")
    drawn = float(driver.find_element("tag name", "body").get_attribute("data-ready-ms"))
    tabs = driver.find_elements("css selector", "#family-tabs button[data-family]")
    started = time.perf_counter()
    tabs[1].click()
    driver.find_element("id", "grid-body")
    switched = (time.perf_counter() - started) * 1000
    tabs[0].click()
    started = time.perf_counter()
    # the first row's last model: an item of a late block, which the click unpacks
    driver.execute_script(
        "[...document.querySelector('#grid-body .row').querySelectorAll('.cell:not(.empty)')].pop().click()"
    )
    wait.until(lambda d: d.find_elements("css selector", "#detail-title"))
    opened = (time.perf_counter() - started) * 1000
    return {"drawn ms": drawn, "family switch ms": switched, "item opened ms": opened}


def measure(driver, results: Path, repeats: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "explorer.html"
        found: dict[str, float] = {"write s": write_page(results, page), "page MB": page.stat().st_size / 1e6}
        runs = [browse(driver, page) for _ in range(repeats)]
    for name in runs[0]:
        found[name] = statistics.median(run[name] for run in runs)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if CHROMIUM is None or DRIVER is None:
        sys.exit("needs chromium and chromium-driver (Debian: apt-get install chromium chromium-driver)")
    with tempfile.TemporaryDirectory() as profile, tempfile.TemporaryDirectory() as folder:
        driver = headless_chromium(Path(profile))
        try:
            base = measure(driver, RESULTS, args.repeats)
            made = large_store(Path(folder), args.items)
            large = measure(driver, Path(folder), args.repeats)
        finally:
            driver.quit()
    print(f"{'':22}{'694 items':>14}{f'{made:,} items':>16}{'ratio':>9}")
    for name in base:
        ratio = large[name] / base[name] if base[name] else float("nan")
        print(f"{name:22}{base[name]:14.1f}{large[name]:16.1f}{ratio:9.1f}")


if __name__ == "__main__":
    main()
