"""The README's examples run as written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from docblocks import DocShell, blocks

README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.mark.parametrize("index", range(len(blocks(README.read_text(), "python"))))
def test_readme_python_example_runs_twice(index: int, tmp_path: Path) -> None:
    code = blocks(README.read_text(), "python")[index]
    shell = DocShell(tmp_path)
    for _ in range(2):  # idempotent: a second run replays instead of failing
        shell.python(code)


def test_readme_starts_with_run_and_test_commands() -> None:
    first_block = blocks(README.read_text(), "bash")[0]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()]
    assert commands[:2] == ["scripts/serve.sh", "scripts/test.sh"]
    for command in commands[:2]:
        assert (README.parent / command).exists()


def test_every_endpoint_the_docs_name_is_in_the_openapi_document(tmp_path: Path) -> None:
    """README.md and docs/*.md: each `METHOD /v1/...` they name (templated or with
    example values) is an operation of the OpenAPI document."""
    from tallybook.http.app import create_app
    from tallybook.ledger import Ledger

    paths = create_app(Ledger.open(f"sqlite:///{tmp_path / 'api.db'}")).openapi()["paths"]
    routes = [
        (re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$"), set(ops))
        for path, ops in paths.items()
    ]
    pattern = re.compile(r"\b(GET|POST|PUT|DELETE)\s+`?(/v1/[\w/{}.:@-]*\w)")
    docs = [README, *sorted((README.parent / "docs").glob("*.md"))]
    named = [(doc.name, *m) for doc in docs for m in pattern.findall(doc.read_text())]
    assert len(named) >= 40
    missing = [
        f"{doc}: {method} {path}"
        for doc, method, path in named
        if not any(rx.match(path) and method.lower() in ops for rx, ops in routes)
    ]
    assert missing == []


def _error_classes() -> list[type[Exception]]:
    import inspect

    from tallybook import errors

    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.TallybookError) and cls.__module__ == errors.__name__
    ]


def test_every_cli_exit_code_is_explained() -> None:
    """README's CLI section names every exit code an error maps to (HTTP-only errors
    aside), so a script can tell, e.g., `TooManyRetries` (6) from a store failure (1)."""
    from tallybook.errors import Forbidden, Unauthorized

    paragraphs = [" ".join(p.split()) for p in README.read_text().split("\n\n")]
    [paragraph] = [p for p in paragraphs if "exit non-zero: " in p]
    codes = paragraph.split("exit non-zero: ", 1)[1]
    documented = {int(n) for n in re.findall(r"(?:^|, )(\d+) ", codes)}
    raised = {cls.exit_code for cls in _error_classes() if cls not in (Unauthorized, Forbidden)}
    assert documented == raised


def test_the_errors_table_names_every_error_class() -> None:
    text = README.read_text()
    missing = [cls.__name__ for cls in _error_classes() if f"`{cls.__name__}`" not in text]
    assert missing == []


def test_store_urls_in_commands_are_quoted() -> None:
    """A store URL with `?` or `&` in a command must be quoted: zsh (macOS's shell) stops
    at an unquoted `?` ("no matches found"), and any shell at `&`. README's `table create`
    example was not."""
    docs = [README, *sorted((README.parent / "docs").glob("*.md"))]
    unquoted = [
        f"{doc.name}: {m.group(0)}"
        for doc in docs
        for m in re.finditer(
            r"(?:--store[ =]|TALLYBOOK_STORE=)(?!['\"])\S*[?&]\S*", doc.read_text()
        )
    ]
    assert unquoted == []


def test_the_backfill_example_runs_after_the_cli_walkthrough(tmp_path: Path) -> None:
    """README's "Reports: grace period and backfill" block, under ``set -e`` in the folder
    of the CLI walkthrough (its `shop`): it made no `history.ndjson`, so it failed."""
    bash = blocks(README.read_text(), "bash")
    cli = next(b for b in bash if "tallybook program create" in b)
    backfill = next(b for b in bash if "--start 2026-01-01" in b)
    shell = DocShell(tmp_path)
    shell.run(cli)
    result = shell.run(backfill)
    assert "1 created, 0 already ingested" in result.stdout
    day = tmp_path / "reports" / "shop" / "billing" / "20260101T000000Z_20260102T000000Z"
    assert "acme,USD,1,1005,50" in (day / "billing_totals.csv").read_text()


def _cli_commands() -> list[str]:
    """Every command a user can run, not the groups (typer vendors click: duck-typed)."""
    import typer.main

    from tallybook.cli import app

    found: list[str] = []

    def walk(command: Any, path: list[str]) -> None:
        if hasattr(command, "list_commands"):
            ctx = command.context_class(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])
        else:
            found.append(" ".join(path))

    walk(typer.main.get_command(app), [])
    return found


def test_the_docs_name_every_cli_command() -> None:
    """`tallybook account show`, `program show`, `wallet grants`, `wallet hold`,
    `webhooks enable` and `webhooks delete` were in `--help` and in no page: every
    command is written out as `tallybook <command>` in README.md or docs/*.md."""
    text = "\n".join(p.read_text() for p in [README, *(README.parent / "docs").glob("*.md")])
    missing = [
        cmd
        for cmd in _cli_commands()
        if not re.search(rf"tallybook {re.escape(cmd)}(?![\w-])", text)
    ]
    assert missing == []
