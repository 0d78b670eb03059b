"""Options shared by every command."""

from __future__ import annotations

from typing import Annotated

import typer

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="TALLYBOOK_STORE",
        help="Store URL: sqlite:///PATH.db or dynamodb://TABLE?region=..&endpoint=.. "
        "[default: sqlite:///./tallybook.db]",
        show_default=False,
    ),
]
