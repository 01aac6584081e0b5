"""The provider registry: how each entry of models.yaml is reached.

A provider is one module that declares its spec model (a `ModelSpec` subclass with a
`provider: Literal[<name>]` tag) under the `@provider(<name>)` decorator. The spec model holds the
provider's fields and validation, `build` (the model), `fingerprint` (what changes its outputs)
and `unavailable` (why it cannot run here). Providers come from:

- the modules of this package;
- installed distributions' entry points in the group `ragmatrix.providers`, each naming a
  module that registers one or more providers (`"toy = mypackage.toy_provider"`);
- any other module that is imported before models.yaml is read (a conftest, a test).

The model spec of models.yaml is the discriminated union of the registered spec models, tagged
by `provider`; an entry without `provider:` gets it from the key it carries (`pick`).

The decorator registers a spec model when its module is imported, once per process: the
registered classes are the process's (`_providers`). The scan of this package and the entry
points runs once per run (`ragmatrix.foundations.context`), on first use: a run in the same process after
modules were unloaded (pytest run inside a test) imports them again, and their spec models
replace the unloaded ones. Importing this package imports no provider.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Annotated, Any, TypeVar, Union

from pydantic import BeforeValidator, Field, TypeAdapter

from ragmatrix.foundations.context import RunContext, current
from ragmatrix.models.spec import ModelSpec, connect_providers

ENTRY_POINT_GROUP = "ragmatrix.providers"
S = TypeVar("S", bound=ModelSpec)


@dataclass(frozen=True)
class Provider:
    name: str
    spec: type[ModelSpec]


# Every spec model registered in this process, by provider name: the decorator's target.
_providers: dict[str, Provider] = {}


class ProviderScan:
    """One run's scan: this package's modules and the entry points imported, and the entry
    points that could not be (name -> one line)."""

    def __init__(self, run: RunContext) -> None:
        self.broken: dict[str, str] = {}
        # The validator of models.yaml entries, made for the registered spec models.
        self.adapter: tuple[tuple[type[ModelSpec], ...], TypeAdapter[ModelSpec]] | None = None
        for module in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{module.name}")
        for point in entry_points(group=ENTRY_POINT_GROUP):
            try:
                point.load()
            except Exception as error:  # a broken third-party module must not stop every run
                missing = getattr(error, "name", None) if isinstance(error, ImportError) else None
                hint = f"pip install {missing}" if missing else f"{type(error).__name__}: {error}".splitlines()[0]
                self.broken[point.name] = f"provider '{point.name}' ({point.value}) cannot be imported: {hint}"


def provider(name: str, *, needs: Mapping[str, str] | None = None) -> Callable[[type[S]], type[S]]:
    """Register a spec model as provider `name`. `needs`: the modules it imports when it builds
    a model, each with the distribution that installs it; a model whose module is missing is
    left out with one line saying what to `pip install`."""

    def register(spec: type[S]) -> type[S]:
        tag = spec.model_fields.get("provider")
        if tag is None or tag.default != name:
            raise TypeError(f"{spec.__name__} must declare provider: Literal[{name!r}] = {name!r}")
        spec.needs = dict(needs or {})
        _providers[name] = Provider(name, spec)
        return spec

    return register


def providers() -> dict[str, Provider]:
    """Every registered provider by name (this package's and the entry points' scanned once per
    run)."""
    current().part(ProviderScan)
    return dict(_providers)


def pick(entry: Mapping[str, Any]) -> Provider:
    """The provider of a models.yaml entry: the one it names with `provider:`, else the one
    that claims the key it carries. Fields of other providers are an error here, so that the
    message names where they belong."""
    known = providers()
    named = entry.get("provider")
    if named is not None:
        if named not in known:
            raise ValueError(f"unknown provider '{named}' (known: {', '.join(sorted(known))}){_broken_note()}")
        chosen = known[named]
    else:
        claims = [p for p in known.values() if p.spec.claims(dict(entry))]
        top = max((p.spec.precedence for p in claims), default=0)
        claims = [p for p in claims if p.spec.precedence == top]
        if len(claims) != 1:
            raise ValueError(_no_single_claim(entry, known, bool(claims)))
        chosen = claims[0]
    for name in entry:
        if name not in chosen.spec.model_fields:
            owners = list(dict.fromkeys(p.spec.describe for p in known.values() if name in p.spec.model_fields))
            if owners:
                raise ValueError(chosen.spec.foreign_field(name, owners))
    return chosen


def _no_single_claim(entry: Mapping[str, Any], known: dict[str, Provider], several: bool) -> str:
    ranked = sorted((p.spec for p in known.values() if p.spec.precedence == 0), key=lambda s: s.rank)
    keys = list(dict.fromkeys(s.key for s in ranked if s.key))
    present = [k for k in keys if entry.get(k) is not None]
    if not several and len(present) == 1:  # the key is known, its value is not
        values = sorted(str(p.spec.value) for p in known.values() if p.spec.key == present[0] and p.spec.value)
        if values:
            return f"unknown {present[0]} '{entry[present[0]]}' (known: {', '.join(values)})"
    return f"give exactly one of {', '.join(keys)}{_broken_note()}"


def _broken_note() -> str:
    return "".join(f"; {line}" for line in current().part(ProviderScan).broken.values())


def makers_of(kind: str) -> str:
    """Which providers make models of `kind`, as a message says it: "a builtin (bm25)"."""
    makers = [p.spec for p in providers().values() if kind in p.spec.kinds]
    keys = {m.key for m in makers}
    if len(keys) == 1 and all(m.value for m in makers):
        return f"a {makers[0].key} ({', '.join(sorted(str(m.value) for m in makers))})"
    return "made by " + (", ".join(sorted(m.model_fields["provider"].default for m in makers)) or "no provider")


def _with_provider(entry: Any) -> Any:
    if isinstance(entry, Mapping) and "provider" not in entry:
        return {**entry, "provider": pick(entry).name}
    if isinstance(entry, Mapping):
        pick(entry)  # an unknown provider or a foreign field is one clear line
    return entry


def spec_adapter() -> TypeAdapter[ModelSpec]:
    """The validator of one models.yaml entry: the union of the providers' spec models."""
    scan = current().part(ProviderScan)
    members = tuple(p.spec for p in providers().values())
    if scan.adapter is None or scan.adapter[0] != members:
        union: Any = Union[members] if len(members) > 1 else members[0]  # noqa: UP007 (built at run time)
        tagged = Annotated[union, Field(discriminator="provider"), BeforeValidator(_with_provider)]
        scan.adapter = (members, TypeAdapter(tagged))
    return scan.adapter[1]


def validate(entry: Any) -> ModelSpec:
    """One models.yaml entry as its provider's spec; pydantic's ValidationError otherwise (its
    locations start with the provider's tag: see `error_location`)."""
    return spec_adapter().validate_python(entry)


def error_location(loc: tuple[int | str, ...]) -> str:
    """Where in the entry a validation error is: the provider's tag left out, and the kind of
    price an entry's `price:` is."""
    from ragmatrix.cost.price import PRICE_TAGS

    if loc and loc[0] in _providers:
        loc = loc[1:]
    return ".".join(str(p) for p in loc if p not in PRICE_TAGS) or "entry"


def spec_of(entry: dict[str, Any]) -> type[ModelSpec]:
    """The spec model of the provider an entry names (see `pick`)."""
    return pick(entry).spec


connect_providers(sys.modules[__name__])  # so that `ModelSpec(**entry)` can pick the provider
