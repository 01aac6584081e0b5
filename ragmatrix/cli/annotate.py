"""Annotate a zbench-format dataset with zELO scores.

Reads QueryDocuments JSONL and writes AnnotatedQueryDocuments JSONL: the same lines with a
`score` (the zELO) on each document. Every judgement is saved as it is made in the pairs file
beside the output (OUT.pairs.jsonl), with the judge's reasoning; run the same command again
after an interruption and it resumes without judging anything twice.

The models file is benchmark/models.yaml, found from the working directory upward, or the
one given with --models-file. With more than half of the judgements invalid, the command
exits 1 with one line; the output and the pairs file are still written.

examples:
  ragmatrix annotate data/queries.jsonl data/queries_annotated.jsonl --judges judges
  ragmatrix annotate in.jsonl out.jsonl --judges gpt-4o-mini,claude-haiku,gemini-flash \\
      --cycles 4 --seed 0 --both-orders
  ragmatrix annotate in.jsonl out.jsonl --judges minilm      # offline, an embedder judge
  ragmatrix annotate in.jsonl out.jsonl --zbench-pairs ai_scores.json   # for zbench's notebook
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

NAME = "annotate"
HELP = "zELO-annotate a zbench-format JSONL dataset (resumable)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ragmatrix.zelo.judges import COMBINE_RULES

    parser.add_argument("input", type=Path, help="QueryDocuments JSONL")
    parser.add_argument("output", type=Path, help="AnnotatedQueryDocuments JSONL to write")
    parser.add_argument(
        "--judges",
        default="judges",
        help="comma-separated model ids from the models file: LLMs, embedders, retrievers, or an ensemble "
        "(default: judges, the shipped ensemble of three LLMs, as in zbench)",
    )
    parser.add_argument(
        "--combine",
        choices=COMBINE_RULES,
        default=None,
        help="how several judges combine: vote (signs, 0 a tie), zbench_vote (zbench's: 0 a vote for A) "
        "or mean (default: an ensemble's own rule, else vote)",
    )
    parser.add_argument("--cycles", type=int, default=4, help="random cycles per query (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the cycles and position swaps (default 0)")
    parser.add_argument("--both-orders", action="store_true", help="judge each pair in both orders")
    parser.add_argument("--prompt", type=Path, default=None, help="a file holding the judge instruction")
    parser.add_argument("--scale", choices=("z", "elo"), default="z", help="scores as natural-log zELO or Elo")
    parser.add_argument(
        "--document-limit",
        type=int,
        default=None,
        help="judge only the first N documents per query; the others are left out of the output",
    )
    parser.add_argument("--pairs", type=Path, default=None, help="the pairs file (default OUT.pairs.jsonl)")
    parser.add_argument(
        "--zbench-pairs",
        type=Path,
        default=None,
        metavar="AI_SCORES_JSON",
        help="also write the judgements in zbench's ai_scores.json shape (one or three judges)",
    )
    parser.add_argument(
        "--models-file",
        type=Path,
        default=None,
        help="the models file (default: benchmark/models.yaml, looked for from here upward)",
    )
    parser.add_argument("--no-response-cache", action="store_true", help="ask the models again")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None, help="always show it")
    progress.add_argument("--no-progress", dest="progress", action="store_false", help="never show a progress bar")


def run(args: argparse.Namespace) -> int:
    from ragmatrix.cli import CommandError, locate
    from ragmatrix.foundations.context import start_run

    if args.cycles < 1:
        raise CommandError("--cycles must be at least 1")
    if args.document_limit is not None and args.document_limit < 2:
        raise CommandError("--document-limit must be at least 2")
    try:
        models_file = locate.models_file(args.models_file)
    except locate.NotFound as error:
        raise CommandError(str(error)) from None
    # .env and the caches of the project; at the end, what runs is cancelled and every client closed
    with start_run(locate.project_root(models_file), use_cache=not args.no_response_cache) as run:
        return _annotate(args, models_file, run)


def _annotate(args: argparse.Namespace, models_file: Path, run: Any) -> int:
    from ragmatrix.cli import CommandError
    from ragmatrix.models.client import ModelError
    from ragmatrix.models.registry import run_registry
    from ragmatrix.models.usage import Usage, current_usage
    from ragmatrix.zelo import annotation, zbench_format
    from ragmatrix.zelo.judges import DEFAULT_INSTRUCTION

    try:
        items = zbench_format.read(args.input)
    except zbench_format.DatasetError as error:
        raise CommandError(str(error)) from None
    instruction = DEFAULT_INSTRUCTION
    if args.prompt is not None:
        try:
            instruction = args.prompt.read_text(encoding="utf-8").strip()
        except OSError as error:
            raise CommandError(f"{args.prompt}: cannot read ({error.strerror})") from None
    wanted = list(dict.fromkeys(j.strip() for j in args.judges.split(",") if j.strip()))
    try:
        judges, combine = annotation.load_judges(models_file, wanted, run_registry(run), args.combine)
        if args.zbench_pairs is not None:
            annotation.check_zbench_judges(len(judges), flag="--zbench-pairs")
    except annotation.AnnotateError as error:
        raise CommandError(str(error)) from None
    settings = annotation.Settings(
        cycles=args.cycles,
        seed=args.seed,
        both_orders=args.both_orders,
        combine=combine,
        instruction=instruction,
        scale=args.scale,
        document_limit=args.document_limit,
    )
    pairs = args.pairs or annotation.pairs_path(args.output)
    bars: list[Any] = []

    def progress(total: int, done: int) -> Any:
        from tqdm import tqdm

        bar = tqdm(total=total, initial=done, unit="judgement", delay=1.0, file=sys.stderr, disable=_hidden(args))
        bars.append(bar)
        return bar.update

    usage = Usage()
    token = current_usage.set(usage)
    try:
        summary = annotation.annotate(
            items, args.output, judges, settings, progress=progress, pairs=pairs, zbench_pairs=args.zbench_pairs
        )
    except ModelError as error:
        raise CommandError(f"{error}; the judgements made so far are in {pairs}: run again to resume") from None
    except annotation.AnnotateError as error:
        raise CommandError(str(error)) from None
    finally:
        current_usage.reset(token)
        for bar in bars:
            bar.close()
    _print_summary(args, summary, pairs, usage)
    if summary.mostly_invalid:
        raise CommandError(
            f"{summary.invalid} of {summary.judgements} judgements are invalid, so the zELOs in {args.output} "
            f"rest on too little: check the judge and its prompt (the reasons are in {pairs}, kept with the output)"
        )
    return 0


def _print_summary(args: argparse.Namespace, summary: Any, pairs: Path, usage: Any) -> None:
    for problem in summary.problems:
        print(f"note: {problem}", file=sys.stderr)
    if summary.left_out_documents:
        print(
            f"note: {summary.left_out_documents} documents beyond --document-limit {args.document_limit} "
            "were not judged and are left out of the output",
            file=sys.stderr,
        )
    for query, parts in summary.split_queries.items():
        print(
            f"note: query {query}: the valid judgements link its documents in {parts} separate groups; "
            "zELOs of different groups are on unrelated scales",
            file=sys.stderr,
        )
    units = "Elo" if args.scale == "elo" else "natural-log zELO"
    print(f"annotated {summary.queries} queries into {args.output} ({units} in each document's score)")
    print(
        f"judgements: {summary.judgements} ({summary.made} made now, {summary.resumed} resumed from {pairs}), "
        f"{summary.invalid} invalid"
    )
    if args.zbench_pairs is not None:
        skipped = f" ({summary.zbench_pairs_skipped} left out: a judge gave no valid score)"
        print(
            f"zbench pairs: {summary.zbench_pairs} in {args.zbench_pairs}"
            + (skipped if summary.zbench_pairs_skipped else "")
        )
    tokens = usage.prompt_tokens + usage.completion_tokens
    print(f"model calls: {usage.calls} ({usage.cached_calls} from the response cache), {tokens} tokens")


def _hidden(args: argparse.Namespace) -> bool | None:
    # None: tqdm decides, showing the bar only on a terminal (and, with delay, on long runs)
    return None if args.progress is None else not args.progress
