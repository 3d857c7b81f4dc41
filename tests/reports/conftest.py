"""Fixtures of the reports tests: a RunAnalysis built from known outcomes (builders.py)
and its report document."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from builders import make_analysis  # noqa: E402

from reports.document import report_document  # noqa: E402


@pytest.fixture(scope="session")
def analysis():
    return make_analysis()


@pytest.fixture(scope="session")
def doc(analysis):
    return report_document(analysis)
