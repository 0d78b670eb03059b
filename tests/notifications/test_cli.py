"""The CLI twins: ``tallybook notifications ...`` and ``tallybook events ingest``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tallybook.cli import app
from tallybook.errors import TallybookError
from tallybook.ledger import Ledger
from tallybook.store.port import ItemStore

runner = CliRunner()


@pytest.fixture
def cli(store: ItemStore, ledger: Ledger) -> Any:
    url = store.describe()
    ledger.accounts.open("shop", "alice")

    def run(*args: str, ok: bool = True) -> Any:
        result = runner.invoke(app, ["--store", url, *args, "-p", "shop"])
        if ok:
            assert result.exit_code == 0, (result.output, result.exception)
        return result

    return run


def test_add_list_dismiss_history(cli: Any, ledger: Ledger) -> None:
    added = json.loads(
        cli(
            "notifications",
            "add",
            "alice",
            "TierChanged",
            "--payload",
            '{"tier": "gold"}',
            "--key",
            "k-1",
            "--json",
        ).stdout
    )
    again = json.loads(
        cli(
            "notifications",
            "add",
            "alice",
            "TierChanged",
            "--payload",
            '{"tier": "gold"}',
            "--key",
            "k-1",
            "--json",
        ).stdout
    )
    assert again["id"] == added["id"]
    assert again["replay"] is True
    listed = json.loads(cli("notifications", "list", "alice", "--json").stdout)
    assert [n["id"] for n in listed["notifications"]] == [added["id"]]
    assert "TierChanged" in cli("notifications", "list", "alice").stdout

    out = json.loads(cli("notifications", "dismiss", "alice", added["id"], "--json").stdout)
    assert out["dismissed"]["status"] == "dismissed"
    none = json.loads(cli("notifications", "dismiss", "alice", "--type", "X", "--json").stdout)
    assert none == {"dismissed": None}
    history = json.loads(cli("notifications", "history", "alice", "--json").stdout)
    assert [n["status"] for n in history["notifications"]] == ["dismissed"]
    assert ledger.notifications.list("shop", "alice") == []

    bad = cli("notifications", "add", "alice", "T", "--payload", '{"a": 1.5}', ok=False)
    assert isinstance(bad.exception, TallybookError)


def test_rules_show_and_set(cli: Any, tmp_path: Path, ledger: Ledger) -> None:
    shown = json.loads(cli("notifications", "rules").stdout)
    assert shown["types"]["TopUp"]["dismisses"] == ["LowBalance"]
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"retention_days": 14}))
    assert (
        json.loads(cli("notifications", "rules", "--set", str(path)).stdout)["retention_days"] == 14
    )
    assert ledger.notifications.rules("shop").retention_days == 14


def test_events_ingest(cli: Any, tmp_path: Path, ledger: Ledger) -> None:
    good = {
        "Type": "Notification",
        "MessageId": "m-1",
        "Message": json.dumps({"account": "alice", "type": "TierChanged", "payload": {}}),
    }
    url = "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=t"
    confirm = {"Type": "SubscriptionConfirmation", "MessageId": "s-1", "SubscribeURL": url}
    unsubscribed = {**confirm, "Type": "UnsubscribeConfirmation", "MessageId": "s-2"}
    lines = [good, "{broken", good, confirm, unsubscribed]
    path = tmp_path / "events.ndjson"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    result = cli("events", "ingest", str(path), ok=False)
    assert result.exit_code == 2  # a line was rejected, as for billing ingest
    # a confirmation left for an operator was counted as "ignored"
    assert (
        "5 messages: 1 added, 1 replayed, 0 confirmed, 1 awaiting confirmation, "
        "1 ignored, 1 rejected"
    ) in result.stdout
    report = json.loads(cli("events", "ingest", str(path), "--json", ok=False).stdout)
    assert (report["added"], report["replayed"], report["rejected"]) == (0, 2, 1)
    assert (report["pending_confirmation"], report["ignored"]) == (1, 1)
    assert report["rejected_lines"][0][:2] == [2, "not-json"]
    assert len(ledger.notifications.history("shop", "alice").notifications) == 1
