"""An opened item as plain text for the terminal (`ragmatrix show`).

Everything shown came from a data file, a model or a server: control characters (escape
sequences, carriage returns, bidirectional overrides) are removed, so an answer cannot move
the cursor, recolour the terminal or hide text. Tabs become spaces; line breaks stay.
"""

from __future__ import annotations

import re
import textwrap

from ragmatrix.explore.items import Detail, StoredItem
from ragmatrix.seam.blocks import aligned
from ragmatrix.seam.detail import Fields, Listing, Part

# C0 and C1 controls but the line break, DEL, and the bidirectional formatting characters.
_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
TEXT_INDENT = "    "


def clean(text: str) -> str:
    """`text` without control characters; tabs as four spaces, line breaks kept."""
    return _CONTROLS.sub("", text.replace("\t", "    ").replace("\r\n", "\n"))


def one_line(text: str) -> str:
    """`clean` on one line: line breaks shown as `\\n`."""
    return clean(text).replace("\n", "\\n")


def render(item: StoredItem, opened: Detail) -> list[str]:
    """The item's lines: the summary, what was asked, then each iteration."""
    lines = [f"=== {one_line(item.test_id)}"]
    lines += _part(opened.summary)
    lines += [f"note: {one_line(note)}" for note in opened.notes]
    if opened.asked:
        lines += ["", "--- what was asked"]
        for part in opened.asked:
            lines += _part(part)
    for index, parts in enumerate(opened.iterations, start=1):
        lines += ["", f"--- iteration {index}" if len(opened.iterations) > 1 else "--- what came back"]
        for part in parts:
            lines += _part(part)
    return lines


def _part(part: Part) -> list[str]:
    if isinstance(part, Fields):
        width = max((len(one_line(name)) for name, _ in part.pairs), default=0)
        title = [f"{one_line(part.title)}:"] if not part.title.startswith("iteration ") else []
        return title + [f"  {one_line(name).ljust(width)}  {one_line(value)}" for name, value in part.pairs]
    if isinstance(part, Listing):
        if not part.rows:
            return [f"{one_line(part.title)}: none"]
        marked = part.marked or [False] * len(part.rows)
        table = [tuple(one_line(h) for h in part.header)] + [tuple(one_line(c) for c in row) for row in part.rows]
        body = aligned(table, part.numeric)
        # a mark before the rows that count (relevant, holding the answer)
        shown = ["  " + "  " + line for line in body[:2]]
        shown += [f"  {'*' if mark else ' '} {line}" for mark, line in zip(marked, body[2:], strict=True)]
        legend = " (* marks the rows that count)" if any(marked) else ""
        return [f"{one_line(part.title)}{legend}:", *shown]
    text = clean(part.text)
    return [f"{one_line(part.title)}:", *textwrap.indent(text or "(empty)", TEXT_INDENT, lambda _: True).splitlines()]
