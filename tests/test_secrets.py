"""Secrets: the values of the variables models.yaml refers to never leave the process in text."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest
from project import REPO, models_yaml, write

from ragmatrix.foundations import secrets
from ragmatrix.models.models_file import load_models, select_models
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


def test_loading_models_yaml_makes_its_variables_secret_whatever_their_names(tmp_path, monkeypatch, fresh_run):
    monkeypatch.setenv("PLAIN_NAMED_VALUE", "opaque-value-77")
    monkeypatch.setenv("ANOTHER_PLAIN_ONE", "opaque-value-88")
    assert secrets.redact("x opaque-value-77 y") == "x opaque-value-77 y"  # not yet referred to
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n"
        "  - {id: a, kind: llm, litellm: 'openai/x', api_base: 'http://h/${ANOTHER_PLAIN_ONE}',"
        " api_key_env: PLAIN_NAMED_VALUE}\n"
    )
    load_models(path)
    assert secrets.redact("x opaque-value-77 y opaque-value-88") == "x *** y ***"
    monkeypatch.setenv("PLAIN_NAMED_VALUE", "changed-later-99")  # read at each redaction
    assert secrets.redact("changed-later-99") == "***"


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


@pytest.mark.parametrize("name", ["RAGMATRIX_LOCAL_KEY", "LOCAL_LLM_AUTH"])
def test_a_key_is_redacted_from_an_error_whatever_its_variable(name, monkeypatch, tmp_path):
    monkeypatch.setenv(name, KEY)
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  - {{id: a, kind: llm, litellm: openai/x, api_key_env: {name}}}\n")
    load_models(path)
    assert secrets.redact(f"401: Incorrect API key provided: {KEY}.") == "401: Incorrect API key provided: ***."


def test_a_left_out_models_reason_hides_a_server_address_read_from_a_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_PRIVATE_HOST", "http://127.0.0.1:9/private-path")
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - {id: a, kind: llm, litellm: openai/x, api_base: '${MY_PRIVATE_HOST}/v1'}\n")
    reason = select_models(load_models(path), None).left_out["a"]
    assert reason.startswith("server ***/v1 unreachable (") and "private-path" not in reason


def test_a_key_echoed_in_a_normal_answer_is_in_no_file_the_run_or_the_commands_wrote(bench, server, monkeypatch):
    """The server answers 200 with the bearer token in the text; litellm logs at DEBUG the
    `api_base` it calls, read from a variable. Neither value may reach any file: results,
    caches, the log file, junit XML, the report, a merge."""
    base = server.base_url
    monkeypatch.setenv("LOCAL_LLM_AUTH", KEY)
    monkeypatch.setenv("LOCAL_LLM_BASE", base)  # named by models.yaml, so secret too
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
    leaks = [
        str(p.relative_to(bench.path))
        for p in written
        if KEY.encode() in p.read_bytes() or base.encode() in p.read_bytes()
    ]
    assert leaks == []
    shown = "\n".join(result.outlines + result.errlines + [report.stdout, merge.stdout])
    assert "Captured log" in shown and KEY not in shown and base not in shown


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
