"""Score a reranker or retriever against zELO ground truth.

Both files are AnnotatedQueryDocuments JSONL: the ground truth from `annotate` (or any graded
scores), the system's file with its own score on each document (higher is better). Two modes:

- `default`: queries in the ground truth's order, matched by id (a query missing from the
  system is reported and left out); the documents both files score, optionally the first
  `document_limit` of them in the system file's order. NDCG@k (gain exp(zELO), or the score
  itself with `linear`), pairwise accuracy (pairs tied in the truth left out, pairs the system
  ties count 1/2), recall@k over k_gt, Kendall's tau-b. Documents the system ties are ranked
  worst-first by the truth, so a tie never helps.
- `zbench`: what zbench's `benchmark.py` computes: queries of the system file, its first 10
  documents in file order (every one must be in the truth), NDCG over all of them with no
  cut-off, accuracy over every pair with a tied pair (on either side) counted wrong, and
  recall@k over k_gt. Recall breaks ties towards the document later in the file, as zbench's
  stable sort reversed does; NDCG orders by numpy's default argsort, as zbench does, whose
  order of ties depends on the CPU (see `zbench_ndcg`).

Ground-truth zELOs are read in natural-log units: an Elo file (recorded, or recognised by its
mean of 1000) is converted first. exp() is taken after subtracting the query's largest zELO,
which leaves NDCG unchanged and never overflows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ragmatrix.zelo import zbench_format
from ragmatrix.zelo.battles import ranking, tie_keys
from ragmatrix.zelo.zbench_format import DatasetError

Mode = Literal["default", "zbench"]
Gain = Literal["exp", "linear"]
ZBENCH_DOCUMENT_LIMIT = 10


@dataclass(frozen=True)
class Options:
    k: int = 10
    k_gt: int | None = None  # None: k
    gain: Gain = "exp"
    like: Mode = "default"
    document_limit: int | None = None  # None: all (default mode), 10 (zbench mode)
    tie_tolerance: float = 0.0  # share of the system's score range within which scores tie

    @property
    def ground_truth_k(self) -> int:
        return self.k_gt or self.k

    @property
    def limit(self) -> int | None:
        if self.document_limit is not None:
            return self.document_limit
        return ZBENCH_DOCUMENT_LIMIT if self.like == "zbench" else None


@dataclass
class Evaluation:
    """The per-query metrics (query id -> metric name -> value) and what was left out."""

    metrics: dict[str, dict[str, float | None]]
    labels: dict[str, str]  # metric name -> label to print, in print order
    truth_scale: str
    notes: list[str] = field(default_factory=list)

    def means(self) -> dict[str, float | None]:
        found: dict[str, float | None] = {}
        for name in self.labels:
            values = [m[name] for m in self.metrics.values() if m.get(name) is not None]
            found[name] = sum(v for v in values if v is not None) / len(values) if values else None
        return found


def evaluate_files(ground_truth: Path, system: Path, options: Options) -> Evaluation:
    """Read both files and score every query; DatasetError names a file and line when the
    inputs cannot be used."""
    truth_items = zbench_format.read(ground_truth, annotated=True)
    system_items = zbench_format.read(system, annotated=True)
    if options.gain == "linear":
        truth = {item.id: item.scores() for item in truth_items}
        scale = "linear gains (the scores as they are)"
        if any(v < 0 for scores in truth.values() for v in scores.values()):
            raise DatasetError(f"{ground_truth}: --gain linear needs non-negative scores (zELOs are not: use exp)")
    else:
        truth, scale = zbench_format.strengths(ground_truth, truth_items)
    systems = {item.id: item.scores() for item in system_items}
    if options.like == "zbench":
        return _zbench(truth, systems, ground_truth, system, options, scale)
    return _default(truth, systems, system, options, scale)


def _default(
    truth: dict[str, dict[str, float]],
    systems: dict[str, dict[str, float]],
    system_path: Path,
    options: Options,
    scale: str,
) -> Evaluation:
    k, k_gt = options.k, options.ground_truth_k
    results: dict[str, dict[str, float | None]] = {}
    notes: list[str] = []
    missing = [q for q in truth if q not in systems]
    if missing:
        notes.append(f"{len(missing)} missing from {system_path}, left out")
    beyond = unmatched = small = 0
    for query, gold in truth.items():
        if query not in systems:
            continue
        common = [d for d in systems[query] if d in gold]
        unmatched += len(systems[query]) - len(common)
        if options.limit is not None:
            beyond += max(0, len(common) - options.limit)
            common = common[: options.limit]
        if len(common) < 2:
            small += 1
            continue
        results[query] = query_metrics({d: gold[d] for d in common}, {d: systems[query][d] for d in common}, options)
    if unmatched:
        notes.append(f"{unmatched} documents of the system are not in the ground truth, left out")
    if beyond:
        notes.append(f"{beyond} documents beyond --document-limit {options.limit}, left out")
    if small:
        notes.append(f"{small} queries with fewer than two documents scored by both, left out")
    labels = {
        f"ndcg@{k}": f"NDCG@{k} ({options.gain} gain)",
        "pairwise_accuracy": "pairwise accuracy",
        f"recall@{k}": f"recall@{k} (k_gt {k_gt})",
        "kendall_tau_b": "Kendall tau-b",
    }
    return Evaluation(results, labels, scale, notes)


def query_metrics(truth: Mapping[str, float], system: Mapping[str, float], options: Options) -> dict[str, float | None]:
    """The default mode's metrics of one query; both map the same document ids to scores."""
    from ragmatrix.stats import metrics

    k, k_gt = options.k, options.ground_truth_k
    ids = list(truth)
    gains = exp_gains(truth) if options.gain == "exp" else dict(truth)
    system_ties = tie_keys(system, options.tie_tolerance)
    ranked = ranking(system, truth, options.tie_tolerance)
    wanted = sorted(ids, key=lambda d: (-truth[d], d))[:k_gt]
    return {
        f"ndcg@{k}": metrics.ndcg_at_k(ranked, gains, k),
        "pairwise_accuracy": metrics.pairwise_accuracy(system_ties, truth),
        f"recall@{k}": len(set(ranked[:k]) & set(wanted)) / k_gt,
        "kendall_tau_b": metrics.kendall_tau_b([system_ties[d] for d in ids], [truth[d] for d in ids]),
    }


def exp_gains(strengths: Mapping[str, float]) -> dict[str, float]:
    """exp(zELO) relative to the largest: the same NDCG as exp(zELO), and no overflow."""
    top = max(strengths.values())
    return {d: math.exp(v - top) for d, v in strengths.items()}


def _zbench(
    truth: dict[str, dict[str, float]],
    systems: dict[str, dict[str, float]],
    truth_path: Path,
    system_path: Path,
    options: Options,
    scale: str,
) -> Evaluation:
    k, k_gt, limit = options.k, options.ground_truth_k, options.limit
    results: dict[str, dict[str, float | None]] = {}
    small = 0
    for query, scored in systems.items():
        if query not in truth:
            raise DatasetError(f"{system_path}: query {query!r} is not in {truth_path} (zbench stops here too)")
        documents = list(scored)[:limit] if limit else list(scored)
        absent = [d for d in documents if d not in truth[query]]
        if absent:
            raise DatasetError(f"{system_path}: query {query!r}: document {absent[0]!r} is not in {truth_path}")
        if len(documents) < 2:
            small += 1  # zbench's accuracy would divide by zero
            continue
        gold = [truth[query][d] for d in documents]
        given = [scored[d] for d in documents]
        gains = list(exp_gains({str(i): g for i, g in enumerate(gold)}).values()) if options.gain == "exp" else gold
        results[query] = {
            "ndcg": zbench_ndcg(gains, given),
            "accuracy": zbench_accuracy(given, gold),
            f"recall@{k}": zbench_recall(given, gold, k, k_gt),
        }
    labels = {
        "ndcg": f"NDCG over the first {limit} documents ({options.gain} gain)" if limit else "NDCG",
        "accuracy": "pairwise accuracy (ties wrong)",
        f"recall@{k}": f"recall@{k} (k_gt {k_gt})",
    }
    notes = [f"{small} queries with fewer than two documents, left out"] if small else []
    return Evaluation(results, labels, scale, notes)


def best_first(values: Sequence[float]) -> list[int]:
    """Indices by descending value, a tie going to the later index: a stable ascending sort,
    reversed, as zbench orders them."""
    return sorted(range(len(values)), key=lambda i: values[i])[::-1]


def zbench_ndcg(gains: Sequence[float], scores: Sequence[float]) -> float:
    """DCG of the gains in the order of the scores over the DCG of the gains sorted, over every
    document given (no cut-off).

    The order is numpy's default argsort of the scores, reversed, as zbench takes it. That
    sort is not stable on every CPU (with AVX-512 it is a vectorised sort), so the order of tied
    scores, and with it the NDCG of a system that ties, is the one zbench gets on the same
    machine, not a fixed rule."""
    import numpy as np

    order = [int(i) for i in np.argsort(np.asarray(scores, dtype=float))[::-1]]
    dcg = sum(gains[i] / math.log2(rank + 2) for rank, i in enumerate(order))
    ideal = sum(g / math.log2(rank + 2) for rank, g in enumerate(sorted(gains, reverse=True)))
    return dcg / ideal


def zbench_accuracy(scores: Sequence[float], truth: Sequence[float]) -> float:
    """The share of all pairs whose two differences have the same strict sign: a pair tied on
    either side counts wrong, and pairs tied in the truth stay in the denominator."""
    n = len(scores)
    right = sum(1 for i in range(n) for j in range(i + 1, n) if (scores[i] - scores[j]) * (truth[i] - truth[j]) > 0)
    return 2.0 * right / (n * (n - 1))


def zbench_recall(scores: Sequence[float], truth: Sequence[float], k: int, k_gt: int) -> float:
    """|top k of the system & top k_gt of the truth| / k_gt, both in `best_first` order."""
    return len(set(best_first(truth)[:k_gt]) & set(best_first(scores)[:k])) / k_gt
