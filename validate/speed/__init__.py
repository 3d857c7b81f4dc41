"""Speed per variant: latency percentiles, throughput, speed-ups with CIs, and the two
headline operating points found by a concurrency sweep.

``metrics``: ``SpeedSummary`` (the analysis' dataclass) from engine results, per-user
decode rates, paired speed-ups. ``sweep``: run an engine factory at increasing
concurrency; pick the highest throughput at which users still get >= N tokens/s.
``headline``: low-latency (single stream) and throughput-at-N figures, and their
ratios vs the baseline. ``stored``: a sweep as a JSON record for the results store
and back (the runner's ``speed_pass`` writes it, the analysis recomputes from it).
"""
