"""A score read from an LLM's answer: what a pairwise judge (`ragmatrix.zelo.judges`) and a
pointwise reranker (`ragmatrix.models.providers.rerank_with`) ask a model for.

An answer that holds no readable score in the bounds asked for is a `Verdict` with a problem,
never a score: the caller asks again or counts it invalid.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Verdict:
    """What an answer says: a score within the bounds asked for and the reasoning, or the
    problem with it."""

    score: float | None
    reasoning: str = ""
    problem: str | None = None


_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# "SCORE: 0.4", "**Score:** -1", "Final score = 0.25." on a line of its own
_TAGGED = re.compile(
    rf"^[\s*_#>`-]*(?:final\s+)?score[\s*_`]*[:=][\s*_`]*({_NUMBER})[\s*_`.]*$", re.IGNORECASE | re.MULTILINE
)
_BARE = re.compile(rf"^\s*({_NUMBER})\s*$")
_REFUSALS = (
    "i can't",
    "i cannot",
    "i can not",
    "i'm sorry",
    "i am sorry",
    "i'm unable",
    "i am unable",
    "i won't",
    "i will not",
    "as an ai",
)


def parse_verdict(answer: str, low: float = -1.0, high: float = 1.0) -> Verdict:
    """The score and reasoning in an answer.

    The last JSON object holding a `score` wins; failing that, the last tagged line
    `SCORE: <number>`, with the text before it as the reasoning; failing that, an answer that is
    a bare number. The score must be a finite number in [low, high] (a judge's [-1, 1] by
    default): an out-of-range score is a problem, never clipped.
    """
    text = answer.strip()
    if not text:
        return Verdict(None, problem="empty answer")
    found = _from_json(text) or _from_tag(text) or _from_bare(text)
    if found is None:
        lowered = text.lower().replace("\u2019", "'")
        if any(phrase in lowered for phrase in _REFUSALS):
            return Verdict(None, problem="refusal: no score given")
        return Verdict(None, problem="no score found")
    raw, reasoning = found
    try:
        score = float(raw)
    except (TypeError, ValueError):
        return Verdict(None, reasoning, problem=f"score {raw!r} is not a number")
    if not math.isfinite(score):
        return Verdict(None, reasoning, problem="score is not a finite number")
    if not low <= score <= high:
        return Verdict(None, reasoning, problem=f"score {score:g} is outside [{low:g}, {high:g}]")
    return Verdict(score, reasoning)


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in the text, in order (inside code fences too)."""
    decoder = json.JSONDecoder()
    objects: list[dict[str, Any]] = []
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            objects.append(value)
        start = text.find("{", end)
    return objects


def _from_json(text: str) -> tuple[Any, str] | None:
    for value in reversed(_json_objects(text)):
        keys = {str(k).lower(): k for k in value}
        if "score" in keys:
            raw = value[keys["score"]]
            if isinstance(raw, bool) or not isinstance(raw, int | float | str):
                return repr(raw), ""  # reported as not a number
            reasoning = next((value[keys[k]] for k in ("reasoning", "reason", "explanation") if k in keys), "")
            return raw, str(reasoning)
    return None


def _from_tag(text: str) -> tuple[Any, str] | None:
    matches = list(_TAGGED.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    reasoning = text[: last.start()].strip()
    reasoning = re.sub(r"^[\s*_#]*reasoning[\s*_]*:[\s*_]*", "", reasoning, flags=re.IGNORECASE)
    return last.group(1), reasoning


def _from_bare(text: str) -> tuple[Any, str] | None:
    match = _BARE.match(text)
    return (match.group(1), "") if match else None
