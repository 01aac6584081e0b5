"""Fingerprints of local model folders, so results follow the weights, not the path."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ragmatrix.foundations.atomic_write import write_atomically
from ragmatrix.foundations.cache import cache_dir
from ragmatrix.foundations.context import RunContext, current
from ragmatrix.foundations.file_lock import FileLock


def _remembered(run: RunContext) -> dict[tuple[str, int], str]:
    """The run's fingerprints by (folder, stamp): every item's key asks for its model's."""
    return {}


def directory_fingerprint(path: Path) -> str:
    """md5 over the relative paths and contents of every file in a model folder.

    Hashing 90 MB of weights takes a fraction of a second; the answer is remembered per
    (folder, newest mtime, total size) under .benchmark_cache so cached runs skip even that.
    """
    files = sorted(p for p in path.rglob("*") if p.is_file())
    stats = [(p.relative_to(path).as_posix(), p.stat()) for p in files]
    stamp = hashlib.md5(json.dumps([(name, st.st_size, st.st_mtime_ns) for name, st in stats]).encode()).hexdigest()
    memo = current().part(_remembered)
    memo_key = (str(path.resolve()), hash(stamp))
    if memo_key in memo:
        return memo[memo_key]
    store = cache_dir() / "fingerprints.json"
    known: dict[str, str] = {}
    if store.exists():
        try:
            known = json.loads(store.read_text())
        except ValueError:
            known = {}
    if stamp not in known:
        digest = hashlib.md5()
        for name, _ in stats:
            digest.update(name.encode() + b"\0")
            with open(path / name, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        fingerprint = digest.hexdigest()
        try:
            store.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(f"{store}.lock"):
                try:
                    known = json.loads(store.read_text()) if store.exists() else {}
                except ValueError:
                    known = {}
                known[stamp] = fingerprint
                write_atomically(store, json.dumps(known, indent=0, sort_keys=True))
        except OSError:
            pass  # a cache folder that cannot be written: the next run hashes the folder again
        known[stamp] = fingerprint
    memo[memo_key] = known[stamp]
    return known[stamp]
