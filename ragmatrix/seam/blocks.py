"""What a report says, as blocks, before it is markdown or HTML (`ragmatrix.report.document`
renders them); and the terminal's counterpart of a table block, aligned text columns.

A family's own report part returns these blocks; inline text may hold `code` spans and
**bold**, nothing else is interpreted.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Paragraph:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    numeric: set[int] = field(default_factory=set)  # right-aligned columns


@dataclass
class Image:
    file: str  # a PNG in the report folder
    alt: str


Block = Heading | Paragraph | Bullets | Table | Image


def aligned(table: list[tuple[str, ...]], numeric: set[int]) -> list[str]:
    """A table's rows (the header first) as text lines for the terminal: columns padded to one
    width, the `numeric` ones right-aligned, a rule under the header."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    out = []
    for index, row in enumerate(table):
        cells = [
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths).rstrip())
    return out
