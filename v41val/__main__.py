"""``python -m v41val``: the same entry point as the ``v41val`` console script, for a
checkout that is on ``PYTHONPATH`` rather than installed (the console script imports
whichever copy pip installed)."""

from v41val.cli import main

main()
