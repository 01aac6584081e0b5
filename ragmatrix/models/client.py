"""The one place model calls are made robust: concurrency, timeouts, bounded retries, the
breaker and the pace under rate limits and busy servers.

Every provider call goes through `call()`. It holds the model's semaphore only while a
request is in flight, bounds each attempt itself (some client libraries ignore their own async
timeout), and retries 429s, 5xx and timeouts with exponential backoff that honours
`Retry-After` up to `MAX_RETRY_AFTER`. An empty answer is such a transient fault too. Other
failures end at once as a `ModelError`, which the plugin records as an error row, never as a
score.

Slow is not dead. An attempt times out when the server has answered none of the model's
requests for `timeout` seconds; while it answers others, a request waiting in its queue is
waited for (a server that queues keeps computing a request the client gave up, and sending it
again only adds the same work), up to `timeout x (concurrency + 1)` in all, and the model's
concurrency is cut as a 429 cuts it. Only when nothing answers is a timeout an outage.

A `Breaker` per model watches the attempts. After K consecutive outages (timeouts, connection
errors, 5xx, empty answers) it opens: calls wait instead of failing, and after a cool-down one
call goes as a probe. An answer closes the breaker and everything waiting goes on; a failed
probe opens it again for twice as long. Only when probes have kept failing for the model's
patience is the model down for the session: every call waiting or yet to come then fails at
once, so a dead server still ends the run quickly while a blip costs seconds.

A `Throttle` per model paces it under rate limits and on a busy server: a 429 or a slow answer
halves how many requests may be in flight, each answer grows it back (additive increase,
multiplicative decrease). A 429 also sets the rate at which requests may start to what the
server accepted in the second before it refused, and each answer raises that rate a little, so
a server that accepts N requests a second is asked about N times a second however many are in
flight. A `Retry-After` holds every request of the model until it has passed.

`Client` holds one model's semaphore, retry policy, breaker and throttle, made from its spec:
every model wrapper of a remote provider (chat, embeddings, reranking) sends through one.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ragmatrix.foundations.secrets import redact
from ragmatrix.foundations.untrusted import safe_text

T = TypeVar("T")


class CallSettings(Protocol):
    """The fields of a model's spec that its client reads (every `ModelSpec` has them)."""

    concurrency: int
    timeout: float
    retries: int
    breaker_after: int

    @property
    def patience(self) -> float: ...


class ModelError(Exception):
    """A model call that failed for good. `timed_out`: its last attempt got no answer in time (a
    smaller request may fare better); `busy`: while the server answered other requests. Its
    message often quotes a server's error body: its control characters are escaped, for it is
    printed and stored."""

    def __init__(self, message: str, attempts: int = 1, timed_out: bool = False, busy: bool = False) -> None:
        super().__init__(safe_text(message))
        self.attempts = attempts
        self.timed_out = timed_out or busy
        self.busy = busy


class LoadOnce:
    """A provider's `load`, run once for the model's wrapper: a load that failed fails every
    later call the same way, as one redacted line, instead of loading again for every item."""

    def __init__(self, model_id: str, load: Callable[[], None]) -> None:
        self.model_id = model_id
        self.load = load
        self.done = False
        self.error: str | None = None

    def __call__(self) -> None:
        if self.error is not None:
            raise ModelError(self.error)
        if self.done:
            return
        try:
            self.load()
        except ModelError as error:
            self.error = str(error)
            raise
        except Exception as error:
            message = redact(f"cannot load model '{self.model_id}': {type(error).__name__}: {error}")
            self.error = message.splitlines()[0]
            raise ModelError(self.error) from error
        self.done = True


class BusyServer(TimeoutError):
    """An attempt that waited its longest while the server kept answering the model's other
    requests: the server is busy, not down."""


class EmptyAnswer(Exception):
    """A reply that holds no answer (no choices, null or empty content): a server fault that
    may pass, retried like a 5xx and never cached."""


MODEL_DOWN = "model down after"  # how every error of a model whose breaker gave up begins

# The longest Retry-After honoured, in seconds. A server asking for more (an hour, say) would
# hold the whole run: past it the attempt fails like a 5xx, and is retried on the usual backoff.
MAX_RETRY_AFTER = 60.0

FIRST_COOLDOWN = 0.5  # seconds an opened breaker waits before its first probe
MAX_COOLDOWN = 30.0  # the longest wait between two probes (each failed probe doubles it)


class _Waiters:
    """Calls parked until something changes. Futures are made on the running loop at each
    wait, so an object that outlives an event loop (a model across test sessions) never holds
    a primitive bound to a closed one."""

    def __init__(self) -> None:
        self._futures: list[asyncio.Future[None]] = []

    async def wait(self, timeout: float | None = None) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._futures.append(future)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            pass
        finally:
            if future in self._futures:
                self._futures.remove(future)

    def wake(self) -> None:
        futures, self._futures = self._futures, []
        for future in futures:
            if not future.done():
                future.set_result(None)


class Breaker:
    """A model's circuit breaker: closed, open (calls wait, one probes after a cool-down) or
    down (given up for the session).

    Any answer closes it and resets the count, and so does a refusal (a 4xx or a 429): the
    server is there, it only says no. `patience`: how long probes may keep failing before the
    model is down (seconds, from the moment the breaker opened).
    """

    def __init__(self, threshold: int, patience: float = 60.0) -> None:
        self.threshold = threshold
        self.patience = patience
        self.failures = 0  # consecutive outages while closed
        self.down: str | None = None  # the message every later call fails with
        self.opened_at: float | None = None  # time.monotonic() when it opened; None while closed
        self.probe_at = 0.0  # when the next probe may go
        self.probing = False  # a probe is in flight
        self.failed_probes = 0
        self.opened = 0  # how often it opened this session
        self.heard_at = 0.0  # time.monotonic() of the server's last answer (or refusal)
        self._waiters = _Waiters()

    @property
    def is_open(self) -> bool:
        return self.opened_at is not None

    def check(self) -> None:
        if self.down is not None:
            raise ModelError(self.down, attempts=0)

    async def admit(self) -> bool:
        """Wait until a call may send: at once while closed; while open, until this call is
        the probe (True) or another probe's answer closed the breaker. Raises once the model is
        down."""
        while True:
            self.check()
            if self.opened_at is None:
                return False
            now = time.monotonic()
            if not self.probing and now >= self.probe_at:
                self.probing = True
                return True
            await self._waiters.wait(None if self.probing else self.probe_at - now)

    def success(self) -> None:
        """The server answered (or refused): the breaker closes and everything waiting goes."""
        self.failures = 0
        self.heard_at = time.monotonic()
        if self.opened_at is not None and self.down is None:
            self.opened_at = None
            self.probing = False
            self.failed_probes = 0
            self._waiters.wake()

    def failure(self, message: str, probe: bool = False) -> None:
        """An attempt ended in an outage. While closed it counts towards the threshold; while
        open only a failed probe matters (the others were sent before it opened)."""
        if self.down is not None:
            return
        now = time.monotonic()
        if self.opened_at is None:
            self.failures += 1
            if self.failures >= self.threshold:
                self.opened_at, self.probe_at = now, now + FIRST_COOLDOWN
                self.opened += 1
            return
        if not probe:
            return
        self.probing = False
        self.failed_probes += 1
        cooldown = min(FIRST_COOLDOWN * 2**self.failed_probes, MAX_COOLDOWN)
        if now + cooldown - self.opened_at > self.patience:
            probes = f"{self.failed_probes} failed probe{'s' if self.failed_probes != 1 else ''}"
            self.down = (
                f"{MODEL_DOWN} {self.failures} failures and {probes} over {now - self.opened_at:.1f} s: "
                f"last error {message}"
            )
        else:
            self.probe_at = now + cooldown
        self._waiters.wake()

    def abandon_probe(self) -> None:
        """The probe ended with neither an answer nor an outage (it was cancelled): let another
        call probe."""
        if self.probing:
            self.probing = False
            self._waiters.wake()


# Pacing by rate: the window over which the requests a server accepted are counted when it
# refuses one (and how close two sends are to count as one burst); the slowest pace a 429 can
# set; the share of the accepted rate that is asked for, so that a server's own timing does not
# refuse a request that came a moment early; how fast the rate grows back (requests a second
# added per second of answers), and how much slower within that share of the accepted rate.
RATE_WINDOW = 1.0
BURST = 0.1  # requests sent this close together went at once: which the server took first is unknown
MIN_RATE = 0.2
RATE_SHARE = 0.9
RATE_GROWTH = 0.5
NEAR_GROWTH = 0.05


@dataclass(eq=False)
class Ticket:
    """One request's place in its model's throttle: when it started, the number of cuts it was
    sent at, and whether the server refused it."""

    sent_at: float
    cuts: int
    refused: bool = False


class Throttle:
    """How many of a model's requests may be in flight, how often they may start, and when.

    It starts at the model's concurrency (`ceiling`), unpaced. A 429 or a slow answer halves
    the limit (at least 1), once per round of requests: a request sent before the last cut does
    not cut again. Each answer adds 1/limit, that is about one request per round of answers,
    back up to the ceiling.

    A 429 also sets `accepted_rate` to the requests of the `RATE_WINDOW` before the refused one
    that the server did not refuse (never below half the rate when the window of refusals
    began, nor below `MIN_RATE`), and `rate`, the requests that may start per second, to
    `RATE_SHARE` of it (never raising it). Requests then start one every 1/rate seconds. Each answer adds
    RATE_GROWTH/rate, so the rate grows by about RATE_GROWTH per second, and only NEAR_GROWTH
    per second between that share and the accepted rate: the rate probes upwards, slowly where
    the server refused before. A `Retry-After` holds every request of the model until that time.
    """

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.in_flight = 0
        self.cuts = 0  # how often a 429 or a slow answer cut the limit
        self.paused_until = 0.0  # time.monotonic()
        self.rate: float | None = None  # requests a second; None until a 429
        self.accepted_rate: float | None = None  # what the server accepted when it last refused
        self._window_began = -RATE_WINDOW  # when the first request of the last refusals' window was sent
        self._window_rate: float | None = None  # the rate when that window began
        self._next_start = 0.0  # time.monotonic() at which the next request may start
        self._sent: deque[Ticket] = deque()  # the requests of the last two windows
        self._waiters = _Waiters()

    async def acquire(self) -> Ticket:
        """Wait for a free place and this request's turn at the rate; `release` it afterwards."""
        while True:
            await self._past_pause()
            if self.in_flight < max(1, int(self.limit)):
                self.in_flight += 1
                break
            await self._waiters.wait()
        try:
            await self._paced()
        except BaseException:  # cancelled while waiting its turn: the place is free again
            self.release()
            raise
        now = time.monotonic()
        ticket = Ticket(now, self.cuts)
        self._sent.append(ticket)
        while self._sent and self._sent[0].sent_at < now - 2 * RATE_WINDOW:
            self._sent.popleft()
        return ticket

    async def _paced(self) -> None:
        """Wait until the request may start: past any Retry-After, then its turn at the rate
        (each request takes the next turn, one every 1/rate seconds)."""
        await self._past_pause()
        if self.rate is not None:
            now = time.monotonic()
            start = max(now, self._next_start)
            self._next_start = start + 1 / self.rate
            if start > now:
                await asyncio.sleep(start - now)
            await self._past_pause()  # a Retry-After that came while it waited its turn

    async def _past_pause(self) -> None:
        while (pause := self.paused_until - time.monotonic()) > 0:
            await asyncio.sleep(pause)

    def release(self) -> None:
        self.in_flight -= 1
        self._waiters.wake()

    def answered(self) -> None:
        if self.limit < self.ceiling:
            self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)
            self._waiters.wake()
        if self.rate is not None:
            known = self.accepted_rate
            near = known is not None and RATE_SHARE * known <= self.rate < known
            self.rate += (NEAR_GROWTH if near else RATE_GROWTH) / self.rate

    def slowed(self, ticket: Ticket) -> None:
        """The server answered others while this request waited past its timeout: fewer in
        flight, so that what is sent is answered within it."""
        self._cut(ticket)

    def rate_limited(self, ticket: Ticket, retry_after: float | None) -> None:
        """The server refused this request (a 429)."""
        ticket.refused = True
        self._cut(ticket)
        # The requests of the window up to its send not refused (so far: each 429 of a burst
        # lowers it); those sent with it in one burst count too, whatever order they reached
        # the server in.
        since, until = ticket.sent_at - RATE_WINDOW, ticket.sent_at + BURST
        accepted = sum(1 for t in self._sent if since < t.sent_at <= until and not t.refused)
        # At most halved by the refusals of one window: the server refuses for a whole window what
        # it counted before the rate changed, and a count skewed by a busy machine (a burst that
        # reached the server late) must not halve it again and again. The first burst, sent
        # unpaced, is a window of its own: its refusals bring the rate down to what it accepted.
        length = BURST if self._window_rate is None else RATE_WINDOW
        if ticket.sent_at >= self._window_began + length:
            self._window_began, self._window_rate = ticket.sent_at, self.rate
        learned = max(MIN_RATE, accepted / RATE_WINDOW, (self._window_rate or 0.0) / 2)
        self.accepted_rate = learned if self.accepted_rate is None else min(self.accepted_rate, learned)
        paced = RATE_SHARE * learned
        self.rate = paced if self.rate is None else min(self.rate, paced)
        if retry_after is not None:
            self.paused_until = max(self.paused_until, time.monotonic() + retry_after)
            self._next_start = max(self._next_start, self.paused_until)  # the turns resume after it

    def _cut(self, ticket: Ticket) -> None:
        if ticket.cuts == self.cuts:
            self.limit = max(1.0, self.limit / 2)
            self.cuts += 1


@dataclass(frozen=True)
class Failure:
    """How a provider classifies one failed attempt."""

    message: str
    retryable: bool
    retry_after: float | None = None
    # Does it say the server is not answering? None: whenever it is retryable.
    outage: bool | None = None

    @property
    def counts_as_outage(self) -> bool:
        return self.retryable if self.outage is None else self.outage

    @property
    def slow_down(self) -> bool:
        """A retryable refusal that is no outage: a rate limit (429)."""
        return self.retryable and not self.counts_as_outage


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 3  # attempts after the first
    base_delay: float = 0.5
    max_delay: float = 60.0


def within_cap(failure: Failure) -> Failure:
    """A refusal whose Retry-After is past `MAX_RETRY_AFTER` fails like a 5xx: retried on the
    usual backoff, counted towards the breaker, and the run goes on."""
    if failure.retry_after is None or failure.retry_after <= MAX_RETRY_AFTER:
        return failure
    message = f"{failure.message} (Retry-After {failure.retry_after:g} s is past the cap of {MAX_RETRY_AFTER:g} s)"
    return Failure(message, retryable=True, retry_after=None, outage=True)


def is_retryable_status(status: int | None) -> bool:
    return status is not None and (status == 429 or status == 408 or status >= 500)


def parse_retry_after(value: object) -> float | None:
    """Seconds from a Retry-After header value (only the delta-seconds form)."""
    try:
        seconds = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 else None


async def call(
    send: Callable[[], Awaitable[T]],
    *,
    semaphore: asyncio.Semaphore,
    timeout: float,
    policy: RetryPolicy,
    classify: Callable[[BaseException], Failure],
    breaker: Breaker | None = None,
    throttle: Throttle | None = None,
    resend_timeouts: bool = True,
) -> T:
    """`send()`'s result, attempted under `semaphore` with each attempt bounded by `timeout`,
    retried as `policy` and `classify` say. `breaker` and `throttle` are the model's own (one
    each per model, shared by all its calls); without them the call neither waits for a probe
    nor slows down on 429s, and an attempt ends after `timeout` whatever else the server does.
    `resend_timeouts=False`: an attempt not answered in time is not sent again but raised at
    once (`ModelError.timed_out`), for a caller that can ask for less (a smaller batch)."""
    attempts = 0
    retried = 0  # retries used; a failed probe uses none: it tests the server, not this request
    longest = longest_wait(timeout, throttle.ceiling) if throttle is not None and breaker is not None else timeout
    while True:
        probe = await breaker.admit() if breaker is not None else False
        ticket: Ticket | None = None
        busy = timed_out = False
        try:
            async with semaphore:
                if throttle is not None:
                    ticket = await throttle.acquire()
                try:
                    if breaker is not None and breaker.is_open and not probe:
                        continue  # it opened while this call waited its turn: wait for a probe's answer
                    attempts += 1
                    slowed = _slowed(throttle, ticket)
                    heard = (lambda: breaker.heard_at) if breaker is not None else None
                    result = await bounded(send(), timeout, longest, heard, slowed)
                finally:
                    if throttle is not None:
                        throttle.release()
        except BusyServer as error:
            busy = True
            failure = Failure(str(error), retryable=True, outage=False)
        except TimeoutError:
            timed_out = True
            failure = Failure(f"timed out after {timeout:g} s", retryable=True)
        except EmptyAnswer as error:
            failure = Failure(f"empty answer ({error})", retryable=True)
        except (asyncio.CancelledError, ModelError):
            if probe and breaker is not None:
                breaker.abandon_probe()
            raise
        except Exception as error:  # providers raise many types; classify decides
            failure = within_cap(classify(error))
        else:
            if breaker is not None:
                breaker.success()
            if throttle is not None:
                throttle.answered()
            return result
        if breaker is not None and not busy:  # a busy server answered others: nothing to count here
            if failure.counts_as_outage:
                breaker.failure(failure.message, probe=probe)
            else:
                breaker.success()  # the server answered, if only to refuse
        if throttle is not None and ticket is not None and failure.slow_down and not busy:
            throttle.rate_limited(ticket, failure.retry_after)
        if not (probe and failure.counts_as_outage):
            retried += 1
        if breaker is not None and breaker.down is not None and failure.retryable and retried <= policy.retries:
            raise ModelError(breaker.down, attempts=attempts)
        if not failure.retryable or retried > policy.retries or ((busy or timed_out) and not resend_timeouts):
            plural = "s" if attempts > 1 else ""
            message = f"{failure.message} (after {attempts} attempt{plural})"
            raise ModelError(message, attempts=attempts, timed_out=timed_out, busy=busy)
        if breaker is None or not breaker.is_open:  # an open breaker paces the next attempt itself
            await asyncio.sleep(backoff(max(retried, 1), failure.retry_after, policy))


# A limit's check that runs this many seconds after it was due finds the loop held (a starved
# process, one stopped with Ctrl-Z): it looks again this much later, once what arrived is read,
# and again while each look comes more than that late (the loop is held still).
LATE_CHECK = 0.25
LATE_CHECK_GRACE = 0.05


def longest_wait(timeout: float, concurrency: int) -> float:
    """The longest an attempt waits while the server answers the model's other requests: its
    own timeout behind a queue of the model's other requests, each answered within one."""
    return timeout * (concurrency + 1)


def _slowed(throttle: Throttle | None, ticket: Ticket | None) -> Callable[[], None] | None:
    if throttle is None or ticket is None:
        return None
    return lambda: throttle.slowed(ticket)


async def bounded(
    request: Awaitable[T],
    timeout: float,
    longest: float,
    heard: Callable[[], float] | None = None,
    slowed: Callable[[], None] | None = None,
) -> T:
    """`request`'s result. It ends in `TimeoutError` once `timeout` seconds pass in which the
    server answered nothing (`heard()`: the time of its last answer to any request of the
    model), and in `BusyServer` after `longest` seconds in all. `slowed()` is called once when
    the request passes its timeout while the server answers others. A check that runs late
    because the loop could not run (`LATE_CHECK`) first lets the loop read what arrived.

    The request runs in the caller's own task, watched by one timer that cancels it when a
    limit passes (as `asyncio.timeout` does): no task and no waiter per request, which were
    much of the client layer's cost per request."""
    task = asyncio.current_task()
    assert task is not None, "bounded() runs in a task"
    loop = asyncio.get_running_loop()
    began = time.monotonic()
    cancelling = task.cancelling()
    verdict: list[TimeoutError] = []
    said_slow = False
    timer: asyncio.TimerHandle | None = None
    due = began  # when the next check was meant to run
    held = False  # the last check found the loop held

    def check() -> None:
        """At each moment a limit may pass: stop the request, or look again at the next one."""
        nonlocal said_slow, timer, due, held
        now = time.monotonic()
        if now - due > (LATE_CHECK_GRACE if held else LATE_CHECK):
            # The loop could not run for a while (a starved or stopped process): answers that
            # came meanwhile wait unread, and would lose to this check. Look again once the loop
            # has read them.
            held = True
            due = now + LATE_CHECK_GRACE
            timer = loop.call_later(LATE_CHECK_GRACE, check)
            return
        held = False
        quiet_from = max(began, heard()) if heard is not None else began
        if now >= quiet_from + timeout:
            verdict.append(TimeoutError(f"timed out after {timeout:g} s"))
        elif now >= began + longest:
            verdict.append(
                BusyServer(
                    f"no answer after {longest:g} s while the server answered other requests "
                    f"(busy, not down; timeout {timeout:g} s)"
                )
            )
        else:
            if not said_slow and now >= began + timeout:
                said_slow = True
                if slowed is not None:
                    slowed()
            wake = min(quiet_from + timeout, began + longest)
            if not said_slow:
                wake = min(wake, began + timeout)
            due = max(wake, now)
            timer = loop.call_later(due - now, check)
            return
        if timer is not None:  # the request is under way: cancelled where it waits
            task.cancel()

    check()
    if verdict:  # no time at all: never sent
        if asyncio.iscoroutine(request):
            request.close()
        raise verdict[0]
    try:
        result = await request
    except asyncio.CancelledError:
        if verdict and task.uncancel() <= cancelling:
            raise verdict[0] from None
        raise  # cancelled from outside: passed on
    finally:
        if timer is not None:
            timer.cancel()
    if verdict:  # the request answered although it was cancelled: its answer stands
        task.uncancel()
    return result


def backoff(attempt: int, retry_after: float | None, policy: RetryPolicy) -> float:
    """Wait what the server asked for; otherwise double each time, with jitter so that many
    concurrent callers do not retry in lockstep."""
    if retry_after is not None:
        return min(retry_after, policy.max_delay)
    delay = policy.base_delay * 2 ** (attempt - 1)
    return min(delay, policy.max_delay) * random.uniform(0.5, 1.0)


class Client:
    """One model's calls made robust: at most `concurrency` in flight, each attempt bounded by
    `timeout` (up to `longest_wait` while the server answers others), retried as `retries`
    allows, paced by the model's throttle and stopped by its breaker. One per model, shared by
    all its calls."""

    def __init__(self, settings: CallSettings) -> None:
        self.timeout = settings.timeout
        self.policy = RetryPolicy(retries=settings.retries)
        self.breaker = Breaker(settings.breaker_after, patience=settings.patience)
        self.throttle = Throttle(settings.concurrency)
        self.longest_wait = longest_wait(settings.timeout, settings.concurrency)
        self._concurrency = settings.concurrency
        self._semaphore: asyncio.Semaphore | None = None

    @property
    def semaphore(self) -> asyncio.Semaphore:
        # Made on first use, so that it belongs to the loop the calls run on.
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self._concurrency)
        return self._semaphore

    async def call(
        self,
        send: Callable[[], Awaitable[T]],
        classify: Callable[[BaseException], Failure],
        resend_timeouts: bool = True,
    ) -> T:
        """`send()`'s result (see `call`)."""
        return await call(
            send,
            semaphore=self.semaphore,
            timeout=self.timeout,
            policy=self.policy,
            classify=classify,
            breaker=self.breaker,
            throttle=self.throttle,
            resend_timeouts=resend_timeouts,
        )
