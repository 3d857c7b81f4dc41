"""The JSON report validates against its schema and carries enough to recompute every
verdict from the file alone."""

from __future__ import annotations

import copy
import json

import jsonschema
import numpy as np
import pytest
from builders import TABLES, item_ids, outcome_arrays

from reports.errors import ReportInputError
from reports.json_report import load_schema, recompute_verdicts, render_json, validate_document


def test_document_validates_against_the_schema(doc):
    text = render_json(doc)
    parsed = json.loads(text)
    jsonschema.Draft202012Validator(load_schema()).validate(parsed)
    validate_document(parsed)
    assert parsed["format"] == "v41val-report" and parsed["schema_version"] == 3


def test_schema_is_itself_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(load_schema())


@pytest.mark.parametrize("mutate", [
    lambda d: d.pop("decision"),
    lambda d: d.__setitem__("decision", "MAYBE"),
    lambda d: d["tasks"][0]["comparisons"][0]["table"].__setitem__("b", -1),
    lambda d: d["tasks"][0]["comparisons"][0]["verdict"].__setitem__("correction", "sidak"),
    lambda d: d.__setitem__("schema_version", 1),
])
def test_schema_rejects_broken_documents(doc, mutate):
    bad = copy.deepcopy(doc)
    mutate(bad)
    with pytest.raises(ReportInputError):
        validate_document(bad)


def test_verdicts_recomputed_from_the_json_equal_the_reported_ones(doc):
    parsed = json.loads(render_json(doc))
    again = recompute_verdicts(parsed)
    reported = {(t["task"], c["variant"]): c["status"] for t in parsed["tasks"]
                for c in t["comparisons"]}
    assert again == reported
    # The fixture covers more than one outcome, so agreement is not trivial.
    assert {"PASS", "FAIL", "INCONCLUSIVE"} <= set(reported.values())


def test_recompute_reacts_to_the_numbers_in_the_file(doc):
    tampered = copy.deepcopy(doc)
    for t in tampered["tasks"]:
        for c in t["comparisons"]:
            if (t["task"], c["variant"]) == ("gsm8k", "fused"):
                c["table"]["b"], c["table"]["c"] = c["table"]["c"], c["table"]["b"]
    assert recompute_verdicts(tampered)[("gsm8k", "fused")] != "FAIL"


def test_tables_and_outcomes_match_the_known_construction(doc):
    for t in doc["tasks"]:
        for c in t["comparisons"]:
            n, both, b, cc = TABLES[(t["task"], c["variant"])]
            assert c["table"] == {"both_right": both, "b": b, "c": cc,
                                  "both_wrong": n - both - b - cc, "n": n}
            base, cand = outcome_arrays(n, both, b, cc)
            assert c["outcomes"]["item_ids"] == item_ids(t["task"], n)
            assert np.array_equal(c["outcomes"]["baseline"], base)
            assert np.array_equal(c["outcomes"]["candidate"], cand)
            assert len(c["flips"]["right_to_wrong"]) == b
            assert len(c["flips"]["wrong_to_right"]) == cc
            assert all("#" in i for i in c["flips"]["right_to_wrong"])


def test_no_nan_in_strict_json(doc):
    text = render_json(doc)
    assert "NaN" not in text and "Infinity" not in text
