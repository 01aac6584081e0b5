"""Secrets: the values of key variables (named like keys, or declared in models.yaml) never leave the
process in text; addresses and model names read from other variables show, without a password."""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys

import pytest
from project import REPO, models_yaml, write

from ragmatrix.foundations import secrets
from ragmatrix.models.models_file import ModelsFileError, load_models, select_models
from ragmatrix.models.spec import ModelSpec
from ragmatrix.testing.openai_server import Reply

KEY = "hunter2-local-access-42"  # no key shape, and LOCAL_LLM_AUTH is not named like a secret


def test_the_variables_an_entry_refers_to_are_its_requires_env_its_env_fields_and_its_references():
    spec = ModelSpec(
        id="m",
        kind="llm",
        litellm="openai/${LOCAL_MODEL_NAME}",
        api_base="${LOCAL_BASE}/v1",
        api_key_env="LOCAL_LLM_AUTH",
        requires_env=["LOCAL_BASE"],
    )
    assert spec.env_names() == {"LOCAL_MODEL_NAME", "LOCAL_BASE", "LOCAL_LLM_AUTH"}


def test_models_yaml_makes_key_variables_secret_whatever_their_names_and_leaves_addresses_shown(
    tmp_path, monkeypatch, fresh_run
):
    monkeypatch.setenv("PLAIN_NAMED_VALUE", "opaque-value-77")  # named by api_key_env: a key
    monkeypatch.setenv("DECLARED_ONE", "opaque-value-66")  # declared in secret_env
    monkeypatch.setenv("ANOTHER_PLAIN_ONE", "private-host-88")  # an address: no secret
    monkeypatch.setenv("LOCAL_MODEL_NAME", "qwen-local-99")  # a model name: no secret
    assert secrets.redact("x opaque-value-77 y") == "x opaque-value-77 y"  # not yet declared
    path = tmp_path / "models.yaml"
    path.write_text(
        "secret_env: [DECLARED_ONE]\n"
        "models:\n"
        "  - {id: a, kind: llm, litellm: 'openai/${LOCAL_MODEL_NAME}', api_base: 'http://${ANOTHER_PLAIN_ONE}/v1',"
        " api_key_env: PLAIN_NAMED_VALUE, requires_env: [ANOTHER_PLAIN_ONE, LOCAL_MODEL_NAME]}\n"
    )
    load_models(path)
    text = "opaque-value-77 opaque-value-66 http://private-host-88/v1 openai/qwen-local-99"
    assert secrets.redact(text) == "*** *** http://private-host-88/v1 openai/qwen-local-99"
    assert secrets.redact(text, ("ANOTHER_PLAIN_ONE", "LOCAL_MODEL_NAME", "PLAIN_NAMED_VALUE")) == secrets.redact(text)
    monkeypatch.setenv("PLAIN_NAMED_VALUE", "changed-later-99")  # read at each redaction
    assert secrets.redact("changed-later-99") == "***"
    path.write_text("secret_env: NOT_A_LIST\nmodels: []\n")
    with pytest.raises(ModelsFileError, match="^models.yaml: secret_env: expected a list of variable names$"):
        load_models(path)


def test_a_password_in_a_url_is_hidden_and_the_rest_of_the_url_shows(fresh_run):
    text = "server http://user:pass-word-77@10.0.0.5:8000/v1 and postgres://u:p4ss@db/x, not http://h:80/v1"
    assert (
        secrets.redact(text) == "server http://user:***@10.0.0.5:8000/v1 and postgres://u:***@db/x, not http://h:80/v1"
    )


def test_a_key_echoed_by_the_server_is_in_no_result_cache_report_or_output(bench, server, monkeypatch):
    """An unusually named variable, via api_key_env; the server puts the key in its 401."""
    monkeypatch.setenv("LOCAL_LLM_AUTH", KEY)
    extra = f"""  - id: guarded
    kind: llm
    litellm: openai/guarded
    api_base: {server.base_url}
    api_key_env: LOCAL_LLM_AUTH
    retries: 0
"""
    write(bench.path / "benchmark" / "models.yaml", models_yaml(server.base_url, extra))
    server.answer = "yes"
    server.on("", Reply.echo_key(401))  # every request: the key comes back in the message
    result = bench.runpytest_subprocess(
        "benchmark", "-p", "no:cacheprovider", "-v", "-k", "guarded", "--junitxml=junit.xml"
    )
    sent = [r["headers"].get("authorization") for r in server.requests]
    assert f"Bearer {KEY}" in sent  # the key was really sent, and echoed
    rows = [json.loads(line) for line in (bench.path / "benchmark/results/rag_interpretation.jsonl").open()]
    errors = [e["error"] for r in rows for e in r["iterations"] if "error" in e]
    assert errors and all("Incorrect API key provided: ***" in e for e in errors)
    stored = [
        bench.path / "junit.xml",
        *bench.path.glob("benchmark/results/*"),
        *bench.path.rglob(".benchmark_cache/**/*"),
    ]
    leaks = [p.name for p in stored if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaks == []
    assert "***" in (bench.path / "junit.xml").read_text()
    shown = "\n".join(result.outlines + result.errlines)
    assert "guarded" in shown and "***" in shown and KEY not in shown


def test_a_key_variable_set_changed_or_swapped_in_after_a_redaction_is_hidden_from_the_next(monkeypatch):
    assert secrets.redact("nothing secret yet") == "nothing secret yet"
    monkeypatch.setenv("LATE_API_KEY", "first-value-123")
    assert secrets.redact("first-value-123") == "***"
    monkeypatch.setenv("LATE_API_KEY", "second-value-456")
    assert secrets.redact("second-value-456") == "***"
    # as many variables as before, other names: the names are matched again
    monkeypatch.delenv("LATE_API_KEY")
    monkeypatch.setenv("LATER_TOKEN", "third-value-789")
    assert secrets.redact("third-value-789 second-value-456") == "*** second-value-456"


@pytest.mark.parametrize("name", ["RAGMATRIX_LOCAL_KEY", "LOCAL_LLM_AUTH"])
def test_a_key_is_redacted_from_an_error_whatever_its_variable(name, monkeypatch, tmp_path):
    monkeypatch.setenv(name, KEY)
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  - {{id: a, kind: llm, litellm: openai/x, api_key_env: {name}}}\n")
    load_models(path)
    assert secrets.redact(f"401: Incorrect API key provided: {KEY}.") == "401: Incorrect API key provided: ***."


def test_a_left_out_models_reason_names_its_server_read_from_a_variable_without_its_password(
    tmp_path, monkeypatch, fresh_run
):
    monkeypatch.setenv("MY_PRIVATE_HOST", "http://user:pass-word-77@127.0.0.1:9/private-path")  # nothing listens
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n  - {id: a, kind: llm, litellm: openai/x, api_base: '${MY_PRIVATE_HOST}/v1',"
        " requires_env: [MY_PRIVATE_HOST]}\n"
    )
    reason = select_models(load_models(path), None).left_out["a"]
    assert reason.startswith("server http://user:***@127.0.0.1:9/private-path/v1 unreachable (")
    assert "pass-word-77" not in reason


def test_basic_credentials_a_server_echoes_are_hidden_and_prose_about_basics_is_not(fresh_run):
    token = base64.b64encode(b"user:pass-word-77").decode()
    echoed = f'401: bad request, headers {{"Authorization": "Basic {token}"}}; authorization: basic {token}'
    assert (
        secrets.redact(echoed) == '401: bad request, headers {"Authorization": "Basic ***"}; authorization: basic ***'
    )
    answer = "Basic understanding of the pathway is needed. Basic dXNlcjpw is no header."
    assert secrets.redact(answer) == answer


def test_a_server_whose_address_holds_a_password_is_reached_and_its_items_run(bench, server, monkeypatch):
    """The probe sends `user:password@` as basic authentication, as the clients do, instead of
    taking it for part of the host name; the address shows in the header, its password never."""
    monkeypatch.setenv("LOCAL_LLM_BASE", server.base_url.replace("http://", "http://user:pass-word-77@"))
    extra = """  - id: behind-auth
    kind: llm
    litellm: openai/behind-auth
    api_base: ${LOCAL_LLM_BASE}
    requires_env: [LOCAL_LLM_BASE]
  - id: down
    kind: llm
    litellm: openai/down
    api_base: http://user:pass-word-77@127.0.0.1:9/v1
"""
    write(bench.path / "benchmark" / "models.yaml", models_yaml(None, extra))
    result = bench.runpytest("benchmark", "-p", "no:cacheprovider", "-k", "behind-auth")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["ragmatrix: left out down: server http://user:***@127.0.0.1:9/v1 unreachable (*"])
    assert all(r["headers"].get("authorization", "").startswith("Basic ") for r in server.requests)
    written = [p for p in bench.path.rglob("*") if p.is_file() and p.name != "models.yaml"]  # the file gives it
    assert not [p.name for p in written if b"pass-word-77" in p.read_bytes()]
    assert "pass-word-77" not in result.stdout.str()


def test_a_key_echoed_in_a_normal_answer_is_in_no_file_the_run_or_the_commands_wrote(bench, server, monkeypatch):
    """The server answers 200 with the bearer token in the text; litellm logs at DEBUG the
    `api_base` it calls, read from a variable, and every header it sends. The key may reach no
    file: results, caches, the log file, junit XML, the report, a merge."""
    base = server.base_url
    monkeypatch.setenv("LOCAL_LLM_AUTH", KEY)
    monkeypatch.setenv("LOCAL_LLM_BASE", base)  # an address: it may show, the key never
    # through litellm, whose own DEBUG lines name the api_base (the direct client logs nothing)
    extra = """  - id: guarded
    kind: llm
    litellm: openai/guarded
    client: litellm
    api_base: ${LOCAL_LLM_BASE}
    api_key_env: LOCAL_LLM_AUTH
    timeout: 30
"""
    write(bench.path / "benchmark" / "models.yaml", models_yaml(None, extra))
    server.on("", Reply.echo_key_answer())
    result = bench.runpytest_subprocess(
        "benchmark", "-p", "no:cacheprovider", "-rA", "-k", "guarded", "--junitxml=junit.xml",
        "-o", "junit_logging=all", "--log-level=DEBUG", "--log-file-level=DEBUG", "--log-file=run.log",
    )  # fmt: skip
    result.assert_outcomes(passed=5)
    assert all(r["headers"].get("authorization") == f"Bearer {KEY}" for r in server.requests if r["body"])
    rows = [json.loads(line) for line in (bench.path / "benchmark/results/rag_interpretation.jsonl").open()]
    answers = [it["answer"] for r in rows for it in r["iterations"]]
    assert len(answers) == 5 and all(a == "yes (you called me with the key ***)" for a in answers)
    log = (bench.path / "run.log").read_text()
    assert "LiteLLM" in log and "***" in log  # litellm's own debug lines were there, redacted
    report = run_cli(bench.path, "report", "--results-dir", "benchmark/results", "--out", "report")
    merge = run_cli(bench.path, "merge", "benchmark/results", "--into", "merged")
    assert report.returncode == 0 and merge.returncode == 0, report.stderr + merge.stderr
    written = [p for p in bench.path.rglob("*") if p.is_file()]
    assert {"junit.xml", "run.log", "responses.sqlite", "leaderboard.md", "leaderboard.html"} <= {
        p.name for p in written
    }
    leaks = [str(p.relative_to(bench.path)) for p in written if KEY.encode() in p.read_bytes()]
    assert leaks == []
    shown = "\n".join(result.outlines + result.errlines + [report.stdout, merge.stdout])
    assert "Captured log" in shown and KEY not in shown


def run_cli(cwd, *arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "ragmatrix", *arguments],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_log_record_pytest_captures_is_redacted_messages_and_tracebacks(caplog, monkeypatch, fresh_run):
    fresh_run.secret_names.add("LOCAL_LLM_AUTH")
    monkeypatch.setenv("LOCAL_LLM_AUTH", KEY)
    caplog.set_level(logging.DEBUG)
    logging.getLogger("some.client").debug("POST %s with the key %s", "http://h/v1", KEY)
    try:
        raise RuntimeError(f"Incorrect API key provided: {KEY}")
    except RuntimeError:
        logging.getLogger("some.library").exception("the call failed")
    assert KEY not in caplog.text and caplog.text.count("***") == 2
    assert "POST http://h/v1 with the key ***" in caplog.text


def test_the_filter_is_on_every_handler_once(monkeypatch):
    handler = logging.StreamHandler()
    library = logging.getLogger("a.library.with.its.own.handler")
    monkeypatch.setattr(library, "handlers", [handler])
    secrets.guard_logging()
    secrets.guard_logging()
    assert [type(f).__name__ for f in handler.filters] == ["RedactSecrets"]
