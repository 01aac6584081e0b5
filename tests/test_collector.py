"""What lives to the run's end is kept out of the cyclic garbage collector's walks."""

from __future__ import annotations

import gc

import pytest
from project import write

from ragmatrix.foundations import collector

# A conftest that counts, as pytest ends, the items' reports the terminal keeps and how many of
# them the collector still walks.
COUNT_WALKED_REPORTS = """
import gc

def pytest_unconfigure(config):
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    reports = [r for kept in reporter.stats.values() for r in kept if hasattr(r, "when")]
    walked = {id(o) for o in gc.get_objects()}
    with open("walked.txt", "a") as handle:
        handle.write(f"{len(reports)} {sum(id(r) in walked for r in reports)}\\n")
"""


@pytest.fixture(autouse=True)
def unfrozen():
    """What a test freezes goes back to the collector, as a later session's start does."""
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()


def test_the_block_runs_with_the_collector_paused_and_what_it_made_is_frozen_after():
    gc.unfreeze()
    with collector.made_to_last():
        paused = not gc.isenabled()
        made = [[] for _ in range(10)]
    assert paused and gc.isenabled()
    walked = {id(o) for o in gc.get_objects()}
    assert not any(id(o) in walked for o in made)
    assert gc.get_freeze_count() >= len(made)


def test_a_collector_paused_before_the_block_stays_paused():
    gc.disable()
    with collector.made_to_last():
        pass
    assert not gc.isenabled()


def test_a_block_that_fails_resumes_the_collector_and_freezes_nothing():
    gc.unfreeze()
    with pytest.raises(ImportError), collector.made_to_last():
        raise ImportError("no module named nothing_here")
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_what_a_benchmark_run_made_is_frozen_at_its_end_and_another_sessions_is_not(bench):
    """The reports of a benchmark's items live to the process's end (the terminal keeps them):
    the session's end freezes them, so that pytest's collections at exit and the interpreter's
    do not walk them. A session without benchmark items is left as pytest runs it."""
    write(bench.path / "conftest.py", COUNT_WALKED_REPORTS)
    write(bench.path / "test_plain.py", "def test_one():\n    pass\n")
    bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=7)
    assert "7 cached" in bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider").stdout.str()
    bench.runpytest_subprocess("test_plain.py", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    (cold, cold_walked), (cached, cached_walked), (plain, plain_walked) = [
        map(int, line.split()) for line in (bench.path / "walked.txt").read_text().splitlines()
    ]
    assert cold >= 7 and cached >= 7 and plain >= 1
    assert cold_walked == 0 and cached_walked == 0
    assert plain_walked == plain


# Garbage in a cycle whose finalizer raises, made as the session ends (before the plugin's end),
# with the collector paused so that only an explicit collection finds it.
RAISING_GARBAGE = """
import gc, pytest

class Raising:
    def __del__(self):
        raise RuntimeError("raised by garbage found at the end")

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    gc.disable()
    garbage = Raising()
    garbage.cycle = garbage
"""


def test_garbage_left_at_a_benchmark_runs_end_is_collected_before_the_freeze(bench):
    """pytest looks for exceptions raised by garbage as it ends: what is garbage when the
    session ends is collected before the rest is frozen, so pytest still hears of it."""
    write(bench.path / "conftest.py", RAISING_GARBAGE)
    result = bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "-W", "default")
    assert "raised by garbage found at the end" in result.stdout.str() + result.stderr.str()
