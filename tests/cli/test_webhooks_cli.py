"""``tallybook webhooks`` as a user runs it: the secret once, bad URLs as one
line and exit 2, deliveries and a worker pass against a real receiver."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from rich.console import Console

from tallybook.cli import output
from tallybook.domain.webhooks import short_position
from tallybook.ledger import Ledger
from tallybook.store.port import ItemStore
from webhooks.receiver import running_receiver

from .test_ledger_cli import Cli


@pytest.fixture
def wh_cli(
    ledger: Ledger,
    store: ItemStore,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Cli:
    return Cli(monkeypatch, capsys, store.describe())


def test_subscribe_deliver_and_list(wh_cli: Cli, ledger: Ledger) -> None:
    cli = wh_cli
    with running_receiver() as receiver:
        code, out, err = cli(
            "webhooks", "create", receiver.url, "--program", "shop", "--allow-http", "--id", "s1"
        )
        assert code == 0, err
        secret = out.strip()
        assert secret.startswith("whsec_")
        assert "store the secret now" in err
        receiver.secret = secret
        listed = cli.json("webhooks", "list", "--program", "shop")
        assert isinstance(listed, list)
        assert [s["id"] for s in listed] == ["s1"]
        assert secret not in str(listed)
        cli.ok("account", "open", "alice", "--program", "shop")
        cli.ok("post", "credit", "alice", "cash", "5", "--txn", "t1", "--program", "shop")
        assert "delivered 1" in cli.ok("webhooks", "deliver", "--once")
    assert [b["data"]["txn_id"] for _, b in receiver.accepted] == ["t1"]
    listed_deliveries = cli.json("webhooks", "deliveries", "s1", "--program", "shop")
    assert isinstance(listed_deliveries, list)
    (delivery,) = listed_deliveries
    assert delivery["status"] == "delivered"
    assert delivery["last_code"] == 204
    resend = ("webhooks", "resend", "s1", delivery["position"], "--program", "shop")
    assert "queued again" in cli.ok(*resend)
    # still queued: it said "queued again" although nothing changed
    again = cli.ok(*resend)
    assert "is still queued" in again
    assert "nothing changed" in again
    assert "queued again" not in again
    assert "disabled" in cli.ok("webhooks", "disable", "s1", "--program", "shop")
    assert "deleted" in cli.ok("webhooks", "delete", "s1", "--program", "shop")


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["http://example.com/h"], "https://"),
        (["http://127.0.0.1:9/h"], "--allow-http"),
        (["https://example.com/h", "--types", "nope"], "unknown event type"),
        (["https://example.com/h", "--types", ",,"], "none empty"),
        (["https://example.com/h", "--types", "hold.voided,"], "none empty"),
    ],
)
def test_bad_subscriptions_are_one_line(wh_cli: Cli, args: list[str], message: str) -> None:
    code, out, err = wh_cli("webhooks", "create", *args, "--program", "shop")
    assert code == 2
    assert out == ""
    assert err.startswith("error: ")
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_rekey_new_key_and_a_wrong_key_in_one_line(
    wh_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = wh_cli
    code, out, _ = cli("webhooks", "new-key", store=False)
    old = out.strip()
    assert code == 0
    assert len(old) >= 32
    monkeypatch.setenv("TALLYBOOK_WEBHOOK_KEY", old)
    cli.ok("webhooks", "create", "https://example.com/h", "--program", "shop")
    new = cli("webhooks", "new-key", store=False)[1].strip()
    monkeypatch.setenv("TALLYBOOK_WEBHOOK_KEY", new)
    code, out, err = cli("webhooks", "rekey")
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "not among the 1 key(s) of TALLYBOOK_WEBHOOK_KEY" in err
    assert "Traceback" not in err
    monkeypatch.setenv("TALLYBOOK_WEBHOOK_KEY", f"{new},{old}")
    assert "1 subscription secret(s) sealed" in cli.ok("webhooks", "rekey")
    monkeypatch.setenv("TALLYBOOK_WEBHOOK_KEY", "short")
    code, _, err = cli("webhooks", "deliver", "--once")
    assert code == 2
    assert err.strip().startswith("error:"), err
    assert "at least 32" in err


@pytest.mark.parametrize("engine", ["sqlite"])
def test_listing_an_unknown_programs_subscriptions_is_not_found(wh_cli: Cli) -> None:
    code, out, err = wh_cli("webhooks", "list", "--program", "nope")
    assert code == 4
    assert out == ""
    assert err.strip() == "error: program nope not found"


def test_deliveries_table_fits_80_columns_and_resend_takes_its_short_position(
    wh_cli: Cli, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # was: the 44-character position left the other seven columns "…" at 80 columns
    # (a pipe): no status, type or code could be read
    cli = wh_cli
    monkeypatch.setattr(
        output, "console", Console(width=80, soft_wrap=True, force_terminal=True, color_system=None)
    )
    with running_receiver() as receiver:
        code, out, err = cli(
            "webhooks", "create", receiver.url, "--program", "shop", "--allow-http", "--id", "s1"
        )
        assert code == 0, err
        receiver.secret = out.strip()
        cli.ok("account", "open", "alice", "--program", "shop")
        cli.ok("post", "credit", "alice", "cash", "5", "--txn", "t1", "--program", "shop")
        assert "delivered 1" in cli.ok("webhooks", "deliver", "--once")
    (delivery,) = cli.json("webhooks", "deliveries", "s1", "--program", "shop")
    short = short_position(delivery["position"])
    assert len(short) < len(delivery["position"])
    table = cli.ok("webhooks", "deliveries", "s1", "--program", "shop")
    assert max(len(line) for line in table.splitlines()) <= 80
    assert short in table
    assert "delivered" in table
    assert "transaction.posted" in table
    assert "204" in table
    assert "queued again" in cli.ok("webhooks", "resend", "s1", short, "--program", "shop")
    (again,) = cli.json("webhooks", "deliveries", "s1", "--program", "shop")
    assert again["position"] == delivery["position"]
    assert again["status"] == "pending"


@pytest.mark.parametrize("engine", ["sqlite"])  # the command's loop, not storage
def test_sigterm_ends_deliver_during_its_wait_between_passes(
    ledger: Ledger, store: ItemStore
) -> None:
    # was: SIGTERM was noted and the worker slept on: with --interval 60 it took
    # up to a minute to stop
    with running_receiver() as receiver:
        created = ledger.webhooks.create("shop", receiver.url, allow_http=True)
        receiver.secret = created.secret
        ledger.accounts.open("shop", "alice")
        ledger.transactions.credit("shop", "alice", "cash", 5, txn_id="t1")
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tallybook",
                "--store",
                store.describe(),
                "webhooks",
                "deliver",
                "--interval",
                "60",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert worker.stdout is not None
        assert worker.stdout.readline().startswith("delivered 1")  # then an idle pass, a wait
        time.sleep(0.3)
        stopped = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        try:
            out, err = worker.communicate(timeout=10)
        finally:
            worker.kill()
    assert worker.returncode == 0, out + err
    assert time.monotonic() - stopped < 10
    assert err == ""


def test_an_empty_id_is_refused_not_replaced(wh_cli: Cli, ledger: Ledger) -> None:
    # was: `--id ''` subscribed the URL under a random id, printed only on stderr
    code, out, err = wh_cli("webhooks", "create", "https://example.com/h", "-p", "shop", "--id", "")
    assert (code, out) == (2, "")
    assert err == "error: subscription id is required (1-128 characters)\n"
    assert ledger.webhooks.list("shop") == []
