"""The judges of an annotation run, chosen from the models file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragmatrix.zelo.annotation.plan import AnnotateError, JudgeModel
from ragmatrix.zelo.judges import COMBINE_RULES, Combine


def load_judges(
    models_file: Path, wanted: Sequence[str], registry: Any, combine: Combine | None, flag: str = "--judges"
) -> tuple[list[JudgeModel], Combine]:
    """The judges named (model ids of the models file; an ensemble gives its members) and the
    rule that combines them: the one asked for, else a lone ensemble's own, else vote. Problems
    are AnnotateError lines naming `flag`."""
    from ragmatrix.models.client import ModelError
    from ragmatrix.models.models_file import ModelsFileError, load_models, select_models
    from ragmatrix.models.providers.ensemble import EnsembleSpec

    if not wanted:
        raise AnnotateError(f"{flag} names no model")
    try:
        specs = load_models(models_file)
    except ModelsFileError as error:
        raise AnnotateError(f"{models_file}: {str(error).split(': ', 1)[-1]}") from None
    known = {s.id for s in specs}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise AnnotateError(f"unknown model '{unknown[0]}' in {flag} ({models_file} has: {', '.join(sorted(known))})")
    chosen = select_models(specs, list(wanted))
    for model_id, reason in chosen.left_out.items():
        raise AnnotateError(f"{flag}: judge {model_id} is not available: {reason}")
    by_id = {spec.id: spec for spec in chosen.available}
    judges: dict[str, JudgeModel] = {}
    rules: list[Combine] = []
    try:
        for model_id in wanted:
            spec = by_id[model_id]
            if isinstance(spec, EnsembleSpec):
                rules.append(spec.combine)
            for member in spec.members or [spec]:
                judges[member.id] = JudgeModel(member.id, registry.build(member), member.output_fingerprint())
    except ModelError as error:
        raise AnnotateError(str(error)) from None
    rule: Combine = combine or (rules[0] if len(wanted) == 1 and rules else "vote")
    if rule not in COMBINE_RULES:
        raise AnnotateError(f"unknown combine rule {rule!r} ({', '.join(COMBINE_RULES)})")
    return list(judges.values()), rule
