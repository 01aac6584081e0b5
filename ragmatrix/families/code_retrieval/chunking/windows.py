"""Line windows: a fixed number of lines, each window overlapping the one before."""

from __future__ import annotations

from ragmatrix.families.code_retrieval.chunking.chunk import Chunk


def line_chunks(path: str, lines: list[str], size: int, overlap: int, header: bool) -> list[Chunk]:
    """Windows of `size` lines, each starting `size - overlap` lines after the one before; the
    last window ends at the end of the file. Windows of white space only are left out."""
    chunks: list[Chunk] = []
    step = size - overlap
    start = 0
    while start < len(lines):
        end = min(start + size, len(lines))
        body = "\n".join(lines[start:end])
        if body.strip():
            chunks.append(Chunk(path, start + 1, end, body, header=header))
        if end == len(lines):
            break
        start += step
    return chunks
