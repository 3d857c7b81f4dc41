"""The analysed run (``RunAnalysis``) built from a results store; see ``model.py``."""
