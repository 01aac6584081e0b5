"""Sends the first-round model requests of the run's benchmark items ahead of the items.

Each test function asks its model one question at a time, and pytest runs one item after
another, so left alone a model would see one request in flight. Instead, when the first
benchmark item of this process is about to run (or, where the items that will run are known
while they are collected, as collection finds each: `collected`, or as their test function is
parametrized: `parametrized`), the scheduler collects the first-round requests of every item
this process will run (a family states them with `Family.first_requests`, a pure function of
the case and the model, which its test asks through the same function), for every iteration,
and sends them all, each model up to its own concurrency. An embedder's texts
(`Family.first_texts`) are embedded the same way, in one batch across a window's items (at most
`EMBED_AHEAD` texts, so that the rows held ahead stay bounded). The items then find their
answers waiting (`ChatModel.achat` takes a request sent ahead instead of asking again);
follow-up rounds, such as zELO's re-ask of a malformed answer, are asked inside the item. After
each item, the answers sent ahead for it that it never took are counted (`after`): a family
whose test asks other requests than it declares pays for each twice, and the terminal's usage
line says so.

The requests run on the run's event loop, which has a thread of its own (`ragmatrix.models.aio`):
they are started and not waited for, so each item waits only for its own answers, which the
loop has read as they arrived, while the items before it were recorded. About `--send-ahead`
requests (default 256) are in flight or answered ahead of the items at any time: when fewer
than half that many are left, the next items' requests are sent. A killed run therefore loses
at most about `--send-ahead` answers. With nothing in flight (the start of a run), the first
item's requests go out as soon as they are built, and the rest of the window follows in batches
that double (1, 1, 2, 4, ...): the server starts on the first request, not after the whole
window has been planned.

Which items are this process's:
- without xdist: the items selected (after `-k`, `--models`, cached skips), in order;
- on an xdist worker: the items xdist has handed this worker and not run yet, looked at as
  each item starts, so that a worker sends only its own items, batch by batch as they come.

Errors are stored with the request and raised to the item that consumes it, which records
an error row; nothing failed is cached.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from itertools import chain
from typing import cast

import pytest

from ragmatrix import cost
from ragmatrix.foundations.storage import StorageError
from ragmatrix.models import aio
from ragmatrix.models.client import ModelError
from ragmatrix.models.protocols import Embedder, JudgeEnsemble, Messages, Model, PrefetchingChatModel
from ragmatrix.plugin import pytest_internals
from ragmatrix.plugin.pytest_internals import worker_queue
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
    outstanding: int = 0  # requests sent ahead whose items have not run yet
    # Items whose texts were embedded ahead and have not run yet.
    texts_ahead: set[str] = field(default_factory=set)
    session: pytest.Session | None = None
    # While collection goes on (`collected`): whether its items' requests may go now (worked
    # out at the first item), and the requests of the items collected and not sent yet.
    _while_collecting: Callable[[pytest.Item], bool] | None = None
    _collecting_known: bool = False
    # Likewise as test functions are parametrized, and the items sent for then not built yet.
    _while_parametrizing: Callable[[Iterable[str]], bool] | None = None
    _parametrizing_known: bool = False
    _unbuilt: set[str] = field(default_factory=set)
    _collected: list[Request] = field(default_factory=list)
    _unkeyed: list[ItemPlan] = field(default_factory=list)  # plans sent for early, keyed at collection's end
    _members: dict[int, tuple[Model | None, list[PrefetchingChatModel]]] = field(default_factory=dict)
    _cursor: int = 0  # without xdist: where in the session's items the next unscheduled one may be

    @property
    def on_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def before(self, item: pytest.Item, plan: ItemPlan) -> None:
        """Called as each benchmark item is about to run: sends ahead what is not sent yet."""
        self.session = item.session
        if item.nodeid not in self.scheduled_items:
            if not self.on_worker:
                items = item.session.items
                self._cursor = items.index(item) if item in items else self._cursor
            self._schedule(chain([item], self._following()), top_up=False)
        elif self.outstanding < max(1, self.state.send_ahead // 2):
            # Keep the model busy while the items run: top the requests in flight up again.
            self._schedule(self._following(), top_up=True)

    def collected(self, item: pytest.Item, plan: ItemPlan) -> None:
        """Called as collection finds each item. Where the items the run will run are known as
        they are collected (`pytest_internals.selected_as_collected`: no plugin but pytest's own
        and this one selects or runs them, no `--lf`, `-m`, `--shard` or xdist; `-k` is
        evaluated as pytest evaluates it), an LLM item's first requests go now, in batches that
        double as at the start of a run, up to about `--send-ahead`: the server starts while
        the rest is collected, not after. As pytest's setup of the item would, its results
        folder is prepared first: a folder that refuses rows stops the run before model work.
        An item pytest drops after all (`forget`) leaves its answers in the response cache."""
        self._unbuilt.discard(item.nodeid)
        will_run = self._selected_as_collected()
        if will_run is None or item.nodeid in self.scheduled_items or pytest_internals.skip_mark(item) is not None:
            return
        if self._room_early() and will_run(item):
            self._send_early(item.nodeid, plan, item.session)

    def parametrized(
        self, metafunc: pytest.Metafunc
    ) -> Callable[[str, ItemPlan, list[pytest.MarkDecorator]], bool] | None:
        """Earlier still, where the items are known as their test function is parametrized
        (`pytest_internals.selected_as_parametrized`, and nothing but this plugin parametrizes
        it): the first items' requests go as the matrix is built, before pytest builds the
        items. Returns what the parametrizing calls with each item's id, plan and marks (while
        it says there is room for more), or None. An item not built under the id it was sent
        by is dropped at the end of collection (`collection_finished`)."""
        will_run = self._selected_as_parametrized()
        if will_run is None or not self._room_early() or not pytest_internals.parametrized_here_only(metafunc):
            return None
        definition, session = metafunc.definition, metafunc.definition.session
        names = pytest_internals.names_before_built(definition)

        def offer(ident: str, plan: ItemPlan, marks: list[pytest.MarkDecorator]) -> bool:
            if not _asked_ahead(plan):
                return True  # an embedder's texts are embedded in one batch when the run reaches them
            nodeid = f"{definition.nodeid}[{ident}]"  # as pytest names the item it builds
            mark_names = [mark.name for mark in marks]
            if nodeid not in self.scheduled_items and "skip" not in mark_names:
                known = {*names, f"{definition.name}[{ident}]", *mark_names}
                if plan.case.file:  # `-k <data file name>` (see `hooks.pytest_itemcollected`)
                    known.add(plan.case.source)
                if will_run(known) and self._send_early(nodeid, plan, session):
                    self._unbuilt.add(nodeid)
            return self._room_early()

        return offer

    def _selected_as_collected(self) -> Callable[[pytest.Item], bool] | None:
        if not self._collecting_known:
            self._collecting_known = True
            if self.state.shard is None and not self.on_worker:
                self._while_collecting = pytest_internals.selected_as_collected(self.config)
        return self._while_collecting

    def _selected_as_parametrized(self) -> Callable[[Iterable[str]], bool] | None:
        if not self._parametrizing_known:
            self._parametrizing_known = True
            if self._selected_as_collected() is not None:
                self._while_parametrizing = pytest_internals.selected_as_parametrized(self.config)
        return self._while_parametrizing

    def _room_early(self) -> bool:
        return self._while_collecting is not None and self.outstanding + len(self._collected) < self.state.send_ahead

    def _send_early(self, nodeid: str, plan: ItemPlan, session: pytest.Session) -> bool:
        """Send an item's first requests during collection (batched, see `collected`); whether
        they went or wait in the batch."""
        if session.testsfailed:  # a collection error: pytest runs no item
            self._while_collecting = self._while_parametrizing = None
            return False
        if plan.skip_reason or not _asked_ahead(plan):
            return False  # an embedder's texts are embedded in one batch when the run reaches them
        try:
            self.state.store.prepare(plan.family.name)
        except StorageError:
            self._while_collecting = self._while_parametrizing = None  # the item's setup stops the run
            return False
        self.session = session
        self.scheduled_items.add(nodeid)
        self._unkeyed.append(plan)
        mine = list(self._requests([plan]))
        if mine:
            self.ahead[nodeid] = mine
            self._collected += mine
        if len(self._collected) >= max(1, self.outstanding):
            self._send_collected()
        return True

    def collection_finished(self) -> None:
        """At the end of collection: the requests of the items collected that are not sent yet
        go, and an item sent for as it was parametrized that pytest built under another id (a
        plugin's, a duplicate's) is dropped; the item itself is scheduled as any other."""
        self._send_collected()
        self._while_collecting = self._while_parametrizing = None
        self._forget(self._unbuilt)
        self._unbuilt = set()
        unkeyed, self._unkeyed = self._unkeyed, []
        _keyed(unkeyed)

    def _send_collected(self) -> None:
        requests, self._collected = self._collected, []
        if requests:
            self._send(requests)

    def forget(self, items: list[pytest.Item]) -> None:
        """Items pytest dropped after their requests went (`pytest_deselected`): they will not
        run, so their answers no longer count as held ahead."""
        self._forget(item.nodeid for item in items)

    def _forget(self, nodeids: Iterable[str]) -> None:
        for nodeid in nodeids:
            if nodeid not in self.scheduled_items:
                continue
            self.scheduled_items.discard(nodeid)
            self.texts_ahead.discard(nodeid)
            dropped = {id(request) for request in self.ahead.pop(nodeid, ())}
            unsent = len(self._collected)
            self._collected = [request for request in self._collected if id(request) not in dropped]
            unsent -= len(self._collected)
            self.outstanding -= len(dropped) - unsent

    def sent_ahead(self, nodeid: str) -> bool:
        """Were this item's requests sent, or its texts embedded, ahead of it (and has it not
        run yet)?"""
        return nodeid in self.ahead or nodeid in self.texts_ahead

    def conversations_sent(self, nodeid: str) -> list[Messages]:
        """The conversations sent ahead for this item (until it has run)."""
        return [messages for _, messages, *_ in self.ahead.get(nodeid, ())]

    def _following(self) -> Iterator[pytest.Item]:
        """The items this process will run, from the first one not looked at yet."""
        assert self.session is not None  # set by `before`
        if self.on_worker:
            # The items xdist has handed this worker so far; more may come later.
            yield from worker_queue(self.config, self.session) or []
            return
        items = self.session.items
        while self._cursor < len(items):
            self._cursor += 1
            yield items[self._cursor - 1]

    def _schedule(self, candidates: Iterator[pytest.Item], top_up: bool) -> None:
        """Send the requests of the candidates not sent yet, in order, until about `--send-ahead`
        are in flight (or an embedder's texts fill `EMBED_AHEAD`), without waiting for the
        answers: each item waits for its own when it runs, so a killed run loses at most what
        is in flight. A top-up stops before an item that declares texts: embedding them now
        would drop the rows that the items before it still need."""
        texts: list[tuple[ItemPlan, list[str], list[str]]] = []
        requests: list[Request] = []
        scheduled: list[ItemPlan] = []
        counted = 0
        # With nothing in flight the model would idle while the whole window is built: the
        # first item's requests go at once, and then each batch once it is as large as what is
        # in flight (1, 2, 4, ...), so that the server starts within one item of the start.
        flush_at = 1 if self.outstanding == 0 else None
        for candidate in candidates:
            if candidate.nodeid in self.scheduled_items:
                continue
            plans = list(self._plans([candidate]))
            declared = [(plan, self._texts(plan)) for _, plan in plans]
            if top_up and any(texts_of is not None for _, texts_of in declared):
                if not self.on_worker:
                    self._cursor -= 1  # it starts a window of its own when it is reached
                break
            self.scheduled_items.add(candidate.nodeid)
            scheduled += (plan for plan, _ in declared)
            for plan, texts_of in declared:
                mine = list(self._requests([plan]))
                if mine:
                    self.ahead[candidate.nodeid] = mine
                requests += mine
                if texts_of is not None:
                    self.texts_ahead.add(candidate.nodeid)
                    texts.append((plan, *texts_of))
                    counted += len(texts_of[0]) + len(texts_of[1])
            if self.outstanding + len(requests) >= self.state.send_ahead or counted >= EMBED_AHEAD:
                break
            if flush_at is not None and len(requests) >= flush_at:
                self._send(requests)
                requests, flush_at = [], self.outstanding
        if requests:
            self._send(requests)
        self._embed_ahead(texts)
        _keyed(scheduled)

    def after(self, item: pytest.Item) -> None:
        """Called once an item has run: counts the answers sent ahead for it that it never took
        (in its usage, as `answers_unused`)."""
        sent = self.ahead.pop(item.nodeid, [])
        self.texts_ahead.discard(item.nodeid)
        self.outstanding -= len(sent)
        unused = sum(model.left_unused(messages, sample) for model, messages, sample, *_ in sent)
        if unused:  # summed into the session's usage like the runner's, from any xdist worker
            item.user_properties.append(("ragmatrix_usage", {"answers_unused": unused}))

    def _plans(self, items: list[pytest.Item]) -> Iterator[tuple[pytest.Item, ItemPlan]]:
        for item in items:
            if pytest_internals.skip_mark(item) is not None:
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
        if texts:  # after the models' own imports (`stats.settled`), while their items run
            self._statistics_meanwhile()

    def _statistics_meanwhile(self) -> None:
        """The controller prints the leaderboard, whose intervals need scipy: its import runs on
        a thread while the models work (`ragmatrix.stats.import_meanwhile`)."""
        if not self.on_worker:
            from ragmatrix import stats

            stats.import_meanwhile()

    def _model(self, plan: ItemPlan) -> Model | None:
        """The item's model, built once per process; None when it cannot be built."""
        try:
            return self.state.registry.build(plan.model)
        except ModelError:
            return None  # the item's setup records the error

    def _chat_models(self, model: Model | None) -> list[PrefetchingChatModel]:
        """The chat models an item's requests go to: the LLM, or an ensemble's members (those
        that can be asked ahead; any other is asked by the item alone). Worked out once per
        model: checking a protocol walks its attributes, a cost paid on every item otherwise."""
        known = self._members.get(id(model))
        if known is None or known[0] is not model:
            candidates = list(model.members) if isinstance(model, JudgeEnsemble) else [model]
            known = self._members[id(model)] = (model, [m for m in candidates if isinstance(m, PrefetchingChatModel)])
        return known[1]

    def _send(self, requests: list[Request]) -> None:
        """Start every request on the run's loop, each model up to its own concurrency, and
        return at once: the loop reads the answers as they arrive while the items run."""
        self.requests_sent += len(requests)
        self.outstanding += len(requests)

        async def start_all() -> None:
            first: asyncio.Future[object] | None = None
            for model, messages, sample, *family in requests:
                with cost.working_on(*family) if family else nullcontext():  # each task keeps its family
                    asked = model.prefetch(messages, sample)
                if first is None:
                    first = asyncio.ensure_future(asked)
            # Once the first answer is in, the run mostly waits for the others: scipy's import
            # then takes no CPU from the start (the HTTP client's import, the first requests).
            if first is None:
                self._statistics_meanwhile()
            else:
                first.add_done_callback(lambda _: self._statistics_meanwhile())

        aio.run(start_all())


def _keyed(plans: list[ItemPlan]) -> None:
    """Work out the result keys of items whose work was just sent ahead, a batch at a time (the
    item's row needs its key). Keyed one by one as each item's row is written, between the
    item's other work, a key cost about three times its CPU (62 against 21 µs at 960 prompts).
    A key that fails here is worked out again, and its failure reported, as the row is written."""
    for plan in plans:
        try:
            plan.key  # noqa: B018 - a cached property
        except Exception:  # noqa: BLE001, S112 - the item reports it
            continue


def _asked_ahead(plan: ItemPlan) -> bool:
    """Does the item declare requests that go ahead of it, during collection too?"""
    return plan.family.first_requests is not None and plan.model.kind in ("llm", "ensemble")


def scheduler(config: pytest.Config, state: BenchmarkState) -> Scheduler:
    """The session's scheduler, made on first use."""
    found = config.stash.get(SCHEDULER_KEY, None)
    if found is None:
        found = config.stash[SCHEDULER_KEY] = Scheduler(state, config)
    return found
