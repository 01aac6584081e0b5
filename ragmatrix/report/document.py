"""The report's blocks (`ragmatrix.seam.blocks`) rendered to GitHub markdown and to one
self-contained HTML page.

Both formats are rendered from the same blocks, so they always say the same thing. Inline text
may hold `code` spans and **bold**; nothing else is interpreted. Much of it comes from data
(model ids, case fields, tags, answers, paths), so both renderers escape everything else: the
HTML page through `html.escape`, the markdown by escaping what GitHub would read as HTML, a
link, an image, emphasis or a table's edge, and by keeping every block's text on one line (a
newline in a name would break its table).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from urllib.parse import quote

from ragmatrix.seam.blocks import Block, Bullets, Heading, Image, Paragraph, Table

# --- markdown ----------------------------------------------------------------------------------


def markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            text = _md_inline(block.text)
            out.append("#" * block.level + " " + (text[:-1] + "\\#" if text.endswith("#") else text))
        elif isinstance(block, Paragraph):
            out.append(_md_inline(block.text))
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {_md_inline(item)}" for item in block.items))
        elif isinstance(block, Table):
            out.append(_markdown_table(block))
        elif isinstance(block, Image):
            alt = _md_text(block.alt).replace("[", "\\[").replace("]", "\\]")
            out.append(f"![{alt}]({quote(block.file)})")
    return "\n\n".join(out) + "\n"


def _markdown_table(table: Table) -> str:
    def cell(text: str) -> str:
        return _md_inline(text).replace("|", "\\|")

    lines = ["| " + " | ".join(cell(h) for h in table.header) + " |"]
    lines.append("|" + "|".join("---:" if i in table.numeric else "---" for i in range(len(table.header))) + "|")
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


# The markup blocks may hold: `code` spans (kept as they are: markdown reads nothing inside them)
# and **bold** (its inside escaped like the rest).
_MARKUP = re.compile(r"(`[^`\n]+`)|\*\*(.+?)\*\*")
# What GitHub would read as something else in text: a backslash, HTML and entities, emphasis and
# strike-through, a `]` that opens a link's or an image's target (`](`, `][`, `]:`).
_MD_SPECIAL = re.compile(r"[\\<&*~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|\](?=[(\[:])")
_MD_ESCAPES = {"<": "&lt;", "&": "&amp;"}


def _md_text(text: str) -> str:
    """Plain text as markdown that shows it as it is, on one line."""
    one_line = " ".join(text.splitlines())
    return _MD_SPECIAL.sub(lambda m: _MD_ESCAPES.get(m.group(), "\\" + m.group()), one_line)


def _md_inline(text: str) -> str:
    """A block's inline text as markdown: its code spans and bold kept, everything else escaped."""
    out: list[str] = []
    done = 0
    for match in _MARKUP.finditer(text):
        out.append(_md_text(text[done : match.start()]))
        code, bold = match.groups()
        out.append(code if code is not None else f"**{_md_text(bold)}**")
        done = match.end()
    out.append(_md_text(text[done:]))
    return "".join(out)


# --- HTML --------------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #1f2328; line-height: 1.45; }
h1, h2 { border-bottom: 1px solid #d0d7de; padding-bottom: .2em; }
h2 { margin-top: 2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: 14px; }
th, td { border: 1px solid #d0d7de; padding: 4px 9px; vertical-align: top; }
th { background: #f6f8fa; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr:nth-child(even) td { background: #fbfcfd; }
code { background: #eff1f3; padding: .1em .3em; border-radius: 4px; font-size: 90%; }
figure { margin: .8em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eaeef2; }
figcaption { color: #59636e; font-size: 13px; }
"""


def html_page(blocks: list[Block], folder: Path, title: str) -> str:
    """One page with its style and images inline: it opens from disk, without a server or network."""
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{_inline(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in block.items) + "</ul>")
        elif isinstance(block, Table):
            body.append(_html_table(block))
        elif isinstance(block, Image):
            data = base64.b64encode((folder / block.file).read_bytes()).decode("ascii")
            body.append(
                f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(block.alt)}">'
                f"<figcaption>{html.escape(block.alt)}</figcaption></figure>"
            )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{_inline(h)}</th>" for h in table.header)
    rows = []
    for row in table.rows:
        cells = "".join(
            f'<td class="num">{_inline(c)}</td>' if i in table.numeric else f"<td>{_inline(c)}</td>"
            for i, c in enumerate(row)
        )
        rows.append(f"<tr>{cells}</tr>")
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>"


_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def _inline(text: str) -> str:
    escaped = html.escape(text, quote=False)
    escaped = _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", escaped)
    return _BOLD.sub(lambda m: f"<strong>{m.group(1)}</strong>", escaped)
