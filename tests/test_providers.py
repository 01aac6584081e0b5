"""The provider registry: one module adds a provider; models.yaml picks it by the key it carries."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest

from ragmatrix.foundations.context import start_run
from ragmatrix.models import aio, providers
from ragmatrix.models.client import ModelError
from ragmatrix.models.models_file import ModelsFileError, load_models, select_models
from ragmatrix.models.protocols import ChatModel, JudgeEnsemble, Retriever
from ragmatrix.models.providers import provider
from ragmatrix.models.registry import Registry
from ragmatrix.models.spec import ModelSpec
from ragmatrix.models.st_backends import int8_config

SHIPPED = Path(__file__).resolve().parents[1] / "benchmark" / "models.yaml"

# A whole provider, in one module: an LLM that shouts the last message back.
TOY_PROVIDER = '''
"""A toy provider: `toy: <volume>` is an LLM that shouts the last message back."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from ragmatrix.models import aio
from ragmatrix.models.providers import provider
from ragmatrix.models.spec import ModelSpec


class Shouter:
    kind = "llm"

    def __init__(self, spec: ToySpec) -> None:
        self.id = spec.id
        self.volume = spec.toy

    async def achat(self, messages: list[dict[str, str]], sample: int | None = None) -> str:
        return messages[-1]["content"].upper() + "!" * self.volume

    def chat(self, messages: list[dict[str, str]]) -> str:
        return aio.run(self.achat(messages))

    def chat_many(self, conversations: list[list[dict[str, str]]]) -> list[str]:
        return [self.chat(m) for m in conversations]


@provider("toy")
class ToySpec(ModelSpec):
    provider: Literal["toy"] = "toy"
    key: ClassVar[str | None] = "toy"
    kinds: ClassVar[tuple[str, ...]] = ("llm",)
    toy: int  # how many exclamation marks

    def fingerprint(self) -> dict[str, Any]:
        return {"provider": "toy", "volume": self.toy}

    def build(self, models: Any) -> Shouter:
        return Shouter(self)
'''


@pytest.fixture
def registry_state(monkeypatch, tmp_path):
    """Providers registered by a test are forgotten after it, and the test's own run scans the
    entry points it installs."""
    providers.providers()  # the built-in ones imported (and registered) before the copy
    monkeypatch.setattr(providers, "_providers", dict(providers._providers))
    with start_run(tmp_path):
        yield


def installed(tmp_path: Path, monkeypatch, module: str, source: str, entry_point: str) -> None:
    """`module` on sys.path, in a distribution whose entry point names it in ragmatrix.providers."""
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    info = tmp_path / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{providers.ENTRY_POINT_GROUP}]\n{entry_point}\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_provider_in_one_installed_module_is_found_and_used(tmp_path, monkeypatch, registry_state):
    installed(tmp_path, monkeypatch, "ragmatrix_toy_provider", TOY_PROVIDER, "toy = ragmatrix_toy_provider")
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - {id: loud, kind: llm, toy: 3}\n  - {id: bow, kind: embedder, builtin: bow}\n")
    specs = load_models(path)
    assert [s.provider for s in specs] == ["toy", "bow"]
    assert specs[0].output_fingerprint() == {"provider": "toy", "volume": 3}
    chosen = select_models(specs, None)
    assert [s.id for s in chosen.of_kind("llm")] == ["loud"] and [s.id for s in chosen.of_kind("judge")] == [
        "loud",
        "bow",
    ]
    registry = Registry(use_cache=False)
    loud = registry.build(chosen.available[0])
    assert isinstance(loud, ChatModel) and not isinstance(loud, Retriever)
    assert loud.chat([{"role": "user", "content": "hello"}]) == "HELLO!!!"
    assert registry.build(chosen.available[0]) is loud  # built once
    registry.close()
    aio.close()
    path.write_text("models:\n  - {id: loud, kind: embedder, toy: 3}\n")
    with pytest.raises(ModelsFileError, match="^models.yaml: model 'loud': entry: Value error, a toy model is an llm$"):
        load_models(path)


def test_a_provider_whose_package_is_missing_says_what_to_install(registry_state):
    @provider("needy", needs={"ragmatrix_absent_package": "ragmatrix-absent-package"})
    class NeedySpec(ModelSpec):
        provider: Literal["needy"] = "needy"
        key: ClassVar[str | None] = "needy"
        kinds: ClassVar[tuple[str, ...]] = ("embedder",)
        needy: str

        def fingerprint(self) -> dict[str, Any]:
            return {"provider": "needy", "model": self.needy}

        def build(self, models: Any) -> Any:
            import ragmatrix_absent_package  # noqa: F401

    spec = ModelSpec(id="n", kind="embedder", needy="m")
    assert isinstance(spec, NeedySpec)
    assert select_models([spec], None).left_out == {
        "n": "needs ragmatrix-absent-package: pip install ragmatrix-absent-package"
    }
    line = "cannot load model 'n': provider needy needs ragmatrix-absent-package: pip install ragmatrix-absent-package"
    for _ in range(2):  # and the failure is remembered
        with pytest.raises(ModelError) as raised:
            Registry(use_cache=False).build(spec)
        assert str(raised.value) == line


def test_an_entry_point_that_cannot_be_imported_is_named_with_the_package(tmp_path, monkeypatch, registry_state):
    source = "import ragmatrix_absent_dependency\n"
    installed(tmp_path, monkeypatch, "ragmatrix_broken_provider", source, "broken = ragmatrix_broken_provider")
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - {id: b, kind: llm, broken: x}\n")
    with pytest.raises(ModelsFileError) as raised:
        load_models(path)
    message = str(raised.value)
    assert "\n" not in message and "give exactly one of litellm" in message
    assert (
        "provider 'broken' (ragmatrix_broken_provider) cannot be imported: pip install ragmatrix_absent_dependency"
        in message
    )


def test_every_shipped_entry_is_its_providers_spec_and_keeps_its_fingerprint(monkeypatch):
    monkeypatch.setenv("XINFERENCE_ENDPOINT", "http://127.0.0.1:9")
    specs = {s.id: s for s in load_models(SHIPPED)}
    assert {i: s.provider for i, s in specs.items()} == {
        "gpt-4o-mini": "litellm",
        "claude-haiku": "litellm",
        "gemini-flash": "litellm",
        "judges": "ensemble",
        "local-llm": "litellm",
        "smollm2-cpu": "litellm",
        "minilm": "sentence_transformers",
        "minilm-int8": "sentence_transformers",
        "bow": "bow",
        "bm25": "bm25",
        "bm25-minilm": "rerank_with",
        "xinference-minilm": "xinference",
    }
    # Fingerprints key stored results: these are the ones of the committed results.
    empty = {"query_prefix": "", "document_prefix": "", "max_seq_length": None}
    assert specs["bow"].output_fingerprint() == {"provider": "builtin", **empty, "model": "bow@1"}
    assert specs["bm25"].output_fingerprint() == {"provider": "builtin", **empty, "model": "bm25@1"}
    assert specs["gpt-4o-mini"].output_fingerprint() == {
        "provider": "litellm",
        "model": "openai/gpt-4o-mini",
        "params": {"temperature": 0, "max_tokens": 256},
    }
    assert specs["minilm-int8"].output_fingerprint() == {
        **specs["minilm"].output_fingerprint(),
        "backend": "onnx",
        "quantization": f"int8 ({int8_config()})",
    }
    two_stage = specs["bm25-minilm"].output_fingerprint()
    assert two_stage == {
        "provider": "rerank_with",
        "model": specs["minilm"].output_fingerprint(),
        "first_stage": specs["bm25"].output_fingerprint(),
        "top_n": 50,
    }
    assert specs["xinference-minilm"].output_fingerprint() == {
        "provider": "xinference",
        "model": "gt-minilm",
        "launch": {},
        "params": {},
        "query_prefix": "",
        "document_prefix": "",
    }


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"kind": "embedder"},
            "^give exactly one of litellm, sentence_transformers, builtin, rerank_with, xinference$",
        ),
        ({"kind": "embedder", "builtin": "tfidf"}, r"^unknown builtin 'tfidf' \(known: bm25, bow\)$"),
        ({"kind": "embedder", "provider": "nosuch"}, r"^unknown provider 'nosuch' \(known: .*bm25.*\)$"),
        ({"kind": "llm", "litellm": "openai/x", "batch_size": 8}, "^batch_size goes with .*a litellm embedder"),
        ({"kind": "embedder", "builtin": "bow", "params": {}}, "^params goes with a litellm model string or"),
        ({"kind": "ensemble", "ensemble": ["a", "b"], "device": "cpu"}, "it takes no device$"),
        ({"kind": "llm", "litellm": "openai/x", "backend": "onnx"}, "^backend goes with a sentence_transformers"),
    ],
)
def test_an_entry_that_names_no_single_provider_or_carries_foreign_fields_is_one_line(fields, message):
    with pytest.raises(ValueError, match=message):
        ModelSpec(id="m", **fields)


def test_the_provider_is_picked_by_key_and_kind_or_named_outright():
    chat = ModelSpec(id="c", kind="llm", litellm="openai/x")
    embedder = ModelSpec(id="e", kind="embedder", litellm="openai/x")
    named = ModelSpec(id="b", kind="embedder", provider="bow")
    assert (chat.provider, embedder.provider, named.provider) == ("litellm", "litellm_embedder", "bow")
    assert named.output_fingerprint() == ModelSpec(id="b", kind="embedder", builtin="bow").output_fingerprint()
    assert chat.model_copy(update={"params": {"temperature": 1}}).provider == "litellm"


def test_the_fixtures_protocols_fit_the_built_in_models(monkeypatch):
    from ragmatrix.models.providers.ensemble import Ensemble

    registry = Registry(use_cache=False)
    bow = registry.build(ModelSpec(id="bow", kind="embedder", builtin="bow"))
    bm25 = registry.build(ModelSpec(id="bm25", kind="retriever", builtin="bm25"))
    chat = registry.build(ModelSpec(id="c", kind="llm", litellm="openai/x", api_base="http://127.0.0.1:9/v1"))
    assert isinstance(bow, Retriever) and isinstance(bm25, Retriever) and not isinstance(bm25, ChatModel)
    assert isinstance(chat, ChatModel) and not isinstance(chat, Retriever)
    ensemble = Ensemble(ModelSpec(id="e", kind="ensemble", ensemble=["c", "d"]), [chat, chat])
    assert isinstance(ensemble, JudgeEnsemble) and not isinstance(chat, JudgeEnsemble)
    registry.close()


def test_an_xinference_model_is_reached_through_a_litellm_spec_of_its_running_uid(monkeypatch):
    monkeypatch.setenv("XI_HOST", "http://10.0.0.7:9997")
    fields = {"xinference": "qwen", "endpoint": "${XI_HOST}/v1", "api_key_env": "XI_KEY", "timeout": 5}
    llm = ModelSpec(id="x", kind="llm", params={"temperature": 0}, **fields).route("qwen-1a2b")
    embedder = ModelSpec(id="y", kind="embedder", batch_size=8, query_prefix="q: ", **fields).route("mini-3c4d")
    assert (llm.provider, embedder.provider) == ("litellm", "litellm_embedder")
    assert llm.litellm == "openai/qwen-1a2b" and llm.api_base == "http://10.0.0.7:9997/v1"
    assert (llm.params, llm.timeout, llm.api_key_env) == ({"temperature": 0}, 5, "XI_KEY")
    # the embedder applies its prefixes itself, under its own fingerprint: the route has none
    assert embedder.batch_size == 8 and embedder.query_prefix == ""


def test_a_provider_module_beside_the_benchmark_joins_the_matrix(bench, server):
    """One module and a line that imports it: its model runs, is stored and is ranked."""
    (bench.path / "toy_provider.py").write_text(textwrap.dedent(TOY_PROVIDER))
    bench.makeconftest("import toy_provider  # noqa: F401  (registers the toy provider)\n")
    with (bench.path / "benchmark" / "models.yaml").open("a") as models:
        models.write("  - id: loud\n    kind: llm\n    toy: 1\n")
    result = bench.runpytest_subprocess("benchmark", "-p", "no:cacheprovider", "-k", "loud")
    result.assert_outcomes(passed=5)
    stored = [json.loads(line) for line in (bench.path / "benchmark/results/rag_interpretation.jsonl").open()]
    assert {r["model"] for r in stored} == {"loud"} and not any(r["errors"] for r in stored)
    result.stdout.fnmatch_lines(["*ragmatrix leaderboard*", "*loud*"])


def test_every_name_of_the_provider_face_resolves_and_chat_model_means_one_thing():
    import ragmatrix
    import ragmatrix.providers as face

    assert {name: getattr(face, name) is not None for name in face.__all__} == dict.fromkeys(face.__all__, True)
    # `ChatModel` is the protocol a test receives, wherever it is imported from; the wrapper is `LLM`
    assert face.ChatModel is ragmatrix.ChatModel is ChatModel
    import ragmatrix.models.chat as chat

    assert face.LLM is chat.LLM and not hasattr(chat, "ChatModel")


def test_the_table_of_the_packages_providers_lists_every_module_under_the_key_its_entries_carry():
    """A run imports the provider modules of the keys its models.yaml uses (`PACKAGE_PROVIDERS`):
    a module missing from the table would be found only by a full scan, and one claiming a key
    listed for others could be passed over."""
    keys: dict[str, set[str]] = {}
    for module in pkgutil.iter_modules(providers.__path__):
        imported = importlib.import_module(f"{providers.__name__}.{module.name}")
        for registered in providers.providers().values():
            if registered.spec.__module__ == imported.__name__ and registered.spec.key is not None:
                keys.setdefault(registered.spec.key, set()).add(module.name)
    assert {key: set(modules) for key, modules in providers.PACKAGE_PROVIDERS.items()} == keys


def test_a_run_reads_models_yaml_with_the_provider_modules_of_its_keys_only(tmp_path):
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from ragmatrix.foundations.context import start_run\n"
        "from ragmatrix.models.models_file import load_models\n"
        "with start_run(Path(sys.argv[1])):\n"
        "    specs = load_models(Path(sys.argv[1]) / 'models.yaml')\n"
        "prefix = 'ragmatrix.models.providers.'\n"
        "print(sorted(m[len(prefix):] for m in sys.modules if m.startswith(prefix)), [s.provider for s in specs])\n"
    )
    (tmp_path / "models.yaml").write_text(
        "models:\n  - {id: a, kind: llm, litellm: openai/x}\n  - {id: b, kind: embedder, builtin: bow}\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, check=True)
    modules = "['bm25', 'bow', 'litellm_chat']"  # not litellm's embedder and reranker: the entry is an llm
    assert done.stdout.split("\n")[0] == f"{modules} ['litellm', 'bow']"


def test_a_module_listed_as_of_one_kind_claims_no_entry_of_another():
    """`ONE_KIND`: an entry of another kind is read without importing such a module, which is
    right only if none of its spec models would claim that entry."""
    for module, kind in providers.ONE_KIND.items():
        imported = importlib.import_module(f"{providers.__name__}.{module}")
        specs = [p.spec for p in providers.providers().values() if p.spec.__module__ == imported.__name__]
        assert specs, module
        for spec in specs:
            assert spec.kinds == (kind,), spec
            entry = {spec.key: spec.value or "some/model"}
            assert spec.claims({**entry, "kind": kind}), spec
            for other in ("llm", "embedder", "reranker", "retriever", "ensemble", None, 3):
                if other != kind:
                    assert not spec.claims({**entry, "kind": other}), (spec, other)
                    assert not spec.claims(entry), spec
