"""What a whole process costs, for the perf scripts: wall time from start to exit, CPU time of
the process and its children, and the CPU it had spent when the local test server saw its
first chat request (what a user pays once, before any work is done).

    cost = run_measured(["python", "-m", "pytest", ...], cwd=folder, env=env, server=server)
    cost.wall_s, cost.cpu_s, cost.first_request_cpu_s

The CPU at the first request is read for the process and every process under it, within a
few milliseconds of the request: on Linux, each process's own CPU from its CPU-time clock (to
the nanosecond, every thread included) and the tree from /proc; elsewhere it is None.
"""

from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class ProcessCost:
    wall_s: float
    cpu_s: float
    first_request_cpu_s: float | None
    returncode: int
    stdout: str
    stderr: str


def run_measured(command: list[str], cwd: Path, env: dict[str, str], server: Any) -> ProcessCost:
    """Run `command` to its end; `server` is the OpenAIServer it talks to (reset beforehand).
    Bytecode is written and read as on a user's machine, whatever this shell says: a process
    that compiled every module from source at each start would measure the compiler."""
    env = {name: value for name, value in env.items() if name != "PYTHONDONTWRITEBYTECODE"}
    asked_before = server.count()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first: list[float] = []
    watcher = threading.Thread(target=_watch, args=(process, server, asked_before, first), daemon=True)
    watcher.start()
    stdout, stderr = process.communicate()
    wall = time.perf_counter() - started
    watcher.join(timeout=5)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return ProcessCost(wall, cpu, first[0] if first else None, process.returncode, stdout, stderr)


def _watch(process: subprocess.Popen[str], server: Any, asked_before: int, first: list[float]) -> None:
    while process.poll() is None:
        if server.count() > asked_before:
            cpu = tree_cpu(process.pid)
            if cpu is not None:
                first.append(cpu)
            return
        time.sleep(0.001)


def process_clock(pid: int) -> float | None:
    """CPU seconds of process `pid` so far, every thread included (those that ended too), to
    the nanosecond: its CPU-time clock (what `clock_getcpuclockid` gives on Linux), or None."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)  # the process's CPUCLOCK_SCHED clock id
    except (AttributeError, OSError, OverflowError):
        return None


def tree_cpu(pid: int) -> float | None:
    """CPU seconds of `pid` and every live process under it (with the children each has
    already waited for), or None without /proc. Each live process's own CPU comes from its
    CPU-time clock where there is one: /proc counts in clock ticks (10 ms), each figure rounded
    down, which understated a start of 0.16 s by about 10 ms and so raised a ratio to it by 5%."""
    own = process_clock(pid)  # first: the process runs on while /proc is read
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    waited: dict[int, float] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        # After the command name: state, ppid, ..., utime (14th field), stime, cutime, cstime.
        parents[int(entry.name)] = int(fields[1])
        spent[int(entry.name)] = sum(int(value) for value in fields[11:15]) / TICKS_PER_SECOND
        waited[int(entry.name)] = sum(int(value) for value in fields[13:15]) / TICKS_PER_SECOND
    if pid not in spent:
        return None
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, of in parents.items() if of == parent and child not in tree]
        tree.update(children)
        frontier += children
    total = 0.0
    for member in tree:
        clock = own if member == pid else process_clock(member)
        total += spent[member] if clock is None else clock + waited[member]
    return total


def load_average() -> str:
    """The 1-minute load average: the machine is shared, so every figure says how busy it was."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "unknown"
