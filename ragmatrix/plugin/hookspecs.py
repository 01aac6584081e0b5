"""The hooks ragmatrix adds to pytest, for plugins and conftest files to implement."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ragmatrix.families import Family


@pytest.hookspec
def pytest_ragmatrix_families(config: pytest.Config | None) -> list[Family]:  # type: ignore[empty-body]
    """Return check families to add to the registry (see `ragmatrix.families`).

    Called once when pytest configures; each implementation returns a list of `Family`.
    `ragmatrix report -p MODULE` calls a plugin module's implementation with `config=None`, so
    that the report knows the families the results hold.
    """
