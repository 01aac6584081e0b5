"""Looking inside the stored results: `ragmatrix show -k`, `ragmatrix export` (CSV, Parquet,
TREC run and qrels files), `ragmatrix.load_results`, the `-k` expressions, the changes between
two result sets, and the page's data, which nothing in it can break out of.

The committed results are read as they are; LLM rows come from a real run of a small
benchmark against the project's OpenAI-compatible test server.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from project import write

import ragmatrix
from ragmatrix.cli import main
from ragmatrix.explore.compare import changes
from ragmatrix.explore.export import flat_rows
from ragmatrix.explore.page import script_json
from ragmatrix.explore.select import ExpressionError, compile_expression
from ragmatrix.explore.terminal import clean
from ragmatrix.families import all_families
from ragmatrix.report import load
from ragmatrix.report.aggregate import aggregate
from ragmatrix.results.rows import Row

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmark" / "results"


def stored_rows() -> dict[str, list[Row]]:
    rows, problems = load(RESULTS)
    assert problems == []
    return rows


# --- -k expressions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "selected"),
    [
        ("minilm", {"a"}),
        ("MiniLM and bounded", {"a"}),
        ("bm25 or bow", {"b", "c"}),
        ("not minilm", {"b", "c"}),
        ("(bm25 or minilm) and not line", {"a"}),
        ("q07", {"a", "b"}),
        ("", {"a", "b", "c"}),
        ("code_retrieval and q07:line", {"b"}),
    ],
)
def test_a_k_expression_selects_as_pytest_would(expression, selected):
    items = {
        "a": ["test_code_retrieval[minilm-q07:bounded]", "code_retrieval", "minilm", "q07", "bounded"],
        "b": ["test_code_retrieval[bm25-q07:line]", "code_retrieval", "bm25", "q07", "line"],
        "c": ["test_code_retrieval[bow-q08:line]", "code_retrieval", "bow", "q08", "line"],
    }
    matches = compile_expression(expression)
    assert {name for name, names in items.items() if matches(names)} == selected


@pytest.mark.parametrize("expression", ["minilm and", "(minilm", "and bow", "minilm )", "not"])
def test_a_broken_k_expression_is_one_line_naming_it(expression, capsys):
    with pytest.raises(ExpressionError, match="-k"):
        compile_expression(expression)
    assert main(["show", "-k", expression, "--results-dir", str(RESULTS)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: -k ") and err.count("\n") == 1 and "Traceback" not in err


# --- show -----------------------------------------------------------------------------------------


def test_show_prints_a_code_retrieval_items_ranked_files_and_chunks_with_their_text(capsys):
    expression = "minilm and not bm25 and base64_ascii85_adobe and line"
    code = main(["show", "-k", expression, "--results-dir", str(RESULTS)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("=== test_code_retrieval[minilm-base64_ascii85_adobe:line]\n")
    (row,) = [
        r for r in stored_rows()["code_retrieval"] if r.model == "minilm" and r.item == "base64_ascii85_adobe:line"
    ]
    files = row.iterations[0].details["top_files"]
    chunks = row.iterations[0].details["top_chunks"]
    # the query and expected files come from the case
    assert "Ascii85 encoding with the Adobe framing used in PostScript and PDF" in out
    assert "expected files:" in out and "base64.py" in out
    assert "first expected file at rank             1" in out
    # every ranked file and chunk, in order, with its score
    ranked = out.split("ranked files")[1].split("ranked chunks")[0]
    assert [line.replace("*", "").split()[1] for line in ranked.splitlines()[3:13]] == [f["file"] for f in files]
    listed = out.split("ranked chunks:")[1].split("chunk 1:")[0]
    shown = [line.replace("*", "").split()[1:3] for line in listed.splitlines()[3:13]]
    assert shown == [[c["file"], c["lines"]] for c in chunks]
    # the first chunk's lines, read from the corpus (Python's own base64.py)
    first = chunks[0]
    start, end = (int(n) for n in first["lines"].split("-"))
    source = Path(sys.modules["base64"].__file__).read_text().splitlines()[start - 1 : end]
    assert f"chunk 1: {first['file']} lines {first['lines']}:" in out
    assert "\n".join("    " + line if line else "" for line in source[:5]) in out


def test_show_lists_what_matches_and_says_so_when_nothing_does(capsys):
    assert main(["show", "-k", "rss_probes", "--list", "--results-dir", str(RESULTS)]) == 0
    listed = capsys.readouterr().out.splitlines()
    expected = sorted(f"test_rss_probes[{r.model}-{r.item}]" for r in stored_rows()["rss_probes"])
    assert sorted(line.split()[0] for line in listed) == expected
    assert main(["show", "-k", "no_such_case_anywhere", "--results-dir", str(RESULTS)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no stored item matches -k 'no_such_case_anywhere' (1149 items in ")


def test_show_of_an_rss_and_a_zelo_item_gives_scores_per_length_and_the_battles(capsys):
    assert main(["show", "-k", "test_rss_probes and minilm and native", "--results-dir", str(RESULTS)]) == 0
    out = capsys.readouterr().out
    assert "scores per length:" in out and "Top-Down" in out and "RSS (x500)" in out
    assert main(["show", "-k", "test_zelo_battles and bm25", "--limit", "1", "--results-dir", str(RESULTS)]) == 0
    out = capsys.readouterr().out
    assert "zELO order beside the graded relevance" in out and "pairwise judgements" in out
    assert "documents and their grades" in out
    assert "showing 1 of 12 matching items (--limit 0 shows all)" in out


def test_show_of_a_rerankers_zelo_item_gives_its_order_beside_the_grades(capsys):
    expression = "test_zelo_reranking and bm25-minilm and biomedicine_metformin_mechanism"
    assert main(["show", "-k", expression, "--results-dir", str(RESULTS)]) == 0
    out = capsys.readouterr().out
    assert "the reranker's order beside the graded relevance" in out and "zbench's figures on these scores" in out
    assert "documents and their grades" in out and "pairwise judgements" not in out


LLM_CASES = """
rag_interpretation:
  - case: pathway_yes
    input:
      prompt: Which molecular pathways are associated with cancer?
      instruction: "Judge the fragment for relevance. Answer yes or no."
      fragments: ["The EGFR pathway is deregulated in a number of cancers."]
    expected: {answer: "yes"}
  - case: pathway_no
    input:
      prompt: Which molecular pathways are associated with cancer?
      instruction: "Judge the fragment for relevance. Answer yes or no."
      fragments: ["The earth is a globe."]
    expected: {answer: "no"}
"""
SHOUTING = "\x1b[31mMAYBE\x1b[0m\r\x07 honestly \u202eon"


@pytest.fixture
def llm_results(bench, server):
    """A real run: the scripted LLM answers one case right and the other with garbage that holds
    control characters."""
    write(bench.path / "benchmark" / "data" / "rag_interpretation_data.yaml", LLM_CASES)
    server.answer = lambda messages: "yes" if "EGFR" in str(messages) else SHOUTING
    bench.runpytest("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=4)
    return bench.path / "benchmark" / "results"


def test_show_prints_an_llm_items_messages_answer_and_why_it_was_invalid_without_control_characters(
    llm_results, capsys
):
    assert main(["show", "-k", "scripted and pathway_no", "--results-dir", str(llm_results)]) == 0
    out = capsys.readouterr().out
    assert "=== test_rag_interpretation[scripted-pathway_no]" in out
    asked = out.split("--- what was asked")[1].split("--- what came back")[0]
    assert "message 1 (system):\n    Judge the fragment for relevance. Answer yes or no." in asked
    assert "message 2 (system):\n    The earth is a globe." in asked
    assert "message 3 (user):\n    Which molecular pathways are associated with cancer?" in asked
    assert "answer  no" in asked  # expected
    came_back = out.split("--- what came back")[1]
    assert "why invalid  answer is not one of no or yes" in came_back
    # stored with its control characters escaped (ragmatrix.foundations.untrusted), shown as stored
    assert "answer:\n    \\x1b[31mMAYBE\\x1b[0m\\r\\x07 honestly \\u202eon" in came_back
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out and "\u202e" not in out
    assert main(["show", "-k", "scripted and pathway_yes", "--results-dir", str(llm_results)]) == 0
    out = capsys.readouterr().out
    assert "answer:\n    yes\nhow it scored:\n  parsed  yes" in out and "  score     1\n  valid     yes" in out
    assert "  provenance         format 2, ragmatrix " in out


def test_show_of_results_kept_elsewhere_redacts_the_secrets_the_projects_models_file_names(
    llm_results, capsys, monkeypatch
):
    """A results folder outside benchmark/ is redacted with the variables of the project's
    benchmark/models.yaml, found from the working directory upward as every command finds it,
    not with a models.yaml beside the folder, where there is none."""
    project = llm_results.parent.parent
    models = project / "benchmark" / "models.yaml"
    with_key = models.read_text().replace("    timeout: 10\n", "    timeout: 10\n    api_key_env: SCRIPTED_AUTH\n")
    models.write_text(with_key)
    monkeypatch.setenv("SCRIPTED_AUTH", "canary31337zebra")  # a key by the field that names it
    shutil.copytree(llm_results, project / "r")
    stored = project / "r" / "rag_interpretation.jsonl"
    stored.write_text(stored.read_text().replace("honestly", "canary31337zebra"))  # as an older run kept it
    monkeypatch.chdir(project / "benchmark" / "data")  # a command run from inside the project
    assert main(["show", "-k", "scripted and pathway_no", "--results-dir", str(project / "r")]) == 0
    out = capsys.readouterr().out
    assert "canary31337zebra" not in out and "*** " in out


def test_clean_removes_control_characters_and_keeps_line_breaks():
    assert clean("a\x1b[2Jb\r\nc\td\x00\x7f\x9b\u2066e") == "a[2Jb\nc    de"


# --- the data out ---------------------------------------------------------------------------------


def test_export_writes_every_item_to_csv_and_parquet_and_load_results_gives_the_same_frame(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["export", "--csv", "--parquet", "--results-dir", str(RESULTS), "--out", str(out)]) == 0
    assert "1149 rows (items x iterations) of 1149 items" in capsys.readouterr().out
    rows = [r for family in stored_rows().values() for r in family]
    with (out / "items.csv").open(encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == sum(len(r.iterations) for r in rows) == 1149
    assert {(t["family"], t["model"], t["item"]) for t in table} == {(r.family, r.model, r.item) for r in rows}
    one = next(t for t in table if t["model"] == "minilm" and t["item"] == "base64_ascii85_adobe:line")
    assert one["metric.ndcg_at_10"] == "1.0" and one["row_format"] == "1" and one["status"] == "ok"
    assert json.loads(one["details"])["top_files"][0]["file"] == "base64.py"
    import pyarrow.parquet as pq

    parquet = pq.read_table(out / "items.parquet").to_pandas()
    frame = ragmatrix.load_results(RESULTS)
    assert len(parquet) == len(frame) == 1149
    assert list(parquet.columns) == list(frame.columns) == list(table[0])
    assert frame.groupby("family").size().to_dict() == {family: len(r) for family, r in stored_rows().items()}
    means = frame[frame.family == "code_retrieval"].groupby("model").score.mean()
    assert means["minilm"] == pytest.approx(0.96098, abs=1e-5)


def test_a_missing_pyarrow_is_one_line_with_the_pip_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    assert main(["export", "--parquet", "--results-dir", str(RESULTS), "--out", str(tmp_path)]) == 1
    assert capsys.readouterr().err == "error: Parquet needs pyarrow: pip install 'ragmatrix[export]'\n"


def trec_ndcg_at_10(run: Path, qrels: Path) -> dict[str, float]:
    """nDCG@10 per query as trec_eval computes it, written here from its definition: documents
    by score (ties: document id, descending), linear gains, log2 discounts, the ideal over
    every judged grade of the query."""
    judged: dict[str, dict[str, int]] = defaultdict(dict)
    for line in qrels.read_text().splitlines():
        query, _, doc, grade = line.split()
        judged[query][doc] = int(grade)
    ranked: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for line in run.read_text().splitlines():
        query, q0, doc, _, score, _ = line.split()
        assert q0 == "Q0"
        ranked[query].append((float(score), doc))
    values = {}
    for query, docs in ranked.items():
        order = [doc for _, doc in sorted(docs, key=lambda pair: (pair[0], pair[1]), reverse=True)][:10]
        gains = judged[query]
        dcg = sum(gains.get(doc, 0) / math.log2(rank + 1) for rank, doc in enumerate(order, start=1))
        ideal = sorted((g for g in gains.values() if g > 0), reverse=True)[:10]
        best = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
        values[query] = dcg / best if best else 0.0
    return values


def test_trec_run_files_give_each_retrieval_models_leaderboard_mean(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["export", "--trec", "--results-dir", str(RESULTS), "--out", str(out)]) == 0
    capsys.readouterr()
    tables = {t.family: t for t in aggregate(stored_rows(), all_families()).families}
    checked = 0
    for family in ("code_retrieval", "text_retrieval"):
        qrels = out / "trec" / family / "qrels.txt"
        for line in tables[family].lines:
            per_query = trec_ndcg_at_10(out / "trec" / family / f"{line.model}.run", qrels)
            assert len(per_query) == line.items
            # the stored scores are rounded to 6 decimals, the files' evaluation is not
            assert sum(per_query.values()) / len(per_query) == pytest.approx(line.mean, abs=1e-6)
            checked += 1
    assert checked == 10  # bm25, bow, minilm, minilm-int8 and the two-stage bm25-minilm, in both families


def test_tied_scores_keep_the_ranked_order_in_a_run_file():
    from ragmatrix.explore.export import _run_lines

    lines = _run_lines("q", [("b.py", 0.5), ("a.py", 0.5), ("c.py", 0.5), ("d.py", 0.4)], "m")
    scores = [float(line.split()[4]) for line in lines]
    assert [line.split()[2] for line in lines] == ["b.py", "a.py", "c.py", "d.py"]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4


def test_flat_rows_give_an_error_row_no_score_and_every_iteration_its_own_line():
    row = Row.model_validate(
        {
            "key": "k",
            "family": "f",
            "test": "t",
            "model": "m",
            "case": "c",
            "item": "c",
            "scoring_version": 1,
            "status": "error",
            "iterations": [{"score": 1.0, "valid": True}, {"error": "HTTP 500"}],
            "errors": 1,
        }
    )
    lines = flat_rows([row])
    assert [line["iteration"] for line in lines] == [1, 2]
    assert [line["error"] for line in lines] == [None, "HTTP 500"]
    assert {line["item_score"] for line in lines} == {None}  # an item with an error has no score


# --- changes, and the page's data ---------------------------------------------------------------


def changed_rows(rows: dict[str, list[Row]]) -> dict[str, list[Row]]:
    """The committed rows with three items moved: one worse, one much worse, one an error."""
    moved: dict[str, list[Row]] = {family: list(family_rows) for family, family_rows in rows.items()}
    code = moved["code_retrieval"]
    for index, row in enumerate(code):
        if (row.model, row.item) == ("minilm", "base64_ascii85_adobe:line"):
            code[index] = row.model_copy(update={"iterations": [row.iterations[0].model_copy(update={"score": 0.8})]})
        elif (row.model, row.item) == ("bm25", "base32_hex_alphabet:line"):
            code[index] = row.model_copy(update={"iterations": [row.iterations[0].model_copy(update={"score": 0.1})]})
        elif (row.model, row.item) == ("bow", "base32_hex_alphabet:line"):
            code[index] = row.model_copy(update={"status": "error", "iterations": [{"error": "HTTP 500"}]})
    return moved


def test_changes_list_new_errors_then_regressions_worst_first():
    old = stored_rows()
    found = changes(old, changed_rows(old), all_families())
    assert [(c.kind, c.model, c.item) for c in found] == [
        ("now an error", "bow", "base32_hex_alphabet:line"),
        ("regression", "bm25", "base32_hex_alphabet:line"),
        ("regression", "minilm", "base64_ascii85_adobe:line"),
    ]
    back = changes(changed_rows(old), old, all_families())
    assert [c.kind for c in back] == ["improvement", "improvement", "fixed"]


@pytest.mark.parametrize("text", ["</script><script>alert(1)</script>", "<!-- x", "</SCRIPT>", "a & b > c"])
def test_page_data_cannot_close_its_script_element_or_open_a_comment(text):
    packed = script_json({"answer": text, "case": [text]})
    assert "<" not in packed and ">" not in packed and "&" not in packed
    assert json.loads(packed) == {"answer": text, "case": [text]}


def test_the_page_script_never_parses_data_as_html():
    script = (REPO / "ragmatrix" / "explore" / "explorer.js").read_text()
    assert re.findall(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function", script) == []


def test_the_same_results_give_the_same_page_byte_for_byte(tmp_path, capsys):
    first, second = tmp_path / "a.html", tmp_path / "b.html"
    for page in (first, second):
        assert main(["view", "--results-dir", str(RESULTS), "--out", str(page)]) == 0
    capsys.readouterr()
    assert first.read_bytes() == second.read_bytes()


def test_show_piped_into_a_reader_that_stops_early_ends_quietly():
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragmatrix",
            "show",
            "-k",
            "code_retrieval",
            "--limit",
            "0",
            "--results-dir",
            str(RESULTS),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline().startswith(b"=== test_code_retrieval[")
    process.stdout.close()  # as `| head -1` does
    error = process.stderr.read().decode()
    assert process.wait(timeout=300) == 0
    assert "Traceback" not in error and "BrokenPipe" not in error
