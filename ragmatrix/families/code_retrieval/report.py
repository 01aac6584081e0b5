"""Code retrieval's part of the report's cost section: the Rust embedding benchmark's table.

That tool reports one line per model and chunking: file-level nDCG@10, MRR, Recall and P@1, the
answer-level hits and MRR, and the embeddings per second of the run. This is the same table from
the stored rows (means over the items) and the cost records (texts per second of the model's own
encode time for that chunking, on its main device). The report's machinery is imported when it
runs, never when the family is loaded.
"""

from __future__ import annotations

from typing import Any

COLUMNS = (
    ("file nDCG@10", "ndcg_at_10"),
    ("MRR@10", "mrr_at_10"),
    ("Recall@10", "recall_at_10"),
    ("P@1", "precision_at_1"),
    ("answer Hit@1", "answer_hit_at_1"),
    ("answer Hit@3", "answer_hit_at_3"),
    ("answer Hit@5", "answer_hit_at_5"),
    ("answer MRR@10", "answer_mrr_at_10"),
)


def speed_table(table: Any, costs: Any) -> list[Any]:
    """Per model and chunking: the file- and answer-level means and the embeddings per second."""
    from ragmatrix.report.document import Heading, Paragraph, Table

    lines = table.metrics_by_variant or table.metrics
    if not lines:
        return []
    rows = []
    for line in sorted(lines, key=lambda metric: (metric.model, metric.variant)):
        values = [line.values.get(name) for _, name in COLUMNS]
        speed = costs.by_variant.get((line.model, line.variant))
        if speed is None and not table.metrics_by_variant:
            main = costs.of(line.model).main
            speed = main.embeddings_per_s if main is not None else None
        device = costs.of(line.model).main
        rows.append(
            [
                line.model,
                line.variant,
                str(line.n),
                *["-" if value is None else f"{value.mean:.3f}" for value in values],
                "-" if speed is None else f"{speed:,.1f}",
                device.device if device is not None else "-",
            ]
        )
    header = ["model", "chunking", "items", *[title for title, _ in COLUMNS], "emb/s", "device"]
    return [
        Heading(3, "code_retrieval: per model and chunking, as the Rust embedding benchmark reports it"),
        Paragraph(
            "Means over each model's items of a chunking (the intervals are in the metric tables above); "
            "`emb/s` is texts per second of the model's own encode time for that chunking's index and "
            "queries, on the device named, never a cache read (`-`: nothing was encoded, every text came "
            "from the embedding cache, or the retriever has no speed figure for it)."
        ),
        Table(header, rows, numeric=set(range(2, len(header) - 1))),
    ]
