"""docs/billing.md: its Python and CLI examples run as written, in page order, in one
fresh namespace and folder, and print what the page says they print."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from docblocks import DocShell, blocks

DOC = (Path(__file__).resolve().parents[2] / "docs" / "billing.md").read_text()


def test_the_python_examples_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    python = blocks(DOC, "python")
    assert len(python) == 2
    monkeypatch.chdir(tmp_path)
    for run in range(2):  # a second run replays every write instead of failing
        scope: dict[str, Any] = {}
        for code in python:
            exec(code, scope)
        printed = capsys.readouterr().out.splitlines()
        assert printed[0] == "100 1 ['r1', 'r2']"  # as the page's comment says
        assert (scope["summary"].created, scope["summary"].replayed) == (1 - run, run)
        window = scope["window"]
        assert printed[1] == window
        assert re.fullmatch(r"\d{8}T\d{6}Z_\d{8}T\d{6}Z", window)
        for name in ("billing_totals.csv", "billing_line_items.csv", "billing.json"):
            reported = tmp_path / "reports" / "shop" / "billing" / window / name
            again = tmp_path / "again" / "shop" / "billing" / window / name
            assert reported.read_bytes() == again.read_bytes()
    totals = (tmp_path / "reports" / "shop" / "billing").glob("*/billing_totals.csv")
    assert sum("acme" in path.read_text() for path in totals) == 2  # r1 and r2's hours


def test_the_cli_examples_run_as_written_after_the_python_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `bash` blocks under ``set -e`` on the default SQLite store, in a folder where
    the Python examples ran first (as a reader following the page does)."""
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {}
    for code in blocks(DOC, "python"):
        exec(code, scope)
    ingest, report = blocks(DOC, "bash")
    shell = DocShell(tmp_path)
    ingested = shell.run(ingest).stdout
    shell.run(report)
    assert "1 created, 0 already ingested, 0 filed late, 0 rejected" in ingested
    assert re.search(r"│ r1 +│ acme +│ o1 ", ingested), ingested
    window = "20260101T000000Z_20260102T000000Z"
    for name in ("billing_totals.csv", "billing_line_items.csv", "billing.json"):
        reported = tmp_path / "reports" / "shop" / "billing" / window / name
        again = tmp_path / "again" / "shop" / "billing" / window / name
        assert reported.read_bytes() == again.read_bytes()
    totals = tmp_path / "reports" / "shop" / "billing" / window / "billing_totals.csv"
    assert "acme,USD,1,1005,50" in totals.read_text()  # 1005 x 0.05 = 50.25 -> 50
