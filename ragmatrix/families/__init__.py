"""The family registry: which check families exist, found in one place.

Families come from three sources, in this order (a later one with the same name wins):

- the modules and packages of this package that declare `FAMILY = Family(...)`;
- installed distributions' entry points in the group `ragmatrix.families`, each naming a
  `Family` object (`"toy = mypackage.toy:FAMILY"`);
- the `pytest_ragmatrix_families` pytest hook (see `ragmatrix.plugin.hookspecs`), whose implementations return
  lists of `Family`; the plugin registers them when pytest starts.

Each run (`ragmatrix.foundations.context`) keeps what it found and what the hook registered: a
run in the same process after it finds them again and starts with no registered families.
Importing this package imports no family, and naming one imports that family's module alone
(`PACKAGE_FAMILIES`); `all_families()` imports them all.
"""

from __future__ import annotations

import importlib
import pkgutil

from ragmatrix.foundations import entry_points as installed
from ragmatrix.foundations.context import RunContext, current
from ragmatrix.seam.family import Family, Headline, Plot

__all__ = ["Family", "Headline", "Plot", "all_families", "family_named", "register"]

ENTRY_POINT_GROUP = installed.FAMILIES


# The package's own families, by name, and the module of each: a run imports only the families
# its data files name (importing every one cost each run's start-up about 0.05 s of CPU).
# `tests/test_families.py` checks that it lists every family module of the package.
PACKAGE_FAMILIES = {
    "code_retrieval": "code_retrieval",
    "rag_interpretation": "rag",
    "rss_probes": "rss",
    "text_retrieval": "text_retrieval",
    "zelo_battles": "zelo_battles",
}


class FamilyRegistry:
    """The families one run knows: this package's (imported when first named), the entry
    points', and those registered at run time."""

    def __init__(self, run: RunContext) -> None:
        self.imported: dict[str, Family] = {}  # this package's, as imported so far
        self.registered: dict[str, Family] = {}
        self._entry_points: dict[str, Family] | None = None
        self._scanned = False

    def entry_points(self) -> dict[str, Family]:
        if self._entry_points is None:
            self._entry_points = {}
            for point in installed.group(ENTRY_POINT_GROUP):
                family = point.load()
                if isinstance(family, Family):
                    self._entry_points[family.name] = family
        return self._entry_points

    def named(self, name: str) -> Family | None:
        """A later source wins: registered, then the entry points, then this package."""
        found = self.registered.get(name) or self.entry_points().get(name)
        if found is not None:
            return found
        if name not in self.imported and name in PACKAGE_FAMILIES:
            self._import(PACKAGE_FAMILIES[name])
        if name not in self.imported:
            self.scan()  # a family module the table does not list yet
        return self.imported.get(name)

    def scan(self) -> None:
        """Import every family module of the package, once."""
        if not self._scanned:
            self._scanned = True
            for module in pkgutil.iter_modules(__path__):
                self._import(module.name)

    def all(self) -> dict[str, Family]:
        self.scan()
        return {**self.imported, **self.entry_points(), **self.registered}

    def _import(self, module: str) -> None:
        family = getattr(importlib.import_module(f"{__name__}.{module}"), "FAMILY", None)
        if isinstance(family, Family):
            self.imported[family.name] = family


def all_families() -> dict[str, Family]:
    """Every known family by name (every family module of the package is imported)."""
    return current().part(FamilyRegistry).all()


def family_named(name: str) -> Family | None:
    """The family of this name, importing only its own module."""
    return current().part(FamilyRegistry).named(name)


def register(family: Family) -> Family:
    """Add a family to the run (the pytest hook's families, a test's toy family)."""
    current().part(FamilyRegistry).registered[family.name] = family
    return family
