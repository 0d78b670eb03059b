"""``tallybook program create`` run twice (``--exist-ok``), and ``tallybook --version``,
through the console script's entry point, on both engines."""

from __future__ import annotations

import sys

import pytest

import tallybook
from tallybook.console import main
from tallybook.store.port import ItemStore


def tallybook_cmd(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["tallybook", *args])
    capsys.readouterr()
    code: int | str | None = 0
    try:
        main()
    except SystemExit as exited:
        code = exited.code
    out, err = capsys.readouterr()
    return (code if isinstance(code, int) else 1), out, err


def test_create_with_exist_ok_is_safe_to_repeat(
    store: ItemStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = store.describe()
    create = ("program", "create", "shop", "--store", url)
    code, out, _ = tallybook_cmd(monkeypatch, capsys, *create, "--exist-ok")
    assert (code, out.strip()) == (0, "program shop created (4 funds, currency USD)")
    code, out, _ = tallybook_cmd(monkeypatch, capsys, *create, "--exist-ok")
    assert (code, out.strip()) == (0, "program shop exists already (4 funds, currency USD)")
    code, _, err = tallybook_cmd(monkeypatch, capsys, *create)
    assert (code, err.strip()) == (5, "error: program shop exists already")
    code, _, err = tallybook_cmd(monkeypatch, capsys, *create, "--exist-ok", "--currency", "EUR")
    assert code == 5
    assert "exists with currency USD" in err
    code, _, _ = tallybook_cmd(monkeypatch, capsys, *create, "--exist-ok", "--currency", "USD")
    assert code == 0


def test_version(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["--version"], ["--version", "--store", "sqlite:///x.db"]):
        code, out, _ = tallybook_cmd(monkeypatch, capsys, *args)
        assert (code, out.strip()) == (0, f"tallybook {tallybook.__version__}")
