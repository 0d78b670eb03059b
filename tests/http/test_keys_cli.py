"""``tallybook program`` and ``tallybook keys``: the CLI twins of the services."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tallybook.cli import app
from tallybook.errors import NotFound, Unauthorized, ValidationError

runner = CliRunner()


def _run(*args: str):
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_program_and_keys_commands(ledger, store) -> None:
    url = store.describe()
    _run("program", "create", "cafe", "--name", "Cafe", "--currency", "EUR", "--store", url)
    shown = json.loads(_run("program", "show", "cafe", "--json", "--store", url).stdout)
    assert shown["currency"] == "EUR"
    assert [f["name"] for f in shown["funds"]] == ["points", "cash", "store_credit", "bonus"]

    created = _run(
        "keys",
        "create",
        "--program",
        "cafe",
        "--scopes",
        "read,write",
        "--name",
        "pos",
        "--store",
        url,
    )
    secret = created.stdout.strip()
    assert secret.startswith("tb_")
    key = ledger.keys.authenticate(secret)
    assert (key.program, key.scopes, key.name) == ("cafe", ("read", "write"), "pos")

    listed = json.loads(_run("keys", "list", "--program", "cafe", "--json", "--store", url).stdout)
    assert [k["id"] for k in listed] == [key.id]
    assert secret.split("_", 2)[2] not in json.dumps(listed)

    _run("keys", "revoke", key.id, "--store", url)
    with pytest.raises(Unauthorized):
        ledger.keys.authenticate(secret)


@pytest.mark.parametrize("engine", ["sqlite"])
def test_cli_errors_are_one_line(ledger, store) -> None:
    url = store.describe()
    result = runner.invoke(
        app, ["keys", "create", "--program", "shop", "--scopes", "root", "--store", url]
    )
    assert result.exit_code != 0
    assert "unknown scope" in str(result.exception)
    assert "--host" in runner.invoke(app, ["serve", "--help"]).output


@pytest.mark.parametrize("engine", ["sqlite"])
def test_keys_create_refuses_a_program_that_does_not_exist(ledger, store) -> None:
    # was: the program was created with default funds (a mistyped --program too), and
    # kept when the key was then refused (a name over 100 characters)
    url = store.describe()
    for extra in ([], ["--name", "x" * 101]):
        result = runner.invoke(
            app,
            ["keys", "create", "--program", "new-prog", "--scopes", "read", "--store", url, *extra],
        )
        assert isinstance(result.exception, NotFound), result.output
        assert "create it first: tallybook program create new-prog" in str(result.exception)
        assert "new-prog" not in ledger.programs.list()


@pytest.mark.parametrize("engine", ["sqlite"])
def test_keys_create_with_bad_scopes_creates_nothing(ledger, store) -> None:
    url = store.describe()
    result = runner.invoke(
        app, ["keys", "create", "--program", "other", "--scopes", "read,root", "--store", url]
    )
    assert result.exit_code != 0
    assert isinstance(result.exception, ValidationError)
    assert "other" not in ledger.programs.list()


def test_revoke_help_says_how_long_a_server_still_accepts_the_key() -> None:
    """docs/http.md: a server process remembers a key for the key cache time, so a
    revocation takes effect within it (not on the next request)."""
    from tallybook.http.keycache import DEFAULT_KEY_CACHE_SECONDS

    output = runner.invoke(app, ["keys", "revoke", "--help"], terminal_width=200).output
    text = " ".join(output.split())
    assert f"within {DEFAULT_KEY_CACHE_SECONDS:g} s" in text
    assert f"(default {DEFAULT_KEY_CACHE_SECONDS:g} s;" in text
    assert "$TALLYBOOK_KEY_CACHE_SECONDS" in text
