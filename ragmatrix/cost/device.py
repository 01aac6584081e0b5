"""Names of the devices a model works on, as every cost figure carries them.

- `cpu: <CPU model>`, read from /proc/cpuinfo (or `platform.processor()` elsewhere);
- `cuda: <GPU name>`, from torch, only where the model is on a GPU (torch is then loaded);
- `mps`, Apple's GPU through torch;
- `remote: <host>` for a model reached over HTTP (an API, an OpenAI-compatible server,
  Xinference): its speed is the server's, wherever that runs, and its memory is not this
  process's. Records of older runs say `remote` alone;
- a local model run through another runtime than torch names it after the device:
  `cpu: <CPU model> (onnx int8)`. Its speed compares with torch's on the same device.

A model says where it works with a `Device`: the name above, whether the work happens in this
process, the torch CUDA device whose allocator peak is the model's memory on a GPU, and for a
model on a server what the server tells of itself (`about`: its address, the model id it
serves, its engine, worker, GPUs and memory), which cost records keep beside the device name
without making it part of the name: records of one server still combine.

`expected(requested)` says which device a local model will take before it is loaded, without
importing torch, so that the session header can name it and a cached run stays light.
"""

from __future__ import annotations

import functools
import platform
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import urlsplit

REMOTE = "remote"
CPUINFO = Path("/proc/cpuinfo")
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


@dataclass(frozen=True)
class Device:
    """Where a model works, as its cost figures name it."""

    name: str  # "cpu: <CPU model>", "cuda: <GPU name>", "mps", "remote: <host>"
    local: bool  # in this process: its resident memory is the model's
    cuda: str | None = None  # the torch device ("cuda:0") of a model on a GPU, for its peak memory
    # What a server tells of itself, as (name, value) pairs: "server" (host:port), "model" (the
    # id it serves), "engine", "worker", "gpus", "memory". Not part of the device's identity.
    about: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return self.name

    @property
    def details(self) -> dict[str, str]:
        return dict(self.about)


def this_cpu() -> Device:
    return Device(describe("cpu"), local=True)


def remote(address: str, about: Mapping[str, object] | None = None) -> Device:
    """A model on a server: `remote: <host>` from a URL or a host name (its port left out: a
    server moved to another port is the same machine); `remote` alone when the address says
    nothing. `about`: what the server tells of itself (values that are None or empty are left
    out); its address (`server`, host and port) is added when the address has a host."""
    try:
        parts = urlsplit(address if "//" in address else f"//{address}")
        host, port = parts.hostname, parts.port
    except ValueError:  # not a URL at all, or a port that is no number
        host = port = None
    details = {"server": f"{host}:{port}" if port else host} if host else {}
    details.update({k: str(v) for k, v in (about or {}).items() if v is not None and str(v) != ""})
    return Device(f"{REMOTE}: {host}" if host else REMOTE, local=False, about=tuple(sorted(details.items())))


@functools.cache
def cpu_model() -> str:
    """The CPU's model name ("Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz"), or the machine
    type where the system does not say."""
    try:
        for line in CPUINFO.read_text(errors="replace").splitlines():
            name, _, value = line.partition(":")
            if name.strip() in ("model name", "Model", "Hardware") and value.strip():
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def describe(label: str) -> str:
    """The full name of a device from a model's short label ("cpu", "cuda: <name>", "remote")."""
    return f"cpu: {cpu_model()}" if label == "cpu" else label


# The runtimes a local model may name after its device (see `ragmatrix.models.st_backends`).
_RUNTIME = re.compile(r" \((?:onnx|openvino)\b[^()]*\)$")


def with_runtime(device: str, runtime: str | None) -> str:
    """`device` with the runtime the model runs on it through: `cpu: <CPU> (onnx int8)`."""
    return f"{device} ({runtime})" if runtime else device


def hardware(device: str) -> str:
    """The device without its runtime: the machine that a speed was measured on."""
    return _RUNTIME.sub("", device)


def is_local(device: str) -> bool:
    """Does the model of a recorded device name work in this process (so that the process's
    memory is its memory)?"""
    return device != REMOTE and not device.startswith(f"{REMOTE}:")


def cuda_name(device: str = "cuda") -> str:
    """`cuda: <GPU name>` of a torch CUDA device; torch must be loaded already."""
    import torch

    return f"cuda: {torch.cuda.get_device_name(torch.device(device))}"


def expected(requested: str) -> str:
    """The device a local model asking for `requested` (auto, cpu, cuda, cuda:N, mps) will take,
    told without importing torch: a CPU build of torch or a machine without an NVIDIA driver
    means cpu. The model's own records name the device it really took."""
    if requested == "cpu":
        return describe("cpu")
    if requested.startswith("cuda"):
        return f"cuda: {_nvidia_gpu() or 'GPU'}"
    if requested == "mps":
        return "mps"
    if _torch_has_cuda() and _nvidia_gpu():
        return f"cuda: {_nvidia_gpu()}"
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return "mps"
    return describe("cpu")


@functools.cache
def _torch_has_cuda() -> bool:
    """Was the installed torch built with CUDA? Read from its version file, not by importing it."""
    spec = find_spec("torch")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        version = Path(folder) / "version.py"
        if version.is_file():
            for line in version.read_text(errors="replace").splitlines():
                if line.startswith("cuda"):
                    return "None" not in line
    return False


@functools.cache
def _nvidia_gpu() -> str | None:
    """The first NVIDIA GPU's model, as its driver lists it, or None where there is none."""
    try:
        boards = sorted(NVIDIA_GPUS.iterdir())
    except OSError:
        return None
    for board in boards:
        try:
            for line in (board / "information").read_text(errors="replace").splitlines():
                name, _, value = line.partition(":")
                if name.strip() == "Model" and value.strip():
                    return " ".join(value.split())
        except OSError:
            continue
    return None
