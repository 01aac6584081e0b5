"""`xinference: <model name>` with `endpoint:`: an LLM or an embedder on an Xinference server,
found running there or launched, and terminated at the end only when this process launched it.
Requests go to the server's OpenAI-compatible API through litellm.

`XinferenceServer` does the finding and launching through `xinference-client`, which is
synchronous: its calls run in a thread, once per model and process, never per request. Once the
model runs, requests go through the same client layer as every other model (concurrency limit,
timeouts, bounded retries).

Launch settings are of two sorts. Those that say how a model is served (`SERVING_SETTINGS`:
replicas, workers, GPUs, threads, slots) are left out of the result key, so a cluster with two
replicas reuses a single node's rows; every other one (engine, format, size, quantization, any
setting not known to be harmless) is part of it. A running model is used only when it was
launched with the entry's settings: by a ragmatrix run (its uid carries a tag of them), or as
the server reports them. Otherwise another is launched under its own uid. A model this process
launched is terminated at the run's end, and on SIGTERM, SIGINT or exit before it
(`ragmatrix.models.lifecycle`).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar, cast

from pydantic import Field, model_validator

from ragmatrix.cost.device import Device, remote
from ragmatrix.foundations.keys import md5_of
from ragmatrix.foundations.secrets import redact
from ragmatrix.models import lifecycle
from ragmatrix.models.chat import LLM, ChatProvider, Messages
from ragmatrix.models.client import Failure, ModelError
from ragmatrix.models.embedder import EmbeddingModel, EmbeddingProvider
from ragmatrix.models.providers import provider
from ragmatrix.models.spec import EmbedderSpec, ModelSpec, expand_env, probe_server

if TYPE_CHECKING:
    from ragmatrix.models.protocols import Model
    from ragmatrix.models.providers.litellm_chat import LitellmChat, LitellmSpec
    from ragmatrix.models.providers.litellm_embedder import LitellmEmbedding
    from ragmatrix.models.spec import ModelBuilder

# The launch_model arguments an entry may name directly.
LAUNCH_FIELDS = ("model_engine", "model_size_in_billions", "model_format", "quantization")

# Launch settings that change how a model is served, never what it answers: not part of the
# result key. Placement and copies (replica, workers, GPUs), threads and limits. Slots and
# batching (n_parallel, max_num_seqs) and splitting a model over GPUs change no setting of the
# model, but may change its answers a little through the order of floating-point sums
# (docs/models.md says so; `--iterations` shows the spread). Any setting not named here stays in
# the key.
SERVING_SETTINGS = frozenset(
    {
        "replica",
        "replica_config",
        "n_worker",
        "worker_ip",
        "n_gpu",
        "gpu_idx",
        "n_gpu_layers",
        "request_limits",
        "n_threads",
        "n_parallel",
        "max_num_seqs",
        "gpu_memory_utilization",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "wait_ready",
    }
)

log = logging.getLogger(__name__)

TERMINATE_WAIT = 60.0  # seconds to terminate a launched model (a launch under way cancelled first)

# What a supervisor answers for a model whose worker it lost, until it routes the model's requests
# to a replica that still runs (about 20 s for Xinference 4.1): "Model not found in the model list,
# uid: m (cached, retry after 10.0s)".
MODEL_NOT_FOUND = re.compile(r"Model not found in the model list(?:.*?retry after (\d+(?:\.\d+)?) ?s)?")
# Before that, for a few seconds, the supervisor still forwards to the lost worker and answers a
# 500 naming the connection it could not make: "[address=...] [Errno 111] Connect call failed".
WORKER_UNREACHABLE = re.compile(r"Connect call failed|\[Errno 111\]|Connection refused")
WORKER_LOST_WAIT = 10.0  # seconds between attempts then: the retries span the supervisor's reroute


@provider("xinference", needs={"xinference_client": "xinference-client", "litellm": "litellm"})
class XinferenceSpec(EmbedderSpec):
    provider: Literal["xinference"] = "xinference"
    key: ClassVar[str | None] = "xinference"
    kinds: ClassVar[tuple[str, ...]] = ("llm", "embedder")
    rank: ClassVar[int] = 40
    describe: ClassVar[str] = "an xinference model name"
    xinference: str  # a model name on the server, launched there if not running
    endpoint: str | None = None  # the server, "http://host:9997"; "${VAR}" reads the environment
    api_key_env: str | None = None  # the variable holding the server's key, if it wants one
    params: dict[str, Any] = Field(default_factory=dict)  # generation parameters (part of the key)
    # Launch settings (part of the key, but for the serving settings): what launch_model is asked for.
    model_engine: str | None = None
    model_size_in_billions: int | float | str | None = None
    model_format: str | None = None
    quantization: str | None = None
    launch: dict[str, Any] = Field(default_factory=dict)  # any other launch_model arguments (see SERVING_SETTINGS)
    launch_timeout: float = Field(default=1800.0, gt=0)  # seconds to find or launch the model

    @model_validator(mode="after")
    def check_endpoint(self) -> XinferenceSpec:
        if not self.endpoint:
            raise ValueError("an xinference model needs an endpoint (the server, e.g. ${XINFERENCE_ENDPOINT})")
        return self

    def resolved_endpoint(self) -> str | None:
        """The server's root URL ("http://host:port"); a trailing /v1 is dropped."""
        if not self.endpoint:
            return None
        endpoint = expand_env(self.endpoint).strip().rstrip("/")
        return endpoint.removesuffix("/v1") or None

    def launch_settings(self) -> dict[str, Any]:
        """The arguments, besides name and type, that launch_model is given."""
        named = {f: getattr(self, f) for f in LAUNCH_FIELDS if getattr(self, f) is not None}
        return {**self.launch, **named}

    def model_settings(self) -> dict[str, Any]:
        """The launch settings that may change what the model answers: all but the serving ones."""
        return {k: v for k, v in self.launch_settings().items() if k not in SERVING_SETTINGS}

    def route(self, uid: str) -> ModelSpec:
        """The litellm spec that reaches the running model `uid` through the server's
        OpenAI-compatible API."""
        fields = {"id", "kind", "api_key_env", "requires_env", "concurrency", "timeout", "retries", "params"}
        fields |= {"breaker_after", "breaker_patience"}
        if self.kind == "embedder":
            fields.add("batch_size")
        route = {name: getattr(self, name) for name in fields}
        return ModelSpec(**{**route, "litellm": f"openai/{uid}", "api_base": f"{self.resolved_endpoint()}/v1"})

    def unavailable(self, probe: bool = True) -> str | None:
        reason = super().unavailable(probe)
        if reason is not None:
            return reason
        endpoint = self.resolved_endpoint()
        if not endpoint:
            return f"endpoint {self.endpoint} is empty"
        return probe_server(endpoint + "/v1", name=endpoint) if probe else None

    def fingerprint(self) -> dict[str, Any]:
        # named by what the server is asked to launch, never by its address
        return {
            "provider": "xinference",
            "model": expand_env(self.xinference),
            "launch": self.model_settings(),  # how it is served (replicas, threads, ...) is not the model
            "params": self.params,
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
        }

    def build(self, models: ModelBuilder) -> Model:
        lifecycle.arm()  # here, on the main thread: a model launched later is terminated on SIGTERM
        server = XinferenceServer(self)
        if self.kind == "llm":  # found or launched now, on the server
            # The response cache is keyed by the spec (the model name and launch settings), not the uid.
            return LLM(self, XinferenceChat(server), models.response_cache())
        # No cache or prefixes in the route: the wrapper applies both, under this spec's fingerprint.
        return EmbeddingModel(self, XinferenceEmbedding(server), models.embedding_cache())


T = TypeVar("T")
MODEL_TYPES = {"embedder": "embedding", "llm": "LLM", "reranker": "rerank"}


class XinferenceServer:
    """One model of models.yaml on its Xinference server."""

    def __init__(self, spec: XinferenceSpec) -> None:
        self.spec = spec
        self.name = expand_env(str(spec.xinference))
        self.endpoint = spec.resolved_endpoint() or ""
        self.model_type = MODEL_TYPES[spec.kind]
        self.uid: str | None = None  # the model on the server, once found or launched
        self.launched: str | None = None  # the uid this process launched, to terminate at close
        self._error: str | None = None
        self._lock = threading.Lock()
        self._about: dict[str, object] | None = None  # what the server tells of the running model

    def client(self) -> Any:
        from xinference_client import RESTfulClient

        api_key = os.environ.get(self.spec.api_key_env) if self.spec.api_key_env else None
        return RESTfulClient(self.endpoint, api_key=api_key)

    def model_uid(self) -> str:
        """The uid of a running model of this name, launching one when none runs. A failure is
        remembered: every later call raises the same ModelError without asking the server again."""
        with self._lock:
            if self.uid is None:
                if self._error is not None:
                    raise ModelError(self._error)
                try:
                    self.uid = in_thread(self._find_or_launch, self.spec.launch_timeout)
                except Exception as error:
                    detail = f"{type(error).__name__}: {error}".strip().splitlines()[0][:300]
                    self._error = redact(
                        f"xinference model '{self.name}' at {self.endpoint}: {detail}", tuple(self.spec.requires_env)
                    )
                    raise ModelError(self._error) from error
            return self.uid

    def tag(self) -> str:
        """Six hex digits of the entry's launch settings: a uid launched with them carries it."""
        return md5_of(self.spec.launch_settings())[:6]

    def running(self, client: Any) -> tuple[str | None, str | None]:
        """A running model with this name and type launched with the entry's settings: its uid
        (or None), and why another one of this name was passed over (or None)."""
        passed_over: str | None = None
        for uid, info in sorted(client.list_models().items()):
            if info.get("model_name") != self.name or info.get("model_type", self.model_type) != self.model_type:
                continue
            reason = self.differs(str(uid), info)
            if reason is None:
                return str(uid), None
            passed_over = passed_over or f"{uid} runs with {reason}"
        return None, passed_over

    def differs(self, uid: str, info: dict[str, Any]) -> str | None:
        """How a running model's launch settings differ from the entry's, as far as the server
        tells (None: they do not). A uid launched by ragmatrix with these settings carries their
        tag; otherwise each setting the entry names must be one the server reports, unchanged."""
        wanted = self.spec.launch_settings()
        if not wanted or uid.startswith(f"{self.name}-{self.tag()}-"):
            return None
        for name, value in sorted(wanted.items()):
            if name not in info or info[name] is None:
                return f"{name} unknown (the server does not report it; the entry asks for {value!r})"
            if info[name] != value and str(info[name]) != str(value):
                return f"{name} {info[name]!r} where the entry asks for {value!r}"
        return None

    def _find_or_launch(self) -> str:
        client = self.client()
        try:
            uid, passed_over = self.running(client)
            if uid is not None:
                return uid
            uid = f"{self.name}-{self.tag()}-{secrets.token_hex(3)}"
            self.launched = uid  # before the call: a launch that outlives its timeout is still ours
            lifecycle.launched(self.key(uid), self.close)
            if passed_over is not None:
                log.warning("xinference: not using %s: launching %s with the entry's settings", passed_over, uid)
            try:
                return str(
                    client.launch_model(
                        model_name=self.name, model_type=self.model_type, model_uid=uid, **self.spec.launch_settings()
                    )
                )
            except Exception as error:
                self.launched = None
                lifecycle.terminated(self.key(uid))
                other, _ = self.running(client)  # another process may have launched it meanwhile
                if other is not None:
                    return other
                if passed_over is not None:
                    raise RuntimeError(f"{passed_over}, and launching another failed: {error}") from error
                raise
        finally:
            client.close()

    def device(self) -> Device:
        """`remote: <host>`, with what the server tells of the running model once it runs."""
        if self.uid is not None and self._about is None:
            self._about = {}  # asked once, whatever comes of it
            try:
                self._about = in_thread(lambda: self._describe(str(self.uid)), 30.0)
            except Exception:  # the figures go without the details
                log.debug("xinference: describing %s failed", self.uid, exc_info=True)
        return remote(self.endpoint, self._about)

    def _describe(self, uid: str) -> dict[str, object]:
        """The model's engine and replicas, the workers its replicas run on, and their GPUs and
        memory, as far as the server's API tells (each part on its own: an older server may
        lack one)."""
        client = self.client()
        about: dict[str, object] = {"model": uid}
        try:
            info = client.describe_model(uid)
            about["engine"] = info.get("model_engine")
            about["replicas"] = info.get("replica")
            gpus = info.get("accelerators")
            about["gpus"] = ",".join(str(g) for g in gpus) if gpus else "none"
            workers = _workers(client.get_instance_info(self.name, uid))
            about["worker"] = " ".join(workers)
            nodes = _get(client, f"{self.endpoint}/v1/cluster/info?detailed=true")
            mine = [n for n in nodes if isinstance(n, dict) and n.get("ip_address") in workers]
            if mine:
                about["memory"] = ", ".join(_memory(node) for node in mine)
        except Exception:  # as much as it told
            log.debug("xinference: the server did not describe %s fully", uid, exc_info=True)
        finally:
            client.close()
        return about

    def key(self, uid: str) -> str:
        return f"{self.endpoint} {uid}"

    def close(self) -> None:
        """Terminate the model if this process launched it; a model found running stays."""
        uid, self.launched = self.launched, None
        if uid is None:
            return

        def terminate() -> None:
            client = self.client()
            try:
                terminate_model(client, uid, TERMINATE_WAIT)
            finally:
                client.close()

        try:
            in_thread(terminate, TERMINATE_WAIT + 10.0)
        except Exception:  # best effort at session end: the results are already stored
            pass
        finally:
            lifecycle.terminated(self.key(uid))
        self.uid = None

    def route(self) -> LitellmSpec:
        """The spec that reaches the running model through the server's OpenAI-compatible API."""
        return cast("LitellmSpec", self.spec.route(self.model_uid()))


class XinferenceEmbedding(EmbeddingProvider):
    """Finds or launches its model on the first text the embedding cache cannot serve, then
    embeds batches through litellm's OpenAI route to it."""

    def __init__(self, server: XinferenceServer) -> None:
        self.server = server
        self._route: LitellmEmbedding | None = None

    @property
    def route(self) -> LitellmEmbedding:
        if self._route is None:
            from ragmatrix.models.providers.litellm_embedder import LitellmEmbedding

            self._route = LitellmEmbedding(self.server.route())
        return self._route

    def load(self) -> None:
        self.route  # noqa: B018 - found or launched before the clock starts: a launch is not an encode

    async def aembed(self, texts: list[str]) -> list[list[float]]:
        return await self.route.aembed(texts)

    def classify(self, error: BaseException) -> Failure:
        return passing(self.route.classify(error))

    def device(self) -> Device:
        return self.server.device()

    def close(self) -> None:
        self.server.close()


class XinferenceChat(ChatProvider):
    """An LLM on Xinference, chatting through litellm's OpenAI route. The model is found or
    launched when it is made, that is when the first test that needs it runs."""

    def __init__(self, server: XinferenceServer) -> None:
        from ragmatrix.models.providers.litellm_chat import LitellmChat

        self.server = server
        try:
            self.route: LitellmChat = LitellmChat(server.route())
        except Exception:
            server.close()  # a model launched for a provider never made is not left running
            raise

    async def complete(self, messages: Messages, timeout: float) -> tuple[str, dict[str, Any], float | None]:
        return await self.route.complete(messages, timeout)

    def classify(self, error: BaseException) -> Failure:
        return passing(self.route.classify(error))

    def device(self) -> Device:
        return self.server.device()

    def close(self) -> None:
        self.server.close()


def passing(failure: Failure) -> Failure:
    """A 404 for the running model, as a supervisor answers while it reroutes the requests of a
    worker it lost, is a server fault that passes: retried (after the wait it names), and
    counted towards the breaker, which gives the model up if it never comes back. The 500 it
    answers before that, when it cannot reach the worker, is retried after `WORKER_LOST_WAIT`."""
    if WORKER_UNREACHABLE.search(failure.message) and failure.retryable:
        wait = max(failure.retry_after or 0.0, WORKER_LOST_WAIT)
        return Failure(failure.message, retryable=True, retry_after=wait, outage=True)
    found = MODEL_NOT_FOUND.search(failure.message)
    if failure.retryable or found is None:
        return failure
    retry_after = float(found.group(1)) if found.group(1) else None
    return Failure(failure.message, retryable=True, retry_after=retry_after, outage=True)


def terminate_model(client: Any, uid: str, wait: float) -> None:
    """Terminate `uid` on the server, a launch still under way included: its launch is cancelled
    first (a model with two replicas is listed once the first is up, and cannot be terminated
    while the second loads), then it is terminated, until the server has not listed it for a
    second, for at most `wait` seconds."""
    deadline = time.monotonic() + wait
    absent = 0
    while absent < 2:
        for step in (client.cancel_launch_model, client.terminate_model):
            try:
                step(uid)
            except Exception:  # not launching, or not (or no longer) there
                pass
        absent = absent + 1 if uid not in client.list_models() else 0
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{uid} still runs after {wait:g} s")
        if absent < 2:
            time.sleep(1.0)


def _workers(instances: Any) -> list[str]:
    """The worker addresses of a model's replicas, from `/v1/models/instances`."""
    found: list[str] = []
    for instance in instances if isinstance(instances, list) else []:
        for replica in instance.get("replica_statuses") or [] if isinstance(instance, dict) else []:
            address = replica.get("worker_address") if isinstance(replica, dict) else None
            if address and address not in found:
                found.append(str(address))
    return found


def _get(client: Any, url: str) -> Any:
    response = client.session.get(url, headers=client._headers)
    response.raise_for_status()
    return response.json()


def _memory(node: dict[str, Any]) -> str:
    """A worker's memory as `/v1/cluster/info` tells it: `24,105 MB RAM, 2 GPUs 160,000 MB`."""
    text = f"{int(node.get('mem_total') or 0) // 2**20:,} MB RAM"
    if node.get("gpu_count"):
        text += f", {node['gpu_count']} GPUs {int(node.get('gpu_vram_total') or 0) // 2**20:,} MB"
    return text


def in_thread(function: Callable[[], T], timeout: float) -> T:
    """`function()` run in a daemon thread, waited for at most `timeout` seconds: a server that
    hangs cannot hang the session, nor keep the interpreter from exiting."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as error:  # handed to the caller
            outcome["error"] = error

    thread = threading.Thread(target=target, name="xinference-client", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"no answer after {timeout:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
