"""Input errors of the OpenAI-compatible server (ValueError family, one line each)."""

from __future__ import annotations


class ServerInputError(ValueError):
    """A request the server refuses (HTTP 400): the message names the field."""


class ChatTemplateError(ServerInputError):
    """A chat message has an unknown role or non-text content."""


class ContextLengthError(ServerInputError):
    """Prompt plus max_tokens do not fit the model's context."""
