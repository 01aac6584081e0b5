"""A results folder or cache folder that cannot be written: a fully cached run still works, a
run that must write stops with one line naming the folder and the cause, stored rows stay whole.

Tests run as root here, and root writes through file permissions, so a read-only folder is a
real read-only mount and a full folder a real full tmpfs, each made in a private mount
namespace of the `pytest benchmark` process the test starts (`unshare -rm`; nothing outside
that process sees them, and they vanish with it). Where namespaces are not allowed those
tests skip; the in-process tests below fail the operating system call itself
(`os.open`, `os.write`) and run everywhere.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from project import REPO, SMALL_CASES, assert_outcomes, dense_words_project, models_yaml, write

from ragmatrix.foundations import file_lock as lock_module
from ragmatrix.foundations.storage import StorageError
from ragmatrix.results import store as store_module
from ragmatrix.results.rows import Row
from ragmatrix.results.store import ResultStore


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


needs_mounts = pytest.mark.skipif(not _namespaces_work(), reason="no private mount namespace here (unshare -rm)")

PAGE = 4096  # tmpfs gives space in pages: a file whose last page is full needs a new one to grow


def project(root: Path) -> Path:
    """The RAG module, three cases and the bag-of-words baseline (2 items), no server."""
    (root / "benchmark" / "data").mkdir(parents=True)
    shutil.copy(REPO / "benchmark" / "test_rag_interpretation.py", root / "benchmark")
    write(root / "benchmark" / "data" / "rag_interpretation_data.yaml", SMALL_CASES)
    write(root / "benchmark" / "models.yaml", models_yaml(None))
    write(root / "pytest.ini", "[pytest]\n")
    (root / "cache").mkdir()
    return root


def caching_embedder(root: Path) -> Path:
    """The project with an embedder that writes its rows to the embedding cache (the
    bag-of-words baseline keeps none): the `dense_words` test provider, under the same id."""
    dense_words_project(root)
    write(root / "benchmark" / "models.yaml", "models:\n  - {id: bow, kind: embedder, dense_words: true}\n")
    return root


def pytest_in(root: Path, *args: str, mounts: str = "", after: str = "") -> subprocess.CompletedProcess[str]:
    """`python -m pytest benchmark ...` in `root`, with `mounts` made first in a namespace of its own."""
    command = shlex.join([sys.executable, "-m", "pytest", "benchmark", "-p", "no:cacheprovider", *args])
    environment = {**os.environ, "RAGMATRIX_CACHE_DIR": str(root / "cache")}
    if not mounts:
        return subprocess.run(command, shell=True, cwd=root, env=environment, capture_output=True, text=True)
    script = f"set -e; {mounts}; set +e; {command}; status=$?; {after or 'true'}; exit $status"
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], cwd=root, env=environment, capture_output=True, text=True
    )


def read_only(folder: Path) -> str:
    return f"mount --bind {folder} {folder}; mount -o remount,bind,ro {folder}"


def full(folder: Path, staging: Path) -> str:
    """A tmpfs over `folder` holding what it held, then filled to the last page."""
    staging.mkdir()
    return (
        f"cp -a {folder}/. {staging}/; mount -t tmpfs -o size=256k tmpfs {folder}; cp -a {staging}/. {folder}/; "
        f"(dd if=/dev/zero of={folder}/.fill bs={PAGE} 2>/dev/null || true)"
    )


def one_line_stop(result: subprocess.CompletedProcess[str], folder: str, cause: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode not in (0, 1), output
    assert f"cannot write the {folder}: {cause}" in output, output
    assert "Interrupted:" in output and "what is stored is unchanged" in output
    assert "Traceback" not in output and "sqlite3." not in output


def filled(root: Path) -> bytes:
    """One real run fills the store and the cache; the stored file's bytes."""
    first = pytest_in(root)
    assert first.returncode == 0, first.stdout + first.stderr
    return (root / "benchmark" / "results" / "rag_interpretation.jsonl").read_bytes()


def add_a_case(root: Path) -> None:
    data = root / "benchmark" / "data" / "rag_interpretation_data.yaml"
    data.write_text(
        data.read_text()
        + "  - case: pathway_new\n    input:\n      prompt: Which genes?\n      instruction: *explicit\n"
        + '      fragments: ["TP53 is a gene."]\n    expected: {answer: "yes"}\n'
    )


@needs_mounts
def test_a_fully_cached_run_succeeds_with_read_only_results_and_cache_folders(tmp_path):
    root = project(tmp_path)
    stored = filled(root)
    results, cache = root / "benchmark" / "results", root / "cache"
    (results / ".rag_interpretation.jsonl.lock").unlink()  # reading must not need to make it
    result = pytest_in(root, mounts=f"{read_only(results)}; {read_only(cache)}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _outcomes(result.stdout) == {"cached": 2, "skipped": 1}
    assert "ragmatrix leaderboard" in result.stdout
    assert (results / "rag_interpretation.jsonl").read_bytes() == stored


@needs_mounts
def test_a_run_that_must_write_to_a_read_only_results_folder_stops_with_one_line(tmp_path):
    root = project(tmp_path)
    stored = filled(root)
    add_a_case(root)
    results = root / "benchmark" / "results"
    result = pytest_in(root, mounts=read_only(results))
    one_line_stop(result, "results folder benchmark/results", "Read-only file system")
    assert (results / "rag_interpretation.jsonl").read_bytes() == stored


@needs_mounts
def test_under_xdist_a_read_only_results_folder_stops_the_run_with_one_line(tmp_path):
    root = project(tmp_path)
    stored = filled(root)
    results = root / "benchmark" / "results"
    result = pytest_in(root, "-n", "2", "--run-all", mounts=read_only(results))
    one_line_stop(result, "results folder benchmark/results", "Read-only file system")
    assert (results / "rag_interpretation.jsonl").read_bytes() == stored


@needs_mounts
def test_a_full_results_folder_stops_the_run_and_the_stored_rows_stay_whole(tmp_path):
    root = project(tmp_path)
    filled(root)
    results = root / "benchmark" / "results"
    data = results / "rag_interpretation.jsonl"
    # Blank lines (which loading skips) up to a page boundary, so that one more row needs a page.
    with open(data, "ab") as handle:
        handle.write(b"\n" * (-data.stat().st_size % PAGE))
    stored = data.read_bytes()
    out = tmp_path / "out"
    out.mkdir()
    result = pytest_in(
        root, "--run-all", mounts=full(results, tmp_path / "staging"), after=f"cp {data} {out}/after.jsonl"
    )
    one_line_stop(result, "results folder benchmark/results", "No space left on device")
    assert (out / "after.jsonl").read_bytes() == stored  # the part of a row written was cut off again


@needs_mounts
def test_a_read_only_cache_folder_stops_a_run_that_must_embed_with_one_line(tmp_path):
    root = caching_embedder(project(tmp_path))
    stored = filled(root)
    result = pytest_in(root, "--run-all", mounts=read_only(root / "cache"))
    one_line_stop(result, "cache folder cache", "Read-only file system")
    assert "--no-response-cache runs without the caches" in result.stdout
    assert (root / "benchmark" / "results" / "rag_interpretation.jsonl").read_bytes() == stored


@needs_mounts
def test_a_full_cache_folder_stops_the_run_with_one_line(tmp_path):
    root = caching_embedder(project(tmp_path))
    result = pytest_in(root, mounts=full(root / "cache", tmp_path / "staging"))
    one_line_stop(result, "cache folder cache", "database or disk is full")


def _outcomes(stdout: str) -> dict[str, int]:
    last = stdout.strip().splitlines()[-1]
    found: dict[str, int] = {}
    for part in last.strip("= ").split(" in ")[0].split(", "):
        count, name = part.split(" ", 1)
        found[name] = int(count)
    return found


# --- in-process: the failing call injected at the operating system call ---------------------


def row(item: str) -> Row:
    fields = {"key": item, "family": "fam", "test": "t", "model": "m", "case": item, "item": item}
    return Row.model_validate({**fields, "scoring_version": 1, "status": "ok", "score": 1.0})


class FailingOs:
    """`os` as the store's modules see it, with one call failing as the file system would."""

    def __init__(self, fail: str, code: int, after_bytes: int = 0) -> None:
        self.fail, self.code, self.after_bytes = fail, code, after_bytes

    def __getattr__(self, name: str):
        real = getattr(os, name)
        if name != self.fail:
            return real

        def failing(*args, **kwargs):
            if name == "write" and self.after_bytes:  # a full disk takes part of the line first
                descriptor, data = args
                written = real(descriptor, bytes(data)[: self.after_bytes])
                self.after_bytes = 0
                return written
            raise OSError(self.code, os.strerror(self.code))

        return failing


def read_only_in_process(monkeypatch) -> None:
    """The results folder on a read-only file system: the store's files and its lock file."""
    for module in (store_module, lock_module):
        monkeypatch.setattr(module, "os", FailingOs("open", errno.EROFS))


def test_a_full_disk_mid_row_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    store.append("fam", row("a"))
    before = store.path("fam").read_bytes()
    monkeypatch.setattr(store_module, "os", FailingOs("write", errno.ENOSPC, after_bytes=20))
    with pytest.raises(StorageError) as caught:
        store.append("fam", row("b"))
    monkeypatch.undo()
    assert str(caught.value) == f"cannot write the results folder {tmp_path}: No space left on device"
    assert store.path("fam").read_bytes() == before
    store.append("fam", row("c"))  # the disk has room again
    assert [r.item for r in store.load("fam").rows] == ["a", "c"]


def test_a_read_only_results_folder_fails_a_write_with_a_storage_error_and_reads_as_before(tmp_path, monkeypatch):
    ResultStore(tmp_path).append("fam", row("a"))
    (tmp_path / ".fam.jsonl.lock").unlink()
    read_only_in_process(monkeypatch)
    store = ResultStore(tmp_path)
    assert [r.item for r in store.load("fam").rows] == ["a"]  # reading opens no file for writing
    assert store.compact("fam").problems == []  # already compact: nothing written, no lock taken
    with pytest.raises(StorageError, match="Read-only file system"):
        store.append("fam", row("b"))
    with pytest.raises(StorageError, match="Read-only file system"):
        store.prepare("fam")
    assert not (tmp_path / ".fam.jsonl.lock").exists()


def test_a_read_only_results_folder_stops_an_in_process_run_with_one_line(bench, monkeypatch):
    bench.runpytest("benchmark", "-p", "no:cacheprovider", "--models", "bow").assert_outcomes(passed=2, skipped=1)
    stored = (bench.path / "benchmark" / "results" / "rag_interpretation.jsonl").read_bytes()
    read_only_in_process(monkeypatch)
    cached = bench.runpytest("benchmark", "-p", "no:cacheprovider", "--models", "bow")
    assert_outcomes(cached, cached=2, skipped=1)
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider", "--models", "bow", "--run-all")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*Interrupted: cannot write the results folder *: Read-only file system; the run*"])
    assert "Traceback" not in result.stdout.str()
    assert (bench.path / "benchmark" / "results" / "rag_interpretation.jsonl").read_bytes() == stored
    json.loads(stored.splitlines()[0])  # still rows
