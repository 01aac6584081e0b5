"""Score a reranker or retriever against zELO ground truth.

Both files are AnnotatedQueryDocuments JSONL: GROUND_TRUTH from `annotate`, SYSTEM with the
system's own score on each document (higher is better). Queries and documents are matched by
id; a query missing from SYSTEM is reported and left out. Per query:

  NDCG@k             the system's top k, gain exp(zELO) (zbench's rule; --gain linear takes
                     the ground-truth score itself, for graded labels)
  pairwise accuracy  the share of document pairs ordered as the ground truth orders them;
                     pairs tied in the ground truth are left out, pairs the system ties count 1/2
  recall@k           |top k of the system & top k_gt of the ground truth| / k_gt
  Kendall tau-b      rank correlation (scipy), ties corrected

Documents the system scores equally are ranked worst-first by the ground truth, so ties never
help. The means over queries are printed.

example:
  python -m plugin rerank-eval data/queries_annotated.jsonl data/my_reranker.jsonl --k 10
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

NAME = "rerank-eval"
HELP = "NDCG@k, pairwise accuracy and recall@k of a system against zELO ground truth"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ground_truth", type=Path, help="annotated JSONL: the zELO ground truth")
    parser.add_argument("system", type=Path, help="annotated JSONL: the system's scores")
    parser.add_argument("--k", type=int, default=10, help="cut-off of NDCG and recall (default 10)")
    parser.add_argument("--k-gt", type=int, default=None, help="ground-truth documents recall looks for (default k)")
    parser.add_argument("--gain", choices=("exp", "linear"), default="exp", help="NDCG gain of a ground-truth score")
    parser.add_argument("--per-query", action="store_true", help="print every query's numbers too")


def evaluate(truth: dict[str, float], system: dict[str, float], k: int, k_gt: int, gain: str) -> dict[str, Any]:
    """The metrics of one query; `truth` and `system` map document ids to scores."""
    from plugin.stats import metrics
    from plugin.zelo.battles import ranking

    ids = [d for d in truth if d in system]
    truth = {d: truth[d] for d in ids}
    system = {d: system[d] for d in ids}
    gains = {d: math.exp(v) if gain == "exp" else v for d, v in truth.items()}
    ranked = ranking(system, truth)
    wanted = sorted(truth, key=lambda d: (-truth[d], d))[:k_gt]
    return {
        f"ndcg@{k}": metrics.ndcg_at_k(ranked, gains, k),
        "pairwise_accuracy": metrics.pairwise_accuracy(system, truth),
        f"recall@{k}": len(set(ranked[:k]) & set(wanted)) / len(wanted) if wanted else None,
        "kendall_tau_b": metrics.kendall_tau_b([system[d] for d in ids], [truth[d] for d in ids]),
        "documents": len(ids),
    }


def run(args: argparse.Namespace) -> int:
    from plugin.cli import CommandError
    from plugin.zelo import zbench_format

    if args.k < 1 or (args.k_gt is not None and args.k_gt < 1):
        raise CommandError("--k and --k-gt must be at least 1")
    k_gt = args.k_gt or args.k
    try:
        truth = {item.id: item.scores() for item in zbench_format.read(args.ground_truth, annotated=True)}
        system = {item.id: item.scores() for item in zbench_format.read(args.system, annotated=True)}
    except zbench_format.DatasetError as error:
        raise CommandError(str(error)) from None
    if args.gain == "linear" and any(v < 0 for scores in truth.values() for v in scores.values()):
        raise CommandError("--gain linear needs non-negative ground-truth scores (zELOs are not: use exp)")
    missing = [q for q in truth if q not in system]
    results = {q: evaluate(truth[q], system[q], args.k, k_gt, args.gain) for q in truth if q in system}
    results = {q: r for q, r in results.items() if r["documents"] >= 2}
    if not results:
        raise CommandError("no query of the ground truth has two or more documents scored by the system")
    names = [f"ndcg@{args.k}", "pairwise_accuracy", f"recall@{args.k}", "kendall_tau_b"]
    labels = {
        f"ndcg@{args.k}": f"NDCG@{args.k} ({args.gain} gain)",
        "pairwise_accuracy": "pairwise accuracy",
        f"recall@{args.k}": f"recall@{args.k} (k_gt {k_gt})",
        "kendall_tau_b": "Kendall tau-b",
    }
    if args.per_query:
        print("query\t" + "\t".join(names))
        for query, result in results.items():
            print(query + "\t" + "\t".join(_shown(result[n]) for n in names))
        print()
    print(f"queries: {len(results)}" + (f" ({len(missing)} missing from {args.system}, left out)" if missing else ""))
    width = max(len(label) for label in labels.values())
    for name in names:
        values = [r[name] for r in results.values() if r[name] is not None]
        mean = sum(values) / len(values) if values else None
        print(f"{labels[name]:<{width}}  {_shown(mean)}")
    return 0


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
