"""Does a pytest run collect anything under the benchmark folder?

The entry point asks before it loads the plugin's hooks and fixtures (`ragmatrix.plugin`), so
this module imports nothing of the benchmark's machinery: a run of other tests in the same
environment never pays for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def benchmark_dir(config: pytest.Config) -> Path:
    """The folder holding test_<family>.py, models.yaml and data/ (ini `benchmark_dir`)."""
    return config.rootpath / str(config.getini("benchmark_dir"))


def collects_benchmark(config: pytest.Config) -> bool:
    """Does this run's command line (or `testpaths`) reach into the benchmark folder?"""
    folder = benchmark_dir(config)
    return folder.is_dir() and selects_benchmark(config.rootpath, folder, [str(a) for a in config.args])


def selects_benchmark(root: Path, benchmark_dir: Path, args: list[str]) -> bool:
    """Does an invocation with these arguments collect anything under the benchmark folder?"""
    bench = benchmark_dir.resolve()
    for arg in args:
        path = (root / arg.split("::")[0]).resolve() if not Path(arg).is_absolute() else Path(arg)
        path = path.resolve()
        if path == bench or bench in path.parents or path in bench.parents:
            return True
    return False
