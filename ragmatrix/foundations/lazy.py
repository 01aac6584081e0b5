"""Public names imported on first use (PEP 562), so that importing a module that offers many
stays cheap: the package's two public faces, `ragmatrix` and `ragmatrix.providers`, call
`resolve` from their `__getattr__`. (Imported only then: the package's own `__init__` must import
nothing before the pytest plugin has set up how the package's modules are imported.)"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

# A public name's home: the module that defines it, or that module and the name there.
Home = str | tuple[str, str]


def resolve(namespace: dict[str, Any], homes: Mapping[str, Home], name: str) -> Any:
    """`name` imported from its home in `homes` and kept in `namespace` (a module's globals)."""
    home = homes.get(name)
    if home is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    where, there = home if isinstance(home, tuple) else (home, name)
    value = getattr(importlib.import_module(where), there)
    namespace[name] = value
    return value
