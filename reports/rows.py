"""The per-task table every human-facing renderer shows, as plain strings.

Terminal, Markdown and HTML print the same columns with the same numbers; building the
cells once here keeps them identical (a reviewer pasting the Markdown into a PR sees what
the nightly HTML showed)."""

from __future__ import annotations

from reports import fmt, gate_table

SPEEDUP_COLUMN = "p50 speed-up TTFT / TPOT, thru"
COLUMNS = ("variant", "accuracy ± SE", "n", "Δ vs baseline [interval]", "McNemar p", "verdict",
           "fidelity KL / top-1", "TTFT p50", "TPOT p50", SPEEDUP_COLUMN)
QUALITY_COLUMNS = COLUMNS[:7]
SPEED_COLUMNS = ("variant", "TTFT p50", "TPOT p50", SPEEDUP_COLUMN)
INTERVAL_KINDS = {
    "gate": "the gate's one-sided bounds, each at its claim's family-adjusted α (see "
            "'What the gate decided on')",
    "score": "Tango score interval, two-sided 1 − ci_alpha (not gated)",
    "wald": "normal/t interval of the paired SE, two-sided (not gated)",
}
SPEED_LEGEND = ("Quality-pass speed (the task prompts at the run's concurrency): TTFT and "
                "TPOT p50 per variant; speed-ups are ratios of those medians (baseline / "
                "variant, paired bootstrap CI in the JSON) and the throughput ratio is of "
                "aggregate output tok/s (one window per variant). > 1 is faster.")


def comparison_of(task: dict, variant: str) -> dict | None:
    for c in task["comparisons"]:
        if c["variant"] == variant:
            return c
    return None


def _p50(speed: dict | None, key: str) -> str:
    if not speed or not speed.get(key):
        return fmt.DASH
    return fmt.seconds(speed[key].get("p50"))


def _fidelity(f: dict | None) -> str:
    if not f:
        return fmt.DASH
    if f.get("n_nonfinite"):
        kl = f"non-finite at {f['n_nonfinite']}/{f.get('n_tokens')} tokens"
    else:
        kl = fmt.kl(f.get("kl_mean"))
    return f"{kl} / {fmt.fraction(f.get('top1_agreement'))}"


def _speedups(c: dict | None) -> str:
    if c is None:
        return fmt.DASH
    s = c.get("speedups") or {}
    parts = [s.get(k) for k in ("ttft", "tpot", "throughput")]
    if all(p is None for p in parts):
        return fmt.DASH
    text = [fmt.DASH if p is None or p.get("ratio") is None else f"{p['ratio']:.2f}x"
            for p in parts]
    return f"{text[0]} / {text[1]}, {text[2]}"


def interval_legend(task: dict) -> str:
    """What the Δ column's interval is on this task (gated rows and ungated ones differ)."""
    kinds = list(dict.fromkeys((c.get("interval") or {}).get("kind") for c in task["comparisons"]
                               if c.get("interval")))
    if not kinds:
        return ""
    return "Δ interval: " + "; ".join(INTERVAL_KINDS.get(k, k) for k in kinds) + "."


def ci_label(c: dict) -> str:
    alpha = c.get("ci_alpha")
    return f"{round(100 * (1 - alpha))}%" if alpha else ""


def task_rows(task: dict) -> list[dict]:
    """One dict per variant (baseline first): column name -> text, plus 'status'."""
    out = []
    for v in task["variants"]:
        c = None if v["is_baseline"] else comparison_of(task, v["variant"])
        if v["accuracy"] is None:
            acc = fmt.DASH
        else:
            acc = f"{fmt.pts(v['accuracy'])} ± {fmt.pts(v['se'])}"
        status = "baseline" if v["is_baseline"] else (c["status"] if c else "INVALID")
        if c is None or c.get("delta") is None:
            delta = fmt.DASH
        else:
            i = c.get("interval") or {}
            delta = (f"{fmt.pts(c['delta'], signed=True)} "
                     f"{fmt.interval_pts((i.get('low'), i.get('high')) if i else None)}")
        out.append({
            "variant": v["variant"], "accuracy ± SE": acc, "n": str(v["n_items"]),
            "Δ vs baseline [interval]": delta,
            "McNemar p": fmt.pvalue(c.get("mcnemar_p")) if c else fmt.DASH,
            "verdict": status, "fidelity KL / top-1": _fidelity(v.get("fidelity")),
            "TTFT p50": _p50(v.get("speed"), "ttft_s"),
            "TPOT p50": _p50(v.get("speed"), "tpot_s"),
            SPEEDUP_COLUMN: _speedups(c), "status": status,
        })
    return out


def what_changed(doc: dict, variant: str) -> str:
    """'bounded: gsm8k -0.15 pp ± 0.31, p = 0.63, PASS at margin 1.0 (lower bound -0.97
    (α 0.025) > -1.0); TTFT -38 %'.

    One line per optimization: per task its paired delta ± SE in points, McNemar p (or
    the clustered test's one-sided p when repeated), the verdict and margin with the
    gate bound it rests on (and the n to decide when INCONCLUSIVE); then the
    latency change of the first task that measured it (the same engine serves every
    task, so TTFT is a property of the variant)."""
    parts, speed = [], None
    for task in doc["tasks"]:
        c = comparison_of(task, variant)
        if c is None:
            continue
        reasons = invalid_reasons(c)
        if c.get("delta") is None:
            parts.append(f"{task['task']} not compared ({c['status']}"
                         + (f": {reasons}" if reasons else "") + ")")
        else:
            p = c.get("mcnemar_p")
            p_text = f"p = {fmt.pvalue(p)}" if p is not None else "p = " + fmt.DASH
            verdict = c["status"]
            v = c.get("verdict")
            if v:
                verdict += f" at margin {fmt.margin_points(v['margin'])}"
                rested = gate_table.decided_on(c)
                verdict += f" ({rested})" if rested else ""
                if v["verdict"] == "INCONCLUSIVE":
                    verdict += f", n to decide {gate_table.n_to_decide_text(v)}"
            parts.append(f"{task['task']} {fmt.pts(c['delta'], signed=True)} pp ± "
                         f"{fmt.pts(c['se'])}, {p_text}, {verdict}"
                         + (f" ({reasons})" if reasons else ""))
        sp = c.get("speedups") or {}
        if speed is None and (sp.get("ttft") or sp.get("tpot") or sp.get("throughput")):
            bits = []
            if sp.get("ttft"):
                bits.append(f"TTFT {fmt.latency_change(sp['ttft'])}")
            if sp.get("tpot"):
                bits.append(f"TPOT {fmt.latency_change(sp['tpot'])}")
            if sp.get("throughput"):
                bits.append(f"throughput {fmt.throughput_change(sp['throughput'])}")
            speed = ", ".join(bits)
    line = f"{variant}: " + "; ".join(parts)
    return line + (f"; {speed}" if speed else "")


def invalid_reasons(c: dict) -> str:
    """Why a comparison is INVALID (health checks, pairing), or '' when it is not."""
    if c["status"] != "INVALID":
        return ""
    v = c.get("verdict") or {}
    return "; ".join(v.get("reasons") or c.get("health_failures") or [])


def conclusions(doc: dict) -> list[str]:
    """The one sentence per optimization that ``v41val demo`` adds to its document
    (``validate.demo.conclusions``); empty for other runs."""
    return list((doc.get("demo") or {}).get("conclusions") or [])


def candidates(doc: dict) -> list[str]:
    """Non-baseline variants in the order they first appear."""
    seen: list[str] = []
    for task in doc["tasks"]:
        for c in task["comparisons"]:
            if c["variant"] not in seen:
                seen.append(c["variant"])
    return seen


def _flat(config: dict) -> dict[str, str]:
    """A variant config as ``key -> value`` text: options by name, the rest prefixed."""
    out = {}
    for section, value in config.items():
        if section == "options" and isinstance(value, dict):
            out.update({k: _word(v) for k, v in value.items()})
        elif isinstance(value, dict):
            out.update({f"{section}.{k}": _word(v) for k, v in value.items()})
        elif isinstance(value, list):
            out[section] = " ".join(map(str, value))
        else:
            out[section] = _word(value)
    return out


def _word(value) -> str:
    if value is True or value is False:
        return "on" if value else "off"
    return fmt.DASH if value is None else str(value)


def variant_lines(doc: dict) -> list[tuple[str, str]]:
    """What each variant is: the baseline's whole config, each candidate's differences
    from it (the report document's ``variants``)."""
    variants = doc.get("variants") or []
    base = next((v for v in variants if v["is_baseline"]), None)
    base_flat = _flat(base["config"]) if base else {}
    out = []
    for v in variants:
        flat = _flat(v["config"])
        if v["is_baseline"]:
            text = ", ".join(f"{k}={x}" for k, x in flat.items()) or "engine defaults"
            out.append((f"variant {v['variant']}", f"baseline: {text}"))
            continue
        keys = list(dict.fromkeys([*base_flat, *flat]))
        diff = [f"{k}={flat.get(k, fmt.DASH)}" for k in keys if flat.get(k) != base_flat.get(k)]
        out.append((f"variant {v['variant']}", ", ".join(diff) or "same config as the baseline"))
    return out


def engine_line(doc: dict) -> str:
    engine = doc.get("engine") or {}
    settings = {k: v for k, v in (engine.get("identity") or {}).items() if k != "kind"}
    text = " ".join(f"{k}={v}" for k, v in settings.items())
    kind = engine.get("kind") or doc["run"].get("engine") or fmt.DASH
    return f"{kind} {text}".strip()


def identity_lines(doc: dict) -> list[tuple[str, str]]:
    r = doc["run"]
    ident = r.get("identity") or {}
    hw = ", ".join(f"{k} {ident[k]}" for k in ("torch", "vllm", "machine") if ident.get(k))
    p = doc.get("policy")
    policy = (f"alpha {p['alpha']} one-sided, {p['correction']} over "
              f"{p.get('family_size', '?')} hypotheses, mode {p['mode']}"
              if p else "none (ungated)")
    started = r.get("started_at")
    when = fmt.DASH
    if started:
        import time
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    attempts = r.get("run_ids") or []
    resumed = f" (attempts {', '.join(map(str, attempts))})" if len(attempts) > 1 else ""
    seeds = ", ".join(map(str, r.get("seeds") or [])) or fmt.DASH
    return [
        ("plan", f"{r['plan_name']} ({r['plan_hash'][:12]})"),
        ("run", f"{r.get('run_id')}{resumed} started {when}, status "
                f"{r.get('status', fmt.DASH)}, seeds {seeds}"),
        ("git", str(r.get("git") or fmt.DASH)),
        ("engine", f"{engine_line(doc)}; baseline {r['baseline']}"),
        *variant_lines(doc),
        ("environment", hw or fmt.DASH),
        ("policy", policy),
    ]
