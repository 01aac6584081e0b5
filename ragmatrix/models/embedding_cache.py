"""A persistent cache of embeddings: `.benchmark_cache/embeddings.sqlite`.

A row is keyed by the model's fingerprint (the md5 of its output fingerprint) and the md5 of
the exact text embedded, after the query or document prefix was applied; its value is the
float32 vector's bytes and its dimension. Like `SqliteCache` it runs in WAL mode with a busy
timeout, so xdist workers and concurrent runs can share one file.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from ragmatrix.foundations.cache import CACHE_FOLDER, open_database
from ragmatrix.foundations.storage import writes_to

if TYPE_CHECKING:
    import numpy as np

# Texts per SELECT: well under SQLite's limit on bound parameters (999 in old builds).
CHUNK = 500


def text_key(text: str) -> str:
    return hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingCache:
    """Embedding vectors per (model fingerprint, text), safe to share between processes.

    `hits` counts the texts served from the cache, `embedded` the texts stored after being
    sent to the model; `written_here` tells a text stored by this object (this run) from one
    stored by an earlier run.
    """

    def __init__(self, directory: Path | None = None, file_name: str = "embeddings.sqlite") -> None:
        self.path, self._db = open_database(file_name, directory)
        self.hits = 0
        self.embedded = 0
        self._written: set[tuple[str, str]] = set()  # (model, text key) stored by this run
        self._lock = threading.Lock()
        with self._writing():
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS embeddings ("
                " model TEXT NOT NULL, text TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL,"
                " PRIMARY KEY (model, text)) WITHOUT ROWID"
            )
            # How long the model took to embed a batch of texts on a device: latency is a result
            # too, and a cache read must not pass for it.
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS timings ("
                " model TEXT NOT NULL, device TEXT NOT NULL, batch TEXT NOT NULL, ms REAL NOT NULL,"
                " PRIMARY KEY (model, device, batch)) WITHOUT ROWID"
            )

    def _writing(self) -> AbstractContextManager[None]:
        """A refused write (a read-only or full cache folder) as one `StorageError` line."""
        return writes_to(self.path.parent, CACHE_FOLDER)

    def get_many(self, model_fp: str, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The cached vector of each text, None where there is none, in the order given."""
        import numpy as np

        keys = [text_key(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock, self._writing():
            for start in range(0, len(unique), CHUNK):
                chunk = unique[start : start + CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT text, dim, vector FROM embeddings WHERE model = ? AND text IN ({marks})",
                    (model_fp, *chunk),
                ).fetchall()
                for key, dim, blob in rows:
                    if len(blob) == 4 * dim:  # anything else is a damaged row: treat it as a miss
                        found[key] = np.frombuffer(blob, dtype=np.float32).copy()
        result = [found.get(k) for k in keys]
        self.hits += sum(v is not None for v in result)
        return result

    def put_many(self, model_fp: str, texts: Sequence[str], matrix: np.ndarray) -> None:
        """Store row i of `matrix` as the vector of `texts[i]`, all in one transaction."""
        import numpy as np

        matrix = np.asarray(matrix, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise ValueError(f"expected {len(texts)} rows, got an array of shape {matrix.shape}")
        if not texts:
            return
        dim = int(matrix.shape[1])
        rows = [
            (model_fp, text_key(t), dim, np.ascontiguousarray(v).tobytes()) for t, v in zip(texts, matrix, strict=True)
        ]
        with self._lock, self._writing():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO embeddings (model, text, dim, vector) VALUES (?, ?, ?, ?)", rows
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            self._written.update((model_fp, key) for _, key, _, _ in rows)
        self.embedded += len(texts)

    def written_here(self, model_fp: str, texts: Sequence[str]) -> int:
        """How many of `texts` this run stored (the rest of the hits come from earlier runs)."""
        with self._lock:
            return sum((model_fp, text_key(t)) in self._written for t in texts)

    def get_timing(self, model_fp: str, device: str, batch: str) -> float | None:
        with self._lock, self._writing():
            row = self._db.execute(
                "SELECT ms FROM timings WHERE model = ? AND device = ? AND batch = ?", (model_fp, device, batch)
            ).fetchone()
        return None if row is None else float(row[0])

    def put_timing(self, model_fp: str, device: str, batch: str, ms: float) -> None:
        with self._lock, self._writing():
            self._db.execute(
                "INSERT OR REPLACE INTO timings (model, device, batch, ms) VALUES (?, ?, ?, ?)",
                (model_fp, device, batch, ms),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
