"""The decision words and exit codes, defined once (no imports: the CLI reads them at
start-up).

Per (variant, task) the gate says PASS / WARN / FAIL / INCONCLUSIVE / INVALID
(``validate.gate.verdict``); per run (and per optimization) it says GO / NO-GO /
INCONCLUSIVE / INVALID, or UNGATED when the plan has no policy. The process exit code
is the run decision's; 2 is bad usage or input, 70 an internal error, 130 a run
stopped by Ctrl-C (128 + SIGINT, what a shell reports for a process SIGINT ended).
"""

from __future__ import annotations

# task verdicts
PASS, WARN, FAIL, INCONCLUSIVE, INVALID = "PASS", "WARN", "FAIL", "INCONCLUSIVE", "INVALID"
PASSING = (PASS, WARN)

# run decisions (INCONCLUSIVE and INVALID are shared with the verdicts)
GO, NO_GO, UNGATED = "GO", "NO-GO", "UNGATED"
DECISIONS = (GO, NO_GO, INCONCLUSIVE, INVALID, UNGATED)

EXIT_OK = 0
EXIT_NO_GO = 1
EXIT_USAGE = 2
EXIT_INCONCLUSIVE = 3
EXIT_INVALID = 4
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

# UNGATED exits 0: without a policy only a broken variant (INVALID) fails the run
DECISION_EXIT_CODES = {GO: EXIT_OK, NO_GO: EXIT_NO_GO, INCONCLUSIVE: EXIT_INCONCLUSIVE,
                       INVALID: EXIT_INVALID, UNGATED: EXIT_OK}
