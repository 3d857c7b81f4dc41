"""The calibration's tables as rows of strings, for the terminal (rich) and Markdown.

Three tables, one row per compared pair:

- summary: planted level, pair, accuracies, observed delta ± paired SE, discordance,
  the gate's verdict on the whole pool;
- detection (FAIL) per n: ``observed | pool | fresh`` -- the share of subsets the gate
  FAILed (health checks included; ``+x inv`` when some came out INVALID instead), the
  pool's exact probability and the fresh-item prediction of a FAIL;
- significantly worse at alpha per n: the same three numbers for the gate's WARN test;
- PASS per n: ``observed | pool | plan``, the share of subsets that PASSed (or WARNed),
  the pool's exact PASS probability, and ``v41val plan``'s exact power at that n for
  the observed delta and discordance (fresh items).
"""

from __future__ import annotations

from validate.calibration.quality import QualityCalibration, QualityRow


def _pts(x: float) -> str:
    return f"{100 * x:+.2f}"


def _rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def headline(result: QualityCalibration) -> str:
    p = result.policy
    return (f"quality calibration: {result.task} ({result.metric}), {result.n_pool} items, "
            f"margin {100 * result.margin:.2f} pts, alpha={p.alpha} one-sided "
            f"({p.correction}, each row gated alone), {result.draws} subsets per n "
            f"(seed {result.seed})")


def summary_table(result: QualityCalibration) -> tuple[list[str], list[list[str]]]:
    head = ["planted", "pair", "acc ref -> cand (%)", "delta ± SE (pts)", "discordance (%)",
            "full pool"]
    rows = []
    for r in result.rows:
        verdict = r.verdict.verdict + (" (health)" if r.health_failures else "")
        rows.append([r.row.label, r.row.pair,
                     f"{100 * r.accuracy_reference:.1f} -> {100 * r.accuracy_candidate:.1f}",
                     f"{_pts(r.delta)} ± {100 * r.se:.2f}", f"{100 * r.discordance:.1f}",
                     verdict])
    return head, rows


def health_notes(result: QualityCalibration) -> list[str]:
    """One line per pair the gate found unhealthy on the whole pool."""
    return [f"{r.row.label} ({r.row.pair}): INVALID on the whole pool: "
            + "; ".join(r.health_failures) for r in result.rows if r.health_failures]


def notes(result: QualityCalibration) -> list[str]:
    return [*health_notes(result), *result.notes, subsampling_line()]


def _fail_cell(r: QualityRow, k: int) -> str:
    cell = r.cells[k]
    if cell.observed is None:
        return f"- | - | {cell.fresh.fail:.2f}"
    text = f"{cell.observed.gate_fail:.2f} | {cell.pool.fail:.2f} | {cell.fresh.fail:.2f}"
    invalid = cell.observed.gate_invalid
    if invalid:
        text += f" (+{invalid:.2f} inv)" if invalid >= 0.005 else " (+<0.01 inv)"
    return text


def _worse_cell(r: QualityRow, k: int) -> str:
    cell = r.cells[k]
    if cell.observed is None:
        return f"- | - | {cell.fresh.worse:.2f}"
    return f"{cell.observed.worse:.2f} | {cell.pool.worse:.2f} | {cell.fresh.worse:.2f}"


def _pass_cell(r: QualityRow, k: int) -> str:
    cell = r.cells[k]
    if cell.observed is None:
        return f"- | - | {_rate(cell.plan.power_exact)}"
    return (f"{cell.observed.gate_pass:.2f} | {cell.pool.passed:.2f} | "
            f"{_rate(cell.plan.power_exact)}")


def per_n_table(result: QualityCalibration, what: str) -> tuple[list[str], list[list[str]]]:
    """``what``: "fail", "worse" or "pass"."""
    cell = {"fail": _fail_cell, "worse": _worse_cell, "pass": _pass_cell}[what]
    head = ["planted", "pair"] + [f"n={n}" for n in result.ns]
    rows = [[r.row.label, r.row.pair] + [cell(r, k) for k in range(len(result.ns))]
            for r in result.rows]
    return head, rows


TITLES = {
    "fail": "detection: gate FAIL rate, observed | pool exact | fresh (plan-style) exact",
    "worse": "significantly worse at alpha: observed | pool exact | fresh exact",
    "pass": "PASS rate: observed | pool exact | `v41val plan` power (exact, fresh items)",
}


def markdown(result: QualityCalibration) -> str:
    """The tables as GitHub Markdown."""
    def table(head, rows) -> list[str]:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        return out

    lines = [headline(result), "", *table(*summary_table(result))]
    for what in ("fail", "worse", "pass"):
        lines += ["", f"**{TITLES[what]}**", "", *table(*per_n_table(result, what))]
    lines += ["", *(f"- {note}" for note in notes(result))]
    return "\n".join(lines) + "\n"


def subsampling_line() -> str:
    from validate.calibration.quality import SUBSAMPLING_NOTE

    return SUBSAMPLING_NOTE
