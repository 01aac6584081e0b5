"""Write the leaderboard report: leaderboard.md (for GitHub), leaderboard.html (one
self-contained page: images inline, no scripts, fonts or network) and PNG plots.

For each family: the models' mean, 95% CI, n, errors and invalid answers; paired significance
tests between models (McNemar for yes/no outcomes, a permutation test otherwise, Holm-adjusted);
every metric; and plots. An overview ranks the models across families. Rows of an older scoring
version, or of another number of iterations, are left out, and the report says so. Tokens are
priced at the price each run priced them at, kept with its cost records; --models-file re-prices
them with that file's prices, and the report says so.

examples:
  ragmatrix report
  ragmatrix report --results-dir /tmp/results --out /tmp/report
  ragmatrix report --compare old/results          # also print what changed
  ragmatrix report --models-file other.yaml       # re-price the tokens with other.yaml's prices
  ragmatrix report --heatmap finance_bond_price_yield
  ragmatrix report -p mypackage.echo              # a family a pytest plugin declares
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ragmatrix.cli.locate import add_results_dir

NAME = "report"
HELP = "the leaderboard as markdown, HTML and PNG plots, with intervals and significance"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_results_dir(parser)
    parser.add_argument("--out", type=Path, default=None, help="the report folder (default RESULTS_DIR/report)")
    parser.add_argument(
        "--models-file",
        type=Path,
        default=None,
        help="re-price the LLMs' tokens with this models.yaml's prices (and litellm model strings) instead "
        "of the prices the runs priced them at; the report says it re-priced (default: no re-pricing, and "
        "benchmark/models.yaml looked for from here upward names the variables to redact)",
    )
    parser.add_argument(
        "--compare", type=Path, default=None, metavar="OLD_RESULTS_DIR", help="print what changed since these results"
    )
    parser.add_argument(
        "--heatmap",
        action="append",
        default=None,
        metavar="ITEM",
        help="zelo_battles item (case or case:variant) to draw for every judge; repeatable (default: the first)",
    )
    parser.add_argument(
        "-p",
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="a pytest plugin module whose pytest_ragmatrix_families hook declares families the "
        "results hold (as given to pytest with -p); repeatable",
    )


def run(args: argparse.Namespace) -> int:
    from ragmatrix.cli import CommandError
    from ragmatrix.cli.locate import NotFound, models_file, project_root, results_folder
    from ragmatrix.foundations.context import start_run

    try:
        results: Path = results_folder(args.results_dir)
        # As every command finds it: --models-file, else benchmark/models.yaml from here upward;
        # the report runs without one (its cost records keep the prices), wherever the results are.
        models: Path | None = models_file(args.models_file) if args.models_file is not None else found_models_file()
    except NotFound as error:
        raise CommandError(str(error)) from None
    if not results.is_dir():
        raise CommandError(f"{results}: no such results folder")
    if args.compare is not None and not args.compare.is_dir():
        raise CommandError(f"{args.compare}: no such results folder")
    # The project's run: the remembered statistics in its cache folder, its secrets redacted.
    with start_run(project_root(models) if models is not None else Path.cwd()):
        _register_plugin_families(args.plugin)
        return _report(args, results, models)


def found_models_file() -> Path | None:
    """benchmark/models.yaml, found from the working directory upward as every command finds it."""
    from ragmatrix.cli.locate import NotFound, models_file

    try:
        return models_file(None)
    except NotFound:
        return None


def _register_plugin_families(modules: list[str]) -> None:
    """The families that pytest plugins declare (`pytest_ragmatrix_families`, called with no
    config), registered with this run: a family known only to a plugin is then reported with
    its own headline, sections and plots, as the terminal showed it."""
    import importlib

    from ragmatrix.cli import CommandError
    from ragmatrix.families import Family, register

    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as error:
            raise CommandError(f"--plugin {name}: cannot import it ({error})") from None
        hook = getattr(module, "pytest_ragmatrix_families", None)
        if hook is None:
            raise CommandError(f"--plugin {name}: the module has no pytest_ragmatrix_families hook")
        for family in hook(config=None):
            if not isinstance(family, Family):
                raise CommandError(f"--plugin {name}: pytest_ragmatrix_families returned {family!r}, not a Family")
            register(family)


def _report(args: argparse.Namespace, results: Path, models: Path | None) -> int:
    from ragmatrix.cli import CommandError
    from ragmatrix.cli.locate import RESULTS_DIR
    from ragmatrix.families import all_families
    from ragmatrix.report import load, write_report

    refer_to_models_file(results, models)
    rows, _ = load(results)
    if not rows:
        raise CommandError(f"{results}: no result rows (run `pytest benchmark` first)")
    if args.heatmap:
        items = {r.item for r in rows.get("zelo_battles", [])}
        unknown = [item for item in args.heatmap if item not in items]
        if unknown:
            known = ", ".join(sorted(items)[:5]) + (", ..." if len(items) > 5 else "")
            raise CommandError(f"no zelo_battles item {', '.join(unknown)} (items: {known or 'none'})")
    out: Path = args.out or results / "report"
    # The folder as the user would name it: as given, or the project's own when it was looked up.
    shown = str(args.results_dir) if args.results_dir is not None else RESULTS_DIR.as_posix()
    written = write_report(
        results,
        out,
        all_families(),
        shown_as=shown,
        compare_dir=args.compare,
        heatmaps=args.heatmap,
        models_file=models,
        reprice=args.models_file is not None,
    )
    if args.models_file is not None:
        print(f"note: tokens re-priced with the prices of {args.models_file}, not those the runs priced them at")
    for left in written.tables.left_out:
        print(f"note: {left.note()}")
    for note in written.notes:
        print(f"note: {note}")
    for problem in written.tables.problems:
        print(f"note: unreadable: {problem}")
    if written.changes is not None:
        print(f"changes since {args.compare}:" if written.changes else f"no changes since {args.compare}")
        for line in written.changes:
            print(f"  {line}")
    print(f"wrote {written.markdown}, {written.html}, {written.json} and {len(written.plots)} plot(s) in {out}")
    return 0


def refer_to_models_file(results: Path, models: Path | None = None) -> None:
    """The report redacts the values of the variables models.yaml names: read which they are
    from `models`, the file the command found, else from the models.yaml beside the results
    folder or the benchmark's (a broken file names none; the report is still written)."""
    from ragmatrix.cli.locate import MODELS_FILE
    from ragmatrix.models.models_file import ModelsFileError, load_models

    candidates = [models] if models is not None else [results.resolve().parent / "models.yaml", MODELS_FILE.resolve()]
    for path in dict.fromkeys(candidates):
        if path.is_file():
            try:
                load_models(path)
            except ModelsFileError:
                continue
