"""The models this process launched on servers, terminated however the process ends.

A provider that launches a model on a server (Xinference) says so with `launched(key,
terminate)`, and `terminated(key)` once it has terminated it at the run's end. Whatever is
still registered when the process is stopped before that is terminated here:

- on SIGTERM (what `timeout`, a cancelled CI job and `kill` send) and SIGINT (Ctrl-C): the
  models are terminated, then the signal does what it did before (the previous handler runs,
  or the default action ends the process);
- at exit, for every other way the interpreter ends.

The handlers are installed by `arm()`, from the main thread (where Python runs them), before a
provider launches anything; a process that launches nothing is never touched.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)

_lock = threading.RLock()  # re-entered by a signal handler that interrupts its own thread
_terminators: dict[str, Callable[[], None]] = {}  # key (a server and a model uid) -> terminate it
_previous: dict[int, Any] = {}  # signal -> the handler before ours
_armed = False


def arm() -> None:
    """Install the handlers (once per process). Outside the main thread, where Python refuses
    signal handlers, only the exit hook is installed."""
    global _armed
    with _lock:
        if _armed:
            return
        _armed = True
    atexit.register(terminate_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for number in SIGNALS:
        _previous[number] = signal.getsignal(number)
        signal.signal(number, _on_signal)


def launched(key: str, terminate: Callable[[], None]) -> None:
    """`terminate()` ends a model this process launched; it runs at the latest when the process
    ends."""
    with _lock:
        _terminators[key] = terminate


def terminated(key: str) -> None:
    with _lock:
        _terminators.pop(key, None)


def running() -> list[str]:
    """The keys of the models launched and not terminated yet."""
    with _lock:
        return sorted(_terminators)


def terminate_all() -> None:
    """Terminate every model still registered (each once, whatever the others do)."""
    with _lock:
        pending = sorted(_terminators.items())
        _terminators.clear()
    for key, terminate in pending:
        try:
            terminate()
        except Exception:  # the process is ending: one failure must not keep the others running
            log.warning("could not terminate %s", key, exc_info=True)


def _on_signal(number: int, frame: FrameType | None) -> None:
    terminate_all()
    previous = _previous.get(number, signal.SIG_DFL)
    if callable(previous):
        previous(number, frame)  # SIGINT's default raises KeyboardInterrupt: pytest ends the run
    elif previous == signal.SIG_DFL:
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
