"""Untrusted text: control sequences from a server's error body, a model's answer or a data
file's tags reach neither the terminal nor the stored rows raw; they are escaped, visibly."""

from __future__ import annotations

import html
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from project import REPO, models_yaml, write

from ragmatrix.foundations.untrusted import safe_data, safe_line, safe_text
from ragmatrix.testing.openai_server import Reply

# An SGR colour, an OSC window title ended by BEL, a C1 CSI clearing the screen, a bidi override.
HOSTILE = "\x1b[31mred\x1b[0m \x1b]0;pwned\x07 \x9b2J \u202etxt.exe"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def raw_controls(text: str) -> list[str]:
    return [c for c in RAW if c in text]


def rows_of(project: pytest.Pytester, family: str) -> list[dict]:
    path = project.path / "benchmark" / "results" / f"{family}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_control_characters_are_escaped_visibly_and_newlines_kept_only_in_text():
    assert safe_text(HOSTILE) == "\\x1b[31mred\\x1b[0m \\x1b]0;pwned\\x07 \\x9b2J \\u202etxt.exe"
    assert safe_text("yes\r\n\tno\x00\u2028") == "yes\n\tno\\x00\\u2028"  # CR LF is a newline
    assert safe_line("two\nlines\tand a tab\r") == "two\\nlines\\tand a tab\\r"
    assert safe_text("plain text, accents é and emoji 🙂") == "plain text, accents é and emoji 🙂"
    assert safe_data({"a\x1b": ["x\x07", 1, None, ("y\x9b",)]}) == {"a\\x1b": ["x\\x07", 1, None, ("y\\x9b",)]}


@pytest.mark.parametrize("client", ["direct", "litellm"])
def test_a_servers_error_body_with_escape_sequences_is_stored_and_printed_escaped(bench, server, client):
    if client == "litellm":
        write(
            bench.path / "benchmark" / "models.yaml",
            models_yaml(server.base_url).replace("    retries: 2\n", "    retries: 2\n    client: litellm\n"),
        )
    server.on("EGFR", Reply.error(400, message=HOSTILE))  # refused at once, never retried
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider")
    output = result.stdout.str() + result.stderr.str()
    assert "pwned" in output and raw_controls(output) == []
    assert "\\x1b]0;pwned\\x07" in output  # escaped, so the reader sees what the server sent
    errors = [e["error"] for r in rows_of(bench, "rag_interpretation") for e in r["iterations"] if "error" in e]
    assert errors and all("\\x1b[31mred" in e and raw_controls(e) == [] for e in errors)


def test_an_answer_with_escape_sequences_is_stored_escaped_with_its_newlines(bench, server):
    server.on("capital of Australia", f"Canberra\n{HOSTILE}")
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider")
    assert raw_controls(result.stdout.str()) == []
    (answer,) = [
        e["answer"]
        for r in rows_of(bench, "rag_interpretation")
        if r["case"] == "capital_answer"
        for e in r["iterations"]
    ]
    assert answer == f"Canberra\n{safe_text(HOSTILE)}"


TAGGED = r"""
text_retrieval:
  - case: tiny
    input:
      dataset: {path: tiny_beir}
    tags: ["\e[31mred\e]0;pwned\a", plain]
    domain: "\e[2Jdomain"
"""


def test_tags_of_a_data_file_with_escape_sequences_are_shown_and_stored_escaped(pytester):
    write(pytester.path / "benchmark" / "models.yaml", "models:\n  - {id: bm25, kind: retriever, builtin: bm25}\n")
    shutil.copy(REPO / "benchmark" / "test_text_retrieval.py", pytester.path / "benchmark" / "test_text_retrieval.py")
    data = pytester.path / "benchmark" / "data"
    folder: Path = data / "tiny_beir"
    write(folder / "corpus.jsonl", '{"_id": "d1", "text": "apple"}\n{"_id": "d2", "text": "cherry"}\n')
    write(folder / "queries.jsonl", '{"_id": "q1", "text": "apple"}\n')
    write(folder / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    write(data / "text_retrieval_data.yaml", TAGGED)
    result = pytester.runpytest("benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    assert raw_controls(output) == [] and "\x1b" not in output
    by_tag = [line for line in result.outlines if line.startswith("\\x1b[31mred\\x1b]0;pwned\\x07 ")]
    assert len(by_tag) == 1 and "bm25" in by_tag[0]  # the breakdown by tag, one line
    (stored,) = rows_of(pytester, "text_retrieval")
    assert stored["iterations"][0]["tags"] == ["\\x1b[31mred\\x1b]0;pwned\\x07", "plain"]


# --- markup from data in the report ----------------------------------------------------------------

# Names and tags as a results file may hold them: HTML, a link, a remote image, a newline.
SCRIPT = "<script>alert(1)</script>"
IMG = '<img src=x onerror="alert(2)">'
LINK = "[click](javascript:alert(3))"
REMOTE = "![tracker](https://example.com/t.png)"
MODELS = [SCRIPT, f"two\nlines {IMG}", f"{LINK} *em* _u_ a|b", REMOTE]


def hostile_results(directory: Path) -> None:
    directory.mkdir(parents=True)
    lines = []
    for place, model in enumerate(MODELS):
        for i in range(8):
            score = round(0.9 - 0.2 * place + 0.01 * (i % 3), 2)
            entry = {"score": score, "valid": True, "tags": [IMG if i % 2 else LINK], "dataset": REMOTE}
            row = {
                "key": f"k-{place}-{i}",
                "family": "text_retrieval",
                "test": "test_text_retrieval",
                "model": model,
                "case": f"c{i}",
                "item": f"c{i}",
                "scoring_version": 1,
                "status": "ok",
                "score": score,
                "iterations": [entry],
                "n_iterations": 1,
                "errors": 0,
                "invalid": 0,
            }
            lines.append(json.dumps(row))
    (directory / "text_retrieval.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


class Tags(HTMLParser):
    """Every tag of an HTML text, with its attributes."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


SAFE_TAGS = {"h1", "h2", "h3", "p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "code", "strong", "img"}


def assert_nothing_injected(html_text: str) -> None:
    """Only the report's own elements, no script, no handler, no link, and images only of the
    report's own PNG files."""
    for tag, attributes in Tags(html_text).tags:
        assert tag in SAFE_TAGS | {"html", "head", "meta", "title", "style", "body", "figure", "figcaption"}, tag
        assert not any(name.startswith("on") for name in attributes), (tag, attributes)
        if tag == "img":
            source = attributes.get("src") or ""
            assert re.fullmatch(r"[\w.-]+\.png", source) or source.startswith("data:image/png;base64,"), source


def test_names_and_tags_holding_markup_are_text_in_leaderboard_md_and_html(tmp_path, monkeypatch, capsys):
    from markdown_it import MarkdownIt

    from ragmatrix.cli import main

    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(tmp_path / "cache"))
    hostile_results(tmp_path / "results")
    assert main(["report", "--results-dir", str(tmp_path / "results"), "--out", str(tmp_path / "report")]) == 0
    markdown = (tmp_path / "report" / "leaderboard.md").read_text(encoding="utf-8")
    # GitHub's reading of it: CommonMark with tables and strike-through, raw HTML allowed
    rendered = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(markdown)
    assert_nothing_injected(rendered)
    assert "<a " not in rendered and "<em>" not in rendered and "<s>" not in rendered
    # every table row has as many cells as its header: a newline or a | in a name breaks nothing
    for table in re.findall(r"<table>.*?</table>", rendered, re.S):
        header = len(re.findall(r"<th[ >]", table))
        assert all(len(re.findall(r"<td[ >]", row)) == header for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:])
    cells = [html.unescape(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", rendered, re.S)]
    # the names read as they are (the newline a space), in the leaderboard's rows
    for model in MODELS:
        assert " ".join(model.splitlines()) in cells, model
    assert IMG in cells and LINK in cells  # the breakdown by tag
    page = (tmp_path / "report" / "leaderboard.html").read_text(encoding="utf-8")
    assert_nothing_injected(page)  # the HTML page resists it too
    assert html.escape(SCRIPT, quote=False) in page
