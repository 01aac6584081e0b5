"""`models.yaml`: which models form the matrix, how each is reached, and which are available.

Each entry becomes the spec of its provider (see `ragmatrix.models.spec` and
`ragmatrix.models.providers`). A model is left out of a run, not failed, when a key it requires is
not set, a package it needs is not installed, or its server does not answer; the session header
names it and says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ragmatrix.foundations.secrets import key_variables, redact, refer_to
from ragmatrix.foundations.untrusted import safe_line
from ragmatrix.foundations.yamlfile import YamlFileError, field_errors, read_yaml
from ragmatrix.models.providers import error_location, validate
from ragmatrix.models.spec import ModelSpec, probes_shared


@dataclass
class ModelSet:
    """The models of a run: those in the matrix, and those left out with the reason."""

    available: list[ModelSpec] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)

    def of_kind(self, kind: str) -> list[ModelSpec]:
        """The models a test taking this fixture runs on (see `ModelSpec.serves`)."""
        return [m for m in self.available if m.serves(kind)]


def holds_no_secret(data: bytes) -> bool:
    """May models.yaml be remembered in the cache folder? Not where it holds anything `redact`
    hides (a URL's password, a key's shape): such a file is parsed each time, never copied."""
    text = data.decode("utf-8", "replace")
    return redact(text) == text


class ModelsFileError(Exception):
    """models.yaml cannot be used; the message is one line naming the file and the entry."""


def load_models(path: Path, *, remember: bool = False) -> list[ModelSpec]:
    """The models of models.yaml, validated. `remember`: as a run reads it, from its remembered
    copy while the file is unchanged (`read_yaml`), unless it holds a secret."""
    try:
        document = read_yaml(path, remember=remember and holds_no_secret)
    except FileNotFoundError:
        raise ModelsFileError(f"{path.name}: file not found") from None
    except YamlFileError as error:  # not UTF-8, not YAML, or a key given twice
        raise ModelsFileError(f"{path.name}: {error}") from None
    except OSError as error:  # unreadable, or a FIFO or device by that name (never read)
        raise ModelsFileError(f"{path.name}: cannot read file: {error.strerror or error}") from None
    entries = (document or {}).get("models") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ModelsFileError(f"{path.name}: expected a top-level 'models:' list")
    declared = document.get("secret_env", [])  # variables holding secrets whatever their names
    if not isinstance(declared, list) or not all(isinstance(name, str) for name in declared):
        raise ModelsFileError(f"{path.name}: secret_env: expected a list of variable names")
    refer_to(declared)
    specs: list[ModelSpec] = []
    for index, entry in enumerate(entries):
        name = entry.get("id", f"#{index + 1}") if isinstance(entry, dict) else f"#{index + 1}"
        try:
            spec = validate(entry).relative_to(path.parent)
        except ValidationError as error:
            every = "; ".join(f"{error_location(tuple(loc))}: {message}" for loc, message in field_errors(error))
            raise ModelsFileError(f"{path.name}: model '{name}': {every}") from None
        refer_to(key_variables(spec.model_dump()))  # keys, whatever their names: redacted wherever shown
        if any(s.id == spec.id for s in specs):
            raise ModelsFileError(f"{path.name}: model '{spec.id}': duplicate id")
        specs.append(spec)
    return resolve_uses(path.name, resolve_ensembles(path.name, specs))


def resolve_uses(file_name: str, specs: list[ModelSpec]) -> list[ModelSpec]:
    """Give each entry the specs of the other entries it is made of (`ModelSpec.uses`: a
    reranker's first stage, the model a reranker asks); each must be in the file, of a kind
    that fits, and not the entry itself."""
    by_id = {s.id: s for s in specs}
    for spec in specs:
        for field_name, (wanted, kinds) in spec.uses().items():
            found = by_id.get(wanted)
            if found is None or found is spec or found.kind not in kinds:
                allowed = " or ".join(kinds)
                what = (
                    "is not in the file"
                    if found is None
                    else "is the entry itself"
                    if found is spec
                    else f"is {_article(found.kind)} {found.kind}, not {_article(kinds[0])} {allowed}"
                )
                raise ModelsFileError(f"{file_name}: model '{spec.id}': {field_name} '{wanted}' {what}")
            spec.attach(field_name, found)
    return specs


def _article(kind: str) -> str:
    return "an" if kind[0] in "aeiou" or kind == "llm" else "a"


def resolve_ensembles(file_name: str, specs: list[ModelSpec]) -> list[ModelSpec]:
    """Give each ensemble its member specs; a member must be an LLM of the same file."""
    by_id = {s.id: s for s in specs}
    for spec in specs:
        wanted = spec.member_ids()
        for member in wanted:
            found = by_id.get(member)
            if found is None or found.kind != "llm":
                what = "is not in the file" if found is None else f"is an {found.kind}, not an llm"
                raise ModelsFileError(f"{file_name}: model '{spec.id}': ensemble member '{member}' {what}")
        if wanted:
            spec.attach_members([by_id[m] for m in wanted])
    return specs


def select_models(specs: list[ModelSpec], wanted: list[str] | None, probe: bool = True) -> ModelSet:
    """Keep the wanted models whose keys are set, whose packages are installed and whose
    servers answer."""
    if wanted:
        known = {s.id for s in specs}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise ModelsFileError(
                f"unknown model '{unknown[0]}' in --models (models.yaml has: {', '.join(sorted(known))})"
            )
        specs = [s for s in specs if s.id in wanted]
    chosen = ModelSet()
    with probes_shared():  # several models of one server: it is asked once
        for spec in specs:
            reason = unavailable_reason(spec, probe=probe)
            if reason:
                chosen.left_out[spec.id] = safe_line(redact(reason))  # the session header shows it
            else:
                chosen.available.append(spec)
    return chosen


def unavailable_reason(spec: ModelSpec, probe: bool = True) -> str | None:
    return spec.unavailable(probe)
