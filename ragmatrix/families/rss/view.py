"""What an RSS probes item shows when it is opened: the probe's settings (from the case), and
the Top-Down, Bottom-Up and RSS scores and latency at each sequence length."""

from __future__ import annotations

from typing import Any

from ragmatrix.families.rss.probes import RssItem
from ragmatrix.results.rows import Iteration, Row
from ragmatrix.seam.detail import Fields, ItemView, Listing, Part, number


def asked(case: RssItem, row: Row) -> list[Part]:
    data = case.input
    source = data.source
    where = source.builtin or ", ".join(source.files or []) or str(source.hf)
    fields = [
        ("source", where),
        ("lengths", ", ".join(str(n) for n in data.lengths.values)),
        ("samples per length", str(data.samples)),
        ("sampling", data.sampling),
        ("mode", data.mode + (f" ({data.merger})" if data.mode == "merger" else "")),
        ("formula", data.formula),
        ("quantiles", data.quantiles),
        ("seed", str(data.seed)),
    ]
    return [Fields("probe", fields)]


def answered(iteration: Iteration, case: RssItem | None) -> list[Part]:
    found = iteration.details
    stored = found.get("by_length")
    by_length: dict[str, Any] = stored if isinstance(stored, dict) else {}
    settings = [
        (name, number(found[key]) if not isinstance(found[key], list) else ", ".join(number(v) for v in found[key]))
        for key, name in (
            ("mode", "mode"),
            ("chunking", "chunking"),
            ("formula", "formula"),
            ("quantiles", "quantiles"),
            ("rss_ci95", "RSS 95% CI"),
            ("context_limit", "context limit (tokens)"),
            ("device", "device"),
        )
        if key in found
    ]
    parts: list[Part] = [Fields("probe as run", settings)] if settings else []
    lengths = sorted(by_length, key=lambda length: int(length) if str(length).isdigit() else 0)
    if lengths:
        rows = []
        for length in lengths:
            values = by_length[length] if isinstance(by_length[length], dict) else {}
            cells = [values.get(name) for name in ("td", "bu", "rss", "total_ms", "synthesis_ms")]
            rows.append([str(length), *(number(value, 3) for value in cells)])
        header = ["length", "Top-Down", "Bottom-Up", "RSS (x500)", "total ms", "synthesis ms"]
        parts.append(Listing("scores per length", header, rows, numeric={0, 1, 2, 3, 4, 5}))
    return parts


VIEW = ItemView(asked=asked, answered=answered)
