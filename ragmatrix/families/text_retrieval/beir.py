"""Retrieval datasets in BEIR's format (the format MTEB's retrieval tasks use too).

A dataset is named by a case in one of two ways:

- `path: <folder>`: a local BEIR folder, relative to the data file's folder: `corpus.jsonl`
  (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`) and `qrels/<split>.tsv` (a header,
  then `query-id`, `corpus-id`, `score`);
- `hf: <name>`: a Hugging Face dataset in MTEB's layout, read through `datasets`: the configs
  `corpus` and `queries` (each with one split) and `default` (the qrels, one split per
  `split`); the config names can be changed.

Collection needs only the queries, the judgements and a fingerprint, never the corpus; for a
Hugging Face dataset they are kept in `.benchmark_cache/beir/`, so that collection and fully
cached runs do not import `datasets`. The corpus is read when a model first searches it, once
per run (`ragmatrix.foundations.context`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, model_validator

from ragmatrix.foundations.atomic_write import write_atomically
from ragmatrix.foundations.cache import cache_dir
from ragmatrix.foundations.context import RunContext, current
from ragmatrix.foundations.data_model import DataModel
from ragmatrix.foundations.keys import canonical_json
from ragmatrix.seam.case import CaseInputError


class DatasetSpec(DataModel):
    model_config = ConfigDict(extra="forbid")

    path: str | None = None
    hf: str | None = None
    split: str = "test"
    revision: str | None = None  # hf only
    corpus_config: str = "corpus"
    queries_config: str = "queries"
    qrels_config: str = "default"

    @model_validator(mode="after")
    def one_location(self) -> DatasetSpec:
        if (self.path is None) == (self.hf is None):
            raise ValueError("give exactly one of path, hf")
        return self

    @property
    def label(self) -> str:
        return f"path {self.path}" if self.path is not None else f"hf {self.hf}"


@dataclass(frozen=True)
class Judged:
    """What collection needs: every query with judgements, the judgements, a fingerprint."""

    queries: dict[str, str]  # query id -> text, in file order
    qrels: dict[str, dict[str, int]]  # query id -> document id -> grade
    fingerprint: str


@dataclass(frozen=True)
class Corpus:
    ids: list[str]
    texts: list[str]  # title and text joined by a space, as BEIR's dense retrievers embed them


def _folder(spec: DatasetSpec, directory: Path) -> Path:
    folder = Path(str(spec.path))
    folder = folder if folder.is_absolute() else directory / folder
    if not folder.is_dir():
        raise CaseInputError(f"dataset {spec.label} not found")
    return folder


def _local_files(spec: DatasetSpec, folder: Path) -> dict[str, Path]:
    files = {
        "corpus": folder / "corpus.jsonl",
        "queries": folder / "queries.jsonl",
        "qrels": folder / "qrels" / f"{spec.split}.tsv",
    }
    for path in files.values():
        if not path.is_file():
            raise CaseInputError(f"dataset {spec.label} has no {path.relative_to(folder).as_posix()}")
    return files


def _jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open("rb") as handle:
        for number, data in enumerate(handle, start=1):
            line = _utf8(path.name, number, data)
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise CaseInputError(f"{path.name} line {number}: invalid JSON: {error.msg}") from None
            if not isinstance(row, dict) or "_id" not in row:
                raise CaseInputError(f"{path.name} line {number}: a row needs an _id")
            rows.append(row)
    return rows


def _utf8(name: str, number: int, data: bytes) -> str:
    """A line of a dataset file as text; a file that is not UTF-8 (a binary file, another
    encoding) is one line naming it, never a traceback."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CaseInputError(
            f"{name} line {number}: not UTF-8 text (byte 0x{data[error.start]:02x}); BEIR files are UTF-8"
        ) from None


def _qrels_tsv(path: Path) -> list[tuple[str, str, int]]:
    with path.open("rb") as handle:
        text = "".join(_utf8(f"qrels/{path.name}", number, data) for number, data in enumerate(handle, start=1))
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter="\t"))
    if rows and rows[0][:1] == ["query-id"]:
        rows = rows[1:]
    out = []
    for number, row in enumerate(rows, start=2):
        if not row:
            continue
        try:
            out.append((row[0], row[1], int(float(row[2]))))
        except (IndexError, ValueError):
            raise CaseInputError(f"qrels/{path.name} line {number}: expected query-id, corpus-id, score") from None
    return out


def _judged(queries: list[dict[str, Any]], triples: list[tuple[str, str, int]], fingerprint: str) -> Judged:
    """Queries with at least one relevant document (grade > 0), in the queries file's order."""
    qrels: dict[str, dict[str, int]] = {}
    for query, document, grade in triples:
        qrels.setdefault(str(query), {})[str(document)] = grade
    judged = {
        str(q["_id"]): str(q.get("text", ""))
        for q in queries
        if any(grade > 0 for grade in qrels.get(str(q["_id"]), {}).values())
    }
    return Judged(judged, {q: qrels[q] for q in judged}, fingerprint)


def _digest(paths: list[Path]) -> str:
    digest = hashlib.md5()
    for path in paths:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


class Datasets:
    """The datasets a run has read: judged queries and documents, by spec and folder."""

    def __init__(self, run: RunContext) -> None:
        self.judged: dict[tuple[str, str], Judged] = {}
        self.corpora: dict[tuple[str, str], Corpus] = {}


def judged(spec: DatasetSpec, directory: Path) -> Judged:
    """The dataset's judged queries and fingerprint, once per run."""
    read = current().part(Datasets).judged
    key = (canonical_json(spec.model_dump()), str(directory))
    if key not in read:
        read[key] = _load_judged(spec, directory)
    return read[key]


def _load_judged(spec: DatasetSpec, directory: Path) -> Judged:
    if spec.path is not None:
        files = _local_files(spec, _folder(spec, directory))
        fingerprint = _digest([files["corpus"], files["queries"], files["qrels"]])
        return _judged(_jsonl(files["queries"]), _qrels_tsv(files["qrels"]), fingerprint)
    stored = cache_dir() / "beir" / f"{hashlib.md5(canonical_json(spec.model_dump()).encode()).hexdigest()}.json"
    if stored.is_file():
        data = json.loads(stored.read_text(encoding="utf-8"))
        return Judged(data["queries"], data["qrels"], data["fingerprint"])
    corpus, queries, qrels = _hf_tables(spec)
    fingerprint = hashlib.md5(
        "\0".join(table._fingerprint for table in (corpus, queries, qrels)).encode()  # noqa: SLF001
    ).hexdigest()
    triples = [(str(r["query-id"]), str(r["corpus-id"]), int(r["score"])) for r in qrels]
    result = _judged(list(queries), triples, fingerprint)
    try:
        kept = {"queries": result.queries, "qrels": result.qrels, "fingerprint": fingerprint}
        write_atomically(stored, json.dumps(kept), make_folder=True)
    except OSError:
        pass  # a cache folder that cannot be written: the next session reads the dataset again
    return result


def corpus(spec: DatasetSpec, directory: Path) -> Corpus:
    """The dataset's documents, once per run."""
    read = current().part(Datasets).corpora
    key = (canonical_json(spec.model_dump()), str(directory))
    if key not in read:
        if spec.path is not None:
            rows = _jsonl(_local_files(spec, _folder(spec, directory))["corpus"])
        else:
            rows = list(_hf_tables(spec)[0])
        ids = [str(row["_id"]) for row in rows]
        texts = [(str(row.get("title") or "") + " " + str(row.get("text") or "")).strip() for row in rows]
        read[key] = Corpus(ids, texts)
    return read[key]


def _hf_tables(spec: DatasetSpec) -> tuple[Any, Any, Any]:
    try:
        from datasets import load_dataset

        def table(config: str, split: str | None) -> Any:
            loaded = load_dataset(str(spec.hf), config, revision=spec.revision)
            if split is not None and split in loaded:
                return loaded[split]
            if split is None and len(loaded) == 1:
                return next(iter(loaded.values()))
            wanted = f"split {split}" if split else "a single split"
            raise CaseInputError(f"dataset {spec.label} config {config} has no {wanted} ({', '.join(loaded)})")

        return (
            table(spec.corpus_config, None),
            table(spec.queries_config, None),
            table(spec.qrels_config, spec.split),
        )
    except CaseInputError:
        raise
    except Exception as error:  # not found, offline, a wrong config name
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CaseInputError(f"dataset {spec.label}: {first}") from None
