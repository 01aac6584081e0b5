"""Tokens counted here, for an answer whose server reported none.

The count uses OpenAI's cl100k_base encoding through tiktoken, read from the encoding files
litellm ships in its package (nothing is fetched, and litellm itself is not imported), with
OpenAI's framing of a chat: a few tokens per message, and three that prime the reply. For a
model with another tokenizer it is an estimate, and the rows say the tokens were counted.
"""

from __future__ import annotations

import functools
import os
from importlib.util import find_spec
from typing import Any

PER_MESSAGE = 3  # <|start|>role ... <|end|> around each message
REPLY_PRIMING = 3  # every reply is primed with <|start|>assistant<|message|>


@functools.cache
def _encoding() -> Any | None:
    spec = find_spec("litellm")
    if spec is None or spec.origin is None:
        return None
    bundled = os.path.join(os.path.dirname(spec.origin), "litellm_core_utils", "tokenizers")
    if not os.path.isdir(bundled):
        return None
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", bundled)
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # no tiktoken, or its files are missing: then nothing is counted
        return None


def counted_tokens(messages: list[dict[str, str]], answer: str) -> dict[str, int] | None:
    """`{"prompt_tokens", "completion_tokens", "counted": 1}`, or None where no tokenizer can be
    had (the tokens then stay unknown, never zero)."""
    encoding = _encoding()
    if encoding is None:
        return None
    prompt = REPLY_PRIMING + sum(
        PER_MESSAGE + sum(len(encoding.encode(str(value))) for value in message.values()) for message in messages
    )
    return {"prompt_tokens": prompt, "completion_tokens": len(encoding.encode(answer)), "counted": 1}
