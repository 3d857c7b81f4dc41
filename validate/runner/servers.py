"""What each variant's server said about itself, kept with the run.

Why: a vLLM variant is a server process whose version and effective settings the runner
cannot see in its own environment (vLLM usually lives in another venv, or behind an
endpoint on another machine). After a variant's quality pass, while its server still
runs, the engine's ``server_metadata()`` (``/version``, ``/v1/models``, and for a
launched vLLM the launch and its log's settings and bounded-replay lines) is stored per
variant and run, and the run identity's ``vllm`` field becomes the version the servers
reported (several distinct ones joined by ", "), not the runner's installed package.
"""

from __future__ import annotations

from validate.engines.server_info import served_vllm_version
from validate.store import ResultsStore, RunInfo


def record_server(store: ResultsStore, run: RunInfo, variant: str, engine) -> None:
    describe = getattr(engine, "server_metadata", None)
    if describe is None:  # the builtin engine: its identity is the runner's own
        return
    metadata = describe()
    store.put_server(run, variant, metadata)
    version = served_vllm_version(metadata)
    if version is None:
        return
    stored = next(r for r in store.runs(run.plan_hash) if r.run_id == run.run_id)
    known = stored.identity.get("vllm")
    versions = set(known.split(", ")) if known else set()
    store.amend_identity(run, {"vllm": ", ".join(sorted(versions | {version}))})
