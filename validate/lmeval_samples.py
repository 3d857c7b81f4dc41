"""Read lm-eval 0.4.13 ``--log_samples`` output into per-item outcome tables.

lm-eval writes ``<output_path>/<model>/samples_<task>_<timestamp>.jsonl`` with one line
per (document, filter) (docs/evaluation.md §2.7): ``doc_id``, ``filter``, ``metrics`` (names),
each metric's value under its own key, ``resps`` / ``filtered_resps`` and the
``doc_hash`` / ``prompt_hash`` / ``target_hash``. GSM8K therefore has two lines per
document (strict-match and flexible-extract).

Each (task, metric, filter) becomes one ``ItemOutcomes`` keyed ``"<metric>,<filter>"``,
the same key lm-eval's results JSON uses (``exact_match,flexible-extract``), so the
accuracies here can be checked against lm-eval's own. A metric whose value is not a number on
any document (a corpus-level metric's per-document tuple) is not an item outcome and is
left out; one that is a number on some documents and not on others is an error naming
the file, line and field (those documents would otherwise vanish from both runs with
coverage still 100 %). Item ids are doc ids; each row
carries its ``prompt_hash`` so ``pair_outcomes`` can refuse to pair different prompts.

Besides outcomes, the reader records simple per-(task, filter) health facts: the
``[invalid]`` rate of the filtered answer, the empty-response rate and the mean
response length in characters (generation tasks only). ``health_from_runs`` turns two
runs' facts into the gate's ``HealthReport``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from validate.errors import SamplesFileError
from validate.gate.health import HealthReport
from validate.stats.outcomes import ItemOutcomes, PairedOutcomes
from validate.textfile import read_text

SAMPLES_NAME = re.compile(
    r"^samples_(?P<task>.+)_(?P<stamp>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?)\.jsonl$"
)
INVALID_ANSWER = "[invalid]"


@dataclass(frozen=True)
class FilterHealth:
    """Health facts of one (task, filter) of one run; None where not applicable."""

    n_docs: int
    invalid_rate: float | None
    empty_rate: float | None
    mean_length: float | None
    invalid_docs: frozenset[str] | None = None  # doc ids behind the rates, for the
    empty_docs: frozenset[str] | None = None    # gate's paired test (validate.gate.health)


@dataclass(frozen=True, eq=False)
class LmEvalRun:
    """All sample files of one lm-eval run (one variant)."""

    label: str
    path: str
    outcomes: dict[tuple[str, str], ItemOutcomes] = field(default_factory=dict)
    health: dict[tuple[str, str], FilterHealth] = field(default_factory=dict)

    def tables(self) -> dict[tuple[str, str], ItemOutcomes]:
        return dict(self.outcomes)


def task_name_of(path: Path) -> str:
    """The task in ``samples_<task>_<timestamp>.jsonl`` (else the file stem)."""
    match = SAMPLES_NAME.match(path.name)
    return match.group("task") if match else path.stem


def find_sample_files(path: Path) -> dict[str, Path]:
    """One samples file per task from a file or a directory (searched recursively)."""
    if path.is_file():
        return {task_name_of(path): path}
    if not path.is_dir():
        raise SamplesFileError(f"{path}: no such file or directory")
    found: dict[str, list[Path]] = {}
    for file in sorted(path.rglob("samples_*.jsonl")):
        found.setdefault(task_name_of(file), []).append(file)
    if not found:
        raise SamplesFileError(f"{path}: no samples_*.jsonl files (run lm-eval with --log_samples)")
    for task, files in found.items():
        if len(files) > 1:
            names = ", ".join(str(f.relative_to(path)) for f in files)
            raise SamplesFileError(
                f"{path}: {len(files)} sample files for task {task} ({names}); pass one file"
            )
    return {task: files[0] for task, files in found.items()}


def _first_response(line: dict) -> str | None:
    resps = line.get("resps")
    while isinstance(resps, list) and resps:
        resps = resps[0]
    return resps if isinstance(resps, str) else None


def _filtered_answer(line: dict) -> str | None:
    filtered = line.get("filtered_resps")
    if isinstance(filtered, list) and filtered and isinstance(filtered[0], str):
        return filtered[0]
    return filtered if isinstance(filtered, str) else None


def _read_lines(path: Path) -> list[dict]:
    text = read_text(path, SamplesFileError, "lm-eval samples file")
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise SamplesFileError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        if not isinstance(line, dict):
            raise SamplesFileError(f"{path}:{number}: expected a JSON object per line")
        for key in ("doc_id", "metrics"):
            if key not in line:
                raise SamplesFileError(f"{path}:{number}: missing field {key!r}")
        metrics = line["metrics"]
        if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
            raise SamplesFileError(f"{path}:{number}: field 'metrics': expected a list of metric "
                                   f"names, got {json.dumps(metrics)[:60]}")
        if isinstance(line["doc_id"], (dict, list)):
            raise SamplesFileError(f"{path}:{number}: field 'doc_id': expected a number or a "
                                   f"string, got {json.dumps(line['doc_id'])[:60]}")
        lines.append(line)
    if not lines:
        raise SamplesFileError(f"{path}: empty samples file")
    return lines


def _metric_value(line: dict, metric: str, path: Path) -> float | None:
    value = line.get(metric)
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if value is None:
        raise SamplesFileError(f"{path}: doc {line['doc_id']}: metric {metric!r} has no value")
    return None  # non-numeric (a corpus-level tuple): not an item outcome, unless the
    # metric is a number on other documents (``_refuse_partly_numeric``)


def _refuse_partly_numeric(path: Path, rows: dict, non_numeric: dict) -> None:
    """A metric that is a number for some documents and not for others is a damaged
    file, not a corpus-level metric: dropping those documents silently would shrink the
    table on both runs alike and leave coverage at 100 %. Name the first such line."""
    for key, (index, line, metric) in non_numeric.items():
        if key in rows:
            raise SamplesFileError(
                f"{path}:{_line_number(path, index)}: doc {line['doc_id']}: field {metric!r} "
                f"is {line[metric]!r} ({type(line[metric]).__name__}); expected a number, "
                f"as for the other {len(rows[key]['ids'])} documents of {key}")


def _line_number(path: Path, index: int) -> int:
    """1-based line of the ``index``-th JSON line (blank lines are skipped when read)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    filled = [number for number, raw in enumerate(lines, start=1) if raw.strip()]
    return filled[index]


def read_samples_file(path: Path, task: str, label: str) -> tuple[dict, dict]:
    """(outcomes by (task, key), health by (task, filter)) of one samples file."""
    rows: dict[str, dict[str, list]] = {}
    by_filter: dict[str, list[dict]] = {}
    non_numeric: dict[str, tuple[int, dict, str]] = {}  # key -> first (index, line, metric)
    for index, line in enumerate(_read_lines(path)):
        filt = str(line.get("filter", "none"))
        by_filter.setdefault(filt, []).append(line)
        for metric in line["metrics"]:
            value = _metric_value(line, metric, path)
            if value is None:
                non_numeric.setdefault(f"{metric},{filt}", (index, line, metric))
                continue
            table = rows.setdefault(f"{metric},{filt}", {"ids": [], "values": [], "hashes": []})
            table["ids"].append(str(line["doc_id"]))
            table["values"].append(value)
            table["hashes"].append(line.get("prompt_hash"))
    _refuse_partly_numeric(path, rows, non_numeric)
    outcomes = {}
    for key, table in rows.items():
        if len(set(table["ids"])) != len(table["ids"]):
            raise SamplesFileError(f"{path}: duplicate doc_id for {key}")
        outcomes[(task, key)] = ItemOutcomes(
            label=label, task=task, metric=key, item_ids=tuple(table["ids"]),
            repeats=(0,) * len(table["ids"]), values=np.asarray(table["values"]),
            prompt_hashes=tuple(table["hashes"]),
        )
    health = {(task, filt): _filter_health(lines) for filt, lines in by_filter.items()}
    return outcomes, health


def _filter_health(lines: list[dict]) -> FilterHealth:
    responses = [_first_response(line) for line in lines]
    answers = [_filtered_answer(line) for line in lines]
    texts = [r for r in responses if r is not None]
    generated = len(texts) == len(lines)
    n = len(lines)
    invalid = sum(a == INVALID_ANSWER for a in answers) / n if generated else None
    empty = sum(not t.strip() for t in texts) / n if generated else None
    length = float(np.mean([len(t) for t in texts])) if generated else None
    ids = [str(line["doc_id"]) for line in lines]

    def flagged(flags: list[bool]) -> frozenset[str] | None:
        return frozenset(i for i, f in zip(ids, flags, strict=True) if f) if generated else None

    return FilterHealth(n_docs=n, invalid_rate=invalid, empty_rate=empty, mean_length=length,
                        invalid_docs=flagged([a == INVALID_ANSWER for a in answers]),
                        empty_docs=flagged([not (r or "").strip() for r in responses]))


def _discordant(a: frozenset[str] | None, b: frozenset[str] | None,
                common: set[str]) -> tuple[int, int] | None:
    """(flagged in A only, in B only) over the docs both runs answered."""
    if a is None or b is None:
        return None
    return len((a - b) & common), len((b - a) & common)


def read_run(path: str | Path, label: str | None = None, task: str | None = None) -> LmEvalRun:
    """Read a samples file or a directory of them; ``task`` keeps only that task."""
    path = Path(path)
    files = find_sample_files(path)
    if task is not None:
        if task not in files:
            raise SamplesFileError(
                f"{path}: no samples for task {task!r} (found: {', '.join(sorted(files))})"
            )
        files = {task: files[task]}
    label = label or path.name
    outcomes, health = {}, {}
    for name, file in files.items():
        o, h = read_samples_file(file, name, label)
        outcomes.update(o)
        health.update(h)
    return LmEvalRun(label=label, path=str(path), outcomes=outcomes, health=health)


def health_from_runs(
    run_a: LmEvalRun, run_b: LmEvalRun, paired: PairedOutcomes
) -> HealthReport:
    """The gate's health input for one paired (task, metric) of two lm-eval runs."""
    filt = paired.metric.split(",", 1)[1] if "," in paired.metric else "none"
    ha = run_a.health.get((paired.task, filt))
    hb = run_b.health.get((paired.task, filt))
    common = set(paired.item_ids)
    ratio = None
    if ha and hb and ha.mean_length and hb.mean_length is not None:
        ratio = hb.mean_length / ha.mean_length
    return HealthReport(
        coverage=paired.coverage,
        invalid_rate_a=ha.invalid_rate if ha else None,
        invalid_rate_b=hb.invalid_rate if hb else None,
        empty_rate_a=ha.empty_rate if ha else None,
        empty_rate_b=hb.empty_rate if hb else None,
        length_ratio=ratio,
        source=f"lm-eval samples {run_a.path} vs {run_b.path}",
        invalid_discordant=_discordant(ha.invalid_docs, hb.invalid_docs, common)
        if ha and hb else None,
        empty_discordant=_discordant(ha.empty_docs, hb.empty_docs, common)
        if ha and hb else None,
    )


def select_table(run: LmEvalRun, task: str | None, metric: str | None) -> ItemOutcomes:
    """The one (task, metric) table the caller means; an error lists the choices."""
    keys = sorted(run.outcomes)
    if task is not None:
        keys = [k for k in keys if k[0] == task]
    if metric is not None:
        keys = [k for k in keys if k[1] == metric]
    if len(keys) == 1:
        return run.outcomes[keys[0]]
    choices = ", ".join(f"{t}/{m}" for t, m in sorted(run.outcomes))
    if not keys:
        raise SamplesFileError(f"{run.path}: no outcomes for task={task} metric={metric} "
                               f"(available: {choices})")
    raise SamplesFileError(
        f"{run.path}: several outcome tables match; pass --task/--metric (available: {choices})"
    )
