"""Import lm-eval ``--log_samples`` runs into the results store, one variant per run.

Then they compare, gate and report like any run of a plan: ``analyze_run`` and
``v41val compare --store`` read them from the store. Each document becomes one stored
request (its prompt is lm-eval's own first argument, so its sha256 is lm-eval's
``prompt_hash`` and pairing refuses different prompts as ``compare`` on the files does)
and one stored response (the raw ``resps``); lm-eval's per-filter metric values are
stored as the scores, keyed like its results JSON (``exact_match,flexible-extract``), so
the numbers are lm-eval's own, not a rescoring. Item ids are lm-eval doc ids.

The import is a plan like any other: its hash is the sha256 over the variant names and
the imported files' bytes, so importing the same files again adds nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tasks.request import Generation, GenerationParams, Loglikelihoods, Request
from validate.errors import SamplesFileError
from validate.lmeval_samples import INVALID_ANSWER, _read_lines, find_sample_files
from validate.store import PlannedRequest, ResponseRecord, ResultsStore, ScoreRecord
from validate.userpaths import ensure_directory

LMEVAL_DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's generate_until default when a task sets none
SCORER = "lm-eval --log_samples import"


@dataclass(frozen=True)
class ImportedRun:
    plan_hash: str
    run_id: int
    variants: tuple[str, ...]
    tasks: tuple[str, ...]
    documents: int


def _text_is_shareable(task: str) -> bool:
    """lm-eval task names are free-form; any GPQA task keeps its text out of the store
    (the GPQA authors ask that questions never appear in plain text)."""
    return "gpqa" not in task.lower()


def _arguments(line: dict, where: str) -> list[tuple]:
    args = line.get("arguments")
    if isinstance(args, dict):  # lm-eval >= 0.4.3: {"gen_args_0": {"arg_0": .., "arg_1": ..}}
        out = []
        for key in sorted(args, key=lambda k: int(k.rsplit("_", 1)[-1])):
            entry = args[key]
            out.append(tuple(entry[f"arg_{i}"] for i in range(len(entry))))
        return out
    if isinstance(args, list):
        return [tuple(a) for a in args]
    raise SamplesFileError(f"{where}: no 'arguments' (the prompt) in the samples line; "
                           f"re-run lm-eval with --log_samples")


def _request(task: str, line: dict, where: str) -> Request:
    """The stored request of a samples line; a malformed ``arguments`` is a
    ``SamplesFileError`` naming the file and the document, never a bare KeyError."""
    try:
        return _parse_request(task, line, where)
    except SamplesFileError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise SamplesFileError(f"{where}: doc {line['doc_id']}: field 'arguments': expected "
                               f"lm-eval's request arguments (prompt, generation settings or "
                               f"continuation), could not read them ({type(exc).__name__}: "
                               f"{exc})") from None


def _parse_request(task: str, line: dict, where: str) -> Request:
    args = _arguments(line, where)
    item_id = str(line["doc_id"])
    if args and len(args[0]) >= 2 and isinstance(args[0][1], dict):
        gen = args[0][1]
        params = GenerationParams(
            max_gen_toks=int(gen.get("max_gen_toks", LMEVAL_DEFAULT_MAX_GEN_TOKS)),
            until=tuple(gen.get("until") or ()), do_sample=bool(gen.get("do_sample", False)),
            temperature=float(gen.get("temperature", 0.0)))
        return Request(task=task, item_id=item_id, kind="generate", prompt=str(args[0][0]),
                       gen=params)
    if args and all(len(a) >= 2 and isinstance(a[1], str) for a in args):
        return Request(task=task, item_id=item_id, kind="loglikelihood", prompt=str(args[0][0]),
                       continuations=tuple(str(a[1]) for a in args))
    raise SamplesFileError(f"{where}: doc {item_id}: arguments are neither a generation nor "
                           f"loglikelihood request")


def _lm_eval_bool(value) -> bool:
    """lm-eval's sample logs write loglikelihood's is-greedy flag as the string 'True' or
    'False' (it stringifies the response tuples); ``bool('False')`` would be True."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise TypeError(value)


def _response(request: Request, line: dict, where: str) -> Generation | Loglikelihoods:
    resps = line.get("resps")
    try:
        if request.kind == "generate":
            text = resps[0][0]
            if not isinstance(text, str):
                raise TypeError(text)
            return Generation(text=text)
        values = tuple(float(r[0][0]) for r in resps)
        greedy = tuple(_lm_eval_bool(r[0][1]) for r in resps)
        return Loglikelihoods(values=values, is_greedy=greedy)
    except (TypeError, IndexError, ValueError):
        raise SamplesFileError(f"{where}: doc {line['doc_id']}: cannot read 'resps'") from None


def _scores(line: dict, where: str) -> list[ScoreRecord]:
    filt = str(line.get("filter", "none"))
    filtered = line.get("filtered_resps")
    answer = filtered[0] if isinstance(filtered, list) and filtered else filtered
    answer = answer if isinstance(answer, str) else None
    out = []
    for metric in line["metrics"]:
        value = line.get(metric)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue  # corpus-level metrics are no item outcome
        out.append(ScoreRecord(filter=f"{metric},{filt}", score=float(value), extracted=answer,
                               invalid=answer == INVALID_ANSWER))
    if not out:
        raise SamplesFileError(f"{where}: doc {line['doc_id']}: no numeric metric")
    return out


def _read(path: Path) -> dict[str, Path]:
    return find_sample_files(Path(path))


@dataclass(frozen=True)
class _Prepared:
    """Everything an import writes, read and checked before the store is touched."""

    plan_hash: str
    name: str
    baseline: str
    runs: Mapping[str, str | Path]
    tasks: tuple[str, ...]
    plan_doc: dict
    batches: tuple  # ((planned, record, score records), ...) per (variant, task) file
    documents: int


def _prepare(runs: Mapping[str, str | Path], baseline: str, name: str) -> _Prepared:
    """Read and check every file of the import; any malformed line fails here, before
    anything is written."""
    if baseline not in runs:
        raise SamplesFileError(f"baseline {baseline!r} is not one of the imported runs "
                               f"({', '.join(runs)})")
    files = {v: _read(Path(p)) for v, p in runs.items()}
    digest = hashlib.sha256()
    for variant in sorted(files):
        for task in sorted(files[variant]):
            digest.update(f"{variant}\0{task}\0".encode())
            digest.update(files[variant][task].read_bytes())
    plan_hash = digest.hexdigest()
    tasks = tuple(sorted({t for per in files.values() for t in per}))
    plan_doc = {"name": name, "engine": {"kind": "lm-eval import"}, "baseline": baseline,
                "variants": {v: {"lmeval_samples": str(runs[v])} for v in runs},
                "tasks": [{"name": t} for t in tasks], "plan_hash": plan_hash}
    batches, documents = [], 0
    for variant, per_task in files.items():
        for task, file in sorted(per_task.items()):
            by_doc: dict[str, list[dict]] = {}
            for line in _read_lines(file):
                by_doc.setdefault(str(line["doc_id"]), []).append(line)
            batch = []
            for lines in by_doc.values():
                where = str(file)
                request = _request(task, lines[0], where)
                planned = PlannedRequest(variant=variant, repeat=0, request=request,
                                         store_text=_text_is_shareable(task))
                record = ResponseRecord(response=_response(request, lines[0], where),
                                        engine={"engine": "lm-eval", "samples": str(file)})
                batch.append((planned, record,
                              [s for line in lines for s in _scores(line, where)]))
            batches.append(tuple(batch))
            documents += len(by_doc)
    return _Prepared(plan_hash, name, baseline, dict(runs), tasks, plan_doc, tuple(batches),
                     documents)


def _write(store: ResultsStore, prepared: _Prepared) -> ImportedRun:
    """The whole import in one transaction: all of it is stored, or none."""
    p = prepared
    with store.atomic():
        run = store.begin_run(p.plan_hash, plan_name=p.name, plan=p.plan_doc)
        for variant in p.runs:
            store.put_variant(run, variant, {"lmeval_samples": str(p.runs[variant])},
                              is_baseline=variant == p.baseline)
        for batch in p.batches:
            store.put_responses(run, [(planned, record) for planned, record, _ in batch])
            for planned, _, records in batch:
                store.put_scores(p.plan_hash, planned.key, records, SCORER)
        store.finish_run(run)
    return ImportedRun(p.plan_hash, run.run_id, tuple(p.runs), p.tasks, p.documents)


def import_lmeval(store: ResultsStore, runs: Mapping[str, str | Path], baseline: str,
                  name: str = "lm-eval import") -> ImportedRun:
    """Store lm-eval runs (``{variant: samples file or directory}``) as one plan: every
    file read and checked first, then written in one transaction."""
    return _write(store, _prepare(runs, baseline, name))


def import_lmeval_file(store_path: str | Path, runs: Mapping[str, str | Path], baseline: str,
                       name: str = "lm-eval import") -> ImportedRun:
    """``import_lmeval`` into the store file ``store_path`` (created with its folder),
    opened only once every file has been read and checked."""
    prepared = _prepare(runs, baseline, name)
    store_path = Path(store_path)
    ensure_directory(store_path.parent, "--store")
    with ResultsStore.open(store_path) as store:
        return _write(store, prepared)
