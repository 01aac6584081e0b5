"""Local sentence-transformers models on ONNX Runtime or OpenVINO, exported once from their folder.

sentence-transformers loads a model with `backend="onnx"` or `backend="openvino"` by exporting
its torch weights, and quantizes an ONNX export to int8 (ONNX Runtime's dynamic quantization).
Left to itself it would write the export into the folder it loads from, and its `save_pretrained`
rewrites that folder's configs (`max_seq_length` leaves sentence_bert_config.json, and loaders
that read only the tokenizer files obey their 128-token truncation). So the export is made from
a copy, under the run's cache folder, once per (model folder fingerprint, backend, quantization),
and only the exported weights are added to the copy, beside the model's own configs: the
exported model truncates where the torch model does. The installed folder is never written, and
is checked afterwards.

Any sentence-transformers class that takes `backend=` and `model_kwargs=` (SentenceTransformer,
CrossEncoder) loads through `load(model_class, export)`.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal

from ragmatrix.cost.device import CPUINFO
from ragmatrix.foundations.cache import CACHE_FOLDER, cache_dir
from ragmatrix.foundations.file_lock import FileLock
from ragmatrix.foundations.storage import writes_to

Backend = Literal["torch", "onnx", "openvino"]
Quantization = Literal["int8"]

# The modules each backend needs, and the extra of this package that installs them.
NEEDS: dict[str, tuple[str, ...]] = {
    "onnx": ("onnxruntime", "optimum.onnxruntime"),
    "openvino": ("openvino", "optimum.intel"),
}
# The exported weights, as sentence-transformers names them inside the backend's subfolder.
WEIGHTS = {"onnx": "model.onnx", "openvino": "openvino_model.xml"}
# OpenVINO computes in bfloat16 on CPUs that have it (the vectors then move by about 1e-3);
# float32 keeps them torch's, whatever the CPU.
OPENVINO_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
MANIFEST = "ragmatrix-export.json"
EXPORTS = "exports"  # the folder of the cache that holds them


def missing_extra(backend: str) -> str | None:
    """Why `backend` cannot run here, as one line naming the pip command; None where it can."""
    for module in NEEDS.get(backend, ()):
        if find_spec(module.partition(".")[0]) is None or find_spec(module) is None:
            return f'backend {backend} needs ragmatrix[{backend}]: pip install "ragmatrix[{backend}]"'
    return None


def int8_config() -> str:
    """The dynamic-quantization config of sentence-transformers (optimum's `AutoQuantizationConfig`)
    for this CPU: avx512_vnni, avx512 or avx2 on x86, arm64 on ARM. The avx2 config stores its
    weights as unsigned bytes, the others as signed bytes, so the config is part of the key."""
    machine = platform.machine().lower()
    if machine in ("arm64", "aarch64"):
        return "arm64"
    flags: set[str] = set()
    try:
        for line in CPUINFO.read_text(errors="replace").splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    if "avx512_vnni" in flags:
        return "avx512_vnni"
    if "avx512bw" in flags:
        return "avx512"
    return "avx2"  # the config that runs on any x86 CPU with AVX2 (and, slower, on older ones)


def key_fields(backend: str, quantization: str | None) -> dict[str, str]:
    """What a backend adds to a model's result key: nothing for torch (its keys stay as they were)."""
    if backend == "torch":
        return {}
    fields = {"backend": backend}
    if quantization == "int8":
        fields["quantization"] = f"int8 ({int8_config()})"
    return fields


def runtime(backend: str, quantization: str | None) -> str | None:
    """The runtime the cost figures name after the device ("onnx int8"); None for torch."""
    if backend == "torch":
        return None
    return f"{backend} {quantization}" if quantization else backend


@dataclass(frozen=True)
class Export:
    """A model exported to a backend: the folder to load, and the file of its weights."""

    folder: Path
    backend: str
    weights: str  # relative to the folder, e.g. onnx/model_int8_avx512_vnni.onnx
    max_seq_length: int | None  # what the export's own configs say, the torch model's limit

    @property
    def size_mb(self) -> float:
        file = self.folder / self.weights
        files = [file, file.with_suffix(".bin")] if self.backend == "openvino" else [file]
        return sum(f.stat().st_size for f in files if f.is_file()) / 2**20


def exported(model_class: Any, source: Path, fingerprint: str, backend: str, quantization: str | None) -> Export:
    """The export of the model folder `source` (of that fingerprint) to `backend`, made on first
    use under the cache folder and read from there afterwards. A lock lets one process make it
    while others (xdist workers) wait; a killed export leaves a partial folder that the next one
    clears."""
    root = cache_dir() / EXPORTS
    name = f"{fingerprint}-{backend}" + (f"-{quantization}-{int8_config()}" if quantization else "")
    folder = root / name
    if (folder / MANIFEST).is_file():
        return _read(folder)
    with writes_to(root, CACHE_FOLDER):
        root.mkdir(parents=True, exist_ok=True)
        with FileLock(root / f"{name}.lock"):
            if not (folder / MANIFEST).is_file():
                partial = root / f"{name}.partial"
                shutil.rmtree(partial, ignore_errors=True)
                before = _listing(source)
                _export(model_class, source, partial, backend, quantization)
                if _listing(source) != before:
                    raise RuntimeError(f"exporting to {backend} changed the model folder {source}")
                shutil.rmtree(folder, ignore_errors=True)
                os.replace(partial, folder)
    return _read(folder)


def load(model_class: Any, export: Export, **kwargs: Any) -> Any:
    """The exported model, on the CPU, truncating where the torch model does."""
    with _quiet():
        model = model_class(
            str(export.folder), backend=export.backend, device="cpu", model_kwargs=_runtime(export), **kwargs
        )
    if export.max_seq_length and getattr(model, "max_seq_length", None) != export.max_seq_length:
        model.max_seq_length = export.max_seq_length
    return model


def _export(model_class: Any, source: Path, partial: Path, backend: str, quantization: str | None) -> None:
    # Exported weights the folder may ship are left behind: every export is made from the weights.
    shutil.copytree(source, partial, ignore=shutil.ignore_patterns("onnx", "openvino"))
    with _quiet():
        model = model_class(str(partial), backend=backend, device="cpu", model_kwargs={"export": True})
    limit = getattr(model, "max_seq_length", None)
    with tempfile.TemporaryDirectory(dir=partial.parent) as scratch:
        model.save_pretrained(scratch)  # rewrites every config: only the backend's folder is kept
        shutil.copytree(Path(scratch) / backend, partial / backend)
    weights = f"{backend}/{WEIGHTS[backend]}"
    config = None
    if quantization == "int8":
        from sentence_transformers.backend import export_dynamic_quantized_onnx_model

        config = int8_config()
        export_dynamic_quantized_onnx_model(model, config, str(partial), file_suffix=f"int8_{config}")
        weights = f"onnx/model_int8_{config}.onnx"
    manifest = {
        "backend": backend,
        "quantization": quantization,
        "quantization_config": config,
        "weights": weights,
        "max_seq_length": limit,
        "source": str(source),
    }
    (partial / MANIFEST).write_text(json.dumps(manifest, indent=1))


@contextmanager
def _quiet() -> Iterator[None]:
    """Without the libraries' advice on exports: sentence-transformers' "Saving the exported model
    is heavily recommended" (this module does), optimum's guesses about what a folder holds, and
    torch's tracer warnings."""
    loggers = [logging.getLogger(name) for name in ("sentence_transformers.backend", "optimum")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _read(folder: Path) -> Export:
    manifest = json.loads((folder / MANIFEST).read_text())
    return Export(folder, manifest["backend"], manifest["weights"], manifest["max_seq_length"])


def _runtime(export: Export) -> dict[str, Any]:
    """How sentence-transformers is told which file to run, and how."""
    kwargs: dict[str, Any] = {"file_name": export.weights}
    if export.backend == "onnx":
        kwargs["provider"] = "CPUExecutionProvider"  # the device the cost figures name
    else:
        kwargs["ov_config"] = dict(OPENVINO_CONFIG)
    return kwargs


def _listing(folder: Path) -> list[tuple[str, int, int]]:
    """Every file of a folder with its size and modification time: what a write would change."""
    return sorted(
        (p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    )
