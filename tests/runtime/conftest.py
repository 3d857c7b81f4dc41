"""Fixtures shared by the runtime tests (``one_thread`` lives in tests/conftest.py)."""
