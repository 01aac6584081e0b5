"""RSS probes: does one embedding of a long text still remember each of its parts?

A sample is a sequence of L chunks, each cut from a different source document. The model
embeds each chunk alone (e_j) and each prefix c_0..c_k as one synthesis (s_k): by reading the
prefix text (native mode) or by merging e_0..e_k (merger mode). With S[i][j] = cos(s_i, e_j):

    TD = mean over i = 1..L-2 of  Q_lo{S[i][j] : j <= i} - Q_hi{S[i][j] : j > i}
    BU = mean over a = 1..L-1 of  Q_lo{S[i][a] : i >= a} - Q_hi{S[i][a] : i < a}

with (Q_lo, Q_hi) the quartiles (q1q3) or both medians (q2q2), numpy's linear interpolation.
A sample scores r = TD + BU (formula `current`) or (TD + BU)/2 - |TD - BU| (`legacy`), and
RSS = 500 * r. A case's score is the flat mean over all samples of all lengths.

Chunk text is cut in whitespace words, independently of any model, so every model sees the
same text; a model with a short context then shows its loss in native mode. `sampling: finesse`
samples as Finesse does instead (see `ragmatrix.families.rss.finesse`), in the embedder's tokens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from ragmatrix.families.rss.finesse import FINESSE_VERSION, embedder_tokenizer, finesse_sequences
from ragmatrix.families.rss.mergers import load_merger, mean_prefixes, merger_fingerprint
from ragmatrix.families.rss.text_sources import TextSource, load_documents, load_rows, source_fingerprint
from ragmatrix.foundations.data_model import DataModel
from ragmatrix.foundations.keys import md5_of
from ragmatrix.seam.case import Case, CaseInputError
from ragmatrix.seam.outcome import Outcome

if TYPE_CHECKING:
    import numpy as np

    from ragmatrix.models.protocols import Embedder

# Bump when scoring changes: every stored result of this family is then recomputed.
SCORING_VERSION = 1
SCALE = 500.0
QUANTILES = {"q1q3": (0.25, 0.75), "q2q2": (0.5, 0.5)}
FORMULAS = ("current", "legacy")
# How chunk text is cut; recorded in every row.
CHUNKING = "whitespace words"


class Lengths(DataModel):
    model_config = ConfigDict(extra="forbid")
    min: int = Field(ge=3)  # TD needs a step with chunks on both sides
    max: int
    step: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def ordered(self) -> Lengths:
        if self.max < self.min:
            raise ValueError("max must be at least min")
        return self

    @property
    def values(self) -> list[int]:
        return list(range(self.min, self.max + 1, self.step))


class RssInput(DataModel):
    model_config = ConfigDict(extra="forbid")
    source: TextSource
    lengths: Lengths
    samples: int = Field(default=8, ge=1)  # per length
    # `words`: chunk_words whitespace words of a random place in distinct documents, the same
    # text for every model; `finesse`: Finesse's own procedure, chunk_tokens of the embedder's
    # tokenizer per chunk (and in merger mode, each chunk is seen through the merger too).
    sampling: Literal["words", "finesse"] = "words"
    chunk_words: int | None = Field(default=None, ge=1)
    chunk_tokens: int | None = Field(default=None, ge=1)
    mode: Literal["native", "merger"] = "native"
    merger: str = "mean"  # merger mode only; see ragmatrix/families/mergers.py
    formula: Literal["current", "legacy"] = "current"
    quantiles: Literal["q1q3", "q2q2"] = "q1q3"
    seed: int = 0
    # Latency is measured on this many samples per length (each timed batch on its own, after
    # a warm-up); the rest are embedded in one batch, which is what keeps the harness fast.
    timed_samples: int = Field(default=1, ge=0)

    @model_validator(mode="after")
    def chunk_size_of_its_sampling(self) -> RssInput:
        if self.sampling == "words" and (self.chunk_words is None or self.chunk_tokens is not None):
            raise ValueError("sampling: words takes chunk_words (and no chunk_tokens)")
        if self.sampling == "finesse" and (self.chunk_tokens is None or self.chunk_words is not None):
            raise ValueError("sampling: finesse takes chunk_tokens (and no chunk_words)")
        return self


class RssCase(DataModel):
    model_config = ConfigDict(extra="forbid")
    input: RssInput
    expected: dict[str, Any] = Field(default_factory=dict, max_length=0)  # a probe has no answer key


# ---- scoring -------------------------------------------------------------------------------


def top_down(similarity: np.ndarray, low: float, high: float) -> float:
    """Contextual coherence: at each inner step, the memory against the noise."""
    import numpy as np

    length = similarity.shape[0]
    gaps = [
        np.quantile(similarity[i, : i + 1], low) - np.quantile(similarity[i, i + 1 :], high)
        for i in range(1, length - 1)
    ]
    return float(np.mean(gaps))


def bottom_up(similarity: np.ndarray, low: float, high: float) -> float:
    """Chunk integrity: each chunk after the first, once inside against not yet inside."""
    import numpy as np

    length = similarity.shape[0]
    gaps = [np.quantile(similarity[a:, a], low) - np.quantile(similarity[:a, a], high) for a in range(1, length)]
    return float(np.mean(gaps))


def combine(td: float, bu: float, formula: str) -> float:
    if formula == "current":
        return td + bu
    if formula == "legacy":
        return (td + bu) / 2 - abs(td - bu)
    raise ValueError(f"unknown formula '{formula}' (known: {', '.join(FORMULAS)})")


def sample_score(syntheses: np.ndarray, chunks: np.ndarray, formula: str, quantiles: str) -> tuple[float, float, float]:
    """TD, BU and RSS (×500) of one sample, from its unit-length syntheses and chunks."""
    import numpy as np

    low, high = QUANTILES[quantiles]
    similarity = np.asarray(syntheses, dtype=np.float64) @ np.asarray(chunks, dtype=np.float64).T
    td, bu = top_down(similarity, low, high), bottom_up(similarity, low, high)
    return td, bu, SCALE * combine(td, bu, formula)


# ---- sampling ------------------------------------------------------------------------------


def sample_sequences(documents: list[str], length: int, samples: int, chunk_words: int, seed: int) -> list[list[str]]:
    """`samples` sequences of `length` chunks, each chunk `chunk_words` consecutive words of a
    different document.

    One RNG per (seed, length, chunk size): adding a length or samples leaves the others as
    they were, and cases that share these settings and the source see the same text.
    """
    import numpy as np

    words = [d.split() for d in documents]
    eligible = [w for w in words if len(w) >= chunk_words]
    if len(eligible) < length:
        raise CaseInputError(
            f"the source has {len(eligible)} documents of at least {chunk_words} words; "
            f"a sequence of {length} chunks needs {length} distinct documents"
        )
    rng = np.random.default_rng(int(md5_of({"seed": seed, "length": length, "chunk_words": chunk_words})[:16], 16))
    sequences = []
    for _ in range(samples):
        picks = rng.choice(len(eligible), size=length, replace=False)
        sequence = []
        for pick in picks:
            document = eligible[int(pick)]
            start = int(rng.integers(0, len(document) - chunk_words + 1))
            sequence.append(" ".join(document[start : start + chunk_words]))
        sequences.append(sequence)
    return sequences


def prefixes(sequence: list[str]) -> list[str]:
    return [" ".join(sequence[: k + 1]) for k in range(len(sequence))]


# A case of this family, as its test receives it.
RssItem = Case[RssInput, dict[str, Any]]


# ---- one case ------------------------------------------------------------------------------


def corpus_fingerprint(case: RssItem) -> str:
    """The source's text and the merger's code: both go into the result key."""
    data = case.input
    parts = {"source": source_fingerprint(data.source, case.directory)}
    if data.mode == "merger":
        parts["merger"] = merger_fingerprint(data.merger, case.directory)
    return md5_of(parts)


@dataclass
class SampleResult:
    length: int
    td: float
    bu: float
    rss: float
    total_ms: float | None = None  # set on the timed samples only
    synthesis_ms: float | None = None


def probe(embedder: Embedder, case: RssItem) -> Outcome:
    """Run every sample of a case on an embedder and score it."""
    import numpy as np

    data = case.input
    merge = load_merger(data.merger, case.directory) if data.mode == "merger" and data.merger != "mean" else None
    # Every length is sampled before anything is embedded: a source too small fails at once.
    sequences = _sequences(embedder, case)
    timed = [index for index, _ in enumerate(sequences) if index % data.samples < data.timed_samples]
    latencies = {index: _time_sample(embedder, sequences[index], data, merge) for index in timed}
    # The rest in one batched call: the timed samples' texts are cached by now, nothing is
    # embedded twice, and the model sorts the whole batch by length as it would on its own.
    texts = [text for sequence in sequences for text in _texts(sequence, data)]
    vectors = iter(embedder.embed_documents(texts))
    results = []
    for index, sequence in enumerate(sequences):
        mine = [next(vectors) for _ in _texts(sequence, data)]
        chunks = np.stack(mine[: len(sequence)])
        syntheses = _syntheses(chunks, mine[len(sequence) :], data, merge)
        if data.sampling == "finesse" and data.mode == "merger":  # Finesse's merger perspective
            chunks = np.stack([_syntheses(chunks[j : j + 1], [], data, merge)[0] for j in range(len(chunks))])
        td, bu, rss = sample_score(syntheses, chunks, data.formula, data.quantiles)
        results.append(SampleResult(len(sequence), td, bu, rss, *latencies.get(index, (None, None))))
    return summarise(results, data, embedder)


def _sequences(embedder: Embedder, case: RssItem) -> list[list[str]]:
    """Every sample of every length, by the case's sampling."""
    data = case.input
    if data.sampling == "finesse":
        assert data.chunk_tokens is not None
        rows = load_rows(data.source, case.directory)
        tokenizer = embedder_tokenizer(embedder)
        return finesse_sequences(rows, data.lengths.values, data.samples, data.chunk_tokens, data.seed, tokenizer)
    assert data.chunk_words is not None
    documents = load_documents(data.source, case.directory)
    return [
        sequence
        for length in data.lengths.values
        for sequence in sample_sequences(documents, length, data.samples, data.chunk_words, data.seed)
    ]


def _texts(sequence: list[str], data: RssInput) -> list[str]:
    """The chunks, then in native mode the prefixes after the first (which is chunk 0 itself)."""
    return sequence + (prefixes(sequence)[1:] if data.mode == "native" else [])


def _syntheses(chunks: np.ndarray, prefix_vectors: list[np.ndarray], data: RssInput, merge: Any) -> np.ndarray:
    import numpy as np

    if data.mode == "native":
        return np.stack([chunks[0], *prefix_vectors])
    if merge is None:
        return mean_prefixes(chunks)
    return np.stack([merge(chunks[: k + 1]) for k in range(len(chunks))])


def _time_sample(embedder: Embedder, sequence: list[str], data: RssInput, merge: Any) -> tuple[float, float]:
    """Milliseconds for all of a sample's embedding work, and for its syntheses alone: the
    model's own time, measured once and remembered with the embeddings (see
    `Embedder.timed_embed_documents`)."""
    chunks, chunks_ms = embedder.timed_embed_documents(sequence)
    if data.mode == "native":
        _, synthesis_ms = embedder.timed_embed_documents(prefixes(sequence)[1:])
    else:
        began = time.perf_counter()
        _syntheses(chunks, [], data, merge)
        synthesis_ms = (time.perf_counter() - began) * 1000.0
    return chunks_ms + synthesis_ms, synthesis_ms


def summarise(results: list[SampleResult], data: RssInput, embedder: Embedder) -> Outcome:
    import numpy as np

    from ragmatrix.stats.metrics import bootstrap_interval

    def mean(values: list[float | None], digits: int = 6) -> float | None:
        present = [v for v in values if v is not None]
        return _round(np.mean(present), digits) if present else None

    scores = [r.rss for r in results]
    low, high = bootstrap_interval(scores)
    by_length: dict[str, dict[str, float | None]] = {}
    for length in data.lengths.values:
        mine = [r for r in results if r.length == length]
        by_length[str(length)] = {
            "rss": mean([r.rss for r in mine]),
            "td": mean([r.td for r in mine]),
            "bu": mean([r.bu for r in mine]),
            "total_ms": mean([r.total_ms for r in mine], 2),
            "synthesis_ms": mean([r.synthesis_ms for r in mine], 2),
        }
    return Outcome(
        score=float(np.mean(scores)),
        rss_ci95=[_round(low), _round(high)],
        formula=data.formula,
        quantiles=data.quantiles,
        mode=data.mode if data.mode == "native" else f"merger:{data.merger}",
        chunking=(
            f"{data.chunk_words} {CHUNKING}"
            if data.sampling == "words"
            else f"{data.chunk_tokens} tokens of the embedder's tokenizer (Finesse {FINESSE_VERSION} sampling)"
        ),
        by_length=by_length,
        samples=[{"length": r.length, "rss": _round(r.rss), "td": _round(r.td), "bu": _round(r.bu)} for r in results],
        latency_ms={
            "total": mean([r.total_ms for r in results], 2),
            "synthesis": mean([r.synthesis_ms for r in results], 2),
            "timed_samples_per_length": data.timed_samples,
        },
        device=embedder.device_label,
        context_limit=embedder.context_limit,
    )


def _round(value: Any, digits: int = 6) -> float:
    return round(float(value), digits)
