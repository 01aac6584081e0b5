"""RAG interpretation: judging retrieved fragments, explicitly or implicitly.

Explicit cases expect one label (`yes`/`no` for a relevance judgement, or any other word such
as BioChatter's `answer`/`decline`); by default the answer must equal it after BioChatter's
normalisation (`match: exact`), and `match: yes_no` keeps the tolerant yes/no reading.
Implicit cases ask the model to answer from the fragments, or to decline when they do not
help. They are checked by rules (required keywords, forbidden keywords, decline phrases) when
the case gives keywords, and otherwise by an evaluator LLM that says whether the response
answers or declines (BioChatter's method).
"""

from __future__ import annotations

import re
import string
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from ragmatrix.foundations.data_model import DataModel, empty_list
from ragmatrix.models.protocols import ChatModel, Messages, Model, Retriever
from ragmatrix.results.rows import Iteration, Row
from ragmatrix.seam.case import Case
from ragmatrix.seam.detail import Fields, ItemView, Part, Text, number
from ragmatrix.seam.family import Family, Source
from ragmatrix.seam.headline import Headline
from ragmatrix.seam.outcome import Outcome

# Bump when scoring changes: every stored result of this family is then recomputed.
# 2: an explicit answer must equal its label after BioChatter's normalisation (`match: exact`);
#    the tolerant yes/no reading of version 1 is `match: yes_no`, where an answer longer than
#    MAX_EXPLICIT_WORDS is a format violation.
SCORING_VERSION = 2

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


class RagInput(DataModel):
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


def split_system_messages(raw_input: dict[str, Any]) -> dict[str, Any]:
    """A case's `system_messages` variants as an instruction and fragments, where that split
    is unambiguous: every variant is a list whose first message differs and whose other
    messages are the same. Then the variants are instruction variants, and they collapse for
    models that read no prompt. Anything else is left as written.
    """
    variants = raw_input.get("system_messages")
    if not isinstance(variants, dict) or len(variants) < 2 or {"instruction", "fragments"} & set(raw_input):
        return raw_input
    lists = list(variants.values())
    if not all(isinstance(v, list) and len(v) >= 2 and all(isinstance(m, str) for m in v) for v in lists):
        return raw_input
    fragments = lists[0][1:]
    if any(v[1:] != fragments for v in lists) or len({v[0] for v in lists}) != len(lists):
        return raw_input
    split = {k: v for k, v in raw_input.items() if k != "system_messages"}
    return {**split, "instruction": {name: v[0] for name, v in variants.items()}, "fragments": fragments}


Keyword = str | list[str]  # a list means: any one of these alternatives

# Label pairs an explicit case may choose between: an answer outside its pair is a format
# violation, counted apart from a wrong answer. Other labels are compared, nothing more.
LABEL_PAIRS = (frozenset({"yes", "no"}), frozenset({"answer", "decline"}))
BEHAVIOURS = ("answer", "decline")

# What the evaluator LLM is told when neither the case nor the settings replace it. Our own
# wording of BioChatter's evaluator instruction: it is shown the question, then (as the user
# message) the response, and must say in one word whether the response answers or declines.
# `{question}` is replaced by the case's question.
DEFAULT_EVALUATOR_INSTRUCTION = (
    "You will be shown a response that was given to this question: {question} "
    "Reply 'answer' if the response answers the question. "
    "Reply 'decline' if the response declines to answer or apologises because the text fragments "
    "it was given are not relevant to the question. "
    "Reply with one of these two words only, and nothing else. The response follows."
)


class RagExpected(DataModel):
    model_config = ConfigDict(extra="forbid")
    # Explicit: the label the answer must be.
    answer: str | None = Field(default=None, min_length=1)
    # `exact`: BioChatter's rule; `yes_no`: the tolerant yes/no reading.
    match: Literal["exact", "yes_no"] = "exact"
    # Implicit: whether the model should answer from the fragments or decline.
    behaviour: Literal["answer", "decline"] | None = None
    # How an implicit case is checked; by default by rules when keywords or forbidden words
    # are given, else by the evaluator LLM.
    check: Literal["rules", "evaluator"] | None = None
    keywords: list[Keyword] = Field(default_factory=empty_list)
    forbidden: list[str] = Field(default_factory=empty_list)
    # Replaces the evaluator's instruction for this case; `{question}` is the case's question.
    evaluator_instruction: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def one_kind(self) -> RagExpected:
        if (self.answer is None) == (self.behaviour is None):
            raise ValueError("give either answer (explicit) or behaviour (implicit)")
        if self.answer is not None:
            implicit_only = [f for f in ("check", "evaluator_instruction") if getattr(self, f) is not None]
            if implicit_only or self.keywords or self.forbidden:
                raise ValueError("keywords, forbidden, check and evaluator_instruction belong to implicit cases")
            if self.match == "yes_no" and label(self.answer) not in ("yes", "no"):
                raise ValueError("match: yes_no needs answer yes or no")
            return self
        if self.checked_by == "rules":
            if self.evaluator_instruction is not None:
                raise ValueError("evaluator_instruction needs check: evaluator")
            if self.behaviour == "answer" and not self.keywords:
                raise ValueError("an implicit 'answer' case checked by rules needs keywords")
        return self

    @property
    def checked_by(self) -> Literal["rules", "evaluator"] | None:
        """How an implicit case is checked; None for an explicit case."""
        if self.behaviour is None:
            return None
        if self.check is not None:
            return self.check
        return "rules" if self.keywords or self.forbidden else "evaluator"


class RagCase(DataModel):
    model_config = ConfigDict(extra="forbid")
    input: RagInput
    expected: RagExpected


# A case of this family, as its test receives it.
RagItem = Case[RagInput, RagExpected]


def is_explicit(case: RagItem) -> bool:
    return case.expected.answer is not None


def judges_relevance(case: RagItem) -> bool:
    """An explicit case whose label is yes or no: one a similarity threshold can judge too."""
    return case.expected.answer is not None and label(case.expected.answer) in ("yes", "no")


def messages(case: RagItem) -> Messages:
    """The chat messages of a case: instruction and fragments as system messages, then the
    user's question."""
    data = case.input
    system = [data.instruction_text, *data.fragment_texts]
    return [*({"role": "system", "content": text} for text in system), {"role": "user", "content": data.prompt}]


# --- the first round: what the scheduler sends ahead, and what the tests ask -----------------


def first_requests(case: RagItem, model: Model) -> list[Messages]:
    """An LLM's item asks one conversation: the case's messages."""
    return [messages(case)]


def first_texts(case: RagItem, model: Model) -> tuple[list[str], list[str]]:
    """An embedder's item embeds the question (a query) and the fragments (documents)."""
    return [case.input.prompt], case.input.fragment_texts


def ask(llm: ChatModel, case: RagItem) -> str:
    """The LLM's answer to the case: its first round, as the scheduler sent it ahead."""
    (answer,) = FAMILY.ask(llm, case)
    return answer


def similarities(embedder: Retriever, case: RagItem) -> list[float]:
    """The similarity of each fragment to the question: the texts of the first round."""
    (question,), fragments = first_texts(case, embedder)
    return embedder.similarities(question, fragments)


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


def label(text: str) -> str:
    """BioChatter's normalisation: lower-case, remove every `.`, `?` and `!`, strip."""
    return text.lower().replace(".", "").replace("?", "").replace("!", "").strip()


def score(case: RagItem, answer: str) -> Outcome:
    """Score an LLM's answer to an explicit case, or to an implicit case checked by rules."""
    expected = case.expected
    if expected.answer is not None:
        if expected.match == "yes_no":
            return _score_explicit(label(expected.answer), answer)
        return _score_exact(expected.answer, answer)
    if expected.checked_by == "evaluator":
        raise ValueError("this implicit case is checked by the evaluator: use score_by_evaluator")
    return _score_implicit(expected, answer)


def _too_long(answer: str) -> Outcome | None:
    """An explicit case asks for one label: a page of text is a format violation, whatever it
    contains, and only its start is kept."""
    words = len(answer.split())
    if words > MAX_EXPLICIT_WORDS:
        return Outcome.invalid(f"answer of {words} words where one label was asked", answer=answer[:300], words=words)
    return None


def _score_exact(expected: str, answer: str) -> Outcome:
    """BioChatter's rule: the normalised answer must equal the label. Where the label is one
    of a known pair, an answer that is neither of the pair is a format violation."""
    if (long := _too_long(answer)) is not None:
        return long
    said, wanted = label(answer), label(expected)
    pair = next((p for p in LABEL_PAIRS if wanted in p), None)
    if pair is not None and said not in pair:
        return Outcome.invalid(f"answer is not one of {' or '.join(sorted(pair))}", answer=answer, parsed=said)
    return Outcome(score=float(said == wanted), answer=answer, parsed=said)


def _score_explicit(expected: str, answer: str) -> Outcome:
    if (long := _too_long(answer)) is not None:
        return long
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


def evaluator_instruction(case: RagItem, configured: str | None = None) -> str | None:
    """The instruction the evaluator LLM gets for a case: the case's own, else the configured
    one, else the default; None when the case is not checked by the evaluator."""
    expected = case.expected
    if expected.checked_by != "evaluator":
        return None
    return expected.evaluator_instruction or configured or DEFAULT_EVALUATOR_INSTRUCTION


def evaluator_messages(case: RagItem, answer: str, instruction: str) -> Messages:
    """The evaluator's chat: the instruction with the question filled in, then the response."""
    system = instruction.replace("{question}", case.input.prompt)
    return [{"role": "system", "content": system}, {"role": "user", "content": answer}]


def score_by_evaluator(case: RagItem, answer: str, verdict: str) -> Outcome:
    """Compare the evaluator's one-word verdict with the expected behaviour. A verdict that is
    neither `answer` nor `decline` is the evaluator's format violation: invalid, and stored."""
    expected = case.expected
    parsed = label(verdict)
    if not answer.strip():
        return Outcome.invalid("empty answer", answer=answer, verdict=verdict)
    if parsed not in BEHAVIOURS:
        return Outcome.invalid(
            "evaluator format violation: verdict is neither answer nor decline",
            answer=answer,
            verdict=verdict,
            evaluator_violation=True,
        )
    return Outcome(score=float(parsed == expected.behaviour), answer=answer, verdict=verdict, judged=parsed)


def judge_by_similarity(case: RagItem, similarities: list[float]) -> Outcome:
    """The embedder baseline on a yes/no case: "yes" when some fragment is similar enough."""
    expected = case.expected
    best = max(similarities)
    said = "yes" if best >= SIMILARITY_THRESHOLD else "no"
    return Outcome(
        score=float(said == label(str(expected.answer))),
        parsed=said,
        similarity=round(best, 6),
        threshold=SIMILARITY_THRESHOLD,
    )


# --- what an item shows in `ragmatrix view` and `ragmatrix show` -------------------------------


def asked(case: RagItem, row: Row) -> list[Part]:
    """The messages an LLM was sent (or, for the embedder baseline, the texts it compared), and
    the expected answer."""
    expected = case.expected
    wanted: list[tuple[str, str]] = []
    if expected.answer is not None:
        wanted += [("answer", expected.answer), ("match", expected.match)]
    else:
        wanted += [("behaviour", str(expected.behaviour)), ("checked by", str(expected.checked_by))]
        if expected.keywords:
            keywords = (k if isinstance(k, str) else " | ".join(k) for k in expected.keywords)
            wanted.append(("keywords", ", ".join(keywords)))
        if expected.forbidden:
            wanted.append(("forbidden", ", ".join(expected.forbidden)))
    parts: list[Part] = [Fields("expected", wanted)]
    if row.test.endswith("_by_similarity"):
        parts.append(Text("question (embedded as a query)", case.input.prompt))
        fragments = enumerate(case.input.fragment_texts, 1)
        parts += [Text(f"fragment {i} (embedded as a document)", text) for i, text in fragments]
        return parts
    for index, message in enumerate(messages(case), start=1):
        parts.append(Text(f"message {index} ({message['role']})", str(message["content"])))
    return parts


def answered(iteration: Iteration, case: RagItem | None) -> list[Part]:
    """The raw answer, and what scoring read in it."""
    found = iteration.details
    parts: list[Part] = []
    if "answer" in found:
        parts.append(Text("answer", str(found["answer"])))
    read = [
        (name, number(found[key]) if not isinstance(found[key], list) else ", ".join(map(str, found[key])) or "none")
        for key, name in (
            ("parsed", "parsed"),
            ("exact", "exactly one word"),
            ("declined", "declined"),
            ("missing", "keywords missing"),
            ("forbidden_found", "forbidden words found"),
            ("verdict", "evaluator's verdict"),
            ("judged", "evaluator read"),
            ("similarity", "best similarity"),
            ("threshold", "threshold"),
            ("words", "words"),
        )
        if key in found
    ]
    if read:
        parts.append(Fields("how it scored", read))
    return parts


VIEW = ItemView(asked=asked, answered=answered)


FAMILY = Family(
    name="rag_interpretation",
    scoring_version=SCORING_VERSION,
    case_schema=RagCase,
    headline=Headline("accuracy", "accuracy: the share of items judged or answered right", binary=True),
    source=Source(
        "BioChatter's benchmark (Lobentanzer et al.)",
        "https://github.com/biocypher/biochatter",
        "MIT",
        "the case format, its variant expansion and the rag_interpretation checks",
    ),
    # Only an LLM reads the instruction: its variants collapse for the embedder baseline.
    prompt_fields=("instruction",),
    # BioChatter's system_messages variants become instruction variants where unambiguous.
    normalise_input=split_system_messages,
    # Implicit cases without keywords are checked by the evaluator LLM.
    evaluator_prompt=evaluator_instruction,
    first_requests=first_requests,
    first_texts=first_texts,
    item_view=VIEW,
)
