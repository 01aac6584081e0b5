"""`--shard K/N`: one of N deterministic parts of the matrix, for N machines.

Items are grouped so that what is expensive to set up is not split: a case's items for one
model (its variants: chunkings, prompt wordings, which share a corpus index or a cluster)
form one group, and a model's groups follow each other in models.yaml order, in collection
order within a model. The groups are then cut into N runs of consecutive groups holding
about the same number of items. So a model is loaded on as few shards as balance allows (one,
unless it has more than 1/N of the items), and a case's variants never straddle two shards.

The cut depends only on the collected items (cached ones included, so machines that hold
different results still agree), not on timing or on anything stored: every machine that
collects the same matrix (the same models.yaml, data, keys and `-k`) gets the same parts, and
the N parts together are exactly the matrix. `ragmatrix merge` joins their results.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """`K/N` with 1 <= K <= N; anything else raises ValueError with one line that says so."""
    match = _SHARD.match(text)
    if match is not None:
        index, count = int(match.group(1)), int(match.group(2))
        if 1 <= index <= count:
            return Shard(index, count)
    raise ValueError(f"--shard takes K/N, this machine's part K of N parts (1 <= K <= N, e.g. 2/4), not '{text}'")


@dataclass(frozen=True)
class Split:
    chosen: list  # the items of this shard, in collection order
    total: int  # items in the whole matrix
    matrix: str  # a short fingerprint of the grouping: equal on machines that collected the same matrix


def split(items: Sequence[T], shard: Shard, group_of: Callable[[T], tuple[int, Hashable]]) -> Split:
    """This shard's items. `group_of(item)` gives (position, group): groups are ordered by
    position (a model's place in models.yaml), then by first appearance."""
    groups: dict[tuple[int, Hashable], list[int]] = {}
    for index, item in enumerate(items):
        groups.setdefault(group_of(item), []).append(index)
    ordered = sorted(groups.items(), key=lambda entry: entry[0][0])  # stable: first appearance within a position
    total = len(items)
    chosen: list[int] = []
    before = 0
    digest = hashlib.md5()
    for key, members in ordered:
        # A group belongs to the part that holds its middle item: parts of about total/N items.
        middle = before + len(members) / 2
        if min(int(middle * shard.count / total), shard.count - 1) == shard.index - 1:
            chosen += members
        before += len(members)
        digest.update(f"{key!r}:{len(members)};".encode())
    return Split([items[i] for i in sorted(chosen)], total, digest.hexdigest()[:8])
