"""``v41val serve``: the runtime behind an OpenAI-compatible HTTP API (FastAPI)."""
