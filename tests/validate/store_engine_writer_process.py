"""A plan-runner-like process for the engine+store resume test (a script; no tests).

usage: store_engine_writer_process.py DB BASE_URL N CONCURRENCY

Asks the store which of N requests are pending, sends those to the OpenAI-compatible
server at BASE_URL through the openai engine, and commits each response the moment it
arrives, printing ``stored <item>`` after each commit.
"""

from __future__ import annotations

import sys

from tasks.request import GenerationParams, Request
from validate.engines.base import EngineResult, iterate_blocking
from validate.engines.openai import OpenAIEngine
from validate.engines.openai_config import OpenAIEngineConfig
from validate.store import PlannedRequest, ResponseRecord, ResultsStore

PLAN = "plan-engine-resume"


def main(db: str, base_url: str, n: str, concurrency: str) -> int:
    gen = GenerationParams(max_gen_toks=8)
    planned = [PlannedRequest("v", 0, Request(task="toy", item_id=f"r{i:03d}", kind="generate",
                                              prompt=f"resume prompt {i}", gen=gen))
               for i in range(int(n))]
    store = ResultsStore.open(db)
    run = store.begin_run(PLAN, identity={"git": "test"})
    todo = store.pending(run, planned)
    engine = OpenAIEngine(OpenAIEngineConfig(base_url=base_url, model="fake",
                                             concurrency=int(concurrency), backoff_base_s=0.01))
    for outcome in iterate_blocking(engine, [p.request for p in todo]):
        assert isinstance(outcome, EngineResult), outcome
        p = todo[outcome.index]
        store.put_response(run, p, ResponseRecord(outcome.response, outcome.timings,
                                                  outcome.token_logprobs, outcome.raw,
                                                  outcome.attempts, outcome.engine))
        print(f"stored {p.request.item_id}", flush=True)
    store.finish_run(run)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
