"""The ledger CLI as a user runs it: ``tallybook account|post|history|check``.

Commands run through :func:`tallybook.cli.main` (the console script), so what
is asserted is what a user sees: one ``error:`` line and an exit code, never a
stack trace. The walkthrough runs on both engines; input errors and help texts
do not depend on the engine and run on SQLite only.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import click.testing
import pytest
import typer.main
from rich.console import Console

from docblocks import DocShell, blocks
from tallybook.cli import app, main
from tallybook.ledger import Ledger
from tallybook.store import keys
from tallybook.store.port import ItemStore, Set, SortCondition

sqlite_only = pytest.mark.parametrize("engine", ["sqlite"])
README = Path(__file__).resolve().parents[2] / "README.md"


class Cli:
    """Runs ``tallybook ARGS`` in-process through ``main()``; returns (code, out, err).

    As in a shell that sets none of ``$TALLYBOOK_STORE``, ``$TALLYBOOK_PROGRAM`` and
    ``$TALLYBOOK_DEBUG``: the store is ``url`` (``--store``), the program each
    command's own, an error one line."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str
    ) -> None:
        for name in ("TALLYBOOK_STORE", "TALLYBOOK_PROGRAM", "TALLYBOOK_DEBUG"):
            monkeypatch.delenv(name, raising=False)
        self.monkeypatch = monkeypatch
        self.capsys = capsys
        self.url = url

    def __call__(self, *args: str, store: bool = True) -> tuple[int, str, str]:
        argv = ["tallybook", *args, *(["--store", self.url] if store else [])]
        self.monkeypatch.setattr(sys, "argv", argv)
        self.capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main()
        out, err = self.capsys.readouterr()
        code = exited.value.code
        return (code if isinstance(code, int) else 1), out, err

    def ok(self, *args: str) -> str:
        code, out, err = self(*args)
        assert code == 0, err
        return out

    def json(self, *args: str) -> object:
        return json.loads(self.ok(*args, "--json"))


def one_error(err: str) -> str:
    """The one ``error:`` line a refused command writes to stderr (no traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def cli(ledger: Ledger, store: ItemStore, monkeypatch: pytest.MonkeyPatch, capsys) -> Cli:
    return Cli(monkeypatch, capsys, store.describe())


def test_open_post_show_history_and_check(cli: Cli, ledger: Ledger) -> None:
    opened = cli.json("account", "open", "alice", "--program", "shop")
    assert opened == {"account": "alice", "program": "shop", "created": True}
    assert "was already open" in cli.ok("account", "open", "alice", "--program", "shop")
    cli.ok("account", "open", "bob", "--program", "shop")

    credit = ["post", "credit", "alice", "cash", "500", "--txn", "t-1", "--program", "shop"]
    first = cli.json(*credit, "--order", "o-1", "--meta", "channel=pos")
    assert isinstance(first, dict)
    assert first["legs"][0] == {
        "account": "alice",
        "fund": "cash",
        "unit": "USD",
        "amount": 500,
        "balance": 500,
        "seq": 1,
    }
    assert first["metadata"] == {"channel": "pos"}
    replayed = cli.ok(*credit, "--order", "o-1", "--meta", "channel=pos")
    assert "replay: already applied" in replayed
    transfer = ["post", "transfer", "alice", "cash", "200", "--to", "bob", "--txn", "t-2"]
    cli.ok(*transfer, "--program", "shop")
    cli.ok("post", "adjust", "alice", "cash", "-50", "--txn", "t-3", "--program", "shop")
    cli.ok("post", "debit", "bob", "cash", "20", "--txn", "t-4", "--program", "shop")

    shown = cli.json("account", "show", "alice", "--program", "shop")
    assert isinstance(shown, dict)
    cash = next(b for b in shown["balances"] if b["fund"] == "cash")
    assert (cash["balance"], cash["held"], cash["available"]) == (250, 0, 250)
    assert ledger.accounts.get("shop", "bob").fund("cash").balance == 180

    page1 = cli.json("history", "alice", "--fund", "cash", "--program", "shop", "--limit", "2")
    assert isinstance(page1, dict)
    assert [(e["seq"], e["amount"], e["balance"]) for e in page1["entries"]] == [
        (3, -50, 250),
        (2, -200, 300),
    ]
    page2 = cli.json(
        "history", "alice", "--fund", "cash", "--program", "shop", "--limit", "2",
        "--cursor", page1["cursor"],
    )  # fmt: skip
    assert isinstance(page2, dict)
    assert [e["txn_id"] for e in page2["entries"]] == ["t-1"]
    assert page2["cursor"] is None
    oldest = cli.json("history", "alice", "--fund", "cash", "--program", "shop", "--oldest-first")
    assert isinstance(oldest, dict)
    assert [e["seq"] for e in oldest["entries"]] == [1, 2, 3]
    assert "next page: --cursor" in cli.ok(
        "history", "alice", "--fund", "cash", "--program", "shop", "--limit", "1"
    )

    report = cli.json("check", "--program", "shop")
    assert isinstance(report, dict)
    assert report["violations"] == []
    assert report["accounts"] == 2
    assert "ok" in cli.ok("check", "--program", "shop", "--account", "alice")


def test_check_exits_1_on_a_violation_and_shows_progress(
    cli: Cli, ledger: Ledger, store: ItemStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    for account in ("alice", "bob", "carol"):
        ledger.accounts.open("shop", account)
        ledger.transactions.credit("shop", account, "points", 10, txn_id=f"seed-{account}")
    progress_out = io.StringIO()
    monkeypatch.setattr(
        "tallybook.cli.output.err_console",
        Console(file=progress_out, force_terminal=True, width=100),
    )
    assert "ok" in cli.ok("check", "--program", "shop")
    assert "checking accounts" in progress_out.getvalue()

    head = ledger.accounts.get("shop", "bob")
    funds = {
        name: {"balance": s.balance, "held": s.held, "seq": s.seq, "last_us": s.last_us}
        for name, s in head.funds.items()
    }
    funds["points"]["balance"] += 1  # a balance that no longer equals its entries
    store.update(keys.account_head("shop", "bob"), [Set("funds", funds)])  # type: ignore[arg-type]
    code, out, _ = cli("check", "--program", "shop")
    assert code == 1
    assert "invariant 1: bob/points: balance 11 != sum of entries 10" in out
    assert "violation(s)" in out
    code, out, _ = cli("check", "--program", "shop", "--account", "bob")
    assert code == 1
    assert cli("check", "--program", "shop", "--account", "alice")[0] == 0


def test_check_finds_broken_holds_and_a_second_active_notification(
    cli: Cli, ledger: Ledger, store: ItemStore
) -> None:
    """Invariants 2 and 6 are checked too (``check`` found neither and exited 0)."""
    ledger.accounts.open("shop", "alice")
    ledger.wallet.credit("shop", "alice", "cash", 1_000, txn_id="c-1")
    ledger.wallet.authorize("shop", "alice", 300, hold_id="h-1")
    ledger.notifications.add("shop", "alice", "Promo", {"n": 1})
    assert "ok" in cli.ok("check", "--program", "shop")

    head = ledger.accounts.get("shop", "alice")
    funds = {
        name: {"balance": s.balance, "held": s.held, "seq": s.seq, "last_us": s.last_us}
        for name, s in head.funds.items()
    }
    funds["cash"]["held"] += 5_000  # withheld beyond the holds, available below zero
    store.update(keys.account_head("shop", "alice"), [Set("funds", funds)])  # type: ignore[arg-type]
    row = next(
        store.query_all(
            keys.account_partition("shop", "alice"),
            SortCondition.begins_with(keys.NOTIFICATION_HISTORY_PREFIX),
        )
    )
    store.put({**row, "sk": str(row["sk"]) + "x", "id": "n-forged"})  # a second active Promo

    for args in ([], ["--account", "alice"]):
        code, out, _ = cli("check", "--program", "shop", *args)
        assert code == 1
        assert "invariant 2: alice/cash: head withholds 5300, holds sum 300" in out
        assert "invariant 2: alice/cash: available -4300 below zero" in out
        assert "invariant 6: alice has 2 active Promo notifications" in out
    assert len(ledger.check.program("shop").violations) == 3


def test_check_reports_an_account_whose_head_is_lost_and_checks_the_others(
    cli: Cli, ledger: Ledger, store: ItemStore
) -> None:
    """It stopped at such an account with "error: account bob not found" (exit 4),
    checking no account after it."""
    for account in ("alice", "bob", "carol"):
        ledger.accounts.open("shop", account)
        ledger.transactions.credit("shop", account, "points", 10, txn_id=f"seed-{account}")
    store.delete(keys.account_head("shop", "bob"))
    code, out, err = cli("check", "--program", "shop")
    assert (code, err) == (1, "")
    assert "checked 3 accounts, 2 entries" in out
    assert "invariant 1: account bob is in the account directory but its head" in out
    code, _, err = cli("check", "--program", "shop", "--account", "bob")
    assert (code, err.strip()) == (4, "error: account bob not found in program shop")


def test_check_compares_each_entry_with_its_transaction_record(
    cli: Cli, ledger: Ledger, store: ItemStore
) -> None:
    """An entry whose amount differs from its record's leg, with the running balances,
    the head and its system counter made to agree, passed the check (money from
    nowhere: the record says 10 came in from outside, the history 110)."""
    ledger.accounts.open("shop", "alice")
    ledger.transactions.credit("shop", "alice", "points", 10, txn_id="c-1")
    assert "ok" in cli.ok("check", "--program", "shop")
    entry = next(
        store.query_all(
            keys.account_partition("shop", "alice"),
            SortCondition.begins_with(keys.entry_prefix("points")),
        )
    )
    store.put({**entry, "amount": 110, "balance": 110})
    head = store.get(keys.account_head("shop", "alice"))
    assert head is not None
    counters = [name for name in head if name.startswith("sys:") and name.endswith(":points")]
    assert len(counters) == 1
    funds = dict(head["funds"])  # type: ignore[arg-type]
    funds["points"] = {**funds["points"], "balance": 110}  # type: ignore[dict-item]
    store.put({**head, "funds": funds, counters[0]: -110})  # type: ignore[dict-item]
    code, out, _ = cli("check", "--program", "shop")
    assert code == 1
    assert "invariant 1" not in out
    assert "invariant 5" not in out
    assert (
        "invariant 3: alice/points seq 1: amount 110 balance 110 is no leg of its transaction c-1"
        in out
    )


def test_check_finds_a_withheld_amount_on_a_fund_outside_the_wallet(
    cli: Cli, ledger: Ledger, store: ItemStore
) -> None:
    """Invariant 2 was checked on cash, store credit and bonus only: points withheld
    with no hold (available far below zero) passed."""
    ledger.accounts.open("shop", "alice")
    ledger.transactions.credit("shop", "alice", "points", 10, txn_id="c-1")
    head = ledger.accounts.get("shop", "alice")
    funds = {
        name: {"balance": s.balance, "held": s.held, "seq": s.seq, "last_us": s.last_us}
        for name, s in head.funds.items()
    }
    funds["points"]["held"] = 50
    store.update(keys.account_head("shop", "alice"), [Set("funds", funds)])  # type: ignore[arg-type]
    code, out, _ = cli("check", "--program", "shop")
    assert code == 1
    assert "invariant 2: alice/points: head withholds 50, holds sum 0" in out
    assert "invariant 2: alice/points: available -40 below zero" in out
    assert ledger.wallet.check("shop", "alice") == [
        "alice/points: head withholds 50, holds sum 0",
        "alice/points: available -40 below zero",
    ]


@sqlite_only
def test_a_damaged_program_item_is_one_line_and_a_check_violation(
    cli: Cli, ledger: Ledger, store: ItemStore
) -> None:
    """Every command of the program ended with "error: unexpected KeyError: 'unit'"."""
    ledger.accounts.open("shop", "alice")
    item = dict(store.get(keys.program("shop")) or {})
    item["funds"] = [dict(f) for f in item["funds"]]  # type: ignore[union-attr]
    del item["funds"][1]["unit"]  # type: ignore[index]
    store.put(item)
    damaged = "program shop: its stored item PROG#shop / PROG is damaged: fund 2: no unit"
    for args in (
        ["account", "show", "alice", "--program", "shop"],
        ["post", "credit", "alice", "cash", "5", "--txn", "t-1", "--program", "shop"],
        ["program", "show", "shop"],
    ):
        code, _, err = cli(*args)
        assert (code, one_error(err)) == (1, f"error: {damaged}"), args
    code, out, err = cli("check", "--program", "shop")
    assert (code, err) == (1, "")
    assert f"violation {damaged}; nothing else was checked" in out


@sqlite_only
def test_an_account_whose_head_does_not_read_is_one_line(
    cli: Cli, ledger: Ledger, store: ItemStore
) -> None:
    """Every command of the account ended with "error: unexpected KeyError"."""
    ledger.accounts.open("shop", "alice")
    head = dict(store.get(keys.account_head("shop", "alice")) or {})
    del head["created_at"]
    store.put(head)
    damaged = (
        "account alice of program shop: its stored head ACCT#shop#alice / HEAD is damaged: "
        "no created_at"
    )
    for args in (
        ["account", "show", "alice"],
        ["post", "credit", "alice", "cash", "5", "--txn", "t"],
    ):
        code, _, err = cli(*args, "--program", "shop")
        assert (code, one_error(err)) == (1, f"error: {damaged}"), args


POST = ["post", "credit", "alice", "cash"]


@sqlite_only
@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([*POST, "1.5", "--txn", "x"], 2, "amount must be an integer"),
        ([*POST, "ten", "--txn", "x"], 2, "amount must be an integer"),
        ([*POST, "0", "--txn", "x"], 2, "amount must be positive"),
        ([*POST, "-5", "--txn", "x"], 2, "amount must be positive"),
        ([*POST, "9" * 40, "--txn", "x"], 2, "exceeds the maximum"),
        ([*POST, "5", "--txn", ""], 2, "transaction id is required"),
        ([*POST, "5", "--txn", "x" * 200], 2, "longer than 128"),
        ([*POST, "5", "--txn", "has space"], 2, "may hold only"),
        ([*POST, "5", "--txn", "x", "--meta", "novalue"], 2, "--meta takes KEY=VALUE"),
        ([*POST, "5", "--txn", "x", "--to", "bob"], 2, "--to applies to transfers only"),
        (["post", "transfer", "alice", "cash", "5", "--txn", "x"], 2, "needs --to"),
        (["post", "credit", "nobody", "cash", "5", "--txn", "x"], 4, "account nobody not found"),
        (["post", "credit", "alice", "gold", "5", "--txn", "x"], 4, "no fund 'gold'"),
        (["post", "debit", "alice", "cash", "5000", "--txn", "x"], 3, "insufficient funds"),
        ([*POST, "7", "--txn", "seed"], 5, "used before with a different request"),
        (["account", "show", "nobody"], 4, "account nobody not found"),
        (["history", "alice", "--fund", "cash", "--limit", "0"], 2, "limit must be"),
        (["history", "alice", "--fund", "cash", "--cursor", "garbage"], 2, "cursor"),
        (["check", "--account", "nobody"], 4, "account nobody not found"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_input_is_one_line_and_changes_nothing(
    cli: Cli, ledger: Ledger, args: list[str], code: int, message: str
) -> None:
    ledger.accounts.open("shop", "alice")
    ledger.transactions.credit("shop", "alice", "cash", 100, txn_id="seed")
    got, out, err = cli(*args, "--program", "shop")
    assert got == code, (out, err)
    assert message in err
    assert err.startswith("error: ")
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in out + err
    assert ledger.accounts.get("shop", "alice").fund("cash").balance == 100
    assert [e.txn_id for e in ledger.accounts.iter_history("shop", "alice", "cash")] == ["seed"]


@sqlite_only
def test_usage_errors_name_the_problem(cli: Cli) -> None:
    code, _, err = cli(*POST, "5", "--program", "shop")
    assert code == 2
    assert "Missing option '--txn'" in err
    code, _, err = cli(*POST, "5", "--txn", "x", "--program", "nope")
    assert (code, err.strip()) == (4, "error: program nope not found")


@sqlite_only
def test_store_problems_are_one_line(cli: Cli, tmp_path: Path) -> None:
    cases = {
        "mysql://db": "accepted: sqlite:///PATH.db",
        "sqlite://relative.db": "accepted: sqlite:///PATH.db",
        f"sqlite:///{tmp_path}/missing/dir/x.db": "does not exist",
    }
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not an SQLite file " * 200)
    cases[f"sqlite:///{corrupt}"] = "cannot use SQLite file"
    for url, message in cases.items():
        code, out, err = cli(
            "account", "show", "alice", "--program", "shop", "--store", url, store=False
        )
        assert code != 0, url
        assert message in err, (url, err)
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in out + err


@sqlite_only
def test_a_read_only_store_refuses_writes_in_one_line(
    cli: Cli, ledger: Ledger, tmp_path: Path
) -> None:
    ledger.accounts.open("shop", "alice")
    ledger.store.close()
    db = tmp_path / "tallybook.db"
    for name in os.listdir(tmp_path):
        (tmp_path / name).chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        if os.access(db, os.W_OK):
            pytest.skip("running as a user who may write read-only files (root)")
        code, out, err = cli(
            "post", "credit", "alice", "cash", "5", "--txn", "ro", "--program", "shop"
        )
        assert code != 0
        assert err.startswith("error: ")
        assert "Traceback" not in out + err
    finally:
        tmp_path.chmod(0o755)


def _commands(command: Any, path: list[str]) -> Iterator[list[str]]:
    """Every command path under ``command`` (typer vendors click: duck-typed)."""
    yield path
    if hasattr(command, "list_commands"):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            yield from _commands(command.get_command(ctx, name), [*path, name])


#: the CLI's click tree, built once for the help tests (see :func:`_help`)
_ROOT = typer.main.get_command(app)


def _help(path: list[str], **env: str) -> click.testing.Result:
    """``tallybook PATH --help`` in-process, on the click tree built once: typer's
    CliRunner builds the tree again on every invoke (0.16 s; 13 s for all the
    commands' help against 1.5 s), and its usage lines wrap unlike the console
    script's."""
    return click.testing.CliRunner().invoke(
        _ROOT, [*path, "--help"], prog_name="tallybook", env=env or None
    )


def test_every_command_has_help_with_an_example() -> None:
    paths = list(_commands(_ROOT, []))
    names = {" ".join(p) for p in paths}
    assert {"", "account open", "account show", "post", "history", "check", "serve"} <= names
    assert {
        "table create",
        "table template",
        "keys create",
        "keys revoke",
        "program create",
    } <= names
    for path in paths:
        result = _help(path)
        assert result.exit_code == 0, (path, result.output)
        assert "Example" in result.output, f"tallybook {' '.join(path)} --help has no example"


def test_no_help_shows_a_value_after_a_flag() -> None:
    """A flag takes no value (``--json true`` is refused), so its help shows none:
    typer 0.29 drew ``--json <bool>`` and ``--help <bool>`` in every command's help."""
    for path in _commands(_ROOT, []):
        result = _help(path)
        assert result.exit_code == 0, (path, result.output)
        assert "<bool>" not in result.output, f"tallybook {' '.join(path)} --help"
        assert re.search(r"--help +Show this message", result.output), path
    shown = _help(["post"]).output
    assert re.search(r"--json +Print JSON instead", shown), shown


def test_every_command_summary_is_one_line() -> None:
    """A command's summary (its help's first paragraph) is what a group's
    ``--help`` lists; a line break in it shows as a break mid-sentence there."""
    root = typer.main.get_command(app)
    broken = []
    for path in _commands(root, []):
        command = root
        for name in path:
            command = command.get_command(click.Context(command), name)  # type: ignore[attr-defined]
        summary = (command.short_help or command.help or "").strip().split("\n\n")[0]
        if "\n" in summary:
            broken.append(" ".join(path))
    assert broken == []


def test_readme_cli_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """The README's ``## CLI`` block, run with the installed console script."""
    block = blocks(README.read_text(), "bash", after="## CLI")[0]
    result = DocShell(tmp_path).run(block)
    assert "ok" in result.stdout.splitlines()[-1]
    assert (tmp_path / "tallybook.db").exists()


def test_every_option_and_argument_has_help() -> None:
    """`--help` describes every option and argument a user can give (hidden aliases
    aside): `post --description`, `webhooks create --description` and `webhooks
    deliveries --limit` were listed with no text."""
    root = typer.main.get_command(app)
    bare = []
    for path in _commands(root, []):
        command = root
        for name in path:
            command = command.get_command(click.Context(command), name)  # type: ignore[attr-defined]
        bare += [
            f"tallybook {' '.join(path)} {param.name}"
            for param in command.params
            if not getattr(param, "hidden", False) and not getattr(param, "help", None)
        ]
    assert bare == []


def test_every_example_in_help_is_one_complete_command() -> None:
    """An example in `--help` is copied line by line: each `tallybook ...` line must be
    the whole command (nothing it needs on the next line), with every required option.
    `billing list` showed its `--until` and `webhooks create` its `--types` on a
    line of their own, so the first line alone lacked `--until` or subscribed to
    every event type."""
    import shlex

    root = typer.main.get_command(app)
    broken = []
    for path in _commands(root, []):
        help_text = _help(path, COLUMNS="250").output
        lines = [re.sub(r"^Examples?: ", "", line.strip(" │")) for line in help_text.splitlines()]
        for line, following in zip(lines, [*lines[1:], ""], strict=True):
            if not line.startswith("tallybook ") or "[OPTIONS]" in line:
                continue
            command_line = re.split(r"\s(?:&&|>|\||#)", line)[0]
            if following.startswith("-") and not line.endswith(("\\", "&&")):
                broken.append(f"{command_line} / {following}")
                continue
            words = shlex.split(command_line)[1:]
            if words[:1] == ["--store"]:
                words = words[2:]  # the root option before the command
            command = root
            while hasattr(command, "commands") and words and words[0] in command.commands:
                command = command.commands[words.pop(0)]
            if hasattr(command, "commands"):
                continue  # prose that starts with "tallybook", not a command
            try:
                command.make_context("tallybook", words)
            except Exception as exc:  # a missing option; a file the example names is fine
                if type(exc).__name__ == "MissingParameter":
                    broken.append(f"{command_line}: {exc}")
    assert broken == []


def test_every_limit_option_states_its_range() -> None:
    """A `--limit` is refused outside its range, so its help says the range:
    `wallet transactions` and `report list` said only "Page size." and "At most
    this many." (both take 1-1000)."""
    root = typer.main.get_command(app)
    vague = []
    for path in _commands(root, []):
        command = root
        for name in path:
            command = command.get_command(click.Context(command), name)  # type: ignore[attr-defined]
        for param in command.params:
            if param.name == "limit" and not re.search(r"\b1-\d+\b", param.help or ""):
                vague.append(f"tallybook {' '.join(path)}: {param.help}")
    assert vague == []


def test_wallet_check_runs_the_wallet_invariants_from_the_cli(cli: Cli, ledger: Ledger) -> None:
    """The wallet invariants (withheld = active holds, bonus = grants + reserved, ...)
    were checked by the Python API only: no command ran them."""
    ledger.accounts.open("shop", "alice")
    ledger.wallet.credit("shop", "alice", "cash", 100, txn_id="c1")
    ledger.wallet.authorize("shop", "alice", 30, hold_id="h1")
    assert cli.json("wallet", "check", "alice", "-p", "shop") == {
        "account": "alice",
        "ok": True,
        "violations": [],
    }
    assert cli.ok("wallet", "check", "alice", "-p", "shop").strip() == "ok"
    ledger.transactions.credit("shop", "alice", "bonus", 70, txn_id="loose")  # no grant
    code, out, _ = cli("wallet", "check", "alice", "-p", "shop")
    assert code == 1
    assert "bonus: balance 70 != grants 0" in out
    assert out.strip().endswith("1 violation(s)")
    code, _, err = cli("wallet", "check", "ghost", "-p", "shop")
    assert (code, err.strip()) == (4, "error: account ghost not found in program shop")
