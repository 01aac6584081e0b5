"""Sampling as Finesse does it (`sampling: finesse`), so that an RSS can stand beside a
published Finesse number.

This follows finesse-benchmark 0.16.1 (`FinesseEvaluator._dataset_prepare_and_validate` and
`_get_text_chunck_from_database`), the last release that samples from the bead database
(`enzoescipy/finesse-benchmark-database`: rows of `string_id`, `lang`, `beads`):

- the rows are shuffled once with the seed (the `datasets` library's shuffle: a NumPy
  `default_rng(seed)` permutation of the row positions), and there must be at least
  (number of lengths) x (samples per length) rows;
- one reader walks the shuffled rows in order, across all lengths (shortest first) and samples;
- each row read gives at most one chunk: its beads in order, joined by spaces, until they
  reach the token budget; the bead that crosses it is cut to the tokens still needed. A row
  whose beads end before the budget gives no chunk (it is used up all the same);
- tokens are counted, and cut, with the embedder's own tokenizer (no special tokens), so
  different embedders read different text;
- when the reader reaches the end it starts again at the first row, and so does every later
  sample (Finesse's reader, once exhausted, restarts for each sample).

The text therefore depends on the embedder, and on every length and sample before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ragmatrix.foundations import collector
from ragmatrix.seam.case import CaseInputError

FINESSE_VERSION = "0.16.1"


@dataclass(frozen=True)
class Tokenizer:
    """Counting and cutting text in an embedder's tokens, as Finesse's embedder does."""

    count: Callable[[str], int]
    cut: Callable[[str, int], str]  # the text of the first n tokens


@lru_cache(maxsize=4)
def _hf_tokenizer(path: str) -> Tokenizer:
    with collector.made_to_last():  # transformers' modules and the tokenizer live to the run's end
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))

    def cut(text: str, tokens: int) -> str:
        return str(tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)[:tokens]))

    return Tokenizer(count, cut)


def embedder_tokenizer(embedder: Any) -> Tokenizer:
    """The tokenizer of a local sentence-transformers embedder's model folder."""
    from ragmatrix.models.providers.sentence_transformers import SentenceTransformersSpec

    spec = getattr(embedder, "spec", None)
    path: Path | None = spec.local_path() if isinstance(spec, SentenceTransformersSpec) else None
    if path is None or not (path / "tokenizer_config.json").is_file():
        name = getattr(spec, "id", type(embedder).__name__)
        raise CaseInputError(
            f"sampling: finesse counts tokens with the embedder's own tokenizer, and model '{name}' "
            "has no local tokenizer (use a sentence_transformers model folder, or sampling: words)"
        )
    return _hf_tokenizer(str(path))


def chunk_of(beads: Sequence[str], budget: int, tokenizer: Tokenizer) -> str | None:
    """One row's chunk: its beads up to `budget` tokens, the last one cut to fit; None when
    the beads end before the budget is reached."""
    parts: list[str] = []
    used = 0
    for bead in beads:
        tokens = tokenizer.count(bead)
        if used + tokens > budget:
            parts.append(tokenizer.cut(bead, budget - used))
            return " ".join(parts)
        parts.append(bead)
        used += tokens
        if used == budget:
            return " ".join(parts)
    return None


def finesse_sequences(
    rows: Sequence[Sequence[str]], lengths: Sequence[int], samples: int, budget: int, seed: int, tokenizer: Tokenizer
) -> list[list[str]]:
    """Every sample of every length, in Finesse's order (lengths as given, then samples)."""
    import numpy as np

    needed = len(lengths) * samples
    if len(rows) < needed:
        raise CaseInputError(
            f"sampling: finesse needs at least {needed} rows (lengths x samples), the source has {len(rows)}"
        )
    order = [int(i) for i in np.random.default_rng(seed).permutation(len(rows))]
    reader = _Reader(order)
    sequences = []
    for length in lengths:
        for _ in range(samples):
            sequence: list[str] = []
            barren = 0  # rows read since the last chunk: a whole pass without one never ends
            for index in reader.sample():
                chunk = chunk_of(rows[index], budget, tokenizer)
                if chunk is None:
                    barren += 1
                    if barren > len(order):
                        raise CaseInputError(f"sampling: finesse: no row of the source reaches {budget} tokens")
                    continue
                barren = 0
                sequence.append(chunk)
                if len(sequence) == length:
                    break
            sequences.append(sequence)
    return sequences


class _Reader:
    """The shuffled rows, read in order by one reader for the whole run. Once it has run
    out, every sample reads from the first row again (Finesse restarts a local reader)."""

    def __init__(self, order: list[int]) -> None:
        self.order = order
        self.position = 0
        self.exhausted = False

    def sample(self) -> Any:
        if not self.exhausted:
            while self.position < len(self.order):
                self.position += 1
                yield self.order[self.position - 1]
            self.exhausted = True
        while True:
            yield from self.order
