"""Issue 17 defect 7: reading billing fixed its settings; only the first record may.

Before the fix, ``billing configure`` with no option, ``billing list`` and
``GET /v1/billing/records`` (read-only key) created the state row, and a later
``configure --start ... --bucket-minutes 5`` exited 3 ("fixed once billing has
started"). Both engines.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tallybook.cli import app
from tallybook.errors import InvalidState
from tallybook.http.app import create_app
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store import keys
from tallybook.store.port import ItemStore

from .helpers import MIN, aligned_start, ingest


def test_reads_store_nothing_and_configure_stays_open_until_the_first_record(
    ledger: Ledger, store: ItemStore, clock: ManualClock
) -> None:
    t0 = aligned_start(clock)
    ledger.billing.configure("shop")
    ledger.billing.records("shop", t0 - 60 * MIN, t0)
    _, secret = ledger.keys.create("shop", "read")
    with TestClient(create_app(ledger)) as client:
        r = client.get(
            "/v1/billing/records",
            params={"since": (t0 - 60 * MIN).isoformat(), "until": t0.isoformat()},
            headers={"Authorization": f"Bearer {secret}"},
        )
    assert r.status_code == 200, r.text
    assert store.get(keys.billing_state("shop")) is None
    state = ledger.billing.configure("shop", start=t0 - 120 * MIN, bucket_minutes=5)
    assert (state.config.bucket_seconds, state.fixed) == (300, False)
    state = ledger.billing.configure("shop", bucket_minutes=10)  # still open: no record yet
    assert (state.config.bucket_seconds, state.start) == (600, int((t0 - 120 * MIN).timestamp()))
    ingest(ledger, "r1", t0 - 30 * MIN)
    assert ledger.billing.state("shop").fixed
    with pytest.raises(InvalidState, match="fixed once billing has started"):
        ledger.billing.configure("shop", bucket_minutes=5)
    assert ledger.billing.configure("shop", grace_minutes=3).config.grace_seconds == 180


def test_cli_looking_does_not_fix_the_settings(
    ledger: Ledger,
    store: ItemStore,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TALLYBOOK_STORE", store.describe())
    runner = CliRunner()
    window = ["--since", "2026-01-01T00:00:00Z", "--until", "2026-01-02T00:00:00Z"]
    for args in (
        ["billing", "configure", "-p", "shop"],
        ["billing", "list", "-p", "shop", *window],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    result = runner.invoke(
        app,
        [
            *("billing", "configure", "-p", "shop"),
            *("--start", "2026-01-01T00:00:00Z", "--bucket-minutes", "5"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert ledger.billing.state("shop").config.bucket_seconds == 300


def test_first_record_fixes_settings_configured_meanwhile(
    ledger: Ledger, store: ItemStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process configures between the first record's read of the state (none
    yet) and its create: the record's process files under the configured bucket
    size, so the row must end up fixed, or a later configure could change the
    bucket size under records already filed (and reports would miss them)."""
    t0 = aligned_start(clock)
    other = Ledger(store, clock=clock)
    real = ledger.billing._read_state

    def read_then_another_configures(program: str) -> object:
        found = real(program)
        other.billing.configure("shop", bucket_minutes=5, start=t0)
        monkeypatch.setattr(ledger.billing, "_read_state", real)
        return found

    monkeypatch.setattr(ledger.billing, "_read_state", read_then_another_configures)
    clock.advance(7 * MIN)
    assert ingest(ledger, "r1", t0 + 6 * MIN).bucket == t0 + 5 * MIN
    assert ledger.billing.state("shop").fixed
    with pytest.raises(InvalidState, match="fixed once billing has started"):
        other.billing.configure("shop", bucket_minutes=60)
