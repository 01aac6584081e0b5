"""Under pytest-xdist (`-n`, `--dist loadgroup`): each model's items go to one worker.

A worker builds every model it runs an item of, and building is what costs (loading MiniLM,
launching an Xinference model, importing a client). Each benchmark item carries its model's
`xdist_group` mark, but xdist turns that mark into a group only through an item attribute that
pytest 9 no longer reads. This scheduler groups by what the controller already knows instead:
the model id that begins every benchmark item's parameters (`test_x[<model>-<case>]`). xdist's
scope scheduling does the rest (`ragmatrix.plugin.pytest_internals.scope_scheduler`).
"""

from __future__ import annotations

from typing import Any

import pytest

from ragmatrix.plugin.pytest_internals import scope_scheduler


class ModelGroups:
    """Which scope an item belongs to: its model's, for a benchmark item."""

    def __init__(self, models: list[str], benchmark_prefix: str) -> None:
        self.models = sorted(models, key=len, reverse=True)  # "gpt-4o-mini" before "gpt-4o"
        self.benchmark_prefix = benchmark_prefix  # "benchmark/": whose items are grouped

    def scope_of(self, nodeid: str) -> str:
        if nodeid.rfind("@") > nodeid.rfind("]"):  # a group name xdist did append
            return nodeid.rsplit("@", 1)[1]
        if nodeid.startswith(self.benchmark_prefix) and nodeid.endswith("]"):
            parameters = nodeid.rpartition("::")[2].partition("[")[2]
            for model in self.models:
                if parameters.startswith(f"{model}-"):
                    return f"model {model}"
        return nodeid


def model_scheduler(config: pytest.Config, log: Any, models: list[str], benchmark_prefix: str) -> Any:
    """xdist's scheduler that sends each model's items to one worker."""
    return scope_scheduler(config, log, ModelGroups(models, benchmark_prefix).scope_of, name=ModelGroups.__name__)
