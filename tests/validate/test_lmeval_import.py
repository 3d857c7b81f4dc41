"""lm-eval --log_samples runs imported into the store compare exactly like the files."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from v41val.cli import main
from validate.analysis import analyze_run
from validate.analysis.compare_stored import compare_stored
from validate.errors import SamplesFileError
from validate.gate.from_lmeval import compare_lmeval
from validate.lmeval_import import import_lmeval
from validate.stats import BootstrapSpec
from validate.store import ResultsStore

pytestmark = pytest.mark.slow  # runs lm-eval twice (the fixture of test_lmeval_samples)

HERE = Path(__file__).parent


def _samples_module():
    name = "v41val_lmeval_samples_fixtures"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "test_lmeval_samples.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_samples = _samples_module()
lmeval_runs = _samples.lmeval_runs  # the same module-scoped fixture: real lm-eval 0.4.13 output
TASK = _samples.TASK
POLICY = f'[tasks.{TASK}]\nmargin = 10.0\nmetric = "exact_match,flexible-extract"\n'


def _flat(value, prefix=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flat(v, f"{prefix}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _flat(v, f"{prefix}[{i}]")
    else:
        yield prefix, value


def same_numbers(x: list[dict], y: list[dict]) -> None:
    """Equal up to float summation order (the store sorts item ids as strings, the
    files keep doc order): 1e-12 relative, 1e-12 absolute."""
    fx, fy = dict(_flat(x)), dict(_flat(y))
    assert fx.keys() == fy.keys()
    for key, vx in fx.items():
        vy = fy[key]
        if isinstance(vx, float) or isinstance(vy, float):
            assert vy == pytest.approx(vx, rel=1e-12, abs=1e-12), key
        else:
            assert vx == vy, key


def _numbers(doc: dict) -> list[dict]:
    """The statistics of a comparison document, without the labels."""
    out = []
    for row in doc["comparisons"]:
        paired = {k: v for k, v in row["paired"].items() if k not in ("label_a", "label_b")}
        a = {k: v for k, v in row["a"].items() if k != "label"}
        b = {k: v for k, v in row["b"].items() if k != "label"}
        out.append({"task": row["task"], "metric": row["metric"], "a": a, "b": b,
                    "paired": paired, "coverage": row["coverage"]})
    return out


def test_imported_runs_compare_like_the_files(lmeval_runs, tmp_path):
    spec = BootstrapSpec(replicates=1000, seed=5)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    files = compare_lmeval(lmeval_runs["A"], lmeval_runs["B"], policy, bootstrap=spec)
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        imported = import_lmeval(store, {"A": lmeval_runs["A"], "B": lmeval_runs["B"]}, "A")
        assert imported.documents == 2 * _samples.LIMIT and imported.tasks == (TASK,)
        again = import_lmeval(store, {"A": lmeval_runs["A"], "B": lmeval_runs["B"]}, "A")
        assert again.plan_hash == imported.plan_hash  # same files: same plan, nothing new
        assert len(store.responses(imported.plan_hash)) == 2 * _samples.LIMIT
        stored = compare_stored(store, None, "A", "B", policy, bootstrap=spec)
        analysis = analyze_run(store, imported.run_id)
    same_numbers(_numbers(stored.to_dict()), _numbers(files.to_dict()))
    gate_files, gate_store = files.verdict.to_dict(), stored.verdict.to_dict()
    assert gate_store["decision"] == gate_files["decision"]
    same_numbers(gate_store["tasks"], gate_files["tasks"])
    # the analysis of the imported run: lm-eval's own accuracy, flexible-extract
    reported = _samples.lmeval_reported(lmeval_runs["B"])
    row = analysis.summary("B", TASK)
    assert row.metric == "exact_match,flexible-extract"
    assert row.accuracy.mean == pytest.approx(reported["exact_match,flexible-extract"], abs=1e-12)
    assert analysis.identity.engine == "lm-eval import" and analysis.identity.baseline == "A"


def test_compare_cli_on_a_store_matches_the_files(lmeval_runs, tmp_path, capsys):
    main(["import-lmeval", f"A={lmeval_runs['A']}", f"B={lmeval_runs['B']}", "--baseline", "A",
          "--store", str(tmp_path / "results.sqlite"), "--json"])
    imported = json.loads(capsys.readouterr().out)
    assert imported["documents"] == 2 * _samples.LIMIT and imported["variants"] == ["A", "B"]
    main(["compare", str(lmeval_runs["A"]), str(lmeval_runs["B"]), "--json",
          "--bootstrap", "1000"])
    files = json.loads(capsys.readouterr().out)
    main(["compare", "A", "B", "--store", str(tmp_path / "results.sqlite"), "--run",
          imported["plan_hash"][:8], "--json", "--bootstrap", "1000"])
    stored = json.loads(capsys.readouterr().out)
    same_numbers(_numbers(stored), _numbers(files))
    with pytest.raises(SystemExit) as info:
        main(["compare", "A", "C", "--store", str(tmp_path / "results.sqlite")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "has no variant 'C'" in err and err.count("\n") == 1
    with pytest.raises(SystemExit) as info:
        main(["import-lmeval", "A", "--baseline", "A", "--store", str(tmp_path / "x.sqlite")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "expected NAME=PATH" in err and err.count("\n") == 1


def test_import_refuses_an_unknown_baseline(lmeval_runs, tmp_path):
    with ResultsStore.open(tmp_path / "r.sqlite") as store, \
            pytest.raises(SamplesFileError, match="baseline 'Z' is not one of"):
        import_lmeval(store, {"A": lmeval_runs["A"]}, "Z")
