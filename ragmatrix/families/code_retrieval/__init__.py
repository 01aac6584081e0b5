"""Code retrieval: can a model find the code that answers a question in a real codebase?

- `corpus`: which files a case reads, listed once per run, and their fingerprint;
- `chunking`: lines, syntax-tree definitions (capped), or bounded syntax-aware chunks (a
  package: line windows, semantic and bounded chunks, the language table, context headers);
- `query_file`: the Rust embedding benchmark's query files, each query a case;
- `retrieval`: the index, the ranking and the file- and answer-level scores;
- `rust_tool`: the Rust embedding benchmark's answer metrics, as it computes them;
- `report`: what each model read of its chunks, the Rust tool's table, and the same table's
  shape with embeddings per second beside the cost figures;
- `view`: what an item shows when it is opened, and its ranking as TREC files carry it.
"""

from ragmatrix.families.code_retrieval import report, view
from ragmatrix.families.code_retrieval.query_file import expand_query_file
from ragmatrix.families.code_retrieval.retrieval import (
    SCORING_VERSION,
    check,
    corpus_fingerprint,
    first_texts,
    score,
    search,
)
from ragmatrix.families.code_retrieval.schema import CodeRetrievalCase
from ragmatrix.seam.family import Family, Source
from ragmatrix.seam.headline import Headline

__all__ = ["FAMILY", "score", "search"]

FAMILY = Family(
    name="code_retrieval",
    scoring_version=SCORING_VERSION,
    case_schema=CodeRetrievalCase,
    headline=Headline("file nDCG@10", "file-level nDCG@10"),
    source=Source(
        "the Rust code search benchmark ghatdev/embedding-benchmark",
        "https://github.com/ghatdev/embedding-benchmark",
        "MIT",
        "query schema and two-level metrics; the bounded chunker follows the cAST paper's split-then-merge",
    ),
    # The corpus is one mapping, not a set of variants.
    plain_input_fields=("corpus",),
    corpus_fingerprint=corpus_fingerprint,
    binary_metrics=("answer_hit_at_1", "answer_hit_at_3", "answer_hit_at_5", "precision_at_1"),
    # Every row's iterations hold `query_type`, `difficulty` and `tags` (see `score`).
    breakdowns=("query_type", "difficulty", "tags"),
    # An embedder's query, embedded with every other query of the run in batches; the corpus
    # is indexed once per model when the first item runs.
    first_texts=first_texts,
    case_source=expand_query_file,
    check=check,
    report_sections=(report.section,),
    terminal_notes=report.terminal_notes,
    cost_sections=(report.speed_table,),
    item_view=view.VIEW,
    rankings=view.RANKINGS,
)
