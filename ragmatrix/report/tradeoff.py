"""`tradeoff_<family>.png`: each model's quality (with its interval) against what it costs.

One panel per kind of cost the family's models have: embeddings per second (embedders and
retrievers, higher is better), p50 latency of one query (embedders, retrievers, rerankers and
two-stage systems through both stages), price in dollars and p50 latency of a request (LLMs),
each lower is better. The
Pareto front is marked: the models that no other model beats on both quality and that cost.
When the speeds come from different devices, the panel says so: a GPU's speed against a
laptop's is no comparison of models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragmatrix.cost.device import is_local
from ragmatrix.cost.figures import FamilyCosts, ModelCost
from ragmatrix.seam.drawing import Colour, pyplot, save, short_label
from ragmatrix.seam.tables import FamilyTable

PATTERN = "tradeoff_*.png"


@dataclass(frozen=True)
class Point:
    model: str
    cost: float
    quality: float
    low: float | None = None
    high: float | None = None
    device: str | None = None


def pareto_front(points: Sequence[Point], quality_higher: bool = True, cost_higher: bool = False) -> list[Point]:
    """The points no other point dominates: at least as good on both axes and better on one.
    `quality_higher` / `cost_higher` say which direction is better on each axis (a speed is
    better higher, a price or a latency lower). Sorted by cost, best quality first on a tie."""

    def at_least(a: Point, b: Point) -> bool:  # a is at least as good as b on both axes
        quality = a.quality >= b.quality if quality_higher else a.quality <= b.quality
        cost = a.cost >= b.cost if cost_higher else a.cost <= b.cost
        return quality and cost

    front = [
        p for p in points if not any(at_least(q, p) and (q.quality, q.cost) != (p.quality, p.cost) for q in points)
    ]
    return sorted(front, key=lambda p: (p.cost, -p.quality if quality_higher else p.quality))


@dataclass(frozen=True)
class Axis:
    label: str
    higher_is_better: bool
    value: Callable[[ModelCost], float | None]
    log: bool = False


AXES = (
    # a two-stage system's texts per second are its reranker's documents: no embedding speed
    Axis(
        "embeddings per second (log)",
        True,
        lambda c: c.main.embeddings_per_s if c.main and not c.stages else None,
        log=True,
    ),
    Axis(
        "p50 latency of one query, ms (log)",
        False,
        lambda c: (
            c.main.latency_ms[0]
            if c.main and c.main.latency_ms and (c.main.latency_of or "").startswith("query")
            else None
        ),
        log=True,
    ),
    Axis("price of the family's items, US$", False, lambda c: c.usd),
    Axis(  # an LLM's: a model that reads tokens
        "p50 latency per request, ms",
        False,
        lambda c: c.main.latency_ms[0] if c.tokens is not None and c.main and c.main.latency_ms else None,
    ),
)


def panels(table: FamilyTable, costs: FamilyCosts) -> list[tuple[Axis, list[Point]]]:
    """The axes some model of the table has a figure for, each with its points."""
    found = []
    for axis in AXES:
        points = []
        for line in table.lines:
            cost = costs.of(line.model)
            value = axis.value(cost)
            if value is None or line.mean is None or (axis.log and value <= 0):
                continue
            device = cost.main.device if cost.main else None
            points.append(Point(line.model, float(value), float(line.mean), line.low, line.high, device))
        if points:
            found.append((axis, points))
    return found


def draw(path: Path, table: FamilyTable, costs: FamilyCosts, palette: dict[str, Colour]) -> Path | None:
    """The family's trade-off plot, or None when no model has a cost figure and a score."""
    found = panels(table, costs)
    if not found:
        return None
    plt = pyplot()
    figure, grid = plt.subplots(1, len(found), figsize=(5.2 * len(found), 4.0), squeeze=False)
    higher = table.headline.higher_is_better
    for axes, (axis, points) in zip(grid[0], found, strict=True):
        front = pareto_front(points, quality_higher=higher, cost_higher=axis.higher_is_better)
        for point in points:
            below = point.quality - point.low if point.low is not None else 0.0
            above = point.high - point.quality if point.high is not None else 0.0
            on_front = point in front
            axes.errorbar(
                [point.cost],
                [point.quality],
                yerr=[[below], [above]],
                fmt="o",
                color=palette.get(point.model, "grey"),
                markersize=8 if on_front else 6,
                markeredgecolor="black" if on_front else "none",
                capsize=3,
                linewidth=1,
            )
            where = (point.cost, point.quality)
            axes.annotate(short_label(point.model), where, textcoords="offset points", xytext=(6, 4), fontsize=8)
        if len(front) > 1:
            axes.plot([p.cost for p in front], [p.quality for p in front], "--", color="black", linewidth=0.8)
        if axis.log:
            axes.set_xscale("log")
        axes.set_xlabel(axis.label + (" (higher is better)" if axis.higher_is_better else " (lower is better)"))
        axes.set_ylabel(f"{table.headline.metric}, 95% CI")
        devices = sorted({p.device for p in points if p.device and is_local(p.device)})
        title = "Pareto front: black-edged points, dashed line"
        if len(devices) > 1:
            title += "\ndevices differ: " + "; ".join(devices)
        elif devices:
            title += f"\nmeasured on {devices[0]}"
        axes.set_title(title, fontsize=8)
        axes.grid(alpha=0.3)
    figure.suptitle(f"{table.family}: quality against cost", fontsize=10)
    figure.tight_layout()
    return save(figure, path)
