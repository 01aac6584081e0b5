"""Score a reranker or retriever against zELO ground truth.

Both files are AnnotatedQueryDocuments JSONL: GROUND_TRUTH from `annotate`, SYSTEM with the
system's own score on each document (higher is better). Queries and documents are matched by
id. With --reranker ID, a reranker of the models file (benchmark/models.yaml, found from the
working directory upward, or --models-file) first scores every document of GROUND_TRUTH, as
zbench's rerankers annotate a file, and writes SYSTEM (default GROUND_TRUTH's name with
_<ID> added): resumably, a run again after an interruption scoring only what is left. The
default mode prints the means over queries of

  NDCG@k             the system's top k, gain exp(zELO) (--gain linear: the ground-truth score)
  pairwise accuracy  pairs tied in the ground truth left out, pairs the system ties count 1/2
  recall@k           |top k of the system & top k_gt of the ground truth| / k_gt
  Kendall tau-b      rank correlation, ties corrected

`--like zbench` computes what zbench's benchmark.py does instead: the system file's queries and
its first 10 documents in file order, NDCG with no cut-off, ties counted wrong. An Elo-scaled
ground truth (`annotate --scale elo`) is read back as zELO. See docs/zelo.md for every rule.

examples:
  ragmatrix rerank-eval data/queries_annotated.jsonl data/my_reranker.jsonl --k 10
  ragmatrix rerank-eval truth.jsonl system.jsonl --like zbench --k 10
  ragmatrix rerank-eval truth.jsonl --reranker bm25-minilm --like zbench   # writes truth_bm25-minilm.jsonl
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "rerank-eval"
HELP = "NDCG@k, pairwise accuracy and recall@k of a system against zELO ground truth"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ground_truth", type=Path, help="annotated JSONL: the zELO ground truth")
    parser.add_argument(
        "system",
        type=Path,
        nargs="?",
        default=None,
        help="annotated JSONL: the system's scores (with --reranker: where they are written)",
    )
    parser.add_argument(
        "--reranker",
        default=None,
        metavar="ID",
        help="score GROUND_TRUTH's documents with this reranker of the models file first, writing SYSTEM",
    )
    parser.add_argument(
        "--models-file",
        type=Path,
        default=None,
        help="the models file of --reranker (default: benchmark/models.yaml, looked for from here upward)",
    )
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None, help="always show it")
    progress.add_argument("--no-progress", dest="progress", action="store_false", help="never show a progress bar")
    parser.add_argument("--k", type=int, default=10, help="cut-off of NDCG and recall (default 10)")
    parser.add_argument("--k-gt", type=int, default=None, help="ground-truth documents recall looks for (default k)")
    parser.add_argument("--gain", choices=("exp", "linear"), default="exp", help="NDCG gain of a ground-truth score")
    parser.add_argument(
        "--like",
        choices=("default", "zbench"),
        default="default",
        help="zbench: compute what zbench's benchmark.py does",
    )
    parser.add_argument(
        "--document-limit",
        type=int,
        default=None,
        help="score only each query's first N documents of the system file (default: all; 10 with --like zbench)",
    )
    parser.add_argument(
        "--tie-tolerance",
        type=float,
        default=0.0,
        help="system scores within this share of a query's score range tie (default 0: exact equality)",
    )
    parser.add_argument("--per-query", action="store_true", help="print every query's numbers too")


def run(args: argparse.Namespace) -> int:
    from ragmatrix.cli import CommandError
    from ragmatrix.zelo import rerank_eval
    from ragmatrix.zelo.zbench_format import DatasetError

    if args.k < 1:
        raise CommandError("--k must be at least 1")
    if args.k_gt is not None and args.k_gt < 1:
        raise CommandError("--k-gt must be at least 1")
    if args.document_limit is not None and args.document_limit < 2:
        raise CommandError("--document-limit must be at least 2")
    if not 0.0 <= args.tie_tolerance < 1.0:
        raise CommandError("--tie-tolerance must lie in [0, 1)")
    if args.like == "zbench" and args.tie_tolerance:
        raise CommandError("--tie-tolerance does not apply with --like zbench (zbench compares exactly)")
    options = rerank_eval.Options(
        k=args.k,
        k_gt=args.k_gt,
        gain=args.gain,
        like=args.like,
        document_limit=args.document_limit,
        tie_tolerance=args.tie_tolerance,
    )
    if args.reranker is not None:
        args.system = args.system or default_system(args.ground_truth, args.reranker)
        _rerank(args)
    elif args.system is None:
        raise CommandError("give the SYSTEM file, or --reranker ID to write it")
    try:
        evaluation = rerank_eval.evaluate_files(args.ground_truth, args.system, options)
    except DatasetError as error:
        raise CommandError(str(error)) from None
    if not evaluation.metrics:
        raise CommandError("no query of the ground truth has two or more documents scored by the system")
    names = list(evaluation.labels)
    if args.per_query:
        print("query\t" + "\t".join(names))
        for query, found in evaluation.metrics.items():
            print(query + "\t" + "\t".join(_shown(found[n]) for n in names))
        print()
    notes = f" ({'; '.join(evaluation.notes)})" if evaluation.notes else ""
    print(f"queries: {len(evaluation.metrics)}{notes}")
    print(f"ground truth: {evaluation.truth_scale}")
    width = max(len(label) for label in evaluation.labels.values())
    for name, mean in evaluation.means().items():
        print(f"{evaluation.labels[name]:<{width}}  {_shown(mean)}")
    return 0


def default_system(ground_truth: Path, reranker: str) -> Path:
    """Where --reranker writes its scores by default: beside GROUND_TRUTH, named after both."""
    return ground_truth.with_name(f"{ground_truth.stem}_{reranker}{ground_truth.suffix or '.jsonl'}")


def _rerank(args: argparse.Namespace) -> None:
    """Score GROUND_TRUTH's documents with the reranker and write SYSTEM, resumably."""
    import sys
    from typing import cast

    from ragmatrix.cli import CommandError, locate
    from ragmatrix.foundations.context import start_run
    from ragmatrix.models.client import ModelError
    from ragmatrix.models.models_file import ModelsFileError, load_models, select_models
    from ragmatrix.models.protocols import Reranker
    from ragmatrix.models.registry import run_registry
    from ragmatrix.models.usage import Usage, current_usage
    from ragmatrix.zelo import zbench_format
    from ragmatrix.zelo.rerank_file import rerank_file

    try:
        models_file = locate.models_file(args.models_file)
        specs = load_models(models_file)
        source = zbench_format.read(args.ground_truth)
    except (locate.NotFound, ModelsFileError, zbench_format.DatasetError) as error:
        raise CommandError(str(error)) from None
    known = {spec.id: spec for spec in specs}
    spec = known.get(args.reranker)
    if spec is None or spec.kind != "reranker":
        what = "is not in" if spec is None else f"is {spec.kind}, not a reranker, in"
        rerankers = ", ".join(sorted(i for i, s in known.items() if s.kind == "reranker")) or "none"
        raise CommandError(f"--reranker {args.reranker} {what} {models_file} (its rerankers: {rerankers})")
    for model_id, reason in select_models(specs, [spec.id]).left_out.items():
        raise CommandError(f"--reranker {model_id} is not available: {reason}")
    usage = Usage()
    with start_run(locate.project_root(models_file)) as run:
        from tqdm import tqdm

        hidden = None if args.progress is None else not args.progress
        bar = tqdm(total=len(source), unit="query", delay=1.0, file=sys.stderr, disable=hidden)
        token = current_usage.set(usage)
        try:
            reranker = cast(Reranker, run_registry(run).build(spec))
            done = rerank_file(reranker, source, args.system, progress=bar.update)
        except ModelError as error:
            raise CommandError(
                f"{error}; the queries scored so far are in {args.system}: run again to resume"
            ) from None
        finally:
            current_usage.reset(token)
            bar.close()
    for query, left_out in done.invalid.items():
        print(
            f"note: query {query}: {len(left_out)} documents got no valid relevance from {spec.id} and are left out "
            f"of {args.system} (a run again asks for them)",
            file=sys.stderr,
        )
    print(
        f"reranked {done.queries} queries with {spec.id} into {args.system} "
        f"({done.scored} scored now, {done.resumed} resumed; {usage.rerank_cache_hits} pairs from the rerank cache)"
    )


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
