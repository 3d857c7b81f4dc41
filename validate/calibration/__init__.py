"""Quality calibration: plant graded degradations, run them through the builtin engine
on a task, and measure how often the release gate catches each one at each n, beside
what ``plan``'s power enumeration predicts.

- ``planted``: the degradation families (logit noise, a shrunk window, a bounded
  replay that reads k positions short) as plan variants, and the pairs compared.
- ``pool``: the calibration plan, run through ``validate.runner`` (warm priming,
  storage, scoring, resume), and the per-item outcome tables it stored.
- ``detection``: seeded subsamples of n items gated by ``validate.gate.evaluate_gate``.
- ``predict``: exact probabilities of the gate's outcomes, for n fresh items (the
  enumeration of ``validate.stats.power``) and for subsamples of the finite pool.
- ``quality``: the whole calibration as one call, and its result.

The fidelity (KL) calibration on planted levels stays in ``validate.fidelity.calibrate``.
This package imports nothing heavy at module level (the CLI builds ``--help`` from it).
"""
