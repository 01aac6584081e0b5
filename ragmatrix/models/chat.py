"""An LLM as a benchmark test sees it: `llm.chat(messages)` returns the answer text.

A provider implements `ChatProvider` (send one request, classify a failure, say its device);
`LLM` is the one wrapper every chat provider is used through. Behind its one call: the answers
of this session (requests sent ahead by the scheduler, or asked before), the response cache
(keyed by model spec, messages, generation parameters and sample index), the concurrency limit,
timeouts, retries, the model's breaker and throttle, the cap on a stored answer, the secrets
taken out of the answer before it is stored or cached (a server or proxy may echo the key it was
sent), and token and cost accounting for the item being run.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from ragmatrix.cost import timed_request
from ragmatrix.cost.device import Device, remote
from ragmatrix.foundations.cache import SqliteCache
from ragmatrix.foundations.context import SIGNAL_CHECK_S
from ragmatrix.foundations.keys import md5_of
from ragmatrix.foundations.secrets import redact
from ragmatrix.foundations.untrusted import safe_text
from ragmatrix.models import aio
from ragmatrix.models.client import Breaker, Client, Failure, ModelError, Throttle
from ragmatrix.models.spec import ModelSpec
from ragmatrix.models.usage import current_requests, current_sample, current_usage

Messages = list[dict[str, str]]

# The most characters of an answer that are kept: a runaway answer (1 MiB of "yes yes ...")
# must not bloat the store and the cache. No family expects anything near this long.
MAX_ANSWER_CHARS = 16 * 1024
# An answer is cut before its secrets are taken out (redacting 200 MB would take minutes), with
# this many characters to spare: a secret shorter than this, cut in two, is dropped whole.
REDACTION_MARGIN = 4 * 1024
# How many more of a model's answers an item that had to wait for its own lets settle before it
# goes on, where the model's server has plenty queued beyond them (`_sent_ahead_answers`).
ANSWERS_TAKEN_TOGETHER = 8


class CutAnswer(str):
    """An answer's text that its provider read only in part: its body was past the cap, and was
    cut off before it was read whole (`ragmatrix.models.openai_chat`)."""


class ChatProvider(Protocol):
    """What a chat provider implements: `complete` sends one request and returns the answer's
    text, its token counts (`prompt_tokens`, `completion_tokens`) and its price in US dollars
    (None when unknown); `timeout` is the longest the client layer may wait for it (a client
    library's own timeout must not be shorter); `classify` says whether a failure may be retried. The wrapper, `LLM`,
    does everything else. A provider whose first call does nothing slow (its imports done when
    it is built) says so with a class attribute `starts_warm = True`.

    Subclass it to take the defaults of `device` and `close`."""

    async def complete(self, messages: Messages, timeout: float) -> tuple[str, dict[str, Any], float | None]: ...

    def classify(self, error: BaseException) -> Failure: ...

    def device(self) -> Device:
        """Where the model answers: `remote: <host>` for a server (the default, with no host),
        with what the server tells of itself (`remote(url, about)`). Asked for every answer's
        cost figures: a provider whose server must be asked remembers what it said."""
        return remote("")

    def close(self) -> None:
        """Release what the provider holds (a model it launched on a server)."""
        return None


@dataclass(frozen=True)
class Answer:
    text: str
    usage: dict[str, Any] | None
    cost: float | None
    cached: bool  # replayed from the response cache
    cut: bool  # longer than MAX_ANSWER_CHARS, kept only in part


class LLM:
    """An LLM as the `llm` fixture gives it (a `ChatModel` and a `PrefetchingChatModel`), on top of
    any `ChatProvider`."""

    kind = "llm"

    def __init__(self, spec: ModelSpec, provider: ChatProvider, cache: SqliteCache | None) -> None:
        self.spec = spec
        self.id = spec.id
        self.provider = provider
        self.cache = cache
        self.client = Client(spec)
        # This session's answers by cache key, asked or being asked: how a request sent ahead
        # reaches the item that needs it, with or without the response cache.
        self._answers: dict[str, asyncio.Task[Answer]] = {}
        self._consumed: set[str] = set()
        # The requests the scheduler sent ahead whose use is not reported yet (`left_unused`),
        # and their keys by the very messages sent: the scheduler asks about those, whose key
        # is then not worked out again.
        self._sent_ahead: set[str] = set()
        self._sent_keys: dict[tuple[int, int], tuple[Messages, str]] = {}
        # `prefetch` and `achat` run on the run's loop, `left_unused` in the caller's thread.
        self._sent_lock = threading.Lock()
        # Notified on the loop's thread as each request settles (`_sent_ahead_answers`), with
        # how many have settled and how many are asked and not settled yet (changed on the
        # loop's thread only).
        self._answer_came = threading.Condition()
        self._settled = 0
        self._unsettled = 0
        self._lingering: tuple[int, int] | None = None  # (settled, busy) it waits for: `_let_more_settle`
        self._first_attempt: asyncio.Event | None = None  # set once the first attempt has ended
        self._secret_names = tuple(sorted(spec.env_names()))
        self._fingerprint: dict[str, Any] | None = None

    @property
    def breaker(self) -> Breaker:
        return self.client.breaker

    @property
    def throttle(self) -> Throttle:
        return self.client.throttle

    # -- what the cost meter reads (`ragmatrix.cost.meter.Measured`) ---------------------------

    def cost_device(self) -> Device:
        return self.provider.device()  # asked each time: what a server tells of itself comes with its answers

    def prepare_to_measure(self) -> None:
        pass  # requests are timed one by one; the first, cold one is left out

    def model_size(self) -> tuple[float | None, int | None]:
        return None, None

    def close(self) -> None:
        self.provider.close()

    def cache_key(self, messages: Messages, sample: int) -> str:
        if self._fingerprint is None:  # the spec's, read once: every request and item needs it
            self._fingerprint = self.spec.output_fingerprint()
        return md5_of({"model": self._fingerprint, "messages": messages, "sample": sample})

    def prefetch(self, messages: Messages, sample: int) -> asyncio.Task[Answer]:
        """Start asking now (on the running loop), ahead of the item; `achat` with the same
        messages and sample later takes this answer instead of asking again."""
        key = self.cache_key(messages, sample)
        with self._sent_lock:
            self._sent_ahead.add(key)
            self._sent_keys[(id(messages), sample)] = (messages, key)
        return self._task(messages, key)

    def left_unused(self, messages: Messages, sample: int) -> bool:
        """Whether the answer sent ahead for these messages and sample came back and no `achat`
        took it: a family whose test asks other messages than its first round declares. Said
        once per request."""
        with self._sent_lock:
            sent = self._sent_keys.pop((id(messages), sample), None)
        key = sent[1] if sent is not None and sent[0] is messages else self.cache_key(messages, sample)
        with self._sent_lock:
            if key not in self._sent_ahead:
                return False
            self._sent_ahead.discard(key)
            task = self._answers.get(key)
            answered = task is not None and task.done() and not task.cancelled() and task.exception() is None
            return answered and key not in self._consumed

    def _key_sent(self, messages: Messages, sample: int) -> str:
        """The key of these messages: the one an equal conversation of the item was sent ahead
        under (the same family code built both from the same case), else worked out."""
        for sent in current_requests.get():
            if sent == messages:
                with self._sent_lock:
                    known = self._sent_keys.get((id(sent), sample))
                if known is not None and known[0] is sent:
                    return known[1]
        return self.cache_key(messages, sample)

    def _task(self, messages: Messages, key: str) -> asyncio.Task[Answer]:
        """The session's one request for this key: asked now, or already asked."""
        task = self._answers.get(key)
        if task is None:
            task = self._answers[key] = asyncio.ensure_future(self._ask(messages, key))
            self._unsettled += 1
            task.add_done_callback(_retrieve)
            task.add_done_callback(self._announce)
        return task

    async def achat(self, messages: Messages, sample: int | None = None) -> str:
        sample = current_sample.get() if sample is None else sample
        key = self.cache_key(messages, sample)
        task = self._task(messages, key)
        try:
            # Shielded: an item cancelled mid-way (a zELO judgement failing) must not cancel
            # an answer that another consumer may share.
            answer = await asyncio.shield(task)
        except ModelError:
            if self._answers.get(key) is task:
                del self._answers[key]  # errors are never kept: the next ask tries again
            raise
        return self._taken(key, answer)

    def _taken(self, key: str, answer: Answer) -> str:
        """The answer's text, its usage counted for the item being run (in the caller's context)."""
        usage = current_usage.get()
        if usage is not None:
            first = key not in self._consumed
            usage.add(answer.usage, answer.cost, cached=answer.cached or not first)
            usage.answers_cut += int(answer.cut)
        with self._sent_lock:
            self._consumed.add(key)
        return answer.text

    def _sent_ahead_answers(self, conversations: list[Messages]) -> list[tuple[str, Answer]] | None:
        """(key, answer) for each conversation and the current sample when every one was sent
        ahead (or asked before) and answers: the caller's thread waits for the answers still on
        their way and takes them without a round trip through the loop (on a large run, the
        harness is usually ahead of the server, so this wait is the common case). None when
        any was never asked, failed or was cancelled: `achat` then asks, or raises its error."""
        sample = current_sample.get()
        keys = [self._key_sent(messages, sample) for messages in conversations]
        tasks = [self._answers.get(key) for key in keys]
        if not all(task is not None for task in tasks):
            return None
        waiting = [task for task in tasks if task is not None and not task.done()]
        if waiting:
            with self._answer_came:
                while not all(task.done() for task in waiting):
                    if not waiting[0].get_loop().is_running():
                        return None  # a loop that stopped answers nothing more
                    # Never one wait without a timeout: a Ctrl-C is handled only once this
                    # thread wakes (see `LoopThread.run`).
                    self._answer_came.wait(SIGNAL_CHECK_S)
                self._let_more_settle(waiting[0].get_loop())
        answers: list[tuple[str, Answer]] = []
        for key, task in zip(keys, tasks, strict=True):
            assert task is not None
            if task.cancelled() or task.exception() is not None:
                return None
            answers.append((key, task.result()))
        return answers

    def _let_more_settle(self, loop: asyncio.AbstractEventLoop) -> None:
        """Having waited for its answers, an item waits for `ANSWERS_TAKEN_TOGETHER` more, while
        the model's server has at least twice its concurrency asked and unanswered (so it never
        idles for it, and the answers' latency is the server's): the items after it are waiting
        for theirs too, and now run one after another. Woken once per item instead, this thread
        ran each item's work with caches the loop's thread and the server had used meanwhile:
        about 0.5 ms of CPU an item against 0.2 ms (960 prompts at 16 connections, a server
        slower than the items). Called holding `_answer_came`."""
        self._lingering = (self._settled + ANSWERS_TAKEN_TOGETHER, 2 * self.spec.concurrency)
        try:
            while not self._lingered() and loop.is_running():
                self._answer_came.wait(SIGNAL_CHECK_S)
        finally:
            self._lingering = None

    def _lingered(self) -> bool:
        goal, busy = self._lingering or (0, 0)
        return self._settled >= goal or self._unsettled < busy + goal - self._settled

    def _announce(self, _: asyncio.Task[Answer]) -> None:
        """On the loop's thread, as a request settles: wake a caller waiting for its answer, or,
        while it lets more answers settle, once they have."""
        with self._answer_came:
            self._settled += 1
            self._unsettled -= 1
            if self._lingering is None or self._lingered():
                self._answer_came.notify_all()

    async def _ask(self, messages: Messages, key: str) -> Answer:
        hit = self.cache.get(key) if self.cache is not None else None
        # An empty answer cached by an older version is no answer: ask again.
        if hit is not None and str(hit.get("text") or "").strip():
            text, cut = kept_answer(str(hit["text"]), self._secret_names)
            return Answer(text, hit.get("usage"), hit.get("cost"), cached=True, cut=cut or bool(hit.get("cut")))
        # The first attempt of the session goes alone: a client's cold start (lazy imports, its
        # connection pool) blocks the loop, and must not eat the timeout of every request sent
        # with it. A client that starts warm has nothing to wait for.
        if getattr(self.provider, "starts_warm", False):
            first = None
        elif self._first_attempt is None:
            self._first_attempt = first = asyncio.Event()
        else:
            first = None
            await self._first_attempt.wait()

        async def send() -> tuple[str, dict[str, Any], float | None]:
            try:
                # timed from send to the full answer, for the cost figures (not the first, cold one)
                reply = self.provider.complete(messages, self.client.longest_wait)
                return await timed_request(self, reply, cold=first is not None, usage=lambda a: a[1])
            finally:
                if first is not None:
                    first.set()

        try:
            text, tokens, cost = await self.client.call(send, self.provider.classify)
        finally:
            if first is not None:  # also when no attempt was made (cancelled, model down)
                first.set()
        # A server or proxy may echo the key it was sent, and an answer may hold control
        # sequences: the answer is stored, cached and shown.
        text, cut = kept_answer(text, self._secret_names)
        if self.cache is not None:
            entry: dict[str, Any] = {"text": text, "usage": tokens, "cost": cost}
            if cut:
                entry["cut"] = True
            self.cache.put(key, entry)
        return Answer(text, tokens, cost, cached=False, cut=cut)

    def chat(self, messages: Messages) -> str:
        """Ask once, for the current iteration's sample."""
        return self.chat_many([messages])[0]

    def chat_many(self, conversations: list[Messages]) -> list[str]:
        """Ask many at once; the model's concurrency limit bounds how many are in flight."""
        answered = self._sent_ahead_answers(conversations)
        if answered is not None:
            return [self._taken(key, answer) for key, answer in answered]

        async def gather() -> list[str]:
            return list(await asyncio.gather(*(self.achat(m) for m in conversations)))

        return aio.run(gather())


def kept_answer(text: str, secret_names: tuple[str, ...]) -> tuple[str, bool]:
    """The answer as it is stored, cached and shown, and whether it was cut: at most
    `MAX_ANSWER_CHARS`, secrets taken out, control characters escaped (newlines and tabs stay).
    A longer answer is cut first, `REDACTION_MARGIN` past the cap, and redacted after; the
    margin then goes, with the head of any secret the first cut split."""
    cut = isinstance(text, CutAnswer)
    if len(text) > MAX_ANSWER_CHARS + REDACTION_MARGIN:
        redacted = redact(str(text[: MAX_ANSWER_CHARS + REDACTION_MARGIN]), secret_names)
        return safe_text(redacted[:-REDACTION_MARGIN][:MAX_ANSWER_CHARS]), True
    text = redact(str(text), secret_names)
    if len(text) > MAX_ANSWER_CHARS:
        return safe_text(text[:MAX_ANSWER_CHARS]), True
    return safe_text(text), cut


def _retrieve(task: asyncio.Task[Answer]) -> None:
    # A request sent ahead whose item never ran (-x, a crash) must not log "exception never
    # retrieved": its consumer, if any, still gets the error from the task.
    if not task.cancelled():
        task.exception()
