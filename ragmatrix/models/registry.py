"""Builds each model of the matrix once per run, when the first test that needs it runs.

How a model is built is its provider's business (`ModelSpec.build`, see
`ragmatrix.models.providers`); this class remembers built models and failed loads, and holds the
caches the providers share. A run (`ragmatrix.foundations.context`) has one (`run_registry`), which its end
closes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragmatrix.foundations.context import RunContext
from ragmatrix.foundations.secrets import key_variables, redact, refer_to
from ragmatrix.foundations.storage import StorageError
from ragmatrix.models.client import ModelError
from ragmatrix.models.spec import ModelSpec

if TYPE_CHECKING:
    from ragmatrix.foundations.cache import SqliteCache
    from ragmatrix.models.embedding_cache import EmbeddingCache
    from ragmatrix.models.protocols import Model
    from ragmatrix.models.rerank_cache import RerankCache


class Registry:
    def __init__(self, use_cache: bool = True) -> None:
        self.use_cache = use_cache
        self._built: dict[str, Model] = {}
        self._failed: dict[str, str] = {}
        self._response_cache: SqliteCache | None = None
        self._embedding_cache: EmbeddingCache | None = None
        self._rerank_cache: RerankCache | None = None

    def build(self, spec: ModelSpec) -> Model:
        if spec.id in self._built:
            return self._built[spec.id]
        if spec.id in self._failed:  # do not retry a load that failed for every test
            raise ModelError(self._failed[spec.id])
        refer_to(key_variables(spec.model_dump()))  # a spec made in code, not read from models.yaml
        try:
            model = spec.expanded().build(self)  # ${VAR} as sent, as it was keyed
        except ModelError as error:
            self._failed[spec.id] = str(error)
            raise
        except StorageError:
            raise  # the cache folder refuses writes: the run stops, this is no model's fault
        except ModuleNotFoundError as error:  # an optional package of the provider
            missing = str(error.name or "").split(".")[0]
            package = spec.needs.get(missing, missing)
            message = f"cannot load model '{spec.id}': provider {spec.provider} needs {package}: pip install {package}"
            self._failed[spec.id] = message
            raise ModelError(message) from error
        except Exception as error:
            message = redact(f"cannot load model '{spec.id}': {type(error).__name__}: {error}".splitlines()[0])
            self._failed[spec.id] = message
            raise ModelError(message) from error
        self._built[spec.id] = model
        return model

    def response_cache(self) -> SqliteCache | None:
        if not self.use_cache:
            return None
        if self._response_cache is None:
            from ragmatrix.foundations.cache import SqliteCache

            self._response_cache = SqliteCache("responses")
        return self._response_cache

    def embedding_cache(self) -> EmbeddingCache | None:
        if not self.use_cache:
            return None
        if self._embedding_cache is None:
            from ragmatrix.models.embedding_cache import EmbeddingCache

            self._embedding_cache = EmbeddingCache()
        return self._embedding_cache

    def rerank_cache(self) -> RerankCache | None:
        if not self.use_cache:
            return None
        if self._rerank_cache is None:
            from ragmatrix.models.rerank_cache import RerankCache

            self._rerank_cache = RerankCache()
        return self._rerank_cache

    def close(self) -> None:
        for model in self._built.values():
            close = getattr(model, "close", None)  # optional: see ragmatrix.models.protocols.Model
            if close is not None:
                close()
        self._built.clear()
        if self._response_cache is not None:
            self._response_cache.close()
            self._response_cache = None
        if self._embedding_cache is not None:
            self._embedding_cache.close()
            self._embedding_cache = None
        if self._rerank_cache is not None:
            self._rerank_cache.close()
            self._rerank_cache = None


def run_registry(run: RunContext) -> Registry:
    """The run's registry: its models, and its caches unless the run reads none."""
    return run.part(_new_registry)


def _new_registry(run: RunContext) -> Registry:
    return Registry(use_cache=run.use_cache)
