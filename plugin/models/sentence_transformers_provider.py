"""Local embedders through sentence-transformers, loaded offline from a folder or by name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plugin.models.embedder import Embedder, normalise_rows
from plugin.models.spec import ModelSpec

if TYPE_CHECKING:
    import numpy as np


def pick_device(requested: str | None) -> str:
    if requested:
        return requested
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


class SentenceTransformerEmbedder(Embedder):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        from sentence_transformers import SentenceTransformer

        path = spec.local_path()
        source = str(path) if path is not None else str(spec.sentence_transformers)
        self.device = pick_device(spec.device)
        self.model: Any = SentenceTransformer(source, device=self.device)
        if spec.max_seq_length:
            self.model.max_seq_length = spec.max_seq_length

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = self.model.encode(
            texts,
            batch_size=self.spec.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return normalise_rows(vectors)
