"""docs/billing.md: its Python examples run as written, in page order, in one fresh
namespace and folder, and print what the page says they print."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

DOC = (Path(__file__).resolve().parents[2] / "docs" / "billing.md").read_text()


def test_the_python_examples_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC, flags=re.S)
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    for run in range(2):  # a second run replays every write instead of failing
        scope: dict[str, Any] = {}
        for code in blocks:
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
