"""The demo's lead-in, printed before the full report: what ran and why, and, when the
model is at the floor of a task, a plain statement of it with the fidelity metrics
first (accuracy cannot show a degradation at the floor; KL and top-1 can).

Built from the report JSON document (``reports.document``), so the numbers are the
report's own.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from validate.demo.plan import DEMO_MODEL


def _model_line() -> str:
    from runtime.checkpoint import read_config
    from runtime.testbed import testbed_dir, testbed_manifest

    m, c = testbed_manifest(), read_config(testbed_dir())
    trained = (f"{m['steps']} of {m['recipe_steps']} training steps"
               + ("" if m.get("complete") else ", training incomplete: see training/RUNS.md"))
    ratios = "/".join(str(r) for r in c.compress_ratios)
    return (f"model: the trained V4.1 '{DEMO_MODEL}' (runtime/testbed: {c.num_hidden_layers} "
            f"layers, ratios {ratios}, KV sources, re-indexing, Engram, mHC, MoE, hidden "
            f"{c.hidden_size}, {c.sliding_window}-token window; {trained}; "
            f"recipe {m['recipe_digest'][:12]}) -- shipped, no download")


def budget_lines(demo: dict) -> list[str]:
    """What the embedded plan runs and why it is this small (the 3-minute CPU budget)."""
    plan = demo["plan"]
    task_bits = []
    for t in plan["tasks"]:
        n = t.get("limit") or len(t.get("items") or ())
        task_bits.append(f"{t['task'] if 'task' in t else t['name']}: first {n} items")
    fused = demo["fused"]
    lines = [
        _model_line(),
        "tasks: " + "; ".join(task_bits) + " (far-back lookup, local arithmetic, both; "
        "prompts of 7-30 windows behind a shared two-shot prefix)",
        "why so small: the demo is budgeted for 3 minutes on a 2-core CPU (the runtime takes "
        "about 1 ms of one core per prompt token at this size, per variant, twice in warm "
        "mode); scale with --items",
        f"variants: {', '.join(demo['variants'])} (baseline: reference = exact SWA, "
        f"reference kernels); warm prefix cache so encoder replay engages; "
        f"{plan['concurrency']} requests batched; fidelity teacher-forced on "
        f"{plan['fidelity']['prompts']} prompts x {plan['fidelity']['tokens']} tokens per task",
    ]
    speed = plan.get("speed") or {}
    if speed.get("rounds"):
        lines.append(f"speed: {speed['rounds']} interleaved rounds, each serving "
                     f"{speed['requests_per_level']} cold {speed['prompt_tokens']}-token prompts "
                     f"per variant in alternating order (speed-ups with intervals over rounds; "
                     f"the quality pass's warm figures are one window per variant)")
    if fused["skipped"]:
        lines.append(f"fused kernels: {', '.join(fused['skipped'])} {fused['reason']}; "
                     f"not run (they would fall back to the reference)")
    return lines


def _num(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def fidelity_table(doc: dict) -> Table:
    """KL(base || variant), top-1 agreement and first divergence per variant and task."""
    table = Table(title="Fidelity vs the baseline (teacher-forced, exact full vocabulary)",
                  title_justify="left")
    for col in ("task", "variant", "tokens", "KL mean ± SE", "KL p99", "top-1 agree",
                "first divergence", "diverged"):
        table.add_column(col, justify="left" if col in ("task", "variant") else "right")
    for task in doc["tasks"]:
        for v in task["variants"]:
            f = v.get("fidelity")
            if v["is_baseline"] or f is None:
                continue
            table.add_row(task["task"], v["variant"], str(f["n_tokens"]),
                          (f"non-finite at {f['n_nonfinite']}" if f.get("n_nonfinite") else
                           f"{_num(f['kl_mean'], '.2e')} ± {_num(f['kl_se'], '.1e')}"),
                          _num(f["kl_p99"], ".2e"),
                          f"{_num(f['top1_agreement'], '.3f')} ± {_num(f['top1_se'], '.3f')}",
                          _num(f["first_divergence_median"], ".0f"),
                          f"{f['n_diverged']}/{f['n_prompts']}")
    return table


def chance_relation(accuracy: float | None, chance: float | None) -> str:
    """Where the baseline sits against chance (25 % for four-choice GPQA, 0 for free
    answers): "at or below" only when it is."""
    if accuracy is None or chance is None:
        return "near chance"
    if accuracy <= chance + 1e-12:
        return f"at or below chance ({100 * chance:.0f} %)"
    return (f"{100 * (accuracy - chance):.1f} points above chance ({100 * chance:.0f} %), "
            f"too close to it")


def floor_lines(doc: dict) -> list[str]:
    """One plain sentence per task where the baseline sits at the accuracy floor."""
    out = []
    for task in doc["tasks"]:
        if not task.get("floor"):
            continue
        base = next((v for v in task["variants"] if v["is_baseline"]), None)
        mean = None if base is None else base["accuracy"]
        acc = "n/a" if mean is None else f"{100 * mean:.1f} %"
        out.append(f"The model is at the floor of {task['task']}: the baseline scores {acc}, "
                   f"{chance_relation(mean, task.get('chance'))}, so accuracy cannot show "
                   f"what an optimization costs here. Read the fidelity metrics first.")
    return out


def lead_renderables(doc: dict) -> list:
    """Renderables for the terminal, ahead of ``reports.terminal``'s full report."""
    demo = doc["demo"]
    out: list = [Text("v41val demo", style="bold")]
    out += [Text("  " + line) for line in budget_lines(demo)]
    floors = floor_lines(doc)
    for line in floors:
        out.append(Text(line, style="bold yellow"))
    if floors or any(v.get("fidelity") for t in doc["tasks"] for v in t["variants"]):
        out.append(fidelity_table(doc))
    out.append(Text(f"demo run time (after start-up): {demo['wall_s']:.1f} s "
                    f"({demo['threads'] or 'default'} torch thread(s), device {demo['device']})",
                    style="dim"))
    return out


def closing_line(doc: dict) -> str:
    """The demo shows the gate's decision but does not exit with it."""
    return (f"The demo exits 0 whatever the decision ({doc['decision']}): it shows what a gate "
            f"would say; v41val run and v41val gate exit with the decision.")
