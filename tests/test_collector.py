"""What lives to the run's end is kept out of the cyclic garbage collector's walks."""

from __future__ import annotations

import gc

import pytest

from ragmatrix.foundations import collector


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
