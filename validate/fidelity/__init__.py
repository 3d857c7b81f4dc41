"""Teacher-forced fidelity of a variant against the baseline on the same prompts.

``metrics``: per-token KL(base || variant) from full logits, top-1 agreement, first
divergence. ``topk``: the stated over-HTTP approximation from top-k logprobs (a lower
bound). ``summary``: mean +- SE (clustered by prompt) and p99 as the analysis'
``FidelitySummary``. ``collect``: drives builtin engines (exact) or OpenAI-compatible
endpoints (top-k) to produce the per-prompt records.
"""
