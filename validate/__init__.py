"""Plans, engines, the results store, statistics, fidelity, speed and gating."""
