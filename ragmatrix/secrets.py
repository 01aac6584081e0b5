"""Keep API keys out of results, caches, logs and test ids.

A value is a secret when its variable is named like one (`*KEY*`, `*TOKEN*`, ...) or when
models.yaml refers to the variable (`requires_env`, `api_key_env`, `${VAR}`), whatever its name:
`refer_to` registers those names as the file is read. Values are read at each redaction, so a
variable set later is covered too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

# Environment variables whose values are treated as secrets.
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
# Shapes of keys that leak into provider error messages even when no variable holds them.
KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}|Bearer\s+[A-Za-z0-9_\-.]{8,})")
# Shorter values are not redacted: replacing every "1" or "true" would garble the text.
MIN_LENGTH = 6

_referred: set[str] = set()  # variables models.yaml refers to


def refer_to(names: Iterable[str]) -> None:
    """Treat these variables' values as secrets from now on."""
    _referred.update(names)


def secret_values(extra_names: tuple[str, ...] = ()) -> list[str]:
    names = {n for n in os.environ if SECRET_NAME.search(n)} | _referred | set(extra_names)
    values = {os.environ[n] for n in names if len(os.environ.get(n, "")) >= MIN_LENGTH}
    return sorted(values, key=len, reverse=True)


def redact(text: str, extra_names: tuple[str, ...] = ()) -> str:
    """`text` with every secret value and key-shaped token replaced by `***`."""
    for value in secret_values(extra_names):
        text = text.replace(value, "***")
    return KEY_SHAPES.sub("***", text)
