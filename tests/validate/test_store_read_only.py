"""Read commands never write to the file they read, and a write of many parts is all
or nothing: SHA-256 of the store before and after, and row counts after a failed
write."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from v41val.cli import main
from validate.store import ResultsStore
from validate.store.errors import StoreError

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "reports"))
sys.path.insert(0, str(HERE))
from store_fixture import PlanSpec, add_plan  # noqa: E402
from test_bad_inputs import PLAN, samples_line, write_samples  # noqa: E402

LEGACY = HERE / "fixtures" / "legacy-store-v0.1.sqlite"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("runs", "variants", "requests", "responses", "scores")}
    finally:
        conn.close()


def test_report_and_history_of_an_old_schema_store_leave_it_as_it_was(tmp_path, capsys):
    """A schema-2 store (v0.1): reading it used to upgrade it in place."""
    store = tmp_path / "results.sqlite"
    shutil.copy(LEGACY, store)
    before = digest(store)
    with ResultsStore.open(store, read_only=True) as opened:
        runs = opened.runs()
        assert runs and opened.sweeps(runs[0].plan_hash) == []  # TEMP stand-in, empty
        assert opened.fidelity_document(runs[0].plan_hash) == {}
    for args in (["report", "latest", "--store", str(store), "--format", "json"],
                 ["history", "--store", str(store), "--format", "json"]):
        try:
            main(args)
        except SystemExit as exc:
            assert exc.code == 0, capsys.readouterr().err
    assert digest(store) == before
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2  # not upgraded
    conn.close()


def test_a_read_only_store_refuses_writes(tmp_path):
    path = tmp_path / "results.sqlite"
    with ResultsStore.open(path) as store:
        add_plan(store, PlanSpec(plan_hash="a" * 64, outcomes={"a": [1, 0], "b": [1, 1]}))
    before = digest(path)
    with ResultsStore.open(path, read_only=True) as store, \
            pytest.raises(sqlite3.OperationalError, match="readonly"):
        store.begin_run("b" * 64, identity={})
    assert digest(path) == before


def test_a_missing_store_is_not_created_by_a_reader(tmp_path):
    with pytest.raises(StoreError, match="no results store here"):
        ResultsStore.open(tmp_path / "absent.sqlite", read_only=True)
    assert not (tmp_path / "absent.sqlite").exists()


def test_atomic_rolls_back_every_write_of_the_block(tmp_path):
    path = tmp_path / "results.sqlite"
    with ResultsStore.open(path) as store:
        add_plan(store, PlanSpec(plan_hash="a" * 64, outcomes={"a": [1, 0], "b": [1, 1]}))
    before = counts(path)
    with ResultsStore.open(path) as store:
        with pytest.raises(RuntimeError, match="half-way"), store.atomic():
            add_plan(store, PlanSpec(plan_hash="c" * 64, outcomes={"a": [1], "b": [0]}))
            raise RuntimeError("half-way")
        assert counts(path) == before
        with store.atomic():  # and a block that ends commits all of it
            add_plan(store, PlanSpec(plan_hash="c" * 64, outcomes={"a": [1], "b": [0]}))
    after = counts(path)
    assert after["runs"] == before["runs"] + 1 and after["scores"] == before["scores"] + 2


def test_import_lmeval_of_a_bad_second_file_writes_nothing(tmp_path, capsys):
    """The first file is fine, the second has a line that fails only when read: the
    store (which already holds a run) keeps its bytes."""
    good = write_samples(tmp_path / "good", [samples_line(i, 1.0) for i in range(3)])
    bad = write_samples(tmp_path / "bad", [samples_line(0, 1.0), samples_line(1, 1.0),
                                           samples_line(2, 1.0, resps=[])])
    path = tmp_path / "results.sqlite"
    with ResultsStore.open(path) as store:
        add_plan(store, PlanSpec(plan_hash="a" * 64, outcomes={"a": [1, 0], "b": [1, 1]}))
    before = digest(path)
    with pytest.raises(SystemExit) as info:
        main(["import-lmeval", f"a={good}", f"b={bad}", "--baseline", "a", "--store",
              str(path)])
    assert info.value.code == 2
    assert "doc 2: cannot read 'resps'" in capsys.readouterr().err
    assert digest(path) == before
    main(["import-lmeval", f"a={good}", f"b={good}", "--baseline", "a", "--store",
          str(path)])  # the good pair imports, in one piece
    assert counts(path)["responses"] == 4 + 6


def test_a_run_whose_variant_the_store_refuses_leaves_no_run_behind(tmp_path):
    from validate.plan import load_plan
    from validate.runner.run import run_plan

    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(PLAN.format(seed=1, device="cpu", dtype="float32"))
    plan = load_plan(plan_path)
    path = tmp_path / "results.sqlite"
    with ResultsStore.open(path) as store:
        old = store.begin_run(plan.hash, identity={})
        store.put_variant(old, "b", {"something": "else"})
        store.finish_run(old)
    before = counts(path)
    with ResultsStore.open(path) as store, pytest.raises(StoreError, match="variant 'b'"):
        run_plan(plan, store)
    assert counts(path) == before
