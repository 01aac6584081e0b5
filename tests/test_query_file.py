"""The Rust embedding benchmark's query file, read as it is: a small Rust-and-Markdown corpus, a
query file in the tool's published format (suffix paths, Code and Doc, Simple..ExtraHard, both
answer forms), each query a case, and every problem of a query on one line."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from project import REPO, write

from ragmatrix.families import all_families
from ragmatrix.families.code_retrieval import retrieval as code_retrieval
from ragmatrix.families.code_retrieval.chunking import Chunk
from ragmatrix.families.code_retrieval.query_file import expand_query_file, slug
from ragmatrix.report.aggregate import breakdown_values
from ragmatrix.results.rows import Row
from ragmatrix.suite.loader import expand_case, load_suite

CORPUS = {
    "crates/matcher/src/lib.rs": """
        /// A matcher finds matches of a pattern in a haystack.
        pub trait Matcher {
            fn find_at(&self, haystack: &[u8], at: usize) -> Option<Match>;
        }
        """,
    "crates/regex/src/matcher.rs": """
        use grep_matcher::Matcher;

        /// A matcher built from a regular expression.
        pub struct RegexMatcher {
            regex: Regex,
        }

        impl Matcher for RegexMatcher {
            fn find_at(&self, haystack: &[u8], at: usize) -> Option<Match> {
                self.regex.find_at(haystack, at)
            }
        }
        """,
    "crates/regex/src/lib.rs": """
        mod matcher;
        pub use matcher::RegexMatcher;
        """,
    "crates/printer/src/json.rs": """
        /// The JSON printer writes one JSON object per line.
        pub struct JSON<W> {
            wtr: W,
        }

        impl<W: Write> JSON<W> {
            pub fn write_message(&mut self, message: &Message) -> io::Result<()> {
                serde_json::to_writer(&mut self.wtr, message)
            }
        }
        """,
    "README.md": """
        # ripgrep

        ## Installation

        Install ripgrep with cargo install ripgrep.
        """,
    "GUIDE.md": """
        # User guide

        ## Configuration file

        Set RIPGREP_CONFIG_PATH to the path of a configuration file of flags.
        """,
    "crates/ignore/README.md": """
        # ignore

        Fast recursive directory iteration that respects gitignore rules.
        """,
}

# The tool's published format, field for field: metadata, then queries with query, difficulty,
# query_type, expected_files (here unique suffixes), description and the answer in either form.
QUERY_FILE = {
    "metadata": {"name": "minigrep", "description": "Queries for a small Rust corpus", "version": "1.0"},
    "queries": [
        {
            "query": "regex matcher implementation",
            "difficulty": "Simple",
            "query_type": "Code",
            "expected_files": ["regex/src/matcher.rs", "matcher/src/lib.rs"],
            "description": "Navigation: regex matcher",
            "answer_keywords": ["RegexMatcher"],
        },
        {
            "query": "JSON output printer",
            "difficulty": "Medium",
            "query_type": "Code",
            "expected_files": ["src/json.rs"],
            "description": "Legacy form: keywords and lines must both hold",
            "answer_keywords": ["JSON"],
            "answer_lines": [6, 9],
        },
        {
            "query": "how do I install ripgrep",
            "difficulty": "Hard",
            "query_type": "Doc",
            "expected_files": ["README.md"],
            "description": "An exact path wins over the longer crates/ignore/README.md",
            "answer_keywords": ["cargo install"],
        },
        {
            "query": "which environment variable names the configuration file",
            "difficulty": "ExtraHard",
            "query_type": "Doc",
            "expected_files": ["GUIDE.md"],
            "description": "Regions: any one of them, each restricted to its file pattern",
            "answer_regions": [
                {"keywords": ["RIPGREP_CONFIG_PATH"], "file_pattern": "GUIDE"},
                {"lines": [5, 5], "file_pattern": "README.md"},
            ],
        },
    ],
}

CASES = """
_shared:
  chunking: &chunking
    semantic: {strategy: semantic}
code_retrieval:
  - case: minigrep
    input:
      corpus: {path: mini, include: ["**/*.rs", "**/*.md"]}
      chunking: *chunking
      query_file: queries/minigrep.json
    tags: [rust]
  - case: typed
    input:
      corpus: {path: mini, include: ["**/*.rs", "**/*.md"]}
      chunking: *chunking
      query_file: queries/minigrep.json
      search: by_type
"""


def make_project(root: Path, query_file: dict = QUERY_FILE, cases: str = CASES) -> Path:
    data = root / "benchmark" / "data"
    for name, text in CORPUS.items():
        write(data / "mini" / name, textwrap.dedent(text).lstrip("\n"))
    write(data / "queries" / "minigrep.json", json.dumps(query_file, indent=2))
    write(data / "code_retrieval_data.yaml", cases)
    return data


def test_each_query_becomes_a_case_with_the_tools_values_and_suffix_paths(tmp_path):
    data = make_project(tmp_path)
    suite = load_suite(data, ["code_retrieval"], root=tmp_path)
    assert suite.problems == []
    cases = {c.name: c for c in suite.cases["code_retrieval"]}
    assert sorted(cases) == sorted(
        f"{prefix}.{name}"
        for prefix in ("minigrep", "typed")
        for name in (
            "regex_matcher_implementation",
            "json_output_printer",
            "how_do_i_install_ripgrep",
            "which_environment_variable_names_the",
        )
    )
    first = cases["minigrep.regex_matcher_implementation"]
    assert (first.input.query_type, first.input.difficulty, first.input.search) == ("code", "easy", "all")
    assert first.metadata == {"description": "Navigation: regex matcher", "tags": ["rust"]}
    last = cases["typed.which_environment_variable_names_the"]
    assert (last.input.query_type, last.input.difficulty, last.input.search) == ("doc", "extra_hard", "by_type")
    corpus = code_retrieval.corpus_of(first)
    resolved, problems = code_retrieval.resolve_expected(first, corpus)
    assert problems == []
    assert resolved == {
        "regex/src/matcher.rs": "crates/regex/src/matcher.rs",
        "matcher/src/lib.rs": "crates/matcher/src/lib.rs",
    }
    assert corpus.resolve("README.md") == ("README.md", None)
    assert corpus.resolve("lib.rs")[1] == (
        "expected file lib.rs is ambiguous in the corpus (path mini): "
        "crates/matcher/src/lib.rs, crates/regex/src/lib.rs"
    )
    assert corpus.resolve("x/matcher.rs")[1] == "expected file x/matcher.rs is not in the corpus (path mini)"


def chunk(path: str, start: int, end: int, body: str) -> Chunk:
    return Chunk(path, start, end, body)


def query_case(tmp_path: Path, number: int):  # type: ignore[no-untyped-def]
    make_project(tmp_path)
    raw = {
        "case": "q",
        "input": {"corpus": {"path": "benchmark/data/mini"}, "chunking": {"s": {"strategy": "semantic"}}},
    }
    raw["input"]["query_file"] = str(tmp_path / "benchmark" / "data" / "queries" / "minigrep.json")
    expanded, problems = expand_query_file(raw, tmp_path)
    assert problems == []
    cases, problem = expand_case("code_retrieval", expanded[number], "f.yaml", directory=tmp_path)
    assert problem is None, problem
    return cases[0]


def test_the_legacy_answer_form_needs_keywords_and_lines_together_in_an_expected_file(tmp_path):
    case = query_case(tmp_path, 1)  # answer_keywords [JSON] and answer_lines [6, 9] in src/json.rs
    expected = {"src/json.rs": "crates/printer/src/json.rs"}
    json_file = "crates/printer/src/json.rs"
    assert code_retrieval.holds_answer(case, chunk(json_file, 6, 9, "impl<W: Write> JSON<W> {"), expected)
    assert not code_retrieval.holds_answer(case, chunk(json_file, 1, 4, "pub struct JSON<W> {"), expected)  # lines
    assert not code_retrieval.holds_answer(case, chunk(json_file, 6, 9, "fn write_message"), expected)  # keyword
    assert not code_retrieval.holds_answer(case, chunk("other/json.rs", 6, 9, "JSON"), expected)  # file


def test_answer_regions_match_any_region_each_with_its_file_pattern(tmp_path):
    case = query_case(tmp_path, 3)
    expected = {"GUIDE.md": "GUIDE.md"}
    assert code_retrieval.holds_answer(case, chunk("GUIDE.md", 3, 5, "Set RIPGREP_CONFIG_PATH to"), expected)
    assert not code_retrieval.holds_answer(case, chunk("GUIDE.md", 1, 2, "# User guide"), expected)
    # the second region: lines 5-5 of a file whose path contains README.md, expected or not
    assert code_retrieval.holds_answer(case, chunk("README.md", 3, 5, "Install"), expected)
    assert code_retrieval.holds_answer(case, chunk("crates/ignore/README.md", 4, 6, "x"), expected)
    assert not code_retrieval.holds_answer(case, chunk("README.md", 1, 2, "# ripgrep"), expected)


def test_a_hand_ranked_query_file_case_scores_files_and_answers(tmp_path):
    case = query_case(tmp_path, 0)  # expected: regex/src/matcher.rs and matcher/src/lib.rs
    chunks = [
        Chunk("crates/regex/src/lib.rs", 1, 2, "pub use matcher::RegexMatcher;"),
        Chunk("crates/regex/src/matcher.rs", 3, 6, "pub struct RegexMatcher {"),
        Chunk("README.md", 1, 5, "# ripgrep"),
        Chunk("crates/matcher/src/lib.rs", 1, 4, "pub trait Matcher {"),
    ]
    corpus = code_retrieval.corpus_of(case)
    resolved, _ = code_retrieval.resolve_expected(case, corpus)
    ranked = code_retrieval.rank(code_retrieval.Index(chunks, None, {}), [0.9, 0.8, 0.7, 0.6], expected=resolved)
    values = code_retrieval.metrics(case, ranked)
    # files: regex/lib.rs (not expected), regex/matcher.rs (rel), README.md, matcher/lib.rs (rel)
    # DCG = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3)
    assert values["ndcg_at_10"] == pytest.approx((1 / 1.5849625 + 1 / 2.3219281) / (1 + 1 / 1.5849625), abs=1e-6)
    assert values["mrr_at_10"] == pytest.approx(0.5) and values["recall_at_10"] == 1.0
    # the first chunk holds RegexMatcher but comes from a file that is not expected: the tool
    # would count it; here the answer is second
    assert values["answer_hit_at_1"] == 0.0 and values["answer_mrr_at_10"] == pytest.approx(0.5)


def test_every_error_of_a_query_is_listed_at_once_and_the_other_queries_still_load(tmp_path):
    broken = json.loads(json.dumps(QUERY_FILE))
    broken["queries"][1] |= {"query_type": "Tests", "difficulty": "Easy", "expected_files": []}
    del broken["queries"][1]["description"]
    broken["queries"][2]["expected_files"] = ["lib.rs"]  # two crates have one: skipped, not an error
    data = make_project(tmp_path, broken, CASES.split("  - case: typed")[0])
    suite = load_suite(data, ["code_retrieval"], root=tmp_path)
    assert [p.line() for p in suite.problems] == [
        "benchmark/data/code_retrieval_data.yaml: case 'minigrep.json_output_printer': query 2 of "
        "queries/minigrep.json: query_type: Value error, 'Tests' is not Code or Doc; difficulty: Value error, "
        "'Easy' is not Simple, Medium, Hard or ExtraHard; expected_files: List should have at least 1 item after "
        "validation, not 0; description: missing field",
    ]
    assert [p.line() for p in suite.skipped] == [
        "benchmark/data/code_retrieval_data.yaml: case 'minigrep.how_do_i_install_ripgrep': query 3 of "
        "queries/minigrep.json skipped: expected file lib.rs is ambiguous in the corpus (path mini): "
        "crates/matcher/src/lib.rs, crates/regex/src/lib.rs",
    ]
    assert len(suite.cases["code_retrieval"]) == 2


def test_a_query_file_that_cannot_be_read_is_one_line(tmp_path):
    data = make_project(tmp_path)
    (data / "queries" / "minigrep.json").write_text('{"metadata": {"name": "x"}, "queries": [')
    lines = [p.line() for p in load_suite(data, ["code_retrieval"], root=tmp_path).problems]
    assert lines[0].startswith("benchmark/data/code_retrieval_data.yaml: case 'minigrep': query file ")
    assert "invalid JSON" in lines[0]
    (data / "queries" / "minigrep.json").unlink()
    lines = [p.line() for p in load_suite(data, ["code_retrieval"], root=tmp_path).problems]
    assert lines[0].endswith("query file queries/minigrep.json: cannot read it: No such file or directory")


def test_slugs_are_case_names():
    assert slug("How do I install `ripgrep`?") == "how_do_i_install_ripgrep"
    assert slug("???") == "query"


def test_a_query_the_tool_would_skip_is_skipped_with_one_line_and_the_rest_load(tmp_path):
    query_file = json.loads(json.dumps(QUERY_FILE))
    query_file["queries"][2]["expected_files"] = ["crates/printer/src/json.rs"]  # a doc query, a code file
    query_file["queries"][3]["expected_files"] = ["docs/missing.md"]  # in neither case's corpus
    data = make_project(tmp_path, query_file)
    suite = load_suite(data, ["code_retrieval"], root=tmp_path)
    assert suite.problems == []
    assert [p.line() for p in suite.skipped] == [
        "benchmark/data/code_retrieval_data.yaml: case 'minigrep.which_environment_variable_names_the': query 4 "
        "of queries/minigrep.json skipped: expected file docs/missing.md is not in the corpus (path mini)",
        "benchmark/data/code_retrieval_data.yaml: case 'typed.how_do_i_install_ripgrep': query 3 of "
        "queries/minigrep.json skipped: expected file crates/printer/src/json.rs is code, but a doc query with "
        "search: by_type ranks documentation only",
        "benchmark/data/code_retrieval_data.yaml: case 'typed.which_environment_variable_names_the': query 4 "
        "of queries/minigrep.json skipped: expected file docs/missing.md is not in the corpus (path mini)",
    ]
    assert sorted(c.name for c in suite.cases["code_retrieval"]) == [
        "minigrep.how_do_i_install_ripgrep",
        "minigrep.json_output_printer",
        "minigrep.regex_matcher_implementation",
        "typed.json_output_printer",
        "typed.regex_matcher_implementation",
    ]


def test_a_case_of_the_data_file_that_cannot_be_scored_is_still_a_problem(tmp_path):
    data = make_project(tmp_path)
    (data / "code_retrieval_data.yaml").write_text(
        "code_retrieval:\n"
        "  - case: own\n"
        "    input:\n"
        "      corpus: {path: mini}\n"
        "      chunking: {semantic: {strategy: semantic}}\n"
        "      query: where is the JSON printer\n"
        "      search: by_type\n"
        "    expected: {expected_files: [src/json.rs], answer_keywords: [JSON]}\n"
    )
    suite = load_suite(data, ["code_retrieval"], root=tmp_path)
    assert [p.line() for p in suite.problems] == [
        "benchmark/data/code_retrieval_data.yaml: case 'own': input: Value error, search: by_type needs a "
        "query_type (code or doc)"
    ]
    assert suite.skipped == []


def test_query_type_and_difficulty_are_optional_and_unspecified_when_missing(tmp_path):
    query_file = json.loads(json.dumps(QUERY_FILE))
    for query in query_file["queries"]:
        del query["query_type"], query["difficulty"]
    data = make_project(tmp_path, query_file)
    suite = load_suite(data, ["code_retrieval"], root=tmp_path)
    assert suite.problems == []
    cases = suite.cases["code_retrieval"]
    assert {(c.input.query_type, c.input.difficulty) for c in cases} == {("unspecified", "unspecified")}
    assert {c.name.split(".")[0] for c in cases} == {"minigrep"}  # search: all runs them
    # search: by_type cannot rank a query of no type: each of the typed case's queries is skipped
    assert [p.line().split(": ", 2)[2] for p in suite.skipped] == [
        f"query {n} of queries/minigrep.json skipped: search: by_type needs its query_type (Code or Doc)"
        for n in range(1, 5)
    ]
    assert "query_type" not in cases[0].raw["input"]  # nothing invented: the result key is as written


# --- end to end, with breakdowns -----------------------------------------------------------------

MODELS = "models:\n  - {id: bm25, kind: retriever, builtin: bm25}\n"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write(pytester.path / "benchmark" / "models.yaml", MODELS)
    shutil.copy(REPO / "benchmark" / "test_code_retrieval.py", pytester.path / "benchmark" / "test_code_retrieval.py")
    make_project(pytester.path)
    return pytester


def test_a_query_file_runs_end_to_end_and_rows_carry_type_difficulty_and_tags(project):
    result = project.runpytest("benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=8)
    path = project.path / "benchmark" / "results" / "code_retrieval.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    by_case = {r["case"]: r for r in rows}
    install = by_case["typed.how_do_i_install_ripgrep"]["iterations"][0]
    assert {f["file"] for f in install["top_files"]} <= {"README.md", "GUIDE.md", "crates/ignore/README.md"}
    assert install["search"] == "by_type"
    matcher = by_case["minigrep.regex_matcher_implementation"]["iterations"][0]
    assert (matcher["query_type"], matcher["difficulty"], matcher["tags"]) == ("code", "easy", ["rust"])
    assert matcher["top_files"][0]["expected"] is True
    # grouped by query type: 4 code and 4 doc rows
    typed = [Row.model_validate(r) for r in rows]

    def groups(field):
        counts = {}
        for row in typed:
            for value in breakdown_values(row, field):
                counts[value] = counts.get(value, 0) + 1
        return counts

    assert groups("query_type") == {"code": 4, "doc": 4}
    assert set(groups("difficulty")) == {"easy", "medium", "hard", "extra_hard"}
    assert groups("tags") == {"rust": 4}
    assert breakdown_values(typed[0], "nothing") == []


def test_a_skipped_query_is_one_warning_line_counted_in_the_summary_and_the_rest_runs(project):
    query_file = json.loads(json.dumps(QUERY_FILE))
    query_file["queries"][2]["expected_files"] = ["crates/printer/src/json.rs"]  # skipped under by_type
    make_project(project.path, query_file)
    result = project.runpytest("benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=7)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "warning: benchmark/data/code_retrieval_data.yaml: case 'typed.how_do_i_install_ripgrep': query 3 of "
            "queries/minigrep.json skipped: expected file crates/printer/src/json.rs is code, but a doc query "
            "with search: by_type ranks documentation only",
            "1 case(s) skipped, one line each above; the other cases ran",
        ]
    )


def test_rows_of_queries_without_type_carry_none_and_the_breakdowns_leave_them_out(project):
    query_file = json.loads(json.dumps(QUERY_FILE))
    for query in query_file["queries"][:2]:
        del query["query_type"], query["difficulty"]
    make_project(project.path, query_file, CASES.split("  - case: typed")[0])
    project.runpytest("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=4)
    path = project.path / "benchmark" / "results" / "code_retrieval.jsonl"
    rows = [Row.model_validate(json.loads(line)) for line in path.read_text().splitlines()]
    untyped = [r for r in rows if r.case in ("minigrep.regex_matcher_implementation", "minigrep.json_output_printer")]
    assert len(untyped) == 2
    assert all("query_type" not in r.iterations[0].details for r in untyped)
    from ragmatrix.report.aggregate import aggregate

    table = aggregate({"code_retrieval": rows}, all_families()).families[0]
    by_type = {(b.value, b.items) for b in table.breakdowns if b.field == "query_type"}
    assert by_type == {("doc", 2)}  # the two typed queries; the untyped ones are in no group
