"""Every use of pytest's and pytest-xdist's private API, in one place.

The plugin reaches past their public API where it has no public way to do something:

- `cached` as a status that counts as a success in the summary's colours (pytest colours a
  status it does not know yellow): `_pytest.terminal.KNOWN_TYPES`, `_pytest.terminal._color_for_type`
  and the terminal reporter's `_determine_main_color`;
- reporting a cached item, and running an item whose answers were sent ahead, without pytest's
  per-item set-up and tear-down, when nothing would be torn down after it: the session's
  `_setupstate.stack`, the fixtures an item's closure holds (`Function._fixtureinfo`), the
  value a session fixture keeps (`FixtureDef.cached_result`), pytest's call phase with its
  reports (`_pytest.runner.call_and_report`), the plugins that act in it (`HookImpl.function`,
  the `pdbinvoke` plugin), an item's own keywords (`NodeKeywords._markers`), the output
  captured in its phases (`Item._report_sections`), which of pytest's plugins ignore a
  passed setup or teardown report (by their modules' names) and the structured id pytest 9
  gives its reports (`Item.id`);
- running such an item without calling the protocol hook, doing what pytest's own wrappers of
  that hook do: the configured warning filters (`Config._catch_configured_warnings`), what
  `warnings.catch_warnings` sets and resets (`warnings._showwarnmsg_impl`,
  `_showwarning_orig`, `_filters_mutated`), the assertion plugin's wrapper itself
  (`_pytest.assertion.pytest_runtest_protocol`) and the faulthandler timeout
  (`_pytest.faulthandler.get_timeout_config_value`);
- the fixtures a test function takes, to call it once per iteration: `Function._fixtureinfo`;
- sending an item's requests while collection goes on, where its selection is known then:
  pytest's own `-k` matching (`_pytest.mark.KeywordMatcher`, `_pytest.mark.expression.Expression`),
  and, to send them as the test function is parametrized, the fixtures it takes
  (`Metafunc._arg2fixturedefs`, `FixtureDef.params`);
- drawing a progress bar past pytest's capture: the `capturemanager` plugin's
  `global_and_fixture_disabled`;
- on an xdist worker, the items it has been handed and not run yet, so that their requests are
  sent ahead: the worker's `torun` queue and `nextitem_index`;
- xdist's scope scheduling with the model as the scope: `LoadScopeScheduling._split_scope`.

Each use falls back to a slower or plainer path where the name is gone, so a new release never
breaks a run; `missing()` and `missing_in_run()` name what a release has changed, and
`tests/test_pytest_internals.py` fails with those names.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import sys
import warnings
import weakref
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

import pytest

# -- the summary's colours --------------------------------------------------------------------


def count_as_success(status: str, config: pytest.Config) -> None:
    """Colour `status` green in pytest's summary, and a run of only that status (and passes,
    skips) green too. Without the private names, the run still works, only in yellow."""
    from _pytest import terminal

    known = getattr(terminal, "KNOWN_TYPES", None)
    if isinstance(known, tuple) and status not in known:
        terminal.KNOWN_TYPES = (*known, status)  # type: ignore[assignment]
    colours = getattr(terminal, "_color_for_type", None)
    if isinstance(colours, dict):
        colours.setdefault(status, "green")
    reporter: Any = config.pluginmanager.get_plugin("terminalreporter")
    decide = getattr(reporter, "_determine_main_color", None)
    if reporter is None or decide is None or getattr(decide, "ragmatrix", False):
        return

    def determine_main_color(unknown_type_seen: bool) -> str:
        colour = decide(unknown_type_seen)
        bad = {"failed", "error", "warnings", "xpassed"} & set(reporter.stats)
        return "green" if colour == "yellow" and status in reporter.stats and not bad else colour

    determine_main_color.ragmatrix = True  # type: ignore[attr-defined]
    reporter._determine_main_color = determine_main_color


# -- running items ----------------------------------------------------------------------------


def setup_stack(session: pytest.Session) -> list[pytest.Item | pytest.Collector] | None:
    """The nodes pytest has set up and not torn down yet, outermost first; None where pytest
    does not say."""
    stack = getattr(getattr(session, "_setupstate", None), "stack", None)
    return list(stack) if stack is not None else None


def fixture_modules(item: pytest.Item) -> dict[str, str] | None:
    """Every fixture in the item's closure (autouse and dynamic parameters included), with the
    module of the definition it gets; None where pytest does not say."""
    info = getattr(item, "_fixtureinfo", None)
    closure = getattr(info, "names_closure", None)
    definitions = getattr(info, "name2fixturedefs", None)
    if not isinstance(closure, list) or not isinstance(definitions, dict):
        return None
    modules: dict[str, str] = {}
    for name in closure:
        found = definitions.get(name)
        function = getattr(found[-1], "func", None) if found else None
        modules[name] = str(getattr(function, "__module__", ""))
    return modules


def set_up_value(item: pytest.Item, name: str) -> tuple[bool, Any]:
    """The value of a fixture of the item's closure that pytest has already set up and keeps
    (a session fixture after its first use): (True, value), or (False, None) where it has none
    yet, its set-up failed, or pytest does not say."""
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", None)
    found = definitions.get(name) if isinstance(definitions, dict) else None
    cached = getattr(found[-1], "cached_result", None) if found else None
    if not isinstance(cached, tuple) or len(cached) != 3 or cached[2] is not None:
        return False, None
    return True, cached[0]


def know_location(item: pytest.Item, location: tuple[str, int | None, str]) -> None:
    """Give the item the location its reports carry, worked out already (pytest would resolve
    its file's path again for each item's call report: `Item.location`, a cached property)."""
    if isinstance(getattr(type(item), "location", None), functools.cached_property):
        item.__dict__["location"] = location


def forget_arguments(item: pytest.Item) -> None:
    """Drop what the item held for its call, as pytest's protocol does at its end (its fixture
    values and its request)."""
    item.funcargs = None  # type: ignore[attr-defined]
    if hasattr(item, "_request"):
        item._request = False  # type: ignore[attr-defined]


def call_phase() -> Callable[[pytest.Item], pytest.TestReport] | None:
    """pytest's own way to run an item's call phase (its hooks, capture and logging, the report,
    `--pdb`), returning the report; None where pytest has none (the caller then takes
    pytest's whole protocol). What the logging plugin's setup phase prepares for it (the
    item's captured log records) is prepared here, and removed afterwards as its teardown does."""
    try:
        from _pytest.logging import caplog_records_key
        from _pytest.runner import call_and_report
    except ImportError:
        return None

    def call(item: pytest.Item) -> pytest.TestReport:
        item.stash[caplog_records_key] = {}
        try:
            return call_and_report(item, "call")
        finally:
            del item.stash[caplog_records_key]

    return call


# The hooks of an item's call phase, and the modules whose implementations of them a benchmark
# item does not need: pytest's own (capture, logging, skip marks, the report) and this plugin's.
_CALL_HOOKS = ("pytest_runtest_call", "pytest_runtest_makereport", "pytest_exception_interact")
_OWN_MODULES = ("_pytest.", "ragmatrix.")


def call_hooks_are_pytests_own(config: pytest.Config) -> bool:
    """Does nothing but pytest itself and this plugin act in an item's call phase? No other
    plugin or conftest implements its hooks, and no `--pdb` or `--trace` waits to step in."""
    if config.pluginmanager.has_plugin("pdbinvoke") or config.getoption("trace", False):
        return False
    return _only_own_implement(config, _CALL_HOOKS)


def loop_hooks_are_pytests_own(config: pytest.Config) -> bool:
    """Does nothing but pytest itself and this plugin implement the run's loop and an item's
    protocol (no xdist controller or worker loop, no plugin wrapping each item)?"""
    return _only_own_implement(config, ("pytest_runtestloop", "pytest_runtest_protocol"))


def _only_own_implement(config: pytest.Config, hooks: tuple[str, ...], own: tuple[str, ...] = _OWN_MODULES) -> bool:
    """Are these hooks implemented by pytest's own plugins and this one only (`HookImpl.function`),
    or only by the modules `own` names (or their prefixes)?"""
    for name in hooks:
        caller = getattr(config.pluginmanager.hook, name, None)
        if caller is None:
            return False
        for implementation in caller.get_hookimpls():
            if not str(getattr(implementation.function, "__module__", "")).startswith(own):
                return False
    return True


# pytest's plugins whose `pytest_runtest_logreport` does nothing with a passed setup or teardown
# report but keep it (the terminal's `stats[""]`, read by `--durations` alone) or ignore it
# (the session's failure count, the last-failed and step-wise caches, log capture's phase).
# JUnit XML (`_pytest.junitxml`) writes an item's entry at its teardown report, and an xdist
# worker sends every report to the controller: neither is here.
_PASSED_PHASES_IGNORED_BY = (
    "_pytest.terminal",
    "_pytest.main",
    "_pytest.logging",
    "_pytest.cacheprovider",
    "_pytest.stepwise",
)


def passed_phases_unread(config: pytest.Config) -> bool:
    """Would a passed setup or teardown report go unread in this run? Only pytest's plugins
    above and this one hear reports, and no `--durations` table lists the phases' times."""
    if config.getoption("durations", None) is not None:
        return False
    caller = getattr(config.pluginmanager.hook, "pytest_runtest_logreport", None)
    if caller is None:
        return False
    for implementation in caller.get_hookimpls():
        module = str(getattr(implementation.function, "__module__", ""))
        if module not in _PASSED_PHASES_IGNORED_BY and not module.startswith("ragmatrix."):
            return False
    return True


def report_node_id(item: pytest.Item) -> Any:
    """The item's id as pytest's own reports are given it: the structured id pytest 9 parsed
    once for the item (`Item.id`, a `NodeId`), or its text before. A report given the text
    parses it again, and the terminal keeps every report: about 0.5 KB an item. That the
    structured id spells the item's node id is checked on the session's first item."""
    global _structured_ids
    structured = getattr(item, "id", None)
    if structured is None or isinstance(structured, str):
        return item.nodeid
    if _structured_ids is None:
        _structured_ids = str(structured) == item.nodeid
    return structured if _structured_ids else item.nodeid


_structured_ids: bool | None = None  # does `Item.id` spell the node id (this pytest)?


def hook_proxy(item: pytest.Item) -> Any:
    """`item.ihook`, worked out once per file: pytest looks up the conftest files that apply
    to the item's path on every call, and the plugin reports every item through it. The
    conftest files are all known once collection is done."""
    proxies = item.config.stash.setdefault(_HOOK_PROXIES, {})
    proxy = proxies.get(item.path)
    if proxy is None:
        proxy = proxies[item.path] = item.ihook
    return proxy


# The modules whose implementations of an item's protocol hook `ProtocolWrappers` stands in for:
# pytest's runner (the protocol itself, which this plugin's runs instead) and the wrappers that
# pytest's own plugins put around it.
_PROTOCOL_MODULES = (
    "_pytest.runner",
    "_pytest.warnings",
    "_pytest.assertion",
    "_pytest.faulthandler",
    "_pytest.unittest",
)


# What `warnings.catch_warnings(record=True)` sets, and the call that makes the filters count
# as changed.
_WARNINGS_INTERNALS = ("_showwarnmsg_impl", "_showwarning_orig", "_filters_mutated")


class ProtocolWrappers:
    """What pytest's own wrappers around an item's protocol do, done for the items this plugin
    runs without calling the protocol hook (each call went through pluggy and four wrappers,
    and catching warnings anew, with every configured filter applied again, was most of that):

    - warnings (`_pytest.warnings`): one catch with the configured filters for the whole run of
      such items; after each item, what it recorded goes to `pytest_warning_recorded` with the
      item's node id, and the filters count as changed, so that a warning repeated by every
      item is recorded for every item, as a catch of its own would record it;
    - assertion (`_pytest.assertion`): pytest's own wrapper, driven here (the item's
      `pytest_assertrepr_compare` for a failed assert);
    - faulthandler and unittest: nothing to do without a faulthandler timeout or Twisted's trial.

    An item with `filterwarnings` marks, or a run where any other plugin implements the hook,
    takes pytest's own protocol."""

    def __init__(self, config: pytest.Config, catches_warnings: bool) -> None:
        self._config = config
        self._catches_warnings = catches_warnings
        self._catching: contextlib.ExitStack | None = None
        self._log: list[warnings.WarningMessage] = []
        self._marked: dict[tuple[int, str], bool] = {}

    @classmethod
    def for_session(cls, config: pytest.Config) -> ProtocolWrappers | None:
        """Where the protocol hook's implementers are pytest's runner, its own wrappers and this
        plugin only, each wrapper doing no more than this class does; else None."""
        caller = getattr(config.pluginmanager.hook, "pytest_runtest_protocol", None)
        if caller is None or not all(hasattr(warnings, name) for name in _WARNINGS_INTERNALS):
            return None
        modules = {str(getattr(impl.function, "__module__", "")) for impl in caller.get_hookimpls()}
        if any(not (m in _PROTOCOL_MODULES or m.startswith("ragmatrix.")) for m in modules):
            return None
        if "_pytest.faulthandler" in modules:
            try:
                from _pytest.faulthandler import get_timeout_config_value
            except ImportError:
                return None
            if get_timeout_config_value(config) > 0:
                return None
        if "_pytest.assertion" in modules and _assertion_wrapper() is None:
            return None
        if not callable(getattr(config, "_catch_configured_warnings", None)):
            return None
        return cls(config, catches_warnings="_pytest.warnings" in modules)

    def applies(self, item: pytest.Item) -> bool:
        """May this item skip pytest's protocol hook? Not with `filterwarnings` marks (its own
        or its parents', looked for once per test function), nor under Twisted's trial."""
        if "twisted.trial.unittest" in sys.modules:
            return False
        if any(mark.name == "filterwarnings" for mark in item.own_markers):
            return False
        function = (id(item.parent), getattr(item, "originalname", item.name))
        marked = self._marked.get(function)
        if marked is None:
            marked = self._marked[function] = item.get_closest_marker("filterwarnings") is not None
        return not marked

    def run(self, item: pytest.Item, protocol: Callable[[], bool]) -> bool:
        """`protocol()`'s result, run within what the wrappers would have done around it."""
        if self._catches_warnings:
            if self._catching is None:
                self._catching = contextlib.ExitStack()
                caught = self._config._catch_configured_warnings(record=True)
                self._log = self._catching.enter_context(caught) or []  # type: ignore[arg-type]
            # Recorded into this run's list again for each item, as a catch of its own would: a
            # thread's catch that ends (an import meanwhile) puts back what it found.
            warnings._showwarnmsg_impl = self._log.append  # type: ignore[attr-defined]
            warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
        assertion = _assertion_wrapper()
        around = assertion(item) if assertion is not None else None
        if around is not None:
            next(around)
        try:
            result = protocol()
        except BaseException as error:
            if around is not None:
                around.throw(error)  # the wrapper restores what it set, and raises the error again
            raise
        else:
            if around is not None:
                try:
                    around.send(result)
                except StopIteration:
                    pass
        finally:
            self._recorded(item.ihook, item.nodeid)
        return result

    def close(self) -> None:
        """At the end of the run's loop: the catch ends (what was recorded between items goes
        without a node id)."""
        if self._catching is not None:
            self._recorded(self._config.hook, "")
            catching, self._catching = self._catching, None
            catching.close()

    def _recorded(self, ihook: Any, nodeid: str) -> None:
        if self._catching is None:
            return
        recorded, self._log[:] = list(self._log), []
        for message in recorded:
            ihook.pytest_warning_recorded.call_historic(
                kwargs={"warning_message": message, "nodeid": nodeid, "when": "runtest", "location": None}
            )
        warnings._filters_mutated()  # type: ignore[attr-defined]  # as a new catch does


@functools.cache
def _assertion_wrapper() -> Callable[[pytest.Item], Any] | None:
    """pytest's assertion wrapper of an item's protocol (a generator that yields once)."""
    try:
        from _pytest.assertion import pytest_runtest_protocol
    except ImportError:
        return None
    return pytest_runtest_protocol if inspect.isgeneratorfunction(pytest_runtest_protocol) else None


_HOOK_PROXIES = pytest.StashKey[dict[Any, Any]]()


def skip_mark(item: pytest.Item) -> pytest.Mark | None:
    """The skip mark pytest's setup acts on (`get_closest_marker("skip")`): the item's own
    first, which come first in pytest's own search (the plugin marks each item it finds
    cached there), else its parents' (a module's `pytestmark`)."""
    for mark in item.own_markers:
        if mark.name == "skip":
            return mark
    return item.get_closest_marker("skip")


def captured_sections(item: pytest.Item) -> list[tuple[str, str]]:
    """What pytest captured during the item's phases so far (output, log records), as its
    reports carry it (`Item._report_sections`); empty where pytest does not say."""
    found = getattr(item, "_report_sections", None)
    if not isinstance(found, list):
        return []
    return [(f"Captured {key} {when}", content) for when, key, content in found]


def keywords_of(item: pytest.Item) -> dict[str, Any]:
    """The item's keywords as its reports carry them (`{name: 1}`): its own, then its parents',
    which every item of a test function shares and which are worked out once per parent."""
    own = getattr(item.keywords, "_markers", None)
    if not isinstance(own, dict) or item.parent is None:
        return dict.fromkeys(item.keywords, 1)
    shared = _PARENT_KEYWORDS.get(item.parent)
    if shared is None:
        shared = _PARENT_KEYWORDS[item.parent] = dict.fromkeys(item.parent.keywords, 1)
    return {**dict.fromkeys(own, 1), **shared}  # a name in both keeps its place among its own


_PARENT_KEYWORDS: weakref.WeakKeyDictionary[pytest.Item | pytest.Collector, dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)


def fixture_names(item: pytest.Function) -> tuple[str, ...]:
    """The arguments a test function takes, each a fixture (or a parameter)."""
    info = getattr(item, "_fixtureinfo", None)
    names = getattr(info, "argnames", None)
    if names is None:  # another pytest: the signature says the same
        names = tuple(inspect.signature(item.obj).parameters)
    return tuple(names)


def capture_suspender(config: pytest.Config) -> Callable[[], AbstractContextManager[None]] | None:
    """A way to write to the terminal while pytest captures output (its capture manager's), or
    None (capture off, or another pytest)."""
    capture = config.pluginmanager.getplugin("capturemanager")
    suspend = getattr(capture, "global_and_fixture_disabled", None)
    return suspend if callable(suspend) else None


# -- items known to run while collection goes on ---------------------------------------------

# pytest's own plugins that act on the collected items: `main` (`--deselect`), `mark` (`-k`,
# `-m`), `fixtures` (orders them by their fixtures, keeps them all) and `cacheprovider` (`--lf`
# keeps the failed ones; `--ff`, `--nf` only order them); and this plugin.
_SELECTING_MODULES = ("_pytest.main", "_pytest.mark", "_pytest.fixtures", "_pytest.cacheprovider", "ragmatrix.")
# Their options that drop items, other than `-k`, which is evaluated here as pytest evaluates it.
_DROPPING_OPTIONS = ("deselect", "markexpr", "lf")
# Options under which the loop runs no item's call.
_CALL_LESS_OPTIONS = ("collectonly", "setuponly", "setupplan")


def selected_as_collected(config: pytest.Config) -> Callable[[pytest.Item], bool] | None:
    """Where the items a run will run are known as they are collected, whether one of them is
    (only pytest's own plugins and this one act on the collected items and on each as it is
    collected, none drops any but `-k`'s, which `_pytest.mark`'s `KeywordMatcher` and
    `Expression` evaluate here; the loop and each item's protocol are pytest's and this
    plugin's, and run the items' calls); None where they are not (another plugin, a conftest,
    `--lf`, `-m`, an xdist worker, `--collect-only`, a `-k` that does not parse, another pytest)."""
    if hasattr(config, "workerinput") or not loop_hooks_are_pytests_own(config):
        return None
    if any(config.getoption(name, None) for name in (*_DROPPING_OPTIONS, *_CALL_LESS_OPTIONS)):
        return None
    if not _only_own_implement(config, ("pytest_collection_modifyitems", "pytest_itemcollected"), _SELECTING_MODULES):
        return None
    keywords = str(getattr(config.option, "keyword", "") or "").lstrip()
    if not keywords:
        return lambda item: True
    matching = _keyword_matching()
    if matching is None:
        return None
    matcher, compile_expression = matching
    try:
        expression = compile_expression(keywords)
    except SyntaxError:
        return None  # pytest itself says what is wrong with the expression
    return lambda item: bool(expression.evaluate(matcher.from_item(item)))


# The plugins that parametrize a test function when only pytest and this one do: pytest's
# `parametrize` marks and parametrized fixtures, and this plugin's matrix.
_PARAMETRIZING_MODULES = ("_pytest.python", "_pytest.fixtures", "ragmatrix.")
_NOT = re.compile(r"\bnot\b")


def selected_as_parametrized(config: pytest.Config) -> Callable[[Iterable[str]], bool] | None:
    """Where the items a run will run are known as their test function is parametrized, before
    pytest builds them: as in `selected_as_collected`, and no plugin or conftest but pytest and
    this one parametrizes. Returns whether an item is selected, given names it will have (its
    name, its parents', its marks'): `-k` is evaluated on them with pytest's `KeywordMatcher`,
    which matches the built item on those and more. An expression without `not` that holds
    for some of an item's names holds for all of them, so only such a `-k` is evaluated here;
    None where one has `not` (or the run's items are not known as they are collected)."""
    if selected_as_collected(config) is None:
        return None
    if not _only_own_implement(config, ("pytest_generate_tests",), _PARAMETRIZING_MODULES):
        return None
    keywords = str(getattr(config.option, "keyword", "") or "").lstrip()
    if not keywords:
        return lambda names: True
    matching = _keyword_matching()
    if matching is None or _NOT.search(keywords):
        return None
    matcher, compile_expression = matching
    expression = compile_expression(keywords)  # it parsed in `selected_as_collected`
    return lambda names: bool(expression.evaluate(matcher(frozenset(names))))


def parametrized_here_only(metafunc: pytest.Metafunc) -> bool:
    """Does nothing but this plugin parametrize the function: no `parametrize` mark, no fixture
    it takes with `params` (`Metafunc._arg2fixturedefs`, `FixtureDef.params`)?"""
    if next(metafunc.definition.iter_markers("parametrize"), None) is not None:
        return False
    definitions = getattr(metafunc, "_arg2fixturedefs", None)
    if not isinstance(definitions, dict):
        return False
    return all(getattr(chain[-1], "params", None) is None for chain in definitions.values() if chain)


def names_before_built(definition: pytest.Function) -> set[str]:
    """The names `-k` matches a test function's items on that are known before pytest builds
    them (`KeywordMatcher.from_item`): its parents' names but the session's and the root
    folder's, and the names of the marks on it and on its parents."""
    names = {
        node.name
        for node in definition.listchain()[:-1]
        if not isinstance(node, pytest.Session)
        and not (isinstance(node, pytest.Directory) and isinstance(node.parent, pytest.Session))
    }
    names.update(mark.name for mark in definition.iter_markers())
    return names


def _keyword_matching() -> tuple[Any, Callable[[str], Any]] | None:
    """pytest's own `-k` matching: `KeywordMatcher` (made from an item or from names) and
    `Expression.compile`, or None."""
    try:
        from _pytest.mark import KeywordMatcher
        from _pytest.mark.expression import Expression
    except ImportError:
        return None
    compile_expression = getattr(Expression, "compile", None)
    if not callable(getattr(KeywordMatcher, "from_item", None)) or not callable(compile_expression):
        return None
    try:  # made from the names themselves too (`selected_as_parametrized`)
        if not KeywordMatcher(frozenset({"name"}))("nam"):
            return None
    except TypeError:
        return None
    return KeywordMatcher, compile_expression


# -- pytest-xdist -----------------------------------------------------------------------------


def worker_queue(config: pytest.Config, session: pytest.Session) -> list[pytest.Item] | None:
    """On an xdist worker, the items it has been handed and not run yet (the next one first), or
    None when xdist does not say."""
    for plugin in config.pluginmanager.get_plugins():
        queue = getattr(plugin, "torun", None)
        if queue is None or not hasattr(queue, "lock"):
            continue
        with queue.lock() as queued:
            indices = [i for i in queued if isinstance(i, int)]
        following = getattr(plugin, "nextitem_index", None)
        if isinstance(following, int):
            indices.insert(0, following)
        return [session.items[i] for i in indices if 0 <= i < len(session.items)]
    return None


def scope_scheduler(config: pytest.Config, log: Any, scope_of: Callable[[str], str], name: str) -> Any:
    """xdist's scope scheduling (`--dist loadscope`: the items of a scope go to one worker),
    with `scope_of(nodeid)` naming each item's scope; xdist's header names it `name`."""
    from xdist.scheduler import LoadScopeScheduling

    def split_scope(self: Any, nodeid: str) -> str:
        return scope_of(nodeid)

    scheduling = type(name, (LoadScopeScheduling,), {"_split_scope": split_scope})
    return scheduling(config, log)


# -- what a release may change ----------------------------------------------------------------


def missing() -> list[str]:
    """The private names above that the installed pytest and xdist lack, or whose shape changed;
    what only a running session has is `missing_in_run`'s."""
    from _pytest import terminal

    gone: list[str] = []
    if not isinstance(getattr(terminal, "KNOWN_TYPES", None), tuple):
        gone.append("_pytest.terminal.KNOWN_TYPES (a tuple of status names)")
    if not isinstance(getattr(terminal, "_color_for_type", None), dict):
        gone.append("_pytest.terminal._color_for_type (a dict of status -> colour)")
    decide = getattr(terminal.TerminalReporter, "_determine_main_color", None)
    if decide is None or list(inspect.signature(decide).parameters) != ["self", "unknown_type_seen"]:
        gone.append("_pytest.terminal.TerminalReporter._determine_main_color(self, unknown_type_seen)")
    if not isinstance(getattr(pytest.Item, "location", None), functools.cached_property):
        gone.append("pytest.Item.location (a cached property)")
    if call_phase() is None:
        gone.append("_pytest.runner.call_and_report(item, when) and _pytest.logging.caplog_records_key")
    if not all(hasattr(warnings, name) for name in _WARNINGS_INTERNALS):
        gone.append("warnings." + ", warnings.".join(_WARNINGS_INTERNALS))
    if _assertion_wrapper() is None:
        gone.append("_pytest.assertion.pytest_runtest_protocol (a generator wrapper)")
    if not callable(getattr(pytest.Config, "_catch_configured_warnings", None)):
        gone.append("pytest.Config._catch_configured_warnings(record=...)")
    try:
        from _pytest.faulthandler import get_timeout_config_value  # noqa: F401
    except ImportError:
        gone.append("_pytest.faulthandler.get_timeout_config_value")
    if _keyword_matching() is None:
        gone.append("_pytest.mark.KeywordMatcher(names) and .from_item, and _pytest.mark.expression.Expression.compile")
    from _pytest.capture import CaptureManager

    if not callable(getattr(CaptureManager, "global_and_fixture_disabled", None)):
        gone.append("_pytest.capture.CaptureManager.global_and_fixture_disabled")
    try:
        from xdist.scheduler import LoadScopeScheduling
    except ImportError:
        return gone  # no xdist, nothing of it used
    split = getattr(LoadScopeScheduling, "_split_scope", None)
    if split is None or list(inspect.signature(split).parameters) != ["self", "nodeid"]:
        gone.append("xdist.scheduler.LoadScopeScheduling._split_scope(self, nodeid)")
    return gone


def missing_in_run(item: pytest.Function) -> list[str]:
    """What a running item shows: the session's set-up stack, the item's fixture names, and on
    an xdist worker the queue of items it was handed."""
    gone: list[str] = []
    if not isinstance(getattr(getattr(item.session, "_setupstate", None), "stack", None), dict):
        gone.append("pytest.Session._setupstate.stack (a dict of the nodes set up)")
    if not isinstance(getattr(getattr(item, "_fixtureinfo", None), "argnames", None), tuple):
        gone.append("pytest.Function._fixtureinfo.argnames (a tuple of names)")
    if fixture_modules(item) is None:
        gone.append("pytest.Function._fixtureinfo.names_closure and name2fixturedefs (FixtureDef.func)")
    if not isinstance(getattr(item.keywords, "_markers", None), dict):
        gone.append("pytest.Item.keywords._markers (a dict of the item's own keywords)")
    if hasattr(item.config, "workerinput"):
        worker = next((p for p in item.config.pluginmanager.get_plugins() if hasattr(p, "torun")), None)
        if worker is None or not hasattr(worker.torun, "lock"):
            gone.append("xdist's worker torun (a queue of item indices with lock())")
        elif not hasattr(worker, "nextitem_index"):
            gone.append("xdist's worker nextitem_index (the next item's index)")
    return gone
