"""Case discovery, validation, variant expansion and result keys."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from plugin.cases import load_suite
from plugin.keys import canonical_json, md5_of, result_key

FAMILIES = ["rag_interpretation", "toy"]


def suite_of(tmp_path: Path, text: str, name: str = "x_data.yaml"):
    (tmp_path / name).write_text(textwrap.dedent(text))
    return load_suite(tmp_path, FAMILIES, root=tmp_path)


def test_dict_valued_inputs_expand_into_the_product_of_variants(tmp_path):
    suite = suite_of(
        tmp_path,
        """
        toy:
          - case: greet
            input:
              tone: {polite: "Please", blunt: "Now"}
              language: {en: English, de: German, fr: French}
              text: hello
            expected: {answer: hi}
        """,
    )
    assert not suite.problems
    ids = [c.id for c in suite.cases["toy"]]
    assert len(ids) == 6
    # BioChatter's naming: case:choice1:choice2 in the order the fields appear
    assert ids[0] == "greet:polite:en"
    assert "greet:blunt:fr" in ids
    case = suite.cases["toy"][0]
    assert case.input["tone"] == "Please" and case.input["language"] == "English"
    assert case.variant == "polite:en"


def test_a_case_without_dicts_has_no_variant(tmp_path):
    suite = suite_of(tmp_path, "toy:\n  - case: plain\n    input: {a: 1}\n    expected: {b: 2}\n")
    (case,) = suite.cases["toy"]
    assert case.id == "plain" and case.variant == ""


def key_of(case) -> str:
    return result_key(
        family=case.family, test="t", case=case.content(), scoring_version=1, model={"m": 1}, iterations=1
    )


def test_reordering_and_reformatting_yaml_keeps_every_key(tmp_path):
    first = suite_of(
        tmp_path,
        """
        toy:
          - case: c
            input: {q: "what?", style: {a: "A", b: "B"}, k: [1, 2]}
            expected: {answer: "yes", note: x}
        """,
        "a_data.yaml",
    )
    (tmp_path / "a_data.yaml").unlink()
    second = suite_of(
        tmp_path,
        """
        toy:
        - expected:
            note: x
            answer: 'yes'
          input:
            k:
            - 1
            - 2
            style:
              b: B
              a: A
            q: what?
          case: c
        """,
        "b_data.yaml",
    )
    assert sorted(map(key_of, first.cases["toy"])) == sorted(map(key_of, second.cases["toy"]))


def test_changing_a_value_changes_only_that_cases_keys(tmp_path):
    text = """
    toy:
      - case: one
        input: {q: first, v: {a: x, b: y}}
        expected: {answer: "1"}
      - case: two
        input: {q: second}
        expected: {answer: "2"}
    """
    before = {c.id: key_of(c) for c in suite_of(tmp_path, text).cases["toy"]}
    after = {c.id: key_of(c) for c in suite_of(tmp_path, text.replace("first", "FIRST")).cases["toy"]}
    changed = {i for i in before if before[i] != after[i]}
    assert changed == {"one:a", "one:b"}


def test_canonical_json_sorts_keys_and_fixes_separators():
    assert canonical_json({"b": 1, "a": [1, {"d": 2, "c": 3}]}) == '{"a":[1,{"c":3,"d":2}],"b":1}'
    assert md5_of({"a": 1, "b": 2}) == md5_of({"b": 2, "a": 1})


def test_every_part_of_the_key_matters():
    base = dict(family="f", test="t", case={"x": 1}, scoring_version=1, model={"m": 1}, iterations=1)
    keys = {result_key(**base)}
    for change in (
        {"case": {"x": 2}},
        {"scoring_version": 2},
        {"model": {"m": 2}},
        {"iterations": 3},
        {"corpus": "abc"},
        {"test": "u"},
    ):
        keys.add(result_key(**{**base, **change}))
    assert len(keys) == 7


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("toy:\n  - case: a\n    input: {q: [1, 2}\n", "x_data.yaml: file: line 3: YAML syntax error"),
        ("toy:\n  - case: a\n    input: {q: 1}\n", "x_data.yaml: case 'a': missing field 'expected'"),
        ("nope:\n  - case: a\n    input: {}\n    expected: {}\n", "x_data.yaml: file: unknown family 'nope'"),
        (
            "toy:\n  - case: a\n    input: {v: {}}\n    expected: {}\n",
            "x_data.yaml: case 'a': input.v: empty variant dict",
        ),
        (
            "rag_interpretation:\n  - case: r\n    input: {prompt: q, instruction: i}\n    expected: {answer: 'yes'}\n",
            "x_data.yaml: case 'r': input: Value error, give instruction and a non-empty list of fragments",
        ),
        (
            "rag_interpretation:\n  - case: r\n    input: {prompt: q, instruction: i, fragments: [f]}\n"
            "    expected: {answer: maybe, match: yes_no}\n",
            "x_data.yaml: case 'r': expected: Value error, match: yes_no needs answer yes or no",
        ),
        ("toy:\n  - input: {}\n    expected: {}\n", "x_data.yaml: case '#1': missing field 'case'"),
        ("toy:\n  - case: 'a b'\n    input: {}\n    expected: {}\n", "x_data.yaml: case 'a b': case names may use"),
        (
            "toy:\n  - case: a\n    input: {}\n    expected: {}\n    extra: 1\n",
            "x_data.yaml: case 'a': unknown field(s) extra",
        ),
    ],
)
def test_each_problem_is_one_line_naming_file_case_and_problem(tmp_path, text, expected):
    suite = suite_of(tmp_path, text)
    assert len(suite.problems) == 1
    line = suite.problems[0].line()
    assert "\n" not in line
    assert line.startswith(expected), line


def test_duplicate_case_names_are_reported_and_the_first_is_kept(tmp_path):
    (tmp_path / "a_data.yaml").write_text("toy:\n  - case: a\n    input: {q: 1}\n    expected: {}\n")
    (tmp_path / "b_data.yaml").write_text("toy:\n  - case: a\n    input: {q: 2}\n    expected: {}\n")
    suite = load_suite(tmp_path, FAMILIES, root=tmp_path)
    assert [p.line() for p in suite.problems] == ["b_data.yaml: case 'a': duplicate case name (first in a_data.yaml)"]
    assert [c.input["q"] for c in suite.cases["toy"]] == [1]


def test_a_bad_file_does_not_hide_the_cases_of_another(tmp_path):
    (tmp_path / "a_data.yaml").write_text("toy: [ {case: broken\n")
    (tmp_path / "b_data.yaml").write_text("toy:\n  - case: fine\n    input: {}\n    expected: {}\n")
    suite = load_suite(tmp_path, FAMILIES, root=tmp_path)
    assert [p.file for p in suite.problems] == ["a_data.yaml"]
    assert [c.id for c in suite.cases["toy"]] == ["fine"]


def test_top_level_keys_starting_with_underscore_hold_anchors(tmp_path):
    suite = suite_of(
        tmp_path,
        """
        _shared:
          prompts: &p {short: "S", long: "L"}
        toy:
          - case: a
            input: {prompt: *p}
            expected: {}
        """,
    )
    assert not suite.problems
    assert [c.id for c in suite.cases["toy"]] == ["a:short", "a:long"]


def test_prompt_variants_collapse_for_models_that_read_no_prompt(tmp_path):
    suite = suite_of(
        tmp_path,
        """
        rag_interpretation:
          - case: pathway
            input:
              prompt: Which pathways are associated with cancer?
              instruction: {simple: "Relevant? yes or no.", strict: "One word, yes or no."}
              fragments: {short: ["EGFR."], long: ["The EGFR pathway is deregulated in cancers."]}
            expected: {answer: "yes"}
        """,
    )
    from plugin.cases import without_prompts

    cases = suite.cases["rag_interpretation"]
    assert [c.id for c in cases] == [
        "pathway:simple:short",
        "pathway:simple:long",
        "pathway:strict:short",
        "pathway:strict:long",
    ]
    collapsed = without_prompts(cases)
    # the instruction choice goes; the fragment variants, which an embedder does read, stay
    assert [c.id for c in collapsed] == ["pathway:short", "pathway:long"]
    assert all("instruction" not in c.content()["input"] for c in collapsed)
    assert collapsed[0].content()["variant"] == {"fragments": "short"}
    assert len({key_of(c) for c in collapsed}) == 2
