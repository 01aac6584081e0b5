"""The caches under `.benchmark_cache/`: SQLite key-value tables in WAL mode.

Responses are keyed by model spec, messages, generation parameters and sample index;
embeddings (see the embedder layer) by model fingerprint and text hash. Only successes are
stored: an error is never cached, so the next run tries again.

A cache is opened only when a model is built, so a fully cached run never touches these
files. A cache folder that refuses writes (read-only, full) raises `StorageError`, one line
naming the folder and the cause, and the run stops; the caches' own files stay whole (SQLite's
transactions see to that).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ragmatrix.foundations.context import current
from ragmatrix.foundations.storage import writes_to

CACHE_FOLDER = "cache folder"


def cache_dir() -> Path:
    """The run's cache folder, `<root>/.benchmark_cache` (see `ragmatrix.foundations.context`);
    RAGMATRIX_CACHE_DIR overrides."""
    if os.environ.get("RAGMATRIX_CACHE_DIR"):
        return Path(os.environ["RAGMATRIX_CACHE_DIR"])
    return current().cache_folder


def open_database(file_name: str, directory: Path | None = None) -> tuple[Path, sqlite3.Connection]:
    """A connection that several processes can share: WAL mode, autocommit, and a long busy
    timeout so that xdist workers wait for each other instead of failing."""
    directory = Path(directory) if directory is not None else cache_dir()
    path = directory / file_name
    with writes_to(directory, CACHE_FOLDER):
        directory.mkdir(parents=True, exist_ok=True)
        database = sqlite3.connect(path, timeout=60, check_same_thread=False, isolation_level=None)
        # Switching to WAL takes an exclusive lock and ignores the busy timeout: two xdist workers
        # opening a new cache at the same moment see "database is locked". Try again for a while.
        for attempt in range(100):
            try:
                database.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or attempt == 99:
                    raise
                time.sleep(0.05 + 0.01 * attempt)
        database.execute("PRAGMA synchronous=NORMAL")
    return path, database


class SqliteCache:
    """A JSON value per text key, safe to share between processes (xdist workers)."""

    def __init__(self, name: str, directory: Path | None = None) -> None:
        self.path, self._db = open_database(f"{name}.sqlite", directory)
        self._lock = threading.Lock()
        with writes_to(self.path.parent, CACHE_FOLDER):
            self._db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def get(self, key: str) -> Any | None:
        with self._lock, writes_to(self.path.parent, CACHE_FOLDER):
            row = self._db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        text = json.dumps(value, sort_keys=True)
        with self._lock, writes_to(self.path.parent, CACHE_FOLDER):
            self._db.execute("INSERT OR REPLACE INTO entries (key, value) VALUES (?, ?)", (key, text))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
