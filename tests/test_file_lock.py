"""The lock between processes that the stores and the caches write under."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from project import REPO

from ragmatrix.foundations.file_lock import FileLock

fcntl = pytest.importorskip("fcntl")


def held_elsewhere(path) -> bool:
    """Whether another holder (another open of the file, as another process has) is shut out."""
    descriptor = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)  # closing lets go of a lock this probe took
    return False


def descriptors_open_on(path) -> int:
    """How many of this process's descriptors are open on `path` (other threads' files, opened
    and closed meanwhile, are never the lock file)."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{name}") == str(path)
        except OSError:  # closed since it was listed
            pass
    return count


def test_a_held_lock_shuts_out_every_other_holder_until_it_is_left(tmp_path):
    lock = FileLock(tmp_path / "made" / "on-first-use" / ".rows.lock")
    with lock:
        assert held_elsewhere(lock.path)
    assert not held_elsewhere(lock.path)
    with lock:  # taken again on the descriptor it kept
        assert held_elsewhere(lock.path)
    lock.close()
    assert not held_elsewhere(lock.path)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_a_lock_taken_once_closes_its_file_as_it_goes_and_a_kept_one_opens_it_once(tmp_path):
    once = tmp_path / ".once.lock"
    for _ in range(3):
        with FileLock(once):
            assert descriptors_open_on(once) == 1
    assert descriptors_open_on(once) == 0
    kept = FileLock(tmp_path / ".kept.lock")
    for _ in range(3):
        with kept:
            pass
    assert descriptors_open_on(kept.path) == 1
    kept.close()
    assert descriptors_open_on(kept.path) == 0


def test_recording_rows_and_costs_never_imports_filelock(tmp_path):
    """On POSIX the lock is flock itself: filelock's import (about 25 ms of CPU) is not paid by
    a run that records a result and its cost."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from ragmatrix.cost.record import CostRecord\n"
        "from ragmatrix.cost.store import CostStore\n"
        "from ragmatrix.results.rows import Row\n"
        "from ragmatrix.results.store import ResultStore\n"
        "folder = Path(sys.argv[1])\n"
        "row = Row(key='k', family='fam', test='t', model='m', case='c', item='i', scoring_version=1, status='ok')\n"
        "ResultStore(folder).append('fam', row)\n"
        "CostStore(folder).append([CostRecord(family='fam', model='m', device='cpu: X', texts=1)])\n"
        "assert CostStore(folder).compact('fam') == []\n"
        "print(len(ResultStore(folder).load('fam').rows), len(CostStore(folder).load('fam').records),\n"
        "      'filelock' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["1", "1", "False"]
