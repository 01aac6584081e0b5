"""Sends the first-round model requests of the run's benchmark items ahead of the items.

Each test function asks its model one question at a time, and pytest runs one item after
another, so left alone a model would see one request in flight. Instead, when the first
benchmark item of this process is about to run, the scheduler collects the first-round
requests of every item this process will run (a family states them with
`Family.first_requests`, a pure function of the case and the model, which its test asks
through the same function), for every iteration, and sends them all, each model up to its own
concurrency. An embedder's texts (`Family.first_texts`) are embedded the same way, in one
batch across a window's items (at most `EMBED_AHEAD` texts, so that the rows held ahead stay
bounded). The items then find their answers waiting (`ChatModel.achat` takes a request sent
ahead instead of asking again); follow-up rounds, such as zELO's re-ask of a malformed answer,
are asked inside the item. After each item, the answers sent ahead for it that it never took
are counted (`after`): a family whose test asks other requests than it declares pays for each
twice, and the terminal's usage line says so.

Which items are this process's:
- without xdist: the items selected (after `-k`, `--models`, cached skips), in windows of
  about `--send-ahead` requests (default 256): a window is sent when its first item is about to
  run, and its items run once its answers are in, so rows are written window by window and a
  killed run loses at most one window;
- on an xdist worker: the items xdist has handed this worker and not run yet, looked at as
  each item starts, so that a worker sends only its own items, batch by batch as they come.

Errors are stored with the request and raised to the item that consumes it, which records
an error row; nothing failed is cached.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from ragmatrix import cost
from ragmatrix.models import aio
from ragmatrix.models.client import ModelError
from ragmatrix.models.protocols import Embedder, JudgeEnsemble, Messages, Model, PrefetchingChatModel
from ragmatrix.plugin.pytest_internals import capture_suspender, worker_queue
from ragmatrix.plugin.runner import plan_for
from ragmatrix.plugin.session import BenchmarkState, ItemPlan
from ragmatrix.seam.case import CaseInputError

SCHEDULER_KEY = pytest.StashKey["Scheduler"]()
# The most texts an embedder embeds ahead of the items in one window: plenty for its batches,
# and a bag-of-words row is 16 KB, so the rows of a 50,000-item run must not be held at once.
EMBED_AHEAD = 1024

# (model, messages, sample) and, when known, the family the request is for (its cost figures').
Request = tuple[PrefetchingChatModel, Messages, int] | tuple[PrefetchingChatModel, Messages, int, str]


@dataclass
class Scheduler:
    state: BenchmarkState
    config: pytest.Config
    scheduled_items: set[str] = field(default_factory=set)
    requests_sent: int = 0
    # Each scheduled item's requests sent ahead, until the item has run (see `after`).
    ahead: dict[str, list[Request]] = field(default_factory=dict)

    @property
    def on_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def before(self, item: pytest.Item, plan: ItemPlan) -> None:
        """Called as each benchmark item is about to run: sends ahead what is not sent yet."""
        if item.nodeid in self.scheduled_items:
            return
        if self.on_worker:
            # The items xdist has handed this worker so far; more may come later.
            following = worker_queue(self.config, item.session) or []
        else:
            items = item.session.items
            following = items[items.index(item) + 1 :] if item in items else []
        texts: list[tuple[ItemPlan, list[str], list[str]]] = []
        requests: list[Request] = []
        counted = 0
        # This item, then the ones after it, until the window is full: the answers of a window
        # are awaited before its items run, so a window is also what a killed run loses. An
        # embedder's texts fill a window too, so that the rows held ahead stay bounded.
        for candidate in [item, *following]:
            if candidate.nodeid in self.scheduled_items:
                continue
            self.scheduled_items.add(candidate.nodeid)
            for _, plan in self._plans([candidate]):
                mine = list(self._requests([plan]))
                if mine:
                    self.ahead[candidate.nodeid] = mine
                requests += mine
                declared = self._texts(plan)
                if declared is not None:
                    texts.append((plan, *declared))
                    counted += len(declared[0]) + len(declared[1])
            if len(requests) >= self.state.send_ahead or counted >= EMBED_AHEAD:
                break
        if requests:
            self._send(requests)
        self._embed_ahead(texts)

    def after(self, item: pytest.Item) -> None:
        """Called once an item has run: counts the answers sent ahead for it that it never took
        (in its usage, as `answers_unused`)."""
        sent = self.ahead.pop(item.nodeid, [])
        unused = sum(model.left_unused(messages, sample) for model, messages, sample, *_ in sent)
        if unused:  # summed into the session's usage like the runner's, from any xdist worker
            item.user_properties.append(("ragmatrix_usage", {"answers_unused": unused}))

    def _plans(self, items: list[pytest.Item]) -> Iterator[tuple[pytest.Item, ItemPlan]]:
        for item in items:
            if item.get_closest_marker("skip") is not None:
                continue  # cached
            plan = plan_for(item, self.state)
            if plan is not None:
                yield item, plan

    def _requests(self, plans: list[ItemPlan]) -> Iterator[Request]:
        for plan in plans:
            first = plan.family.first_requests
            if first is None or plan.model.kind not in ("llm", "ensemble"):
                continue
            model = self._model(plan)
            models = self._chat_models(model)
            if model is None or not models:
                continue
            try:
                conversations = first(plan.case, model)
            except (CaseInputError, ValueError, KeyError, TypeError):
                continue  # the item itself records what is wrong with the case
            for sample in range(self.state.iterations):
                for messages in conversations:
                    for model in models:
                        yield model, messages, sample, plan.family.name

    def _texts(self, plan: ItemPlan) -> tuple[list[str], list[str]] | None:
        """The (queries, documents) an embedder's item declares, or None."""
        first = plan.family.first_texts
        if first is None or plan.model.kind != "embedder":
            return None
        model = self._model(plan)
        if model is None:
            return None
        try:
            return first(plan.case, model)
        except (CaseInputError, ValueError, KeyError, TypeError):
            return None  # the item itself records what is wrong with the case

    def _embed_ahead(self, declared: list[tuple[ItemPlan, list[str], list[str]]]) -> None:
        """Each embedder's texts of all these items, embedded in one batch per model, family and
        variant (so that the model's time is the family's, and a chunking's)."""
        texts: dict[tuple[str, str, str], tuple[Embedder, list[str], list[str]]] = {}
        for plan, queries, documents in declared:
            built = self._model(plan)
            if built is None:
                continue  # the item itself records the error
            model = cast(Embedder, built)  # the kind `_texts` declares texts for
            group = (plan.model.id, plan.family.name, plan.case.variant)
            _, all_queries, all_documents = texts.setdefault(group, (model, [], []))
            all_queries += queries
            all_documents += documents
        for (_, family, variant), (model, queries, documents) in texts.items():
            try:
                with cost.working_on(family, variant):
                    model.prefetch(queries, documents)
            except Exception:  # each item then embeds its own texts and records what fails
                continue

    def _model(self, plan: ItemPlan) -> Model | None:
        """The item's model, built once per process; None when it cannot be built."""
        try:
            return self.state.registry.build(plan.model)
        except ModelError:
            return None  # the item's setup records the error

    def _chat_models(self, model: Model | None) -> list[PrefetchingChatModel]:
        """The chat models an item's requests go to: the LLM, or an ensemble's members (those
        that can be asked ahead; any other is asked by the item alone)."""
        candidates = list(model.members) if isinstance(model, JudgeEnsemble) else [model]
        return [m for m in candidates if isinstance(m, PrefetchingChatModel)]

    def _send(self, requests: list[Request]) -> None:
        self.requests_sent += len(requests)
        if not self.on_worker:  # the controller prints the leaderboard, whose intervals need scipy
            from ragmatrix import stats

            stats.import_meanwhile()
        with _progress(self.config, len(requests)) as bar:

            async def send_all() -> None:
                tasks: set[asyncio.Future[object]] = set()
                for model, messages, sample, *family in requests:
                    with cost.working_on(*family) if family else nullcontext():  # each task keeps its family
                        tasks.add(asyncio.ensure_future(model.prefetch(messages, sample)))
                bar.total = len(tasks)
                bar.refresh()
                for task in tasks:
                    task.add_done_callback(lambda _: bar.update())
                await asyncio.wait(tasks)

            aio.run(send_all())


class _NoBar:
    total = 0

    def update(self) -> None:
        pass

    def refresh(self) -> None:
        pass


class _progress:
    """A tqdm bar on the terminal while the requests run; nothing when output is not a terminal
    (xdist workers, CI logs)."""

    def __init__(self, config: pytest.Config, total: int) -> None:
        self.config = config
        self.total = total
        self.bar: Any = None
        self.suspended: Any = None

    def __enter__(self) -> Any:
        stream = sys.__stderr__
        if hasattr(self.config, "workerinput") or stream is None or not stream.isatty():
            return _NoBar()
        from tqdm import tqdm

        suspend = capture_suspender(self.config)
        if suspend is not None:
            self.suspended = suspend()
            self.suspended.__enter__()
        self.bar = tqdm(total=self.total, desc="ragmatrix: model requests", unit="req", file=stream, leave=False)
        return self.bar

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.suspended is not None:
            self.suspended.__exit__(None, None, None)


def scheduler(config: pytest.Config, state: BenchmarkState) -> Scheduler:
    """The session's scheduler, made on first use."""
    found = config.stash.get(SCHEDULER_KEY, None)
    if found is None:
        found = config.stash[SCHEDULER_KEY] = Scheduler(state, config)
    return found
