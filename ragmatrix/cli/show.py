"""Show stored items in the terminal: for each item a `-k` expression selects, what was asked
(the messages, the query, the expected answer), what came back (the raw answer and how it was
read, the ranked files and chunks, the battles, the scores per length), every iteration, and
why an answer was invalid. Control characters in answers and names are removed.

The expression reads like pytest's `-k`: words match any part of an item's names (its test id
`test[model-case:variant]`, family, model, case, variant), combined with and, or, not and
parentheses.

examples:
  ragmatrix show -k "minilm and base32_hex_alphabet and bounded"
  ragmatrix show -k "rag_interpretation and not bow" --limit 5
  ragmatrix show -k q07 --list                     # only the ids and scores
"""

from __future__ import annotations

import argparse

NAME = "show"
HELP = "the items a -k expression selects, in full: what was asked, what came back, how it scored"
DEFAULT_LIMIT = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ragmatrix.cli import stored

    parser.add_argument("-k", dest="expression", required=True, metavar="EXPRESSION", help="which items, as pytest -k")
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help=f"show at most this many items (default {DEFAULT_LIMIT}; 0: all)",
    )
    parser.add_argument("--list", action="store_true", help="one line per item: its id, status and score")
    stored.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ragmatrix.cli import CommandError, stored
    from ragmatrix.explore.items import detail
    from ragmatrix.explore.select import ExpressionError, compile_expression
    from ragmatrix.explore.terminal import one_line, render
    from ragmatrix.foundations.secrets import redact
    from ragmatrix.seam.detail import number

    if args.limit < 0:
        raise CommandError("--limit must be 0 (all) or more")
    try:
        matches = compile_expression(args.expression)
    except ExpressionError as error:
        raise CommandError(str(error)) from None
    results = stored.results_of(args)
    with stored.run_in_project(results):
        found = stored.load(args, results, with_cases=not args.list)
        chosen = [item for item in found.items if matches(item.names)]
        if not chosen:
            raise CommandError(f"no stored item matches -k {args.expression!r} ({len(found.items)} items in {results})")
        shown = chosen if args.limit == 0 else chosen[: args.limit]
        lines: list[str] = []
        for item in shown:
            if args.list:
                score = item.row.item_score()
                invalid = f", {item.row.invalid} invalid" if item.row.invalid else ""
                lines.append(f"{one_line(item.test_id)}  {item.row.status}  {number(score)}{invalid}")
            else:
                lines += [*render(item, detail(item)), ""]
        if len(shown) < len(chosen):
            lines.append(f"showing {len(shown)} of {len(chosen)} matching items (--limit 0 shows all)")
        print(redact("\n".join(lines)))
    return 0
