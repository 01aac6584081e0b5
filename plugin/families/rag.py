"""RAG interpretation: judging retrieved fragments, explicitly (yes/no) or implicitly.

Explicit cases ask whether the fragments are relevant to the question; the answer must be
exactly `yes` or `no` after normalisation. Implicit cases ask the model to answer from the
fragments, or to decline when they do not help; a deterministic check looks for required
keywords, forbidden keywords and decline phrases.
"""

from __future__ import annotations

import re
import string
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from plugin.families.base import Family, Headline
from plugin.outcome import Outcome

# Bump when scoring changes: every stored result of this family is then recomputed.
SCORING_VERSION = 2  # 2: an explicit answer longer than MAX_EXPLICIT_WORDS is a format violation

# An explicit case asks for yes or no: an answer of more words than this is a format
# violation, not a yes hidden in a page of text.
MAX_EXPLICIT_WORDS = 10

# The embedder baseline says "yes" when the best cosine similarity between the question and a
# fragment reaches this. It is part of the scoring, so changing it means bumping the version.
SIMILARITY_THRESHOLD = 0.3

DECLINE_PHRASES = (
    "cannot answer",
    "can't answer",
    "can not answer",
    "unable to answer",
    "not able to answer",
    "do not contain",
    "does not contain",
    "don't contain",
    "doesn't contain",
    "no relevant information",
    "not enough information",
    "insufficient information",
    "i don't know",
    "i do not know",
    "not mentioned",
    "not provided",
)


class RagInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt: str = Field(min_length=1)
    # BioChatter's form: the instruction followed by the fragments, as system messages.
    system_messages: list[str] | None = None
    # ragmatrix's form: the instruction and the fragments apart, so an embedder can read them.
    instruction: str | None = None
    fragments: list[str] | None = None

    @model_validator(mode="after")
    def one_form(self) -> RagInput:
        if self.system_messages is not None:
            if self.instruction is not None or self.fragments is not None:
                raise ValueError("give either system_messages or instruction + fragments, not both")
            if len(self.system_messages) < 2:
                raise ValueError("system_messages needs an instruction and at least one fragment")
        elif self.instruction is None or not self.fragments:
            raise ValueError("give instruction and a non-empty list of fragments")
        return self

    @property
    def instruction_text(self) -> str:
        return self.system_messages[0] if self.system_messages is not None else str(self.instruction)

    @property
    def fragment_texts(self) -> list[str]:
        return self.system_messages[1:] if self.system_messages is not None else list(self.fragments or [])


Keyword = str | list[str]  # a list means: any one of these alternatives


class RagExpected(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: Literal["yes", "no"] | None = None
    behaviour: Literal["answer", "decline"] | None = None
    keywords: list[Keyword] = Field(default_factory=list)
    forbidden: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def one_kind(self) -> RagExpected:
        if (self.answer is None) == (self.behaviour is None):
            raise ValueError("give either answer (explicit) or behaviour (implicit)")
        if self.behaviour == "answer" and not self.keywords:
            raise ValueError("an implicit 'answer' case needs keywords")
        return self


class RagCase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: RagInput
    expected: RagExpected


def is_explicit(case: object) -> bool:
    return getattr(case, "expected", None) is not None and case.expected.answer is not None  # type: ignore[attr-defined]


def messages(case: object) -> list[dict[str, str]]:
    """The chat messages of a case: instruction and fragments as system messages, then the
    user's question."""
    data: RagInput = case.input  # type: ignore[attr-defined]
    system = [data.instruction_text, *data.fragment_texts]
    return [*({"role": "system", "content": text} for text in system), {"role": "user", "content": data.prompt}]


_TRAILING = string.punctuation + string.whitespace


def normalise(answer: str) -> str:
    """Lower-case, then strip white space and trailing punctuation."""
    return answer.lower().strip().rstrip(_TRAILING).strip()


def parse_yes_no(answer: str) -> tuple[str | None, bool]:
    """The yes/no an answer gives, and whether it was exact.

    `None` is a format violation: the answer holds both words, or neither.
    """
    normalised = normalise(answer)
    if normalised in ("yes", "no"):
        return normalised, True
    words = set(re.findall(r"[a-z]+", normalised))
    found = words & {"yes", "no"}
    if len(found) == 1:
        return found.pop(), False
    return None, False


def score(case: object, answer: str) -> Outcome:
    """Score an LLM's answer to an explicit or an implicit case."""
    expected: RagExpected = case.expected  # type: ignore[attr-defined]
    if expected.answer is not None:
        return _score_explicit(expected.answer, answer)
    return _score_implicit(expected, answer)


def _score_explicit(expected: str, answer: str) -> Outcome:
    words = len(answer.split())
    if words > MAX_EXPLICIT_WORDS:
        reason = f"answer of {words} words where yes or no was asked"
        return Outcome.invalid(reason, answer=answer[:300], words=words)
    said, exact = parse_yes_no(answer)
    if said is None:
        return Outcome.invalid("answer is neither a clear yes nor a clear no", answer=answer)
    return Outcome(score=float(said == expected), answer=answer, parsed=said, exact=exact)


def declines(answer: str) -> bool:
    lowered = answer.lower().replace("’", "'")
    return any(phrase in lowered for phrase in DECLINE_PHRASES)


def _contains(answer: str, keyword: Keyword) -> bool:
    alternatives = [keyword] if isinstance(keyword, str) else keyword
    lowered = answer.lower()
    return any(alternative.lower() in lowered for alternative in alternatives)


def _score_implicit(expected: RagExpected, answer: str) -> Outcome:
    if not answer.strip():
        return Outcome.invalid("empty answer", answer=answer)
    declined = declines(answer)
    if expected.behaviour == "decline":
        return Outcome(score=float(declined), answer=answer, declined=declined)
    missing = [kw if isinstance(kw, str) else "|".join(kw) for kw in expected.keywords if not _contains(answer, kw)]
    forbidden = [kw for kw in expected.forbidden if _contains(answer, kw)]
    ok = not declined and not missing and not forbidden
    return Outcome(score=float(ok), answer=answer, declined=declined, missing=missing, forbidden_found=forbidden)


def judge_by_similarity(case: object, similarities: list[float]) -> Outcome:
    """The embedder baseline on an explicit case: "yes" when some fragment is similar enough."""
    expected: RagExpected = case.expected  # type: ignore[attr-defined]
    best = max(similarities)
    said = "yes" if best >= SIMILARITY_THRESHOLD else "no"
    return Outcome(
        score=float(said == expected.answer),
        parsed=said,
        similarity=round(best, 6),
        threshold=SIMILARITY_THRESHOLD,
    )


FAMILY = Family(
    name="rag_interpretation",
    scoring_version=SCORING_VERSION,
    case_schema=RagCase,
    headline=Headline("accuracy", "accuracy: the share of items judged or answered right"),
    # Only an LLM reads the instruction: its variants collapse for the embedder baseline.
    prompt_fields=("instruction",),
    first_requests=lambda case, model: [messages(case)],
    first_texts=lambda case, model: ([case.input.prompt], case.input.fragment_texts),
)
