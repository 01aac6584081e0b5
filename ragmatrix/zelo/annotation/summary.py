"""What an annotation run did, for the command's summary."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Summary:
    queries: int = 0
    judgements: int = 0  # needed in all
    resumed: int = 0  # found in the pairs file
    made: int = 0  # made by this run
    invalid: int = 0
    problems: list[str] = field(default_factory=list)  # unreadable lines of the pairs file
    left_out_documents: int = 0  # beyond the document limit: not judged, not in the output
    # queries whose comparison graph falls apart (invalid judgements), -> components
    split_queries: dict[str, int] = field(default_factory=dict)
    zbench_pairs: int = 0  # pairs written to the ai_scores.json file
    zbench_pairs_skipped: int = 0  # left out of it: a judge gave no valid score

    @property
    def mostly_invalid(self) -> bool:
        """More than half of the judgements are invalid: the zELOs rest on too little."""
        return self.judgements > 0 and 2 * self.invalid > self.judgements
