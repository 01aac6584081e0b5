"""Writes the pydoc_topics retrieval dataset in BEIR's format from Python's own documentation.

The corpus is `pydoc_data.topics` of the Python that runs this script (the reference-manual
topics `help()` shows, under the Python Software Foundation License): one document per topic,
its id the topic's name, its title the topic's first line. The `else` topic is left out: its text
is the `if` topic's, word for word. The queries and their graded judgements (2: the topic that
answers, 1: a topic that helps) were written by hand for this project, in `queries.jsonl` and
`qrels/test.tsv`; this script writes only `corpus.jsonl`.

    python benchmark/data/beir/pydoc_topics/make_dataset.py
"""

from __future__ import annotations

import json
from pathlib import Path
from pydoc_data.topics import topics

LEFT_OUT = {"else"}  # the same text as "if"


def main() -> None:
    out = Path(__file__).resolve().parent / "corpus.jsonl"
    with out.open("w", encoding="utf-8") as handle:
        for name in sorted(topics):
            if name in LEFT_OUT:
                continue
            lines = topics[name].strip("\n").split("\n")
            title = lines[0].strip()
            body = lines[1:]
            if body and set(body[0].strip()) <= set("*=-~^"):  # the title's underline
                body = body[1:]
            text = "\n".join(body).strip()
            handle.write(json.dumps({"_id": name, "title": title, "text": text}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
