"""CLI edges: how numbers are read, what a refused command leaves behind, exit
codes, report kinds, rekey and paging.

Commands run in-process through :func:`tallybook.cli.main` (the console script)
on a SQLite file; what is asserted is what a user sees.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import typer.main

from tallybook.cli import app
from tallybook.errors import NotFound
from tallybook.ledger import Ledger
from tallybook.services.loyalty.service import load_toml
from tallybook.store import keys
from tallybook.webhooks.vault import KEY_ENV, RekeyIncomplete, keyring_for, new_key

from .test_cli_contract import _leaves
from .test_ledger_cli import Cli, one_error


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'edges.db'}"


@pytest.fixture
def ledger(url: str) -> Ledger:
    ledger = Ledger.open(url)
    ledger.programs.create("shop")
    ledger.accounts.open("shop", "alice")
    return ledger


@pytest.fixture
def cli(url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(monkeypatch, capsys, url)


def _state(ledger: Ledger) -> object:
    return ledger.accounts.get("shop", "alice"), ledger.programs.get("shop", fresh=True)


# Python's int() and float() take all of these; a number typed here is ASCII digits
NOT_ASCII_NUMBERS = ["\uff11\uff12", "\u0665", "5_000", " 5", "5 ", "+5", "0x10", "1e3", "nan"]


@pytest.mark.parametrize("value", NOT_ASCII_NUMBERS)
@pytest.mark.parametrize(
    "args",
    [
        ["post", "credit", "alice", "cash", "{}", "--txn", "t1"],
        ["wallet", "credit", "alice", "cash", "{}", "--txn", "t1"],
        ["wallet", "authorize", "alice", "{}", "--hold-id", "h1"],
        ["loyalty", "earn", "alice", "o-1", "{}"],
        ["program", "threshold", "shop", "cash", "{}"],
        ["history", "alice", "--fund", "cash", "--limit", "{}"],
        ["loyalty", "expiring", "alice", "--days", "{}"],
        ["wallet", "grant", "alice", "5", "--expires-days", "{}", "--txn", "g1"],
        ["billing", "configure", "--bucket-minutes", "{}"],
    ],
    ids=lambda a: " ".join(a[:2]) + (" " + a[-2] if a[-2].startswith("--") else ""),
)
def test_a_number_that_is_not_ascii_digits_is_refused(
    cli: Cli, ledger: Ledger, args: list[str], value: str
) -> None:
    # was: int() read fullwidth "12" as 12, "5_000" as 5000 and " 5" as 5, and the command ran
    before = _state(ledger)
    argv = [value if a == "{}" else a for a in args]
    if argv[0] != "program":
        argv += ["-p", "shop"]
    code, out, err = cli(*argv)
    assert code == 2, (out, err)
    line = one_error(err)
    assert "ASCII digits" in line, line
    assert _state(ledger) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["webhooks", "deliver", "--once", "--interval", "nan"], "is not a number"),
        (["webhooks", "deliver", "--once", "--interval", "inf"], "is not a number"),
        (["webhooks", "deliver", "--once", "--interval", "\uff11"], "is not a number"),
        (
            ["webhooks", "deliver", "--interval", "100000000000000000000"],
            "is not in the range 0.05<=x<=86400",
        ),
        (["torture", "--replay-rate", "0_5"], "is not a number"),
        (["torture", "--replay-rate", "1.5"], "1.5 is not in the range 0<=x<=1"),
        (["events", "ingest", "x.ndjson", "-p", "shop", "--show", "-1"], "x>=0"),
        (["webhooks", "deliveries", "sub_x", "-p", "shop", "--limit", "\uff12"], "not an integer"),
    ],
)
def test_decimal_options_are_ascii_too(cli: Cli, args: list[str], message: str) -> None:
    # was: float("nan") passed --interval's minimum and time.sleep(nan) failed after a pass
    code, _, err = cli(*args)
    assert code == 2, err
    assert message in one_error(err)


def test_every_numeric_parameter_uses_the_one_parser() -> None:
    # click's own INT and FLOAT call int() and float(): fullwidth digits and "5_000" pass
    command = typer.main.get_command(app)
    for path in _leaves():
        ctx_command = command
        for name in path:
            ctx_command = ctx_command.commands[name]  # type: ignore[attr-defined]
        for param in ctx_command.params:
            kind = type(param.type).__name__
            assert kind not in {"IntParamType", "IntRange", "FloatParamType", "FloatRange"}, (
                path,
                param.name,
            )


def test_ascii_numbers_still_work(cli: Cli, ledger: Ledger) -> None:
    cli.ok("post", "credit", "alice", "cash", "500", "--txn", "t1", "-p", "shop")
    cli.ok("post", "adjust", "alice", "cash", "-5", "--txn", "t2", "-p", "shop")
    cli.ok("history", "alice", "--fund", "cash", "--limit", "007", "-p", "shop")
    cli.ok("program", "threshold", "shop", "cash", "100")
    assert ledger.accounts.get("shop", "alice").funds["cash"].balance == 495


def test_a_refused_command_keeps_a_store_that_exists(cli: Cli, url: str, tmp_path: Path) -> None:
    assert cli("program", "create", "shop")[0] == 0
    code, _, err = cli("program", "create", "shop")
    assert code == 5, err
    assert Ledger.open(url).programs.get("shop").id == "shop"


def test_loyalty_config_show_without_rules_is_not_found(cli: Cli, ledger: Ledger) -> None:
    # was: exit 2 (bad input) for rules that do not exist; the README's exit 4 is not found
    code, out, err = cli("loyalty", "config", "show", "-p", "shop")
    assert code == 4, err
    assert "program shop has no loyalty configuration" in one_error(err)
    assert out == ""
    with pytest.raises(NotFound, match="no loyalty configuration"):
        ledger.loyalty.config("shop")
    # a command that needs the rules is still refused as not configured (exit 2)
    code, _, err = cli("loyalty", "earn", "alice", "o-1", "100", "-p", "shop")
    assert code == 2
    assert "no loyalty configuration" in one_error(err)


def test_report_rerun_writes_every_kind_report_run_wrote(
    cli: Cli, ledger: Ledger, tmp_path: Path
) -> None:
    # was: rerun defaulted to --kind billing where run defaults to all: the rewards
    # report of a window run wrote was not written again
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    ledger.billing.configure("shop", grace_minutes=0, start=start)
    at = start + timedelta(minutes=10)
    ledger.billing.ingest(
        "shop",
        "r1",
        partner="acme",
        order_id="o-1",
        amount=1000,
        currency="USD",
        rate="0.05",
        time=at,
    )
    first, again = tmp_path / "first", tmp_path / "again"
    code, out, err = cli("report", "run", "-p", "shop", "--interval", "1h", "--out", str(first))
    assert code == 0, err
    window = sorted(p.name for p in (first / "shop" / "billing").iterdir())[0]
    code, out, err = cli("report", "rerun", "-p", "shop", "--window", window, "--out", str(again))
    assert code == 0, err
    for kind in ("billing", "rewards"):
        written = {p.name: p.read_bytes() for p in (first / "shop" / kind / window).iterdir()}
        rewritten = {p.name: p.read_bytes() for p in (again / "shop" / kind / window).iterdir()}
        assert rewritten == written, kind
    code, out, _ = cli("report", "rerun", "--help", store=False)
    assert code == 0
    assert "every kind reported for WINDOW" in " ".join(out.replace("│", " ").split())


def test_webhooks_rekey_seals_every_secret_it_can_and_names_each_it_cannot(
    cli: Cli, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # was: the first secret no key opened stopped the rekey; the ones after it stayed
    # under the old key, which the operator was about to drop
    old, lost, new = new_key(), new_key(), new_key()
    for sub_id, key in (("s1", old), ("s2", lost), ("s3", old), ("s4", lost)):
        monkeypatch.setenv(KEY_ENV, key)
        ledger.webhooks.create("shop", "http://127.0.0.1:9/hook", allow_http=True, sub_id=sub_id)
    monkeypatch.setenv(KEY_ENV, f"{new},{old}")
    code, out, err = cli("webhooks", "rekey")
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 2, err
    for line, sub_id in zip(lines, ["s2", "s4"], strict=True):
        assert line.startswith(f"error: the secret of subscription {sub_id} of program shop ")
        assert "not among the 2 key(s)" in line
    assert "2 subscription secret(s) sealed under the current key, 2 not" in out
    current = keyring_for(ledger.store)
    sealed = {
        s: str(ledger.store.get(keys.webhook_subscription("shop", s))["secret_sealed"])  # type: ignore[index]
        for s in ("s1", "s2", "s3", "s4")
    }
    assert [s for s, v in sealed.items() if current.is_current(v)] == ["s1", "s3"]
    # the same through the Python API, and a second run is a no-op for those sealed
    with pytest.raises(RekeyIncomplete) as raised:
        ledger.webhooks.rekey("shop")
    assert (raised.value.sealed, [f[1] for f in raised.value.failed]) == (0, ["s2", "s4"])
    monkeypatch.setenv(KEY_ENV, f"{new},{old},{lost}")  # the missing key found
    assert cli("webhooks", "rekey", "-p", "shop")[:2] == (
        0,
        "2 subscription secret(s) sealed under the current key\n",
    )


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NEXT_PAGE = re.compile(r"^next page: --cursor (\S+)$", re.M)


@pytest.mark.parametrize(
    "args",
    [
        ["history", "alice", "--fund", "points"],
        ["wallet", "transactions", "alice"],
        ["loyalty", "members", "member"],
        ["loyalty", "expiring", "alice", "--days", "3660"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_every_paged_list_prints_the_same_next_page_line(
    cli: Cli, ledger: Ledger, args: list[str]
) -> None:
    # was: loyalty members and expiring printed "more: --cursor ..." on stderr where
    # the others print "next page: --cursor ..." after the table
    ledger.loyalty.configure("shop", load_toml(str(EXAMPLES / "loyalty.toml")))
    ledger.accounts.open("shop", "bob")
    for i, member in enumerate(["alice", "alice", "bob"]):
        ledger.loyalty.earn("shop", member, f"o-{i}", 1000)
    ledger.wallet.credit("shop", "alice", "cash", 5, txn_id="w1")
    ledger.wallet.credit("shop", "alice", "cash", 5, txn_id="w2")
    code, out, err = cli(*args, "--limit", "1", "-p", "shop")
    assert code == 0, err
    assert "--cursor" not in err
    (cursor,) = NEXT_PAGE.findall(out)
    assert out.rstrip().endswith(f"next page: --cursor {cursor}")
    for _ in range(20):  # the line's cursor reads on, to a page without one
        code, out, err = cli(*args, "--limit", "1", "--cursor", cursor, "-p", "shop")
        assert code == 0, err
        more = NEXT_PAGE.findall(out)
        if not more:
            break
        cursor = more[0]
    assert not more


def test_only_one_helper_prints_the_next_page_line() -> None:
    cli_dir = Path(__file__).resolve().parents[2] / "src" / "tallybook" / "cli"
    spelled = [p.name for p in cli_dir.glob("*.py") if "--cursor {" in p.read_text()]
    assert spelled == ["output.py"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["post", "credit", "alice", "cash", "9" * 5000, "--txn", "t1"],
            "(5000 digits) is too large",
        ),
        (
            ["history", "alice", "--fund", "cash", "--limit", "9" * 5000],
            "(5000 digits) is too large",
        ),
        (["post", "credit", "alice", "cash", "x" * 500, "--txn", "t1"], "'xxxxxxxxxx"),
    ],
    ids=["amount digits", "limit digits", "amount text"],
)
def test_a_number_too_long_for_int_is_one_short_error_line(
    cli: Cli, ledger: Ledger, args: list[str], message: str
) -> None:
    # was: int() refused 4300 digits and the line said "not an integer", quoting all 5000
    code, _, err = cli(*args, "-p", "shop")
    assert code == 2
    line = one_error(err)
    assert message in line
    assert len(line) < 200, line


def test_help_still_shows_the_range_of_a_bounded_number(cli: Cli) -> None:
    # click's IntRange showed it; the one parser names its bounds in the metavar
    code, out, _ = cli("torture", "--help", store=False)
    assert code == 0
    assert "<integer 2<=x<=500>" in out
    assert "<decimal 0<=x<=1>" in out


def test_a_report_interval_is_one_rule_on_every_edge(
    cli: Cli, ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI (and Python) took ``1H`` and `` 1h`` where HTTP refused ``1H``; every
    edge now takes a number and m, h or d in either case, nothing around it."""
    from fastapi.testclient import TestClient

    from tallybook.domain.billing import parse_interval
    from tallybook.errors import ValidationError
    from tallybook.http.app import create_app

    monkeypatch.setenv("TALLYBOOK_REPORTS_OUT", str(tmp_path / "http"))
    _, secret = ledger.keys.create("shop", "admin", None)
    headers = {"Authorization": f"Bearer {secret}"}
    out = str(tmp_path / "cli")
    with TestClient(create_app(ledger)) as client:
        for text in ("1H", "15M", "1d"):
            assert parse_interval(text) == parse_interval(text.lower())
            code, _, err = cli("report", "run", "-p", "shop", "--interval", text, "--out", out)
            assert code == 0, err
            r = client.post("/v1/reports/run", json={"interval": text}, headers=headers)
            assert r.status_code == 200, r.text
        for text in (" 1h", "1h ", "1 h", "1w", "32d"):
            with pytest.raises(ValidationError):
                parse_interval(text)
            code, _, err = cli("report", "run", "-p", "shop", "--interval", text, "--out", out)
            assert code != 0
            assert "interval" in one_error(err)
            r = client.post("/v1/reports/run", json={"interval": text}, headers=headers)
            assert r.status_code == 422, r.text
            assert r.headers["content-type"] == "application/problem+json"


def test_a_typed_interval_with_spaces_is_refused_naming_the_option(
    cli: Cli, ledger: Ledger, tmp_path: Path
) -> None:
    """`` 15m `` was refused as "interval ' 15m ' must look like 15m, 1h or 1d",
    naming neither the option nor what was wrong with it."""
    out = str(tmp_path / "r")
    code, _, err = cli("report", "run", "-p", "shop", "--interval", " 15m ", "--out", out)
    assert code == 2, err
    line = one_error(err)
    assert line.startswith("error: Invalid value for '--interval': interval ' 15m ' must be"), line
    assert "nothing around it" in line, line


def test_a_malformed_report_interval_setting_is_named_and_not_blamed_on_the_request(
    cli: Cli, ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$TALLYBOOK_REPORT_INTERVAL `` 1h `` was refused as "interval ' 1h ' must
    look like 15m, 1h or 1d", naming no variable, and over HTTP a run naming no
    interval answered 422 ``validation``, as if the client had sent it. It is the
    server's setting: named, and a 400 ``invalid-config``."""
    from fastapi.testclient import TestClient

    from tallybook.http.app import create_app

    monkeypatch.setenv("TALLYBOOK_REPORTS_OUT", str(tmp_path / "http"))
    monkeypatch.setenv("TALLYBOOK_REPORT_INTERVAL", " 1h ")
    _, secret = ledger.keys.create("shop", "admin", None)
    code, _, err = cli("report", "run", "-p", "shop", "--out", str(tmp_path / "cli"))
    assert code == 2, err
    line = one_error(err)
    assert line.startswith("error: TALLYBOOK_REPORT_INTERVAL: interval ' 1h ' must"), line
    assert "nothing around it" in line, line
    with TestClient(create_app(ledger)) as client:
        r = client.post("/v1/reports/run", json={}, headers={"Authorization": f"Bearer {secret}"})
    problem = r.json()
    assert (r.status_code, problem["type"]) == (
        400,
        "https://tallybook.dev/problems/invalid-config",
    )
    assert problem["detail"].startswith("TALLYBOOK_REPORT_INTERVAL: interval ' 1h ' must")
    assert not (tmp_path / "cli").exists()


def test_a_commission_rate_is_one_rule_on_every_edge(
    cli: Cli, ledger: Ledger, tmp_path: Path
) -> None:
    """NDJSON and Python took the integers 0 and 1 as a rate, HTTP refused them; every
    edge now takes them, and refuses a float, a bool or another integer."""
    from fastapi.testclient import TestClient

    from tallybook.errors import ValidationError
    from tallybook.http.app import create_app

    _, secret = ledger.keys.create("shop", "read,write", None)
    headers = {"Authorization": f"Bearer {secret}"}
    record = {"partner": "acme", "order_id": "o-1", "amount": 1000, "currency": "USD"}
    record["time"] = "2026-01-01T12:00:00Z"
    rows = tmp_path / "records.ndjson"
    with TestClient(create_app(ledger)) as client:
        for i, rate in enumerate([0, 1, "1", "0.05"]):
            ids = [f"py-{i}", f"http-{i}", f"cli-{i}"]
            kept = ledger.billing.ingest("shop", ids[0], rate=rate, **record)  # type: ignore[arg-type]
            r = client.post(
                "/v1/billing/records", json={**record, "id": ids[1], "rate": rate}, headers=headers
            )
            assert r.status_code == 201, r.text
            rows.write_text(json.dumps({**record, "id": ids[2], "rate": rate}) + "\n")
            code, out, err = cli("billing", "ingest", "-p", "shop", str(rows))
            assert code == 0, err
            assert "1 created" in out
            stored = {ledger.billing.get("shop", i).rate for i in ids}
            assert stored == {kept.rate} == {r.json()["rate"]}
        for i, rate in enumerate([0.5, 1.0, True, 2, -1]):
            with pytest.raises(ValidationError):
                ledger.billing.ingest("shop", f"bad-py-{i}", rate=rate, **record)  # type: ignore[arg-type]
            r = client.post(
                "/v1/billing/records",
                json={**record, "id": f"bad-http-{i}", "rate": rate},
                headers=headers,
            )
            assert r.status_code == 422, r.text
            assert "rate" in r.json()["detail"]
            rows.write_text(json.dumps({**record, "id": f"bad-cli-{i}", "rate": rate}) + "\n")
            code, out, err = cli("billing", "ingest", "-p", "shop", str(rows))
            assert "0 created" in out, (out, err)
            assert "1 rejected" in out, (out, err)


def test_loyalty_earn_at_outside_1970_to_9000_is_one_error_line(cli: Cli, ledger: Ledger) -> None:
    # was: --at 0001-01-02 was taken (HTTP refuses a time outside 1970-9000)
    ledger.loyalty.configure("shop", {})
    for at in ("0001-01-02T00:00:00Z", "1969-12-31T23:59:59Z"):
        code, out, err = cli("loyalty", "earn", "alice", "o-1", "100", "--at", at, "-p", "shop")
        assert code == 2, err
        assert "at must be between 1970 and 9000" in one_error(err)
        assert out == ""
    with pytest.raises(NotFound):
        ledger.loyalty.order("shop", "o-1")
