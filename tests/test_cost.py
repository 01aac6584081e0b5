"""The cost machinery's parts: histograms that merge, records that combine by counts, the store
and its merge, peak memory, device names, prices, the Pareto front and leaderboard.json's schema."""

from __future__ import annotations

import json
import math
import random
import threading

import pytest

from ragmatrix.cost import device as devices
from ragmatrix.cost.device import Device
from ragmatrix.cost.histogram import GROWTH, LatencyHistogram
from ragmatrix.cost.memory import PeakMemory, high_water_mb, resident_mb
from ragmatrix.cost.meter import Meter, Work, current_meter, current_work, encoding, time_queries
from ragmatrix.cost.price import Price, listed_price, price_of
from ragmatrix.cost.record import CostRecord, combine
from ragmatrix.cost.store import CostStore, merge_costs
from ragmatrix.families import all_families
from ragmatrix.models.spec import ModelSpec
from ragmatrix.report.tradeoff import Point, pareto_front

# --- histograms ---------------------------------------------------------------------------------


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def test_a_histograms_quantiles_are_the_values_own_to_within_its_bucket():
    values = [random.Random(7).lognormvariate(3, 1) for _ in range(2000)]
    histogram = LatencyHistogram.of(values)
    for q in (0.5, 0.95, 0.99):
        assert histogram.quantile(q) == pytest.approx(nearest_rank(values, q), rel=GROWTH)
    assert histogram.count == 2000
    assert len(histogram.counts) < 400  # the spread of the values decides the size, not their number


def test_merged_histograms_give_the_quantiles_of_all_the_values_together():
    rng = random.Random(3)
    first = [rng.uniform(5, 50) for _ in range(300)]
    second = [rng.uniform(100, 400) for _ in range(100)]
    merged = LatencyHistogram.of(first).merge(LatencyHistogram.of(second))
    assert merged.counts == LatencyHistogram.of(first + second).counts  # exact, by counts
    for q in (0.5, 0.95):
        assert merged.quantile(q) == pytest.approx(nearest_rank(first + second, q), rel=GROWTH)


def test_a_histogram_survives_json_and_an_empty_one_has_no_quantile():
    histogram = LatencyHistogram.of([0.0, 0.2, 3.0, 3.0, 1e5])
    assert LatencyHistogram.from_json(json.loads(json.dumps(histogram.to_json()))) == histogram
    assert LatencyHistogram().quantile(0.5) is None
    other_growth = {"growth": 0.05, "counts": {"10": 2}}  # written with other buckets: re-binned
    assert LatencyHistogram.from_json(other_growth).quantile(0.5) == pytest.approx(1.05**10.5, rel=GROWTH)


# --- records and the store ----------------------------------------------------------------------


def record(**fields) -> CostRecord:
    base = {"family": "code_retrieval", "model": "minilm", "device": "cpu: X"}
    return CostRecord(**{**base, **fields})


def test_two_records_combine_by_counts():
    a = record(
        texts=100,
        encode_s=10.0,
        cache_hits=5,
        variants={"line": {"texts": 100, "encode_s": 10.0}},
        query_ms=LatencyHistogram.of([10, 12]).to_json(),
        memory_added_mb=800.0,
        load_average=3.0,
        cpus=2,
        first_measured="2026-01-02T00:00:00+00:00",
        last_measured="2026-01-02T00:00:00+00:00",
        sessions=["a"],
    )
    b = record(
        texts=50,
        encode_s=2.5,
        variants={"line": {"texts": 20, "encode_s": 1.0}, "semantic": {"texts": 30, "encode_s": 1.5}},
        query_ms=LatencyHistogram.of([20]).to_json(),
        memory_added_mb=900.0,
        load_average=1.0,
        cpus=2,
        model_mb=87.0,
        first_measured="2026-01-01T00:00:00+00:00",
        last_measured="2026-01-03T00:00:00+00:00",
        sessions=["b"],
    )
    both = combine(a, b)
    assert (both.texts, both.encode_s, both.cache_hits) == (150, 12.5, 5)
    assert {name: (w.texts, w.encode_s) for name, w in both.variants.items()} == {
        "line": (120, 11.0),
        "semantic": (30, 1.5),
    }
    assert both.queries.count == 3 and both.memory_added_mb == 900.0 and both.model_mb == 87.0
    assert (both.load_average, both.cpus) == (3.0, 2)  # the busier measurement
    assert (both.first_measured, both.last_measured) == ("2026-01-01T00:00:00+00:00", "2026-01-03T00:00:00+00:00")
    assert both.sessions == ["a", "b"]
    assert combine(b, a).to_json() == both.to_json()  # in any order
    with pytest.raises(ValueError, match="cannot combine"):
        combine(a, record(device="remote"))


def test_the_store_appends_deltas_and_compacts_them_into_one_line_per_model_and_device(tmp_path):
    store = CostStore(tmp_path)
    store.append([record(texts=10, encode_s=1.0, sessions=["a"]), record(model="bow", texts=5, sessions=["a"])])
    store.append([record(texts=30, encode_s=2.0, sessions=["b"])])
    with open(store.path("code_retrieval"), "a") as handle:
        handle.write('{"family": "code_retr')  # a writer killed mid-line
    assert not (tmp_path / "code_retrieval.jsonl").exists()  # never where the rows' store reads families
    problems = store.compact("code_retrieval")
    assert problems == ["costs/code_retrieval.jsonl: line 4 is torn or not JSON (ignored)"]
    lines = store.path("code_retrieval").read_text().splitlines()
    assert [(r["model"], r["texts"]) for r in map(json.loads, lines)] == [("bow", 5), ("minilm", 40)]
    assert store.load_all().records[1].sessions == ["a", "b"]


def test_merging_folders_combines_new_measurements_and_never_counts_one_twice(tmp_path):
    base = record(texts=100, encode_s=10.0, sessions=["s1"])
    CostStore(tmp_path / "a").write("code_retrieval", [base])
    CostStore(tmp_path / "b").write("code_retrieval", [base, record(texts=10, encode_s=1.0, sessions=["s2"])])
    CostStore(tmp_path / "c").write("code_retrieval", [record(device="cuda: GPU", texts=1000, encode_s=2.0)])
    merged = merge_costs([tmp_path / "a", tmp_path / "b", tmp_path / "c"], tmp_path / "into")
    assert merged.records == {"code_retrieval": 2} and merged.notes == []
    found = {r.device: r for r in CostStore(tmp_path / "into").load_all().records}
    assert (found["cpu: X"].texts, found["cpu: X"].sessions) == (110, ["s1", "s2"])  # b holds a: once
    assert found["cuda: GPU"].texts == 1000  # another device: kept apart
    # two copies that each went on measuring: combined, and said
    CostStore(tmp_path / "d").write("code_retrieval", [base, record(texts=7, encode_s=1.0, sessions=["s3"])])
    again = merge_costs([tmp_path / "b", tmp_path / "d"], tmp_path / "into2")
    assert CostStore(tmp_path / "into2").load_all().records[0].texts == 217
    assert len(again.notes) == 1 and "share 1 measuring session(s)" in again.notes[0]


def test_ragmatrix_merge_carries_the_cost_records(tmp_path):
    from ragmatrix.results.merge import merge_stores

    for name, texts in (("a", 10), ("b", 20)):
        (tmp_path / name).mkdir()
        CostStore(tmp_path / name).write("rss_probes", [record(family="rss_probes", texts=texts, sessions=[name])])
    report = merge_stores([tmp_path / "a", tmp_path / "b"], tmp_path / "a")
    assert report.costs == {"rss_probes": 1}
    assert CostStore(tmp_path / "a").load_all().records[0].texts == 30


# --- the meter ----------------------------------------------------------------------------------


class Toy:
    """A model as the meter sees it (`ragmatrix.cost.meter.Measured`)."""

    id = "toy"
    kind = "embedder"

    def cost_device(self) -> Device:
        return Device("cpu: X", local=True)

    def __init__(self) -> None:
        self.prepared = 0
        self.encoded: list[list[str]] = []

    def prepare_to_measure(self) -> None:
        self.prepared += 1

    def model_size(self) -> tuple[float | None, int | None]:
        return 12.5, 1000

    def encode(self, texts: list[str]) -> None:
        self.encoded.append(texts)


@pytest.fixture
def metered():
    meter = Meter(None)
    meter_token, work_token = current_meter.set(meter), current_work.set(Work("fam", "line"))
    yield meter
    current_work.reset(work_token)
    current_meter.reset(meter_token)


def test_nothing_is_measured_outside_a_session():
    model = Toy()
    with encoding(model, 3):
        pass
    assert model.prepared == 0  # not even prepared: no meter, no work


def test_the_meter_records_a_models_own_work_per_family_model_and_device(metered):
    model = Toy()
    with encoding(model, 3):
        model.encode(["a", "b", "c"])
    time_queries(model, ["q1", "q1", "q2"], model.encode)
    (found,) = metered.take()
    assert (found.family, found.model, found.device) == ("fam", "toy", "cpu: X")
    assert found.texts == 3 and found.encode_s > 0 and found.variants["line"].texts == 3
    assert found.queries.count >= 1 and model.encoded[1] == ["q1"]  # each query alone, the first at least
    assert found.load_average is not None  # the load the latency was measured under
    assert (found.model_mb, found.parameters, model.prepared) == (12.5, 1000, 1)
    assert found.memory_added_mb is not None and found.memory_added_mb >= 0
    assert found.load_average is not None and found.cpus  # how busy the machine was
    assert metered.take() == []  # taken once; the totals keep it
    assert metered.totals[found.key].texts == 3


def test_queries_timed_alone_take_a_few_per_cent_of_the_real_work_and_at_least_one(metered):
    """32 lone queries after each batch had cost a third of a cold retrieval run: now the time
    they take is held to QUERY_SHARE of the model's own encoding for the family."""
    work = Work("fam")
    metered.encoded(work, "toy", "cpu: X", texts=100, seconds=10.0, peak=PeakMemory())
    timed = 0
    while metered.wants_a_query_timed(work, "toy", "cpu: X"):
        metered.query(work, "toy", "cpu: X", ms=200.0, alone=True)  # 0.2 s each: 2.5 fit in 5 % of 10 s
        timed += 1
    assert timed == 3  # the third starts with 0.4 s spent, under the 0.5 s share
    other = Work("other family")
    assert metered.wants_a_query_timed(other, "toy", "cpu: X")  # nothing spent there: one at least
    metered.query(other, "toy", "cpu: X", ms=1.0, alone=True)
    assert not metered.wants_a_query_timed(other, "toy", "cpu: X")  # no real work there to share
    for _ in range(50):  # queries a retriever scores for real cost nothing extra: all count
        metered.query(work, "toy", "cpu: X", ms=1.0)
    assert {r.family: r.queries.count for r in metered.take()} == {"fam": 53, "other family": 1}


def test_queries_are_timed_only_once_the_model_has_encoded_for_real(metered):
    model = Toy()
    time_queries(model, ["q"], model.encode)  # every text from the cache so far
    assert model.encoded == [] and metered.take() == []


def test_the_meter_flushes_deltas_into_the_results_folder(tmp_path):
    meter = Meter(tmp_path)
    meter.request(Work("rag_interpretation"), "llm", "remote", 200.0, (10, 2))
    meter.flush()  # too soon: kept for later
    assert not (tmp_path / "costs").exists()
    meter.flush(force=True)
    (found,) = CostStore(tmp_path).load("rag_interpretation").records
    assert (found.device, found.requests, found.tokens_in, found.tokens_out) == ("remote", 1, 10, 2)
    assert found.sessions == [meter.session]


# --- memory and devices -------------------------------------------------------------------------


def test_a_peak_reached_during_the_work_is_the_kernels_own_high_water_mark():
    mark, now = high_water_mb(), resident_mb()
    if mark is None or now is None:
        pytest.skip("no /proc here")
    # 300 MB more than the process ever held before, whatever the tests before this one loaded
    size = int(max(0.0, mark - now) + 300) * 2**20
    with PeakMemory() as peak:
        block = bytearray(size)
        block[::4096] = b"x" * len(block[::4096])  # touched, so resident
        reached = high_water_mb()
        del block
    # the kernel's own mark, to within its lazily summed page counters
    assert reached is not None and peak.rss_mb == pytest.approx(reached, abs=2)


def test_a_peak_below_the_old_high_water_mark_is_the_largest_sample():
    if high_water_mb() is None:
        pytest.skip("no /proc here")
    before = high_water_mb()
    with PeakMemory() as peak:
        threading.Event().wait(0.1)
    assert peak.rss_mb is not None and 0 < peak.rss_mb <= before + 1


def test_memory_is_what_the_work_added_not_what_the_process_held_before():
    if high_water_mb() is None:
        pytest.skip("no /proc here")
    held = bytearray(300 * 2**20)  # another model's weights, say: held before the work and during it
    held[::4096] = b"x" * len(held[::4096])
    with PeakMemory() as small:
        threading.Event().wait(0.05)  # a lexical baseline's small work
    with PeakMemory() as large:
        block = bytearray(200 * 2**20)
        block[::4096] = b"x" * len(block[::4096])
        del block
    del held
    assert small.added_mb is not None and small.added_mb < 50  # not the 300 MB the process held
    assert small.rss_mb is not None and small.rss_mb > 300  # which the process's peak counts
    assert large.added_mb is not None and 190 < large.added_mb < 260


def test_devices_are_named_with_their_hardware():
    assert devices.describe("cpu") == f"cpu: {devices.cpu_model()}" and devices.cpu_model()
    assert devices.describe("remote") == "remote" and not devices.is_local("remote")
    assert devices.expected("cpu") == devices.describe("cpu")


# --- prices -------------------------------------------------------------------------------------


def llm(**fields) -> ModelSpec:
    return ModelSpec(**{"id": "m", "kind": "llm", "litellm": "openai/gpt-4o-mini", **fields})


def test_a_price_in_models_yaml_wins_over_the_litellm_cost_map():
    listed = listed_price("openai/gpt-4o-mini")
    assert listed is not None and listed.input_per_million > 0  # read from litellm's bundled file
    assert price_of(llm()) == (listed, "litellm cost map")
    own = Price(input_per_million=1.0, output_per_million=2.0)
    assert price_of(llm(price={"input_per_million": 1.0, "output_per_million": 2.0})) == (own, "models.yaml")
    assert own.usd(10, 2) == pytest.approx(14e-6)


def test_a_model_with_no_known_price_has_none_not_zero():
    assert price_of(llm(litellm="openai/some-local-model")) == (None, "unknown")
    # a server of one's own has no list price, whatever the model is called
    assert price_of(llm(api_base="http://127.0.0.1:1/v1")) == (None, "unknown")


def test_a_price_changes_no_result_key_and_goes_with_llms_only():
    assert llm(price={"input_per_million": 1, "output_per_million": 2}).output_fingerprint() == (
        llm().output_fingerprint()
    )
    with pytest.raises(ValueError, match="price goes with an llm"):
        ModelSpec(id="e", kind="embedder", builtin="bow", price={"input_per_million": 1, "output_per_million": 2})


def test_litellm_is_not_imported_to_read_its_prices(tmp_path):
    import subprocess
    import sys

    script = (
        "import sys\nfrom ragmatrix.cost.price import listed_price\n"
        "print(listed_price('openai/gpt-4o-mini') is not None, 'litellm' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False"]


# --- the Pareto front ---------------------------------------------------------------------------


def test_the_pareto_front_keeps_the_models_no_other_beats_on_both_axes():
    points = [
        Point("fast-poor", cost=1000.0, quality=0.5),
        Point("slow-good", cost=10.0, quality=0.9),
        Point("balanced", cost=100.0, quality=0.8),
        Point("dominated", cost=50.0, quality=0.7),  # balanced is faster and better
        Point("twin", cost=100.0, quality=0.8),  # equal to balanced: neither beats the other
    ]
    front = pareto_front(points, quality_higher=True, cost_higher=True)  # a speed: higher is better
    assert [p.model for p in front] == ["slow-good", "balanced", "twin", "fast-poor"]
    priced = [Point("cheap", 0.1, 0.6), Point("dear", 5.0, 0.9), Point("dear-worse", 6.0, 0.85)]
    assert [p.model for p in pareto_front(priced, quality_higher=True, cost_higher=False)] == ["cheap", "dear"]
    # a score where lower is better
    assert [p.model for p in pareto_front(priced, quality_higher=False, cost_higher=False)] == ["cheap"]


# --- the report's sections ----------------------------------------------------------------------


def stored_row(family: str, model: str, item: str, score: float, **details) -> dict:
    case, _, variant = item.partition(":")
    return {
        "family": family,
        "test": f"test_{family}",
        "model": model,
        "case": case,
        "variant": variant,
        "item": item,
        "key": f"{model}-{item}",
        "scoring_version": 1,
        "status": "ok",
        "score": score,
        "iterations": [{"score": score, "valid": True, **details}],
    }


def table_of(family: str, rows: list[dict]):
    from ragmatrix.report.aggregate import aggregate
    from ragmatrix.results.rows import Row

    (table,) = aggregate({family: [Row.model_validate(r) for r in rows]}, all_families()).families
    return table


def test_the_rss_section_shows_finesses_latencies_under_finesses_names():
    from ragmatrix.families.rss.report import section
    from ragmatrix.seam.blocks import Table

    details = {"mode": "native", "by_length": {"4": {"rss": 300.0}}, "device": "cpu: X"}
    details["latency_ms"] = {"total": 12.345, "synthesis": 4.5, "timed_samples_per_length": 2}
    table = table_of("rss_probes", [stored_row("rss_probes", "minilm", "docs:native", 300.0, **details)])
    (found,) = [block for block in section(table, []) if isinstance(block, Table)]
    assert found.header[-3:] == ["total_latency ms", "synthesis_latency ms", "device"]
    assert found.rows[0][-3:] == ["12.3", "4.5", "cpu: X"]


def test_the_code_retrieval_section_is_the_rust_tools_table_with_embeddings_per_second():
    from ragmatrix.families.code_retrieval.report import speed_table
    from ragmatrix.report.cost import family_costs
    from ragmatrix.seam.blocks import Table

    rows = []
    for chunking, score in (("line", 0.5), ("semantic", 1.0)):
        metrics = {"ndcg_at_10": score, "mrr_at_10": score, "recall_at_10": 1.0, "precision_at_1": score}
        rows.append(stored_row("code_retrieval", "minilm", f"q1:{chunking}", score, metrics=metrics))
    table = table_of("code_retrieval", rows)
    variants = {"line": {"texts": 100, "encode_s": 10.0}, "semantic": {"texts": 50, "encode_s": 2.0}}
    measured = record(texts=150, encode_s=12.0, variants=variants, memory_added_mb=900.0)
    costs = family_costs(table, [measured])
    blocks = speed_table(table, costs)
    (found,) = [block for block in blocks if isinstance(block, Table)]
    assert found.header[:7] == ["model", "chunking", "items", "file nDCG@10", "MRR@10", "Recall@10", "P@1"]
    assert found.header[-2:] == ["emb/s", "device"]
    assert [row[:4] + row[-2:] for row in found.rows] == [
        ["minilm", "line", "1", "0.500", "10.0", "cpu: X"],
        ["minilm", "semantic", "1", "1.000", "25.0", "cpu: X"],
    ]
    main = costs.of("minilm").main
    assert main is not None and main.embeddings_per_s == 12.5 and main.memory_added_mb == 900.0


def test_a_cost_file_that_cannot_be_read_is_one_problem_and_never_written_over(tmp_path):
    store = CostStore(tmp_path)
    (tmp_path / "costs" / "code_retrieval.jsonl").mkdir(parents=True)  # unreadable as a file, for root too
    problem = "costs/code_retrieval.jsonl: cannot read it (not a regular file (a folder); ignored)"
    assert store.load_all().problems == [problem]
    assert store.compact_all() == [problem]
    assert (tmp_path / "costs" / "code_retrieval.jsonl").is_dir()


def test_a_remote_devices_server_description_is_kept_from_the_latest_record_and_shown_escaped():
    from ragmatrix.cost.figures import device_figures
    from ragmatrix.report.cost import describe_server

    old = record(device="remote: 10.0.0.7", requests=1, last_measured="2026-01-01T00:00:00+00:00")
    old.server = {"server": "10.0.0.7:9997", "model": "m-1", "engine": "vllm"}
    new = record(device="remote: 10.0.0.7", requests=1, last_measured="2026-02-01T00:00:00+00:00")
    new.server = {"server": "10.0.0.7:9997", "model": "m-2\x1b[31m", "engine": "vllm"}
    # Both are one device: the records combine, and the latest description is kept.
    for a, b in ((old, new), (new, old)):
        combined = combine(a, b)
        assert combined.requests == 2 and combined.server["model"] == "m-2\x1b[31m"
    assert CostRecord(**json.loads(json.dumps(combined.to_json()))).server == new.server
    assert "server" not in record().to_json()  # a local model's record has none
    shown = describe_server(device_figures(combined).server)
    assert shown == "server 10.0.0.7:9997, model m-2\\x1b[31m, engine vllm"
