"""The explorer page (`ragmatrix view`) in a real browser: headless Chromium, driven by selenium
through Debian's chromium-driver. It opens the page from file://, lists every model and case
of the committed results, filters, opens an item on a click, lists the changes since older
results, and never runs a script that an answer, a case name or a model id carries."""

from __future__ import annotations

import base64
import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from project import write

from ragmatrix.cli import main
from ragmatrix.families import all_families
from ragmatrix.report import load

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmark" / "results"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
SELENIUM = importlib.util.find_spec("selenium") is not None
FLAGS = (
    "--headless",
    "--no-sandbox",  # runs as root in CI containers
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None or DRIVER is None or not SELENIUM,
        reason="headless Chromium, chromium-driver and selenium are needed "
        "(Debian: apt-get install chromium chromium-driver; pip install -e '.[test]')",
    ),
]


def headless_chromium(profile: Path) -> object:
    """Debian's Chromium driven through chromium-driver, headless, with its own profile folder
    (`tests/perf/explorer_page.py` starts it too)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(str(DRIVER)), options=options)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    driver = headless_chromium(tmp_path_factory.mktemp("chromium-profile"))
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


def open_page(driver, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    WebDriverWait(driver, 60).until(lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "yes")


def texts(driver, selector: str) -> list[str]:
    return [node.get_attribute("textContent") for node in driver.find_elements("css selector", selector)]


def click_tab(driver, family: str) -> None:
    driver.find_element("css selector", f'#family-tabs button[data-family="{family}"]').click()


def open_cell(driver, model: str, item: str) -> str:
    """Click the cell of `model` on row `item`; the detail's title once it is shown."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    def clicked(d) -> bool:
        # The grid may still be drawing its rows after a tab is clicked: a row found before it
        # was redrawn is stale, and is looked up again.
        columns = texts(d, ".head .model")
        try:
            for row in d.find_elements("css selector", "#grid-body .row"):
                if row.find_element("css selector", ".row-label").get_attribute("textContent") == item:
                    row.find_elements("css selector", ".cell")[columns.index(model)].click()
                    return True
        except StaleElementReferenceException:
            return False
        raise AssertionError(f"no row {item}")

    WebDriverWait(driver, 30).until(clicked)
    WebDriverWait(driver, 30).until(lambda d: d.find_elements("css selector", "#detail-title"))
    return driver.find_element("css selector", "#detail-title").get_attribute("textContent")


def select(driver, select_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", select_id)).select_by_value(value)


def test_the_page_of_the_committed_results_lists_every_model_and_case_and_opens_an_item(browser, tmp_path, capsys):
    page = tmp_path / "explorer.html"
    assert main(["view", "--results-dir", str(RESULTS), "--out", str(page)]) == 0
    assert capsys.readouterr().out.endswith(f"wrote {page}: 1149 items of 5 families\n")
    open_page(browser, page)
    rows, _ = load(RESULTS)
    assert texts(browser, "#family-tabs button[data-family]") == sorted(rows)
    for family, family_rows in sorted(rows.items()):
        click_tab(browser, family)
        assert sorted(texts(browser, ".row-label")) == sorted({r.item for r in family_rows})
        assert texts(browser, ".head .model") == list(dict.fromkeys(r.model for r in family_rows))
        assert len(browser.find_elements("css selector", "#grid-body .cell:not(.empty)")) == len(family_rows)
        source = all_families()[family].source
        assert browser.find_element("css selector", "#family-note .source").text == f"Source: {source.line()}"

    click_tab(browser, "code_retrieval")
    title = open_cell(browser, "minilm", "base64_ascii85_adobe:line")
    assert title == "test_code_retrieval[minilm-base64_ascii85_adobe:line]"
    detail = browser.find_element("id", "detail").text
    assert "Ascii85 encoding with the Adobe framing used in PostScript and PDF" in detail
    assert "ranked files" in detail and "ranked chunks" in detail and "first expected file at rank" in detail
    (row,) = [r for r in rows["code_retrieval"] if (r.model, r.item) == ("minilm", "base64_ascii85_adobe:line")]
    marked = texts(browser, "#detail .part-listing tr.marked td:nth-child(2)")
    assert marked[0] == row.iterations[0].details["top_files"][0]["file"] == "base64.py"
    first = row.iterations[0].details["top_chunks"][0]  # its text, as the corpus (this Python's base64.py) has it
    start, end = (int(n) for n in first["lines"].split("-"))
    source = Path(base64.__file__).read_text().splitlines()[start - 1 : end]
    assert "\n".join(source[:3]).strip() in detail


def test_the_filters_narrow_the_grid(browser, tmp_path, capsys):
    page = tmp_path / "explorer.html"
    assert main(["view", "--results-dir", str(RESULTS), "--out", str(page)]) == 0
    capsys.readouterr()
    open_page(browser, page)
    click_tab(browser, "code_retrieval")
    code = load(RESULTS)[0]["code_retrieval"]
    select(browser, "filter-model", "bow")
    assert texts(browser, ".head .model") == ["bow"]
    select(browser, "filter-variant", "line")
    assert sorted(texts(browser, ".row-label")) == sorted(
        r.item for r in code if r.model == "bow" and r.variant == "line"
    )
    browser.find_element("id", "filter-failing").click()
    failing = sorted(r.item for r in code if r.model == "bow" and r.variant == "line" and (r.item_score() or 0) < 0.5)
    assert failing and sorted(texts(browser, ".row-label")) == failing
    assert all("dim" not in c.get_attribute("class") for c in browser.find_elements("css selector", ".cell"))
    browser.find_element("id", "filter-failing").click()
    browser.find_element("id", "filter-search").send_keys("base64")
    shown = texts(browser, ".row-label")
    assert shown and all("base64" in item for item in shown)
    assert browser.find_element("id", "shown-count").text.startswith(f"{len(shown)} of 174 rows, 1 of 5 models")


HOSTILE = "</script><script>window.pwned = 1; document.title = 'pwned'</script><img src=x onerror=\"window.pwned=2\">"


def test_a_script_in_an_answer_a_case_name_or_a_model_id_never_runs(bench, server, browser, tmp_path, capsys):
    # An answer from a real run against the test server ...
    server.answer = lambda messages: "yes" if "EGFR" in str(messages) else HOSTILE
    bench.runpytest("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=7)
    results = bench.path / "benchmark" / "results"
    # ... and a case name and a model id in a row merged in from elsewhere.
    stored = [json.loads(line) for line in (results / "rag_interpretation.jsonl").read_text().splitlines()]
    hostile = dict(stored[0], model=f"m{HOSTILE}", case=f"c{HOSTILE}", item=f"c{HOSTILE}", key="f" * 32)
    write(results / "rag_interpretation.jsonl", "".join(json.dumps(r) + "\n" for r in [*stored, hostile]))
    page = tmp_path / "explorer.html"
    assert main(["view", "--results-dir", str(results), "--out", str(page)]) == 0
    capsys.readouterr()
    assert "</script><script>window.pwned" not in page.read_text()
    open_page(browser, page)
    assert f"m{HOSTILE}" in texts(browser, ".head .model") and f"c{HOSTILE}" in texts(browser, ".row-label")
    title = open_cell(browser, "scripted", "pathway_no:simple")
    assert title == "test_rag_interpretation[scripted-pathway_no:simple]"
    detail = browser.find_element("id", "detail").text
    assert HOSTILE in detail  # shown as the text it is
    assert "why invalid" in detail and "message 3 (user)" in detail and "Which molecular pathways" in detail
    open_cell(browser, f"m{HOSTILE}", f"c{HOSTILE}")
    assert browser.execute_script("return window.pwned") is None
    assert browser.title == "ragmatrix explorer"
    assert browser.find_elements("css selector", "#detail img, #detail script, #app img") == []


def test_compare_lists_the_changed_cases_regressions_first(browser, tmp_path, capsys):
    new = tmp_path / "new"
    new.mkdir()
    for path in RESULTS.glob("*.jsonl"):
        (new / path.name).write_text(path.read_text())
    moved = []
    for line in (RESULTS / "code_retrieval.jsonl").read_text().splitlines():
        row = json.loads(line)
        if (row["model"], row["item"]) == ("minilm", "base64_ascii85_adobe:line"):
            row["iterations"][0]["score"] = row["score"] = 0.25
        if (row["model"], row["item"]) == ("bow", "base64_url_safe:line"):
            row["iterations"][0]["score"] = row["score"] = 0.9
        moved.append(json.dumps(row, sort_keys=True))
    (new / "code_retrieval.jsonl").write_text("\n".join(moved) + "\n")
    page = tmp_path / "explorer.html"
    assert main(["view", "--results-dir", str(new), "--out", str(page), "--compare", str(RESULTS)]) == 0
    assert "2 changed item(s) since" in capsys.readouterr().out
    open_page(browser, page)
    changes = [
        [cell.get_attribute("textContent") for cell in row.find_elements("css selector", "td")]
        for row in browser.find_elements("css selector", "#changes table.changes")[0].find_elements(
            "css selector", "tr.change"
        )
    ]
    assert changes == [
        ["regression", "code_retrieval", "minilm", "base64_ascii85_adobe:line", "1.000", "0.250", "-0.750"],
        ["improvement", "code_retrieval", "bow", "base64_url_safe:line", "0.431", "0.900", "+0.469"],
    ]
    browser.find_elements("css selector", "#changes tr.change")[0].click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30).until(lambda d: d.find_elements("css selector", "#detail-title"))
    assert browser.find_element("id", "detail-title").text == "test_code_retrieval[minilm-base64_ascii85_adobe:line]"
