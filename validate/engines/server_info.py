"""What an OpenAI-compatible server says about itself: ``GET /version`` and ``GET
/v1/models``.

Why: a run's record of a server variant has to be the server's own word. The runner's
environment says nothing about the vLLM that served (it usually lives in another venv,
or on another machine), and the flags a launcher passed are not the settings the server
ended up with (a variant's ``--max-model-len`` overrides the common one; a model's
config caps it). vLLM answers ``/version`` with ``{"version": ...}`` and lists each model
with ``owned_by: "vllm"`` and its effective ``max_model_len``; ``v41val serve`` answers
the same routes with ``owned_by: "v41val"``. A route that does not answer is named in
``unanswered``, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx

MODEL_FIELDS = ("id", "owned_by", "root", "parent", "max_model_len")


@dataclass(frozen=True)
class ServerReport:
    version: str | None
    models: tuple[dict, ...]
    unanswered: tuple[str, ...]

    @property
    def owner(self) -> str | None:
        """Who serves, as the server says it (``vllm``, ``v41val``, ...)."""
        owners = {m.get("owned_by") for m in self.models} - {None}
        return owners.pop() if len(owners) == 1 else None

    @property
    def vllm_version(self) -> str | None:
        """The version when the server says it is vLLM, else None."""
        return self.version if self.owner == "vllm" else None

    def to_dict(self) -> dict:
        return {"version": self.version, "owned_by": self.owner, "models": list(self.models),
                "unanswered": list(self.unanswered)}


def root_url(base_url: str) -> str:
    """The server's root: ``/version`` sits beside ``/v1``, not under it."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def server_report(base_url: str, *, timeout_s: float = 10.0,
                  api_key: str | None = None) -> ServerReport:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    unanswered: list[str] = []

    def get(url: str):
        try:
            reply = httpx.get(url, timeout=timeout_s, headers=headers, trust_env=False)
            reply.raise_for_status()
            return reply.json()
        except (httpx.HTTPError, ValueError) as exc:
            unanswered.append(f"{url}: {' '.join(str(exc).split()) or type(exc).__name__}")
            return None

    version = get(f"{root_url(base_url)}/version")
    models = get(f"{base_url.rstrip('/')}/models")
    data = models.get("data") if isinstance(models, dict) else None
    return ServerReport(
        version=str(version["version"]) if isinstance(version, dict) and "version" in version
        else None,
        models=tuple({k: m[k] for k in MODEL_FIELDS if k in m}
                     for m in (data if isinstance(data, list) else ()) if isinstance(m, dict)),
        unanswered=tuple(unanswered))


def served_vllm_version(metadata: Mapping) -> str | None:
    """The vLLM that served, from a variant's stored server record: a server the vllm
    engine launched is vLLM (its ``/version``, else its environment's probed version);
    another endpoint counts only when it says so (``owned_by: "vllm"``)."""
    server = metadata.get("server") or {}
    if metadata.get("engine") == "vllm":
        return server.get("version") or metadata.get("vllm_version")
    return server.get("version") if server.get("owned_by") == "vllm" else None
