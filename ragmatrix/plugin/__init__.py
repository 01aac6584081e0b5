"""The pytest plugin of ragmatrix, registered through the `pytest11` entry point.

Installing the package is enough: pytest loads this module in every run of the environment.
This module declares the options and asks one question when pytest configures: does the run
collect the benchmark folder (`benchmark/` by default)? Only then does it register the hooks
(`ragmatrix.plugin.hooks`) and the fixtures (`ragmatrix.plugin.fixtures`), and import the
models, pydantic and the suite they need: a run of other tests in the same environment pays for
none of it (about 0.13 s of CPU at every start otherwise).

pytest rewrites the asserts of every package of a distribution that declares a `pytest11`
entry point, so that a failing assert in a plugin's helpers explains itself. The package's
modules hold no such asserts, and rewriting them (parsing each one, walking its tree and
compiling it again) costs every run whose bytecode is not cached about 0.15 s of CPU before
its first request. They are imported plainly instead: `_PlainImports` finds them ahead of
pytest's hook. Benchmark test modules and conftest files are rewritten as usual.
"""

import gc
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Generator, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

import pytest

# Every module of the package, not only this layer's: pytest marks the whole distribution.
_PACKAGE = __name__.partition(".")[0] + "."


class _PlainImports(importlib.abc.MetaPathFinder):
    """Finds the package's own modules the way Python would without pytest."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if path is None or not fullname.startswith(_PACKAGE):
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, path, target)


if not any(isinstance(finder, _PlainImports) for finder in sys.meta_path):
    sys.meta_path.insert(0, _PlainImports())

from ragmatrix.plugin.options import pytest_addoption  # noqa: E402
from ragmatrix.plugin.selection import collects_benchmark  # noqa: E402

__all__ = ["pytest_addhooks", "pytest_addoption", "pytest_cmdline_main", "pytest_collection", "pytest_configure"]

# Set while the cyclic garbage collector is paused for this run's start (`_pause_collector`).
_COLLECTOR_PAUSED = pytest.StashKey[bool]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    import ragmatrix.plugin.hookspecs as hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, Any, Any]:
    """xdist (`-n`): each model's items go to one worker (`--dist loadgroup`, see
    `pytest_xdist_make_scheduler`), so each worker builds each model once, unless the command
    line chooses another distribution. Set before xdist reads it; workers only run the items
    they are sent, so only the controller decides."""
    chosen = getattr(config.option, "dist", None)  # None: xdist is not loaded (-p no:xdist)
    if chosen == "no" and not hasattr(config, "workerinput") and collects_benchmark(config):
        config.option.dist = "loadgroup"
    return (yield)


def pytest_configure(config: pytest.Config) -> None:
    """The marker is declared in every run (`--strict-markers` accepts it anywhere); the hooks
    and fixtures join a run that collects the benchmark, and their own `pytest_configure` runs
    as they are registered."""
    config.addinivalue_line(
        "markers", "cases(where): run a benchmark test only on the cases for which where(case) is true"
    )
    if collects_benchmark(config):
        _pause_collector(config)
        import ragmatrix.plugin.fixtures as fixtures
        import ragmatrix.plugin.hooks as hooks

        for module, name in ((hooks, "ragmatrix-hooks"), (fixtures, "ragmatrix-fixtures")):
            if not config.pluginmanager.is_registered(module):  # not named with `-p` already
                config.pluginmanager.register(module, name)


def _pause_collector(config: pytest.Config) -> None:
    """Pause the cyclic garbage collector from here to the end of collection. What a run builds
    before its first request (the plugin's modules, pydantic, the models, the items) lives to
    the run's end, yet each full collection on the way walked all of it again: 20 to 30 ms of
    CPU before the first request, and a third of collection's CPU at 100,000 items. Collection's
    end freezes those objects (`hooks.py`) and resumes the collector; the few hundred cyclic
    objects that became garbage meanwhile are frozen with them, until a later session in the
    same process unfreezes them."""
    if gc.isenabled():
        gc.disable()
        config.stash[_COLLECTOR_PAUSED] = True
        config.add_cleanup(lambda: _resume_collector(config))  # a run that stops before collecting


def _resume_collector(config: pytest.Config) -> None:
    if config.stash.get(_COLLECTOR_PAUSED, False):
        config.stash[_COLLECTOR_PAUSED] = False
        gc.enable()


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, Any, Any]:
    """The collector resumes when collection ends, however it ends (an xdist controller's
    collection is its workers')."""
    try:
        return (yield)
    finally:
        _resume_collector(session.config)
