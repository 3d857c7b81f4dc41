"""A small deterministic OpenAI-compatible server for the runner tests (no tests here).

It plays several "models" selected by the request's ``model`` field, all answering
GSM8K-style prompts from a table of gold answers the test hands it:

    acc<NN>     right ("The answer is <gold>. #### <gold>") on prompts whose hash
                bucket (0..99) < NN, otherwise wrong (the same with gold + 1)
    empty       an empty completion for every prompt
    flaky<NN>   like acc<NN>, but a permanent 400 for prompts in bucket % 4 == 0

Non-streaming /v1/completions only (plans set ``stream = false``). It counts calls per
(model, prompt), so tests can prove what the runner asked for and what it did not.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from validate.engines.loopback import LoopbackServer


def bucket(prompt: str) -> int:
    return int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16) % 100


def answer(model: str, prompt: str, gold: str) -> str | None:
    """The completion text ``model`` gives, or None for a permanent 400."""
    if model == "empty":
        return ""
    m = re.fullmatch(r"(acc|flaky)(\d+)", model)
    if m is None:
        raise ValueError(model)
    if m.group(1) == "flaky" and bucket(prompt) % 4 == 0:
        return None
    said = gold if bucket(prompt) < int(m.group(2)) else str(int(gold.replace(",", "")) + 1)
    return f" The answer is {said}. #### {said}"  # strict-match of every GSM8K variant


@dataclass
class State:
    golds: dict[str, str] = field(default_factory=dict)  # prompt -> gold answer
    calls: dict[tuple[str, str], int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, model: str, prompt: str) -> None:
        with self.lock:
            self.calls[(model, prompt)] = self.calls.get((model, prompt), 0) + 1

    def calls_of(self, model: str) -> int:
        with self.lock:
            return sum(n for (m, _), n in self.calls.items() if m == model)


def build_app(state: State, ready: threading.Event) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(_app):
        ready.set()
        yield

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict:
        return {"ok": True}

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await request.json()
        model, prompt = body["model"], body["prompt"]
        state.count(model, prompt)
        text = answer(model, prompt, state.golds.get(prompt, "0"))
        if text is None:
            return JSONResponse({"error": {"message": "this prompt is refused"}}, 400)
        n_out = len(text.split())
        finish = "length" if n_out >= int(body.get("max_tokens", 16)) else "stop"
        return JSONResponse({
            "id": "cmpl-1", "object": "text_completion", "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
            "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": n_out,
                      "total_tokens": len(prompt.split()) + n_out}})

    return app


class RunnerServer(LoopbackServer):
    """The app on 127.0.0.1:<ephemeral> in a daemon thread until ``stop``; ``state``
    is what the app saw and does."""

    def __init__(self) -> None:
        self.state = State()
        self.ready = threading.Event()
        super().__init__(build_app(self.state, self.ready), name="runner server")


def load_golds(state: State, task_names, limit: int) -> None:
    """Tell the server the gold answer of every prompt the plan will send."""
    import tasks

    for name in task_names:
        task = tasks.get(name)
        for item in task.items()[:limit]:
            state.golds[task.render(item).prompt] = item.target.split("#### ")[-1].strip()


def plan_text(base_url: str, variants: dict[str, str], baseline: str, task_names, limit: int,
              policy: str = "", concurrency: int = 4) -> str:
    """A plan TOML for this server: one variant per model name."""
    lines = [f'name = "runner-test"\nbaseline = "{baseline}"\nconcurrency = {concurrency}\n',
             f'[engine]\nkind = "openai"\nbase_url = "{base_url}"\nmodel = "{baseline}"\n'
             'stream = false\nmax_attempts = 2\nbackoff_base_s = 0.01\n']
    for name, model in variants.items():
        lines.append(f'[variants.{name}]\nmodel = "{model}"\n')
    for task in task_names:
        lines.append(f'[[tasks]]\nname = "{task}"\nlimit = {limit}\n')
    return "\n".join(lines) + policy
