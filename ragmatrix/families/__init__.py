"""The family registry: which check families exist, found in one place.

Families come from three sources, in this order (a later one with the same name wins):

- the modules and packages of this package that declare `FAMILY = Family(...)`;
- installed distributions' entry points in the group `ragmatrix.families`, each naming a
  `Family` object (`"toy = mypackage.toy:FAMILY"`);
- the `pytest_ragmatrix_families` pytest hook (see `ragmatrix.plugin.hookspecs`), whose implementations return
  lists of `Family`; the plugin registers them when pytest starts.

Each run (`ragmatrix.foundations.context`) scans once, on first use, and keeps what the hook registered:
a run in the same process after it scans again and starts with no registered families.
Importing this package imports no family.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from ragmatrix.foundations.context import RunContext, current
from ragmatrix.seam.family import Family, Headline, Plot

__all__ = ["Family", "Headline", "Plot", "all_families", "family_named", "register"]

ENTRY_POINT_GROUP = "ragmatrix.families"


class FamilyRegistry:
    """The families one run knows: those found by the scan, and those registered at run time."""

    def __init__(self, run: RunContext) -> None:
        self.found = _scan()
        self.registered: dict[str, Family] = {}


def _scan() -> dict[str, Family]:
    found: dict[str, Family] = {}
    for module in pkgutil.iter_modules(__path__):
        family = getattr(importlib.import_module(f"{__name__}.{module.name}"), "FAMILY", None)
        if isinstance(family, Family):
            found[family.name] = family
    for point in entry_points(group=ENTRY_POINT_GROUP):
        family = point.load()
        if isinstance(family, Family):
            found[family.name] = family
    return found


def all_families() -> dict[str, Family]:
    """Every known family by name."""
    families = current().part(FamilyRegistry)
    return {**families.found, **families.registered}


def family_named(name: str) -> Family | None:
    return all_families().get(name)


def register(family: Family) -> Family:
    """Add a family to the run (the pytest hook's families, a test's toy family)."""
    current().part(FamilyRegistry).registered[family.name] = family
    return family
