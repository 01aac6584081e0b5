"""A chunk: a file's path, its line range, its code, and the context header its text starts
with (`[file: path]`, then `[context: class X > def y]` inside a definition or a section)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chunk:
    path: str
    start: int  # first line, 1-based
    end: int  # last line, inclusive
    body: str  # the code of those lines (a piece of one line, for a line over the cap)
    context: str = ""  # "class X > def y", a markdown heading trail, or ""
    header: bool = True  # whether the file and context lines go before the code

    @property
    def text(self) -> str:
        """What is embedded and indexed."""
        if not self.header:
            return self.body
        return context_header(self.path, self.context) + self.body

    def overlaps(self, start: int, end: int) -> bool:
        return self.start <= end and start <= self.end


def context_header(path: str, context: str = "") -> str:
    """The lines put before a chunk's code: its file, and where in the file it lies."""
    head = f"[file: {path}]\n"
    if context:
        head += f"[context: {context}]\n"
    return head
