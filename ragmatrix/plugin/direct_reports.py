"""An item's reports, handed to the plugins that hear them without pluggy's dispatch.

Reporting a cached item is three hook calls (`pytest_runtest_logstart`, `_logreport` with its
setup report, `_logfinish`), and on a fully cached run of a large matrix those calls were most
of the work past collection: pluggy's dispatch, log capture switching phases that capture
nothing, and the terminal asking `pytest_report_teststatus` and its verbosity again for every
item. Where every plugin that implements the three hooks is pytest's own or this one, and none
wraps them, the implementations are called here directly, in pluggy's order (for a cached
item, and for an item whose answers were sent ahead, which the plugin runs itself), with:

- log capture's left out while it shows no live log (its handler then does nothing);
- the terminal's `pytest_runtest_logstart` left out where it writes nothing (`-q`);
- the terminal's `pytest_runtest_logreport`, where it writes one letter per item (verbosity 0
  or less), done as it does it, with the status asked once per session for a cached item's
  report and for a passed one (each is always the same); in a run of cached items, where the
  next report follows at once, the letters are kept and written together, at the end of the
  run of cached items, before the line's progress note, and at least every `FLUSH_EVERY_S`
  (where stdout is unbuffered, as under PYTHONUNBUFFERED, each write is a system call);
- a run of cached items of one file given in one call (`report_run`), where the terminal writes
  letters and, before an item, at most the file's name: each implementation hears every report
  in turn, and the letters that fill a line short of its progress note are written as one.

At `-v` the terminal's own implementation writes each item's line. Anything else (JUnit XML,
xdist, another plugin hearing reports, a pytest whose terminal has changed shape) takes pluggy's
path. `tests/test_direct_reports.py` checks that both paths print the same and count the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

FLUSH_EVERY_S = 0.1
# The hooks of an item's report, and the arguments pluggy gives each.
HOOKS = {
    "pytest_runtest_logstart": ("nodeid", "location"),
    "pytest_runtest_logreport": ("report",),
    "pytest_runtest_logfinish": ("nodeid", "location"),
}
# The plugins whose implementations may be called here: pytest's own that hear item reports,
# and this package's.
_KNOWN = ("_pytest.terminal", "_pytest.logging", "_pytest.main", "_pytest.cacheprovider", "_pytest.stepwise")
_OWN = "ragmatrix."
# What the terminal's report of one item reads and writes (pytest 9); without any of them the
# hooks are called through pluggy.
_TERMINAL_NAMES = (
    "_add_stats",
    "_progress_nodeids_reported",
    "_tw",
    "_show_progress_info",
    "_is_last_item",
    "_screen_width",
    "_write_progress_information_if_past_edge",
    "flush",
)


class DirectReports:
    """The three hooks of an item's reports, as direct calls (`for_session`)."""

    def __init__(self, config: pytest.Config, calls: dict[str, list[Callable[..., Any]]]) -> None:
        self.config = config
        self._calls = calls
        self._statuses: dict[tuple[str, str], tuple[str, str, str, dict[str, bool]]] = {}
        self._flushed_at = 0.0
        self._more_soon = False
        self._terminal: Any = None
        self._pending: list[str] = []  # letters (with their colours) not written yet
        self._letter: Callable[..., None] | None = None  # the terminal's report, one letter an item
        self._room = 0  # what the line leaves for its progress note (`_progress_room`)
        self.takes_runs = False  # may a run of cached items be reported in one call (`report_run`)?

    def start(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        calls = self._calls["pytest_runtest_logstart"]
        if calls:
            self.write_pending()  # the terminal may name the item's file: the letters before it first
        for call in calls:
            call(nodeid=nodeid, location=location)

    def report(self, report: pytest.TestReport, more_soon: bool = False) -> None:
        """`more_soon`: another report follows at once (a cached item's), so the terminal's
        output may wait for it (flushed at most every `FLUSH_EVERY_S`)."""
        self._more_soon = more_soon
        for call in self._calls["pytest_runtest_logreport"]:
            call(report=report)

    def finish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        for call in self._calls["pytest_runtest_logfinish"]:
            call(nodeid=nodeid, location=location)

    def report_run(
        self, nodeid: str, location: tuple[str, int | None, str], reports: list[pytest.TestReport], more_soon: bool
    ) -> None:
        """The reports of a run of cached items of one file (`takes_runs`), each a setup skipped
        as cached, as the three calls per item would give them: the first item's start (the
        terminal names the file there, once), then each implementation hears every report in
        turn. `nodeid` and `location`: the first item's; `more_soon`: a cached item follows."""
        self.start(nodeid, location)
        for call in self._calls["pytest_runtest_logreport"]:
            if call is self._letter:
                self._letters(reports, more_soon)
            else:
                for report in reports:
                    call(report=report)

    def _letters(self, reports: list[pytest.TestReport], more_soon: bool) -> None:
        """The terminal's letters for reports of one status: those that fit on the line short of
        its progress note's place in one go, the others (near the note) one at a time."""
        assert self._letter is not None
        terminal, writer = self._terminal, self._terminal._tw
        category, letter, word, markup = self._status_of(reports[0])
        in_one_go = len(letter) == 1 and letter.isascii() and letter.isprintable()
        marked = writer.markup(letter, **markup)
        done, count = 0, len(reports)
        while done < count:
            fitting = min(self._letters_fitting(), count - done) if in_one_go else 0
            if fitting > 0:
                chunk = reports[done : done + fitting]
                done += fitting
                terminal._current_logreport = chunk[-1]
                terminal._tests_ran = True
                terminal._add_stats(category, chunk)
                terminal._progress_nodeids_reported.update([report.id for report in chunk])
                writer._current_line += letter * fitting
                self._pending.append(marked * fitting)
                now = time.monotonic()
                if now - self._flushed_at >= FLUSH_EVERY_S or (done == count and not more_soon):
                    self.write_pending()
                    terminal.flush()
                    self._flushed_at = now
            if done < count:
                self._more_soon = more_soon or done + 1 < count
                self._letter(reports[done])
                done += 1

    def _letters_fitting(self) -> int:
        """How many letters the line takes before it may near its progress note's place (where
        the terminal's own check must run): every one where it shows no progress."""
        terminal = self._terminal
        if not terminal._show_progress_info:
            return 1 << 30
        line = terminal._tw._current_line
        if not (line.isascii() and line.isprintable()):
            return 0
        return terminal._screen_width - self._room - len(line) - 1

    def terminal_letter(self, terminal: Any) -> Callable[..., None]:
        """The terminal's `pytest_runtest_logreport` at verbosity 0 or less (one letter per
        item), as pytest 9 writes it."""

        self._terminal = terminal
        writer = terminal._tw
        room = self._room = _progress_room(terminal)

        def write(report: pytest.TestReport) -> None:
            category, letter, word, markup = self._status_of(report)
            terminal._current_logreport = report
            terminal._tests_ran = True
            terminal._add_stats(category, [report])
            if not letter and not word:
                return
            terminal._progress_nodeids_reported.add(report.id)
            if self._more_soon and "\n" not in letter:  # `writer.write`'s bookkeeping; the write waits
                writer._current_line += letter
                self._pending.append(writer.markup(letter, **markup))
            else:
                self.write_pending()
                writer.write(letter, **markup)
            if terminal._show_progress_info and not terminal._is_last_item and _near_the_edge(terminal, room):
                self.write_pending()
                terminal._write_progress_information_if_past_edge()
            now = time.monotonic()
            if not self._more_soon or now - self._flushed_at >= FLUSH_EVERY_S:
                self.write_pending()
                terminal.flush()
                self._flushed_at = now

        self._letter = write
        return write

    def write_pending(self) -> None:
        """Write the letters kept for the next write (before anything else writes)."""
        if self._pending:
            self._terminal._tw.write_raw("".join(self._pending))
            self._pending.clear()

    def _status_of(self, report: pytest.TestReport) -> tuple[str, str, str, dict[str, bool]]:
        """The report's status: asked once per session for a passed call and for a setup
        skipped for a reason (every cached item's), each time for anything else."""
        if report.passed and report.when == "call" and not hasattr(report, "wasxfail"):
            kind = ("passed", "")
        elif report.skipped and report.when == "setup" and isinstance(report.longrepr, tuple):
            kind = ("skipped", str(report.longrepr[2]))
        else:
            return _status_of(self.config, report)
        known = self._statuses.get(kind)
        if known is None:
            known = self._statuses[kind] = _status_of(self.config, report)
        return known


class PluggyReports:
    """The same three calls, through pluggy (`item.ihook`): where `for_session` says no."""

    def __init__(self, hooks: Any) -> None:
        self._hooks = hooks

    def start(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self._hooks.pytest_runtest_logstart(nodeid=nodeid, location=location)

    def report(self, report: pytest.TestReport, more_soon: bool = False) -> None:
        self._hooks.pytest_runtest_logreport(report=report)

    def finish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self._hooks.pytest_runtest_logfinish(nodeid=nodeid, location=location)


_DIRECT = pytest.StashKey[DirectReports | None]()


def write_pending(config: pytest.Config) -> None:
    """Write the letters the session's direct calls keep, if any: before an item that pytest
    reports itself, and at the end of the items."""
    direct = config.stash.get(_DIRECT, None)
    if direct is not None:
        direct.write_pending()


def for_session(config: pytest.Config) -> DirectReports | None:
    """The direct calls for this session's items, worked out on first use (every plugin is
    registered by then), or None where pluggy must dispatch them."""
    if _DIRECT not in config.stash:
        config.stash[_DIRECT] = _direct(config)
    return config.stash[_DIRECT]


def _direct(config: pytest.Config) -> DirectReports | None:
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    direct = DirectReports(config, {})
    for hook in HOOKS:
        caller = getattr(config.pluginmanager.hook, hook, None)
        if caller is None:
            return None
        calls: list[Callable[..., Any]] = []
        for implementation in reversed(caller.get_hookimpls()):  # pluggy's order: last registered first
            module = str(getattr(implementation.function, "__module__", ""))
            wraps = getattr(implementation, "hookwrapper", False) or getattr(implementation, "wrapper", False)
            if wraps or not (module in _KNOWN or module.startswith(_OWN)):
                return None
            if module == "_pytest.logging" and _shows_no_live_log(implementation.plugin):
                continue
            if module == "_pytest.terminal":
                if implementation.plugin is not terminal or not _terminal_has_its_shape(terminal):
                    return None
                if hook == "pytest_runtest_logstart" and not (terminal.showlongtestinfo or terminal.showfspath):
                    continue  # `-q`: it writes nothing
                if hook == "pytest_runtest_logreport" and _letters(config):
                    calls.append(direct.terminal_letter(terminal))
                    continue
            calls.append(_called_with(implementation, hook))
        direct._calls[hook] = calls
    starts, finishes = direct._calls["pytest_runtest_logstart"], direct._calls["pytest_runtest_logfinish"]
    direct.takes_runs = direct._letter is not None and not finishes and _at_most_the_file_named(starts, terminal)
    return direct


def _at_most_the_file_named(starts: list[Callable[..., Any]], terminal: Any) -> bool:
    """Does an item's start at most name its file? (The terminal's, at the default verbosity,
    names it where it differs from the last item's: in a run of one file's items, only the
    first item's start writes.)"""
    if not starts:
        return True
    return len(starts) == 1 and not terminal.showlongtestinfo and getattr(starts[0], "__self__", None) is terminal


def _called_with(implementation: Any, hook: str) -> Callable[..., Any]:
    """The implementation, given only the arguments it names (as pluggy gives them)."""
    function, names = implementation.function, tuple(implementation.argnames)
    if names == HOOKS[hook]:
        return function  # type: ignore[no-any-return]
    return lambda **given: function(**{name: given[name] for name in names})


def _shows_no_live_log(plugin: Any) -> bool:
    """Log capture's hooks only switch its live-log handler's phase; a handler that shows
    nothing (no `--log-cli-level`) does nothing with it."""
    handler = getattr(plugin, "log_cli_handler", None)
    return type(handler).__name__ == "_LiveLoggingNullHandler"


def _progress_room(terminal: Any) -> int:
    """The room the terminal leaves at the end of a line of letters for its progress note, as
    pytest 9 measures the note (" [100%]", " [N/N]" or " 99h 59m") with the space before it,
    and a little more: a letter kept to be written later must not miss the note's turn."""
    mode = terminal._show_progress_info
    if mode == "count":
        collected = getattr(terminal._session, "testscollected", 0)
        note = len(f" [{collected}/{collected}]")
    else:
        note = len(" 99h 59m") if mode == "times" else len(" [100%]")
    return note + 1 + 4


def _near_the_edge(terminal: Any, room: int) -> bool:
    """Might the line have reached the progress note's place? (Only then does the terminal's
    own check, which measures the line's display width, need to run: a line of printable ASCII
    is as wide as it is long.)"""
    line = terminal._tw._current_line
    if not (line.isascii() and line.isprintable()):
        return True
    return len(line) + room >= terminal._screen_width


def _terminal_has_its_shape(terminal: Any) -> bool:
    writer = getattr(terminal, "_tw", None)
    written = isinstance(getattr(writer, "_current_line", None), str)
    return (
        written
        and hasattr(writer, "markup")
        and hasattr(writer, "write_raw")
        and all(hasattr(terminal, name) for name in _TERMINAL_NAMES)
        and int(pytest.__version__.split(".")[0]) == 9
    )


def _letters(config: pytest.Config) -> bool:
    """Does the terminal write one letter per item (verbosity 0 or less)?"""
    verbosity = config.get_verbosity(getattr(pytest.Config, "VERBOSITY_TEST_CASES", "test_cases"))
    return verbosity <= 0


def _status_of(config: pytest.Config, report: pytest.TestReport) -> tuple[str, str, str, dict[str, bool]]:
    """The category, letter, word and colour pytest's terminal gives this report."""
    category, letter, word = config.hook.pytest_report_teststatus(report=report, config=config)
    markup: dict[str, bool] | None = None
    if isinstance(word, tuple):
        word, markup = word
    if markup is None:  # as the terminal colours a status that names no colour
        was_xfail = hasattr(report, "wasxfail")
        if report.passed:
            markup = {"yellow": True} if was_xfail else {"green": True}
        else:
            markup = {"red": True} if report.failed else {"yellow": True} if report.skipped else {}
    return category, letter, word, markup
