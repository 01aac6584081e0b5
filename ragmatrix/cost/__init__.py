"""Cost figures: what each model's work costs, measured when the work is done, per device.

- `device`: the names of devices (`cpu: <CPU model>`, `cuda: <GPU name>`, `remote`);
- `memory`: what a model's work adds to the process's memory, and its peak;
- `load`: how busy the machine was while the figures were measured;
- `histogram`: latency histograms that merge exactly across runs and machines;
- `record`: one (family, model, device)'s figures, and how two combine;
- `meter`: the session's meter, and the calls models make to report their work;
- `store`: the records in `<results>/costs/<family>.jsonl`, compaction and merging;
- `price`: what an LLM's tokens cost (models.yaml, else litellm's local cost map), kept with the
  records when measured, and dollars written with significant digits.

The report turns the records into figures beside the scores (`ragmatrix.report.cost`). Nothing
here imports a heavy library: torch is touched only where a model already runs on CUDA.
"""

from ragmatrix.cost.meter import (
    Meter,
    Work,
    begin_item,
    current_meter,
    current_work,
    encoding,
    end_item,
    end_session,
    query_latency,
    served_from_cache,
    start_session,
    time_queries,
    timed_request,
    working_on,
)

__all__ = [
    "Meter",
    "Work",
    "begin_item",
    "current_meter",
    "current_work",
    "encoding",
    "end_item",
    "end_session",
    "query_latency",
    "served_from_cache",
    "start_session",
    "time_queries",
    "timed_request",
    "working_on",
]
