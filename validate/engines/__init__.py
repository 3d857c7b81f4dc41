"""Engines turn requests into responses plus timings: builtin runtime, OpenAI-compatible
servers (``openai``), vLLM launched per variant. ``base`` holds the protocol."""
