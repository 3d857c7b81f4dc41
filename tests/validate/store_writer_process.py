"""A writer process for the store durability tests (run as a script; it has no tests).

usage: store_writer_process.py DB PLAN VARIANT N COMPUTE_LOG [--shared M] [--wait-go]

For each of N planned requests still pending, it appends the key to COMPUTE_LOG (the
"engine call"), commits the response, then prints ``stored <key>`` and flushes, so the
parent knows exactly which responses were committed before it kills the process.
"""

from __future__ import annotations

import sys

from tasks.request import Generation, GenerationParams, Request
from validate.engines.base import Timings
from validate.store import PlannedRequest, ResponseRecord, ResultsStore


def planned_requests(variant: str, n: int, prefix: str = "item") -> list[PlannedRequest]:
    gen = GenerationParams(max_gen_toks=16, until=("\n",))
    return [PlannedRequest(variant, 0, Request(task="toy", item_id=f"{prefix}{i:04d}",
                                               kind="generate", prompt=f"question {i}?", gen=gen))
            for i in range(n)]


def fake_answer(p: PlannedRequest) -> ResponseRecord:
    text = f"answer to {p.request.prompt} under {p.variant}"
    return ResponseRecord(Generation(text, "stop", len(text.split())),
                          Timings(started_at_s=1.0e9, e2e_s=0.5, ttft_s=0.1,
                                  itl_s=(0.1,) * 4, n_prompt_tokens=3,
                                  n_output_tokens=5),
                          engine={"name": "fake", "concurrency": 1})


def main(argv: list[str]) -> int:
    db, plan, variant, n, compute_log = argv[:5]
    shared = int(argv[argv.index("--shared") + 1]) if "--shared" in argv else 0
    store = ResultsStore.open(db)
    run = store.begin_run(plan, plan_name="toy", seeds=(1234,), identity={"git": "test"})
    planned = planned_requests(variant, int(n)) + planned_requests("shared", shared, "s")
    if "--wait-go" in argv:
        print("ready", flush=True)
        sys.stdin.readline()
    todo = store.pending(run, planned)
    inserted_shared = 0
    with open(compute_log, "a", encoding="utf-8") as log:
        for p in todo:
            log.write(f"{p.variant} {p.request.item_id}\n")
            log.flush()
            inserted = store.put_response(run, p, fake_answer(p))
            inserted_shared += int(inserted and p.variant == "shared")
            print(f"stored {p.variant} {p.request.item_id}", flush=True)
    store.finish_run(run)
    print(f"inserted_shared {inserted_shared}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
