"""Case discovery, validation, variant expansion and result keys."""

from __future__ import annotations

import gc
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from ragmatrix.foundations.keys import canonical_json, md5_of, result_key
from ragmatrix.suite.loader import load_suite

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
    from ragmatrix.suite.loader import without_prompts

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
    # a collapsed case reads the input of the wording it stands for, the instruction included
    assert collapsed[1].input == cases[1].input and collapsed[1].input.instruction == "Relevant? yes or no."


def validated_rag_fields() -> int:
    """Validated RAG fields alive in this process (earlier tests read cases too)."""
    from ragmatrix.families.rag import RagExpected, RagInput

    gc.collect()
    return sum(isinstance(o, RagInput | RagExpected) for o in gc.get_objects())


def rag_suite_of(tmp_path: Path, count: int):
    """`count` RAG cases, each written with two instruction wordings."""
    lines = ["rag_interpretation:"]
    for index in range(count):
        lines += [
            f"  - case: c{index}",
            "    input:",
            f"      prompt: Question {index}?",
            '      instruction: {simple: "Relevant?", strict: "One word: relevant?"}',
            f'      fragments: ["Fragment {index}."]',
            '    expected: {answer: "yes"}',
        ]
    return suite_of(tmp_path, "\n".join(lines) + "\n")


def test_a_case_is_validated_once_as_it_loads_and_read_from_that(tmp_path, monkeypatch):
    from ragmatrix.seam import case as case_module

    monkeypatch.setattr(case_module, "_RECENTLY_READ", case_module._RecentlyRead(100))
    before = validated_rag_fields()
    suite = rag_suite_of(tmp_path, 30)
    assert validated_rag_fields() == before + 2 * 60  # 60 cases, validated as they loaded, held
    case = suite.cases["rag_interpretation"][3]
    assert case.input is case.input  # an item reads its case several times: validated once
    assert (case.input.prompt, case.input.instruction) == ("Question 1?", "One word: relevant?")
    assert case.expected.answer == "yes"
    assert validated_rag_fields() == before + 2 * 60  # read without validating again


def test_a_large_suite_holds_no_more_validated_cases_than_the_recent_reads(tmp_path, monkeypatch):
    from ragmatrix.seam import case as case_module

    monkeypatch.setattr(case_module, "_RECENTLY_READ", case_module._RecentlyRead(100))
    before = validated_rag_fields()
    suite = rag_suite_of(tmp_path, 300)
    assert validated_rag_fields() == before + 2 * 100  # 600 cases: only the first 100 held validated
    validations: list[str] = []
    validated = case_module.Case.validated

    def counted(case):
        validations.append(case.id)
        return validated(case)

    monkeypatch.setattr(case_module.Case, "validated", counted)
    first, last = suite.cases["rag_interpretation"][0], suite.cases["rag_interpretation"][-1]
    assert first.input.prompt == "Question 0?" and last.input.prompt == "Question 299?"
    assert validations == [last.id]  # the first cases are read first: they are the ones held
    assert validated_rag_fields() == before + 2 * 100  # the oldest let go for the last


# --- strict reading -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "toy:\n  - case: a\n    input: {v: {x: 1, x: 2}}\n    expected: {}\n",
            "x_data.yaml: file: line 3: duplicate key 'x' (first on line 3)",
        ),
        (
            "toy:\n  - case: a\n    case: b\n    input: {}\n    expected: {}\n",
            "x_data.yaml: file: line 3: duplicate key 'case' (first on line 2)",
        ),
        (
            "toy:\n  - case: a\n    input:\n      v:\n        yes: 1\n        True: 2\n    expected: {}\n",
            "x_data.yaml: file: line 6: duplicate key 'True' (line 5 has 'yes', the same key to YAML)",
        ),
        (
            "toy:\n  - case: a\n    input: {v: {on: 1, off: 2}}\n    expected: {}\n",
            "x_data.yaml: case 'a': input.v: variant name True is a boolean to YAML (yes, no, on, off, true and"
            " false are), not text; quote it; input.v: variant name False is a boolean",
        ),
        (
            "toy:\n  - case: a\n    input: {v: {1: x, '1': y, ~: z}}\n    expected: {}\n",
            "x_data.yaml: case 'a': input.v: variant name 1 is a number to YAML, not text; quote it;"
            " input.v: variant name null is null (no value) to YAML, not text; quote it",
        ),
        (
            "toy:\n  - case: 12\n    input: {}\n    expected: {}\n",
            "x_data.yaml: case '#1': the case name 12 is a number",
        ),
        (
            "toy:\n  - case: a\x07\n",
            "x_data.yaml: file: line 2: YAML allows no character #x0007 (byte offset 16; control characters",
        ),
        ("", "x_data.yaml: file: the file is empty (no cases)"),
        ("toy: []\n", "x_data.yaml: file: no cases (every family's list is empty)"),
        (
            "toy:\n  - case: a\n    input: {v: {a: 1, b: 2}, w: {c: 1, d: 2, e: 3}}\n    expected: {}\n",
            "x_data.yaml: case 'a': input expands to 6 variants (v 2 x w 3), more than the limit of 5 ",
        ),
    ],
)
def test_strict_reading_problems_are_one_line(tmp_path, text, expected):
    (tmp_path / "x_data.yaml").write_text(text)
    suite = load_suite(tmp_path, FAMILIES, root=tmp_path, max_variants=5)
    assert [p.line()[: len(expected)] for p in suite.problems] == [expected]
    assert "\n" not in suite.problems[0].line()
    assert not suite.cases


def test_bytes_that_are_not_utf8_are_one_line_with_the_byte_offset_and_other_files_still_load(tmp_path):
    (tmp_path / "a_data.yaml").write_bytes(b"toy:\n  - case: a\n    input: {q: caf\xe9}\n    expected: {}\n")
    (tmp_path / "b_data.yaml").write_text("toy:\n  - case: fine\n    input: {}\n    expected: {}\n")
    suite = load_suite(tmp_path, FAMILIES, root=tmp_path)
    assert [p.line() for p in suite.problems] == [
        "a_data.yaml: file: line 3: not UTF-8 text (byte 0xe9 at byte offset 35); save the file as UTF-8"
    ]
    assert [c.id for c in suite.cases["toy"]] == ["fine"]


def test_a_merge_key_may_be_overridden_and_an_anchor_reused(tmp_path):
    suite = suite_of(
        tmp_path,
        """
        _base: &base {q: shared, v: {a: A, b: B}}
        toy:
          - case: one
            input: {<<: *base, q: own}
            expected: {}
          - case: two
            input: *base
            expected: {}
        """,
    )
    assert not suite.problems
    assert [(c.id, c.input["q"]) for c in suite.cases["toy"]] == [
        ("one:a", "own"),
        ("one:b", "own"),
        ("two:a", "shared"),
        ("two:b", "shared"),
    ]


def test_the_expansion_bomb_is_refused_before_anything_is_built(tmp_path):
    fields = "".join(f"      f{i}: {{{', '.join(f'v{j}: x' for j in range(30))}}}\n" for i in range(5))
    (tmp_path / "x_data.yaml").write_text(f"toy:\n  - case: bomb\n    input:\n{fields}    expected: {{}}\n")
    tracemalloc.start()
    try:
        suite = load_suite(tmp_path, FAMILIES, root=tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    (problem,) = suite.problems
    assert "input expands to 24,300,000 variants (f0 30 x f1 30 x f2 30 x f3 30 x f4 30)" in problem.message
    assert peak < 5_000_000, peak  # bytes; building the variants took gigabytes


def test_aliases_that_expand_without_bound_are_one_line(tmp_path):
    nest = "".join(f"  l{i + 1}: &l{i + 1} [{', '.join([f'*l{i}'] * 10)}]\n" for i in range(8))
    laughs = f"_lol:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n{nest}"
    suite = suite_of(tmp_path, laughs + "toy:\n  - case: a\n    input: {q: *l8}\n    expected: {}\n")
    assert [p.line() for p in suite.problems] == [
        "x_data.yaml: file: its aliases (*name) expand to more than 1,000,000 values; an alias inside an alias"
        " multiplies"
    ]
    cyclic = suite_of(tmp_path, "toy:\n  - case: a\n    input: &i {q: *i}\n    expected: {}\n")
    assert "expand to more than" in cyclic.problems[0].message


def test_every_validation_error_of_a_case_is_listed_with_its_field_path(tmp_path):
    suite = suite_of(
        tmp_path,
        """
        rag_interpretation:
          - case: r
            input:
              prompt: [q]
              instruction: {simple: i, strict: 3}
              fragments: {short: [f], long: [f, 2]}
            expected: {answer: [maybe]}
        """,
    )
    (problem,) = suite.problems
    assert problem.message.split("; ") == [
        "input.prompt: Input should be a valid string",
        "expected.answer: Input should be a valid string",
        "input.fragments.long.1: Input should be a valid string",
        "input.instruction.strict: Input should be a valid string",
    ]
