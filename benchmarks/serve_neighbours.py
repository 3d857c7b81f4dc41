"""``v41val serve`` under bad neighbours, measured on loopback (micro model, CPU):

- abandoned: a client reads the first chunk of a 128-token stream and hangs up; the
  wall time of a 1-token request sent right after (before the fix it waited for the
  abandoned stream to be generated to its end);
- big prompt: ``/health`` latency while a 4 MB prompt is parsed and tokenized (the
  prompt is refused for its length after tokenization).

    PYTHONPATH=. python benchmarks/serve_neighbours.py --repeats 3

Prints one JSON document; run it against another checkout with PYTHONPATH pointing there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

import httpx

from validate.engines.builtin_serve import BackgroundServer, ServeConfig
from validate.engines.builtin_source import ModelSource


def abandoned(server, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        body = {"prompt": "go on and on", "max_tokens": 128, "ignore_eos": True, "stream": True}
        with httpx.Client(timeout=120) as client, \
                client.stream("POST", f"{server.base_url}/completions", json=body) as reply:
            for line in reply.iter_lines():
                if line.startswith("data:"):
                    break  # the client leaves after its first chunk
        start = time.perf_counter()
        httpx.post(f"{server.base_url}/completions", json={"prompt": "next", "max_tokens": 1},
                   timeout=120)
        out.append(time.perf_counter() - start)
    return out


def health_during_big_prompt(server) -> dict:
    big = {"prompt": "word " * 800_000, "max_tokens": 1}  # 4 MB of JSON
    done = threading.Event()
    status = {}

    def post() -> None:
        status["code"] = httpx.post(f"{server.base_url}/completions", json=big,
                                    timeout=300).status_code
        done.set()

    thread = threading.Thread(target=post)
    thread.start()
    latencies = []
    while not done.is_set():
        start = time.perf_counter()
        httpx.get(f"{server.root}/health", timeout=300)
        latencies.append(time.perf_counter() - start)
    thread.join()
    return {"big_prompt_status": status["code"], "health_probes": len(latencies),
            "health_max_s": max(latencies), "health_median_s": statistics.median(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with BackgroundServer(ServeConfig(source=ModelSource.micro(seed=1))) as server:
        httpx.post(f"{server.base_url}/completions", json={"prompt": "warm", "max_tokens": 2},
                   timeout=120)
        doc = {"one_token_after_abandoned_stream_s": abandoned(server, args.repeats),
               **health_during_big_prompt(server)}
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
