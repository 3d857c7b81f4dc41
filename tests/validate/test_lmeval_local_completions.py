"""lm-eval 0.4.13's own ``local-completions`` model against ``v41val serve`` (micro model,
real uvicorn on loopback): it finds the server's tokenizer through ``/tokenizer_info`` and
``/tokenize`` (its ``remote`` backend, picked automatically), scores a loglikelihood task
whose numbers equal a float64 recompute from one full forward of the model, and runs
lm-eval's GSM8K offline on the shipped data (``--limit 2``), its generations equal to the
runtime engine's greedy answers to the same token ids."""

from __future__ import annotations

import pytest
import torch

lm_eval = pytest.importorskip("lm_eval")
pytest.importorskip("tenacity")

from lm_eval.tasks import TaskManager  # noqa: E402

from runtime.engine.engine import Engine  # noqa: E402
from runtime.engine.requests import GenerateRequest  # noqa: E402
from runtime.model import SeqChunk, V41Model  # noqa: E402
from runtime.options import RuntimeOptions  # noqa: E402
from validate.engines.builtin_serve import BackgroundServer, ServeConfig  # noqa: E402
from validate.engines.builtin_source import ModelSource, WeightsPool  # noqa: E402
from validate.lmeval_tasks import write_offline_tasks  # noqa: E402

SOURCE = ModelSource.micro(seed=6)
MAX_LENGTH, MAX_GEN = 2048, 16  # lm-eval's API-model default; GSM8K's 256 cut (gen_kwargs)

pytestmark = pytest.mark.slow  # lm-eval's start-up and two 1.8k-token prompts


def _offline(monkeypatch, tmp_path):
    for key, value in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                       "HF_HOME": str(tmp_path / "hf"), "TQDM_DISABLE": "1"}.items():
        monkeypatch.setenv(key, value)


def _tasks(folder) -> TaskManager:
    write_offline_tasks(folder)  # GSM8K beside the toy tasks
    return TaskManager(include_path=str(folder))


def test_local_completions_scores_loglikelihood_and_gsm8k(tmp_path, toy_lmeval_tasks,
                                                          monkeypatch):
    from lm_eval import simple_evaluate

    _offline(monkeypatch, tmp_path)
    pool = WeightsPool()
    received = []  # what the server was asked, to hold lm-eval's answers against
    with BackgroundServer(ServeConfig(source=SOURCE), pool) as server:
        submit = server.scheduler.submit
        monkeypatch.setattr(server.scheduler, "submit",
                            lambda request: (received.append(request), submit(request))[1])
        out = simple_evaluate(
            model="local-completions",
            model_args=f"base_url={server.base_url}/completions,model={server.model_name},"
                       f"num_concurrent=1,max_retries=1",
            tasks=["v41val_toy_mc", "gsm8k"], task_manager=_tasks(toy_lmeval_tasks), limit=2,
            gen_kwargs=f"max_gen_toks={MAX_GEN}", log_samples=True)
    model = V41Model(pool.weights(SOURCE), RuntimeOptions())
    tok = SOURCE.tokenizer()
    assert out["config"]["model"] == "local-completions"

    toy = out["samples"]["v41val_toy_mc"]
    assert len(toy) == 2
    for sample in toy:
        for (context, continuation), ((got, _greedy),) in zip(
                sample["arguments"], sample["resps"], strict=True):
            ctx, cont = tok.encode(context), tok.encode(continuation)
            logits = model.forward([SeqChunk(model.new_state(),
                                             torch.tensor(ctx + cont), "all")])[0].logits
            logp = torch.log_softmax(logits.double(), -1)
            want = sum(float(logp[len(ctx) - 1 + i, t]) for i, t in enumerate(cont))
            assert got == pytest.approx(want, abs=1e-3)
    assert out["results"]["v41val_toy_mc"]["acc,none"] in (0.0, 0.5, 1.0)

    engine = Engine(model, tok)
    gsm = out["samples"]["gsm8k"]
    assert {s["doc_id"] for s in gsm} == {0, 1}  # one sample per document and filter
    assert "exact_match,strict-match" in out["results"]["gsm8k"]
    generated = [r for r in received if r.max_tokens == MAX_GEN]
    assert len(generated) == 2
    for sample in gsm:
        ((context, gen_kwargs),) = sample["arguments"]
        full = tok.encode(context)  # lm-eval tokenized it through /tokenize, then cut its head
        (asked,) = [r for r in generated if full[-len(r.prompt_ids):] == list(r.prompt_ids)]
        assert len(asked.prompt_ids) >= MAX_LENGTH - MAX_GEN - 1
        assert set(asked.stop) == set(gen_kwargs["until"]) | {"<|eos|>"}  # + lm-eval's EOS
        want = engine.generate_one(GenerateRequest(prompt_ids=asked.prompt_ids,
                                                   max_tokens=MAX_GEN, stop=asked.stop))
        assert sample["resps"] == [[want.text]]
