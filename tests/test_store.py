"""The result store: locked appends, torn lines, compaction, atomic replace."""

from __future__ import annotations

import json
import multiprocessing

from ragmatrix.results.rows import Row
from ragmatrix.results.store import ResultStore


def row(item: str, score: float | None, model: str = "m", test: str = "t", **extra) -> Row:
    fields = {
        "key": f"{model}-{item}-{score}",
        "family": "fam",
        "test": test,
        "model": model,
        "case": item,
        "item": item,
        "scoring_version": 1,
        "score": score,
        "status": "ok",
    }
    return Row.model_validate({**fields, **extra})


def test_rows_are_written_one_per_line_with_sorted_keys_and_only_the_fields_given(tmp_path):
    store = ResultStore(tmp_path)
    store.append("fam", Row.model_validate({**row("i", 1).to_json(), "z": 1, "a": 2, "key": "k"}))
    line = store.path("fam").read_text()
    assert line == (
        '{"a": 2, "case": "i", "family": "fam", "item": "i", "key": "k", "model": "m", "score": 1, '
        '"scoring_version": 1, "status": "ok", "test": "t", "z": 1}\n'
    )
    assert store.completed() == {("m", "k")}


def test_error_rows_are_not_results(tmp_path):
    store = ResultStore(tmp_path)
    store.append("fam", row("a", 1, key="good"))
    store.append("fam", row("b", None, key="bad", status="error"))
    assert store.completed() == {("m", "good")}


def test_a_line_that_is_not_a_valid_row_is_reported_and_skipped(tmp_path):
    store = ResultStore(tmp_path)
    store.append("fam", row("a", 1))
    with open(store.path("fam"), "a") as handle:
        handle.write('{"key": "x", "status": "maybe"}\n')
    loaded = store.load("fam")
    assert [r.item for r in loaded.rows] == ["a"]
    (problem,) = loaded.problems
    assert problem.startswith("fam.jsonl: line 2 is not a valid result row (") and problem.endswith("ignored)")


def test_a_torn_last_line_is_ignored_reported_and_repaired_by_the_next_append(tmp_path):
    store = ResultStore(tmp_path)
    store.append("fam", row("a", 1))
    with open(store.path("fam"), "ab") as handle:
        handle.write(b'{"key": "half", "sco')  # a writer killed mid-line
    loaded = store.load("fam")
    assert [r.item for r in loaded.rows] == ["a"]
    assert loaded.problems == ["fam.jsonl: line 2 is torn or not JSON (ignored)"]
    store.append("fam", row("b", 1))
    assert [r.item for r in store.load("fam").rows] == ["a", "b"]
    compacted = store.compact("fam")
    assert len(compacted.problems) == 1
    assert store.load("fam").problems == []  # compaction drops the torn fragment


def test_compaction_keeps_the_newest_row_per_identity_sorted(tmp_path):
    store = ResultStore(tmp_path)
    store.append("fam", row("b", 0.0, model="y"))
    store.append("fam", row("a", 0.0))
    store.append("fam", row("a", 1.0))  # newer result for the same (test, model, item)
    store.append("fam", row("a", 0.5, test="other"))
    store.compact("fam")
    rows = [json.loads(line) for line in store.path("fam").read_text().splitlines()]
    assert [(r["model"], r["test"], r["item"], r["score"]) for r in rows] == [
        ("m", "other", "a", 0.5),
        ("m", "t", "a", 1.0),
        ("y", "t", "b", 0.0),
    ]


def test_compaction_drops_only_what_keep_rejects(tmp_path):
    store = ResultStore(tmp_path)
    for item in "abc":
        store.append("fam", row(item, 1))
    store.compact("fam", keep=lambda r: r.item != "b")
    left = store.as_last_read("fam")  # what compaction left, as the summary after it reads it
    assert left is not None and [r.item for r in left.rows] == ["a", "c"]
    assert [r.item for r in store.load("fam").rows] == ["a", "c"]
    assert not list(tmp_path.glob("*.tmp"))
    assert ResultStore(tmp_path).as_last_read("fam") is None  # a store that has read nothing


def test_after_compaction_the_store_remembers_exactly_the_file_it_wrote(tmp_path):
    import hashlib

    store = ResultStore(tmp_path)
    for item in "cab":
        store.append("fam", row(item, 1, answer="ünïcode " * 50))
    store.compact("fam")
    written = store.path("fam").read_bytes()
    # the view kept from the write is the file's: its digest, and a row appended next continues it
    size = len(written)
    assert store.read_digest("fam") == f"{hashlib.blake2b(written).hexdigest()}:{size}:{size}"
    store.append("fam", row("d", 1))
    assert [r.item for r in store.load("fam").rows] == ["a", "b", "c", "d"]
    assert [r.item for r in ResultStore(tmp_path).load("fam").rows] == ["a", "b", "c", "d"]


def _writer(directory: str, worker: int, count: int) -> None:
    store = ResultStore(directory)
    for index in range(count):
        store.append("fam", row(f"{worker}-{index}", 1, extra="x" * 5000))


def test_concurrent_writers_lose_no_row(tmp_path):
    processes = [multiprocessing.Process(target=_writer, args=(str(tmp_path), w, 50)) for w in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    loaded = ResultStore(tmp_path).load("fam")
    assert loaded.problems == []
    assert len({r.item for r in loaded.rows}) == 200


def test_compaction_leaves_an_ordinary_file_mode(tmp_path):
    import os
    import stat

    store = ResultStore(tmp_path)
    store.append("fam", row("i", 1.0))
    before = stat.S_IMODE((tmp_path / "fam.jsonl").stat().st_mode)
    store.compact("fam")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "fam.jsonl").stat().st_mode) == before == 0o666 & ~umask


def test_a_compact_file_is_neither_rewritten_nor_locked(tmp_path):
    store = ResultStore(tmp_path)
    for item in "ab":
        store.append("fam", row(item, 1))
    store.compact("fam")
    store.close()
    (tmp_path / ".fam.jsonl.lock").unlink()
    before = (tmp_path / "fam.jsonl").stat()
    again = ResultStore(tmp_path)
    assert again.compact("fam").problems == []
    after = (tmp_path / "fam.jsonl").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not (tmp_path / ".fam.jsonl.lock").exists()  # reading and checking take no lock
    again.append("fam", row("a", 0.5))  # now the file holds an item twice: compaction rewrites it
    again.compact("fam")
    assert (tmp_path / "fam.jsonl").stat().st_ino != before.st_ino
    assert [(r.item, r.score) for r in again.load("fam").rows] == [("a", 0.5), ("b", 1)]


def test_loading_again_parses_only_the_lines_appended_since(tmp_path, monkeypatch):
    from ragmatrix.results import store as store_module

    store = ResultStore(tmp_path)
    for item in "abc":
        store.append("fam", row(item, 1))
    assert len(store.load("fam").rows) == 3
    parsed: list[int] = []
    parse = store_module._parse
    monkeypatch.setattr(
        store_module, "_parse", lambda name, number, *rest: parsed.append(number) or parse(name, number, *rest)
    )
    assert len(store.load("fam").rows) == 3
    assert parsed == []
    ResultStore(tmp_path).append("fam", row("d", 1))  # another process appends
    assert [r.item for r in store.load("fam").rows] == ["a", "b", "c", "d"]
    assert parsed == [4]


def test_a_file_another_process_replaced_is_read_anew_and_appended_to_anew(tmp_path):
    mine, other = ResultStore(tmp_path), ResultStore(tmp_path)
    for item in "abc":
        mine.append("fam", row(item, 1))
    assert len(mine.load("fam").rows) == 3
    other.compact("fam", keep=lambda r: r.item != "b")  # a new file in the old one's place
    assert [r.item for r in mine.load("fam").rows] == ["a", "c"]
    mine.append("fam", row("d", 1))  # into the new file, not the replaced one
    assert [r.item for r in ResultStore(tmp_path).load("fam").rows] == ["a", "c", "d"]


def test_a_torn_last_line_being_written_is_read_once_it_is_whole(tmp_path):
    store = ResultStore(tmp_path)
    store.append("fam", row("a", 1))
    line = json.dumps(row("b", 1).to_json(), sort_keys=True).encode()
    with open(store.path("fam"), "ab") as handle:
        handle.write(line[:10])
    loaded = store.load("fam")
    assert [r.item for r in loaded.rows] == ["a"] and loaded.problems == [
        "fam.jsonl: line 2 is torn or not JSON (ignored)"
    ]
    with open(store.path("fam"), "ab") as handle:
        handle.write(line[10:] + b"\n")  # the writer was only slow: the line is whole now
    loaded = store.load("fam")
    assert [r.item for r in loaded.rows] == ["a", "b"] and loaded.problems == []


def test_a_file_that_cannot_be_read_is_one_problem_and_never_written_over(tmp_path):
    (tmp_path / "fam.jsonl").mkdir()  # unreadable as a file, for root too
    store = ResultStore(tmp_path)
    loaded = store.load("fam")
    assert loaded.rows == []
    assert loaded.problems == ["fam.jsonl: cannot read it (not a regular file (a folder); ignored)"]
    assert store.completed() == set()
    assert store.compact("fam").problems == loaded.problems
    assert (tmp_path / "fam.jsonl").is_dir() and not list(tmp_path.glob(".*.tmp"))


def test_loaded_rows_hold_what_they_share_once_and_write_back_as_they_were(tmp_path):
    store = ResultStore(tmp_path)
    given = [row(f"i{n}", n / 10, usage={"calls": 1}, iterations=[{"score": n / 10, "parsed": "no"}]) for n in range(5)]
    given.append(row("odd", 0.5, note="a field of its own"))
    for one in given:
        store.append("fam", one)
    loaded = ResultStore(tmp_path).load("fam").rows
    assert [r.to_json() for r in loaded] == [r.to_json() for r in given]
    alike = loaded[:5]
    # the largest part of a parsed row: the set of its given fields, held once for rows alike
    assert all(r.__pydantic_fields_set__ is alike[0].__pydantic_fields_set__ for r in alike)
    assert loaded[5].__pydantic_fields_set__ is not alike[0].__pydantic_fields_set__
    assert all(r.iterations[0].__pydantic_fields_set__ is alike[0].iterations[0].__pydantic_fields_set__ for r in alike)
    assert all(r.provenance is alike[0].provenance and r.usage is alike[0].usage for r in alike)


def test_one_familys_completed_results_are_read_from_its_file_alone(tmp_path):
    store = ResultStore(tmp_path)
    store.append("fam", row("a", 1, key="mine"))
    store.append("other", row("b", 1, key="theirs"))
    reader = ResultStore(tmp_path)
    assert reader.completed("fam") == {("m", "mine")}
    assert reader.as_last_read("other") is None
    assert reader.completed() == {("m", "mine"), ("m", "theirs")}
