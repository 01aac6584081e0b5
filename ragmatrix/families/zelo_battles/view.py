"""What a zELO battles item shows when it is opened: the query and documents with their grades
(from the case), every pairwise judgement, and the zELO order beside the graded relevance; for a
reranker's item, its relevance per document in its order and zbench's figures."""

from __future__ import annotations

from typing import Any

from ragmatrix.results.rows import Iteration, Row
from ragmatrix.seam.detail import Fields, ItemView, Listing, Part, Text, number
from ragmatrix.zelo.battles import ZeloItem

DOCUMENT_CHARS = 600
SUMMARY = (
    ("judgements", "judgements"),
    ("judge_calls", "judge calls"),
    ("invalid_answers", "invalid answers"),
    ("position_consistency", "position consistency"),
    ("position_bias", "position bias (> 0: leans to the second shown)"),
    ("components", "components of the comparison graph"),
    ("k", "k"),
)


def asked(case: ZeloItem, row: Row) -> list[Part]:
    data, expected = case.input, case.expected
    ids = sorted(data.documents, key=lambda doc: (-expected.relevance.get(doc, 0), doc))
    parts: list[Part] = [
        Fields(
            "query",
            [
                ("query", data.query),
                ("cycles", str(data.cycles)),
                ("seed", str(data.seed)),
                ("both orders", "yes" if data.both_orders else "no"),
                ("relevant from grade", str(expected.relevant_from)),
            ],
        ),
        Listing(
            "documents and their grades",
            ["document", "grade", "text"],
            [[doc, str(expected.relevance.get(doc, 0)), _short(data.documents[doc])] for doc in ids],
            marked=[expected.relevance.get(doc, 0) >= expected.relevant_from for doc in ids],
            numeric={1},
        ),
    ]
    if any(name == "instruction" for name, _ in case.choices):  # an LLM judge's item: the prompt it read
        parts.append(Text("the judge's instruction (read by LLM judges)", data.instruction))
    return parts


def answered(iteration: Iteration, case: ZeloItem | None) -> list[Part]:
    found = iteration.details
    if isinstance(found.get("relevance"), dict):
        return reranked(found, case)
    zelo = found.get("zelo")
    battles = found.get("battles")
    if not isinstance(zelo, dict) or not isinstance(battles, list):
        return []
    stored_intervals = found.get("zelo_ci")
    intervals: dict[str, Any] = stored_intervals if isinstance(stored_intervals, dict) else {}
    grades = case.expected.relevance if case is not None else {}
    relevant_from = case.expected.relevant_from if case is not None else 1
    order = sorted(zelo, key=lambda doc: (-float(zelo[doc]), doc))
    parts: list[Part] = [Fields("battles", [(name, number(found[key])) for key, name in SUMMARY if key in found])]
    parts.append(
        Listing(
            "zELO order beside the graded relevance",
            ["rank", "document", "zELO", "95% CI", "grade"],
            [
                [str(rank), doc, number(zelo[doc], 3), _interval(intervals.get(doc)), str(grades.get(doc, "-"))]
                for rank, doc in enumerate(order, 1)
            ],
            marked=[grades.get(doc, 0) >= relevant_from for doc in order] if grades else [],
            numeric={0, 2, 4},
        )
    )
    rows = []
    for index, battle in enumerate(battles, 1):
        if not isinstance(battle, list | tuple) or len(battle) != 3:
            continue
        first, second, score = battle
        rows.append([str(index), str(first), str(second), number(score, 3), _preferred(first, second, score)])
    header = ["#", "first shown", "second shown", "score", "preferred"]
    parts.append(Listing("pairwise judgements (score < 0: the first shown wins)", header, rows, numeric={0, 3}))
    return parts


def reranked(found: dict[str, Any], case: ZeloItem | None) -> list[Part]:
    """A reranker's item: its relevance per document in its order, beside the grades, and
    zbench's figures."""
    relevance: dict[str, Any] = found["relevance"]
    grades = case.expected.relevance if case is not None else {}
    relevant_from = case.expected.relevant_from if case is not None else 1
    stored = found.get("ranking")
    order = [str(d) for d in stored] if isinstance(stored, list) else sorted(relevance, key=lambda d: -relevance[d])
    stored_zbench = found.get("zbench")
    zbench: dict[str, Any] = stored_zbench if isinstance(stored_zbench, dict) else {}
    parts: list[Part] = [
        Fields("zbench's figures on these scores", [(str(name), number(value)) for name, value in zbench.items()]),
        Listing(
            "the reranker's order beside the graded relevance",
            ["rank", "document", "relevance", "grade"],
            [[str(r), d, number(relevance.get(d), 4), str(grades.get(d, "-"))] for r, d in enumerate(order, 1)],
            marked=[grades.get(d, 0) >= relevant_from for d in order] if grades else [],
            numeric={0, 2, 3},
        ),
    ]
    return parts


def _preferred(first: Any, second: Any, score: Any) -> str:
    if score is None:
        return "invalid"
    value = float(score)
    return str(first) if value < 0 else str(second) if value > 0 else "tie"


def _interval(bounds: Any) -> str:
    if isinstance(bounds, list | tuple) and len(bounds) == 2:
        return f"[{number(bounds[0], 3)}, {number(bounds[1], 3)}]"
    return "-"


def _short(text: str) -> str:
    return text if len(text) <= DOCUMENT_CHARS else text[:DOCUMENT_CHARS] + " ..."


VIEW = ItemView(asked=asked, answered=answered)
