"""An lm-eval 0.4.13 model named ``v41val``: lm-eval users drive our runtime with their
own tasks (``--model v41val --model_args preset=tiny,swa=bounded``).

Registration: importing this module registers the class in lm-eval's model registry
(``@register_model``). lm-eval 0.4.13 discovers models only through its own
``MODEL_MAPPING`` and imports -- it reads no entry points -- so the plain ``lm_eval``
command does not know ``v41val`` until this module is imported. Two ways:

- ``python -m validate.lmeval_model --model v41val --model_args preset=tiny ...`` (the
  same arguments as ``lm_eval``; this module registers itself, then runs lm-eval's
  CLI), or the console script ``v41val-lm-eval`` when the package declares it;
- from Python: ``import validate.lmeval_model`` before ``lm_eval.simple_evaluate``.

Model args: ``preset`` (micro | tiny | mid | flash | testbed) and ``seed``, or ``checkpoint``;
``pretrained`` as Hugging Face models spell it (a checkpoint folder, or a preset name; it
also names lm-eval's output folder, which otherwise gets a random name);
every ``RuntimeOptions`` switch by its field name (``swa``, ``encoder_replay``,
``decoder_trim``, ``cut``, ``kernels``, ``batch_invariant``, ``replay_tokens``, read by
``RuntimeOptions.from_text``; lm-eval splits model_args on commas, so write several
kernel entries with ``|``: ``kernels=+gate|-mhc``); ``device``, ``dtype``;
``batch_size`` (requests decoded together); ``threads`` (torch CPU threads: lm-eval runs
the model in its main thread, where torch's default of one thread per core
oversubscribes a shared machine; 1 to 4 per core, as ``v41val demo --threads``:
``validate.threads``); ``warmup`` (true: prefill every prompt once before
the scored pass, so the prefix cache holds the shared few-shot prefixes and bounded
replay engages, as on a warm server; it costs a second prefill). A subclass sets
``options_type`` to a ``RuntimeOptions`` subclass to take its switches too.

Engagement: lm-eval sends each prompt once, so without ``warmup`` only prompts that
share a prefix with an earlier one in the same batch can hit the prefix cache. After
each request type the model says on stderr how many prompts hit the cache (and so were
replayed, when encoder replay is on), and says plainly when a bounded-replay
configuration never engaged.

Offline: ``main`` adds lm-eval's own GSM8K tasks pointed at the shipped data
(``validate.lmeval_tasks``) as an ``--include_path`` unless one is given; from Python,
``simple_evaluate(..., task_manager=offline_task_manager(dir))``.

Scoring matches the builtin engine exactly: lm-eval's ``TemplateLM`` splits each
(context, continuation) as it does for every causal model, and the continuation's
logprob is the sum of the runtime's prompt logprobs over its tokens (greedy when every
one is the argmax). ``generate_until`` honours ``until``, ``max_gen_toks``,
``do_sample``/``temperature``/``top_p`` and ``seed``.
"""

from __future__ import annotations

import sys
from typing import Any

import lm_eval.models  # noqa: F401  (lm-eval's own models first: see below)
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model

from runtime.engine.requests import GenerateRequest
from runtime.options import RuntimeOptions, switches
from runtime.scheduling import EngineConfig
from runtime.server.chat_template import render_chat
from validate.engines.builtin_source import ModelSource, WeightsPool
from validate.errors import ValidateInputError
from validate.threads import check_threads

DEFAULT_MAX_GEN_TOKS = 256


def _device(requested: str | None) -> str:
    """lm-eval's CLI asks for ``cuda:0`` by default; like its HF model, fall back to the
    CPU (saying so on stderr) when no CUDA device exists."""
    import torch

    if requested is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if str(requested).startswith("cuda") and not torch.cuda.is_available():
        sys.stderr.write(f"v41val: device {requested} is not available; using cpu\n")
        return "cpu"
    return str(requested)


# lm-eval 0.4.13 registers its own models (local-completions, hf, ...) lazily, and only
# when its registry is still empty at the first lookup; registering "v41val" before that
# would hide them all ("Supported model names: v41val"), so lm_eval.models is imported
# above, first.
@register_model("v41val")
class V41ValLM(TemplateLM):
    """lm-eval's view of the builtin runtime (see the module doc)."""

    options_type: type = RuntimeOptions

    def __init__(self, preset: str | None = None, seed: int = 0, checkpoint: str | None = None,
                 device: str | None = None, dtype: str | None = None,
                 batch_size: int | str | None = 8, max_batch_size: int | None = None,
                 pool: WeightsPool | None = None, pretrained: str | None = None,
                 threads: int | None = None, warmup: bool | str = False,
                 **settings: Any) -> None:
        super().__init__()
        if pretrained is not None:
            if preset is not None or checkpoint is not None:
                raise ValidateInputError("v41val model_args: give pretrained, or preset/checkpoint, not both")
            from pathlib import Path

            if Path(str(pretrained)).is_dir():
                checkpoint = str(pretrained)
            else:
                preset = str(pretrained)
        self.warmup = _flag("warmup", warmup)
        _set_threads(threads)
        known = switches(self.options_type)
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise ValidateInputError(f"v41val model_args: unknown argument(s) {unknown}")
        from runtime.build import build_model
        from runtime.errors import ConfigError
        from runtime.server.observed import ObservedEngine

        if preset is None and checkpoint is None:
            preset = "tiny"
        self.source = ModelSource(preset=preset if checkpoint is None else None, seed=int(seed),
                                  checkpoint=checkpoint, dtype=dtype, device=_device(device))
        try:
            self.options = self.options_type.from_text(settings)
        except ConfigError as exc:
            raise ValidateInputError(f"v41val model_args: {exc}") from None
        batch = 8 if batch_size in (None, "auto") or str(batch_size).startswith("auto") \
            else int(batch_size)
        self.batch = max(1, batch if max_batch_size is None else min(batch, int(max_batch_size)))
        self.pool = pool if pool is not None else WeightsPool()
        weights = self.pool.weights(self.source)
        self.model = build_model(weights, self.options, max_batch=self.batch)
        self.tokenizer = self.source.tokenizer()
        self.runtime = ObservedEngine(self.model, self.tokenizer,
                                      EngineConfig(max_batch_requests=self.batch))
        # ^ runtime.scheduling's defaults otherwise (the prefix cache of run and serve)

    # ------------------------------------------------------------------ tokens
    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_id

    @property
    def prefix_token_id(self) -> int:
        return self.tokenizer.bos_id

    @property
    def max_length(self) -> int:
        return self.model.config.max_position_embeddings

    @property
    def tokenizer_name(self) -> str:
        return "v41val-byte-bpe"

    def tok_encode(self, string: str, add_special_tokens: bool | None = None,
                   **kwargs) -> list[int]:
        return list(self.tokenizer.encode(string))

    def tok_decode(self, tokens, **kwargs) -> str:
        return self.tokenizer.decode(tokens)

    def apply_chat_template(self, chat_history: list[dict], add_generation_prompt: bool = True
                            ) -> str:
        return render_chat((m["role"], m["content"]) for m in chat_history)

    def chat_template(self, chat_template: bool | str = False) -> str:
        return "v41val: '<Role>: <content>\\n\\n' per message, then 'Assistant:'"

    # ------------------------------------------------------------------ engagement
    def _generate(self, requests: list[GenerateRequest], kind: str) -> list:
        """Run ``requests`` (after a prefill-only pass over the same prompts when
        ``warmup``), then say on stderr how many prompts hit the prefix cache."""
        if self.warmup:
            self.runtime.generate([GenerateRequest(prompt_ids=r.prompt_ids, max_tokens=0)
                                   for r in requests])
        results = self.runtime.generate(requests)
        sys.stderr.write(engagement_line(kind, results, self.options, self.warmup) + "\n")
        return results

    # ------------------------------------------------------------------ scoring
    def _score(self, token_lists: list[list[int]], n_context: list[int]
               ) -> list[tuple[float, bool]]:
        """Sum of prompt logprobs after ``n_context`` tokens, and all-argmax."""
        requests = [GenerateRequest(prompt_ids=tuple(ids), max_tokens=0, prompt_logprobs=1)
                    for ids in token_lists]
        out = []
        for result, n_ctx in zip(self._generate(requests, "loglikelihood"), n_context, strict=True):
            entries = result.prompt_logprobs[n_ctx:]
            out.append((float(sum(float(e.logprob) for e in entries)),
                        all(e.is_greedy for e in entries)))
        return out

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs
                              ) -> list[tuple[float, bool]]:
        lists = [list(ctx) + list(cont) for _, ctx, cont in requests]
        for (key, _, _), ids in zip(requests, lists, strict=True):
            if len(ids) > self.max_length:
                raise ValidateInputError(f"v41val: request {key!r} has {len(ids)} tokens, over "
                                         f"the context of {self.max_length}")
        results = self._score(lists, [len(ctx) for _, ctx, _ in requests])
        for (key, _, _), result in zip(requests, results, strict=True):
            self.cache_hook.add_partial("loglikelihood", key, result)
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """log P(text) from a BOS start, the whole text in one window (the runtime's
        context is long enough for every text lm-eval's rolling tasks use)."""
        lists = [[self.prefix_token_id, *self.tok_encode(req.args[0])] for req in requests]
        return [ll for ll, _ in self._score(lists, [1] * len(lists))]

    # ------------------------------------------------------------------ generation
    def _generate_request(self, context: str, gen_kwargs: dict) -> GenerateRequest:
        kwargs = dict(gen_kwargs)
        until = kwargs.pop("until", None) or []
        until = [until] if isinstance(until, str) else list(until)
        max_gen = int(kwargs.pop("max_gen_toks", DEFAULT_MAX_GEN_TOKS))
        do_sample = bool(kwargs.pop("do_sample", False))
        temperature = float(kwargs.pop("temperature", 0.0))
        top_p = float(kwargs.pop("top_p", 1.0))
        seed = kwargs.pop("seed", None)
        sampled = do_sample and temperature > 0
        return GenerateRequest(prompt_ids=tuple(self.tok_encode(context)), max_tokens=max_gen,
                               stop=tuple(s for s in until if s),
                               temperature=temperature if sampled else 0.0,
                               top_p=top_p if sampled else 1.0,
                               seed=None if seed is None else int(seed))

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        prepared = [self._generate_request(req.args[0], req.args[1]) for req in requests]
        texts = [r.text or "" for r in self._generate(prepared, "generate_until")]
        for req, text in zip(requests, texts, strict=True):
            self.cache_hook.add_partial("generate_until", req.args, text)
        return texts


def _flag(name: str, value: bool | str) -> bool:
    """A boolean model arg: lm-eval passes ``true``/``false`` as bools, or as strings."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValidateInputError(f"v41val model_args: {name}: expected true or false, got {value!r}")


def _set_threads(threads: int | str | None) -> None:
    if threads is None:
        return
    count = check_threads(threads, "v41val model_args: threads")  # the demo's check and cap
    import torch

    torch.set_num_threads(count)


def engagement_line(kind: str, results: list, options: RuntimeOptions, warmup: bool) -> str:
    """One line: prompts, how many hit the prefix cache and with how many tokens, and on
    how many bounded replay ran, from each result's engagement record (what the runtime
    did, the same record the results store's ledger keeps)."""
    ledger = [r.engagement for r in results]
    hit = sum(1 for e in ledger if e.hit_tokens > 0)
    line = (f"v41val: {kind}: {len(results)} prompts, {hit} hit the prefix cache "
            f"({sum(e.hit_tokens for e in ledger)} tokens)")
    if getattr(options, "encoder_replay", False):
        replayed = sum(1 for e in ledger if e.replayed_tokens > 0)
        if replayed:
            line += f"; encoder replay engaged on {replayed}"
        else:
            line += ("; encoder replay requested but never engaged (no prefix-cache hit"
                     + ("" if warmup else "; lm-eval sends each prompt once: model_args "
                        "warmup=true primes the cache") + ")")
    return line


def _with_offline_tasks(argv: list[str], tasks_dir: str) -> list[str]:
    """``argv`` plus ``--include_path tasks_dir`` for ``run`` (or the legacy form without
    a subcommand), unless the user gave an include path or asked for something else."""
    if any(a == "--include_path" or a.startswith("--include_path=") for a in argv):
        return argv
    if argv and argv[0] in ("ls", "validate"):
        return argv
    return [*argv, "--include_path", tasks_dir]


def _named_output(argv: list[str]) -> list[str]:
    """Give lm-eval's output folder a name: lm-eval names it after the model_args
    ``pretrained=``/``model=``/``path=`` value, else a random id; a ``preset=`` or
    ``checkpoint=`` argument is repeated as ``pretrained=`` for that."""
    out = list(argv)
    for i, arg in enumerate(out):
        key, sep, value = arg.partition("=")
        if key == "--model_args" and sep:
            out[i] = f"--model_args={_add_pretrained(value)}"
        elif arg == "--model_args" and i + 1 < len(out):
            out[i + 1] = _add_pretrained(out[i + 1])
    return out


def _add_pretrained(model_args: str) -> str:
    pairs = [p.partition("=") for p in model_args.split(",") if p]
    keys = {k for k, _, _ in pairs}
    if keys & {"pretrained", "model", "path"}:
        return model_args
    for k, _, v in pairs:
        if k in ("checkpoint", "preset"):
            # lm-eval reads the first "pretrained=" in the string: put it first
            rest = [f"{key}={val}" for key, _, val in pairs if key != k]
            return ",".join([f"pretrained={v}", *rest])
    return model_args


def main(argv: list[str] | None = None) -> None:
    """``lm_eval``'s command line with the ``v41val`` model registered, lm-eval's GSM8K
    tasks reading the shipped data, and a named output folder."""
    import tempfile

    from lm_eval.__main__ import cli_evaluate

    from validate.lmeval_tasks import write_offline_tasks

    args = list(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="v41val-lmeval-tasks-") as tmp:
        write_offline_tasks(tmp)
        sys.argv = [sys.argv[0], *_named_output(_with_offline_tasks(args, tmp))]
        cli_evaluate()


if __name__ == "__main__":
    main()
