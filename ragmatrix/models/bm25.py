"""BM25, the lexical baseline of retrieval: a retriever that scores documents for a query but has
no vectors.

Text is split into identifier tokens the way code is read: `raw_decode`, `rawDecode` and
`RawDecode` all give `raw` and `decode` (and the whole identifier as one more token), and
`json.loads` gives `json` and `loads`. Tokens are lower-cased and a few English stop words are
dropped. Scoring is bm25s's Lucene variant (k1 = 1.5, b = 0.75).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from ragmatrix import cost, stats
from ragmatrix.cost.device import Device, this_cpu

if TYPE_CHECKING:
    import numpy as np

    from ragmatrix.models.spec import ModelSpec

# Changing tokenizing, K1 or B means bumping VERSION in ragmatrix/models/providers/bm25.py.
K1 = 1.5
B = 0.75

_IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")
# An upper-case run not followed by a lower-case letter (JSON in JSONDecoder), a capitalised or
# lower-case word, or digits.
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
STOP_WORDS = frozenset(
    "a an and are as at be by can do does for from how i in is it its of on or that the this to "
    "what when where which who why with".split()
)


def code_tokens(text: str) -> list[str]:
    """Identifier-split, lower-cased tokens: snake_case, camelCase and dotted names come apart;
    a compound identifier is kept whole as well, so an exact name still matches best."""
    tokens: list[str] = []
    for word in _IDENTIFIER.findall(text):
        parts = [part.lower() for part in _PART.findall(word)]
        tokens.extend(part for part in parts if part not in STOP_WORDS)
        whole = word.strip("_").lower()
        if len(parts) > 1 and whole:
            tokens.append(whole)
    return tokens


class BM25Index:
    """BM25 statistics of one set of documents; `score(queries)` gives queries x documents."""

    def __init__(self, documents: list[str], owner: Any = None) -> None:
        self.size = len(documents)
        self.owner = owner  # the retriever, to which each query's scoring time is reported
        self._model: Any = None
        if documents:
            stats.settled()  # bm25s imports scipy.sparse
            import bm25s

            self._model = bm25s.BM25(k1=K1, b=B, method="lucene")
            self._model.index([code_tokens(d) for d in documents], show_progress=False)

    def score(self, queries: list[str]) -> np.ndarray:
        import numpy as np

        scores = np.zeros((len(queries), self.size), dtype=np.float32)
        if self._model is None:
            return scores
        vocabulary = self._model.vocab_dict
        for row, query in enumerate(queries):
            began = time.perf_counter()
            tokens = [t for t in code_tokens(query) if t in vocabulary]
            if tokens:
                scores[row] = self._model.get_scores(tokens)
            if self.owner is not None:
                cost.query_latency(self.owner, (time.perf_counter() - began) * 1000.0)
        return scores


class BM25Retriever:
    """The `bm25` builtin: the same scoring interface as an embedder, without vectors."""

    kind = "retriever"

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.id = spec.id

    def index_documents(self, documents: list[str]) -> BM25Index:
        """The documents indexed once, ready to score any number of queries; the indexing is
        timed as the retriever's work, like an embedder's encoding."""
        with cost.encoding(self, len(documents)):
            return BM25Index(documents, owner=self)

    def score_matrix(self, queries: list[str], documents: list[str]) -> np.ndarray:
        """BM25 scores, one row per query and one column per document."""
        return self.index_documents(documents).score(queries)

    def similarities(self, query: str, documents: list[str]) -> list[float]:
        """The BM25 score of one query for each document (not bounded to 0..1)."""
        return [float(x) for x in self.score_matrix([query], documents)[0]]

    # -- what the cost meter reads (`ragmatrix.cost.meter.Measured`) ---------------------------

    def cost_device(self) -> Device:
        return this_cpu()

    def prepare_to_measure(self) -> None:
        pass  # nothing to load

    def model_size(self) -> tuple[float | None, int | None]:
        return None, None

    def close(self) -> None:
        pass
