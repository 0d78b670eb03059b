"""The CLI's contract for bad input, command by command: one ``error:`` line on
stderr and a non-zero exit code, never a traceback, never a half-applied write.

Commands run in-process through :func:`tallybook.cli.main` (the console script)
on a SQLite file.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tallybook.cli import app
from tallybook.errors import NotFound, ValidationError
from tallybook.ledger import Ledger

from .test_ledger_cli import _ROOT, Cli, _commands, one_error

DAY = timedelta(days=1)


#: every command path, groups included (on the click tree test_ledger_cli builds once)
PATHS = list(_commands(_ROOT, []))


def _leaves() -> list[list[str]]:
    """Every command a user can run (not the groups), e.g. ``["account", "show"]``."""
    return [p for p in PATHS if p and not any(q[: len(p)] == p and q != p for q in PATHS)]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'contract.db'}"


@pytest.fixture
def cli(url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(monkeypatch, capsys, url)


def _groups() -> list[list[str]]:
    """``tallybook`` itself and every command group (``wallet``, ``loyalty config``...)."""
    leaves = _leaves()
    return [p for p in PATHS if p not in leaves]


@pytest.mark.parametrize("path", _groups(), ids=lambda p: " ".join(["tallybook", *p]))
def test_a_group_without_a_command_prints_its_help_and_exits_2(cli: Cli, path: list[str]) -> None:
    # one rule, documented in README: `tallybook` alone as `tallybook wallet` alone,
    # its help on stdout and exit 2 (a usage error: a script gets no silent success)
    code, out, err = cli(*path, store=False)
    assert (code, err) == (2, "")
    assert " ".join(["tallybook", *path, "[OPTIONS] COMMAND"]) in " ".join(out.split())
    assert "Commands" in out


@pytest.mark.parametrize("path", _leaves(), ids=" ".join)
def test_an_unknown_option_is_one_error_line_exit_2(cli: Cli, path: list[str]) -> None:
    # was: usage lines, a "Try" line and a rich box of several lines
    code, out, err = cli(*path, "--no-such-option")
    assert code == 2, (out, err)
    line = one_error(err)
    assert "--no-such-option" in line or "Missing" in line, line
    assert "Traceback" not in out + err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["account", "show", "alice"],
            "error: Missing option '--program' / '-p' (env var: 'TALLYBOOK_PROGRAM'). "
            "Try 'tallybook account show --help'.",
        ),
        (
            ["account", "show", "--program", "shop"],
            "error: Missing argument 'account'. Try 'tallybook account show --help'.",
        ),
        (["nosuch"], "error: No such command 'nosuch'. Try 'tallybook --help'."),
        (
            ["account", "show", "alice", "bob", "--program", "shop"],
            "error: Got unexpected extra argument(s) (bob). Try 'tallybook account show --help'.",
        ),
        (
            ["history", "alice", "--program", "shop", "--limit", "many"],
            "error: Invalid value for '--limit': 'many' is not an integer (ASCII digits only). "
            "Try 'tallybook history --help'.",
        ),
        (
            ["post", "refund", "alice", "cash", "5", "--txn", "t", "--program", "shop"],
            "error: Invalid value for 'kind': 'refund' is not one of 'credit', 'debit', "
            "'transfer', 'adjust'. Try 'tallybook post --help'.",
        ),
        (
            ["post", "credit", "alice", "cash", "5", "--program", "shop"],
            "error: Missing option '--txn'. Try 'tallybook post --help'.",
        ),
    ],
)
def test_usage_errors_are_one_line_naming_the_problem(
    cli: Cli, args: list[str], message: str
) -> None:
    code, out, err = cli(*args)
    assert code == 2
    # the hint names the command as it was run (``python -m tallybook`` too)
    assert re.sub(r"Try '.*?tallybook ", "Try 'tallybook ", one_error(err)) == message
    assert out == ""


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["wallet", "balance", "alice", "--program"], "wallet balance"),
        (["--store", "x", "account", "show", "alice", "--program"], "account show"),
        (["--store"], ""),
    ],
)
def test_an_option_without_its_value_names_the_commands_help(
    cli: Cli, args: list[str], command: str
) -> None:
    # click raises this error without a context: the hint is found from the words
    code, out, err = cli(*args, store=False)
    assert code == 2
    option = args[-1]
    hint = " ".join(["tallybook", command]).strip()
    assert re.sub(r"Try '.*?tallybook\b", "Try 'tallybook", one_error(err)) == (
        f"error: Option '{option}' requires an argument. Try '{hint} --help'."
    )
    assert out == ""


def test_help_stays_rich_and_exits_0(cli: Cli) -> None:
    code, out, _ = cli("account", "show", "--help", store=False)
    assert code == 0
    assert "tallybook account show [OPTIONS]" in out
    assert "╭─ Options" in out


#: every command that only reads, with what it needs to run
READS = [
    ["account", "show", "alice", "-p", "shop"],
    ["history", "alice", "--fund", "cash", "-p", "shop"],
    ["check", "-p", "shop"],
    ["program", "show", "shop"],
    ["keys", "list", "-p", "shop"],
    ["loyalty", "config", "show", "-p", "shop"],
    ["loyalty", "tier", "alice", "-p", "shop"],
    ["loyalty", "members", "gold", "-p", "shop"],
    ["loyalty", "expiring", "alice", "-p", "shop"],
    ["loyalty", "order", "o-1", "-p", "shop"],
    ["notifications", "list", "alice", "-p", "shop"],
    ["notifications", "history", "alice", "-p", "shop"],
    ["notifications", "rules", "-p", "shop"],
    ["billing", "list", "-p", "shop", "--since", "2026-01-01", "--until", "2026-01-02"],
    ["report", "list", "-p", "shop"],
    # writes files, but reads the store only (was: made the mistyped store file)
    ["report", "rerun", "-p", "shop", "--window", "20260101T000000Z_20260102T000000Z"],
    ["wallet", "balance", "alice", "-p", "shop"],
    ["wallet", "grants", "alice", "-p", "shop"],
    ["wallet", "hold", "h-1", "-p", "shop"],
    ["wallet", "holds", "alice", "-p", "shop"],
    ["wallet", "transactions", "alice", "-p", "shop"],
    ["wallet", "transaction", "t-1", "-p", "shop"],
    ["webhooks", "list", "-p", "shop"],
    ["webhooks", "deliveries", "sub_0123456789abcdef", "-p", "shop"],
]


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_read_refuses_a_sqlite_file_that_does_not_exist(
    cli: Cli, tmp_path: Path, args: list[str]
) -> None:
    # was: the mistyped file was created empty and the read answered from it
    typo = tmp_path / "typo.db"
    code, out, err = cli(*args, "--store", f"sqlite:///{typo}", store=False)
    assert code == 1, (out, err)
    assert one_error(err).startswith(f"error: SQLite file {typo} does not exist")
    assert list(tmp_path.iterdir()) == []


def test_a_write_still_creates_the_sqlite_file(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli("program", "create", "shop")
    assert code == 0, err
    assert (tmp_path / "contract.db").exists()
    code, out, err = cli("program", "show", "shop")
    assert code == 0, err
    assert "shop" in out


#: writes refused on a store that does not exist yet (it holds no program)
REFUSED_WRITES = [
    ["post", "credit", "alice", "cash", "5", "--txn", "t-1", "-p", "shop"],
    ["account", "open", "alice", "-p", "shop"],
    ["wallet", "credit", "alice", "cash", "-1", "--txn", "t-1", "-p", "shop"],
    ["keys", "create", "--name", "ops", "-p", "shop"],
    ["notifications", "add", "alice", "Promo", "-p", "shop"],
    ["webhooks", "create", "https://example.com/h", "-p", "shop"],
    ["expire", "-p", "shop"],
    ["program", "threshold", "shop", "cash", "5"],
]


@pytest.mark.parametrize("args", REFUSED_WRITES, ids=" ".join)
def test_a_write_on_a_sqlite_file_that_does_not_exist_makes_nothing(
    cli: Cli, tmp_path: Path, args: list[str]
) -> None:
    # was: the refused command (bad input, no such program) left an empty typo.db
    # and its typo.db-writer.lock behind
    typo = tmp_path / "typo.db"
    code, out, err = cli(*args, "--store", f"sqlite:///{typo}", store=False)
    assert code == 4, (out, err)
    assert one_error(err).startswith(f"error: SQLite file {typo} does not exist")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["program", "create", "a b"],
        ["program", "create", "shop", "--currency", "US-D"],
        ["program", "create", "shop", "--name", "x" * 201],
    ],
    ids=["id", "currency", "name"],
)
def test_program_create_checks_its_input_before_making_the_store(
    cli: Cli, tmp_path: Path, args: list[str]
) -> None:
    typo = tmp_path / "typo.db"
    code, out, err = cli(*args, "--store", f"sqlite:///{typo}", store=False)
    assert code == 2, (out, err)
    one_error(err)
    assert list(tmp_path.iterdir()) == []


def test_a_refused_currency_is_named_as_the_option_names_it(cli: Cli, tmp_path: Path) -> None:
    # was: "error: unit ' USD' must be 1-16 letters, digits or '_'": no option is named unit
    code, out, err = cli("program", "create", "shop", "--currency", " USD")
    assert (code, out) == (2, ""), err
    assert one_error(err) == "error: currency ' USD' must be 1-16 letters, digits or '_'"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValidationError, match=r"^currency 'US D' must be"):
        Ledger.open(f"sqlite:///{tmp_path / 'py.db'}").programs.create("shop", currency="US D")


@pytest.mark.parametrize("args", [["webhooks", "rekey"], ["webhooks", "deliver", "--once"]])
def test_webhook_rekey_and_deliver_refuse_a_store_that_does_not_exist(
    cli: Cli, tmp_path: Path, args: list[str]
) -> None:
    # was: each made typo.db and typo.db-webhook.key and answered "0 ... sealed" / "delivered 0"
    typo = tmp_path / "typo.db"
    code, out, err = cli(*args, "--store", f"sqlite:///{typo}", store=False)
    assert (code, out) == (1, ""), err
    assert one_error(err).startswith(f"error: SQLite file {typo} does not exist")
    assert list(tmp_path.iterdir()) == []


def test_webhook_rekey_on_a_store_without_a_key_says_so_and_makes_none(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # was: it made contract.db-webhook.key, a secret sealing nothing, and said
    # "0 subscription secret(s) sealed under the current key"
    monkeypatch.delenv("TALLYBOOK_WEBHOOK_KEY", raising=False)
    monkeypatch.delenv("TALLYBOOK_WEBHOOK_KEY_SECRET", raising=False)
    assert cli("program", "create", "shop")[0] == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = cli("webhooks", "rekey")
    assert (code, out) == (2, ""), err
    key_file = tmp_path / "contract.db-webhook.key"
    assert one_error(err).startswith(f"error: no webhook key: key file {key_file} does not exist")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_refused_write_on_an_existing_store_keeps_it(cli: Cli, tmp_path: Path) -> None:
    assert cli("program", "create", "shop")[0] == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    assert cli("post", "credit", "alice", "cash", "5", "--txn", "t-1", "-p", "shop")[0] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert cli("program", "show", "shop")[0] == 0


@pytest.mark.parametrize("as_json", [[], ["--json"]], ids=["text", "json"])
def test_events_and_billing_ingest_exit_2_when_a_line_is_rejected(
    cli: Cli, tmp_path: Path, as_json: list[str]
) -> None:
    # was: events ingest exited 0 with lines rejected, billing ingest 2
    assert cli("program", "create", "shop")[0] == 0
    assert cli("account", "open", "alice", "-p", "shop")[0] == 0
    events = tmp_path / "events.ndjson"
    good = '{"id": "e1", "account": "alice", "type": "TopUp", "payload": {}}\n'
    events.write_text(good + "{broken\n")
    code, out, err = cli("events", "ingest", str(events), "-p", "shop", *as_json)
    assert code == 2, (out, err)
    assert "Traceback" not in out + err
    records = tmp_path / "records.ndjson"
    records.write_text("{broken\n")
    assert cli("billing", "ingest", str(records), "-p", "shop", *as_json)[0] == 2
    events.write_text(good)  # all good: exit 0 (the first line is a replay now)
    assert cli("events", "ingest", str(events), "-p", "shop", *as_json)[0] == 0


def test_keys_create_refuses_a_program_that_does_not_exist(cli: Cli, url: str) -> None:
    # was: a mistyped --program was created with default funds and given a key
    assert cli("program", "create", "shop")[0] == 0
    code, out, err = cli("keys", "create", "--program", "shpo")
    assert code == 4
    assert out == ""
    assert one_error(err) == (
        "error: program shpo not found; create it first: tallybook program create shpo"
    )
    assert Ledger.open(url).programs.list() == ["shop"]


def test_events_ingest_rejects_a_line_that_is_not_utf8(cli: Cli, url: str, tmp_path: Path) -> None:
    # was: the bad bytes were replaced by U+FFFD and the event added ("caf\ufffd")
    assert cli("program", "create", "shop")[0] == 0
    assert cli("account", "open", "alice", "-p", "shop")[0] == 0
    events = tmp_path / "events.ndjson"
    events.write_bytes(
        b'{"id": "e1", "account": "alice", "type": "Latin1", "payload": {"x": "caf\xe9"}}\n'
        b'{"id": "e2", "account": "alice", "type": "Utf8", "payload": {"x": "caf\xc3\xa9"}}\n'
    )
    code, out, err = cli("events", "ingest", str(events), "-p", "shop")
    assert code == 2, (out, err)
    assert "1 added" in out
    assert "1 rejected" in out
    assert err.startswith("line 1: not-json: ")
    found = Ledger.open(url).notifications.list("shop", "alice")
    assert [(n.type, n.payload) for n in found] == [("Utf8", {"x": "café"})]


def test_billing_list_pages_with_a_cursor(cli: Cli, tmp_path: Path) -> None:
    # was: only the first --limit records, no note that more exist and no --cursor
    assert cli("program", "create", "shop")[0] == 0
    now = datetime.now(UTC)
    records = tmp_path / "records.ndjson"
    records.write_text(
        "".join(
            f'{{"id": "r{i}", "partner": "acme", "order_id": "o{i}", "amount": 100, '
            f'"currency": "USD", "rate": "0.05", "time": "{now:%Y-%m-%dT%H:%M:%SZ}"}}\n'
            for i in range(3)
        )
    )
    assert cli("billing", "ingest", str(records), "-p", "shop")[0] == 0
    since, until = (f"{t:%Y-%m-%dT%H:%M:%SZ}" for t in (now - DAY, now + DAY))
    window = ["-p", "shop", "--since", since, "--until", until]
    code, out, err = cli("billing", "list", *window, "--limit", "2")
    assert code == 0, err
    cursor = re.search(r"next page: --cursor (\S+)", out)
    assert cursor is not None, out
    code, out, err = cli("billing", "list", *window, "--limit", "2", "--cursor", cursor[1])
    assert code == 0, err
    assert "next page" not in out
    seen = re.findall(r"│ (r\d) ", out)
    assert len(seen) == 1


def test_webhooks_deliveries_pages_with_a_cursor(cli: Cli) -> None:
    # was: the first --limit deliveries only (at most 200), the cursor thrown away
    assert cli("program", "create", "shop")[0] == 0
    assert cli("account", "open", "alice", "-p", "shop")[0] == 0
    hook = ["http://127.0.0.1:9/hook", "-p", "shop", "--allow-http", "--id", "s1"]
    assert cli("webhooks", "create", *hook)[0] == 0
    for txn in ("t1", "t2", "t3"):
        assert cli("post", "credit", "alice", "cash", "5", "--txn", txn, "-p", "shop")[0] == 0
    assert cli("webhooks", "deliver", "--once")[0] == 0
    code, out, err = cli("webhooks", "deliveries", "s1", "-p", "shop", "--limit", "2")
    assert code == 0, err
    cursor = re.search(r"next page: --cursor (\S+)", out)
    assert cursor is not None, out
    code, out, err = cli(
        "webhooks",
        "deliveries",
        "s1",
        "-p",
        "shop",
        "--limit",
        "2",
        "--cursor",
        cursor[1],
        "--json",
    )
    assert code == 0, err
    assert len(json.loads(out)) == 1
    assert err == ""


@pytest.mark.parametrize("where", ["global", "command"])
def test_an_empty_store_url_is_refused_not_read_as_the_default(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    # was: --store "" (an unset variable) opened ./tallybook.db, creating it
    monkeypatch.chdir(tmp_path)
    store = ["--store", ""]
    args = ["program", "create", "shop"]
    code, out, err = cli(*(store + args if where == "global" else args + store), store=False)
    assert code == 2, (out, err)
    assert one_error(err).startswith("error: bad store URL '': it is empty")
    assert list(tmp_path.iterdir()) == []


def test_billing_list_reads_a_time_without_a_zone_as_utc(cli: Cli) -> None:
    # was: "since needs a time zone" (exit 2), where history and notifications take UTC
    assert cli("program", "create", "shop")[0] == 0
    day = datetime.now(UTC).date()
    window = ["--since", f"{day}", "--until", f"{day + DAY}T00:00"]
    code, out, err = cli("billing", "list", "-p", "shop", *window, "--json")
    assert code == 0, err
    assert json.loads(out) == {"records": [], "cursor": None}
    code, _, err = cli("billing", "list", "-p", "shop", "--since", "soon", "--until", f"{day}")
    assert code == 2
    assert one_error(err) == "error: --since must be an ISO 8601 time, got 'soon'"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["post", "credit", "alice", "cash", "5", "--txn", "t", "--desc", "x"],
            "error: No such option: --desc (Possible options: --description, --order). "
            "Try 'tallybook post --help'.",
        ),
        (
            ["post", "credit", "alice", "cash", "--bogus", "5", "--txn", "t"],
            "error: No such option: --bogus. Try 'tallybook post --help'.",
        ),
        (
            ["program", "threshold", "shop", "cash", "5", "--clr"],
            "error: No such option: --clr (Possible options: --clear). "
            "Try 'tallybook program threshold --help'.",
        ),
    ],
)
def test_a_mistyped_option_of_a_command_with_a_negative_argument_is_named(
    cli: Cli, args: list[str], message: str
) -> None:
    # was: "Got unexpected extra argument(s) (--desc x)", or "(5)" with --bogus as the amount
    code, out, err = cli(*args, "-p", "shop")
    assert code == 2, (out, err)
    assert re.sub(r"Try '.*?tallybook ", "Try 'tallybook ", one_error(err)) == message


def test_negative_amounts_and_option_values_starting_with_a_dash_still_parse(
    cli: Cli, url: str
) -> None:
    assert cli("program", "create", "shop")[0] == 0
    assert cli("account", "open", "alice", "-p", "shop")[0] == 0
    assert cli("post", "credit", "alice", "cash", "10", "--txn", "t0", "-p", "shop")[0] == 0
    args = ["post", "adjust", "alice", "cash", "-5", "--txn", "t1", "-pshop"]
    code, out, err = cli(*args, "-d", "-dash", "--meta", "-k=-v", "--json")
    assert code == 0, err
    assert json.loads(out)["metadata"] == {"-k": "-v"}
    code, _, err = cli("post", "adjust", "alice", "cash", "-0.5", "--txn", "t2", "-p", "shop")
    assert code == 2
    assert one_error(err) == (
        "error: amount must be an integer number of minor units in ASCII digits, got '-0.5'"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["notifications", "rules", "--set", "missing.json"],
        ["notifications", "add", "alice", "Promo", "--expires-at", "soon"],
    ],
    ids=lambda a: a[1],
)
def test_bad_input_checked_by_the_command_makes_no_store_file(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    # was: the error line, and an empty tallybook.db (with its lock file) left behind
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(*args, "-p", "shop", store=False)
    assert code == 2, (out, err)
    one_error(err)
    assert list(tmp_path.iterdir()) == []


def test_webhooks_rekey_of_an_unknown_program_is_not_found(
    cli: Cli, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # was: "0 subscription secret(s) sealed under the current key" and exit 0
    monkeypatch.setenv("TALLYBOOK_WEBHOOK_KEY", "tallybook-test-webhook-key-0123456789")
    assert cli("program", "create", "shop")[0] == 0
    code, out, err = cli("webhooks", "rekey", "--program", "shpo")
    assert code == 4, (out, err)
    assert one_error(err) == "error: program shpo not found"
    with pytest.raises(NotFound):
        Ledger.open(url).webhooks.rekey("shpo")
    assert cli("webhooks", "rekey", "--program", "shop")[0] == 0
    assert cli("webhooks", "rekey", "-p", "shop")[0] == 0  # -p, as on every other command


def test_a_read_leaves_another_applications_sqlite_file_alone(cli: Cli, tmp_path: Path) -> None:
    # was: tallybook's table added to it and its journal switched to WAL, then
    # "program shop not found" as if it were an empty store
    other = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
        conn.commit()
    code, out, err = cli(
        "account", "show", "alice", "-p", "shop", "--store", f"sqlite:///{other}", store=False
    )
    assert code == 1, (out, err)
    assert one_error(err).startswith(f"error: SQLite file {other} holds no tallybook store")
    with contextlib.closing(sqlite3.connect(other)) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("users",)]
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


BOM = "\ufeff"  # a byte order mark, as Windows editors start a UTF-8 file


def test_a_byte_order_mark_at_the_start_of_an_input_file_is_not_part_of_it(
    cli: Cli, tmp_path: Path
) -> None:
    # was: billing ingest rejected line 1 ("not valid JSON (Unexpected UTF-8 BOM ...)",
    # exit 2), notifications rules --set and loyalty config load refused the file
    assert cli("program", "create", "shop")[0] == 0
    assert cli("billing", "configure", "-p", "shop", "--start", "2026-01-01")[0] == 0
    record = {
        "partner": "acme",
        "order_id": "o1",
        "amount": 1999,
        "currency": "USD",
        "rate": "0.05",
        "time": "2026-01-01T12:00:00Z",
    }
    records = tmp_path / "records.ndjson"
    records.write_text(
        BOM + "".join(json.dumps({"id": f"r{i}", **record}) + "\n" for i in (1, 2)),
        encoding="utf-8",
    )
    code, out, err = cli("billing", "ingest", str(records), "-p", "shop", "--json")
    assert code == 0, (out, err)
    assert json.loads(out)["created"] == 2
    events = tmp_path / "events.ndjson"
    events.write_text(
        BOM + '{"id": "e1", "account": "alice", "type": "Promo", "payload": {}}\n',
        encoding="utf-8",
    )
    assert cli("account", "open", "alice", "-p", "shop")[0] == 0
    code, out, err = cli("events", "ingest", str(events), "-p", "shop", "--json")
    assert code == 0, (out, err)
    assert json.loads(out)["added"] == 1
    rules = tmp_path / "rules.json"
    rules.write_text(BOM + '{"retention_days": 30}', encoding="utf-8")
    code, out, err = cli("notifications", "rules", "-p", "shop", "--set", str(rules))
    assert code == 0, err
    assert json.loads(out)["retention_days"] == 30
    toml = tmp_path / "loyalty.toml"
    toml.write_text(
        BOM + (Path(__file__).parents[2] / "examples" / "loyalty.toml").read_text(),
        encoding="utf-8",
    )
    code, out, err = cli("loyalty", "config", "load", str(toml), "-p", "shop")
    assert code == 0, err
    assert cli("loyalty", "config", "show", "-p", "shop")[0] == 0


def test_stored_text_with_square_brackets_is_printed_as_it_is(cli: Cli, tmp_path: Path) -> None:
    # was: rich read "[/x]" as markup: `webhooks create` of such a URL subscribed it,
    # printed its secret, then ended "error: unexpected MarkupError" (exit 1), and
    # `webhooks list`, `keys list` and `notifications list` failed so from then on;
    # "[bold]b[/bold]" was printed as "b"
    assert cli("program", "create", "shop")[0] == 0
    assert cli("account", "open", "alice", "-p", "shop")[0] == 0
    url = "https://example.com/hooks/[/x]"
    code, out, err = cli("webhooks", "create", url, "--id", "s1", "-p", "shop")
    assert code == 0, err
    assert "MarkupError" not in err
    code, out, err = cli("webhooks", "list", "-p", "shop")
    assert code == 0, err
    assert url in out
    name = "[bold]ops[/bold] [/y]"
    assert cli("keys", "create", "--name", name, "-p", "shop")[0] == 0
    code, out, err = cli("keys", "list", "-p", "shop")
    assert code == 0, err
    assert name in out
    payload = '{"a": "[/x] [bold]b[/bold]"}'
    assert cli("notifications", "add", "alice", "Promo", "--payload", payload, "-p", "shop")[0] == 0
    code, out, err = cli("notifications", "list", "alice", "-p", "shop")
    assert code == 0, err
    assert payload in out
    records = tmp_path / "records.ndjson"
    records.write_text('{"id": "r[/x]"}\n')
    code, out, err = cli("billing", "ingest", str(records), "-p", "shop")
    assert code == 2, err
    assert "line 1: record id 'r[/x]'" in err


def test_the_store_option_says_which_commands_make_a_sqlite_file() -> None:
    # was: "A command that only reads refuses a SQLite file that does not exist",
    # where every command but program create, serve, table create and torture does
    from typer.testing import CliRunner

    text = CliRunner().invoke(app, ["wallet", "credit", "--help"], env={"COLUMNS": "400"}).output
    assert "Only program create, serve, table create and torture make a SQLite file" in text


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--threads", "100000000000000000000"),
        ("--http-threads", "257"),
        ("--processes", "99999999999"),
        ("--readers", "257"),
        ("--ops", "1000000000000"),
    ],
)
def test_torture_refuses_a_workload_too_large_to_start(cli: Cli, option: str, value: str) -> None:
    # was: --threads 1e20 ended "error: unexpected OverflowError" (exit 1), 1e11 threads
    # a MemoryError, and --processes 99999999999 started processes until it was killed
    code, out, err = cli("torture", option, value, "--store", "memory://t", store=False)
    assert code == 2, (out, err)
    assert one_error(err).startswith(f"error: Invalid value for '{option}': {value} is not in")
