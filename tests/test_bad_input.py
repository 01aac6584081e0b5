"""Bad input, end to end: each malformed file gives one line naming the file and the problem,
no traceback, a non-zero exit, and leaves the stored results byte for byte as they were.

Each test starts from a benchmark project with results in place (see `committed`), breaks one
thing, runs `pytest benchmark` and checks the line, the exit status and the results file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from project import SMALL_CASES, assert_outcomes, models_yaml, write

from ragmatrix.models.models_file import ModelsFileError, load_models

RESULTS = "benchmark/results/rag_interpretation.jsonl"
ALL_ITEMS = 7  # as in test_plugin.py: 5 LLM items, 2 embedder items
# The results of the small project, made once per process: the keys do not depend on the
# server's address, so every test's project finds them complete.
_RESULTS: dict[str, bytes] = {}


@pytest.fixture
def committed(bench: pytest.Pytester) -> bytes:
    """The benchmark project with its results in place, as a checkout has them; their bytes."""
    path = bench.path / RESULTS
    if "rows" not in _RESULTS:
        run(bench).assert_outcomes(passed=ALL_ITEMS)
        _RESULTS["rows"] = path.read_bytes()
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_RESULTS["rows"])
        assert_outcomes(run(bench), cached=ALL_ITEMS)  # complete: nothing would run
    return _RESULTS["rows"]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("benchmark", "-p", "no:cacheprovider", *args)


def data_file(bench: pytest.Pytester, text: str | bytes, name: str = "bad_data.yaml") -> Path:
    path = bench.path / "benchmark" / "data" / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        write(path, text)
    return path


def assert_one_line(
    bench: pytest.Pytester, result: pytest.RunResult, line: str, committed: bytes, stream: str = "stdout"
) -> None:
    """The line is printed (fnmatch: `*` matches anything), nothing is tracebacked, the run
    fails, and the results are untouched."""
    output = result.stdout if stream == "stdout" else result.stderr
    output.fnmatch_lines([line])
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    assert result.ret != pytest.ExitCode.OK
    assert (bench.path / RESULTS).read_bytes() == committed


def test_a_data_file_that_is_not_utf8_is_one_line_with_the_byte_offset(bench, committed):
    text = "rag_interpretation:\n  - case: latin\n    input: {prompt: caf\xe9}\n"
    data_file(bench, text.encode("latin-1"))
    data_file(bench, "no_such_family:\n  - case: a\n", name="other_data.yaml")
    result = run(bench)
    offset = text.index("\xe9")
    assert_one_line(
        bench,
        result,
        f"benchmark/data/bad_data.yaml: file: line 3: not UTF-8 text (byte 0xe9 at byte offset {offset});"
        " save the file as UTF-8",
        committed,
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    # the other file's problem is still listed, and no test module is blamed
    result.stdout.fnmatch_lines(["benchmark/data/other_data.yaml: file: unknown family 'no_such_family'*"])
    assert "ERROR collecting benchmark/test_" not in result.stdout.str()


def test_a_models_file_that_is_not_utf8_is_one_line(bench, server, committed):
    text = models_yaml(server.base_url).replace("id: bow", "id: b\xf6w")
    (bench.path / "benchmark/models.yaml").write_bytes(text.encode("latin-1"))
    result = run(bench)
    line = text[: text.index("\xf6")].count("\n") + 1
    assert_one_line(
        bench,
        result,
        f"ERROR: models.yaml: line {line}: not UTF-8 text (byte 0xf6 at byte offset {text.index(chr(0xF6))});"
        " save the file as UTF-8",
        committed,
        stream="stderr",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR


BOMB_FIELDS = 5
BOMB_VARIANTS = 30  # 30 ** 5 = 24,300,000 variants in 2.7 kB of YAML


def bomb() -> str:
    fields = "".join(
        f"      field_{i}: {{{', '.join(f'choice_{j}: text' for j in range(BOMB_VARIANTS))}}}\n"
        for i in range(BOMB_FIELDS)
    )
    return f"rag_interpretation:\n  - case: bomb\n    input:\n{fields}    expected: {{answer: 'yes'}}\n"


def test_a_case_expanding_to_millions_is_one_line_in_seconds_with_little_memory(bench, committed):
    data_file(bench, bomb())
    counts = " x ".join(f"field_{i} 30" for i in range(BOMB_FIELDS))
    expected = (
        f"benchmark/data/bad_data.yaml: case 'bomb': input expands to 24,300,000 variants ({counts}), more than"
        " the limit of 2,000 (--max-variants, or max_variants in the pytest ini file)"
    )
    # In a process of its own, to read its peak memory; the timeout only guards against a hang.
    # Linux's VmHWM is the peak of this process's own memory; ru_maxrss carries over the peak of
    # the process that started it (a test runner that has held a large heap), so it is read only
    # where there is no /proc.
    script = (
        "import os, resource, sys, pytest\n"
        "code = pytest.main(['benchmark', '-p', 'no:cacheprovider'])\n"
        "status = '/proc/self/status'\n"
        "lines = open(status).read().splitlines() if os.path.exists(status) else []\n"
        "peak = [int(line.split()[1]) for line in lines if line.startswith('VmHWM:')]\n"
        "print('PEAK_MB', (peak[0] if peak else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) // 1024)\n"
        "sys.exit(code)\n"
    )
    result = bench.run(sys.executable, "-c", script, timeout=120)
    assert_one_line(bench, result, expected, committed)
    peak = int(result.stdout.str().split("PEAK_MB ")[1].split()[0])
    # About 250 MB here, most of it pytest and its plugins; expanding the case took 3.85 GB and died.
    assert peak < 1024, f"{peak} MB"


def test_the_cap_is_a_setting(bench, committed):
    write(
        bench.path / "benchmark/data/rag_interpretation_data.yaml",
        SMALL_CASES.replace('strict: "Answer with', 'third: "Say yes or no."\n    strict: "Answer with'),
    )
    result = run(bench, "--max-variants", "2", "--collect-only")
    result.stdout.fnmatch_lines(
        ["*case 'pathway_yes': input expands to 3 variants (instruction 3), more than the limit of 2 *"]
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    bench.makeini("[pytest]\nmax_variants = 3\n")
    result = run(bench, "--collect-only")
    assert result.ret == pytest.ExitCode.OK
    result = run(bench, "--max-variants", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --max-variants must be a whole number of at least 1, not 0"])
    assert (bench.path / RESULTS).read_bytes() == committed


def test_variant_names_that_are_not_text_cannot_collide(bench, committed):
    data_file(
        bench,
        """
        rag_interpretation:
          - case: numbered
            input:
              prompt: Which molecular pathways are associated with cancer?
              instruction: {1: "Relevant? yes or no.", "1": "One word, yes or no."}
              fragments: ["The EGFR pathway is deregulated in a number of cancers."]
            expected: {answer: "yes"}
        """,
    )
    result = run(bench)
    assert_one_line(
        bench,
        result,
        "benchmark/data/bad_data.yaml: case 'numbered': input.instruction: variant name 1 is a number to YAML,"
        " not text; quote it",
        committed,
    )


@pytest.mark.parametrize(
    ("variants", "line"),
    [
        ("{simple: 'Yes or no?', simple: 'One word?'}", "line 6: duplicate key 'simple' (first on line 6)"),
        ("\n        yes: 'Yes or no?'\n        True: 'One word?'", "line 8: duplicate key 'True' (line 7 has 'yes'*"),
    ],
    ids=["repeated-variant-name", "yes-and-True"],
)
def test_a_repeated_variant_name_is_one_line_naming_line_and_key(bench, committed, variants, line):
    data_file(
        bench,
        "rag_interpretation:\n"
        "  - case: twice\n"
        "    input:\n"
        "      prompt: Which molecular pathways are associated with cancer?\n"
        "      fragments: ['The EGFR pathway is deregulated in a number of cancers.']\n"
        f"      instruction: {variants}\n"
        "    expected: {answer: 'yes'}\n",
    )
    assert_one_line(bench, run(bench), f"benchmark/data/bad_data.yaml: file: {line}", committed)


def test_a_second_case_line_is_one_line_not_a_renamed_case(bench, committed):
    data_file(
        bench,
        """
        rag_interpretation:
          - case: first_name
            input: {prompt: q, instruction: i, fragments: [f]}
            expected: {answer: "yes"}
            case: second_name
        """,
    )
    result = run(bench)
    assert_one_line(
        bench, result, "benchmark/data/bad_data.yaml: file: line 6: duplicate key 'case' (first on line 3)", committed
    )
    assert "second_name" not in result.stdout.str().replace("duplicate key", "")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("", "the file is empty (no cases)"),
        ("# nothing yet\n", "the file is empty (no cases)"),
        ("rag_interpretation: []\n", "no cases (every family's list is empty)"),
        ("_anchors:\n  a: &a x\n", "no cases (every family's list is empty)"),
    ],
    ids=["empty", "only-a-comment", "empty-list", "only-anchors"],
)
def test_a_file_with_no_cases_is_one_line(bench, committed, text, line):
    data_file(bench, text)
    assert_one_line(bench, run(bench), f"benchmark/data/bad_data.yaml: file: {line}", committed)


def test_every_error_of_a_case_is_listed_at_once_with_its_field_path(bench, committed):
    data_file(
        bench,
        """
        rag_interpretation:
          - case: converted
            input:
              prompt: [a list, not a question]
              instruction: {simple: "Relevant?", strict: "One word?"}
              fragments: {short: [EGFR.], long: [EGFR, 42, {nested: x}]}
            expected: {answer: [maybe]}
            notes: an unknown field
        """,
    )
    result = run(bench)
    assert_one_line(
        bench,
        result,
        "benchmark/data/bad_data.yaml: case 'converted': unknown field(s) notes;"
        " input.prompt: Input should be a valid string;"
        " expected.answer: Input should be a valid string;"
        " input.fragments.long.1: Input should be a valid string;"
        " input.fragments.long.2: Input should be a valid string",
        committed,
    )
    assert "more" not in result.stdout.str().split("case 'converted'")[1].splitlines()[0]


def test_every_error_of_a_models_file_entry_is_listed_at_once(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - id: x\n    kind: robot\n    builtin: bow\n    timeout: -1\n")
    with pytest.raises(ModelsFileError) as caught:
        load_models(path)
    assert str(caught.value) == (
        "models.yaml: model 'x': kind: Input should be 'llm', 'embedder', 'retriever', 'ensemble' or 'reranker';"
        " timeout: Input should be greater than 0"
    )


def test_a_models_file_with_a_repeated_key_is_one_line(bench, server, committed):
    text = models_yaml(server.base_url).replace("    timeout: 10\n", "    timeout: 10\n    timeout: 5\n")
    write(bench.path / "benchmark/models.yaml", text)
    result = run(bench)
    line = text.index("timeout: 5")
    assert_one_line(
        bench,
        result,
        f"ERROR: models.yaml: line {text[:line].count(chr(10)) + 1}: duplicate key 'timeout' (first on line *)",
        committed,
        stream="stderr",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR


# A run in a process of its own, with its memory capped: reading a link to /dev/zero must fail
# the test, not the machine. The timeout only guards against a hang (a FIFO with no writer).
CAPPED_RUN = (
    "import resource, sys, pytest\n"
    "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
    "sys.exit(pytest.main(['benchmark', '-p', 'no:cacheprovider']))\n"
)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_data_file_that_is_a_fifo_or_a_device_is_refused_in_one_line_never_read(bench, committed):
    data = bench.path / "benchmark" / "data"
    os.mkfifo(data / "pipe_data.yaml")  # nothing ever writes to it
    os.symlink("/dev/zero", data / "zero_data.yaml")  # endless bytes
    result = bench.run(sys.executable, "-c", CAPPED_RUN, timeout=120)
    assert_one_line(
        bench,
        result,
        "case problem: benchmark/data/pipe_data.yaml: file: cannot read file: not a regular file (a FIFO)",
        committed,
    )
    result.stdout.fnmatch_lines(
        ["case problem: benchmark/data/zero_data.yaml: file: cannot read file: not a regular file (a character device)"]
    )
    result.stdout.fnmatch_lines(["*7 cached*"])  # every other item as it was


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_models_file_that_is_a_fifo_is_one_line(bench, committed):
    models = bench.path / "benchmark" / "models.yaml"
    models.unlink()
    os.mkfifo(models)
    result = bench.run(sys.executable, "-c", CAPPED_RUN, timeout=120)
    assert_one_line(
        bench, result, "ERROR: models.yaml: cannot read file: not a regular file (a FIFO)", committed, stream="stderr"
    )


def test_a_results_file_that_cannot_be_read_is_one_line_and_every_other_row_counts(bench, committed):
    # a folder where a family's rows would be: unreadable as a file, for root too
    (bench.path / "benchmark" / "results" / "zelo_battles.jsonl").mkdir()
    result = run(bench)
    assert_outcomes(result, cached=ALL_ITEMS)
    result.stdout.fnmatch_lines(["store: zelo_battles.jsonl: cannot read it (not a regular file (a folder); ignored)"])
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "ERROR collecting" not in text
    assert text.count("zelo_battles.jsonl") == 1
    assert (bench.path / RESULTS).read_bytes() == committed
    assert (bench.path / "benchmark" / "results" / "zelo_battles.jsonl").is_dir()  # left as it was
