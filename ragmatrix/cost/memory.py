"""What a model's work adds to the process's memory, and the process's peak while it works.

The cost figures report what the work added: how far the process's resident memory rose above
what it held when the work began. The process's own peak would count whatever else it holds
(another model's weights, an earlier family's index): BM25 read 963 MB after MiniLM had run in
the same process, and 152 MB alone.

The kernel keeps the process's resident high-water mark (VmHWM in /proc/self/status, what
`/usr/bin/time -v` reports as "Maximum resident set size"), and it is never reset here, so that
outside tools still see the truth. Around a piece of work:

- when VmHWM rose during the work, the new mark was reached during the work: that is the peak,
  exactly;
- when it did not (the process had been bigger before), a light thread samples the resident
  size (/proc/self/statm) every 20 ms during the work, and the largest sample is the peak.

What the work added is that peak less the resident size when it began (never below 0). Off
Linux, `resource.getrusage`'s `ru_maxrss` (the process's peak so far) stands in for the peak, and
nothing is said of what the work added. On a CUDA device the peak GPU memory torch's allocator
held during the work is read too.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from types import TracebackType

STATUS = Path("/proc/self/status")
STATM = Path("/proc/self/statm")
SAMPLE_EVERY_S = 0.02
MB = 1024 * 1024


def high_water_mb() -> float | None:
    """The process's resident high-water mark (VmHWM), or None where /proc does not say."""
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / MB
    except (OSError, ValueError, IndexError):
        pass
    return None


def resident_mb() -> float | None:
    """The process's resident size now, or None where /proc does not say."""
    try:
        pages = int(STATM.read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / MB


def peak_so_far_mb() -> float:
    """`ru_maxrss`: kilobytes on Linux, bytes on macOS."""
    import resource

    peak = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak / MB if sys.platform == "darwin" else peak / 1024


class PeakMemory:
    """`with PeakMemory(cuda) as peak: work()`; then `peak.added_mb` (what the work added),
    `peak.rss_mb` (the process's peak while it worked), and `peak.gpu_mb` when `cuda` names a
    torch CUDA device, e.g. "cuda:0")."""

    def __init__(self, cuda: str | None = None) -> None:
        self.cuda = cuda
        self.rss_mb: float | None = None
        self.added_mb: float | None = None
        self.gpu_mb: float | None = None
        self._before: float | None = None
        self._resident_before: float | None = None
        self._largest = 0.0
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    def __enter__(self) -> PeakMemory:
        self._before = high_water_mb()
        if self._before is not None:
            self._resident_before = resident_mb()
            self._largest = self._resident_before or 0.0
            self._sampler = threading.Thread(target=self._sample, name="ragmatrix-memory", daemon=True)
            self._sampler.start()
        if self.cuda is not None:
            import torch

            torch.cuda.reset_peak_memory_stats(self.cuda)
        return self

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            self._largest = max(self._largest, resident_mb() or 0.0)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join()
        after = high_water_mb()
        if self._before is None or after is None:
            self.rss_mb = peak_so_far_mb()
        elif after > self._before:
            self.rss_mb = after
        else:
            self.rss_mb = max(self._largest, resident_mb() or 0.0)
        if self._resident_before is not None and self._before is not None and after is not None:
            self.added_mb = max(0.0, self.rss_mb - self._resident_before)
        if self.cuda is not None:
            import torch

            self.gpu_mb = torch.cuda.max_memory_allocated(self.cuda) / MB
