"""Keep API keys out of results, caches, logs, reports and test ids, and nothing else.

A variable's value is secret when the variable is named like one (`*KEY*`, `*TOKEN*`,
`*SECRET*`, `*PASSWORD*`, `*PASSWD*`, `*CREDENTIAL*`), or when models.yaml says it holds one: a
field that names a key's variable (`api_key_env`), or the file's `secret_env:` list. `refer_to`
registers those names with the run (`ragmatrix.foundations.context`) as the file is read.
Addresses and model names read from other variables (`api_base: ${MY_SERVER}`) are no secrets:
they show, so that a "left out" line or an error says which server it means. A password written
inside a URL (`http://user:password@host`) is hidden wherever the URL is shown. Values are read
at each redaction, so a variable set later is covered too.

Where text leaves the process it passes `redact`: error messages, model answers (before they
are stored or cached: a server or proxy may echo the key it was sent), the report, and every
log record, through a filter on the log handlers (`guard_logging`), so that a client library's
own debug lines (litellm prints the `api_base` it calls) are covered too.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ragmatrix.foundations.context import current

# Environment variables whose values are treated as secrets, and fields that name one.
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
# Shapes of keys that leak into provider error messages even when no variable holds them.
KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}|Bearer\s+[A-Za-z0-9_\-.]{8,})")
# The password of a URL's `user:password@`: the address around it shows, the password does not.
URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@]*:)[^\s/@]+@")
# Basic credentials (base64 of `user:password`) in an Authorization header a server echoes, as
# `Authorization: Basic ...` or JSON's `"authorization": "Basic ..."`; only there, so that an
# answer's "Basic understanding" stays as written.
BASIC_CREDENTIALS = re.compile(r"""(authorization["']?\s*[:=]\s*["']?basic\s+)[A-Za-z0-9+/=]+""", re.IGNORECASE)
# Shorter values are not redacted: replacing every "1" or "true" would garble the text.
MIN_LENGTH = 6


def refer_to(names: Iterable[str]) -> None:
    """Treat these variables' values as secrets for the rest of the run, whatever their names
    (models.yaml's `secret_env:`, a field such as `api_key_env`)."""
    current().secret_names.update(names)


def key_variables(fields: Mapping[str, Any]) -> set[str]:
    """The variables that an entry's key fields name (`api_key_env: MY_CRED`, any `*_env` field
    named like a secret): they hold keys, whatever their own names."""
    return {
        value
        for name, value in fields.items()
        if name.endswith("_env") and SECRET_NAME.search(name) and isinstance(value, str) and value
    }


def is_secret(name: str) -> bool:
    """Is this variable's value a secret: named like one, or declared one (`refer_to`)?"""
    return bool(SECRET_NAME.search(name)) or name in current().secret_names


def secret_values(extra_names: tuple[str, ...] = ()) -> list[str]:
    """The values to hide. `extra_names`: a model's variables, of which the secret ones count."""
    names = _named_like_secrets() | current().secret_names
    names |= {n for n in extra_names if is_secret(n)}
    values = {os.environ[n] for n in names if len(os.environ.get(n, "")) >= MIN_LENGTH}
    return sorted(values, key=len, reverse=True)


_named: tuple[frozenset[Any], frozenset[str]] | None = None  # (the environment's names, those named like secrets)


def _named_like_secrets() -> frozenset[str]:
    """The variables named like secrets, matched again only when the environment's names change
    (every answer is redacted: matching each name each time was a tenth of the client's work)."""
    global _named
    raw = getattr(os.environ, "_data", None)  # the names as the environment holds them
    if not isinstance(raw, dict):
        return frozenset(n for n in os.environ if SECRET_NAME.search(n))
    if _named is None or _named[0] != raw.keys():
        _named = (frozenset(raw), frozenset(n for n in os.environ if SECRET_NAME.search(n)))
    return _named[1]


def redact(text: str, extra_names: tuple[str, ...] = ()) -> str:
    """`text` with every secret value, URL password and key-shaped token replaced by `***`."""
    for value in secret_values(extra_names):
        text = text.replace(value, "***")
    text = URL_PASSWORD.sub(r"\1***@", text)
    text = BASIC_CREDENTIALS.sub(r"\1***", text)
    return KEY_SHAPES.sub("***", text)


class RedactSecrets(logging.Filter):
    """A handler filter that rewrites a record's message, traceback and stack with `redact`.

    It never drops a record. It changes the record in place, so every handler that sees the
    record after this one sees it redacted too; an unchanged record keeps its `msg` and `args`.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: logging reports it
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FILTER = RedactSecrets()


def guard_logging(*handlers: logging.Handler) -> None:
    """Put the redacting filter on `handlers`, on every handler of the root logger and of
    every other logger that exists now, and on logging's last-resort handler.

    A filter on a logger would only see the records logged on that very logger, not those
    that propagate to it, so the filter goes on the handlers. Call it again after a library
    adds handlers of its own (importing litellm does); a handler gets the filter once.
    """
    loggers: list[logging.Logger] = [logging.getLogger()]
    loggers += [lg for lg in list(logging.Logger.manager.loggerDict.values()) if isinstance(lg, logging.Logger)]
    every = [*handlers, *(h for lg in loggers for h in lg.handlers)]
    if logging.lastResort is not None:
        every.append(logging.lastResort)
    for handler in every:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)
