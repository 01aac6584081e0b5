"""Sends the first-round model requests of the run's benchmark items ahead of the items.

Each test function asks its model one question at a time, and pytest runs one item after
another, so left alone a model would see one request in flight. Instead, when the first
benchmark item of this process is about to run, the scheduler collects the first-round
requests of every item this process will run (a family states them with
`Family.first_requests`, a pure function of the case and the model), for every iteration,
and sends them all, each model up to its own concurrency. The items then find their answers
waiting (`ChatModel.achat` takes a request sent ahead instead of asking again); follow-up
rounds, such as zELO's re-ask of a malformed answer, are asked inside the item.

Which items are this process's:
- without xdist: every item selected (after `-k`, `--models`, cached skips);
- on an xdist worker under `--dist loadgroup` (the default: each model is one group), every
  item of the model of the item about to run, when the first of them runs;
- under any other xdist distribution, the item's own requests only (its iterations).

Errors are stored with the request and raised to the item that consumes it, which records
an error row; nothing failed is cached.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from plugin.case import CaseInputError
from plugin.models import aio
from plugin.models.client import ModelError
from plugin.runner import plan_for
from plugin.session import BenchmarkState, ItemPlan

SCHEDULER_KEY = pytest.StashKey["Scheduler"]()

Messages = list[dict[str, str]]


@dataclass
class Scheduler:
    state: BenchmarkState
    config: pytest.Config
    scheduled_models: set[str] = field(default_factory=set)
    scheduled_items: set[str] = field(default_factory=set)
    requests_sent: int = 0

    @property
    def on_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def before(self, item: pytest.Item, plan: ItemPlan) -> None:
        """Called as each benchmark item is about to run: the first one sends ahead."""
        if item.nodeid in self.scheduled_items or plan.model.id in self.scheduled_models:
            return
        if not self.on_worker:
            chosen = list(self._plans(item.session.items))
        elif self.config.getoption("dist", "no") == "loadgroup":
            chosen = [(i, p) for i, p in self._plans(item.session.items) if p.model.id == plan.model.id]
        else:
            chosen = [(item, plan)]
        if not self.on_worker or self.config.getoption("dist", "no") == "loadgroup":
            self.scheduled_models.update(p.model.id for _, p in chosen)
        self.scheduled_items.update(i.nodeid for i, _ in chosen)
        requests = list(self._requests([p for _, p in chosen]))
        if requests:
            self._send(requests)

    def _plans(self, items: list[pytest.Item]) -> Iterator[tuple[pytest.Item, ItemPlan]]:
        for item in items:
            if item.get_closest_marker("skip") is not None:
                continue  # cached
            plan = plan_for(item, self.state)
            if plan is not None and plan.model.id not in self.scheduled_models:
                yield item, plan

    def _requests(self, plans: list[ItemPlan]) -> Iterator[tuple[Any, Messages, int]]:
        for plan in plans:
            first = plan.family.first_requests
            if first is None or plan.model.kind not in ("llm", "ensemble"):
                continue
            models = self._chat_models(plan)
            if not models:
                continue
            try:
                conversations = first(plan.case, plan.model)
            except (CaseInputError, ValueError, KeyError, TypeError):
                continue  # the item itself records what is wrong with the case
            for sample in range(self.state.iterations):
                for messages in conversations:
                    for model in models:
                        yield model, messages, sample

    def _chat_models(self, plan: ItemPlan) -> list[Any]:
        """The chat models an item's requests go to: the LLM, or an ensemble's members."""
        try:
            model = self.state.registry.build(plan.model)
        except ModelError:
            return []  # the item's setup records the error
        members = getattr(model, "members", None)
        candidates = members if members is not None else [model]
        return [m for m in candidates if hasattr(m, "prefetch")]

    def _send(self, requests: list[tuple[Any, Messages, int]]) -> None:
        self.requests_sent += len(requests)
        with _progress(self.config, len(requests)) as bar:

            async def send_all() -> None:
                tasks = {model.prefetch(messages, sample) for model, messages, sample in requests}
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

        capture = self.config.pluginmanager.getplugin("capturemanager")
        if capture is not None:
            self.suspended = capture.global_and_fixture_disabled()
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
