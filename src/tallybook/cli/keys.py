"""``tallybook keys create|revoke|list``: API keys for the HTTP service."""

from __future__ import annotations

from typing import Annotated

import typer

from tallybook.cli.options import StoreOption
from tallybook.cli.output import console, err_console, open_ledger, print_json, table
from tallybook.errors import NotFound

app = typer.Typer(
    help="Create, revoke and list API keys.",
    epilog="Example: tallybook keys create --program shop --scopes read,write",
    no_args_is_help=True,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
ProgramOption = Annotated[
    str,
    typer.Option(
        "--program", "-p", envvar="TALLYBOOK_PROGRAM", help="Program id ($TALLYBOOK_PROGRAM)."
    ),
]


@app.command("create")
def create(
    program: ProgramOption,
    scopes: Annotated[
        str, typer.Option("--scopes", help="Comma-separated: read, write, admin.")
    ] = "read",
    name: Annotated[str | None, typer.Option("--name", help="A label for people.")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a key and print its secret ONCE (only a hash is stored).

    The program must exist: create it first with `tallybook program create`
    (a mistyped --program is refused, not created).

    Example: tallybook keys create --program shop --scopes read,write --name checkout
    """
    from tallybook.domain.ids import check_id
    from tallybook.services.apikeys import parse_scopes

    parse_scopes(scopes)
    check_id(program, "program id")
    with open_ledger(store) as ledger:
        try:
            ledger.programs.get(program)
        except NotFound:
            raise NotFound(
                f"program {program} not found; create it first: tallybook program create {program}"
            ) from None
        key, secret = ledger.keys.create(program, scopes, name)
    if as_json:
        print_json({"id": key.id, "program": key.program, "scopes": key.scopes, "secret": secret})
        return
    print(secret)
    err_console.print(
        f"key {key.id} for program {key.program} (scopes {','.join(key.scopes)}): "
        "store the secret now, it is not shown again"
    )


@app.command("revoke")
def revoke(
    key_id: Annotated[str, typer.Argument(help="Key id (the part after 'tb_' in the secret).")],
    store: StoreOption = None,
) -> None:
    """Revoke a key: the API refuses it within 5 s, the admin page at once.

    Each server process remembers a key it authenticated for
    $TALLYBOOK_KEY_CACHE_SECONDS (default 5 s; 0 reads the key on every request).

    Example: tallybook keys revoke 3f2a9c0d1e4b5a69
    """
    with open_ledger(store) as ledger:
        key = ledger.keys.revoke(key_id)
    console.print(f"key {key.id} revoked")


@app.command("list")
def list_keys(
    program: ProgramOption,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List a program's keys (never their secrets).

    Example: tallybook keys list --program shop
    """
    with open_ledger(store, create=False) as ledger:
        keys = ledger.keys.list(program)
    if as_json:
        print_json(keys)
        return
    table(
        f"API keys of {program}",
        ["id", "name", "scopes", "created", "revoked"],
        [[k.id, k.name, ",".join(k.scopes), k.created_at, k.revoked_at] for k in keys],
    )
