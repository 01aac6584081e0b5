"""zELO battles as a benchmark family: a judge battles a case's documents in pairs, and the
zELO ranking is scored against graded labels; a reranker scores the same documents directly
(`rerank`, `score_reranking`), as zbench backtests one. The application itself is
`ragmatrix.zelo`; `view` is what an item shows when it is opened."""

from ragmatrix.families.zelo_battles import report, view
from ragmatrix.seam.family import Family, Plot, Source
from ragmatrix.seam.headline import Headline
from ragmatrix.zelo.battles import (
    SCORING_VERSION,
    ZeloCase,
    ZeloDetails,
    battle,
    first_requests,
    first_texts,
    score,
)
from ragmatrix.zelo.reranking import rerank
from ragmatrix.zelo.reranking import score as score_reranking

__all__ = ["FAMILY", "battle", "rerank", "score", "score_reranking"]

FAMILY = Family(
    name="zelo_battles",
    scoring_version=SCORING_VERSION,
    case_schema=ZeloCase,
    headline=Headline("nDCG@k", "nDCG@k of the zELO ranking against the graded labels"),
    source=Source(
        "ZeroEntropy's zbench (zELO)",
        "https://github.com/zeroentropy-ai/zbench",
        "none stated",
        "pairwise battles and Bradley-Terry zELOs, re-implemented from the method; no code copied",
    ),
    # Only LLM judges read the judge prompt: its variants collapse for the other judges.
    prompt_fields=("instruction",),
    # The documents mapping is content, not a set of variants.
    plain_input_fields=("documents",),
    details=ZeloDetails,
    report_sections=(report.section,),
    plots=(Plot((report.PATTERN,), report.draw),),
    # The case's battle plan (`battle_plan`), which `battle` asks: every judgement an LLM judge
    # (or each member of an ensemble) makes on a first reading, and the query and documents a
    # similarity judge embeds once per case.
    first_requests=first_requests,
    first_texts=first_texts,
    item_view=view.VIEW,
)
