"""Draw the pairwise-preference matrix of one query as a PNG, sorted by zELO.

From an annotated dataset, it reads the zELOs from the file and the judgements from its pairs
file (OUT.pairs.jsonl; several judges are averaged). From a benchmark results file
(benchmark/results/zelo_battles.jsonl), it reads a row's zELOs and battles; name the item
(`case:variant`) with --query and the model with --model.

examples:
  python -m plugin heatmap data/queries_annotated.jsonl --query q1 -o q1.png
  python -m plugin heatmap benchmark/results/zelo_battles.jsonl \\
      --query finance_bond_price_yield --model minilm -o bonds.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

NAME = "heatmap"
HELP = "PNG of one query's K x K pairwise-preference matrix, sorted by zELO"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", type=Path, help="an annotated JSONL file, or a zelo_battles results file")
    parser.add_argument("--query", required=True, help="the query id (results: the item, case:variant)")
    parser.add_argument("--model", default=None, help="results file only: the model whose row to draw")
    parser.add_argument("--pairs", type=Path, default=None, help="annotated file only: its pairs file")
    parser.add_argument("-o", "--output", type=Path, default=None, help="the PNG (default <query>.png)")


def run(args: argparse.Namespace) -> int:
    from plugin.cli import CommandError
    from plugin.report import heatmap

    first = _first_line(args.source)
    if first is None:
        raise CommandError(f"{args.source}: empty or not JSON lines")
    zelo, battles, title = _from_results(args) if "family" in first else _from_annotated(args)
    output = args.output or Path(f"{args.query.replace(':', '_').replace('/', '_')}.png")
    heatmap.draw(output, zelo, battles, title)
    print(f"wrote {output} ({len(zelo)} documents, {len(battles)} judgements)")
    return 0


def _first_line(path: Path) -> dict[str, Any] | None:
    from plugin.cli import CommandError

    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    value = json.loads(line)
                    return value if isinstance(value, dict) else None
    except OSError as error:
        raise CommandError(f"{path}: cannot read ({error.strerror})") from None
    except ValueError:
        return None
    return None


def _from_annotated(args: argparse.Namespace) -> tuple[dict[str, float], list[Any], str]:
    from plugin.cli import CommandError
    from plugin.zelo import annotate, zbench_format

    try:
        items = {item.id: item for item in zbench_format.read(args.source, annotated=True)}
    except zbench_format.DatasetError as error:
        raise CommandError(str(error)) from None
    if args.query not in items:
        raise CommandError(f"{args.source}: no query {args.query!r}")
    pairs = args.pairs or annotate.pairs_path(args.source)
    if not pairs.is_file():
        raise CommandError(f"{pairs}: no pairs file (give it with --pairs)")
    item = items[args.query]
    return item.scores(), annotate.battles_of(pairs, args.query), item.text


def _from_results(args: argparse.Namespace) -> tuple[dict[str, float], list[Any], str]:
    from plugin.cli import CommandError
    from plugin.store import ResultStore

    path = Path(args.source)
    rows = ResultStore(path.parent).load(path.stem).rows
    found = [r for r in rows if r.item == args.query and (args.model is None or r.model == args.model)]
    models = sorted({r.model for r in found})
    if not found:
        model = f" and model {args.model}" if args.model else ""
        raise CommandError(f"{path}: no row for item {args.query!r}{model}")
    if len(models) > 1:
        several = ", ".join(models)
        raise CommandError(f"{path}: item {args.query!r} has rows of several models ({several}): add --model")
    entry = next((e.details for e in found[-1].iterations if "zelo" in e.details), None)
    if entry is None:
        raise CommandError(f"{path}: the row of {args.query!r} holds no zELOs (an error row?)")
    battles = [(a, b, score) for a, b, score in entry.get("battles", [])]
    return {d: float(v) for d, v in entry["zelo"].items()}, battles, f"{args.query} - {models[0]}"
