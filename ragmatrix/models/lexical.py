"""Lexical baselines that need no model weights.

`bow` hashes lower-cased word tokens into a fixed number of buckets (a stateless
bag-of-words), so two texts are similar exactly as far as they share words.
"""

from __future__ import annotations

import re
import zlib
from typing import TYPE_CHECKING

from ragmatrix.models.embedder import EmbeddingProvider

if TYPE_CHECKING:
    import numpy as np

# Changing either means bumping VERSION in ragmatrix/models/providers/bow.py.
TOKEN = re.compile(r"[a-z0-9]+")
DIMENSIONS = 4096


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
