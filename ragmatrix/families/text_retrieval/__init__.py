"""Text retrieval on the field's own data format: BEIR / MTEB retrieval datasets.

- `beir`: local BEIR folders and Hugging Face datasets in MTEB's layout;
- `retrieval`: one case per judged query, the index, the ranking and the graded scores;
- `view`: what an item shows when it is opened, and its ranking as TREC files carry it.
"""

from ragmatrix.families.text_retrieval import view
from ragmatrix.families.text_retrieval.retrieval import (
    SCORING_VERSION,
    TextRetrievalCase,
    dataset_fingerprint,
    expand_dataset,
    first_texts,
    score,
    search,
)
from ragmatrix.seam.family import Family, Source
from ragmatrix.seam.headline import Headline

__all__ = ["FAMILY", "score", "search"]

FAMILY = Family(
    name="text_retrieval",
    scoring_version=SCORING_VERSION,
    case_schema=TextRetrievalCase,
    headline=Headline("nDCG@10", "nDCG@10 over the judged documents (graded relevance)"),
    source=Source(
        "BEIR (Thakur et al., 2021), as MTEB reads it",
        "https://github.com/beir-cellar/beir",
        "Apache-2.0",
        "the dataset layout and graded qrels",
    ),
    plain_input_fields=("dataset",),
    corpus_fingerprint=dataset_fingerprint,
    # Every row's iterations hold `dataset` (its label) and, when the case has tags, `tags`.
    breakdowns=("dataset", "tags"),
    # An embedder's query, embedded with every other query of the run in batches; the corpus
    # is indexed once per model when the first item runs.
    first_texts=first_texts,
    case_source=expand_dataset,
    item_view=view.VIEW,
    rankings=view.RANKINGS,
)
