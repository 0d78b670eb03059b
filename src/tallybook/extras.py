"""Which optional extra (``cli``, ``server``) is installed, and the one line
that says what to install when it is not (used by the console script and
``tallybook serve``; imports nothing of tallybook)."""

from __future__ import annotations

import importlib.util

#: extra -> the modules it brings
EXTRAS: dict[str, tuple[str, ...]] = {
    "cli": ("typer", "rich"),
    "server": (
        "fastapi",
        "uvicorn",
        "pydantic",
        "mangum",
        "jinja2",
        "multipart",
        "prometheus_client",
        "pythonjsonlogger",
        "fastapi_offline",
        "aws_lambda_powertools",
    ),
}


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported."""
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def install_hint(extra: str) -> str:
    """One line: what is missing and the pip command that installs it."""
    return (
        f"error: this needs tallybook's {extra} extra ({', '.join(missing(extra))} "
        f"not installed): pip install 'tallybook[{extra}]'"
    )
