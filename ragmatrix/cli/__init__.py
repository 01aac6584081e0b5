"""The command line: `ragmatrix <command> ...`, or `python -m ragmatrix <command> ...`.

Each command is a module of this package with `NAME`, `HELP`, `add_arguments(parser)` and
`run(args) -> int`; adding one means writing the module and listing it in `COMMANDS`. Command
modules import only what parsing needs; the work's imports happen in `run`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

COMMANDS = ("annotate", "rerank_eval", "heatmap", "report", "view", "show", "export", "checksum", "merge", "chunks")


class CommandError(Exception):
    """A problem to report in one line (exit status 1), not as a traceback."""


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=_program(), description="ragmatrix: the benchmark's command line")
    commands = top.add_subparsers(dest="command", required=True, metavar="command")
    for name in COMMANDS:
        module = importlib.import_module(f"ragmatrix.cli.{name}")
        sub = commands.add_parser(
            module.NAME,
            help=module.HELP,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    return top


def _program() -> str:
    """The name the user typed: the console script, or the module."""
    return "ragmatrix" if Path(sys.argv[0]).name == "ragmatrix" else "python -m ragmatrix"


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except CommandError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader stopped early (`| head`): what it read is all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
