"""The wallet CLI is a twin of the Python API (SQLite file store)."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tallybook.cli import app
from tallybook.errors import InsufficientFunds
from tallybook.ledger import Ledger
from tallybook.reliability.faults import Crash
from tallybook.services.clock import ManualClock
from tallybook.services.wallet.debit import CHARGE_GRACE

from .processors import DiesAfterCharging, RefundFails


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TALLYBOOK_STORE", f"sqlite:///{tmp_path / 'w.db'}")
    monkeypatch.setenv("TALLYBOOK_PROGRAM", "shop")
    monkeypatch.setenv("TALLYBOOK_CHARGE_PROCESSOR", "fake")
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == code, result.output
        return result.output

    invoke("program", "create", "shop")
    invoke("account", "open", "alice")
    return invoke


def test_wallet_commands(run) -> None:  # type: ignore[no-untyped-def]
    run("wallet", "credit", "alice", "cash", "1000", "--txn-id", "c1")
    run("wallet", "grant", "alice", "200", "--expires-days", "3", "--txn-id", "g1")
    out = json.loads(
        run(
            "wallet",
            "debit",
            "alice",
            "1300",
            "--txn-id",
            "d1",
            "--on-shortfall",
            "charge",
            "--json",
        )
    )
    assert out["funds"] == {"bonus": -200, "cash": -1000}
    assert out["charge"]["amount"] == 100
    run("wallet", "credit", "alice", "store_credit", "500", "--txn-id", "c2")
    run("wallet", "authorize", "alice", "300", "--hold-id", "h1", "--expires-in", "3600")
    out = json.loads(run("wallet", "capture", "h1", "--amount", "100", "--json"))
    assert out["hold"]["status"] == "captured"
    balance = json.loads(run("wallet", "balance", "alice", "--json"))
    assert balance["total_available"] == 400
    assert "captured" in run("wallet", "holds", "alice")
    assert "nothing to do" in run("reconcile")
    page = json.loads(run("wallet", "transactions", "alice", "--json"))
    assert page["transactions"][0]["id"] == "h1:capture"
    failed = CliRunner().invoke(app, ["wallet", "debit", "alice", "99999", "--txn-id", "d2"])
    assert isinstance(failed.exception, InsufficientFunds)  # main() prints it, exits 3
    assert "Usage" in run("wallet", "--help")


@pytest.mark.parametrize("mode", ["fake:decline", "fake:timeout", "none"])
def test_cli_charge_refused_prints_one_line_and_applies_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Through the real entry point (``tallybook``): one error line, exit code 3."""
    monkeypatch.setenv("TALLYBOOK_STORE", f"sqlite:///{tmp_path / 'w.db'}")
    monkeypatch.setenv("TALLYBOOK_PROGRAM", "shop")
    monkeypatch.setenv("TALLYBOOK_CHARGE_PROCESSOR", mode)
    runner = CliRunner()
    for args in (
        ["program", "create", "shop"],
        ["account", "open", "alice"],
        ["wallet", "credit", "alice", "cash", "100", "--txn-id", "c1"],
    ):
        assert runner.invoke(app, args).exit_code == 0
    debit = ["wallet", "debit", "alice", "250", "--txn-id", "d1", "--on-shortfall", "charge"]
    failed = subprocess.run(
        [sys.executable, "-c", "from tallybook.cli import main; main()", *debit],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failed.returncode == 3
    assert failed.stderr.startswith("error: ")
    assert failed.stderr.count("\n") == 1
    assert "Traceback" not in failed.stderr
    balance = json.loads(runner.invoke(app, ["wallet", "balance", "alice", "--json"]).output)
    assert balance["total_available"] == 100


def test_one_transaction_id_option_with_the_old_name_hidden(run) -> None:  # type: ignore[no-untyped-def]
    """Issue 17: ``post --txn`` but ``wallet --txn-id``; now ``--txn`` everywhere, and
    ``--txn-id`` still works without being shown."""
    run("wallet", "credit", "alice", "cash", "100", "--txn", "c-new")
    again = json.loads(
        run("wallet", "credit", "alice", "cash", "100", "--txn-id", "c-new", "--json")
    )
    assert again["replay"] is True
    run("post", "credit", "alice", "points", "5", "--txn-id", "p-old")
    run("post", "credit", "alice", "points", "5", "--txn", "p-old")  # the same request: a replay
    for command in (["wallet", "credit"], ["wallet", "debit"], ["wallet", "grant"], ["post"]):
        shown = run(*command, "--help")
        assert "--txn" in shown
        assert "--txn-id" not in shown
    assert "Missing option '--txn'" in run("wallet", "credit", "alice", "cash", "1", code=2)
    assert "once" in run(
        "wallet", "credit", "alice", "cash", "1", "--txn", "a", "--txn-id", "b", code=2
    )


def test_grant_in_days_is_the_same_request_on_a_retry(run) -> None:  # type: ignore[no-untyped-def]
    first = json.loads(
        run("wallet", "grant", "alice", "50", "--expires-days", "30", "--txn", "g", "--json")
    )
    again = json.loads(
        run("wallet", "grant", "alice", "50", "--expires-days", "30", "--txn", "g", "--json")
    )
    assert (first["replay"], again["replay"]) == (False, True)


def test_held_credit_in_days_is_the_same_request_on_a_retry(run) -> None:  # type: ignore[no-untyped-def]
    """--release-days goes to the service as given: the same command again replays the
    credit (it was a 409-style conflict, exit 5: the release time moved with the clock)."""
    args = ("wallet", "credit-held", "alice", "cash", "90", "--release-days", "14", "--txn", "s")
    first = json.loads(run(*args, "--json"))
    again = json.loads(run(*args, "--json"))
    assert (first["transaction"]["replay"], again["transaction"]["replay"]) == (False, True)
    assert again["hold"]["deadline"] == first["hold"]["deadline"]


@pytest.mark.parametrize("command", ["grant", "credit-held"])
def test_days_out_of_range_is_one_error_line(run, command: str) -> None:  # type: ignore[no-untyped-def]
    """A huge --expires-days / --release-days was an 'unexpected OverflowError' (exit 1)."""
    option = "--expires-days" if command == "grant" else "--release-days"
    fund = [] if command == "grant" else ["cash"]
    args = ["alice", *fund, "5", option, "99999999", "--txn", "x"]
    failed = subprocess.run(
        [sys.executable, "-c", "from tallybook.cli import main; main()", "wallet", command, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failed.returncode == 2
    assert failed.stderr.startswith("error: ")
    assert failed.stderr.count("\n") == 1
    assert "from 1 to 3660" in failed.stderr
    assert json.loads(run("wallet", "transactions", "alice", "--json"))["transactions"] == []


def test_a_result_line_stays_one_line_when_piped(run) -> None:  # type: ignore[no-untyped-def]
    """Output to a pipe (no terminal width) is not broken at 80 columns."""
    out = run("wallet", "credit", "alice", "store_credit", "1500", "--txn-id", "top-up-" + "x" * 40)
    line = f"credit top-up-{'x' * 40}: store_credit +1500; available bonus 0, store_credit 1500"
    assert out == f"{line}, cash 0 (total 1500)\n"


def test_reconcile_lists_a_failed_refund_and_exits_1(  # type: ignore[no-untyped-def]
    run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A processor whose refund raised made ``tallybook reconcile`` end on it (an
    'unexpected RuntimeError', the rest of the pass not done); it now lists it,
    does the rest, and exits 1."""
    run("wallet", "credit", "alice", "cash", "100", "--txn", "c1")
    past = ManualClock(datetime.now(UTC) - CHARGE_GRACE - timedelta(minutes=1))
    with Ledger.open(f"sqlite:///{tmp_path / 'w.db'}", clock=past) as ledger:
        ledger.wallet.processor = DiesAfterCharging()
        with pytest.raises(Crash):
            ledger.wallet.debit("shop", "alice", 250, txn_id="d1", on_shortfall="charge")
        ledger.wallet.authorize("shop", "alice", 50, hold_id="h1", expires_in=60)
    module = types.ModuleType("refund_fails_for_test")
    module.make = RefundFails  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setenv("TALLYBOOK_CHARGE_PROCESSOR", f"{module.__name__}:make")
    out = run("reconcile", code=1)
    assert "could not refund charge d1 of alice (150): RuntimeError: refund bug" in out
    assert "expired hold h1 of alice" in out
    # the summary's own line (in-process runs can add logging noise after it)
    assert "\nreconcile: 1 action(s); 1 refund(s) failed: the next run tries again\n" in out
