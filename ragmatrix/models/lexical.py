"""Lexical baselines that need no model weights.

`bow` hashes lower-cased word tokens into a fixed number of buckets (a stateless
bag-of-words), so two texts are similar exactly as far as they share words.

A text has a few dozen words, so its row holds a few dozen non-zero buckets of `DIMENSIONS`:
counting them again is cheaper than reading a stored vector, so the baseline keeps no
embedding cache, and a corpus is indexed as sparse rows (`SparseRows`): a few hundred bytes
per document instead of 16 KB, and a query scored against the non-zero buckets alone.
"""

from __future__ import annotations

import re
import zlib
from typing import TYPE_CHECKING

from ragmatrix.models.embedder import EmbeddingProvider, normalise_rows

if TYPE_CHECKING:
    import numpy as np

# Changing either means bumping VERSION in ragmatrix/models/providers/bow.py.
TOKEN = re.compile(r"[a-z0-9]+")
DIMENSIONS = 4096
# Documents turned into rows at a time when indexing: their dense rows are made (and normalised
# exactly as `embed`'s are) block by block, so at most this many 16 KB rows exist at once.
INDEX_BLOCK = 512


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


class HashingBagOfWords(EmbeddingProvider):
    """Word counts hashed into `DIMENSIONS` buckets, in this process."""

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        matrix = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokens(text):
                # crc32, not hash(): Python salts str hashes per process.
                matrix[row, zlib.crc32(token.encode()) % DIMENSIONS] += 1.0
        return matrix  # the wrapper makes the rows unit length

    def index(self, texts: list[str]) -> SparseRows:
        """The texts' unit-length rows, stored sparse (see `EmbeddingModel.index_documents`)."""
        return SparseRows.of(self, texts)


class SparseRows:
    """Unit-length rows of many documents, only their non-zero values kept, by bucket (compressed
    sparse columns: `starts[b]:starts[b + 1]` are the `documents` that hold bucket b and their
    `values`), so that a query is scored on its own few buckets. The values are those of the
    dense rows, normalised by the same code, so a score is the same dot product."""

    def __init__(self, size: int, starts: np.ndarray, documents: np.ndarray, values: np.ndarray) -> None:
        self.size = size
        self.starts = starts
        self.documents = documents
        self.values = values

    @classmethod
    def of(cls, model: HashingBagOfWords, texts: list[str]) -> SparseRows:
        import numpy as np

        documents, buckets, values = [], [], []
        for first in range(0, len(texts), INDEX_BLOCK):
            rows = normalise_rows(model.embed(texts[first : first + INDEX_BLOCK]))
            kept, where = np.nonzero(rows)
            documents.append((kept + first).astype(np.int32))
            buckets.append(where)
            values.append(rows[kept, where])
        if not documents:
            empty = np.zeros(0, dtype=np.int32)
            return cls(0, np.zeros(DIMENSIONS + 1, dtype=np.int64), empty, empty.astype(np.float32))
        bucket = np.concatenate(buckets)
        order = np.argsort(bucket, kind="stable")  # by bucket, each bucket's documents in order
        starts = np.concatenate([[0], np.cumsum(np.bincount(bucket, minlength=DIMENSIONS))])
        return cls(len(texts), starts, np.concatenate(documents)[order], np.concatenate(values)[order])

    def __len__(self) -> int:
        return self.size

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Cosine similarity of a unit-length dense query row to every document: the query's
        buckets added in increasing order (each document's sum is that of its row's products,
        in its buckets' order), in float64, then rounded to float32 as the dense product gives it."""
        import numpy as np

        found = np.zeros(self.size, dtype=np.float64)
        for bucket in np.flatnonzero(query):
            start, end = self.starts[bucket], self.starts[bucket + 1]
            found[self.documents[start:end]] += self.values[start:end] * np.float64(query[bucket])
        return found.astype(np.float32)
