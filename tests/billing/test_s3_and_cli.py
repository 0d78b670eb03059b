"""Reports to S3 (moto's server on loopback) and the CLI twin of the Python API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner

from tallybook.cli import app
from tallybook.ledger import Ledger
from tallybook.services.billing.sinks import DirectorySink, S3Sink, open_sink
from tallybook.services.clock import ManualClock
from tallybook.store.port import ItemStore

from .helpers import MIN, aligned_start, ingest, record, snapshot


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server_mod = pytest.importorskip("moto.server")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    assert host == "127.0.0.1"
    yield f"http://{host}:{port}"
    server.stop()


def _s3(endpoint: str) -> object:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def test_reports_to_s3_match_the_folder_bytes(
    ledger: Ledger, clock: ManualClock, tmp_path: Path, s3_endpoint: str
) -> None:
    client = _s3(s3_endpoint)
    client.create_bucket(Bucket="reports")  # type: ignore[attr-defined]
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=0, start=t0)
    clock.advance(MIN)
    ingest(ledger, "r1", t0 + MIN, amount=250, rate="0.1")
    ingest(ledger, "r2", t0 + 2 * MIN, partner="beta", amount=35, rate="0.1")
    clock.set(t0 + 16 * MIN)
    sink = open_sink("s3://reports/exports/", endpoint=s3_endpoint)
    assert isinstance(sink, S3Sink)
    results = ledger.billing.reports.run("shop", sink=sink, kinds=["billing"])
    assert len(results) == 1
    window = results[0].window
    ledger.billing.reports.rerun(
        "shop", window, kind="billing", sink=DirectorySink(tmp_path / "local")
    )
    local = snapshot(tmp_path / "local")
    listing = client.list_objects_v2(Bucket="reports", Prefix="exports/")  # type: ignore[attr-defined]
    remote = {
        o["Key"].removeprefix("exports/"): client.get_object(  # type: ignore[attr-defined]
            Bucket="reports", Key=o["Key"]
        )["Body"].read()
        for o in listing["Contents"]
    }
    assert remote == local
    totals = remote[f"shop/billing/{window}/billing_totals.csv"].decode().splitlines()
    assert totals[1:] == ["acme,USD,1,250,25", "beta,USD,1,35,4"]  # 3.5 -> 4 (half even)
    assert ledger.billing.reports.list("shop")[0].location == "s3://reports/exports"


def test_s3_errors_are_clear(s3_endpoint: str) -> None:
    from tallybook.errors import StoreUnavailable

    sink = open_sink("s3://no-such-bucket", endpoint=s3_endpoint)
    with pytest.raises(StoreUnavailable, match="no-such-bucket"):
        sink.write("shop/billing/x/billing.json", b"{}")


def test_cli_ingest_run_rerun_list(
    ledger: Ledger,
    store: ItemStore,
    clock: ManualClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t0 = aligned_start(clock)
    # t0 is the next full hour, so real time (the CLI's clock) is within the hour before it
    ledger.billing.configure("shop", grace_minutes=0, start=t0 - 180 * MIN)
    lines = [
        json.dumps(record(f"r{i}", t0 - (170 - 5 * i) * MIN, amount=100 * i + 1)) for i in range(8)
    ]
    lines.insert(3, "{not json")
    lines.append(json.dumps(record("r1", t0 - 165 * MIN, amount=101)))  # a replay
    data = tmp_path / "records.ndjson"
    data.write_text("\n".join(lines) + "\n")
    url = store.describe()
    monkeypatch.setenv("TALLYBOOK_STORE", url)
    runner = CliRunner()

    result = runner.invoke(app, ["billing", "ingest", str(data), "-p", "shop", "--json"])
    assert result.exit_code == 2, result.output
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    assert (summary["created"], summary["replayed"]) == (8, 1)
    assert summary["errors"][0]["line"] == 4
    # the CLI's own process clock is real time: reports are due
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "report",
            "run",
            "-p",
            "shop",
            "--interval",
            "1h",
            "--kind",
            "billing",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout[result.stdout.index("[") :])
    assert runs
    assert sum(r["rows"] for r in runs) == 8
    window = runs[0]["window"]
    again = tmp_path / "again"
    result = runner.invoke(
        app, ["report", "rerun", "-p", "shop", "--window", window, "--out", str(again)]
    )
    assert result.exit_code == 0, result.output
    first = out / "shop" / "billing" / window
    assert {p.name: p.read_bytes() for p in first.iterdir()} == {
        p.name: p.read_bytes() for p in (again / "shop" / "billing" / window).iterdir()
    }
    result = runner.invoke(app, ["report", "list", "-p", "shop", "--json"])
    assert result.exit_code == 0
    assert [r["window"] for r in json.loads(result.stdout)][-1] == window
    result = runner.invoke(
        app, ["report", "rerun", "-p", "shop", "--window", "bad", "--out", str(again)]
    )
    assert result.exit_code != 0


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)  # CLI options only
def test_cli_report_to_s3_and_to_the_default_folder(
    ledger: Ledger,
    store: ItemStore,
    clock: ManualClock,
    tmp_path: Path,
    s3_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=0, start=t0 - 180 * MIN)
    clock.set(t0 - 60 * MIN)
    ingest(ledger, "r1", t0 - 170 * MIN, amount=1000)
    _s3(s3_endpoint).create_bucket(Bucket="cli-reports")  # type: ignore[attr-defined]
    monkeypatch.setenv("TALLYBOOK_STORE", store.describe())
    monkeypatch.setenv("TALLYBOOK_S3_ENDPOINT", s3_endpoint)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    args = ["report", "run", "-p", "shop", "--interval", "1h", "--kind", "billing", "--json"]
    result = runner.invoke(app, [*args, "--out", "s3://cli-reports/tb"])
    assert result.exit_code == 0, result.output
    window = json.loads(result.stdout[result.stdout.index("[") :])[0]["window"]
    key = f"tb/shop/billing/{window}/billing_totals.csv"
    body = _s3(s3_endpoint).get_object(Bucket="cli-reports", Key=key)["Body"].read()  # type: ignore[attr-defined]
    assert body.decode().splitlines()[1:] == ["acme,USD,1,1000,50"]
    # without --out: ./reports
    result = runner.invoke(app, ["report", "rerun", "-p", "shop", "--window", window])
    assert result.exit_code == 0, result.output
    assert (
        tmp_path / "reports" / "shop" / "billing" / window / "billing_totals.csv"
    ).read_bytes() == body


def test_cli_ingest_rejects_a_line_that_is_not_utf8_and_goes_on(
    ledger: Ledger, store: ItemStore, clock: ManualClock, tmp_path: Path
) -> None:
    """Was: 'unexpected UnicodeDecodeError' (exit 1), the lines after it never read
    and the batch before it never written."""
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", start=t0 - 180 * MIN)
    good = [json.dumps(record(f"r{i}", t0 - (170 - i) * MIN)).encode() for i in range(3)]
    bad = json.dumps(record("rx", t0 - 160 * MIN, partner="acme")).encode()
    bad = bad.replace(b'"acme"', b'"acm\xe9"')  # Latin-1, not UTF-8
    data = tmp_path / "records.ndjson"
    data.write_bytes(b"\n".join([good[0], bad, good[1], good[2]]) + b"\n")
    result = CliRunner().invoke(
        app, ["--store", store.describe(), "billing", "ingest", str(data), "-p", "shop", "--json"]
    )
    assert result.exit_code == 2, result.output
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    assert summary["created"] == 3
    assert summary["errors"] == [{"line": 2, "error": "not valid UTF-8"}]
    assert [r.id for r in ledger.billing.records("shop", t0 - 180 * MIN, t0).records] == [
        "r0",
        "r1",
        "r2",
    ]


def test_cli_ingest_rejects_json_the_http_api_refuses_line_by_line(
    ledger: Ledger, store: ItemStore, clock: ManualClock, tmp_path: Path
) -> None:
    """Was: a number past int()'s 4300 digits or nesting past the recursion limit
    stopped the run with 'unexpected ValueError' / 'RecursionError' (exit 1, the
    batch before it never written); a key given twice was read as its last value
    (an amount of 900 where HTTP refuses the body). Each is now that line's error."""
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", start=t0 - 180 * MIN)
    good = [json.dumps(record(f"r{i}", t0 - (170 - i) * MIN)) for i in range(3)]
    twice = json.dumps(record("rx", t0 - 160 * MIN, amount=1)).replace(
        '"amount": 1,', '"amount": 1, "amount": 900,'
    )
    huge = json.dumps(record("ry", t0 - 160 * MIN)).replace("1000", "1" * 5000)
    deep = "[" * 100_000 + "]" * 100_000
    data = tmp_path / "records.ndjson"
    data.write_text("\n".join([good[0], twice, huge, good[1], deep, good[2]]) + "\n")
    result = CliRunner().invoke(
        app, ["--store", store.describe(), "billing", "ingest", str(data), "-p", "shop", "--json"]
    )
    assert result.exit_code == 2, result.output
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    assert summary["created"] == 3
    assert summary["errors"] == [
        {"line": 2, "error": "not valid JSON ('amount' is given more than once)"},
        {"line": 3, "error": "not valid JSON (a number is too large)"},
        {"line": 5, "error": "not valid JSON (nested too deeply)"},
    ]
    listed = ledger.billing.records("shop", t0 - 180 * MIN, t0).records
    assert [r.id for r in listed] == ["r0", "r1", "r2"]
