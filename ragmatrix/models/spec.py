"""The spec of one models.yaml entry: `ModelSpec` holds what every provider shares.

Each entry is validated by the spec model of one provider (see `ragmatrix.models.providers`): the
key the entry carries (`litellm:`, `sentence_transformers:`, `builtin:`, `xinference:`,
`ensemble:`), or an explicit `provider:`, picks it; `ModelSpec(**entry)` builds the spec of the
provider the entry names. Reading the file is `ragmatrix.models.models_file`.

The provider registry builds on this module, so this module does not import it: the registry
connects itself here (`connect_providers`) when it is imported, and importing any module of
`ragmatrix.models` imports it (see the package's `__init__`).
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from ragmatrix.cost.price import AnyPrice, Price, SearchPrice
from ragmatrix.foundations.data_model import DataModel, empty_list

if TYPE_CHECKING:
    from urllib.parse import SplitResult

    from ragmatrix.foundations.cache import SqliteCache
    from ragmatrix.models.embedding_cache import EmbeddingCache
    from ragmatrix.models.protocols import Model
    from ragmatrix.models.rerank_cache import RerankCache

ID_PATTERN = r"^[A-Za-z0-9_.\-]+$"
ENV_REFERENCE = re.compile(r"\$\{(\w+)\}")
Kind = Literal["llm", "embedder", "retriever", "ensemble", "reranker"]
# The model kinds each benchmark fixture runs on: a judge is any model, a retriever is any model
# that ranks documents (embedders and retrievers).
# A reranker with a first stage retrieves too (see `RerankerSpec.serves`).
FIXTURE_KINDS: dict[str, frozenset[str]] = {
    "llm": frozenset({"llm"}),
    "embedder": frozenset({"embedder"}),
    "retriever": frozenset({"embedder", "retriever"}),
    "judge": frozenset({"llm", "embedder", "retriever", "ensemble"}),
    "reranker": frozenset({"reranker"}),
}


class ModelBuilder(Protocol):
    """What a provider's `build` is given (`ragmatrix.models.registry.Registry`): the other models
    (an ensemble's members), built once per process, and the caches the providers share."""

    def build(self, spec: ModelSpec) -> Model: ...

    def response_cache(self) -> SqliteCache | None: ...

    def embedding_cache(self) -> EmbeddingCache | None: ...

    def rerank_cache(self) -> RerankCache | None: ...


class ProviderRegistry(Protocol):
    """What this module asks of the provider registry."""

    def spec_of(self, entry: dict[str, Any]) -> type[ModelSpec]:
        """The spec model of the provider an entry names."""
        ...

    def makers_of(self, kind: str) -> str:
        """Which providers make models of a kind, as a message says it."""
        ...


# The provider registry, connected when it is imported (once per process, like the classes it
# registers).
_registry: ProviderRegistry | None = None


def connect_providers(registry: ProviderRegistry) -> None:
    """Called by the provider registry as it is imported."""
    global _registry
    _registry = registry


def expand_env(text: str) -> str:
    """`${VAR}` replaced by the variable's value, so models.yaml can point at a user's server."""
    return ENV_REFERENCE.sub(lambda m: os.environ.get(m.group(1), ""), text)


def expand_env_in(value: Any) -> Any:
    """`expand_env` on every string inside `value`, through dicts and lists (`params` nests)."""
    if isinstance(value, str):
        return expand_env(value)
    if isinstance(value, dict):
        return {key: expand_env_in(item) for key, item in value.items()}
    if isinstance(value, list):
        return [expand_env_in(item) for item in value]
    return value


class ModelSpec(DataModel):
    """One entry of models.yaml: the fields every provider takes.

    A provider subclasses it with its own fields, a `provider: Literal[<name>]` tag, the class
    settings below, and three methods: `build` (the model), `fingerprint` (what changes its
    outputs) and, where it has more to check than the variables, `unavailable`.
    """

    model_config = ConfigDict(extra="forbid")

    # How models.yaml names the provider: the key an entry carries (and, for `builtin:`, the
    # value that key must have). An entry may also name its provider outright: `provider: toy`.
    key: ClassVar[str | None] = None
    value: ClassVar[str | None] = None
    # An entry claimed by providers of different precedence goes to the highest (an ensemble
    # claims every `kind: ensemble` entry, whatever other keys it carries).
    precedence: ClassVar[int] = 0
    rank: ClassVar[int] = 100  # where the key comes in messages that list them
    kinds: ClassVar[tuple[str, ...]] = ()
    describe: ClassVar[str] = "a model"  # what the key names, for "<field> goes with <describe>"
    # Importable module -> the distribution to `pip install` for it; set by @provider(needs=...).
    needs: ClassVar[dict[str, str]] = {}
    # Fields that name things (the entry, its kind, variables, other entries) rather than hold
    # what is sent or keyed: `${VAR}` in them stays as written. So do the `*_env` fields.
    names: ClassVar[frozenset[str]] = frozenset({"provider", "id", "kind", "description", "requires_env"})

    provider: str
    id: str = Field(pattern=ID_PATTERN)
    kind: Kind  # a retriever scores documents but has no vectors
    description: str = ""
    requires_env: list[str] = Field(default_factory=empty_list)
    # Settings that do not change outputs.
    concurrency: int = Field(default=4, ge=1)
    timeout: float = Field(default=60.0, gt=0)
    retries: int = Field(default=3, ge=0)
    # Consecutive failed attempts (timeouts, connection errors, 5xx) after which the breaker
    # opens: calls wait while single probes test the server.
    breaker_after: int = Field(default=5, ge=1)
    # Seconds probes may keep failing before the model is down for the session (default: two
    # timeouts), so a blip costs seconds and a dead server still ends the run soon.
    breaker_patience: float | None = Field(default=None, gt=0)
    # What an LLM's tokens cost, in US dollars per million, or a rerank API's searches, per
    # thousand; wins over litellm's cost map. Not part of the key: a price changes what a run
    # costs, not what the model answers.
    price: AnyPrice | None = None

    # Computed once per spec and settings: every item's key needs it, and a local model's costs
    # a walk of its folder. Keyed by the fields, so a model_copy with changes recomputes it.
    _fingerprint: tuple[str, str] | None = PrivateAttr(default=None)

    def __new__(cls, *args: Any, **data: Any) -> ModelSpec:
        if cls is ModelSpec:  # ModelSpec(**entry): the spec of the provider the entry names
            assert _registry is not None, "the provider registry connects itself when ragmatrix.models is imported"
            cls = _registry.spec_of(data)
        return super().__new__(cls)

    @classmethod
    def claims(cls, entry: dict[str, Any]) -> bool:
        """Is `entry` (models.yaml fields, no `provider:`) one of this provider's?"""
        if cls.key is None or entry.get(cls.key) is None:
            return False
        return cls.value is None or entry[cls.key] == cls.value

    @classmethod
    def foreign_field(cls, name: str, owners: list[str]) -> str:
        """The message for a field of other providers (`owners` describes them)."""
        return f"{name} goes with {' or '.join(owners)}"

    @model_validator(mode="after")
    def check_kind(self) -> ModelSpec:
        if self.kind not in self.kinds:
            raise ValueError(self.wrong_kind())
        if isinstance(self.price, Price) and self.kind not in ("llm", "reranker"):
            raise ValueError("price goes with an llm or a reranker: it prices the tokens a model reads and writes")
        if isinstance(self.price, SearchPrice) and self.kind != "reranker":
            raise ValueError("a price per thousand searches goes with a reranker")
        return self

    def wrong_kind(self) -> str:
        if self.kind == "retriever" and _registry is not None:
            return f"a retriever is {_registry.makers_of('retriever')}"
        kinds = " or ".join(f"{'an' if k[0] in 'aeiou' or k == 'llm' else 'a'} {k}" for k in self.kinds)
        return f"a {self.key or self.provider} model is {kinds}"

    @property
    def patience(self) -> float:
        """`breaker_patience`, or two timeouts."""
        return self.breaker_patience if self.breaker_patience is not None else 2 * self.timeout

    # -- what a provider implements ------------------------------------------------------------

    def build(self, models: ModelBuilder) -> Model:
        """The model, built once per process by `models` (which also gives the caches)."""
        raise NotImplementedError(f"provider {self.provider} cannot build models")

    def fingerprint(self) -> dict[str, Any]:
        """The fields that change what the model outputs (see `output_fingerprint`)."""
        raise NotImplementedError(f"provider {self.provider} has no fingerprint")

    def unavailable(self, probe: bool = True) -> str | None:
        """Why the model cannot run here (a variable not set, a package or server missing), or
        None. `probe`: whether servers may be asked."""
        missing = [name for name in self.requires_env if not os.environ.get(name)]
        if missing:
            return f"{', '.join(missing)} not set"
        package = self.missing_package()
        return f"needs {package}: pip install {package}" if package else None

    # -- shared behaviour ----------------------------------------------------------------------

    def missing_package(self) -> str | None:
        for module, package in self.needs.items():
            if find_spec(module) is None:
                return package
        return None

    def expected_device(self) -> str | None:
        """For a model that chooses its device (`device:`), the device it will take, told without
        loading it (the session header names it); None for every other model."""
        return None

    def prepare_meanwhile(self) -> None:
        """Start, in the background, what the model's first use will need and costs little when
        unused (an HTTP client's import), while the run reads its data files: a model in the
        matrix is told so as the run starts. Nothing by default."""
        return None

    def relative_to(self, folder: Path) -> ModelSpec:
        """This spec with paths resolved against the folder of models.yaml, where that applies."""
        return self

    @property
    def members(self) -> list[ModelSpec]:
        """An ensemble's member specs; no other model has any."""
        return []

    def member_ids(self) -> list[str]:
        return []

    def attach_members(self, members: list[ModelSpec]) -> None:
        """Called by `load_models` with the specs of `member_ids()`."""

    def uses(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Other entries of the file this one is made of, besides an ensemble's members: field ->
        (the entry's id, the kinds it may be). `load_models` attaches each (`attach`)."""
        return {}

    def attach(self, field: str, spec: ModelSpec) -> None:
        """Called by `load_models` with the spec of each entry `uses()` names."""

    def serves(self, fixture: str) -> bool:
        """Whether a benchmark test taking this fixture runs on the model (see FIXTURE_KINDS)."""
        return self.kind in FIXTURE_KINDS.get(fixture, frozenset({fixture}))

    @property
    def reads_prompts(self) -> bool:
        """LLMs (and ensembles of them) read the prompt wording; embedders and BM25 do not, so
        prompt variants collapse for them (see `ragmatrix.suite.loader.without_prompts`)."""
        return self.kind in ("llm", "ensemble")

    def env_names(self) -> set[str]:
        """Every variable this entry refers to: `requires_env`, any `*_env` field, and each
        `${VAR}` in any field. Their values are secrets (see `ragmatrix.foundations.secrets`)."""
        names = set(self.requires_env)
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name.endswith("_env") and isinstance(value, str):
                names.add(value)
        names.update(ENV_REFERENCE.findall(self.model_dump_json()))
        return names

    def expanded(self) -> ModelSpec:
        """This spec with `${VAR}` read from the environment in every field but the names
        (`id`, `kind`, `description`, `requires_env`, `*_env`, an ensemble's members), nested
        values included. Models are built from it and keyed by it, so what is sent and what is
        keyed always agree."""
        changes: dict[str, Any] = {}
        for name in type(self).model_fields:
            if name in self.names or name.endswith("_env"):
                continue
            value = getattr(self, name)
            new = expand_env_in(value)
            if new != value:
                changes[name] = new
        return self.model_copy(update=changes) if changes else self

    def output_fingerprint(self) -> dict[str, Any]:
        """The fields that change what the model outputs: they go into every result key.

        Servers, timeouts and concurrency are left out: moving a model to another server does
        not change its answers. A local model is named by a hash of its files, never by a path.
        An ensemble is named by its rule and its members' fingerprints. `${VAR}` counts with
        its value (see `expanded`).
        """
        spec = self.expanded()
        fields = spec.model_dump_json()
        if self._fingerprint is None or self._fingerprint[0] != fields:
            self._fingerprint = (fields, json.dumps(spec.fingerprint(), sort_keys=True))
        return dict(json.loads(self._fingerprint[1]))  # a fresh copy: callers may not share it


class TextSpec(ModelSpec):
    """The fields of a model that ranks documents for queries (embedders, lexical retrievers)."""

    query_prefix: str = ""
    document_prefix: str = ""


class EmbedderSpec(TextSpec):
    """The fields of an embedder."""

    batch_size: int = Field(default=32, ge=1)


DEFAULT_TOP_N = 50


class RerankerSpec(ModelSpec):
    """The fields of a reranker: `batch_size` documents per call, and for a two-stage retrieval
    system the model that retrieves first (`first_stage`, an embedder or retriever of the same
    file) and how many of its best documents are reranked (`top_n`).

    A provider implements `scorer_fingerprint` (what changes its scores); the output fingerprint
    adds the first stage's fingerprint and `top_n`, which change a two-stage system's ranking."""

    names: ClassVar[frozenset[str]] = ModelSpec.names | {"first_stage"}

    batch_size: int = Field(default=32, ge=1)
    first_stage: str | None = Field(default=None, pattern=ID_PATTERN)
    top_n: int = Field(default=DEFAULT_TOP_N, ge=1)

    _first_stage: ModelSpec | None = PrivateAttr(default=None)

    def uses(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        return {"first_stage": (self.first_stage, ("embedder", "retriever"))} if self.first_stage else {}

    def attach(self, field: str, spec: ModelSpec) -> None:
        if field == "first_stage":
            self._first_stage = spec

    @property
    def first_stage_spec(self) -> ModelSpec | None:
        return self._first_stage

    def serves(self, fixture: str) -> bool:
        """A reranker is ranked directly (fixture `reranker`); with a first stage it is a
        retrieval system too (fixture `retriever`)."""
        return fixture == "reranker" or (fixture == "retriever" and self.first_stage is not None)

    def unavailable(self, probe: bool = True) -> str | None:
        if self._first_stage is not None:
            reason = self._first_stage.unavailable(probe)
            if reason:
                return f"first stage {self._first_stage.id}: {reason}"
        return super().unavailable(probe)

    def scorer_fingerprint(self) -> dict[str, Any]:
        """What changes the scores the reranker gives."""
        raise NotImplementedError(f"provider {self.provider} has no fingerprint")

    def fingerprint(self) -> dict[str, Any]:
        found = self.scorer_fingerprint()
        if self.first_stage:
            stage = self._first_stage.output_fingerprint() if self._first_stage is not None else self.first_stage
            found = {**found, "first_stage": stage, "top_n": self.top_n}
        return found


# What each server probed within `probes_shared` answered: its failure, or None where it answered.
_shared_probes: ContextVar[dict[tuple[str, float], str | None] | None] = ContextVar("shared_probes", default=None)


@contextmanager
def probes_shared() -> Iterator[None]:
    """Within the block, each server is probed once (the block inside another shares the outer
    one's answers). A models file often lists several models of one server, and the evaluator
    is often one of them: each probe waits for the server's answer, one after another, before
    the run starts."""
    if _shared_probes.get() is not None:
        yield
        return
    token = _shared_probes.set({})
    try:
        yield
    finally:
        _shared_probes.reset(token)


def probe_server(api_base: str, timeout: float = 2.0, name: str | None = None) -> str | None:
    """Does anything answer HTTP at the server? Any status counts: we only want to know
    whether calls could reach it. A `user:password@` in the address is sent as HTTP basic
    authentication, as the clients send it (urllib would take it for part of the host name).

    A server with no proxy named is asked over a plain socket, as this package's own connections
    would reach it, over TLS for `https://` with the certificates they trust (`ssl_context`, one
    context for both): urllib's import with http.client and email's parser costs about 10 ms of
    a run's start, and a TLS context of its own about 16 ms more. A proxy to find goes through
    urllib."""
    shared = _shared_probes.get()
    key = (api_base, timeout)
    if shared is not None and key in shared:
        failure = shared[key]
    else:
        failure = _probe_failure(api_base, timeout)
        if shared is not None:
            shared[key] = failure
    return None if failure is None else f"server {name or api_base} unreachable ({failure})"


def _probe_failure(api_base: str, timeout: float) -> str | None:
    """Why nothing answered HTTP at the server, or None where something did."""
    from urllib.parse import unquote, urlsplit

    from ragmatrix.models.http import proxy_named, ssl_context

    try:
        parts = urlsplit(api_base.rstrip("/") + "/models")
        authorization = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            authorization = "Basic " + base64.b64encode(pair.encode()).decode()
        if parts.scheme in ("http", "https") and not proxy_named():
            secure = ssl_context(api_base) if parts.scheme == "https" else None
            _ask_plainly(parts, authorization, timeout, secure)
        else:
            _ask_with_urllib(parts, authorization, timeout)
    except (OSError, ValueError) as error:
        return str(getattr(error, "reason", error))
    return None


def _ask_plainly(parts: SplitResult, authorization: str | None, timeout: float, secure: Any = None) -> None:
    """GET the address and read the start of the answer, over TLS with the `secure` context
    where one is given; raises OSError where nothing answers HTTP."""
    import socket

    if not parts.hostname:
        raise ValueError("no host in the address")
    host = parts.netloc.rpartition("@")[2]
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    head = [f"GET {target} HTTP/1.1", f"Host: {host}", "Accept: */*", "Connection: close"]
    if authorization is not None:
        head.append(f"Authorization: {authorization}")
    port = parts.port or (443 if secure is not None else 80)
    with socket.create_connection((parts.hostname, port), timeout=timeout) as plain:
        try:
            connection = secure.wrap_socket(plain, server_hostname=parts.hostname) if secure is not None else plain
        except OSError as error:  # ssl.SSLError: said whole, as its reason alone is a bare code
            raise ConnectionError(str(error)) from None
        with connection:
            connection.sendall(("\r\n".join(head) + "\r\n\r\n").encode("utf-8"))
            start = b""
            while len(start) < 5 and (more := connection.recv(5 - len(start))):
                start += more
    if not start:
        raise ConnectionError("the server closed the connection without answering")
    if start != b"HTTP/":
        raise ConnectionError("the server does not answer in HTTP")


def _ask_with_urllib(parts: SplitResult, authorization: str | None, timeout: float) -> None:
    import http.client
    import urllib.error
    import urllib.request

    request = urllib.request.Request(parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl())
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:  # an opener of its own: urlopen's shared one keeps the proxies of its first call
        with urllib.request.build_opener().open(request, timeout=timeout):
            return
    except urllib.error.HTTPError:
        return  # any status counts
    except http.client.HTTPException as error:  # an answer that is not HTTP
        raise ConnectionError(f"the server does not answer in HTTP ({type(error).__name__})") from None


class BuiltinBaseline:
    """What the built-in baselines (`builtin: bow`, `builtin: bm25`) share: the kind check, and
    a fingerprint named by the algorithm and its version instead of by weights."""

    if TYPE_CHECKING:
        builtin: str
        kinds: ClassVar[tuple[str, ...]]
        query_prefix: str
        document_prefix: str
        max_seq_length: int | None

    def algorithm(self) -> str:
        """`name@version`: bump the version whenever the baseline would score differently."""
        raise NotImplementedError

    def wrong_kind(self) -> str:
        return f"builtin {self.builtin} is of kind {self.kinds[0]}"

    def fingerprint(self) -> dict[str, Any]:
        return {
            "provider": "builtin",
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
            "max_seq_length": self.max_seq_length,
            "model": self.algorithm(),
        }
