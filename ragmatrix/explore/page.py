"""The explorer: one self-contained HTML page over a results folder (`ragmatrix view`).

Per family, a grid of cases (and variants) by models, each cell coloured by its score, with
errors and invalid answers marked; filters; a cell opens its item. With an older result set,
a list of what changed, regressions first. The page needs no network: its script and style
are inline (`explorer.js`, `explorer.css` beside this module), and it opens from `file://`.

Untrusted text (answers, case names, model ids) is data, never markup:
- the data sits in `<script type="application/json">` blocks, escaped so that nothing in it
  can close the block or open a comment (`<`, `>` and `&` are written as JSON escapes);
- the page's script sets every string with `textContent` and DOM calls, never as HTML.

The same results give the same page, byte for byte (no time stamp is written). A store of
50,000 items stays fast to open: the grid's data is small columns, the grid draws
only the rows in view, and each item's detail is packed, gzip-compressed, in blocks of
`BLOCK_ITEMS` items that the page unpacks (with the browser's own `DecompressionStream`) only
when an item of that block is opened.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ragmatrix.explore.compare import Change
from ragmatrix.explore.items import Detail, StoredItem, detail
from ragmatrix.seam.detail import to_json

BLOCK_ITEMS = 500
# Texts at least this long are stored once per block and referred to (a chunk shown for
# several models, a question asked of several LLMs).
SHARED_TEXT_CHARS = 80
STATUS = {"ok": 0, "invalid": 1, "error": 2}


@dataclass
class PageData:
    """What the page is written from."""

    title: str
    results: str  # the results folder, as the user named it
    items: list[StoredItem]
    compared_with: str | None = None
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # unreadable rows, data file problems


def write_page(data: PageData) -> str:
    """The page's HTML."""
    summary, blocks = _data(data)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # No network: nothing may be fetched, whatever the data holds.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">",
        f"<title>{_escape_text(data.title)}</title>",
        f"<style>{_asset('explorer.css')}</style>",
        "</head><body>",
        '<div id="app"><p id="loading">Loading the explorer...</p></div>',
        f'<script type="application/json" id="ragmatrix-data">{script_json(summary)}</script>',
    ]
    parts += [
        f'<script type="application/json" id="ragmatrix-details-{i}">"{b}"</script>' for i, b in enumerate(blocks)
    ]
    parts += [f"<script>{_asset('explorer.js')}</script>", "</body></html>"]
    return "\n".join(parts) + "\n"


def script_json(value: Any) -> str:
    """JSON that is safe inside a `<script>` element: no `<`, `>` or `&` in it, so no
    `</script>` and no `<!--` can appear, whatever the strings hold."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _data(data: PageData) -> tuple[dict[str, Any], list[str]]:
    """The page's summary (families, grids, changes) and its packed detail blocks."""
    families: dict[str, dict[str, Any]] = {}
    details: list[dict[str, Any]] = []
    where: dict[tuple[str, str, str, str], int] = {}  # (family, test, model, item) -> item index
    for index, item in enumerate(data.items):
        row = item.row
        grid = families.get(row.family)
        if grid is None:
            grid = families[row.family] = _family(item)
        model = _column(grid, item)
        line = grid["rowIndex"].setdefault(row.item, len(grid["rows"]))
        if line == len(grid["rows"]):
            grid["rows"].append([row.item, row.case, row.variant])
        status = "error" if not row.ok else ("invalid" if row.invalid else "ok")
        score = row.item_score()
        grid["cells"].append(
            [line, model, STATUS[status], None if score is None else round(score, 6), int(item.failing), index]
        )
        where[(row.family, row.test, row.model, row.item)] = index
        details.append(_packed(item, detail(item)))
    changes = [
        [c.family, c.model, c.item, c.old, c.new, c.kind, where.get((c.family, c.test, c.model, c.item), -1)]
        for c in data.changes
    ]
    summary = {
        "title": data.title,
        "results": data.results,
        "items": len(data.items),
        "blockItems": BLOCK_ITEMS,
        "families": [_finished(grid) for _, grid in sorted(families.items())],
        "provenance": _provenance(data.items),
        "comparedWith": data.compared_with,
        "changes": changes,
        "notes": data.notes,
    }
    blocks = [_pack(details[start : start + BLOCK_ITEMS]) for start in range(0, len(details), BLOCK_ITEMS)]
    return summary, blocks


def _family(item: StoredItem) -> dict[str, Any]:
    family = item.family
    headline = family.headline if family is not None else None
    return {
        "name": item.row.family,
        "headline": headline.metric if headline is not None else "mean score",
        "scale": headline.scale if headline is not None else "",
        "higher": headline.higher_is_better if headline is not None else True,
        "source": family.source.line() if family is not None and family.source is not None else None,
        "models": [],
        "columnIndex": {},
        "rows": [],
        "rowIndex": {},
        "cells": [],
    }


def _column(grid: dict[str, Any], item: StoredItem) -> int:
    """The item's model column; a model that ran several tests of a family gets one per test."""
    row = item.row
    index: dict[str, int] = grid["columnIndex"]
    key = f"{row.model}\u0000{row.test}"
    if key not in index:
        tests = {k.split("\u0000")[1] for k in index if k.split("\u0000")[0] == row.model}
        label = row.model if not tests else f"{row.model} ({row.test})"
        index[key] = len(grid["models"])
        grid["models"].append(label)
    return index[key]


def _finished(grid: dict[str, Any]) -> dict[str, Any]:
    scores = [cell[3] for cell in grid["cells"] if cell[3] is not None]
    variants = sorted({row[2] for row in grid["rows"]})
    return {
        "name": grid["name"],
        "headline": grid["headline"],
        "scale": grid["scale"],
        "higher": grid["higher"],
        "source": grid["source"],
        "models": grid["models"],
        "rows": grid["rows"],
        "variants": variants,
        "cells": grid["cells"],
        # the range cells are coloured over: 0..1, or what a wider scale's scores span
        "low": 0.0 if grid["scale"] == "0..1" else (min(scores) if scores else 0.0),
        "high": 1.0 if grid["scale"] == "0..1" else (max(scores) if scores else 1.0),
    }


def _provenance(items: Sequence[StoredItem]) -> list[list[Any]]:
    counts = Counter(item.row.provenance.label() for item in items)
    return [[label, n] for label, n in sorted(counts.items())]


def _packed(item: StoredItem, opened: Detail) -> dict[str, Any]:
    return {
        "id": item.test_id,
        "summary": to_json(opened.summary),
        "notes": opened.notes,
        "asked": [to_json(part) for part in opened.asked],
        "iterations": [[to_json(part) for part in parts] for parts in opened.iterations],
    }


def _pack(details: list[dict[str, Any]]) -> str:
    """A block of details as base64 of gzip of JSON, long texts stored once in `texts`."""
    texts: list[str] = []
    known: dict[str, int] = {}
    for packed in details:
        for part in [*packed["asked"], *(p for parts in packed["iterations"] for p in parts)]:
            if part["kind"] == "text" and len(part["text"]) >= SHARED_TEXT_CHARS:
                text = part.pop("text")
                part["ref"] = known.setdefault(text, len(texts))
                if part["ref"] == len(texts):
                    texts.append(text)
    raw = json.dumps({"texts": texts, "items": details}, ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(gzip.compress(raw.encode("utf-8"), compresslevel=6, mtime=0)).decode("ascii")


def _asset(name: str) -> str:
    text = resources.files("ragmatrix.explore").joinpath(name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():
        raise ValueError(f"{name} must not close its own element")
    return text


def _escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
