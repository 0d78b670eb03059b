"""The loyalty CLI is a twin of the Python API (SQLite file store; both engines where
``cli`` runs it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from tallybook.cli import app
from tallybook.errors import TallybookError
from tallybook.ledger import Ledger
from tallybook.store.port import ItemStore

EXAMPLE = Path(__file__).parents[2] / "examples" / "loyalty.toml"


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TALLYBOOK_STORE", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("TALLYBOOK_PROGRAM", "shop")
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args))
        exit_code, output = result.exit_code, result.output
        if isinstance(result.exception, TallybookError):
            # what tallybook.cli.main prints and exits with
            exit_code, output = result.exception.exit_code, result.exception.message
        assert exit_code == code, output
        return output

    invoke("program", "create", "shop")
    invoke("account", "open", "alice")
    return invoke


def test_config_earn_redeem_and_lookups(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert "valid (3 tiers, 2 campaigns)" in run(
        "loyalty", "config", "load", str(EXAMPLE), "--check"
    )
    run("loyalty", "config", "load", str(EXAMPLE))
    shown = json.loads(run("loyalty", "config", "show"))
    assert shown["tiers"][2]["name"] == "gold"

    out = run("loyalty", "earn", "alice", "o-1", "150000", "--at", "2026-01-10T12:00:00Z")
    assert "earned 1500 points" in out
    assert "silver" in out
    assert "already earned" in run(
        "loyalty", "earn", "alice", "o-1", "150000", "--at", "2026-01-10T12:00:00Z"
    )
    earned = json.loads(run("loyalty", "order", "o-1", "--json"))
    assert (earned["account"], earned["points"]) == ("alice", 1500)

    err = run("loyalty", "redeem", "alice", "99999", "tv", "--txn-id", "r1", code=3)
    assert "insufficient points" in err
    assert "balance 1400" in run("loyalty", "redeem", "alice", "100", "mug", "--txn-id", "r2")

    status = json.loads(run("loyalty", "tier", "alice", "--history", "--json"))
    assert status["status"]["tier"] == "silver"
    assert [c["tier"] for c in status["history"]] == ["silver"]
    members = json.loads(run("loyalty", "members", "silver", "--json"))
    assert members["accounts"] == ["alice"]
    assert members["members"] == [{"account": "alice", "points": 1400, "qualifying_points": 1500}]
    expiring = json.loads(run("loyalty", "expiring", "alice", "--days", "800", "--json"))
    assert [lot["points"] for lot in expiring["lots"]] == [1400]
    assert (expiring["points"], expiring["cursor"]) == (1400, None)

    report = json.loads(run("expire", "--json"))
    assert report["points"] == 0
    assert json.loads(run("loyalty", "downgrade", "--json"))["downgraded"] == 0


def test_bad_config_file_is_one_line_and_exit_2(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.toml"
    bad.write_text('[[tiers]]\nname = "base"\nthreshold = 3\n')
    out = run("loyalty", "config", "load", str(bad), code=2)
    assert "first (base) tier must have threshold 0" in out
    assert "Traceback" not in out
    assert "no loyalty configuration" in run("loyalty", "earn", "alice", "o", "100", code=2)


def test_config_check_needs_no_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TALLYBOOK_STORE", f"sqlite:///{tmp_path / 'none.db'}")
    monkeypatch.delenv("TALLYBOOK_PROGRAM", raising=False)
    runner = CliRunner()
    checked = runner.invoke(app, ["loyalty", "config", "load", str(EXAMPLE), "--check"])
    assert checked.exit_code == 0, checked.output
    assert "valid" in checked.output
    missing = runner.invoke(app, ["loyalty", "config", "load", str(EXAMPLE)])
    assert isinstance(missing.exception, TallybookError)
    assert "--program" in missing.exception.message


def test_earn_and_redeem_name_a_partner(run) -> None:  # type: ignore[no-untyped-def]
    """Issue 17 gap: ``loyalty earn`` could not name the partner the rewards report credits."""
    run("loyalty", "config", "load", str(EXAMPLE))
    earned = json.loads(
        run("loyalty", "earn", "alice", "o-p1", "5000", "--partner", "acme", "--json")
    )
    assert earned["transaction"]["metadata"] == {"partner": "acme"}
    redeemed = json.loads(
        run(
            "loyalty",
            "redeem",
            "alice",
            "10",
            "mug",
            "--txn",
            "r-p1",
            "--partner",
            "acme",
            "--json",
        )
    )
    assert redeemed["transaction"]["metadata"]["partner"] == "acme"


@pytest.fixture
def cli(store: ItemStore, ledger: Ledger) -> Callable[..., Result]:
    """The CLI on the store of ``ledger`` (both engines); exit codes as ``main`` gives them."""
    url = store.describe()
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> Result:
        result = runner.invoke(app, ["--store", url, *args, "-p", "shop"])
        exit_code = result.exit_code
        if isinstance(result.exception, TallybookError):
            exit_code = result.exception.exit_code
        assert exit_code == code, (result.output, result.exception)
        return result

    return invoke


def test_tier_history_is_paged_to_its_end(cli: Callable[..., Result], ledger: Ledger) -> None:
    """`loyalty tier --history` showed the first 50 changes with no word of the rest."""
    ledger.loyalty.configure(
        "shop",
        {
            "tiers": [
                {"name": "base", "threshold": 0},
                {"name": "silver", "threshold": 100},
                {"name": "gold", "threshold": 300},
            ]
        },
    )
    ledger.accounts.open("shop", "alice")
    for order, amount in (("o1", 5000), ("o2", 6000), ("o3", 20000)):  # base, silver, gold
        ledger.loyalty.earn("shop", "alice", order, amount)

    first = cli("loyalty", "tier", "alice", "--history", "--limit", "2").output
    assert "order:o3" in first
    assert "order:o2" in first
    assert "order:o1" not in first
    cursor = first.split("next page: --cursor ")[1].split()[0]
    rest = json.loads(
        cli("loyalty", "tier", "alice", "--history", "--cursor", cursor, "--json").stdout
    )
    assert ([c["txn_id"] for c in rest["history"]], rest["cursor"]) == (["order:o1"], None)
    one = json.loads(cli("loyalty", "tier", "alice", "--history", "--limit", "1", "--json").stdout)
    assert [c["tier"] for c in one["history"]] == ["gold"]
    assert one["cursor"]
    refused = cli("loyalty", "tier", "alice", "--limit", "1", code=2).exception
    assert isinstance(refused, TallybookError)
    assert "give --history" in refused.message


def test_an_earn_at_a_time_with_no_utc_time_is_one_error_line(
    cli: Callable[..., Result], ledger: Ledger
) -> None:
    """`loyalty earn --at 0001-01-01T00:00:00+01:00` ended `unexpected OverflowError` (exit 1)."""
    ledger.loyalty.configure("shop", {})
    ledger.accounts.open("shop", "alice")
    refused = cli(
        "loyalty", "earn", "alice", "o1", "100", "--at", "0001-01-01T00:00:00+01:00", code=2
    ).exception
    assert isinstance(refused, TallybookError)
    assert refused.message.startswith("--at is out of range")
    assert ledger.accounts.balances("shop", "alice")[0].balance == 0


def test_a_rules_file_with_a_huge_integer_is_one_error_line(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A TOML integer of over 4300 digits ended `error: unexpected ValueError` (exit 1)."""
    rules = tmp_path / "huge.toml"
    rules.write_text('[[tiers]]\nname = "base"\nthreshold = 1' + "0" * 5000 + "\n")
    out = run("loyalty", "config", "load", str(rules), code=2)
    assert out.startswith(f"{rules}: a number in it is too long")
