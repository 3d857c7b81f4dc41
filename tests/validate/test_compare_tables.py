"""``compare_tables`` (source-agnostic) and ``v41val compare`` on constructed files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from v41val.cli import main
from validate.errors import PairingError
from validate.stats import ItemOutcomes
from validate.stats.compare import compare_tables
from validate.stats.continuous import PairedMeanDifference
from validate.stats.paired import PairedComparison


def outcomes(label, task, metric, values, repeats=1, hashes=True):
    values = np.asarray(values, dtype=float)
    items = len(values) // repeats
    ids = tuple(str(i) for i in range(items) for _ in range(repeats))
    reps = tuple(r for _ in range(items) for r in range(repeats))
    ph = tuple(f"p{i}" for i in ids) if hashes else None
    return ItemOutcomes(label, task, metric, ids, reps, values, ph)


def test_compare_tables_binary_continuous_and_repeats():
    rng = np.random.default_rng(11)
    acc_a = (rng.random(300) < 0.8).astype(float)
    acc_b = np.where(rng.random(300) < 0.05, 1 - acc_a, acc_a)
    lat_a = rng.lognormal(0, 0.3, 300)
    lat_b = lat_a * 0.7
    rep_a = (rng.random(400) < 0.6).astype(float)  # 100 items x 4 samples
    rep_b = np.where(rng.random(400) < 0.1, 1 - rep_a, rep_a)
    tables_a = {
        ("gsm8k", "em"): outcomes("A", "gsm8k", "em", acc_a),
        ("gsm8k", "latency"): outcomes("A", "gsm8k", "latency", lat_a),
        ("gpqa", "acc"): outcomes("A", "gpqa", "acc", rep_a, repeats=4),
        ("only_a", "x"): outcomes("A", "only_a", "x", [1, 0]),
    }
    tables_b = {
        ("gsm8k", "em"): outcomes("B", "gsm8k", "em", acc_b),
        ("gsm8k", "latency"): outcomes("B", "gsm8k", "latency", lat_b),
        ("gpqa", "acc"): outcomes("B", "gpqa", "acc", rep_b, repeats=4),
    }
    cmp = compare_tables(tables_a, tables_b, "A", "B")
    assert [(r.task, r.metric) for r in cmp.rows] == [
        ("gpqa", "acc"), ("gsm8k", "em"), ("gsm8k", "latency")
    ]
    em = cmp.row("gsm8k", "em")
    assert isinstance(em.paired, PairedComparison) and not em.paired.repeated
    assert em.accuracy_a.mean == pytest.approx(acc_a.mean())
    lat = cmp.row("gsm8k", "latency")
    assert isinstance(lat.paired, PairedMeanDifference)
    assert lat.paired.delta == pytest.approx(lat_b.mean() - lat_a.mean())
    gpqa = cmp.row("gpqa", "acc")
    assert gpqa.paired.repeated and gpqa.paired.n_items == 100 and gpqa.paired.n_rows == 400
    assert gpqa.accuracy_a.se_clustered is not None and gpqa.accuracy_a.n_items == 100
    # with K rows per item, the CR1 clustered SE is exactly SD(item means, n-1)/sqrt(G)
    # (Miller: average the K samples per question, then take the CLT SE across questions)
    item_means = rep_a.reshape(100, 4).mean(axis=1)
    assert gpqa.accuracy_a.se == pytest.approx(np.std(item_means, ddof=1) / 10, rel=1e-10)
    doc = cmp.to_dict()
    json.dumps(doc, default=str)
    assert {c["task"] for c in doc["comparisons"]} == {"gsm8k", "gpqa"}
    assert cmp.only_in_a == (("only_a", "x"),) and cmp.only_in_b == ()
    assert "not compared, only in A: only_a/x" in cmp.report()
    only = compare_tables(tables_a, tables_b, task="gsm8k")
    assert only.only_in_a == ()
    assert {r.task for r in only.rows} == {"gsm8k"}
    with pytest.raises(PairingError, match="no \\(task, metric\\) in common for task 'only_a'"):
        compare_tables(tables_a, tables_b, task="only_a")


def write_samples(path, values, task="gsm8k_k", filt="flexible-extract"):
    lines = [
        json.dumps({
            "doc_id": i, "filter": filt, "metrics": ["exact_match"], "exact_match": float(v),
            "resps": [["#### 1"]], "filtered_resps": ["1"], "prompt_hash": f"p{i}",
        })
        for i, v in enumerate(values)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_compare_cli_json_on_files(tmp_path, capsys):
    a = [1] * 80 + [0] * 20
    b = [1] * 70 + [0] * 10 + [1] * 5 + [0] * 15  # b = 10 (A-only), c = 5 (B-only)
    fa = write_samples(tmp_path / "samples_gsm8k_k_2026-11-29T00-00-00.jsonl", a)
    (tmp_path / "b").mkdir()
    fb = write_samples(tmp_path / "b" / "samples_gsm8k_k_2026-11-29T01-00-00.jsonl", b)
    main(["compare", str(fa), str(fb), "--json", "--bootstrap", "500", "--seed", "3"])
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["comparisons"]
    assert row["a"]["mean"] == pytest.approx(0.8) and row["b"]["mean"] == pytest.approx(0.75)
    paired = row["paired"]
    assert paired["table"]["a_only"] == 10 and paired["table"]["b_only"] == 5
    assert paired["delta"] == pytest.approx(-0.05)
    assert paired["n_items"] == 100 and paired["alpha"] == 0.05
    assert paired["bootstrap"] == {"replicates": 500, "seed": 3}
    assert "gate" not in doc
    main(["compare", str(fa), str(tmp_path / "b")])
    text = capsys.readouterr().out
    assert "n=100 items" in text and "alpha=0.05" in text and "MDE" in text
    assert "McNemar exact p" in text
