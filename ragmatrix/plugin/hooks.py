"""The pytest hooks of ragmatrix: a thin layer over the modules that do the work.

- the run's state and the session header (the options are `ragmatrix.plugin.options`; the
  entry point registers these hooks only in a run that collects the benchmark);
- collection: data files report their problems, test modules are parametrized over
  model x case, items whose result is stored are skipped as `cached`, and `--shard K/N` keeps
  this machine's part of the matrix;
- running: cached items are reported without pytest's setup and teardown, the others run
  their iterations and record a row (`ragmatrix.plugin.runner`); a folder that refuses writes stops
  the session with one line;
- the end: compaction of the store (its rule is the session's) and the leaderboard, by the
  controller only.

Each pytest session is one run (`ragmatrix.foundations.context.start_run`), ended when pytest unconfigures.
What the plugin takes from pytest's and xdist's private API is in `ragmatrix.plugin.pytest_internals`.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import pytest

import ragmatrix.plugin.direct_reports as direct_reports
import ragmatrix.plugin.pytest_internals as pytest_internals
import ragmatrix.plugin.runner as runner
import ragmatrix.plugin.scheduling as scheduling
from ragmatrix import cost
from ragmatrix.cost.price import dollars
from ragmatrix.families import family_named, register
from ragmatrix.foundations.cache import CACHE_FOLDER
from ragmatrix.foundations.context import RunContext, start_run
from ragmatrix.foundations.storage import StorageError
from ragmatrix.foundations.untrusted import safe_text
from ragmatrix.models.client import ModelError
from ragmatrix.models.models_file import ModelsFileError
from ragmatrix.models.registry import run_registry
from ragmatrix.models.spec import probes_shared
from ragmatrix.models.usage import current_requests
from ragmatrix.plugin.selection import benchmark_dir as benchmark_folder
from ragmatrix.plugin.session import MODEL_FIXTURES, STATE_KEY, BenchmarkState, get_state
from ragmatrix.seam.case import Case, CaseInputError

if TYPE_CHECKING:
    from ragmatrix.results.store import Loaded

RUN_KEY = pytest.StashKey[RunContext]()


def pytest_configure(config: pytest.Config) -> None:
    """The run's state; the entry point registers these hooks only in a run that collects the
    benchmark folder (`ragmatrix.plugin`)."""
    root = config.rootpath
    # .env read (variables already set win), the caches under root; ended when pytest unconfigures
    run = config.stash[RUN_KEY] = start_run(root, use_cache=not config.getoption("--no-response-cache"))
    config.add_cleanup(run.end)
    benchmark_dir = benchmark_folder(config)
    results_option = config.getoption("--results-dir")
    results_dir = (
        (config.invocation_params.dir / results_option).resolve() if results_option else benchmark_dir / "results"
    )
    iterations = config.getoption("--iterations") or 1
    if iterations < 1:
        raise pytest.UsageError("--iterations must be at least 1")
    wanted = config.getoption("--models")
    max_variants = _max_variants(config)
    shard_option = config.getoption("--shard")
    shard = None
    if shard_option is not None:
        from ragmatrix.plugin.sharding import parse_shard

        try:
            shard = parse_shard(shard_option)
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None
    state = BenchmarkState(
        root=root,
        benchmark_dir=benchmark_dir,
        results_dir=results_dir,
        run_all=bool(config.getoption("--run-all")),
        iterations=iterations,
        wanted_models=[m.strip() for m in wanted.split(",") if m.strip()] if wanted else None,
        use_cache=run.use_cache,
        compare_variants=bool(config.getoption("--compare-variants")),
        send_ahead=max(1, int(config.getoption("--send-ahead"))),
        max_variants=max_variants,
        evaluator_option=config.getoption("--evaluator"),
        shard=shard,
        registry=run_registry(run),
    )
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "ragmatrix_models" in workerinput:
        state.given_models = workerinput["ragmatrix_models"]
    for families in config.hook.pytest_ragmatrix_families(config=config):
        for family in families:
            register(family)  # with this run
    config.stash[STATE_KEY] = state
    session_end = SessionEnd(state, run, controller=workerinput is None)
    config.pluginmanager.register(session_end, "ragmatrix-session-end")
    gc.unfreeze()  # what an earlier session in this process froze can be collected again
    if workerinput is None:  # progress bars reach the terminal, not the capture
        run.suspend_capture = pytest_internals.capture_suspender(config)
    try:
        with probes_shared():  # the matrix's models and the evaluator: each server asked once
            models = state.models  # decide the matrix now, so a bad models.yaml stops the run at once
            state.evaluator  # noqa: B018 - and the evaluator
    except ModelsFileError as error:
        raise pytest.UsageError(str(error)) from None
    if state.wanted_models and not models.available and workerinput is None:
        # Nothing would run, and a leaderboard of other models' stored rows would look like
        # an answer: say why each named model cannot run, and stop.
        reasons = "; ".join(f"{model}: {why}" for model, why in models.left_out.items())
        raise pytest.UsageError(f"no model of --models can run here ({reasons})")
    # the models' work is measured, and their requests priced as models.yaml says now
    session_end.meter = cost.start_session(state.results_dir, state.price_of)
    session_end.measured = cost.current_meter.get()
    if not getattr(config.option, "numprocesses", None) or workerinput is not None:  # not an xdist controller
        for spec in models.available:
            spec.prepare_meanwhile()


def _max_variants(config: pytest.Config) -> int:
    given = config.getoption("--max-variants")
    where = "--max-variants"
    if given is None:
        given, where = str(config.getini("max_variants")).strip(), "max_variants (ini)"
    try:
        value = int(given)
    except ValueError:
        value = 0
    if value < 1:
        raise pytest.UsageError(f"{where} must be a whole number of at least 1, not {given}")
    return value


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: hand each worker the controller's choice of models, so all agree on the matrix."""
    config = node.config
    models = get_state(config).models
    evaluator = get_state(config).evaluator
    node.workerinput["ragmatrix_models"] = {
        "available": [m.id for m in models.available],
        "left_out": models.left_out,
        "evaluator": {"id": evaluator.spec.id if evaluator.spec else None, "reason": evaluator.reason},
    }


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist, `--dist loadgroup`: a scheduler that sends each model's items to one worker."""
    if config.getoption("dist") != "loadgroup":
        return None
    from ragmatrix.plugin.workers import model_scheduler

    state = get_state(config)
    prefix = _shown(state.benchmark_dir, state.root) + "/"
    return model_scheduler(config, log, [m.id for m in state.models.available], prefix)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = get_state(config)
    models = state.models
    lines = [
        "ragmatrix: models: " + (", ".join(f"{m.id} ({m.kind})" for m in models.available) or "none"),
        f"ragmatrix: results: {_shown(state.results_dir, state.root)}, iterations: {state.iterations}"
        + (", --run-all" if state.run_all else ""),
    ]
    lines += [f"ragmatrix: left out {model}: {reason}" for model, reason in models.left_out.items()]
    local = [m for m in models.available if m.expected_device() is not None]
    if local:  # told without loading torch: a cached run stays light
        named = (f"{m.id} on {m.expected_device()} (device: {getattr(m, 'device', '')})" for m in local)
        lines.append("ragmatrix: devices: " + ", ".join(named))
    evaluator = state.evaluator
    if evaluator.spec is not None:
        lines.append(f"ragmatrix: evaluator: {evaluator.spec.id}")
    elif evaluator.reason.startswith("evaluator "):  # one was asked for, but is left out
        lines.append(f"ragmatrix: {evaluator.reason}")
    return lines


def _usage_line(totals: dict[str, float], texts_embedded: int) -> str:
    """This run's model work: LLM calls and tokens from the items' usage; texts embedded as the
    models encoded them (counted once encoded, items that never finished included)."""
    t = {k: int(v) for k, v in totals.items() if k != "cost_usd"}
    line = (
        f"this run: {t.get('calls', 0)} LLM calls ({t.get('cached_calls', 0)} from the response cache), "
        f"{t.get('prompt_tokens', 0) + t.get('completion_tokens', 0)} tokens"
        + (f", {t['answers_unused']} answers sent ahead were never used" if t.get("answers_unused") else "")
        + f"; {texts_embedded} texts embedded, {t.get('embedding_cache_hits', 0)} from the embedding cache "
        f"of earlier runs, {t.get('embedding_shared', 0)} shared within this run"
    )
    if t.get("documents_reranked") or t.get("rerank_cache_hits"):
        line += (
            f"; {t.get('documents_reranked', 0)} documents reranked, "
            f"{t.get('rerank_cache_hits', 0)} from the rerank cache"
        )
    if totals.get("cost_usd"):
        line += f"; cost {dollars(totals['cost_usd'])}"
    return line


def _unused_warning(totals: dict[str, float]) -> str | None:
    """Answers sent ahead that no item took: their family's test asks other requests than its
    first round (`Family.first_requests`) declares, so each of them was asked twice."""
    unused = int(totals.get("answers_unused", 0))
    if not unused:
        return None
    return (
        f"warning: {unused} answer(s) sent ahead were never used: a family's test asks other requests than "
        "its first_requests declare, so each was paid twice (ask through Family.ask or the same function)"
    )


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


# --- collection ---------------------------------------------------------------------------


class DataProblems(Exception):
    pass


class DataFile(pytest.File):
    """A `*_data.yaml` file: it holds no tests, but it is where its problems are reported."""

    def collect(self) -> list[pytest.Item]:
        state = get_state(self.config)
        relative = _shown(self.path, state.root)
        state.collected_data_files.add(relative)
        problems = [p.line() for p in state.suite.problems if p.file == relative]
        if problems:
            raise DataProblems("\n".join(problems))
        return []

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, DataProblems):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    state = parent.config.stash.get(STATE_KEY, None)
    if state is None or not file_path.name.endswith("_data.yaml"):
        return None
    if file_path.parent.resolve() != state.data_dir.resolve():
        return None
    return DataFile.from_parent(parent, path=file_path)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    state = metafunc.config.stash.get(STATE_KEY, None)
    if state is None or "case" not in metafunc.fixturenames:
        return
    name = state.family_of(Path(metafunc.module.__file__))
    kinds = [k for k in MODEL_FIXTURES if k in metafunc.fixturenames]
    if name is None or not kinds:
        return
    if len(kinds) > 1:
        pytest.fail(
            f"{metafunc.function.__name__}: take one of {', '.join(MODEL_FIXTURES)}, not several", pytrace=False
        )
    family = family_named(name)
    if family is None:
        pytest.fail(
            f"{metafunc.module.__name__}: no family '{name}' is registered (declare FAMILY = Family(...) in a "
            "ragmatrix/families module, an entry point or the pytest_ragmatrix_families hook)",
            pytrace=False,
        )
    kind = kinds[0]
    marker = metafunc.definition.get_closest_marker("cases")
    # A keyword, not a positional argument: pytest.mark.x(callable) would decorate it.
    predicate = marker.kwargs["where"] if marker is not None else None
    test = metafunc.function.__name__
    uses_evaluator = "evaluator" in metafunc.fixturenames
    params = []
    # The cases as a model that reads prompts sees them, and collapsed as one that reads none
    # sees them (collapsed once per session), each filtered only when such a model is listed:
    # the filter reads each case's validated fields.
    as_read: list[Case] | None = None
    collapsed: list[Case] | None = None
    cached = pytest.mark.skip(reason=CACHED)  # marks are shared by the items: a large matrix has many
    # The first items' requests may go now, before pytest builds the items (`Scheduler.parametrized`).
    send_early = scheduling.scheduler(metafunc.config, state).parametrized(metafunc)
    for spec in state.models.of_kind(kind):
        if spec.reads_prompts and as_read is None:
            as_read = [c for c in state.suite.cases.get(name, []) if predicate is None or predicate(c)]
        if not spec.reads_prompts and collapsed is None:
            collapsed = [c for c in state.suite.without_prompts(name) if predicate is None or predicate(c)]
        group = pytest.mark.xdist_group(spec.id)
        for case in (as_read if spec.reads_prompts else collapsed) or []:
            marks = [group]
            plan = state.plan(metafunc.module.__name__, test, family, spec, case, uses_evaluator)
            if plan.skip_reason:
                marks.append(pytest.mark.skip(reason=plan.skip_reason))
            elif state.is_cached(plan):
                marks.append(cached)
            ident = f"{spec.id}-{case.id}"
            params.append(pytest.param(spec, case, id=ident, marks=marks))
            if send_early is not None and len(marks) == 1 and not send_early(ident, plan, marks):
                send_early = None  # as many as may go ahead have gone (a cached or skipped item goes not)
    if not params:
        any_case = any(predicate is None or predicate(c) for c in state.suite.cases.get(name, []))
        reason = f"no {kind} in the matrix (see the session header)" if any_case else f"no {name} cases"
        params = [pytest.param(None, None, id=f"no-{kind}", marks=pytest.mark.skip(reason=reason))]
    metafunc.parametrize([kind, "case"], params, indirect=[kind])


def pytest_itemcollected(item: pytest.Item) -> None:
    """`-k <data file name>` (the name without `_data.yaml`) selects exactly that file's items:
    test ids name the model and the case, not the file a case came from. Then the item's
    requests may go at once, while the rest is collected (`Scheduler.collected`)."""
    state = item.config.stash.get(STATE_KEY, None)
    plan = runner.plan_for(item, state) if state is not None else None
    if plan is None or state is None:
        return
    if plan.case.file:
        item.extra_keyword_matches.add(plan.case.source)
    scheduling.scheduler(item.config, state).collected(item, plan)


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Items dropped after their requests went (`Scheduler.forget`)."""
    ahead = items[0].config.stash.get(scheduling.SCHEDULER_KEY, None) if items else None
    if ahead is not None:
        ahead.forget(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection built (items, cases, plans: most of a large run's objects, alive
    to its end) out of the cyclic garbage collector's walks. Each full collection would walk
    all of them again, during the run and five times more at pytest's exit: on 10,000 items
    that was a tenth of a cached rerun. A later session in the same process unfreezes them.
    First, the requests of the items collected last go (`Scheduler.collected`)."""
    ahead = session.config.stash.get(scheduling.SCHEDULER_KEY, None)
    if ahead is not None:
        ahead.collection_finished()
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--shard K/N`: keep this machine's part of what is selected (after `-k` and `-m`)."""
    state = config.stash.get(STATE_KEY, None)
    if state is None or state.shard is None:
        return
    positions = {spec.id: position for position, spec in enumerate(state.models.available)}
    last = len(positions)

    def group_of(item: pytest.Item) -> tuple[int, Any]:
        plan = runner.plan_for(item, state)
        if plan is None:  # not a benchmark item: it goes with its module
            return last, ("module", item.nodeid.split("::")[0])
        return positions.get(plan.model.id, last), (plan.model.id, plan.family.name, plan.case.name)

    from ragmatrix.plugin.sharding import split

    part = split(items, state.shard, group_of)
    kept = set(map(id, part.chosen))
    deselected = [item for item in items if id(item) not in kept]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = part.chosen
    state.shard_line = (
        f"ragmatrix: shard {state.shard}: {len(part.chosen):,} of {part.total:,} items "
        f"(matrix {part.matrix}: the same on every shard that collected the same matrix)"
    )


def pytest_report_collectionfinish(config: pytest.Config) -> list[str] | None:
    state = config.stash.get(STATE_KEY, None)
    return [state.shard_line] if state is not None and state.shard_line else None


# --- running ------------------------------------------------------------------------------

CACHED = "cached"


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    """An item whose result is stored shows as `cached` ("c" in the progress line, "605 cached"
    in the summary): a stored result is a success, not a skipped test."""
    if report.skipped and report.when == "setup" and _skip_reason(report) == CACHED:
        return CACHED, "c", ("CACHED", {"green": True})
    return None


def _skip_reason(report: pytest.TestReport) -> str | None:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    _cached_reads_as_success(session.config)
    _redact_logs(session.config)


def _redact_logs(config: pytest.Config) -> None:
    """Every log record that pytest captures, shows or writes to --log-file passes the secrets
    filter: pytest's handlers are made once and join the root logger only around each phase."""
    from ragmatrix.foundations.secrets import guard_logging

    plugin = config.pluginmanager.get_plugin("logging-plugin")
    names = ("caplog_handler", "report_handler", "log_file_handler", "log_cli_handler")
    guard_logging(*(getattr(plugin, name) for name in names if getattr(plugin, name, None) is not None))


def _cached_reads_as_success(config: pytest.Config) -> None:
    """Colour `cached` green in pytest's summary, and a run of only cached items green too:
    pytest colours a status it does not know yellow, and a run that passed nothing yellow."""
    pytest_internals.count_as_success(CACHED, config)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """pytest's own loop over the items, where only pytest and this plugin take part in it, with
    two differences: a cached item is reported directly (a run of them in one call where it
    can be, `_reported_as_cached_run`), without the per-item protocol hook and the wrappers
    pytest's plugins put around it (warnings, assertion rewriting, faulthandler: nothing runs
    in a cached item for them to watch), and an item whose answers were sent ahead
    runs without the hook's call, within what those wrappers do (`ProtocolWrappers`). On a
    fully cached run, that hook was most of the work past collection. Anything else (collection
    errors, --collect-only, xdist, a plugin around each item) is pytest's own loop."""
    config = session.config
    if session.testsfailed or config.option.collectonly or not pytest_internals.loop_hooks_are_pytests_own(config):
        return None
    items, index = session.items, 0
    cached = bool(items) and _is_cached(items[0])
    wrappers = pytest_internals.ProtocolWrappers.for_session(config)
    try:
        while index < len(items):
            item = items[index]
            in_one_call = _reported_as_cached_run(items, index) if cached else 0
            if in_one_call:
                index += in_one_call
                cached = index < len(items) and _is_cached(items[index])
            else:
                nextitem = items[index + 1] if index + 1 < len(items) else None
                next_cached = nextitem is not None and _is_cached(nextitem)
                if not (cached and _reported_as_cached(item, nextitem, next_cached, cached=True)):
                    direct_reports.write_pending(config)  # the letters of the cached items before it
                    if wrappers is None or not _ran_sent_ahead(item, nextitem, wrappers):
                        config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                cached = next_cached
                index += 1
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
    finally:
        direct_reports.write_pending(config)
        if wrappers is not None:
            wrappers.close()
    return True


def _ran_sent_ahead(
    item: pytest.Item, nextitem: pytest.Item | None, wrappers: pytest_internals.ProtocolWrappers
) -> bool:
    """Run an item whose answers were sent ahead as `pytest_runtest_protocol` below runs it,
    without the protocol hook's call (`ProtocolWrappers` does what pytest's wrappers around it
    do); False, having done nothing, for any other item."""
    if pytest_internals.skip_mark(item) is not None or not wrappers.applies(item):
        return False
    arguments = _sent_ahead_arguments(item)
    if arguments is None or not _nothing_to_tear_down(item, nextitem):
        return False
    return wrappers.run(item, lambda: _run_without_setup(item, arguments))


def _reported_as_cached(
    item: pytest.Item, nextitem: pytest.Item | None, next_cached: bool | None = None, cached: bool = False
) -> bool:
    """Report `item` here if it is cached and nothing is to be torn down after it;
    `next_cached`: whether `nextitem` is cached, and `cached`: that `item` is, where the caller
    knows."""
    if not (cached or _is_cached(item)) or not _nothing_to_tear_down(item, nextitem):
        return False
    if next_cached is None:
        next_cached = nextitem is not None and _is_cached(nextitem)
    _report_cached(item, more_soon=next_cached)
    return True


# The most cached items reported in one call: a stop asked for is looked at between calls.
RUN_AT_MOST = 1000


def _reported_as_cached_run(items: list[pytest.Item], start: int) -> int:
    """Report the run of cached items that begins with the cached `items[start]` in one call
    (`DirectReports.report_run`), where the session's reports go to the implementations
    directly and passed phases are unread; how many were reported (0: none, the item takes the
    path of one). A run ends before an item that is not cached or is in another file, after
    `RUN_AT_MOST`, and before an item after which pytest would tear down what it has set up
    (for an item that ran its own way before: its module, a session fixture)."""
    first = items[start]
    config = first.config
    direct = direct_reports.for_session(config) if _passed_phases_unread(config) else None
    stack = pytest_internals.setup_stack(first.session)
    if direct is None or not direct.takes_runs or stack is None:
        return 0
    path, end, last = first.path, start + 1, min(len(items), start + RUN_AT_MOST)
    while (
        end < last
        and (items[end].path is path or items[end].path == path)
        and _is_cached(items[end])
        and (not stack or _still_needed(stack, items[end]))
    ):
        end += 1
    if stack and not _still_needed(stack, items[end] if end < len(items) else None):
        end -= 1  # pytest tears something down after the run's last item: it takes pytest's way
    if end == start:
        return 0
    reports = [_cached_setup_report(item) for item in items[start:end]]
    more_soon = end < len(items) and _is_cached(items[end])
    direct.report_run(first.nodeid, reports[0].location, reports, more_soon)
    return end - start


def _is_cached(item: pytest.Item) -> bool:
    marker = pytest_internals.skip_mark(item)
    return marker is not None and marker.kwargs.get("reason") == CACHED


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """Two kinds of benchmark items are reported as pytest reports them, without the setup,
    capture and teardown machinery they do not need (on a large matrix that machinery was most
    of a run's work per item), where nothing would have to be torn down after them:

    - a cached item: skipped at setup with the reason `cached`, then a clean teardown;
    - an item whose answers (or texts) were sent ahead and which takes only the plugin's
      fixtures: a clean setup, pytest's own call phase (its hooks, capture, logging, report),
      a clean teardown; its model is the one the scheduler already built.

    Anything else, and any item where pytest would tear something down after it, runs as usual."""
    skipped = pytest_internals.skip_mark(item) is not None
    if skipped and _reported_as_cached(item, nextitem):
        return True
    direct_reports.write_pending(item.config)  # pytest reports this one: the letters before it first
    if skipped:
        return None
    arguments = _sent_ahead_arguments(item)
    if arguments is None or not _nothing_to_tear_down(item, nextitem):
        return None
    return _run_without_setup(item, arguments)


def _report_cached(item: pytest.Item, more_soon: bool = False) -> None:
    """A cached item's reports; `more_soon`: the next item is cached too."""
    setup = _cached_setup_report(item)
    unread = _passed_phases_unread(item.config)
    hooks, nodeid, location = _report_hooks(item, unread), item.nodeid, setup.location
    hooks.start(nodeid, location)
    hooks.report(setup, more_soon=more_soon and unread)
    if not unread:
        where = (pytest_internals.report_node_id(item), location, setup.keywords)
        hooks.report(pytest.TestReport(*where, "passed", None, "teardown", user_properties=item.user_properties))
    hooks.finish(nodeid, location)


def _cached_setup_report(item: pytest.Item) -> pytest.TestReport:
    """A cached item's setup report: skipped as `cached`, where pytest reports a skip."""
    location, skipped = _where(item)
    where = (pytest_internals.report_node_id(item), location, pytest_internals.keywords_of(item))
    return pytest.TestReport(*where, "skipped", skipped, "setup", user_properties=item.user_properties)


def _report_hooks(item: pytest.Item, direct: bool) -> direct_reports.DirectReports | direct_reports.PluggyReports:
    """Where an item's reports go: `direct`, to the implementations themselves where the
    session allows it (`direct_reports`), else through pluggy."""
    called = direct_reports.for_session(item.config) if direct else None
    return called or direct_reports.PluggyReports(pytest_internals.hook_proxy(item))


_UNREAD = pytest.StashKey[bool]()


def _passed_phases_unread(config: pytest.Config) -> bool:
    """Are passed setup and teardown reports read by no one in this run (only pytest's terminal
    and its other plugins that ignore them hear reports, no `--durations`)? Then the items
    reported here make none: on a large matrix they were a third of reporting an item, and
    the terminal kept every one to the end. Worked out once per session."""
    unread = config.stash.get(_UNREAD, None)
    if unread is None:
        unread = config.stash[_UNREAD] = pytest_internals.passed_phases_unread(config)
    return unread


# Marks that pytest acts on in an item's setup, and options that show or stop at the setup: such
# an item, or such a run, takes pytest's own path.
_SETUP_MARKS = ("skipif", "xfail", "usefixtures")
_SETUP_OPTIONS = ("setuponly", "setupplan", "setupshow")
_FIXTURES_MODULE = "ragmatrix.plugin.fixtures"


def _sent_ahead_arguments(item: pytest.Item) -> dict[str, Any] | None:
    """The arguments of an item whose answers the scheduler has sent ahead, as its fixtures would
    give them, when it takes nothing but the plugin's fixtures (its model, `record`, and the
    session's `evaluator` once set up) and its case; None for any other item (it then runs as
    usual)."""
    state = item.config.stash.get(STATE_KEY, None)
    ahead = item.config.stash.get(scheduling.SCHEDULER_KEY, None)
    if state is None or ahead is None or not ahead.sent_ahead(item.nodeid):
        return None
    plan = runner.plan_for(item, state)
    fixtures = _plain_fixtures(item)
    if plan is None or plan.skip_reason or fixtures is None:
        return None
    kind, uses_evaluator = fixtures
    arguments: dict[str, Any] = {"case": item.callspec.params["case"], "record": runner.Recorder()}  # type: ignore[attr-defined]
    if uses_evaluator:
        found, arguments["evaluator"] = pytest_internals.set_up_value(item, "evaluator")
        if not found:
            return None  # not set up yet: pytest sets it up for this item
    try:
        arguments[kind] = state.registry.build(plan.model)
        state.store.prepare(plan.family.name)
    except (ModelError, StorageError):
        return None  # pytest's own setup reports it
    return arguments


_PLAIN = pytest.StashKey[dict[tuple[int, str], tuple[str, bool] | None]]()


def _plain_fixtures(item: pytest.Item) -> tuple[str, bool] | None:
    """(its model fixture, whether it takes `evaluator`) when the item's test function takes
    the plugin's fixtures only (no autouse fixture, none overridden in a conftest, no mark that
    pytest acts on at setup), else None; worked out once per test function."""
    known = item.config.stash.setdefault(_PLAIN, {})
    function = (id(item.parent), getattr(item, "originalname", item.name))
    if function in known:
        return known[function]
    known[function] = None
    if any(item.config.getoption(name, False) for name in _SETUP_OPTIONS):
        return None
    fixtures = pytest_internals.fixture_modules(item)
    params = getattr(getattr(item, "callspec", None), "params", {})
    if fixtures is None or pytest_internals.call_phase() is None or "case" not in params:
        return None
    if any(next(item.iter_markers(name), None) is not None for name in _SETUP_MARKS):
        return None
    kinds = [name for name in MODEL_FIXTURES if name in fixtures and name in params]
    pytests_own = {"case", "request"}  # the case is a parameter
    plugins = {*kinds, "record", "evaluator"}
    if len(kinds) != 1 or any(
        name not in pytests_own and (name not in plugins or module != _FIXTURES_MODULE)
        for name, module in fixtures.items()
    ):
        return None
    known[function] = (kinds[0], "evaluator" in fixtures)
    return known[function]


def _run_without_setup(item: pytest.Item, arguments: dict[str, Any]) -> bool:
    """An item's reports as pytest makes them (setup, call, teardown; the passed setup and
    teardown ones only where someone reads them), on the arguments its fixtures would have
    given. Where nothing but pytest itself and this plugin acts in the call phase, the item
    runs directly and its call report is made here, as pytest would make it
    (output the test prints is not captured then: a benchmark test prints nothing); else
    pytest's own call phase runs it."""
    location, _ = _where(item)
    unread, plain = _passed_phases_unread(item.config), _plain_call_phase(item.config)
    hooks, nodeid = _report_hooks(item, unread and plain), item.nodeid
    hooks.start(nodeid, location)
    keywords = pytest_internals.keywords_of(item)
    where, properties = (pytest_internals.report_node_id(item), location), item.user_properties
    if not unread:
        hooks.report(pytest.TestReport(*where, keywords, "passed", None, "setup", user_properties=properties))
    item.funcargs = arguments  # type: ignore[attr-defined]
    pytest_internals.know_location(item, location)
    try:
        if plain:
            hooks.report(_call_report(item, location, keywords))
        else:
            call_phase = pytest_internals.call_phase()
            assert call_phase is not None  # checked by `_sent_ahead_arguments`
            call_phase(item)
    finally:
        # As pytest's protocol ends: what the item held goes (its model stays in the registry).
        pytest_internals.forget_arguments(item)
        os.environ.pop("PYTEST_CURRENT_TEST", None)
    if not unread:
        teardown = pytest.TestReport(*where, keywords, "passed", None, "teardown", user_properties=item.user_properties)
        hooks.report(teardown)
    hooks.finish(nodeid, location)
    return True


_PLAIN_CALL = pytest.StashKey[bool]()


def _plain_call_phase(config: pytest.Config) -> bool:
    """Worked out once per session: plugins are all registered before the first item runs."""
    plain = config.stash.get(_PLAIN_CALL, None)
    if plain is None:
        plain = config.stash[_PLAIN_CALL] = pytest_internals.call_hooks_are_pytests_own(config)
    return plain


def _call_report(
    item: pytest.Item, location: tuple[str, int | None, str], keywords: dict[str, Any]
) -> pytest.TestReport:
    """The item's call phase, run without the hooks that only pytest's own plugins implement,
    and its report as `pytest_runtest_makereport` would make it."""
    call: pytest.CallInfo[Any] = pytest.CallInfo.from_call(
        lambda: _run_benchmark_item(item), "call", reraise=_PASSED_ON
    )
    if call.excinfo is None:
        return pytest.TestReport(
            pytest_internals.report_node_id(item), location, keywords, "passed", None, "call",
            duration=call.duration, start=call.start, stop=call.stop, user_properties=item.user_properties,
        )  # fmt: skip
    return pytest_runtest_makereport(item, call) or pytest.TestReport.from_item_and_call(item, call)


# Passed on as pytest's own call phase passes them on: a Ctrl-C, `pytest.exit()`.
_PASSED_ON = (KeyboardInterrupt, pytest.exit.Exception)
# Failures reported as one line, not a traceback (see `_explain`).
_ONE_LINE_ERRORS = (ModelError, CaseInputError, runner.ModelFailure)


_WHERE = pytest.StashKey[dict[tuple[int, str], tuple[str, int | None, str, str, int]]]()


def _where(item: pytest.Item) -> tuple[tuple[str, int | None, str], tuple[str, int, str]]:
    """The item's location and the place its skip is reported at, as pytest computes them,
    worked out once per test function: every item of a function shares the file and line, and
    its name ends the location's last part (pytest resolves the paths anew for each item)."""
    known = item.config.stash.setdefault(_WHERE, {})
    function = (id(item.parent), getattr(item, "originalname", item.name))
    shared = known.get(function)
    if shared is None:
        relative, line, domain = item.location
        path, function_line = item.reportinfo()[:2]
        if not domain.endswith(item.name):
            return (relative, line, domain), (str(path), (function_line or 0) + 1, f"Skipped: {CACHED}")
        shared = known[function] = (
            relative,
            line,
            domain[: len(domain) - len(item.name)],
            str(path),
            function_line or 0,
        )
    relative, line, prefix, path_text, function_line = shared
    return (relative, line, prefix + item.name), (path_text, function_line + 1, f"Skipped: {CACHED}")


def _nothing_to_tear_down(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """Would pytest's teardown after `item` finalize nothing? (Its set-up stack is already a
    prefix of what the next item needs, or empty.)"""
    stack = pytest_internals.setup_stack(item.session)
    if stack is None:
        return False  # another pytest: take its own path
    return _still_needed(stack, nextitem)


def _still_needed(stack: list[pytest.Item | pytest.Collector], nextitem: pytest.Item | None) -> bool:
    """Is every node pytest has set up (`stack`, outermost first) needed by `nextitem` too?"""
    if not stack:
        return True
    needed = nextitem.listchain() if nextitem is not None else []
    return stack == needed[: len(stack)]


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before an item that will write a row builds its model (after skip marks had their say,
    before fixtures): the results folder must take rows, or the run stops now with one line,
    before any model work is spent."""
    state = item.config.stash.get(STATE_KEY, None)
    plan = runner.plan_for(item, state) if state is not None else None
    if state is None or plan is None or plan.skip_reason or pytest_internals.skip_mark(item) is not None:
        return
    state.store.prepare(plan.family.name)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    return True if _run_benchmark_item(pyfuncitem) else None


def _run_benchmark_item(item: pytest.Item) -> bool:
    """Run a benchmark item's iterations and record its row; False for any other test."""
    state = item.config.stash.get(STATE_KEY, None)
    plan = runner.plan_for(item, state) if state is not None else None
    if plan is None or state is None:
        return False
    ahead = scheduling.scheduler(item.config, state)
    ahead.before(item, plan)
    sent = current_requests.set(ahead.conversations_sent(item.nodeid))
    try:
        runner.run_item(item, plan, state)  # type: ignore[arg-type]
    finally:
        current_requests.reset(sent)
        ahead.after(item)
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> pytest.TestReport | None:
    """A failure that is the model's, the data's or the disk's is reported as one line, made
    here: pytest would render the traceback first (parsing the source of every frame) only to
    have the line replace it. Any other outcome is pytest's own report."""
    error = call.excinfo.value if call.excinfo is not None else None
    if not isinstance(error, (StorageError, *_ONE_LINE_ERRORS)):
        return None
    report = pytest.TestReport(
        pytest_internals.report_node_id(item),
        item.location,
        pytest_internals.keywords_of(item),
        "failed",
        None,
        cast(Literal["setup", "call", "teardown"], call.when),  # an item's phases: never "collect"
        pytest_internals.captured_sections(item),
        call.duration,
        call.start,
        call.stop,
        user_properties=item.user_properties,
    )
    _explain(item, call, report)
    return report


def _explain(item: pytest.Item, call: pytest.CallInfo[Any], report: pytest.TestReport) -> None:
    """One line for a failure that is the model's or the data's, not a traceback wall; a folder
    that refuses writes stops the session; a model that could not be built gets an error row."""
    error = call.excinfo.value if call.excinfo is not None else None
    if isinstance(error, StorageError):
        # A folder the run must write refuses: every later item would fail the same way.
        report.longrepr = str(error)
        hint = "; --no-response-cache runs without the caches" if error.what == CACHE_FOLDER else ""
        item.session.shouldstop = f"{error}; the run stops here, and what is stored is unchanged{hint}"
    elif isinstance(error, _ONE_LINE_ERRORS):
        report.longrepr = safe_text(str(error))  # one line, not a traceback wall; it may quote a file
        state = item.config.stash.get(STATE_KEY, None)
        if call.when == "setup" and isinstance(error, ModelError) and state is not None:
            plan = runner.plan_for(item, state)
            if plan is not None:
                runner.record_setup_error(plan, state, str(error))


# --- the end ------------------------------------------------------------------------------


class SessionEnd:
    """Hooks that need the run's state: registered per config in `pytest_configure`."""

    def __init__(self, state: BenchmarkState, run: RunContext, controller: bool) -> None:
        self.state = state
        self.run = run
        self.controller = controller
        self.prefix = _shown(state.benchmark_dir, state.root) + "/"
        self.store_notes: list[str] = []
        self.compacted: dict[str, Loaded] | None = None  # the rows as compaction left them, by family
        self.unreported: list[str] = []
        self.totals: dict[str, float] = {}  # usage summed over the items run this session
        self.down: dict[str, tuple[str, int]] = {}  # model -> (why it is down, its error rows)
        self.ran = False  # did an item of this session run (and so write a row)?
        self.storage_fault: str | None = None
        self.meter: Any = None  # the cost meter's token, while this session measures
        self.measured: cost.Meter | None = None  # this process's meter, which counts texts embedded
        self.embedded_by_workers = 0  # texts the xdist workers' meters counted

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs in the controller under xdist too: it is how the controller learns that
        # benchmark items were part of this session.
        if report.nodeid.startswith(self.prefix):
            self.state.saw_benchmark_items = True
            self.ran = self.ran or report.when == "call"
            # every phase's report carries the item's properties: count them once
            for name, value in report.user_properties if report.when == "call" else ():
                if name == "ragmatrix_usage" and isinstance(value, dict):
                    for key, count in value.items():
                        self.totals[key] = self.totals.get(key, 0) + count
                if name == "ragmatrix_model_down" and isinstance(value, list):
                    model, why = str(value[0]), str(value[1])
                    first_why, items = self.down.get(model, (why, 0))
                    self.down[model] = (first_why, items + 1)

    def end_measuring(self) -> None:
        """Append the cost figures this process measured (every worker its own), once."""
        meter, self.meter = self.meter, None
        if meter is not None:
            cost.end_session(meter)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        state = self.state
        self.run.close()  # what runs on the loop, the clients, then the models and their caches
        self.end_measuring()
        output = getattr(session.config, "workeroutput", None)  # an xdist worker tells its controller
        if output is not None and self.measured is not None:
            output["ragmatrix_texts_embedded"] = self.measured.texts_embedded
        if state.saw_benchmark_items:
            # What the run made and keeps to the process's end (the items' reports, which the
            # terminal holds) goes out of the collector's walks, as at collection's end: pytest's
            # collections at its exit and the interpreter's walked it all again, about 30 ms of a
            # cached rerun of 10,000 items. The garbage is collected first, so that pytest still
            # hears of an exception raised as it goes (an unclosed session's warning).
            gc.collect()
            gc.freeze()
        try:
            if self.controller and state.saw_benchmark_items:
                self._compact(session)
        finally:
            state.store.close()

    def _compact(self, session: pytest.Session) -> None:
        state = self.state
        done = state.compact_store()
        self.store_notes += done.notes
        if set(done.loaded) == set(state.store.families()):  # else one it could not read: read all again
            self.compacted = done.loaded
        if done.results_fault is not None:
            self.storage_fault = done.results_fault
            if self.ran and session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if done.costs_fault is not None:
            self.storage_fault = done.costs_fault
        self.unreported = [p.line() for p in state.suite.problems if p.file not in state.collected_data_files]
        if self.unreported and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist: a worker is done; add the texts its models embedded."""
        self.embedded_by_workers += int(getattr(node, "workeroutput", {}).get("ragmatrix_texts_embedded", 0))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.end_measuring()  # a session that ended before its end (a usage error)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not (self.controller and self.state.saw_benchmark_items):
            return
        state = self.state
        write = terminalreporter.write_line
        terminalreporter.section("ragmatrix leaderboard")
        for line in self.unreported:
            write(f"case problem: {line}", red=True)
        skipped = state.suite.skipped
        for problem in skipped:
            write(f"warning: {problem.line()}", yellow=True)
        if skipped:
            write(f"{len(skipped)} case(s) skipped, one line each above; the other cases ran", yellow=True)
        if self.storage_fault:
            write(f"store: {self.storage_fault}", red=self.ran, yellow=not self.ran)
        for note in self.store_notes:
            write(f"store: {note}", yellow=True)
        from ragmatrix.report.summary import SummaryInputs, leaderboard_summary

        loaded = self.compacted if self.compacted is not None else state.store.load_all()
        # the families the stored rows belong to, each module imported on its own
        families = {name: found for name in loaded if (found := family_named(name)) is not None}
        models_file = state.models_file
        summary = leaderboard_summary(
            SummaryInputs(state.store, loaded, families, state.results_dir, models_file, state.compare_variants)
        )
        for note in summary.notes:
            write(f"note: {note}", yellow=True)
        for text in summary.cost_problems:
            write(f"store: {text}", yellow=True)
        for text in summary.lines:
            write(text)
        shown = _shown(state.results_dir, state.root)
        option = "" if state.results_dir == state.benchmark_dir / "results" else f" --results-dir {shown}"
        write(f"results: {shown} (significance tests, plots and HTML: ragmatrix report{option})")
        embedded = self.embedded_by_workers + (self.measured.texts_embedded if self.measured is not None else 0)
        write(_usage_line(self.totals, embedded))
        unused = _unused_warning(self.totals)
        if unused is not None:
            write(unused, yellow=True)
        for model, (why, items) in sorted(self.down.items()):
            write(f"{model}: {why}; {items} item(s) recorded as errors, retried on the next run", red=True)
