"""Score a reranker or retriever against zELO ground truth.

Both files are AnnotatedQueryDocuments JSONL: GROUND_TRUTH from `annotate`, SYSTEM with the
system's own score on each document (higher is better). Queries and documents are matched by
id. The default mode prints the means over queries of

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
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "rerank-eval"
HELP = "NDCG@k, pairwise accuracy and recall@k of a system against zELO ground truth"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ground_truth", type=Path, help="annotated JSONL: the zELO ground truth")
    parser.add_argument("system", type=Path, help="annotated JSONL: the system's scores")
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


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
