"""Integrity of a results folder: a sha256 per result file over the canonical JSON of its rows.

The digest of a file is the sha256 of its rows' canonical JSON (sorted keys, fixed
separators), one row per line, the lines sorted: reformatting a file or reordering its rows
changes nothing, while any edited value does. The digests live in `checksums.json` beside the
files, and `verify` names every file whose rows changed, appeared or went.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmatrix.foundations.keys import canonical_json
from ragmatrix.results.store import ResultStore

FILE_NAME = "checksums.json"
ALGORITHM = "sha256 over the sorted canonical JSON lines of the rows"


@dataclass(frozen=True)
class FileDigest:
    rows: int
    sha256: str
    unreadable: int  # lines that are not JSON rows

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "sha256": self.sha256}


def digest_rows(rows: list[dict[str, Any]]) -> str:
    lines = sorted(canonical_json(row) for row in rows)
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def compute(directory: Path) -> dict[str, FileDigest]:
    """The digest of every `<family>.jsonl` in the folder, by file name."""
    store = ResultStore(directory)
    digests = {}
    for family in store.families():
        loaded = store.load(family)
        digests[store.path(family).name] = FileDigest(
            len(loaded.rows), digest_rows([row.to_json() for row in loaded.rows]), len(loaded.problems)
        )
    return digests


def write(directory: Path) -> Path:
    path = Path(directory) / FILE_NAME
    files = {name: digest.to_json() for name, digest in sorted(compute(directory).items())}
    path.write_text(json.dumps({"algorithm": ALGORITHM, "files": files}, indent=2, sort_keys=True) + "\n")
    return path


def verify(directory: Path) -> list[str]:
    """One line per problem: a file whose rows differ from the recorded digest, a file added or
    missing, unreadable lines. Empty when everything matches. Raises FileNotFoundError when
    there is no checksum file, ValueError when it cannot be read."""
    return [f"{name}: {what}" for name, what, _ in differences(directory)]


def differences(directory: Path) -> list[tuple[str, str, str]]:
    """(file, what differs as `verify` says it, the same said briefly) for each difference."""
    path = Path(directory) / FILE_NAME
    recorded = json.loads(path.read_text())
    files = recorded.get("files") if isinstance(recorded, dict) else None
    if not isinstance(files, dict):
        raise ValueError(f"{path}: not a checksum file")
    found = []
    actual = compute(directory)
    for name, digest in sorted(actual.items()):
        expected = files.get(name)
        if digest.unreadable:
            found.append((name, f"{digest.unreadable} line(s) are not JSON rows", f"{digest.unreadable} torn line(s)"))
        if not isinstance(expected, dict):
            found.append((name, f"not in {FILE_NAME} (a new file)", "a new file"))
        elif expected.get("sha256") != digest.sha256:
            rows = expected.get("rows")
            count = f"{rows} -> {digest.rows} rows" if rows != digest.rows else f"{digest.rows} rows"
            found.append((name, f"rows changed since {FILE_NAME} was written ({count})", f"rows changed, {count}"))
    for name in sorted(set(files) - set(actual)):
        found.append((name, f"missing (listed in {FILE_NAME})", "gone"))
    return found


def status_line(directory: Path) -> str | None:
    """One sentence on the checksum file for the report; None when there is none.

    Results that differ from `checksums.json` are the ordinary state after a run, since the
    file is only written on request: the sentence says so calmly and how to refresh it. The
    alarm ("checksum mismatch") belongs to `ragmatrix checksum`, a verify asked for.
    """
    try:
        found = differences(directory)
    except FileNotFoundError:
        return None
    except ValueError as error:
        return f"**Checksum**: {error}."
    if found:
        return (
            f"**Checksum**: the results changed since `{FILE_NAME}` was last written ("
            + "; ".join(f"{name}: {brief}" for name, _, brief in found)
            + f"). If that was a benchmark run, record them with `ragmatrix checksum {_shown(directory)}"
            " --write`; to check them, run it without `--write`."
        )
    return f"**Checksum**: every row matches `{FILE_NAME}` ({ALGORITHM})."


def _shown(directory: Path) -> str:
    """The folder as a command run from here would name it: relative when it is below."""
    try:
        return Path(directory).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return Path(directory).as_posix()
