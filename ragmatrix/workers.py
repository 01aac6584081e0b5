"""Under pytest-xdist (`-n`, `--dist loadgroup`): each model's items go to one worker.

A worker builds every model it runs an item of, and building is what costs (loading MiniLM,
launching an Xinference model, importing a client). Each benchmark item carries its model's
`xdist_group` mark, but xdist turns that mark into a group only through an item attribute that
pytest 9 no longer reads. This scheduler groups by what the controller already knows instead:
the model id that begins every benchmark item's parameters (`test_x[<model>-<case>]`).
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling


class ModelGroups(LoadScopeScheduling):
    """xdist's scope scheduling, where a benchmark item's scope is its model."""

    def __init__(self, config: pytest.Config, log: Any, models: list[str], benchmark_prefix: str) -> None:
        super().__init__(config, log)
        self.models = sorted(models, key=len, reverse=True)  # "gpt-4o-mini" before "gpt-4o"
        self.benchmark_prefix = benchmark_prefix  # "benchmark/": whose items are grouped

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.rfind("@") > nodeid.rfind("]"):  # a group name xdist did append
            return nodeid.rsplit("@", 1)[1]
        if nodeid.startswith(self.benchmark_prefix) and nodeid.endswith("]"):
            parameters = nodeid.rpartition("::")[2].partition("[")[2]
            for model in self.models:
                if parameters.startswith(f"{model}-"):
                    return f"model {model}"
        return nodeid
