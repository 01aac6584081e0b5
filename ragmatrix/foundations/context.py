"""One run's context: everything a pytest session or a command holds from its start to its end.

A run (`pytest benchmark`, `ragmatrix annotate`, ...) begins with `start_run(root)`, which reads
`<root>/.env` (variables already set win), puts the caches under `<root>/.benchmark_cache`, and
makes the new context the active one. What the run remembers lives in its context, never in a
module:

- the event loop every model call runs on (on a thread of its own, `LoopThread`, from the first
  call to the run's end; uvloop's where it is installed, `new_loop`), and the async HTTP
  clients made on it;
- the variables whose values are secrets (those models.yaml declares, see `ragmatrix.foundations.secrets`);
- the way a progress bar reaches the terminal past pytest's capture;
- the parts that the modules below keep per run (`part`): the model registry, the family and
  provider scans, the corpora, datasets, chunks and indexes the retrieval families read, the
  fingerprints of model folders.

A second run in the same process (pytest run inside a test, a long-lived process) starts a new
context and shares none of it, so a corpus file edited between two runs is read again. `end()`
closes the run and makes the context before it active again.

`close()` ends the run's work in an order that loses nothing: what is still running on the loop
is cancelled and awaited, the async clients are closed on the loop, the loop is closed, and then
the parts (models, caches) are closed. Code that runs outside any run (a script that imports a
family) gets a context made on first use, rooted at the working directory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
CACHE_FOLDER_NAME = ".benchmark_cache"
Closer = Callable[[], Coroutine[Any, Any, Any]]

log = logging.getLogger(__name__)


class RunContext:
    def __init__(self, root: Path, *, use_cache: bool = True) -> None:
        self.root = Path(root)
        self.cache_folder = self.root / CACHE_FOLDER_NAME  # RAGMATRIX_CACHE_DIR wins (ragmatrix.foundations.cache)
        self.use_cache = use_cache  # read and write the response and embedding caches
        self.secret_names: set[str] = set()  # variables models.yaml says hold secrets
        # Progress bars are drawn inside this (pytest's capture suspended); None: on stderr as it is.
        self.suspend_capture: Callable[[], AbstractContextManager[None]] | None = None
        self._parts: dict[Callable[[RunContext], Any], Any] = {}
        self._thread: LoopThread | None = None
        self._closers: list[Closer] = []

    def describe(self) -> str:
        """The settings a run starts with, in one line (logged when it starts)."""
        caches = "on" if self.use_cache else "off"
        return f"root {self.root}, caches {self.cache_folder} (response and embedding caches {caches})"

    # -- what modules keep per run -----------------------------------------------------------

    def part(self, make: Callable[[RunContext], T]) -> T:
        """The run's `make(run)`, made on first use: a module's state for this run alone."""
        try:
            return self._parts[make]  # type: ignore[no-any-return]
        except KeyError:
            made = self._parts[make] = make(self)
            return made

    # -- the event loop ----------------------------------------------------------------------

    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop_thread().loop

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """`coroutine`'s result, run on the run's loop in a copy of the caller's context (the
        item's sample, usage and cost attribution travel with it); the caller waits."""
        return self._loop_thread().run(coroutine)

    def at_close(self, closer: Closer) -> None:
        """Have the loop's closing await `closer()` before the loop closes: an HTTP session made
        on the loop is closed where it lives. A closer given twice is awaited once."""
        if closer not in self._closers:
            self._closers.append(closer)

    def close_loop(self) -> None:
        """Cancel what still runs on the loop and wait for it, close the async clients made on
        it, and close it; the next `run` makes a new loop."""
        thread, self._thread = self._thread, None
        closers, self._closers = self._closers, []
        if thread is None:
            return
        try:
            thread.run(_cancel_pending())
        except Exception:  # cleanup is best effort: the run's results are already stored
            log.debug("cancelling the loop's tasks failed", exc_info=True)
        for closer in closers:
            try:
                thread.run(closer())
            except Exception:  # cleanup is best effort: the run's results are already stored
                log.debug("closing a client failed", exc_info=True)
        thread.close()

    def _loop_thread(self) -> LoopThread:
        if self._thread is None:
            self._thread = LoopThread()
        return self._thread

    # -- the end -----------------------------------------------------------------------------

    def close(self) -> None:
        """End the run's work: the loop first (nothing runs on it afterwards), then each part
        that holds something (`close()`), the newest first. Closing twice is harmless, and the
        parts can still be read (what a run did, for its summary and its tests)."""
        self.close_loop()
        for part in reversed(list(self._parts.values())):
            close = getattr(part, "close", None)
            if close is not None:
                close()

    def end(self) -> None:
        """Close the run and make the context before it the active one again."""
        try:
            self.close()
        finally:
            if self in _active:
                _active.remove(self)

    def __enter__(self) -> RunContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()


SIGNAL_CHECK_S = 0.1  # how often a caller waiting for the loop looks for a signal to handle


class LoopThread:
    """An event loop running on a thread of its own for as long as the run needs it: answers are
    read as they arrive, whatever the caller's thread is doing (running an item, writing a row),
    so a connection is free again at once and a request's latency is the server's. The caller
    hands it coroutines and waits for their results (`run`); work that needs the CPU (a local
    model's encode) stays in the caller's thread, off the loop."""

    def __init__(self) -> None:
        self.loop = new_loop()
        self._thread = threading.Thread(target=self._serve, name="ragmatrix-event-loop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """`coroutine`'s result, run as a task on the loop in a copy of the caller's context. A
        caller interrupted while it waits (Ctrl-C) cancels the task."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a model was asked synchronously from the run's event loop: await it instead")
        context = contextvars.copy_context()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        started: list[asyncio.Task[T]] = []

        def start() -> None:
            task = self.loop.create_task(coroutine, context=context)
            started.append(task)
            task.add_done_callback(lambda _: _settle(task, done))

        self.loop.call_soon_threadsafe(start)
        try:
            while not done.done():
                # Never one wait without a timeout: the kernel may hand a Ctrl-C to another thread
                # (the loop's, a sampler's), and Python then runs its handler in this thread only
                # once this thread wakes, which a blocked lock wait never does on its own.
                concurrent.futures.wait((done,), timeout=SIGNAL_CHECK_S)
            return done.result()
        except BaseException:
            if not done.done():  # interrupted while waiting: the task must not outlive its caller
                self.loop.call_soon_threadsafe(lambda: [task.cancel() for task in started])
            raise

    def close(self) -> None:
        """Finalise async generators and the default executor, stop the loop, wait for its thread
        and close the loop."""
        for finish in (self.loop.shutdown_asyncgens, self.loop.shutdown_default_executor):
            try:
                self.run(finish())
            except Exception:  # cleanup is best effort: the run's results are already stored
                log.debug("finishing the loop failed", exc_info=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def new_loop() -> asyncio.AbstractEventLoop:
    """The run's event loop: uvloop's where it is installed (a dependency but on Windows), whose
    loop and transports are written in C on libuv and spend less CPU a request on the loop's
    thread than asyncio's (`docs/scale.md`); asyncio's own otherwise. Both carry the same
    protocols and transports, so the clients run on either."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _settle(task: asyncio.Task[T], done: concurrent.futures.Future[T]) -> None:
    """Hand a task's outcome to the thread waiting for it."""
    if task.cancelled():
        done.set_exception(asyncio.CancelledError())  # as awaiting it would raise
    elif task.exception() is not None:
        done.set_exception(task.exception())
    else:
        done.set_result(task.result())


async def _cancel_pending() -> None:
    current_task = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current_task]
    for task in pending:
        task.cancel()
    # Gathered with their exceptions, so that none is reported as never retrieved.
    await asyncio.gather(*pending, return_exceptions=True)


# The runs under way in this process, the active one last. A run inside another (pytest run
# from a test) is pushed above it and removed at its end.
_active: list[RunContext] = []


def start_run(root: Path, *, use_cache: bool = True) -> RunContext:
    """Start a run rooted at `root` (the folder holding `benchmark/`): `.env` read, the caches
    under `<root>/.benchmark_cache`, and the new context active until `end()`. The pytest plugin
    and every command that builds models start their runs here."""
    root = Path(root)
    load_dotenv(root)
    run = RunContext(root, use_cache=use_cache)
    _active.append(run)
    log.debug("run started: %s", run.describe())
    return run


def current() -> RunContext:
    """The active run's context; outside any run, one made for the process on first use."""
    if not _active:
        _active.append(RunContext(Path.cwd()))
    return _active[-1]


def load_dotenv(directory: Path) -> None:
    """API keys from `.env` in the folder; variables already set win."""
    path = directory / ".env"
    if path.is_file():
        from dotenv import load_dotenv as load

        load(path, override=False)
