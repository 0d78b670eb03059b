"""Defects found by a new user's pass over the CLI, each pinned as it was reported.

Commands run in-process through :func:`tallybook.cli.main` (the console script)
on a SQLite file, so what is asserted is what a user sees: the output, one
``error:`` line and the exit code.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.core
import typer.main
from rich.console import Console

from tallybook import __version__
from tallybook.cli import app, output
from tallybook.cli import notifications as cli_notifications
from tallybook.errors import ValidationError
from tallybook.ledger import Ledger
from tallybook.services.loyalty.service import load_toml

from .test_ledger_cli import Cli, one_error


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'qa.db'}"


@pytest.fixture
def ledger(url: str) -> Ledger:
    ledger = Ledger.open(url)
    ledger.programs.create("shop")
    ledger.accounts.open("shop", "alice")
    return ledger


@pytest.fixture
def cli(
    ledger: Ledger, url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Cli:
    # what a terminal of 80 columns shows (a pipe gets each table at its natural width)
    monkeypatch.setattr(
        output, "console", Console(width=80, soft_wrap=True, force_terminal=True, color_system=None)
    )
    return Cli(monkeypatch, capsys, url)


@pytest.mark.parametrize("payload", ["[1, 2]", '"text"', "5"])
def test_a_notification_payload_that_is_not_an_object_is_bad_input(
    cli: Cli, ledger: Ledger, payload: str
) -> None:
    # was: "error: unexpected TypeError: cannot convert dictionary update sequence ..." (exit 1)
    code, _, err = cli("notifications", "add", "alice", "Promo", "--payload", payload, "-p", "shop")
    assert code == 2
    assert one_error(err) == "error: payload must be a JSON object"
    with pytest.raises(ValidationError, match="payload must be a JSON object"):
        ledger.notifications.add("shop", "alice", "Promo", [1, 2])  # type: ignore[arg-type]
    assert ledger.notifications.list("shop", "alice") == []


def test_dismiss_without_an_id_or_a_type_says_what_to_give(cli: Cli) -> None:
    # was: "give either a notification ID or --type, not both" when neither was given
    code, _, err = cli("notifications", "dismiss", "alice", "-p", "shop")
    assert code == 2
    assert one_error(err) == "error: give a notification ID or --type TYPE"
    code, _, err = cli("notifications", "dismiss", "alice", "n-1", "--type", "X", "-p", "shop")
    assert code == 2
    assert "not both" in one_error(err)


def test_dismiss_type_on_an_unknown_account_is_not_found(cli: Cli) -> None:
    # was: "no active LowBalance notification" and exit 0, where HTTP answers 404
    code, out, err = cli("notifications", "dismiss", "ghost", "--type", "LowBalance", "-p", "shop")
    assert code == 4
    assert one_error(err) == "error: account ghost not found in program shop"
    assert out == ""
    out = cli.ok("notifications", "dismiss", "alice", "--type", "LowBalance", "-p", "shop")
    assert out.strip() == "no active LowBalance notification"


def test_events_ingest_into_an_unknown_program_is_one_error(cli: Cli, tmp_path: Path) -> None:
    # was: every line "rejected" (not-found) and exit 0
    events = tmp_path / "events.ndjson"
    events.write_text('{"id": "e1", "account": "alice", "type": "TopUp", "payload": {}}\n')
    code, out, err = cli("events", "ingest", str(events), "-p", "nosuch")
    assert code == 4
    assert one_error(err) == "error: program nosuch not found"
    assert out == ""
    code, out, _ = cli("events", "ingest", str(events), "-p", "shop")
    assert code == 0
    assert "1 added" in out


def test_history_takes_the_times_json_prints(cli: Cli, ledger: Ledger) -> None:
    # was: "Invalid value for '--since': '2026-01-01T00:00:00Z' does not match the formats ..."
    ledger.transactions.credit("shop", "alice", "cash", 5, txn_id="t-1")
    base = ("history", "alice", "--fund", "cash", "-p", "shop", "--json")
    for since in ("2020-01-01T00:00:00Z", "2020-01-01T02:00:00+02:00", "2020-01-01"):
        code, out, err = cli(*base, "--since", since)
        assert code == 0, err
        assert '"txn_id": "t-1"' in out
    code, out, _ = cli(*base, "--since", "2999-01-01T00:00:00Z")
    assert code == 0
    assert '"txn_id"' not in out
    code, out, _ = cli(*base, "--until", "2020-01-01T00:00:00Z")
    assert code == 0
    assert '"txn_id"' not in out
    code, _, err = cli(*base, "--since", "yesterday")
    assert code == 2
    assert one_error(err) == "error: --since must be an ISO 8601 time, got 'yesterday'"


def test_ids_other_commands_take_are_never_cut_in_tables(
    cli: Cli, ledger: Ledger, url: str
) -> None:
    # was: "order:order-10…", "sub_3bb02d3f3d9b…", "20261127T144500Z_20261…" at 80 columns
    txn = "order-2026-11-27-000123456"
    ledger.wallet.credit("shop", "alice", "cash", 2500, txn_id=txn)
    code, out, _ = cli("wallet", "transactions", "alice", "-p", "shop")
    assert code == 0
    assert txn in out
    window = "20261127T144500Z_20261127T150000Z"
    output.table(
        "reports of shop",
        ["kind", "window", "rows", "location", "written at"],
        [["billing", window, 0, "reports", "2026-11-27T15:05:23.612345+00:00"]],
    )
    sub = "sub_3bb02d3f3d9b2779"
    output.table(
        "webhook subscriptions of shop",
        ["id", "url", "types", "status", "secret"],
        [[sub, "https://example.com/hooks", "transaction.posted,hold.expired", "active", "…E5Y="]],
    )
    out = cli.capsys.readouterr().out
    assert window in out
    assert sub in out
    assert max(len(line) for line in out.splitlines()) <= 80


@pytest.fixture
def _tallybook_log_level() -> Iterator[None]:
    """``tallybook torture`` quiets the ``tallybook`` logger for the rest of the process."""
    logger = logging.getLogger("tallybook")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.mark.usefixtures("_tallybook_log_level")
def test_torture_runs_on_a_memory_store(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # was: "error: tallybook reconcile failed: error: program torture-... not found" (exit 1):
    # the reconcile step ran in a child process, which sees an empty memory://NAME
    cli = Cli(monkeypatch, capsys, "memory://qa-torture")
    args = ("torture", "--ops", "40", "--threads", "2", "--http-threads", "0", "--readers", "0")
    code, out, err = cli(*args, "--json")
    assert code == 0, err
    assert '"violations": []' in out
    code, _, err = cli(*args, "--processes", "1")
    assert code == 2
    assert one_error(err) == (
        "error: --processes needs a SQLite or DynamoDB store: memory:// lives in one process"
    )


def test_serve_on_a_port_in_use_is_one_error(cli: Cli, url: str) -> None:
    # was: uvicorn's JSON log lines ("[Errno 98] error while attempting to bind ...")
    # and exit code 3, which the README gives to business-rule refusals
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = cli("serve", "--port", str(port))
    assert code == 1
    assert one_error(err).startswith(f"error: cannot listen on 127.0.0.1:{port}: ")
    code, _, err = cli("serve", "--host", "no-such-host.invalid", "--port", str(port))
    assert code == 1
    assert one_error(err).startswith("error: cannot listen on no-such-host.invalid:")


def test_serve_refuses_a_short_session_secret_in_one_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # was: "error: unexpected ValueError: TALLYBOOK_SESSION_SECRET must hold ..." (exit 1),
    # the way an unforeseen failure is reported, for a setting the operator got wrong
    monkeypatch.setattr("uvicorn.run", lambda *args, **kwargs: None)
    monkeypatch.setenv("TALLYBOOK_SESSION_SECRET", "short")
    code, _, err = cli("serve", "--port", "0")
    assert code == 2
    assert one_error(err) == "error: TALLYBOOK_SESSION_SECRET must hold at least 16 bytes"


def test_reconcile_prints_its_result_alone_on_stdout(cli: Cli) -> None:
    # was: "\nreconcile: nothing to do\n": the progress display ended on stdout
    code, out, _ = cli("reconcile", "-p", "shop")
    assert code == 0
    assert out == "reconcile: nothing to do\n"


def test_every_group_example_runs(
    cli: Cli, ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # was: `tallybook billing --help` showed "tallybook billing list --program shop
    # --since 2026-01-01T00:00:00Z", which fails: "Missing option '--until'."
    monkeypatch.chdir(tmp_path)
    (tmp_path / "events.ndjson").write_text(
        '{"id": "e1", "account": "alice", "type": "TopUp", "payload": {}}\n'
    )
    examples = Path(__file__).resolve().parents[2] / "examples"
    ledger.loyalty.configure("shop", load_toml(str(examples / "loyalty.toml")))
    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    ran = []
    for name, group in root.commands.items():
        epilog = group.epilog or ""
        if not isinstance(group, typer.core.TyperGroup) or "Example: tallybook " not in epilog:
            continue
        words = shlex.split(epilog.split("Example: tallybook ", 1)[1])
        if any(w.startswith(("dynamodb://", "s3://")) for w in words):
            continue  # DynamoDB and S3 are not at hand here
        code, _, err = cli(*words)
        # 2 is a usage error or bad input; "program shop exists already" (5) is fine
        assert code != 2, f"{name}: tallybook {' '.join(words)}\n{err}"
        assert "unexpected" not in err
        ran.append(name)
    assert "billing" in ran
    assert len(ran) >= 8


def test_serve_shows_an_ipv6_address_in_brackets(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    # was: "API docs: http://::1:8080/docs", not a URL
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    monkeypatch.setattr("uvicorn.run", lambda *args, **kwargs: None)
    code, _, err = cli("serve", "--host", "::1", "--port", "0")
    assert code == 0, err
    assert "API docs: http://[::1]:0/docs" in err
    assert "admin:    http://[::1]:0/admin" in err


def test_post_refuses_a_metadata_key_given_twice(cli: Cli, ledger: Ledger) -> None:
    # was: --meta a=1 --meta a=2 posted with {"a": "2"}, the first value dropped quietly
    base = ("post", "credit", "alice", "cash", "5", "--txn", "m-1", "-p", "shop")
    code, _, err = cli(*base, "--meta", "channel=pos", "--meta", "channel=web")
    assert code == 2
    assert one_error(err) == "error: --meta channel is given more than once"
    assert ledger.accounts.get("shop", "alice").fund("cash").balance == 0
    code, _, err = cli(*base, "--meta", "channel=pos", "--meta", "store=12")
    assert code == 0, err


def test_events_ingest_refuses_a_negative_show(cli: Cli, tmp_path: Path) -> None:
    # was: --show -1 printed every rejected line but the last (a Python slice)
    events = tmp_path / "events.ndjson"
    events.write_text("not json\n[1]\n")
    code, _, err = cli("events", "ingest", str(events), "-p", "shop", "--show", "-1")
    assert code == 2
    assert "-1 is not in the range x>=0" in err
    code, out, err = cli("events", "ingest", str(events), "-p", "shop", "--show", "0")
    assert code == 2  # lines were rejected
    assert "line " not in err
    assert "2 rejected" in out


def test_store_help_names_every_accepted_form(cli: Cli) -> None:
    # was: "Store URL: sqlite:///PATH.db or dynamodb://TABLE?region=..&endpoint=.." only,
    # though memory://NAME is accepted everywhere (README, `tallybook --help`)
    for command in ((), ("post",), ("wallet", "balance")):
        code, out, _ = cli(*command, "--help")
        assert code == 0
        flat = " ".join(out.replace("│", " ").split())
        assert "sqlite:///PATH.db, dynamodb://TABLE?region=..&endpoint=.. or memory://NAME" in flat


def test_order_ids_take_the_same_option_names_on_post_and_wallet_debit(
    cli: Cli, ledger: Ledger
) -> None:
    """``post`` took ``--order`` and ``wallet debit`` ``--order-id``; both take both."""
    assert cli("wallet", "credit", "alice", "cash", "100", "--txn", "w1", "-p", "shop")[0] == 0
    assert (
        cli("wallet", "debit", "alice", "10", "--txn", "w2", "--order", "o-9", "-p", "shop")[0] == 0
    )
    code, _, err = cli(
        "post", "credit", "alice", "cash", "5", "--txn", "w3", "--order-id", "o-10", "-p", "shop"
    )
    assert code == 0, err
    assert ledger.transactions.get("shop", "w2").order_id == "o-9"
    assert ledger.transactions.get("shop", "w3").order_id == "o-10"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["wallet", "credit", "alice", "cash", "-5", "--txn", "n1"], "amount must be positive"),
        (["wallet", "debit", "alice", "-5", "--txn", "n2"], "amount must be positive"),
        (["wallet", "authorize", "alice", "-5", "--hold-id", "h1"], "amount must be positive"),
        (["wallet", "grant", "alice", "-5", "--expires-days", "3", "--txn", "g1"], "positive"),
        (["loyalty", "earn", "alice", "o-1", "-5"], "amount must be positive"),
        (["loyalty", "redeem", "alice", "-5", "mug", "--txn", "r1"], "points must be positive"),
        (["program", "threshold", "shop", "cash", "-5"], "must be an integer from 0 to"),
    ],
)
def test_a_negative_amount_is_refused_as_an_amount_not_an_unknown_option(
    cli: Cli, ledger: Ledger, args: list[str], message: str
) -> None:
    """It said "No such option: -5"."""
    extra = [] if args[0] == "program" else ["-p", "shop"]
    code, out, err = cli(*args, *extra)
    assert code == 2
    assert out == ""
    assert err.strip().startswith("error: "), err
    assert message in err
    assert "No such option" not in err


@pytest.mark.parametrize(
    "args",
    [
        ("reconcile", "-p", "shop"),
        ("check", "-p", "shop"),
        ("expire", "-p", "shop"),
        ("loyalty", "downgrade", "-p", "shop"),
        ("report", "run", "-p", "shop", "--out", "reports"),
        ("reconcile", "-p", "nosuch"),
        ("expire", "-p", "nosuch"),
    ],
)
def test_a_command_with_a_progress_display_writes_no_blank_line_on_a_pipe(
    cli: Cli, ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    # was: "\nerror: program nosuch not found" (and a lone "\n" on success): rich ends
    # a progress display on a non-terminal with an empty line on stderr
    monkeypatch.chdir(tmp_path)
    examples = Path(__file__).resolve().parents[2] / "examples"
    ledger.loyalty.configure("shop", load_toml(str(examples / "loyalty.toml")))
    code, out, err = cli(*args)
    if "nosuch" in args:
        assert code == 4
        assert err == "error: program nosuch not found\n"
    else:
        assert code == 0, err
        assert err == ""
        assert out.strip()
        assert not out.startswith("\n")


def test_notification_tables_keep_ids_and_types_beside_a_long_payload(
    cli: Cli, ledger: Ledger
) -> None:
    # was: at 80 columns a payload of ~80 characters (a LowBalance's) took the whole
    # width: the id, type and created columns were drawn zero wide, so the id that
    # `notifications dismiss` takes was nowhere on the screen
    payload = {"available": 0, "balance": 0, "fund": "cash", "threshold": 500, "txn_id": "d2"}
    first = ledger.notifications.add("shop", "alice", "Low", payload)
    second = ledger.notifications.add("shop", "alice", "Low", {"note": "x" * 5000})
    code, out, err = cli("notifications", "list", "alice", "-p", "shop")
    assert code == 0, err
    assert second.id in out
    assert "Low" in out
    assert len(out.splitlines()) < 30  # a long payload is shortened, not printed whole
    code, out, err = cli("notifications", "history", "alice", "-p", "shop")
    assert code == 0, err
    assert first.id in out
    assert second.id in out


def test_serve_honours_the_key_cache_variable(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    # was: `tallybook serve` kept keys 5 s whatever $TALLYBOOK_KEY_CACHE_SECONDS said
    # (docs/http.md: 0 makes a revocation apply at once); only uvicorn's app read it
    served: list[Any] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **kwargs: served.append(app))
    monkeypatch.setenv("TALLYBOOK_KEY_CACHE_SECONDS", "0")
    code, _, err = cli("serve", "--port", "0")
    assert code == 0, err
    assert served[0].state.keys.ttl == 0
    monkeypatch.setenv("TALLYBOOK_KEY_CACHE_SECONDS", "soon")
    code, _, err = cli("serve", "--port", "0")
    assert code == 2
    assert one_error(err) == (
        "error: TALLYBOOK_KEY_CACHE_SECONDS must be a number of seconds, 0 or more; got 'soon'"
    )
    assert len(served) == 1


@pytest.mark.usefixtures("_tallybook_log_level")
def test_torture_leaves_a_program_it_did_not_make_untouched(cli: Cli, ledger: Ledger) -> None:
    # was: "error: program shop has no fund 'tokens'" (exit 4) after torture had
    # replaced shop's loyalty rules with its own
    examples = Path(__file__).resolve().parents[2] / "examples"
    ledger.loyalty.configure("shop", load_toml(str(examples / "loyalty.toml")))
    before = ledger.loyalty.config("shop")
    args = ("torture", "--ops", "10", "--threads", "1", "--http-threads", "0", "--readers", "0")
    code, _, err = cli(*args, "--program", "shop")
    assert code == 5
    assert one_error(err) == (
        "error: program shop exists and was not made by torture (no 'tokens' fund);"
        " torture writes to its program: give --program a new name"
    )
    assert Ledger.open(cli.url).loyalty.config("shop") == before
    assert cli(*args, "--program", "t-1")[0] == 0
    assert cli(*args, "--program", "t-1")[0] == 0  # a torture program may be run again


def _commands(
    group: typer.core.TyperGroup, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        if isinstance(command, typer.core.TyperGroup):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name)


def test_every_option_help_is_shown_whole(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    # was: "--currency  Order currency ." and "--program  Program to create and use .":
    # the help's "[default: ...]" was read as rich markup and dropped
    monkeypatch.setattr(output, "console", Console(width=400, soft_wrap=True))
    monkeypatch.setenv("COLUMNS", "400")
    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    checked = 0
    for path in _commands(root):
        command = root
        for name in path:
            assert isinstance(command, typer.core.TyperGroup)
            command = command.commands[name]
        code, out, _ = cli(*path, "--help", store=False)
        assert code == 0
        shown = " ".join(out.replace("│", " ").split())
        for param in command.params:
            text = " ".join((getattr(param, "help", None) or "").split())
            if text:
                assert text in shown, f"tallybook {' '.join(path)}: {text!r} not in help"
                checked += 1
    assert checked > 100


def test_table_create_on_a_memory_store_touches_no_dynamodb(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # was: "error: no AWS credentials found ..." (exit 2): memory://NAME was taken
    # for DynamoDB table NAME in the default region, which AWS credentials would create
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code, out, err = cli("table", "create", "--store", "memory://scratch", store=False)
    assert (code, err) == (0, "")
    assert out == "memory://scratch is an in-memory store: it needs no table setup\n"


@pytest.mark.usefixtures("_tallybook_log_level")
def test_torture_checks_its_report_file_before_the_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # was: the whole run, then "error: unexpected IsADirectoryError: ..." (exit 1)
    # and its result lost
    cli = Cli(monkeypatch, capsys, "memory://qa-torture-report")
    args = ("torture", "--ops", "10", "--threads", "1", "--http-threads", "0", "--readers", "0")
    for report, reason in ((tmp_path, "Is a directory"), (tmp_path / "no" / "r.md", "No such")):
        code, out, err = cli(*args, "--report", str(report))
        assert code == 2
        assert one_error(err).startswith(f"error: cannot append to --report {report}: {reason}")
        assert "Violations" not in out
    code, _, err = cli(*args, "--report", str(tmp_path / "r.md"))
    assert code == 0, err
    assert "Violations: none." in (tmp_path / "r.md").read_text()


def test_python_m_tallybook_is_the_command(tmp_path: Path) -> None:
    # was: "No module named tallybook.__main__"
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tallybook", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )

    assert run("--version").stdout == f"tallybook {__version__}\n"
    shown = run("--store", "memory://m", "account", "show", "ann", "--program", "shop")
    assert shown.returncode == 4
    assert shown.stderr == "error: program shop not found\n"


@pytest.mark.parametrize("unbuffered", ["1", None], ids=["unbuffered", "buffered"])
@pytest.mark.parametrize(
    "args",
    [
        ("wallet", "balance", "alice", "-p", "shop"),  # a rich table
        ("wallet", "balance", "alice", "-p", "shop", "--json"),  # print()
        ("--help",),
    ],
    ids=["table", "json", "help"],
)
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(
    ledger: Ledger, url: str, tmp_path: Path, args: tuple[str, ...], unbuffered: str | None
) -> None:
    # was: `tallybook wallet balance alice | head -1` exited 1 (click's and rich's
    # handling), or 120 with "Exception ignored ... BrokenPipeError" on stderr
    # when the output was still buffered at exit
    ledger.wallet.credit("shop", "alice", "cash", 2500, txn_id="t-1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALLYBOOK_")}
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered

    def into_a_closed_pipe(*argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
        """``tallybook --store URL ARGV``, its stdout a pipe whose reader is gone
        before the first line is written."""
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            return subprocess.run(
                [sys.executable, "-m", "tallybook", "--store", url, *argv],
                stdout=write_end,
                stderr=subprocess.PIPE,
                text=True,
                cwd=tmp_path,
                env={**env, **extra},
                timeout=120,
            )
        finally:
            os.close(write_end)

    done = into_a_closed_pipe(*args)
    assert (done.returncode, done.stderr) == (141, "")
    # a closed stdout does not hide an error: it is on stderr with its own code
    failed = into_a_closed_pipe("wallet", "balance", "bob", TALLYBOOK_PROGRAM="shop")
    assert failed.returncode == 4
    assert failed.stderr == "error: account bob not found in program shop\n"
    # a failure whose report was still buffered keeps its code (a rejected line:
    # 2); one that wrote to the closed pipe ended there, as SIGPIPE would end it
    events = tmp_path / "events.ndjson"
    events.write_text('{"account": "alice"}\n')
    rejected = into_a_closed_pipe("events", "ingest", str(events), "-p", "shop", "--json")
    assert (rejected.returncode, rejected.stderr) == (141 if unbuffered else 2, "")


def test_tables_and_lines_print_times_as_the_http_api_and_json_do(
    cli: Cli, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # was: Python's isoformat (2026-11-27T10:00:00.123456+00:00) in tables and
    # lines, and "2026-11-27 10:00:00" in notification lists, where HTTP and
    # --json print 2026-11-27T10:00:00.123456Z
    examples = Path(__file__).resolve().parents[2] / "examples"
    ledger.loyalty.configure("shop", load_toml(str(examples / "loyalty.toml")))
    ledger.loyalty.earn("shop", "alice", "order-1", 5000)
    ledger.wallet.credit("shop", "alice", "cash", 2500, txn_id="t-1")
    ledger.wallet.grant("shop", "alice", 300, expires_in_days=30, txn_id="g-1")
    ledger.wallet.authorize("shop", "alice", 100, hold_id="h-1", expires_in=3600)
    ledger.notifications.add("shop", "alice", "TierChanged", {"tier": "gold"})
    cli.ok("keys", "create", "--name", "ops", "-p", "shop")
    # wide enough that no table folds a time over two lines
    wide = Console(width=200, soft_wrap=True)
    monkeypatch.setattr(output, "console", wide)
    monkeypatch.setattr(cli_notifications, "console", wide)  # its own table
    commands = {
        # command: a --json path to one time it shows
        ("history", "alice", "-f", "cash", "-p", "shop"): ("entries", 0, "created_at"),
        ("wallet", "transactions", "alice", "-p", "shop"): ("transactions", 0, "created_at"),
        ("wallet", "holds", "alice", "-p", "shop"): (0, "deadline"),
        ("wallet", "hold", "h-1", "-p", "shop"): ("deadline",),
        ("wallet", "grants", "alice", "-p", "shop"): (0, "expires_at"),
        ("loyalty", "tier", "alice", "--history", "-p", "shop"): ("history", 0, "at"),
        ("loyalty", "expiring", "alice", "--days", "1000", "-p", "shop"): ("lots", 0, "expires"),
        ("loyalty", "order", "order-1", "-p", "shop"): ("transaction", "created_at"),
        ("notifications", "list", "alice", "-p", "shop"): ("notifications", 0, "created_at"),
        ("keys", "list", "-p", "shop"): (0, "created_at"),
    }
    for args, path in commands.items():
        found: Any = cli.json(*args, "--json")
        for step in path:
            found = found[step]
        assert isinstance(found, str), (args, found)
        assert found.endswith("Z"), (args, found)
        out = cli.ok(*args)
        assert "+00:00" not in out, args
        assert found in out, (args, found, out)


def test_cli_times_have_six_fraction_digits_as_http_answers_do() -> None:
    # was: 2026-11-27T10:00:00Z on a whole second, ...:00.123456Z otherwise
    from datetime import UTC, datetime

    whole = datetime(2026, 11, 27, 10, 0, 0, tzinfo=UTC)
    assert output.time_text(whole) == "2026-11-27T10:00:00.000000Z"
    assert output.to_jsonable({"at": [whole.replace(microsecond=5)]}) == {
        "at": ["2026-11-27T10:00:00.000005Z"]
    }


@pytest.mark.parametrize(
    "args",
    [
        ("history", "alice", "-f", "cash", "-p", "shop"),
        ("wallet", "transactions", "alice", "-p", "shop"),
        ("notifications", "list", "alice", "-p", "shop"),
    ],
    ids=["history", "wallet-transactions", "notifications"],
)
def test_a_table_read_from_a_pipe_keeps_each_row_on_one_line(
    ledger: Ledger, url: str, tmp_path: Path, args: tuple[str, ...]
) -> None:
    # was: piped (or with $COLUMNS=60) every table was fitted to the width, so each
    # time was folded over six lines, headers broken and amounts cut to "5…"
    txn = "order-2026-11-27-000123456-long"
    ledger.wallet.credit("shop", "alice", "cash", 2500, txn_id=txn)
    ledger.notifications.add("shop", "alice", "TierChanged", {"tier": "gold" * 10})
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALLYBOOK_")}
    done = subprocess.run(
        [sys.executable, "-m", "tallybook", "--store", url, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "COLUMNS": "60"},
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    body = lines[lines.index(next(x for x in lines if x.startswith("┡"))) + 1 : -1]
    assert len(body) == 1, done.stdout  # one row, one line
    assert re.search(r" \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z ", body[0]), body[0]
    assert args[0] == "notifications" or txn in body[0]
    assert "…" not in done.stdout
    assert len({len(x) for x in lines[1:]}) == 1  # the table's lines, one width
