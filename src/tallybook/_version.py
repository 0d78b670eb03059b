"""The version of tallybook: the one place it is written (pyproject reads it from here)."""

__version__ = "0.1.0"
