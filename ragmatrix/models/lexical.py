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
    """Unit-length rows of many documents, only their non-zero values kept (compressed sparse
    rows: `starts[i]:starts[i + 1]` are document i's `buckets` and `values`). The values are
    those of the dense rows, normalised by the same code, so a score is the same dot product."""

    def __init__(self, starts: np.ndarray, buckets: np.ndarray, values: np.ndarray) -> None:
        self.starts = starts
        self.buckets = buckets
        self.values = values

    @classmethod
    def of(cls, model: HashingBagOfWords, texts: list[str]) -> SparseRows:
        import numpy as np

        starts, buckets, values = [np.zeros(1, dtype=np.int64)], [], []
        end = 0
        for first in range(0, len(texts), INDEX_BLOCK):
            rows = normalise_rows(model.embed(texts[first : first + INDEX_BLOCK]))
            kept, where = np.nonzero(rows)  # row by row, buckets in increasing order
            counts = np.bincount(kept, minlength=len(rows))
            starts.append(end + np.cumsum(counts))
            end += int(counts.sum())
            buckets.append(where.astype(np.int32))
            values.append(rows[kept, where])
        empty_i, empty_f = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
        return cls(np.concatenate(starts), np.concatenate(buckets or [empty_i]), np.concatenate(values or [empty_f]))

    def __len__(self) -> int:
        return len(self.starts) - 1

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Cosine similarity of a unit-length dense query row to every document: the sum over
        each document's non-zero buckets, in float64 and then rounded to float32 as the dense
        product gives it."""
        import numpy as np

        found = np.zeros(len(self), dtype=np.float64)
        if not len(self.values):
            return found.astype(np.float32)
        products = self.values.astype(np.float64) * query.astype(np.float64)[self.buckets]
        filled = self.starts[:-1] < self.starts[1:]  # reduceat gives an empty row the next value
        found[filled] = np.add.reduceat(products, self.starts[:-1][filled])
        return found.astype(np.float32)
