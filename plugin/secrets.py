"""Keep API keys out of results, caches, logs and test ids."""

from __future__ import annotations

import os
import re

# Environment variables whose values are treated as secrets.
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
# Shapes of keys that leak into provider error messages even when no variable holds them.
KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}|Bearer\s+[A-Za-z0-9_\-.]{8,})")


def secret_values(extra_names: tuple[str, ...] = ()) -> list[str]:
    names = {n for n in os.environ if SECRET_NAME.search(n)} | set(extra_names)
    values = [os.environ[n] for n in names if len(os.environ.get(n, "")) >= 6]
    return sorted(values, key=len, reverse=True)


def redact(text: str, extra_names: tuple[str, ...] = ()) -> str:
    """`text` with every secret value and key-shaped token replaced by `***`."""
    for value in secret_values(extra_names):
        text = text.replace(value, "***")
    return KEY_SHAPES.sub("***", text)
