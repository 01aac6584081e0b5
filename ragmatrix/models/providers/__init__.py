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
registered classes are the process's (`_providers`). The entry points are loaded once per run
(read with the families' by `ragmatrix.foundations.entry_points`), on first use, and this
package's modules as the entries of models.yaml name their keys (`PACKAGE_PROVIDERS`), or all of
them where a message lists the providers: a run in the same process after modules were unloaded
(pytest run inside a test) imports them again, and their spec models replace the unloaded ones.
Importing this package imports no provider.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, Union

from pydantic import BeforeValidator, Field, TypeAdapter

from ragmatrix.foundations import entry_points as installed
from ragmatrix.foundations.context import RunContext, current
from ragmatrix.models.spec import ModelSpec, connect_providers

ENTRY_POINT_GROUP = installed.PROVIDERS
S = TypeVar("S", bound=ModelSpec)


@dataclass(frozen=True)
class Provider:
    name: str
    spec: type[ModelSpec]


# Every spec model registered in this process, by provider name: the decorator's target.
_providers: dict[str, Provider] = {}


# This package's providers by the key an entry of models.yaml carries: a run imports the
# modules of the keys its entries use, not every provider (`tests/test_providers.py` checks
# the table against the package). An entry that none of them claims, and every message that
# lists the providers, has the whole package imported.
PACKAGE_PROVIDERS: dict[str, tuple[str, ...]] = {
    "builtin": ("bm25", "bow"),
    "ensemble": ("ensemble",),
    "litellm": ("litellm_chat", "litellm_embedder", "litellm_reranker"),
    "rerank_with": ("rerank_with",),
    "sentence_transformers": ("sentence_transformers", "cross_encoder"),
    "xinference": ("xinference", "xinference_reranker"),
}


# The modules among those whose spec models claim only entries of one kind (their `claims`
# say so): an entry of another kind is not theirs, and is read without importing them
# (`tests/test_providers.py` checks the claims).
ONE_KIND: dict[str, str] = {
    "cross_encoder": "reranker",
    "litellm_embedder": "embedder",
    "litellm_reranker": "reranker",
    "xinference_reranker": "reranker",
}


class ProviderScan:
    """One run's scan: the entry points imported, and the entry points that could not be (name
    -> one line); this package's modules imported as entries name them (`for_entry`), or all of
    them (`everything`)."""

    def __init__(self, run: RunContext) -> None:
        self.broken: dict[str, str] = {}
        # The validator of models.yaml entries, made for the registered spec models.
        self.adapter: tuple[tuple[type[ModelSpec], ...], TypeAdapter[ModelSpec]] | None = None
        self.imported: set[str] = set()
        self.complete = False
        for point in installed.group(ENTRY_POINT_GROUP):
            try:
                point.load()
            except Exception as error:  # a broken third-party module must not stop every run
                missing = getattr(error, "name", None) if isinstance(error, ImportError) else None
                hint = f"pip install {missing}" if missing else f"{type(error).__name__}: {error}".splitlines()[0]
                self.broken[point.name] = f"provider '{point.name}' ({point.value}) cannot be imported: {hint}"

    def for_entry(self, entry: Mapping[str, Any]) -> None:
        """Import the modules of the keys this entry carries, but those of another kind."""
        kind = entry.get("kind")
        for key in entry:
            for module in PACKAGE_PROVIDERS.get(str(key), ()):
                if ONE_KIND.get(module, kind) == kind:
                    self._import(module)

    def everything(self) -> None:
        if not self.complete:
            self.complete = True
            for module in pkgutil.iter_modules(__path__):
                self._import(module.name)

    def _import(self, module: str) -> None:
        if module not in self.imported:
            self.imported.add(module)
            importlib.import_module(f"{__name__}.{module}")


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
    current().part(ProviderScan).everything()
    return dict(_providers)


def pick(entry: Mapping[str, Any]) -> Provider:
    """The provider of a models.yaml entry: the one it names with `provider:`, else the one
    that claims the key it carries. Fields of other providers are an error here, so that the
    message names where they belong. Only the modules of the entry's keys are imported, unless
    none of them is the entry's provider."""
    current().part(ProviderScan).for_entry(entry)
    try:
        chosen = _pick(entry, dict(_providers))
    except ValueError:
        return _pick(entry, providers())  # with every provider: another may claim it, or the message lists them
    if any(name not in chosen.spec.model_fields for name in entry):
        return _pick(entry, providers())  # a field of another provider: the message says whose
    return chosen


def _pick(entry: Mapping[str, Any], known: dict[str, Provider]) -> Provider:
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
            # by provider name: the message must not depend on which modules were imported first
            holders = sorted((p for p in known.values() if name in p.spec.model_fields), key=lambda p: p.name)
            owners = list(dict.fromkeys(p.spec.describe for p in holders))
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
    """The validator of one models.yaml entry: the union of the providers' spec models imported
    so far (`validate` imports an entry's own first)."""
    scan = current().part(ProviderScan)
    members = tuple(p.spec for p in _providers.values())
    if scan.adapter is None or scan.adapter[0] != members:
        union: Any = Union[members] if len(members) > 1 else members[0]  # noqa: UP007 (built at run time)
        tagged = Annotated[union, Field(discriminator="provider"), BeforeValidator(_with_provider)]
        scan.adapter = (members, TypeAdapter(tagged))
    return scan.adapter[1]


def validate(entry: Any) -> ModelSpec:
    """One models.yaml entry as its provider's spec; pydantic's ValidationError otherwise (its
    locations may start with the provider's tag: see `error_location`). An entry whose provider
    is known is validated by that provider's spec model alone: the union's validator is built
    from every registered spec model (litellm's three where an entry uses one of them: about
    3 ms more of a run's start), and is needed only to say what is wrong with an entry no
    provider takes."""
    if isinstance(entry, Mapping):
        try:
            chosen = pick(entry)  # its provider imported, so that the validator knows it
        except ValueError:
            pass  # the validator says what is wrong, with every provider known
        else:
            return chosen.spec.model_validate({**entry, "provider": chosen.name})
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
