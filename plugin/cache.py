"""The caches under `.benchmark_cache/`: SQLite key-value tables in WAL mode.

Responses are keyed by model spec, messages, generation parameters and sample index;
embeddings (see the embedder layer) by model fingerprint and text hash. Only successes are
stored: an error is never cached, so the next run tries again.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

_cache_dir: Path | None = None


def set_cache_dir(path: Path) -> None:
    global _cache_dir
    _cache_dir = Path(path)


def cache_dir() -> Path:
    """Set by the plugin to `<rootdir>/.benchmark_cache`; RAGMATRIX_CACHE_DIR overrides."""
    if os.environ.get("RAGMATRIX_CACHE_DIR"):
        return Path(os.environ["RAGMATRIX_CACHE_DIR"])
    return _cache_dir if _cache_dir is not None else Path(".benchmark_cache")


class SqliteCache:
    """A JSON value per text key, safe to share between processes (xdist workers)."""

    def __init__(self, name: str, directory: Path | None = None) -> None:
        directory = directory or cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{name}.sqlite"
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def get(self, key: str) -> Any | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        text = json.dumps(value, sort_keys=True)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO entries (key, value) VALUES (?, ?)", (key, text))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
