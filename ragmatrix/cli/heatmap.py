"""Draw the pairwise-preference matrix of one query as a PNG, sorted by zELO.

From an annotated dataset, it reads the zELOs from the file and the judgements from its pairs
file (OUT.pairs.jsonl; several judges are averaged). From a benchmark results file
(benchmark/results/zelo_battles.jsonl), it reads a row's zELOs and battles; name the item
(`case:variant`) with --query and the model with --model.

examples:
  ragmatrix heatmap data/queries_annotated.jsonl --query q1 -o q1.png
  ragmatrix heatmap benchmark/results/zelo_battles.jsonl \\
      --query finance_bond_price_yield --model minilm -o bonds.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "heatmap"
HELP = "PNG of one query's K x K pairwise-preference matrix, sorted by zELO"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", type=Path, help="an annotated JSONL file, or a zelo_battles results file")
    parser.add_argument("--query", required=True, help="the query id (results: the item, case:variant)")
    parser.add_argument("--model", default=None, help="results file only: the model whose row to draw")
    parser.add_argument("--pairs", type=Path, default=None, help="annotated file only: its pairs file")
    parser.add_argument("-o", "--output", type=Path, default=None, help="the PNG (default <query>.png)")


def run(args: argparse.Namespace) -> int:
    from ragmatrix.cli import CommandError
    from ragmatrix.zelo import heatmap, heatmap_data
    from ragmatrix.zelo.zbench_format import DatasetError

    try:
        data = heatmap_data.load(args.source, args.query, model=args.model, pairs=args.pairs)
    except DatasetError as error:
        raise CommandError(str(error)) from None
    output = args.output or Path(f"{args.query.replace(':', '_').replace('/', '_')}.png")
    heatmap.draw(output, data.zelo, data.battles, data.title)
    print(f"wrote {output} ({len(data.zelo)} documents, {len(data.battles)} judgements)")
    return 0
