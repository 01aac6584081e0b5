"""Running one benchmark item: its iterations, and the row that records them.

A test function reads like a sentence and calls `record(outcome)` once. The runner calls it
once per iteration, turns model errors into error entries (never scores), and appends one row
to the store when the item is done, so a run killed later loses nothing already recorded.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from ragmatrix import cost
from ragmatrix.foundations.secrets import redact
from ragmatrix.foundations.shared_values import SharedValues
from ragmatrix.foundations.storage import StorageError
from ragmatrix.foundations.untrusted import safe_data, safe_text
from ragmatrix.models.client import MODEL_DOWN, ModelError
from ragmatrix.models.usage import Usage, current_sample, current_usage
from ragmatrix.plugin.pytest_internals import fixture_names
from ragmatrix.plugin.session import MODEL_FIXTURES, BenchmarkState, ItemPlan
from ragmatrix.results.rows import Iteration, Provenance, Row
from ragmatrix.seam.case import CaseInputError
from ragmatrix.seam.outcome import Outcome


class ModelFailure(Exception):
    """Raised after recording a model or input error, so pytest reports the item as failed
    with one line."""


class Recorder:
    """The `record` fixture: the test hands it the outcome of the current iteration."""

    def __init__(self) -> None:
        self.outcome: Outcome | None = None

    def __call__(self, outcome: Outcome) -> None:
        if not isinstance(outcome, Outcome):
            raise TypeError(f"record() takes an Outcome, not {type(outcome).__name__}")
        if self.outcome is not None:
            raise RuntimeError("record() was called twice in one iteration")
        self.outcome = outcome


_PLAN = pytest.StashKey[ItemPlan]()


def plan_for(item: pytest.Item, state: BenchmarkState) -> ItemPlan | None:
    """The plan made for this item at collection, or None for a test that is no benchmark item
    (kept on the item once found: the hooks of one item ask for it four times)."""
    found = item.stash.get(_PLAN, None)
    if found is not None:
        return found
    plan = _planned(item, state)
    if plan is not None:
        item.stash[_PLAN] = plan
    return plan


def _planned(item: pytest.Item, state: BenchmarkState) -> ItemPlan | None:
    callspec = getattr(item, "callspec", None)
    module = getattr(item, "module", None)
    if callspec is None or module is None or "case" not in callspec.params:
        return None
    kinds = [k for k in MODEL_FIXTURES if k in callspec.params]
    spec, case = (callspec.params[kinds[0]], callspec.params["case"]) if kinds else (None, None)
    if spec is None or case is None:
        return None
    return state.plans.get((module.__name__, item.originalname, spec.id, case.id))  # type: ignore[attr-defined]


def run_item(item: pytest.Function, plan: ItemPlan, state: BenchmarkState) -> None:
    recorder: Recorder | None = item.funcargs.get("record")  # type: ignore[assignment]
    if recorder is None:
        raise pytest.UsageError(f"{item.nodeid}: a benchmark test must take the `record` fixture")
    arguments = {name: item.funcargs[name] for name in fixture_names(item)}
    usage = Usage()
    entries: list[dict[str, Any]] = []
    crash: BaseException | None = None
    started = time.perf_counter()
    work = cost.begin_item(plan.family.name, plan.case.variant)  # the models' work is this family's
    for iteration in range(state.iterations):
        recorder.outcome = None
        sample_token, usage_token = current_sample.set(iteration), current_usage.set(usage)
        began, cut_before = time.perf_counter(), usage.answers_cut
        try:
            item.obj(**arguments)
            if recorder.outcome is None:
                raise RuntimeError("the test finished without calling record()")
            entry: dict[str, Any] = recorder.outcome.to_json()
        except (ModelError, CaseInputError) as error:
            entry = {"error": redact(str(error))}
        except StorageError:
            raise  # a cache folder refuses writes: no row, and the session stops (see hooks)
        except Exception as error:  # a bug in scoring: record it, then let pytest show it
            entry = {"error": redact(f"{type(error).__name__}: {error}")}
            crash = error
        finally:
            current_sample.reset(sample_token)
            current_usage.reset(usage_token)
        entry = safe_data(entry)  # answers, case fields and error messages come from outside
        if usage.answers_cut > cut_before:  # the answer stored is not the whole answer
            entry["answers_cut"] = usage.answers_cut - cut_before
        entry["duration_s"] = round(time.perf_counter() - began, 4)
        entries.append(entry)
        if crash is not None:
            break
    cost.end_item(work)
    row = build_row(plan, entries, usage, time.perf_counter() - started, state.provenance)
    state.store.append(plan.family.name, row)
    # Reports travel to the xdist controller; this is how the session totals reach it. Every
    # item's report keeps them to the end of the run: equal counts are held once.
    item.user_properties.append(("ragmatrix_usage", _shared_counts(row.usage)))
    if crash is not None:
        raise crash
    errors = [e["error"] for e in entries if "error" in e]
    down = next((e for e in errors if e.startswith(MODEL_DOWN)), None)
    if down is not None:  # for the terminal summary, from any xdist worker
        item.user_properties.append(("ragmatrix_model_down", [plan.model.id, down]))
    if errors:
        raise ModelFailure(f"error in {len(errors)} of {len(entries)} iteration(s): {errors[0]}")


def _shared_counts(usage: dict[str, Any]) -> dict[str, Any]:
    """Equal counts held once: every item's report keeps its counts to the end of the run, and
    the items of an embedder or a cached answer mostly count alike."""
    return _COUNTS.one("usage", tuple(sorted(usage.items())), usage)  # type: ignore[no-any-return]


_COUNTS = SharedValues(held_at_most=1024)  # read, never changed: the session's totals add them up


def record_setup_error(plan: ItemPlan, state: BenchmarkState, message: str) -> None:
    """A model that could not even be built: one error row, so the failure is on record."""
    row = build_row(plan, [{"error": safe_text(redact(message))}], Usage(), 0.0, state.provenance)
    state.store.append(plan.family.name, row)


def build_row(
    plan: ItemPlan, entries: list[dict[str, Any]], usage: Usage, duration: float, provenance: Provenance
) -> Row:
    iterations = [Iteration.model_validate(entry) for entry in entries]
    errors = sum(1 for entry in iterations if entry.error is not None)
    scored = [entry for entry in iterations if entry.error is None]
    scores = [entry.score for entry in scored if entry.score is not None]
    ok = errors == 0 and len(scored) > 0
    return Row(
        key=plan.key,
        family=plan.family.name,
        test=plan.test,
        model=plan.model.id,
        case=plan.case.name,
        variant=plan.case.variant,
        item=plan.case.id,
        scoring_version=plan.family.scoring_version,
        status="ok" if ok else "error",
        # An item with any error has no score: a partial mean would hide the failure.
        score=(sum(scores) / len(scores)) if ok and scores else None,
        iterations=iterations,
        n_iterations=len(iterations),
        errors=errors,
        invalid=sum(entry.invalid_answers for entry in scored),
        usage=usage.to_json(),
        duration_s=round(duration, 4),
        recorded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        provenance=provenance,
    )
