"""Print the chunks of a file or a folder, as a code retrieval case with `corpus: {path: PATH}`
cuts them: one line per chunk, `file:start-end`, its size in characters of code (white space not
counted, what max_chars caps), its context, and with --model its size in the model's tokens and
whether the model cuts it. --show prints each chunk's text too, with its header, as it is embedded.

examples:
  ragmatrix chunks src/                                    # semantic chunks of every file
  ragmatrix chunks src/parser.rs --chunking bounded --show
  ragmatrix chunks . --include "**/*.py" --chunking line --model minilm
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

NAME = "chunks"
HELP = "print the chunks a code retrieval case cuts a file or folder into, with their sizes"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, help="a file or a folder")
    parser.add_argument(
        "--chunking",
        choices=("line", "semantic", "bounded"),
        default="semantic",
        help="the strategy (default semantic)",
    )
    parser.add_argument("--lines", type=int, default=None, help="line windows: lines per window (default 40)")
    parser.add_argument("--overlap", type=int, default=None, help="line windows: lines shared (default 10)")
    parser.add_argument(
        "--max-chars", type=int, default=None, help="semantic and bounded: characters of code per chunk, at most"
    )
    parser.add_argument("--include", action="append", default=None, help="a glob of files to take (repeatable)")
    parser.add_argument("--exclude", action="append", default=[], help="a glob of files to leave out (repeatable)")
    parser.add_argument("--model", default=None, help="a model id of the models file: count its tokens")
    parser.add_argument(
        "--models-file",
        type=Path,
        default=None,
        help="the models file (default: benchmark/models.yaml, looked for from here upward)",
    )
    parser.add_argument("--show", action="store_true", help="print each chunk's text, with its header")


def run(args: argparse.Namespace) -> int:
    import sys

    from pydantic import ValidationError

    from ragmatrix.cli import CommandError
    from ragmatrix.families.code_retrieval import listing
    from ragmatrix.families.code_retrieval.chunking import Chunking
    from ragmatrix.seam.case import CaseInputError

    if not args.path.exists():
        raise CommandError(f"{args.path}: no such file or folder")
    settings = {"lines": args.lines, "overlap": args.overlap, "max_chars": args.max_chars}
    try:
        chunking = Chunking(strategy=args.chunking, **{k: v for k, v in settings.items() if v is not None})
    except ValidationError as error:
        raise CommandError("; ".join(e["msg"].removeprefix("Value error, ") for e in error.errors())) from None
    try:
        found = listing.list_chunks(args.path, chunking, args.include or ["**/*"], args.exclude)
    except CaseInputError as error:
        raise CommandError(str(error)) from None
    notes = list(found.notes)
    if args.model is not None:
        note = _count_tokens(found, args.model, args.models_file)
        if note is not None:
            notes.append(note)
    for index, chunk in enumerate(found.chunks):
        print(listing.chunk_line(found, index))
        if args.show:
            print(chunk.text)
            print()
    print(listing.summary(found, chunking, args.model))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _count_tokens(found: Any, model_id: str, given: Path | None) -> str | None:
    """Each chunk's size in the tokens of a model of the models file, built without loading its
    weights, in a run of the project (its `.env`; no caches) that closes the model at its end."""
    from ragmatrix.cli import CommandError, locate
    from ragmatrix.families.code_retrieval import listing
    from ragmatrix.foundations.context import start_run
    from ragmatrix.models.client import ModelError
    from ragmatrix.models.models_file import ModelsFileError, load_models
    from ragmatrix.models.registry import run_registry

    try:
        path = locate.models_file(given)
    except locate.NotFound as error:
        raise CommandError(str(error)) from None
    with start_run(locate.project_root(path), use_cache=False) as run:
        try:
            specs = {spec.id: spec for spec in load_models(path)}
        except ModelsFileError as error:
            raise CommandError(str(error)) from None
        spec = specs.get(model_id)
        if spec is None:
            raise CommandError(f"--model {model_id}: not in {path} (it has: {', '.join(sorted(specs))})")
        if spec.kind not in ("embedder", "retriever"):
            raise CommandError(f"--model {model_id} is an {spec.kind}: give an embedder or a retriever")
        try:
            model = run_registry(run).build(spec)
        except ModelError as error:
            raise CommandError(str(error)) from None
        return listing.count_tokens(found, model)
