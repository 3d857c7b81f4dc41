"""One thread-count check for ``v41val demo --threads`` and the lm-eval model arg
``threads``: the same bounds (1 to 4 per core, from os.cpu_count) and the same message,
through both entry points."""

from __future__ import annotations

import os

import pytest

from validate.demo.errors import DemoError
from validate.demo.run import DemoSettings
from validate.errors import ValidateInputError
from validate.threads import check_threads

MOST = 4 * (os.cpu_count() or 1)


@pytest.mark.parametrize("value,count", [(1, 1), (MOST, MOST), ("2", 2), (" 3 ", 3)])
def test_accepted_counts(value, count):
    assert check_threads(value, "threads") == count


@pytest.mark.parametrize("value", [0, -1, MOST + 1, 100000, True, 1.5, "1.5", "x", "", None])
def test_refused_counts_name_the_field_and_the_bounds(value):
    with pytest.raises(ValidateInputError) as err:
        check_threads(value, "threads")
    assert str(err.value) == (f"threads: expected 1 to {MOST} (4 per core of this machine), "
                              f"got {value!r}")


def test_the_demo_and_lm_eval_share_the_check():
    """Behaviour of the demo unchanged (its message as before, None = torch's default);
    lm-eval's threads gains the cap the demo had."""
    with pytest.raises(DemoError, match=rf"^--threads: expected 1 to {MOST} \(4 per core of "
                                        r"this machine\), got 100000$"):
        DemoSettings(threads=100000)
    assert DemoSettings(threads=None).threads is None and DemoSettings(threads=MOST).threads == MOST
    pytest.importorskip("lm_eval")
    from validate.lmeval_model import V41ValLM

    with pytest.raises(ValidateInputError,
                       match=rf"^v41val model_args: threads: expected 1 to {MOST} \(4 per core of "
                             r"this machine\), got '100000'$"):
        V41ValLM(preset="micro", threads="100000")
