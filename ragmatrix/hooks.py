"""The pytest hooks of ragmatrix: a thin layer over the modules that do the work.

- options and the session header;
- collection: data files report their problems, test modules are parametrized over
  model x case, and items whose result is stored are skipped as `cached`;
- running: iterations and recording (`ragmatrix.runner`);
- the end: compaction of the store and the leaderboard, by the controller only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragmatrix import runner, scheduling
from ragmatrix.cache import set_cache_dir
from ragmatrix.case import CaseInputError
from ragmatrix.cases import DEFAULT_MAX_VARIANTS, without_prompts
from ragmatrix.cli import load_dotenv
from ragmatrix.families import all_families, family_named, register
from ragmatrix.models import aio, progress
from ragmatrix.models.client import ModelError
from ragmatrix.models.models_file import ModelsFileError
from ragmatrix.session import MODEL_FIXTURES, STATE_KEY, BenchmarkState, get_state

_HELP_MODELS = "comma-separated model ids from benchmark/models.yaml to run (default: all available)"
_HELP_MAX_VARIANTS = f"the most items one case may expand to (default {DEFAULT_MAX_VARIANTS})"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from ragmatrix import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ragmatrix", "ragmatrix benchmark")
    group.addoption("--run-all", action="store_true", help="rerun every item, replacing stored results")
    group.addoption("--models", default=None, help=_HELP_MODELS)
    group.addoption(
        "--evaluator", default=None, help="id of the LLM in models.yaml that checks answers no rule can check"
    )
    group.addoption("--iterations", type=int, default=None, help="repeat each item N times (default 1)")
    group.addoption("--results-dir", default=None, help="read and write results here (default benchmark/results)")
    group.addoption(
        "--send-ahead",
        type=int,
        default=256,
        metavar="N",
        help="send about N model requests ahead of the items at a time (default 256); a killed run loses at most these",
    )
    group.addoption(
        "--compare-variants",
        action="store_true",
        help="in the summary, test each model's variants (chunkings, prompt wordings) against each other",
    )
    group.addoption(
        "--no-response-cache",
        action="store_true",
        help="ask the models again instead of replaying cached responses and embeddings",
    )
    group.addoption("--max-variants", type=int, default=None, help=_HELP_MAX_VARIANTS)
    parser.addini("benchmark_dir", "folder holding test_<family>.py, models.yaml and data/", default="benchmark")
    parser.addini("max_variants", _HELP_MAX_VARIANTS, default=str(DEFAULT_MAX_VARIANTS))


def pytest_configure(config: pytest.Config) -> None:
    root = config.rootpath
    load_dotenv(root)  # API keys from .env; variables already set win
    benchmark_dir = root / str(config.getini("benchmark_dir"))
    results_option = config.getoption("--results-dir")
    results_dir = (
        (config.invocation_params.dir / results_option).resolve() if results_option else benchmark_dir / "results"
    )
    iterations = config.getoption("--iterations") or 1
    if iterations < 1:
        raise pytest.UsageError("--iterations must be at least 1")
    wanted = config.getoption("--models")
    max_variants = _max_variants(config)
    state = BenchmarkState(
        root=root,
        benchmark_dir=benchmark_dir,
        results_dir=results_dir,
        run_all=bool(config.getoption("--run-all")),
        iterations=iterations,
        wanted_models=[m.strip() for m in wanted.split(",") if m.strip()] if wanted else None,
        use_cache=not config.getoption("--no-response-cache"),
        compare_variants=bool(config.getoption("--compare-variants")),
        send_ahead=max(1, int(config.getoption("--send-ahead"))),
        max_variants=max_variants,
        evaluator_option=config.getoption("--evaluator"),
    )
    state.registry.use_cache = state.use_cache
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "ragmatrix_models" in workerinput:
        state.given_models = workerinput["ragmatrix_models"]
    for families in config.hook.pytest_ragmatrix_families(config=config):
        for family in families:
            register(family)
    set_cache_dir(root / ".benchmark_cache")
    config.stash[STATE_KEY] = state
    config.pluginmanager.register(SessionEnd(state, controller=workerinput is None), "ragmatrix-session-end")
    config.addinivalue_line(
        "markers", "cases(where): run a benchmark test only on the cases for which where(case) is true"
    )
    if _selected(config):
        capture = config.pluginmanager.getplugin("capturemanager")
        if workerinput is None and capture is not None:  # progress bars reach the terminal, not the capture
            progress.show_on_terminal(capture.global_and_fixture_disabled)
            config.add_cleanup(lambda: progress.show_on_terminal(None))
        for family in all_families().values():
            if family.new_session is not None:
                family.new_session()
        try:
            models = state.models  # decide the matrix now, so a bad models.yaml stops the run at once
            state.evaluator  # noqa: B018 - and the evaluator
        except ModelsFileError as error:
            raise pytest.UsageError(str(error)) from None
        if state.wanted_models and not models.available and workerinput is None:
            # Nothing would run, and a leaderboard of other models' stored rows would look like
            # an answer: say why each named model cannot run, and stop.
            reasons = "; ".join(f"{model}: {why}" for model, why in models.left_out.items())
            raise pytest.UsageError(f"no model of --models can run here ({reasons})")


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


def _selected(config: pytest.Config) -> bool:
    state = get_state(config)
    return state.benchmark_dir.is_dir() and state.selects_benchmark([str(a) for a in config.args])


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: hand each worker the controller's choice of models, so all agree on the matrix."""
    config = node.config
    if _selected(config):
        models = get_state(config).models
        evaluator = get_state(config).evaluator
        node.workerinput["ragmatrix_models"] = {
            "available": [m.id for m in models.available],
            "left_out": models.left_out,
            "evaluator": {"id": evaluator.spec.id if evaluator.spec else None, "reason": evaluator.reason},
        }


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if not _selected(config):
        return None
    state = get_state(config)
    models = state.models
    lines = [
        "ragmatrix: models: " + (", ".join(f"{m.id} ({m.kind})" for m in models.available) or "none"),
        f"ragmatrix: results: {_shown(state.results_dir, state.root)}, iterations: {state.iterations}"
        + (", --run-all" if state.run_all else ""),
    ]
    lines += [f"ragmatrix: left out {model}: {reason}" for model, reason in models.left_out.items()]
    evaluator = state.evaluator
    if evaluator.spec is not None:
        lines.append(f"ragmatrix: evaluator: {evaluator.spec.id}")
    elif evaluator.reason.startswith("evaluator "):  # one was asked for, but is left out
        lines.append(f"ragmatrix: {evaluator.reason}")
    return lines


def _usage_line(totals: dict[str, float]) -> str:
    t = {k: int(v) for k, v in totals.items() if k != "cost_usd"}
    line = (
        f"this run: {t.get('calls', 0)} LLM calls ({t.get('cached_calls', 0)} from the response cache), "
        f"{t.get('prompt_tokens', 0) + t.get('completion_tokens', 0)} tokens; "
        f"{t.get('texts_embedded', 0)} texts embedded, {t.get('embedding_cache_hits', 0)} from the embedding cache "
        f"of earlier runs, {t.get('embedding_shared', 0)} shared within this run"
    )
    if totals.get("cost_usd"):
        line += f"; cost ${totals['cost_usd']:.4f}"
    return line


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
    cases = state.suite.cases.get(name, [])
    marker = metafunc.definition.get_closest_marker("cases")
    if marker is not None:
        # A keyword, not a positional argument: pytest.mark.x(callable) would decorate it.
        predicate = marker.kwargs["where"]
        cases = [c for c in cases if predicate(c)]
    test = metafunc.function.__name__
    uses_evaluator = "evaluator" in metafunc.fixturenames
    params = []
    for spec in state.models.of_kind(kind):
        for case in cases if spec.reads_prompts else without_prompts(cases):
            marks = [pytest.mark.xdist_group(spec.id)]
            plan = state.plan(metafunc.module.__name__, test, family, spec, case, uses_evaluator)
            if plan.skip_reason:
                marks.append(pytest.mark.skip(reason=plan.skip_reason))
            elif state.is_cached(plan):
                marks.append(pytest.mark.skip(reason="cached"))
            params.append(pytest.param(spec, case, id=f"{spec.id}-{case.id}", marks=marks))
    if not params:
        reason = f"no {kind} in the matrix (see the session header)" if cases else f"no {name} cases"
        params = [pytest.param(None, None, id=f"no-{kind}", marks=pytest.mark.skip(reason=reason))]
    metafunc.parametrize([kind, "case"], params, indirect=[kind])


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
    from ragmatrix.secrets import guard_logging

    plugin = config.pluginmanager.get_plugin("logging-plugin")
    names = ("caplog_handler", "report_handler", "log_file_handler", "log_cli_handler")
    guard_logging(*(getattr(plugin, name) for name in names if getattr(plugin, name, None) is not None))


def _cached_reads_as_success(config: pytest.Config) -> None:
    """Colour `cached` green in pytest's summary, and a run of only cached items green too.

    pytest colours a status it does not know yellow, and a run that passed nothing yellow; it
    has no public way to declare a status a success, so its two tables are extended here.
    Without them (another pytest), the run still works, only in yellow."""
    from _pytest import terminal

    if CACHED not in terminal.KNOWN_TYPES:
        terminal.KNOWN_TYPES = (*terminal.KNOWN_TYPES, CACHED)  # type: ignore[assignment]
    terminal._color_for_type.setdefault(CACHED, "green")
    reporter: Any = config.pluginmanager.get_plugin("terminalreporter")
    decide = getattr(reporter, "_determine_main_color", None)
    if reporter is None or decide is None or getattr(decide, "ragmatrix", False):
        return

    def determine_main_color(unknown_type_seen: bool) -> str:
        colour = decide(unknown_type_seen)
        bad = {"failed", "error", "warnings", "xpassed"} & set(reporter.stats)
        return "green" if colour == "yellow" and CACHED in reporter.stats and not bad else colour

    determine_main_color.ragmatrix = True  # type: ignore[attr-defined]
    reporter._determine_main_color = determine_main_color


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    state = pyfuncitem.config.stash.get(STATE_KEY, None)
    plan = runner.plan_for(pyfuncitem, state) if state is not None else None
    if plan is None or state is None:
        return None
    scheduling.scheduler(pyfuncitem.config, state).before(pyfuncitem, plan)
    runner.run_item(pyfuncitem, plan, state)
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report = outcome.get_result()
    error = call.excinfo.value if call.excinfo is not None else None
    if isinstance(error, ModelError | CaseInputError | runner.ModelFailure):
        report.longrepr = str(error)  # one line, not a traceback wall
        state = item.config.stash.get(STATE_KEY, None)
        if call.when == "setup" and isinstance(error, ModelError) and state is not None:
            plan = runner.plan_for(item, state)
            if plan is not None:
                runner.record_setup_error(plan, state, str(error))


# --- the end ------------------------------------------------------------------------------


class SessionEnd:
    """Hooks that need the run's state: registered per config in `pytest_configure`."""

    def __init__(self, state: BenchmarkState, controller: bool) -> None:
        self.state = state
        self.controller = controller
        self.prefix = _shown(state.benchmark_dir, state.root) + "/"
        self.store_notes: list[str] = []
        self.unreported: list[str] = []
        self.totals: dict[str, float] = {}  # usage summed over the items run this session
        self.down: dict[str, tuple[str, int]] = {}  # model -> (why it is down, its error rows)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs in the controller under xdist too: it is how the controller learns that
        # benchmark items were part of this session.
        if report.nodeid.startswith(self.prefix):
            self.state.saw_benchmark_items = True
            # every phase's report carries the item's properties: count them once
            for name, value in report.user_properties if report.when == "call" else ():
                if name == "ragmatrix_usage" and isinstance(value, dict):
                    for key, count in value.items():
                        self.totals[key] = self.totals.get(key, 0) + count
                if name == "ragmatrix_model_down" and isinstance(value, list):
                    model, why = str(value[0]), str(value[1])
                    first_why, items = self.down.get(model, (why, 0))
                    self.down[model] = (first_why, items + 1)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        state = self.state
        state.registry.close()
        aio.close()
        if not (self.controller and state.saw_benchmark_items):
            return
        suite = state.suite
        reads_prompts = state.reads_prompts()
        for family in state.store.families():
            # Rows of a case deleted from the YAML are dropped, but only when every data file
            # loaded cleanly: a typo must not delete results.
            keep = None
            if not suite.problems and family in state.known_families():
                cases = suite.cases.get(family, [])
                as_read = {c.id for c in cases}
                collapsed = {c.id for c in without_prompts(cases)}
                ids = {True: as_read, False: collapsed, None: as_read | collapsed}  # None: a model no longer listed
                keep = lambda row, ids=ids: row.item in ids[reads_prompts.get(row.model)]  # noqa: E731
            self.store_notes += state.store.compact(family, keep).problems
        self.unreported = [p.line() for p in suite.problems if p.file not in state.collected_data_files]
        if self.unreported and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not (self.controller and self.state.saw_benchmark_items):
            return
        state = self.state
        write = terminalreporter.write_line
        terminalreporter.section("ragmatrix leaderboard")
        for line in self.unreported:
            write(f"case problem: {line}", red=True)
        for note in self.store_notes:
            write(f"store: {note}", yellow=True)
        from ragmatrix.report import remembered_stats
        from ragmatrix.report.aggregate import aggregate
        from ragmatrix.report.terminal import render

        loaded = state.store.load_all()
        remembered = remembered_stats()
        tables = aggregate(
            {family: data.rows for family, data in loaded.items() if data.rows},
            memo=remembered,
            variants=state.compare_variants,
        )
        remembered.save()
        for note in [left.note() for left in tables.left_out]:
            write(f"note: {note}", yellow=True)
        for text in render(tables, variants=state.compare_variants) if tables.families else ["no results yet"]:
            write(text)
        shown = _shown(state.results_dir, state.root)
        option = "" if state.results_dir == state.benchmark_dir / "results" else f" --results-dir {shown}"
        write(f"results: {shown} (significance tests, plots and HTML: ragmatrix report{option})")
        write(_usage_line(self.totals))
        for model, (why, items) in sorted(self.down.items()):
            write(f"{model}: {why}; {items} item(s) recorded as errors, retried on the next run", red=True)
