"""Read a plan TOML file strictly: every unknown key, wrong type, unknown task, unknown
variant is a one-line ``PlanError`` naming the file and the field (a typo must never
turn into a default).

Example (``docs``-level reference: the runner's README section shows more)::

    name = "bounded-replay-ab"
    baseline = "exact"
    seed = 1234
    concurrency = 4
    warm = true                    # prime every prompt first so encoder replay engages
    aa = true                      # optional: run the baseline twice (the A/A noise floor)

    [engine]
    kind = "builtin"               # builtin | openai | vllm
    preset = "tiny"                # or checkpoint = "path/to/dir"
    device = "cpu"
    dtype = "float32"

    [variants.exact]
    swa = "exact"
    [variants.bounded]
    swa = "bounded"

    [[tasks]]
    name = "gsm8k"
    limit = 100                    # or items = ["gsm8k-test-0001", ...]
    repeats = 1
    max_gen_toks = 256

    [policy]                       # or policy = "gate.toml" (relative to this file)
    gate = { alpha = 0.05, correction = "holm" }
    tasks.gsm8k = { margin = 2.0, metric = "exact_match,flexible-extract" }

    [speed]                        # optional: the headline concurrency sweep (plan/speed.py)
    sweep_levels = [1, 2, 4, 8]
    target_tokens_per_s = 150.0
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from validate.errors import PlanError, PolicyError
from validate.gate.policy import parse_policy
from validate.plan.schema import (
    AA_SUFFIX,
    ENGINE_KINDS,
    EngineSpec,
    Plan,
    TaskSpec,
    VariantSpec,
)
from validate.plan.speed import parse_speed
from validate.tomlfile import read_toml

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
TOP_KEYS = {"name", "description", "baseline", "seed", "concurrency", "warm", "engine",
            "variants", "tasks", "policy", "fidelity_prompts", "fidelity_tokens", "speed",
            "aa"}
CLIENT_KEYS = {"stream": bool, "timeout_s": float, "connect_timeout_s": float,
               "max_attempts": int, "backoff_base_s": float, "backoff_max_s": float,
               "top_logprobs": int, "reports_cached_tokens": bool, "metrics_url": str}
ENGINE_KEYS: dict[str, dict[str, type]] = {
    "builtin": {"preset": str, "checkpoint": str, "device": str, "dtype": str, "seed": int,
                "overrides": dict, "max_batch_requests": int, "prefill_chunk_tokens": int,
                "prefix_cache_entries": int, "prefix_block_tokens": int},
    "openai": {"base_url": str, "model": str, **CLIENT_KEYS},
    "vllm": {"model": str, "common_args": list, "python": str, "launcher": str,
             "served_model_name": str, "startup_timeout_s": float, **CLIENT_KEYS},
}
# builtin variants: every RuntimeOptions switch (runtime.options.switches), plus perturb
VARIANT_KEYS: dict[str, dict[str, type]] = {
    "builtin": {"perturb": dict},
    "openai": {"base_url": str, "model": str},
    "vllm": {"args": list, "env": dict},
}
TASK_KEYS = {"name": str, "limit": int, "items": list, "repeats": int, "max_gen_toks": int,
             "temperature": float, "top_p": float}


class _Where:
    """Builds ``<file>: <field>: message`` errors."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, field: str, message: str) -> PlanError:
        return PlanError(f"{self.source}: {field}: {message}" if field
                         else f"{self.source}: {message}")

    def unknown(self, table: dict, allowed, field: str) -> None:
        extra = sorted(set(table) - set(allowed))
        if extra:
            where = f"{field}.{extra[0]}" if field else extra[0]
            raise self.error(where, f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def typed(self, value: Any, kind: type, field: str) -> Any:
        names = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
                 list: "an array", dict: "a table"}
        if isinstance(value, bool) and kind is not bool:
            raise self.error(field, f"expected {names[kind]}, got {value!r}")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise self.error(field, f"expected {names[kind]}, got {value!r}")
        if kind is float and not math.isfinite(value):  # TOML has nan and inf: never meant
            raise self.error(field, f"expected a finite number, got {value!r}")
        return value

    def table(self, value: Any, field: str) -> dict:
        return self.typed(value, dict, field)


def _typed_table(w: _Where, table: dict, spec: dict[str, type], field: str) -> dict:
    w.unknown(table, spec, field)
    return {k: w.typed(v, spec[k], f"{field}.{k}") for k, v in table.items()}


def _strings(w: _Where, value: list, field: str) -> tuple[str, ...]:
    for i, item in enumerate(value):
        w.typed(item, str, f"{field}[{i}]")
    return tuple(value)


def _engine(w: _Where, doc: dict) -> EngineSpec:
    if "engine" not in doc:
        raise w.error("engine", "missing (a table with kind = builtin | openai | vllm)")
    table = dict(w.table(doc["engine"], "engine"))
    kind = table.pop("kind", None)
    if kind not in ENGINE_KINDS:
        raise w.error("engine.kind", f"expected one of {', '.join(ENGINE_KINDS)}, got {kind!r}")
    settings = _typed_table(w, table, ENGINE_KEYS[kind], "engine")
    if kind == "builtin" and ("preset" in settings) == ("checkpoint" in settings):
        raise w.error("engine", "builtin needs exactly one of preset or checkpoint")
    if kind == "openai":
        for key in ("base_url", "model"):
            if key not in settings:
                raise w.error(f"engine.{key}", "missing (openai needs base_url and model)")
    if kind == "vllm":
        if "model" not in settings:
            raise w.error("engine.model", "missing (the model path or id vLLM serves)")
        settings["common_args"] = list(_strings(w, settings.get("common_args", []),
                                                "engine.common_args"))
    for key in ("max_attempts", "top_logprobs"):
        if key in settings and settings[key] < (1 if key == "max_attempts" else 0):
            raise w.error(f"engine.{key}", f"out of range: {settings[key]}")
    return EngineSpec(kind=kind, settings=settings)


def variant_keys(kind: str, options_type: type) -> dict[str, type]:
    """The keys a ``[variants.<name>]`` table of engine ``kind`` may hold, with types."""
    if kind != "builtin":
        return VARIANT_KEYS[kind]
    from runtime.options import switches

    return {**{n: sw.kind for n, sw in switches(options_type).items()}, **VARIANT_KEYS[kind]}


def _variant(w: _Where, name: str, table: Any, kind: str, options_type: type) -> VariantSpec:
    field = f"variants.{name}"
    if not NAME.match(name):
        raise w.error(field, "variant names use letters, digits, '_', '.', '+', '-'")
    table = _typed_table(w, w.table(table, field), variant_keys(kind, options_type), field)
    if kind == "builtin":
        perturb = table.pop("perturb", {})
        for key, value in perturb.items():
            if not isinstance(value, (str, int, float, bool)):
                raise w.error(f"{field}.perturb.{key}", f"expected a scalar, got {value!r}")
        _check_perturbation(w, perturb, field)
        options = _runtime_options(w, table, field, options_type)
        return VariantSpec(name=name, options=options, written=table, perturb=perturb)
    if kind == "vllm":
        env = table.get("env", {})
        for key, value in env.items():
            w.typed(value, str, f"{field}.env.{key}")
        return VariantSpec(name=name, args=_strings(w, table.get("args", []), f"{field}.args"),
                           env=env)
    return VariantSpec(name=name, endpoint=table)


def _check_perturbation(w: _Where, perturb: dict, field: str) -> None:
    """The builtin engine's own parser judges a planted degradation (``validate.perturb``)."""
    if not perturb:
        return
    from validate.errors import ValidateInputError
    from validate.perturb import perturbation_from

    try:
        perturbation_from(perturb)
    except ValidateInputError as exc:
        raise w.error(field, str(exc)) from None


def _runtime_options(w: _Where, options: dict, field: str, options_type: type):
    """Let ``RuntimeOptions`` judge the values; its message names the option."""
    from runtime.errors import ConfigError

    try:
        return options_type(**options)
    except ConfigError as exc:
        raise w.error(field, str(exc)) from None


def _task(w: _Where, index: int, table: Any, known: list[str]) -> TaskSpec:
    field = f"tasks[{index}]"
    table = _typed_table(w, w.table(table, field), TASK_KEYS, field)
    name = table.get("name")
    if name is None:
        raise w.error(f"{field}.name", "missing")
    if name not in known:
        raise w.error(f"{field}.name", f"unknown task {name!r} (known: {', '.join(known)})")
    if "limit" in table and "items" in table:
        raise w.error(field, "give limit or items, not both")
    for key, low in (("limit", 1), ("repeats", 1), ("max_gen_toks", 1)):
        if key in table and table[key] < low:
            raise w.error(f"{field}.{key}", f"expected >= {low}, got {table[key]}")
    if "temperature" in table and table["temperature"] < 0:
        raise w.error(f"{field}.temperature", f"expected >= 0, got {table['temperature']}")
    if "top_p" in table and not 0 < table["top_p"] <= 1:
        raise w.error(f"{field}.top_p", f"expected a number in (0, 1], got {table['top_p']}")
    items = None
    if "items" in table:
        items = _strings(w, table["items"], f"{field}.items")
        if not items or len(set(items)) != len(items):
            raise w.error(f"{field}.items", "expected a non-empty list of distinct item ids")
    return TaskSpec(name=name, limit=table.get("limit"), items=items,
                    repeats=table.get("repeats", 1), max_gen_toks=table.get("max_gen_toks"),
                    temperature=table.get("temperature"), top_p=table.get("top_p"))


def _policy(w: _Where, value: Any, base_dir: Path | None):
    if isinstance(value, str):
        path = Path(value) if base_dir is None else base_dir / value
        try:
            doc = read_toml(path, PolicyError, "policy file")
        except PolicyError as exc:
            raise w.error("policy", str(exc)) from None
        source = str(path)
    else:
        doc, source = w.table(value, "policy"), f"{w.source}: policy"
    try:
        return parse_policy(doc, source), doc
    except PolicyError as exc:
        raise PlanError(str(exc)) from None


def parse_plan(doc: dict, source: str = "<plan>", base_dir: Path | None = None,
               options_type: type | None = None) -> Plan:
    """Validate a parsed TOML document into a ``Plan``. ``options_type``: the
    ``RuntimeOptions`` class (or a subclass with more switches) builtin variants use."""
    import tasks

    if options_type is None:
        from runtime.options import RuntimeOptions as options_type

    w = _Where(source)
    w.unknown(doc, TOP_KEYS, "")
    engine = _engine(w, doc)
    variants_table = w.table(doc.get("variants", {}), "variants")
    if not variants_table:
        raise w.error("variants", "expected at least one [variants.<name>] table")
    variants = tuple(_variant(w, n, t, engine.kind, options_type)
                     for n, t in variants_table.items())
    tasks_list = w.typed(doc.get("tasks", []), list, "tasks")
    if not tasks_list:
        raise w.error("tasks", "expected at least one [[tasks]] entry")
    known = tasks.names()
    task_specs = tuple(_task(w, i, t, known) for i, t in enumerate(tasks_list))
    seen: set[str] = set()
    for i, t in enumerate(task_specs):
        if t.name in seen:
            raise w.error(f"tasks[{i}].name", f"task {t.name!r} is listed twice")
        seen.add(t.name)
    names = [v.name for v in variants]
    if "baseline" not in doc:
        raise w.error("baseline", f"missing (one of the variants: {', '.join(names)})")
    baseline = w.typed(doc["baseline"], str, "baseline")
    if baseline not in names:
        raise w.error("baseline", f"unknown variant {baseline!r} (variants: {', '.join(names)})")
    aa = w.typed(doc.get("aa", False), bool, "aa")
    if aa:
        variants = variants + (_aa_copy(w, variants[names.index(baseline)], names),)
    concurrency = w.typed(doc.get("concurrency", 4), int, "concurrency")
    if concurrency < 1:
        raise w.error("concurrency", f"expected >= 1, got {concurrency}")
    policy, policy_doc = (None, None)
    if "policy" in doc:
        policy, policy_doc = _policy(w, doc["policy"], base_dir)
        for tp in policy.tasks:
            if tp.task not in seen:
                raise w.error(f"policy.tasks.{tp.task}",
                              f"task not in the plan (plan tasks: {', '.join(sorted(seen))})")
    fidelity = {}
    for key, default, low in (("fidelity_prompts", 16, 0), ("fidelity_tokens", 32, 1)):
        fidelity[key] = w.typed(doc.get(key, default), int, key)
        if fidelity[key] < low:
            raise w.error(key, f"expected >= {low}, got {fidelity[key]}")
    name = w.typed(doc.get("name", Path(source).stem), str, "name")
    speed = parse_speed(w, doc["speed"]) if "speed" in doc else None
    if speed is not None and engine.settings.get("stream") is False:
        raise w.error("speed", "the concurrency sweep needs streamed replies (TTFT and per-token "
                               "times); remove engine.stream = false or the [speed] table")
    return Plan(
        name=name, source=source, engine=engine, variants=variants, tasks=task_specs,
        baseline=baseline, seed=w.typed(doc.get("seed", 0), int, "seed"),
        concurrency=concurrency, warm=w.typed(doc.get("warm", False), bool, "warm"),
        policy=policy, policy_doc=policy_doc,
        description=w.typed(doc.get("description", ""), str, "description"), speed=speed,
        aa=aa, **fidelity,
    )


def _aa_copy(w: _Where, base: VariantSpec, names: list[str]) -> VariantSpec:
    """The baseline's A/A twin: its configuration under ``<baseline>+aa``."""
    name = base.name + AA_SUFFIX
    if name in names:
        raise w.error("aa", f"a variant is already named {name!r}, the name of the "
                            f"baseline's A/A copy; rename it or set aa = false")
    return replace(base, name=name, aa_of=base.name)


def load_plan(path: str | Path, options_type: type | None = None) -> Plan:
    """Read and validate a plan file (``PlanError``: exit 2 with one line)."""
    return parse_plan(read_toml(path, PlanError, "plan file"), str(path), Path(path).parent,
                      options_type)
