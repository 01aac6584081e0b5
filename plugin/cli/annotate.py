"""Annotate a zbench-format dataset with zELO scores.

Reads QueryDocuments JSONL and writes AnnotatedQueryDocuments JSONL: the same lines with a
`score` (the zELO) on each document. Every judgement is saved as it is made in the pairs file
beside the output (OUT.pairs.jsonl), with the judge's reasoning; run the same command again
after an interruption and it resumes without judging anything twice.

examples:
  python -m plugin annotate data/queries.jsonl data/queries_annotated.jsonl --judges judges
  python -m plugin annotate in.jsonl out.jsonl --judges gpt-4o-mini,claude-haiku,gemini-flash \\
      --cycles 4 --seed 0 --both-orders
  python -m plugin annotate in.jsonl out.jsonl --judges minilm      # offline, an embedder judge
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

NAME = "annotate"
HELP = "zELO-annotate a zbench-format JSONL dataset (resumable)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
        choices=("vote", "mean"),
        default=None,
        help="how several judges combine (default: an ensemble's own rule, else vote)",
    )
    parser.add_argument("--cycles", type=int, default=4, help="random cycles per query (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the cycles and position swaps (default 0)")
    parser.add_argument("--both-orders", action="store_true", help="judge each pair in both orders")
    parser.add_argument("--prompt", type=Path, default=None, help="a file holding the judge instruction")
    parser.add_argument("--scale", choices=("z", "elo"), default="z", help="scores as natural-log zELO or Elo")
    parser.add_argument("--document-limit", type=int, default=None, help="use only the first N documents per query")
    parser.add_argument("--pairs", type=Path, default=None, help="the pairs file (default OUT.pairs.jsonl)")
    parser.add_argument("--models-file", type=Path, default=Path("benchmark/models.yaml"))
    parser.add_argument("--no-response-cache", action="store_true", help="ask the models again")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None, help="always show it")
    progress.add_argument("--no-progress", dest="progress", action="store_false", help="never show a progress bar")


def run(args: argparse.Namespace) -> int:
    from plugin.cache import set_cache_dir
    from plugin.cli import CommandError, load_dotenv
    from plugin.models import aio
    from plugin.models.client import ModelError
    from plugin.models.registry import Registry
    from plugin.models.usage import Usage, current_usage
    from plugin.zelo import annotate, zbench_format
    from plugin.zelo.judges import DEFAULT_INSTRUCTION

    if args.cycles < 1:
        raise CommandError("--cycles must be at least 1")
    if args.document_limit is not None and args.document_limit < 2:
        raise CommandError("--document-limit must be at least 2")
    load_dotenv(Path.cwd())
    set_cache_dir(Path.cwd() / ".benchmark_cache")
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
    registry = Registry(use_cache=not args.no_response_cache)
    judges, combine = _judges(args, registry)
    settings = annotate.Settings(
        cycles=args.cycles,
        seed=args.seed,
        both_orders=args.both_orders,
        combine=combine,
        instruction=instruction,
        scale=args.scale,
        document_limit=args.document_limit,
    )
    pairs = args.pairs or annotate.pairs_path(args.output)
    bars: list[Any] = []

    def progress(total: int, done: int) -> Any:
        from tqdm import tqdm

        bar = tqdm(total=total, initial=done, unit="judgement", delay=1.0, file=sys.stderr, disable=_hidden(args))
        bars.append(bar)
        return bar.update

    usage = Usage()
    token = current_usage.set(usage)
    try:
        summary = annotate.annotate(items, args.output, judges, settings, progress=progress, pairs=pairs)
    except ModelError as error:
        raise CommandError(f"{error}; the judgements made so far are in {pairs}: run again to resume") from None
    finally:
        current_usage.reset(token)
        for bar in bars:
            bar.close()
        registry.close()
        aio.close()
    for problem in summary.problems:
        print(f"note: {problem}", file=sys.stderr)
    units = "Elo" if args.scale == "elo" else "natural-log zELO"
    print(f"annotated {summary.queries} queries into {args.output} ({units} in each document's score)")
    print(
        f"judgements: {summary.judgements} ({summary.made} made now, {summary.resumed} resumed from {pairs}), "
        f"{summary.invalid} invalid"
    )
    tokens = usage.prompt_tokens + usage.completion_tokens
    print(f"model calls: {usage.calls} ({usage.cached_calls} from the response cache), {tokens} tokens")
    return 0


def _hidden(args: argparse.Namespace) -> bool | None:
    # None: tqdm decides, showing the bar only on a terminal (and, with delay, on long runs)
    return None if args.progress is None else not args.progress


def _judges(args: argparse.Namespace, registry: Any) -> tuple[list[Any], Any]:
    from plugin.cli import CommandError
    from plugin.models.client import ModelError
    from plugin.models.providers.ensemble import EnsembleSpec
    from plugin.models.spec import ModelsFileError, load_models, select_models
    from plugin.zelo.annotate import JudgeModel

    wanted = list(dict.fromkeys(j.strip() for j in args.judges.split(",") if j.strip()))
    if not wanted:
        raise CommandError("--judges names no model")
    try:
        chosen = select_models(load_models(args.models_file), wanted)
    except ModelsFileError as error:
        raise CommandError(str(error)) from None
    for model_id, reason in chosen.left_out.items():
        raise CommandError(f"judge {model_id} is not available: {reason}")
    specs = {spec.id: spec for spec in chosen.available}
    judges: dict[str, JudgeModel] = {}
    rules = []
    try:
        for model_id in wanted:
            spec = specs[model_id]
            if isinstance(spec, EnsembleSpec):
                rules.append(spec.combine)
            for member in spec.members or [spec]:
                judges[member.id] = JudgeModel(member.id, registry.build(member), member.output_fingerprint())
    except ModelError as error:
        raise CommandError(str(error)) from None
    combine = args.combine or (rules[0] if len(wanted) == 1 and rules else "vote")
    return list(judges.values()), combine
