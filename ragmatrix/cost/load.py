"""How busy the machine was while cost figures were measured: the 1-minute load average and the
CPUs it is shared by.

A speed or a latency measured while other processes compete for the CPUs reads the contention,
not the model (one lone query took 464-532 ms on a loaded machine where it takes about 10 ms).
Each cost record keeps the highest load average seen while it was measured, so that the report
can say which figures were taken on a busy machine: one whose load average exceeded its CPUs.
"""

from __future__ import annotations

import os


def load_now() -> tuple[float | None, int | None]:
    """The 1-minute load average and the number of CPUs; None for what the system does not say."""
    try:
        load: float | None = round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):  # not every system keeps one
        load = None
    return load, os.cpu_count()


def is_busy(load_average: float | None, cpus: int | None) -> bool:
    """More runnable processes, on average, than CPUs to run them."""
    return load_average is not None and cpus is not None and cpus > 0 and load_average > cpus


def busy_note(load_average: float | None, cpus: int | None) -> str:
    return f"load average {load_average:.1f} on {cpus} CPU{'s' * (cpus != 1)}"
