"""The state of one benchmark session: where things are, which models and cases, what is
stored, and the store's clean-up rule at the end (`kept_rows`). What the run holds below the
benchmark (the event loop, the model registry, the corpora) is its context's
(`ragmatrix.foundations.context`).

Everything is loaded lazily, so `pytest tests` never reads the benchmark, and a fully
cached `pytest benchmark` reads YAML and JSONL but never builds a model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ragmatrix.cost.price import AnyPrice, spec_price
from ragmatrix.families import Family, family_named
from ragmatrix.foundations.cache import cache_dir
from ragmatrix.foundations.context import current
from ragmatrix.foundations.keys import result_key
from ragmatrix.foundations.storage import StorageError
from ragmatrix.models.models_file import ModelSet, load_models, select_models
from ragmatrix.models.registry import Registry, run_registry
from ragmatrix.models.spec import ModelSpec
from ragmatrix.results.provenance import provenance
from ragmatrix.results.rows import Provenance, Row
from ragmatrix.results.store import Loaded, ResultStore
from ragmatrix.seam.case import Case, CaseInputError
from ragmatrix.suite import DEFAULT_MAX_VARIANTS
from ragmatrix.suite.evaluator import EvaluatorChoice, choose_evaluator
from ragmatrix.suite.loader import Suite, load_suite

if TYPE_CHECKING:
    from ragmatrix.plugin.sharding import Shard  # imported where --shard is given

STATE_KEY = pytest.StashKey["BenchmarkState"]()
MODEL_FIXTURES = ("llm", "embedder", "judge", "retriever", "reranker")


@dataclass
class BenchmarkState:
    root: Path
    benchmark_dir: Path
    results_dir: Path
    run_all: bool = False
    iterations: int = 1
    wanted_models: list[str] | None = None
    use_cache: bool = True
    compare_variants: bool = False
    # At most about this many model requests are sent ahead at once (see ragmatrix.plugin.scheduling).
    send_ahead: int = 256
    max_variants: int = DEFAULT_MAX_VARIANTS  # the most items one case may expand to
    # Set on xdist workers from what the controller decided, so every process sees one matrix.
    given_models: dict[str, Any] | None = None
    evaluator_option: str | None = None  # --evaluator ID
    shard: Shard | None = None  # --shard K/N
    shard_line: str | None = None  # what the shard kept, for the header after collection
    registry: Registry = field(default_factory=lambda: run_registry(current()))  # the run's
    saw_benchmark_items: bool = False
    collected_data_files: set[str] = field(default_factory=set)
    _store: ResultStore | None = None
    _models: ModelSet | None = None
    _suite: Suite | None = None
    # Per family, read when its first item asks: (model id, key) of its results, and the models.
    _completed: dict[str, tuple[set[tuple[str, str]], set[str]]] = field(default_factory=dict)
    _evaluator: EvaluatorChoice | None = None
    _corpora: dict[tuple[str, str], str | None] = field(default_factory=dict)
    _reads_prompts: dict[str, bool] | None = None
    _fingerprints: dict[str, tuple[ModelSpec, dict[str, Any]]] = field(default_factory=dict)
    _provenance: Provenance | None = None
    # Each item's plan, made once at collection: (module, test, model id, case id) -> plan.
    plans: dict[tuple[str, str, str, str], ItemPlan] = field(default_factory=dict)

    @property
    def store(self) -> ResultStore:
        """One store for the session: it keeps its files open and remembers what it read."""
        if self._store is None:
            self._store = ResultStore(self.results_dir)
        return self._store

    @property
    def provenance(self) -> Provenance:
        """What every row this session writes records of where it comes from, found once."""
        if self._provenance is None:
            self._provenance = provenance(self.benchmark_dir, [self.results_dir, cache_dir()])
        return self._provenance

    @property
    def data_dir(self) -> Path:
        return self.benchmark_dir / "data"

    @property
    def models_file(self) -> Path:
        return self.benchmark_dir / "models.yaml"

    def known_families(self) -> list[str]:
        """The families this benchmark checks: those with a `test_<family>.py` module."""
        return sorted(p.stem[len("test_") :] for p in self.benchmark_dir.glob("test_*.py"))

    def family_of(self, module_path: Path) -> str | None:
        """The family a benchmark test module checks, from its name `test_<family>.py`."""
        path = Path(module_path)
        if path.parent.resolve() != self.benchmark_dir.resolve() or not path.stem.startswith("test_"):
            return None
        return path.stem[len("test_") :]

    @property
    def models(self) -> ModelSet:
        if self._models is None:
            if self.given_models is not None:
                specs = {s.id: s for s in load_models(self.models_file, remember=True)}
                self._models = ModelSet(
                    available=[specs[i] for i in self.given_models["available"]],
                    left_out=dict(self.given_models["left_out"]),
                )
            else:
                specs_list = load_models(self.models_file, remember=True)
                self._models = select_models(specs_list, self.wanted_models)
        return self._models

    @property
    def evaluator(self) -> EvaluatorChoice:
        """The evaluator LLM of this run; on xdist workers, the controller's choice."""
        if self._evaluator is None:
            given = (self.given_models or {}).get("evaluator")
            if given is not None:
                specs = {s.id: s for s in load_models(self.models_file, remember=True)}
                chosen = choose_evaluator(self.models_file, given["id"], probe=False, remember=True)
                spec = specs.get(given["id"]) if given["id"] else None
                self._evaluator = EvaluatorChoice(spec, chosen.instruction, given["reason"])
            else:
                self._evaluator = choose_evaluator(self.models_file, self.evaluator_option, remember=True)
        return self._evaluator

    def price_of(self, model: str) -> tuple[AnyPrice | None, str]:
        """The price this run's requests of `model` (a model of the matrix, the evaluator, or an
        ensemble's member) are priced at, and where it comes from (`ragmatrix.cost.price`)."""
        evaluator = [self.evaluator.spec] if self.evaluator.spec is not None else []
        for spec in [*self.models.available, *evaluator]:
            for candidate in (spec, *(spec.members or ())):
                if candidate.id == model:
                    return spec_price(candidate)
        return None, "unknown"

    def reads_prompts(self) -> dict[str, bool]:
        """Whether each model of models.yaml, in the matrix or not, reads prompt wording."""
        if self._reads_prompts is None:
            specs = load_models(self.models_file, remember=True)
            self._reads_prompts = {spec.id: spec.reads_prompts for spec in specs}
        return self._reads_prompts

    @property
    def suite(self) -> Suite:
        if self._suite is None:
            self._suite = load_suite(
                self.data_dir, self.known_families(), root=self.root, max_variants=self.max_variants
            )
        return self._suite

    def is_cached(self, plan: ItemPlan) -> bool:
        """Does the store hold this model id's result under this item's key? Only the item's
        family's results are read for it (keys name their family): a run of one family's test
        module does not parse the others' rows before its first request (a shipped benchmark's
        code retrieval rows, 2.4 MB, take 40 ms)."""
        name = plan.family.name
        known = self._completed.get(name)
        if known is None:
            done = set() if self.run_all else self.store.completed(name)
            known = self._completed[name] = (done, {model for model, _ in done})
        done, models = known
        # A model with no result stored (a first run, a model just added, --run-all) needs no
        # key here: the item runs and works it out then.
        return plan.model.id in models and (plan.model.id, plan.key) in done

    def plan(
        self, module: str, test: str, family: Family, spec: ModelSpec, case: Case, uses_evaluator: bool = False
    ) -> ItemPlan:
        """The item's plan, made once per item and session; its result key is worked out when
        first asked (`ItemPlan.key`).

        A test that takes the `evaluator` fixture keys each case its family sends to the
        evaluator by the evaluator's fingerprint and prompt; without an evaluator, the plan
        says why the item is skipped."""
        ident = (module, test, spec.id, case.id)
        plan = self.plans.get(ident)
        if plan is None:
            evaluator: dict[str, Any] | None = None
            skip: str | None = None
            prompt = (
                family.evaluator_prompt(case, self.evaluator.instruction)
                if uses_evaluator and family.evaluator_prompt is not None
                else None
            )
            if prompt is not None:
                skip = self.evaluator.skip_reason()
                evaluator = None if skip else self.evaluator.key_content(prompt)
            plan = self.plans[ident] = ItemPlan(family, test, spec, case, skip, evaluator, self)
        return plan

    def key_of(self, plan: ItemPlan) -> str:
        """The item's result key (`ItemPlan.key`)."""
        return result_key(
            evaluator=plan.evaluator,
            corpus=self.corpus_of(plan.family, plan.case),
            family=plan.family.name,
            test=plan.test,
            case=plan.case.content(),
            scoring_version=plan.family.scoring_version,
            model=self._fingerprint_of(plan.model),
            iterations=self.iterations,
        )

    def _fingerprint_of(self, spec: ModelSpec) -> dict[str, Any]:
        """A model's output fingerprint, read once per session: every item of the model is keyed
        by it."""
        known = self._fingerprints.get(spec.id)
        if known is None or known[0] is not spec:
            known = self._fingerprints[spec.id] = (spec, spec.output_fingerprint())
        return known[1]

    def corpus_of(self, family: Family, case: Case) -> str | None:
        """The fingerprint of the corpus or dataset a case reads, once per case and session:
        every model's item reads the same corpus, and collection and the run must agree on it.
        Unreadable input keys as such; the test then records the error. So does a fingerprint
        that fails otherwise (a family's bug): it is asked at collection for a model with stored
        results and as the row is written for another, and neither may lose the other items or
        the row."""
        memo_key = (family.name, case.id)
        if memo_key not in self._corpora:
            fingerprint: str | None = None
            if family.corpus_fingerprint is not None:
                try:
                    fingerprint = str(family.corpus_fingerprint(case))
                except CaseInputError as error:
                    fingerprint = f"unavailable: {error}"
                except Exception as error:
                    fingerprint = f"unavailable: {type(error).__name__}: {error}"
            self._corpora[memo_key] = fingerprint
        return self._corpora[memo_key]

    # -- the store at the end --------------------------------------------------------------------

    def kept_rows(self, family: str) -> Callable[[Row], bool] | None:
        """The store's clean-up rule: which of a family's rows compaction keeps. Rows of a case
        deleted from the YAML are dropped, but only when every data file loaded cleanly (a typo
        must not delete results) and the benchmark still checks the family; None keeps every
        row. A row's case is looked for as its model reads it: with its prompt variants, or
        collapsed for a model that reads no prompt (either, for a model no longer listed)."""
        suite = self.suite
        if suite.problems or family not in self.known_families():
            return None
        cases = suite.cases.get(family, [])
        # A family without prompt fields collapses nothing: the same cases, their ids once.
        described = family_named(family)
        same = described is None or not described.prompt_fields
        known: dict[bool | None, set[str]] = {}

        def ids(reads: bool | None) -> set[str]:
            """The case ids a model that reads prompts (True), reads none (False) or is no longer
            listed (None) keeps, worked out when a row first asks: a matrix whose models all
            read no prompt never needs the ids of every wording."""
            found = known.get(reads)
            if found is None:
                if reads is None:
                    found = ids(True) | ids(False)
                elif same:
                    found = known.get(not reads) or {c.id for c in cases}
                else:
                    found = {c.id for c in (cases if reads else suite.without_prompts(family))}
                known[reads] = found
            return found

        reads_prompts = self.reads_prompts()
        return lambda row: row.item in ids(reads_prompts.get(row.model))

    def compact_store(self) -> Compaction:
        """Compact every family's results (`kept_rows`) and the cost records: one line per
        problem found, and what a folder that refuses writes left as appended."""
        done = Compaction()
        for family in self.store.families():
            try:
                done.notes += self.store.compact(family, self.kept_rows(family)).problems
            except StorageError as error:
                # Every row is in the file as appended, which loads as it is; the next run that
                # can write compacts it.
                done.results_fault = f"{error}; {family}.jsonl is left as appended (it loads as it is)"
            left = self.store.as_last_read(family)
            if left is not None:
                done.loaded[family] = left
        from ragmatrix.cost.store import CostStore

        try:
            done.notes += CostStore(self.results_dir).compact_all()  # one line per (model, device)
        except StorageError as error:
            done.costs_fault = f"{error}; the cost records are left as appended (they load as they are)"
        return done


@dataclass
class Compaction:
    """What compacting the store at the end of a run found."""

    notes: list[str] = field(default_factory=list)
    results_fault: str | None = None  # a results file the folder would not let be replaced
    costs_fault: str | None = None
    # Each family's rows as its file holds them now: the summary that follows reads them here
    # instead of reading every file again.
    loaded: dict[str, Loaded] = field(default_factory=dict)


@dataclass(frozen=True)
class ItemPlan:
    """What identifies a benchmark item and its result."""

    family: Family
    test: str
    model: ModelSpec
    case: Case
    skip_reason: str | None = None  # set when the item cannot run (it needs an evaluator)
    # The evaluator's fingerprint and prompt, where an evaluator checks the item: part of the key.
    evaluator: dict[str, Any] | None = field(default=None, repr=False)
    state: BenchmarkState | None = field(default=None, repr=False, compare=False)  # works out its key

    @cached_property
    def key(self) -> str:
        """The item's result key, worked out when first asked: where the store holds no result
        of the item's model (a first run, `--run-all`), no one asks at collection, and the run's
        first requests do not wait for every item's key (an md5 of the item's JSON, about 0.02
        ms an item); the scheduler asks once an item's requests have gone ahead, a batch at a
        time (`scheduling._keyed`)."""
        if self.state is None:
            raise ValueError("a plan made without its session's state has no key")
        return self.state.key_of(self)


def get_state(config: pytest.Config) -> BenchmarkState:
    return config.stash[STATE_KEY]
