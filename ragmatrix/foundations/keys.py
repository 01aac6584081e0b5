"""Canonical JSON and md5 keys.

Every cache and result key in ragmatrix is the md5 of the canonical JSON of what it depends
on, so that reordering keys in YAML or in code never changes a key.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and fixed separators: the same value always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def md5_of(value: Any) -> str:
    return hashlib.md5(canonical_json(value).encode("utf-8")).hexdigest()


def result_key(
    *,
    family: str,
    test: str,
    case: dict[str, Any],
    scoring_version: int | str,
    model: dict[str, Any],
    iterations: int,
    corpus: str | None = None,
    evaluator: dict[str, Any] | None = None,
) -> str:
    """The result key of one item (see DESIGN.md, "Result key").

    `case` is the expanded case content (input, expected and the variant choices), `model`
    the output-relevant fields of the model spec, `corpus` the fingerprint of any corpus or
    dataset the case reads, `evaluator` the fingerprint and prompt of the evaluator LLM that
    checks the item (only then present, so other keys stay as they were).
    """
    content: dict[str, Any] = {
        "family": family,
        "test": test,
        "case": case,
        "scoring_version": scoring_version,
        "model": model,
        "iterations": iterations,
        "corpus": corpus,
    }
    if evaluator is not None:
        content["evaluator"] = evaluator
    return md5_of(content)
