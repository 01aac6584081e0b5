"""`--shard K/N` cuts the matrix into N deterministic parts: together exactly the matrix, each
about 1/N of the items, a case's variants for one model and a model's items kept together."""

from __future__ import annotations

import pytest

from ragmatrix.plugin.sharding import Shard, parse_shard, split

# (model position, model, case, variant): three models, cases with 1 to 4 variants
ITEMS = [
    (position, model, f"case{case}", variant)
    for position, model in enumerate(["llm-a", "minilm", "bm25"])
    for case in range(40)
    for variant in range(1 + (case * 7 + position) % 4)
]


def group_of(item: tuple[int, str, str, int]) -> tuple[int, tuple[str, str]]:
    return item[0], (item[1], item[2])


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_the_parts_are_the_matrix_balanced_and_keep_groups_and_models_together(count):
    parts = [split(ITEMS, Shard(index, count), group_of) for index in range(1, count + 1)]
    chosen = [item for part in parts for item in part.chosen]
    assert sorted(chosen) == sorted(ITEMS)  # each item in exactly one part
    biggest = max(sum(1 for i in ITEMS if group_of(i) == group_of(item)) for item in ITEMS)
    for part in parts:
        assert abs(len(part.chosen) - len(ITEMS) / count) <= biggest  # about 1/N, give or take a group
        assert part.chosen == [item for item in ITEMS if item in set(part.chosen)]  # collection order
    shard_of = {item: index for index, part in enumerate(parts) for item in part.chosen}
    for item in ITEMS:  # a case's variants for one model in one part
        assert {shard_of[other] for other in ITEMS if group_of(other) == group_of(item)} == {shard_of[item]}
    for model in ("llm-a", "minilm", "bm25"):  # a model spans consecutive parts, as few as balance allows
        used = sorted({shard_of[item] for item in ITEMS if item[1] == model})
        assert used == list(range(used[0], used[-1] + 1))
        items = sum(1 for item in ITEMS if item[1] == model)
        assert len(used) <= int(items / (len(ITEMS) / count)) + 2
    assert len({part.matrix for part in parts}) == 1


def test_the_cut_is_the_same_every_time_and_one_part_is_everything():
    assert split(ITEMS, Shard(2, 3), group_of) == split(list(ITEMS), Shard(2, 3), group_of)
    assert split(ITEMS, Shard(1, 1), group_of).chosen == ITEMS


@pytest.mark.parametrize("text, shard", [("1/1", Shard(1, 1)), ("2/4", Shard(2, 4)), (" 3 / 3 ", Shard(3, 3))])
def test_parse_shard(text, shard):
    assert parse_shard(text) == shard


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "1/0", "-1/2", "a/b", ""])
def test_a_bad_shard_says_what_it_takes(text):
    with pytest.raises(ValueError, match=r"--shard takes K/N, this machine's part K of N parts"):
        parse_shard(text)
