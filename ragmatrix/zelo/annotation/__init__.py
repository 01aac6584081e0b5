"""zELO annotation of a zbench-format dataset, resumable.

For each query, the documents battle in seeded random cycles (the seed is combined with the
query id, so adding or reordering queries leaves each query's pairs alone). Every judge judges
every matchup; each judgement is appended to the pairs file next to the output as soon as it
is made, with the judge's reasoning, so that

- an interrupted run resumes where it stopped, re-judging nothing already recorded (a
  judgement is found again by the md5 of the query, both documents as shown, the judge's
  output fingerprint and the prompt: a changed document is judged anew);
- a person can read why each document ranked where it did.

Several judges are combined per matchup by `vote`, `zbench_vote` or `mean`, as an ensemble is.
Bradley–Terry then gives each document its zELO, written as `score` on each document of the
output, with the unit recorded on the line (`zelo_scale`). Documents beyond `document_limit`
are never judged and are left out of the output (zbench's reader needs a number on every
document, and no number would be honest). The judgements can also be written in zbench's
`ai_scores.json` shape.

The parts, one job each: `plan` (settings, judges, the matchups and the key of every
judgement), `pair_log` (the pairs file), `run` (judging what is missing, then writing),
`compose` (the annotated line and zbench's scored pairs) and `judges` (choosing the judges
from the models file).
"""

from ragmatrix.zelo.annotation.compose import check_zbench_judges
from ragmatrix.zelo.annotation.judges import load_judges
from ragmatrix.zelo.annotation.pair_log import battles_of, pairs_path
from ragmatrix.zelo.annotation.plan import AnnotateError, JudgeModel, Settings, judgement_key
from ragmatrix.zelo.annotation.run import annotate
from ragmatrix.zelo.annotation.summary import Summary

__all__ = [
    "AnnotateError",
    "JudgeModel",
    "Settings",
    "Summary",
    "annotate",
    "battles_of",
    "check_zbench_judges",
    "judgement_key",
    "load_judges",
    "pairs_path",
]
