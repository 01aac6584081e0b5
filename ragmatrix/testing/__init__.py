"""Test utilities that run real services (no mocks): see `openai_server`."""

from ragmatrix.testing.openai_server import OpenAIServer, Reply, embed_text

__all__ = ["OpenAIServer", "Reply", "embed_text"]
