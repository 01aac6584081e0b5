"""Quality against cost: each model's cost figures beside its score, for the terminal and the report.

Speed, latency and memory come from the cost records (`ragmatrix.cost`), measured when the work
was done, per device; a model with records on several devices shows the device with the most
measured work first, and the others beside it. Tokens come from the rows that count in the
family's table: the tokens the servers reported (or that were counted where they reported
none), the evaluator's share left out. They are priced at the price the model's cost records
keep, the one the run priced them at (models.yaml or litellm's local cost map when the work was
measured, `ragmatrix.cost.price`); records that keep none (older ones) are priced by models.yaml
as it is now, and a models file given on purpose re-prices everything; each says which. A
figure that does not apply, or was never measured, is None: never a 0 that could pass for a
measurement.

Nothing heavy is imported here: the terminal summary of a cached run uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ragmatrix.cost.figures import NOT_MEASURED, DeviceFigures, FamilyCosts, ModelCost, device_figures
from ragmatrix.cost.load import busy_note
from ragmatrix.cost.price import Price, SearchPrice, dollars, spec_price
from ragmatrix.cost.record import CostRecord, latest_price
from ragmatrix.foundations.untrusted import safe_text
from ragmatrix.report.stages import compose
from ragmatrix.seam.blocks import Block, Heading, Image, Paragraph, Table
from ragmatrix.seam.tables import FamilyTable, Tables

if TYPE_CHECKING:
    from ragmatrix.models.spec import ModelSpec
    from ragmatrix.results.rows import Row

# A family's cost section: its blocks beside the cost figures (`Family.cost_sections`).
CostSection = Callable[[FamilyTable, FamilyCosts], list[Block]]


def token_totals(rows: Iterable[Row]) -> tuple[int, int, int, int]:
    """Calls, input tokens, output tokens and counted calls of rows, the evaluator's share out."""
    calls = tokens_in = tokens_out = counted = 0
    for row in rows:
        usage = row.usage
        calls += int(usage.get("calls", 0)) - int(usage.get("evaluator_calls", 0))
        tokens_in += int(usage.get("prompt_tokens", 0)) - int(usage.get("evaluator_prompt_tokens", 0))
        tokens_out += int(usage.get("completion_tokens", 0)) - int(usage.get("evaluator_completion_tokens", 0))
        counted += int(usage.get("tokens_counted", 0))
    return calls, tokens_in, tokens_out, counted


def searches(rows: Iterable[Row]) -> int:
    """The searches a rerank API billed for rows."""
    return sum(int(row.usage.get("search_units", 0)) for row in rows)


AS_MEASURED = "as measured"
READ_NOW = "read now"
REPRICED = "re-priced"


def family_costs(
    table: FamilyTable,
    records: Sequence[CostRecord],
    specs: Mapping[str, ModelSpec] | None = None,
    reprice: bool = False,
) -> FamilyCosts:
    """The cost figures of every model in a family's table. Tokens are priced at the price the
    model's records keep; with `reprice`, or where no record keeps one, by its entry in `specs`."""
    specs = specs or {}
    costs = FamilyCosts(table.family)
    mine = [record for record in records if record.family == table.family]
    rows_by_model: dict[str, list[Row]] = {}
    for row in table.rows:
        rows_by_model.setdefault(row.model, []).append(row)
    for line in table.lines:
        cost = ModelCost(line.model)
        found = sorted(
            (device_figures(record) for record in mine if record.model == line.model),
            key=lambda figures: (-figures.work, figures.device),
        )
        cost.devices = found
        spec = specs.get(line.model)
        calls, tokens_in, tokens_out, counted = token_totals(rows_by_model.get(line.model, []))
        if calls > 0 or (spec is not None and spec.kind in ("llm", "ensemble")):
            cost.tokens, cost.tokens_counted = (tokens_in, tokens_out), counted
            price, source, differ = latest_price(r for r in mine if r.model == line.model)
            if source is not None and not reprice:  # the price the run priced them at
                cost.price, cost.price_source, cost.prices_differ = price, source, differ
                cost.pricing = AS_MEASURED
            elif spec is not None:
                cost.price, cost.price_source = spec_price(spec)
                cost.pricing = REPRICED if reprice else READ_NOW
            if isinstance(cost.price, Price):
                cost.usd = round(cost.price.usd(tokens_in, tokens_out), 8)
            elif isinstance(cost.price, SearchPrice):  # a rerank API billed by searches
                cost.usd = round(cost.price.usd(searches(rows_by_model.get(line.model, []))), 8)
        if not found and cost.tokens is None:
            cost.note = NOT_MEASURED
        elif cost.main is not None:
            cost.note = cost.main.note
        costs.models[line.model] = cost
        main = cost.main
        if main is not None:
            for record in mine:
                if record.model == line.model and record.device == main.device:
                    for variant, work in record.variants.items():
                        if work.texts and work.encode_s > 0:
                            costs.by_variant[(line.model, variant)] = round(work.texts / work.encode_s, 2)
    compose(costs, mine, specs)  # a two-stage system: both stages
    return costs


def all_costs(
    tables: Tables, records: Sequence[CostRecord], specs: Mapping[str, ModelSpec] | None = None, reprice: bool = False
) -> dict[str, FamilyCosts]:
    return {table.family: family_costs(table, records, specs, reprice) for table in tables.families}


def load_costs(
    tables: Tables, results_dir: Path, models_file: Path | None, reprice: bool = False, remember: bool = False
) -> tuple[dict[str, FamilyCosts], list[str]]:
    """The cost figures of a results folder's tables, priced as the runs priced them (a
    models.yaml, where there is one, prices what no record keeps a price for; with `reprice`,
    it prices everything); and the problems found reading them. `remember`: a run's summary
    reads models.yaml as the run did (`load_models`)."""
    from ragmatrix.cost.store import CostStore

    loaded = CostStore(results_dir).load_all()
    problems = list(loaded.problems)
    specs: dict[str, ModelSpec] = {}
    if models_file is not None and models_file.is_file():
        from ragmatrix.models.models_file import ModelsFileError, load_models

        try:
            specs = {spec.id: spec for spec in load_models(models_file, remember=remember)}
        except ModelsFileError as error:
            problems.append(f"no prices: {error}")
    return all_costs(tables, loaded.records, specs, reprice and bool(specs)), problems


# --- the terminal ------------------------------------------------------------------------------


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


COLUMNS: tuple[tuple[str, Callable[[ModelCost], str]], ...] = (
    ("texts/s", lambda c: _number(c.main.embeddings_per_s) if c.main else "-"),
    ("added MB", lambda c: _number(c.main.memory_added_mb, 0) if c.main else "-"),
    ("p50 ms", lambda c: _number(c.main.latency_ms[0]) if c.main and c.main.latency_ms else "-"),
    ("tokens in/out", lambda c: f"{c.tokens[0]:,}/{c.tokens[1]:,}" if c.tokens else "-"),
    ("USD", lambda c: dollars(c.usd)),
    ("device", lambda c: c.main.device if c.main else "-"),
)


def terminal_columns(costs: FamilyCosts | None, models: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """The cost columns a family's terminal table shows (only those some model has a figure
    for) and each model's cells."""
    if costs is None:
        return [], {model: [] for model in models}
    cells = {model: [render(costs.of(model)) for _, render in COLUMNS] for model in models}
    shown = [i for i in range(len(COLUMNS)) if any(cells[model][i] != "-" for model in models)]
    if shown == [len(COLUMNS) - 1]:
        shown = []  # a device alone says nothing
    return [COLUMNS[i][0] for i in shown], {model: [cells[model][i] for i in shown] for model in models}


def busy_models(costs: FamilyCosts) -> list[str]:
    """Each model whose figures on its main device were measured on a busy machine, with how busy."""
    return [
        f"{model} ({busy_note(cost.main.load_average, cost.main.cpus)})"
        for model, cost in sorted(costs.models.items())
        if cost.main is not None and cost.main.busy
    ]


def older_memory(costs: FamilyCosts) -> dict[str, float]:
    """The models whose records predate what a model's work added to memory: the process's peak
    they keep instead, which counts whatever else the process held."""
    return {
        model: cost.main.process_peak_mb
        for model, cost in sorted(costs.models.items())
        if cost.main is not None and cost.main.memory_added_mb is None and cost.main.process_peak_mb is not None
    }


def pricing_notes(costs: FamilyCosts, repriced: bool = True) -> list[str]:
    """What the prices rest on, where it is not simply the price each run priced its tokens at;
    without the re-priced models when not `repriced` (the report says that once)."""
    notes = []
    for model, cost in sorted(costs.models.items()):
        if cost.pricing == READ_NOW and cost.price is not None:
            notes.append(f"{model}: priced from {cost.price_source} as it is now (its cost records keep no price)")
        elif cost.pricing == REPRICED and repriced:
            notes.append(f"{model}: re-priced from the models file given ({cost.price_source})")
        if cost.prices_differ:
            notes.append(f"{model}: its runs were priced differently; the latest price is used")
    return notes


def terminal_notes(costs: FamilyCosts | None) -> list[str]:
    """Lines under a family's table: when the figures were measured, on how busy a machine, where
    devices differ, and what the prices rest on."""
    if costs is None:
        return []
    dates = [
        d for cost in costs.models.values() for f in cost.devices for d in (f.first_measured, f.last_measured) if d
    ]
    notes = []
    if dates:
        notes.append(
            f"cost: measured {min(dates)[:10]} to {max(dates)[:10]}, kept per device (never from a cache read)"
        )
    if len(costs.devices) > 1:
        notes.append(f"cost: devices differ ({'; '.join(costs.devices)}): compare speeds only on one device")
    busy = busy_models(costs)
    if busy:
        notes.append(f"cost: measured on a busy machine, speeds and latencies read slow: {', '.join(busy)}")
    older = older_memory(costs)
    if older:
        notes.append(
            f"cost: no memory added for {', '.join(older)}: older records keep only the process's peak, "
            "which counts every model the process held"
        )
    for model, cost in sorted(costs.models.items()):
        if cost.main is not None and cost.main.note:
            notes.append(f"cost: {model}: {cost.main.note}")
    notes += [f"cost: {note}" for note in pricing_notes(costs)]
    return notes


# --- the report --------------------------------------------------------------------------------


def _latency(figures: DeviceFigures | None) -> str:
    if figures is None or figures.latency_ms is None:
        return "-"
    p50, p95 = figures.latency_ms
    return f"{p50:,.1f} / {p95:,.1f} ({figures.latency_of})"


def _size(figures: DeviceFigures | None) -> str:
    if figures is None or (figures.model_size_mb is None and figures.parameters is None):
        return "-"
    parts = []
    if figures.model_size_mb is not None:
        parts.append(f"{figures.model_size_mb:,.0f} MB")
    if figures.parameters is not None:
        parts.append(f"{figures.parameters / 1e6:,.1f}M parameters")
    return ", ".join(parts)


def _price(cost: ModelCost) -> str:
    if cost.price is None:
        return "-" if cost.tokens is None else f"none ({cost.price_source})"
    source = cost.price_source if cost.pricing in (None, AS_MEASURED) else f"{cost.pricing}: {cost.price_source}"
    if isinstance(cost.price, SearchPrice):
        return f"${cost.price.per_thousand_searches:g} per 1,000 searches ({source})"
    return f"${cost.price.input_per_million:g} / ${cost.price.output_per_million:g} ({source})"


def _measured(figures: DeviceFigures | None) -> str:
    if figures is None or not figures.last_measured:
        return "-"
    first, last = (figures.first_measured or figures.last_measured)[:10], figures.last_measured[:10]
    return last if first == last else f"{first} to {last}"


def describe_server(details: Mapping[str, str]) -> str:
    """What a server told of itself, in one phrase: `server 10.0.0.7:9997, model m, engine e`
    (its control characters escaped: a server wrote it)."""
    return safe_text(", ".join(f"{name} {value}" for name, value in details.items()))


REPORT_COLUMNS: tuple[tuple[str, Callable[[ModelCost, DeviceFigures | None], str]], ...] = (
    ("device", lambda c, f: f.device if f else "-"),
    ("texts/s", lambda c, f: _number(f.embeddings_per_s) if f else "-"),
    ("latency p50 / p95 ms", lambda c, f: _latency(f)),
    ("memory added MB", lambda c, f: _number(f.memory_added_mb, 0) if f else "-"),
    ("GPU peak MB", lambda c, f: _number(f.gpu_peak_mb, 0) if f else "-"),
    ("model", lambda c, f: _size(f)),
    ("tokens in / out", lambda c, f: f"{c.tokens[0]:,} / {c.tokens[1]:,}" if c.tokens else "-"),
    ("$ per M in / out", lambda c, f: _price(c)),
    ("USD", lambda c, f: dollars(c.usd)),
    ("measured", lambda c, f: _measured(f)),
)

READING = (
    "Measured when the work was done, never from a cache read, and kept per device: **texts/s** is "
    "texts per second of the model's own encode calls (index builds, queries; a reranker's documents "
    "scored), **latency** one query embedded alone after warm-up or reranked (query), through both "
    "stages of a two-stage system (query, both stages), or one request from send to the full answer "
    "(request), **memory added** how far the process's resident memory rose above what it held when "
    "the model's work began (what its work added, not what the process held), **GPU peak** the most "
    "GPU memory torch's allocator held while it worked. Tokens and dollars are those of the rows in "
    "the table above (an evaluator's share left out), priced at the price the run priced them at "
    "(models.yaml or litellm's cost map when the work was measured); `-` is a figure that does not "
    "apply or was never measured, never a zero."
)


def report_blocks(
    table: FamilyTable, costs: FamilyCosts | None, image: str | None, sections: Sequence[CostSection] = ()
) -> list[Block]:
    """The family's cost section: its models' figures beside their means, the trade-off plot,
    the figures of every device where a model ran on several, and the family's own cost
    `sections` (`Family.cost_sections`)."""
    if costs is None:
        return []
    digits = table.headline.digits
    lines = [line for line in table.lines]
    cells = {
        line.model: [render(costs.of(line.model), costs.of(line.model).main) for _, render in REPORT_COLUMNS]
        for line in lines
    }
    shown = [i for i in range(1, len(REPORT_COLUMNS)) if any(cells[m][i] != "-" for m in cells)]
    if not shown:
        return []
    shown = [0, *shown]
    header = ["model", "mean", *[REPORT_COLUMNS[i][0] for i in shown]]
    rows = [
        [line.model, "-" if line.mean is None else f"{line.mean:.{digits}f}", *[cells[line.model][i] for i in shown]]
        for line in lines
    ]
    blocks: list[Block] = [Heading(3, f"{table.family}: quality against cost"), Paragraph(READING)]
    if len(costs.devices) > 1:
        blocks.append(
            Paragraph(
                f"The speeds come from different devices ({'; '.join(costs.devices)}): compare them only within one."
            )
        )
    blocks.append(Table(header, rows, numeric={1, *(2 + k for k, i in enumerate(shown) if 1 <= i <= 4)}))
    busy = busy_models(costs)
    if busy:
        blocks.append(
            Paragraph(
                "Measured on a busy machine (a load average above its CPUs): the speeds and latencies of "
                f"{', '.join(busy)} read the contention as much as the model."
            )
        )
    older = older_memory(costs)
    if older:
        peaks = ", ".join(f"{model} {peak:,.0f} MB" for model, peak in older.items())
        blocks.append(
            Paragraph(
                "Older cost records keep only the process's peak memory while the model worked, which "
                f"counts every model the process held, not what this one's work added ({peaks}): their "
                "memory added is `-` until their work is measured again."
            )
        )
    if any(cost.pricing == REPRICED for cost in costs.models.values()):
        blocks.append(
            Paragraph(
                "**Re-priced**: the dollars use the prices of the models file given to the report "
                "(`--models-file`), not the prices the runs priced their tokens at."
            )
        )
    notes = [f"{model}: {cost.note}" for model, cost in sorted(costs.models.items()) if cost.note]
    notes += pricing_notes(costs, repriced=False)
    if notes:
        blocks.append(Paragraph("Notes: " + "; ".join(notes) + "."))
    several = {model: cost for model, cost in costs.models.items() if len(cost.devices) > 1}
    if several:
        device_rows = [
            [model, *[render(cost, figures) for _, render in REPORT_COLUMNS[:6]], _measured(figures)]
            for model, cost in sorted(several.items())
            for figures in cost.devices
        ]
        header = ["model", *[name for name, _ in REPORT_COLUMNS[:6]], "measured"]
        blocks += [Paragraph("Models measured on several devices, each device apart:"), Table(header, device_rows)]
    served = [
        f"`{model}` on {figures.device}: {describe_server(figures.server)}"
        for model, cost in sorted(costs.models.items())
        for figures in cost.devices
        if figures.server
    ]
    if served:
        blocks.append(Paragraph("Servers, as they described themselves: " + "; ".join(served) + "."))
    if image is not None:
        blocks.append(Image(image, f"{table.family}: quality against cost, the Pareto front marked"))
    for section in sections:
        blocks += section(table, costs)
    return blocks
