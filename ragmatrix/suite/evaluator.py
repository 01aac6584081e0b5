"""The evaluator LLM: a model of models.yaml that checks other models' answers.

A family may have cases that no rule can check, such as whether a free answer declines
(BioChatter's implicit cases). An evaluator LLM judges those. It is chosen by `--evaluator ID`,
or in models.yaml:

    evaluator: gpt-4o-mini
    # or, with an instruction that replaces the family's default:
    evaluator: {model: gpt-4o-mini, instruction: "..."}

Its output fingerprint and the prompt it gets go into the result key of every item it
judges; without an available evaluator those items are skipped, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError

from ragmatrix.foundations.data_model import DataModel
from ragmatrix.foundations.yamlfile import YamlFileError, read_yaml
from ragmatrix.models.models_file import ModelsFileError, holds_no_secret, load_models, unavailable_reason
from ragmatrix.models.spec import ModelSpec
from ragmatrix.models.usage import Usage, current_usage


class EvaluatorSetting(DataModel):
    """models.yaml's `evaluator:` entry."""

    model_config = ConfigDict(extra="forbid")
    model: str = Field(min_length=1)
    instruction: str | None = Field(default=None, min_length=1)


@dataclass(frozen=True)
class EvaluatorChoice:
    """The evaluator of a run, or why there is none."""

    spec: ModelSpec | None = None
    instruction: str | None = None  # the configured replacement of a family's default prompt
    reason: str = "no evaluator chosen (give --evaluator ID or 'evaluator:' in models.yaml)"

    def key_content(self, prompt: str) -> dict[str, Any]:
        """What goes into the result key of an item this evaluator judges with `prompt`."""
        assert self.spec is not None
        return {"model": self.spec.output_fingerprint(), "prompt": prompt}

    def skip_reason(self) -> str | None:
        return None if self.spec is not None else f"needs an evaluator LLM: {self.reason}"


def read_setting(models_file: Path, remember: bool = False) -> EvaluatorSetting | None:
    """The `evaluator:` entry of models.yaml, or None (`remember`: see `load_models`)."""
    try:
        document = read_yaml(models_file, remember=remember and holds_no_secret)
    except (OSError, YamlFileError):
        return None  # load_models reports an unreadable file
    entry = document.get("evaluator") if isinstance(document, dict) else None
    if entry is None:
        return None
    try:
        return EvaluatorSetting.model_validate({"model": entry} if isinstance(entry, str) else entry)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "entry"
        raise ModelsFileError(f"{models_file.name}: evaluator: {where}: {first['msg']}") from None


def choose_evaluator(
    models_file: Path, option: str | None, probe: bool = True, remember: bool = False
) -> EvaluatorChoice:
    """The evaluator named by `--evaluator` (first) or models.yaml, if it is available.

    An id that is not an LLM of models.yaml is a usage error; one that is not available (its
    key unset, its server down) leaves the run without an evaluator, with that reason.
    """
    setting = read_setting(models_file, remember)
    wanted = option or (setting.model if setting else None)
    instruction = setting.instruction if setting else None
    if not wanted:
        return EvaluatorChoice(instruction=instruction)
    specs = {s.id: s for s in load_models(models_file, remember=remember)}
    spec = specs.get(wanted)
    if spec is None or spec.kind != "llm":
        what = "is not in the file" if spec is None else f"is an {spec.kind}, not an llm"
        raise ModelsFileError(f"{models_file.name}: evaluator '{wanted}' {what}")
    reason = unavailable_reason(spec, probe=probe)
    if reason:
        return EvaluatorChoice(instruction=instruction, reason=f"evaluator {wanted} left out: {reason}")
    return EvaluatorChoice(spec=spec, instruction=instruction, reason="")


class Evaluator:
    """The `evaluator` fixture's value: the chosen model, built on first use, and the
    configured instruction (None: the family's default)."""

    def __init__(self, choice: EvaluatorChoice, build: Any) -> None:
        self.choice = choice
        self._build = build
        self._model: Any = None

    @property
    def available(self) -> bool:
        return self.choice.spec is not None

    @property
    def instruction(self) -> str | None:
        return self.choice.instruction

    def chat(self, messages: list[dict[str, str]]) -> str:
        if self.choice.spec is None:
            raise RuntimeError(self.choice.skip_reason())
        if self._model is None:
            self._model = self._build(self.choice.spec)
        item, own = current_usage.get(), Usage()
        token = current_usage.set(own)  # the evaluator's calls are counted apart from the item's model's
        try:
            return str(self._model.chat(messages))
        finally:
            current_usage.reset(token)
            if item is not None:
                item.add_evaluator(own)
