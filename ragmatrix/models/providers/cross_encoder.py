"""`sentence_transformers: <name|path>` with `kind: reranker`: a sentence-transformers
`CrossEncoder`, loaded offline from a folder or by name, that reads the query and each document
together and gives one relevance per pair (`CrossEncoder.predict`, as it comes).

It takes the fields of a `sentence_transformers` embedder (the model, `device`, `backend` and
`quantization`, `max_seq_length` as the pair's token limit, `batch_size`, prefixes put before the
query and each document) and a reranker's (`first_stage`, `top_n`). Weights load on the first
pair the rerank cache cannot serve, so a cached run never imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ragmatrix import stats
from ragmatrix.cost.device import Device
from ragmatrix.foundations import collector
from ragmatrix.models import st_backends
from ragmatrix.models.client import ModelError
from ragmatrix.models.fingerprint import directory_fingerprint
from ragmatrix.models.providers import provider
from ragmatrix.models.providers.sentence_transformers import SentenceTransformersSpec, loaded_device, pick_device
from ragmatrix.models.reranker import RerankModel, RerankProvider
from ragmatrix.models.spec import RerankerSpec

if TYPE_CHECKING:
    from ragmatrix.models.protocols import Model
    from ragmatrix.models.spec import ModelBuilder


@provider("cross_encoder", needs={"sentence_transformers": "sentence-transformers"})
class CrossEncoderSpec(RerankerSpec, SentenceTransformersSpec):
    provider: Literal["cross_encoder"] = "cross_encoder"  # type: ignore[assignment]
    key: ClassVar[str | None] = "sentence_transformers"
    # An entry with `sentence_transformers:` and kind reranker is this provider's, not the embedder's.
    precedence: ClassVar[int] = 1
    kinds: ClassVar[tuple[str, ...]] = ("reranker",)
    describe: ClassVar[str] = "a sentence_transformers model"

    @classmethod
    def claims(cls, entry: dict[str, Any]) -> bool:
        return super().claims(entry) and entry.get("kind") == "reranker"

    def scorer_fingerprint(self) -> dict[str, Any]:
        return {**SentenceTransformersSpec.fingerprint(self), "provider": "cross_encoder"}

    def build(self, models: ModelBuilder) -> Model:
        return RerankModel.built(self, models, CrossEncoderReranker(self))


class CrossEncoderReranker(RerankProvider):
    """`CrossEncoder.predict` over (query, document) pairs, `batch_size` at a time. With
    `backend: onnx | openvino` (and `quantization: int8` on onnx) the model folder is exported
    once into the cache and loaded from there, as an embedder's is (`ragmatrix.models.st_backends`)."""

    def __init__(self, spec: CrossEncoderSpec) -> None:
        self.spec = spec
        self._model: Any = None
        self._export: st_backends.Export | None = None

    @property
    def model(self) -> Any:
        if self._model is None:
            stats.settled()  # sentence-transformers imports parts of scipy
            with collector.made_to_last():  # the libraries and the model live to the run's end
                self._model = self._loaded()
        return self._model

    def _loaded(self) -> Any:
        from sentence_transformers import CrossEncoder

        limit = {"max_length": self.spec.max_seq_length} if self.spec.max_seq_length else {}
        path = self.spec.local_path()
        if self.spec.backend != "torch":
            if path is None:
                raise ModelError(f"backend {self.spec.backend} exports a model folder, and {path} is not one")
            backend, quantization = self.spec.backend, self.spec.quantization
            self._export = st_backends.exported(CrossEncoder, path, directory_fingerprint(path), backend, quantization)
            return st_backends.load(CrossEncoder, self._export, **limit)
        source = str(path) if path is not None else str(self.spec.sentence_transformers)
        return CrossEncoder(source, device=pick_device(self.spec.device), **limit)

    def load(self) -> None:
        self.model  # noqa: B018 - loaded before the clock starts: a load is not a reranking

    def score(self, query: str, documents: list[str]) -> list[float]:
        pairs = [(self.spec.query_prefix + query, self.spec.document_prefix + d) for d in documents]
        scores = self.model.predict(pairs, batch_size=self.spec.batch_size, show_progress_bar=False)
        return [float(s) for s in scores]

    def device(self) -> Device:
        return loaded_device(self.spec, self._model)

    def model_size(self) -> tuple[float | None, int | None]:
        if self._export is not None:  # the exported weights: the runtime's model, not torch's
            return round(self._export.size_mb, 1), None
        path = self.spec.local_path()
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20 if path is not None else None
        parameters = sum(p.numel() for p in self._model.model.parameters()) if self._model is not None else None
        return size, parameters
