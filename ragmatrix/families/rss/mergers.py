"""Mergers for the RSS probes' merger mode: chunk embeddings in, one synthesis embedding out.

`mean` is built in: the L2-normalised mean of the chunk embeddings. A user's merger is a
torch module taking a (1, k, d) float tensor and returning (1, d), named in a case as
- `path/to/merger.py:Name` (a file, relative to the data file) or `package.module:Name`:
  `Name` is an `nn.Module` instance, or a class or factory called with no arguments;
- `path/to/merger.pt` (or `.pth`): a TorchScript file, or a whole module saved with
  `torch.save`.

The merger's fingerprint (its file's bytes) goes into the result key, so an edited merger
means new results.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragmatrix.seam.case import CaseInputError

if TYPE_CHECKING:
    import numpy as np

# Chunk embeddings of one prefix (k, d) -> its synthesis embedding (d,), unit length.
Merger = Callable[["np.ndarray"], "np.ndarray"]

CHECKPOINT_SUFFIXES = (".pt", ".pth")


def mean_prefixes(chunks: np.ndarray) -> np.ndarray:
    """All L prefix syntheses of the built-in merger at once: row k is the normalised mean
    of chunks 0..k."""
    import numpy as np

    means = np.cumsum(chunks.astype(np.float64), axis=0) / np.arange(1, len(chunks) + 1)[:, None]
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    return (means / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def merger_fingerprint(name: str, directory: Path) -> str:
    if name == "mean":
        return "mean"
    path = _file_of(name, directory)
    return hashlib.md5(path.read_bytes()).hexdigest() + ":" + name.rpartition(":")[2]


def load_merger(name: str, directory: Path) -> Merger:
    """The merger a case names, loaded once per process and version of its file."""
    return _load(name, str(directory), merger_fingerprint(name, directory))


def _split(name: str) -> tuple[str, str]:
    target, _, attribute = name.rpartition(":")
    if not target or not attribute:
        raise CaseInputError(f"merger '{name}': expected 'mean', 'file.py:Name', 'package.module:Name' or a .pt file")
    return target, attribute


def _file_of(name: str, directory: Path) -> Path:
    """The file that defines the merger, for its fingerprint."""
    if name.endswith(CHECKPOINT_SUFFIXES):
        path = _resolve(name, directory)
    else:
        target, _ = _split(name)
        if target.endswith(".py"):
            path = _resolve(target, directory)
        else:
            try:
                spec = importlib.util.find_spec(target)
            except (ImportError, ValueError):
                spec = None
            if spec is None or not spec.origin:
                raise CaseInputError(f"merger '{name}': module {target} not found")
            path = Path(spec.origin)
    if not path.is_file():
        raise CaseInputError(f"merger '{name}': file {path.name} not found")
    return path


def _resolve(path: str, directory: Path) -> Path:
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else directory / candidate


@lru_cache(maxsize=8)
def _load(name: str, directory: str, fingerprint: str) -> Merger:  # the fingerprint keys the memo
    import numpy as np
    import torch

    module = _load_module(name, Path(directory))
    if not callable(module):
        raise CaseInputError(f"merger '{name}': not callable")
    if isinstance(module, torch.nn.Module):
        module.eval()

    def merge(chunks: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            output = module(torch.from_numpy(np.ascontiguousarray(chunks, dtype=np.float32))[None])
        vector = np.asarray(output.detach().cpu().numpy(), dtype=np.float64).reshape(-1)
        if vector.shape != (chunks.shape[1],):
            raise CaseInputError(
                f"merger '{name}': returned shape {tuple(output.shape)}, expected (1, {chunks.shape[1]})"
            )
        norm = np.linalg.norm(vector)
        return (vector / (norm if norm else 1.0)).astype(np.float32)

    return merge


def _load_module(name: str, directory: Path) -> Any:
    import torch

    path = _file_of(name, directory)
    if name.endswith(CHECKPOINT_SUFFIXES):
        try:  # a whole module saved with torch.save; torch.load hands TorchScript files to torch.jit
            return torch.load(str(path), map_location="cpu", weights_only=False)
        except Exception as error:
            raise CaseInputError(f"merger '{name}': cannot load checkpoint: {type(error).__name__}: {error}") from None
    target, attribute = _split(name)
    try:
        if target.endswith(".py"):
            spec = importlib.util.spec_from_file_location(f"ragmatrix_merger_{path.stem}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except Exception as error:
        raise CaseInputError(f"merger '{name}': cannot import: {type(error).__name__}: {error}") from None
    found = getattr(module, attribute, None)
    if found is None:
        raise CaseInputError(f"merger '{name}': {target} has no attribute {attribute}")
    if isinstance(found, torch.nn.Module):
        return found
    try:
        return found()  # a class or a factory
    except Exception as error:
        raise CaseInputError(f"merger '{name}': cannot build: {type(error).__name__}: {error}") from None
