"""Errors an engine raises; each message is one line naming the request (task/item).

A 4xx reply or a malformed reply is the caller's or the server's input problem
(ValueError family); retries exhausted against an unreachable or failing server is an
environment problem (OSError family). Both count as user errors for the CLI.
"""

from __future__ import annotations


class EngineError(ValueError):
    """Base of engine errors that mean the request or the reply is wrong."""


class EngineRequestRejected(EngineError):
    """The server answered 4xx: the request is wrong for it; retrying cannot help."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class EngineReplyMalformed(EngineError):
    """The server's reply is not what the OpenAI API promises (bad JSON, missing field)."""


class EngineUnsupported(EngineError):
    """The engine cannot serve this kind of request (e.g. loglikelihood over chat)."""


class EngineUnavailable(OSError):
    """Every attempt failed with a 5xx, a timeout or a connection error."""


class EngineUnanswered(EngineError):
    """Every request of the baseline's pass failed: the endpoint (or the engine's setup)
    answers nothing, so there is nothing to compare a candidate against; the message is
    the first failure, which says what the server did."""
