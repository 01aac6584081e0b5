"""Text from outside the project (a server's error body, a model's answer, a data file's fields)
made safe to print and to store: its control characters escaped.

An ESC or OSC sequence in a server's error body would otherwise reach the terminal raw (recolour
it, retitle the window, hide or rewrite what follows) and sit in the stored rows, to do the same
again whenever they are shown. Every C0 control, DEL, every C1 control, the Unicode line and
paragraph separators and the bidirectional overrides and isolates (which reorder what a reader
sees) are written as visible escapes (`\\x1b`, `\\u202e`): the text stays readable, and what was
there is not silently lost.

`safe_text` keeps newlines and tabs, the content of a stored text such as an answer (a CR LF pair
becomes a newline); `safe_line` escapes them too, for what is shown on one line: a tag, a name,
a message in a table. Text with nothing to escape is returned as it is.
"""

from __future__ import annotations

import re
from typing import Any

_SPECIAL = "\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_IN_TEXT = re.compile(f"[\x00-\x08\x0b-\x1f{_SPECIAL}]")  # all but tab and newline
_IN_LINE = re.compile(f"[\x00-\x1f{_SPECIAL}]")


_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    found = match.group()
    if found in _NAMED:
        return _NAMED[found]
    code = ord(found)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str) -> str:
    """`text` with every control character escaped but its newlines and tabs."""
    return _IN_TEXT.sub(_escape, text.replace("\r\n", "\n"))


def safe_line(text: str) -> str:
    """`text` with every control character escaped, newlines and tabs included: one line."""
    return _IN_LINE.sub(_escape, text)


def safe_data(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, strings, numbers) with `safe_text` applied to every
    string in it, keys included."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_data(key): safe_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [safe_data(item) for item in value]
    if isinstance(value, tuple):
        return tuple(safe_data(item) for item in value)
    return value
