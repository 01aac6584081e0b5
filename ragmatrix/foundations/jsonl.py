"""Reading JSONL files that writers append to (the result, cost and pair-log stores): every
whole object in order, and one problem line per line that is torn or not an object, so that a
writer killed mid-line never makes a file unreadable."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ragmatrix.foundations.regular_file import read_regular


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The JSON objects of a JSONL file that writers append to, in order, and one problem
    line per line that is torn or not an object: a killed writer must not make it unreadable."""
    records, problems = numbered_records(path)
    return [record for _, record in records], problems


def numbered_records(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    """`read_jsonl`, with each object's line number. A file that cannot be read raises its
    OSError (`NotRegularFile` for a FIFO or a folder by that name, which is never read)."""
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return [], []
    records: list[tuple[int, dict[str, Any]]] = []
    problems: list[str] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict):
            records.append((number, record))
        else:
            problems.append(f"{path.name}: line {number} is torn or not JSON (ignored)")
    return records, problems


def ends_torn(path: Path) -> bool:
    """Does a non-empty file end without a newline (a writer killed mid-line)?"""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return False
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) != b"\n"
    except FileNotFoundError:
        return False
