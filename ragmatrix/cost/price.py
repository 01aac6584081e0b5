"""What a model's work costs: `price:` on its models.yaml entry, else litellm's local cost map.

An LLM (or a reranker billed by tokens) is priced per million tokens (`Price`); a rerank API
billed by searches, as Cohere bills them, per thousand searches (`SearchPrice`).

The cost map is the JSON file litellm ships with its package
(`model_prices_and_context_window_backup.json`), read as a file: litellm is not imported and
nothing is fetched. A model reached through `api_base` (a self-hosted or proxied server) has no
list price: only models.yaml can price it. A model with neither has no price (None), never a
price of 0.

A price is looked up when the work is measured, and each cost record keeps it with where it
came from, so that the report prices the tokens as the run did (`ragmatrix.report.cost`).
Dollars are written with significant digits (`dollars`): a real $0.00004 never reads $0.0000.
"""

from __future__ import annotations

import functools
import json
import math
from importlib.util import find_spec
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Discriminator, Field, Tag

from ragmatrix.foundations.data_model import DataModel

COST_MAP = "model_prices_and_context_window_backup.json"
PER_MILLION = 1_000_000


class Price(DataModel):
    """US dollars per million tokens, as models.yaml writes it:
    `price: {input_per_million: 0.15, output_per_million: 0.6}`."""

    model_config = ConfigDict(extra="forbid")

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)

    def usd(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_per_million + tokens_out * self.output_per_million) / PER_MILLION


class SearchPrice(DataModel):
    """US dollars per thousand searches (one query reranked against up to its documents), as a
    rerank API bills them: `price: {per_thousand_searches: 2.0}`."""

    model_config = ConfigDict(extra="forbid")

    per_thousand_searches: float = Field(ge=0)

    def usd(self, searches: int) -> float:
        return searches * self.per_thousand_searches / 1000


def _priced_by(value: Any) -> str:
    """Which price an entry's `price:` is: per search where it names `per_thousand_searches`."""
    searches = value.get("per_thousand_searches") is not None if isinstance(value, dict) else None
    return "per search" if searches or isinstance(value, SearchPrice) else "per token"


# The tags of the two prices: validation errors name the fields of the one the entry chose, and
# the models file's error lines leave the tag out (`price.input_per_million: ...`).
PRICE_TAGS = frozenset({"per search", "per token"})
AnyPrice = Annotated[
    Annotated[Price, Tag("per token")] | Annotated[SearchPrice, Tag("per search")], Discriminator(_priced_by)
]


@functools.cache
def cost_map() -> dict[str, Any]:
    """litellm's bundled cost map, or {} where litellm is not installed."""
    spec = find_spec("litellm")
    for folder in list(spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / COST_MAP
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                return {}
            return data if isinstance(data, dict) else {}
    return {}


def listed_price(model: str) -> AnyPrice | None:
    """The cost map's price of a litellm model string ("openai/gpt-4o-mini", "gpt-4o-mini"):
    the entry of the whole string, else of the name after the provider when the entry's
    provider is that one. A rerank model priced per query (Cohere's searches) gets that price."""
    known = cost_map()
    entry = known.get(model)
    if entry is None and "/" in model:
        provider, name = model.split("/", 1)
        candidate = known.get(name)
        if isinstance(candidate, dict) and candidate.get("litellm_provider") == provider:
            entry = candidate
    if not isinstance(entry, dict):
        return None
    per_query = entry.get("input_cost_per_query")
    if isinstance(per_query, int | float) and per_query > 0:
        return SearchPrice(per_thousand_searches=per_query * 1000)
    per_in, per_out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if not isinstance(per_in, int | float) or not isinstance(per_out, int | float):
        return None
    return Price(input_per_million=per_in * PER_MILLION, output_per_million=per_out * PER_MILLION)


# Where a price came from, as a cost record keeps it.
FROM_MODELS_FILE = "models.yaml"
FROM_COST_MAP = "litellm cost map"
NO_PRICE = "none"
# The most significant digits a dollar figure under $1 is written with.
DOLLAR_DIGITS = 3


def dollars(value: float | None) -> str:
    """A dollar figure as text: cents from $1 up, three significant digits below ("$0.00134",
    "$0.0000400"), "-" for no figure."""
    if value is None:
        return "-"
    if value == 0 or value >= 1:
        return f"${value:,.2f}"
    decimals = max(2, DOLLAR_DIGITS - 1 - math.floor(math.log10(value)))
    return f"${value:.{decimals}f}"


def price_of(spec: Any) -> tuple[AnyPrice | None, str]:
    """A model spec's price and where it comes from ("models.yaml", "litellm cost map", or
    "unknown")."""
    own = getattr(spec, "price", None)
    if own is not None:
        return own, FROM_MODELS_FILE
    model = getattr(spec, "litellm", None)
    if isinstance(model, str) and not getattr(spec, "api_base", None) and "${" not in model:
        listed = listed_price(model)
        if listed is not None:
            return listed, FROM_COST_MAP
    return None, "unknown"


def spec_price(spec: Any) -> tuple[AnyPrice | None, str]:
    """A model's price and where it comes from; an ensemble's only where every member has the
    same one (its rows hold the members' tokens together)."""
    if spec is None:
        return None, "unknown"
    members = getattr(spec, "members", None)
    if not members:
        return price_of(spec)
    prices = [price_of(member) for member in members]
    first = prices[0][0]
    if first is not None and all(price == first for price, _ in prices):
        return first, prices[0][1]
    return None, "members priced differently" if all(price for price, _ in prices) else "unknown"
