"""The ``tallybook`` command: a twin of the Python API.

Each capability registers its commands from its own module; errors from
:mod:`tallybook.errors` become a one-line message and the error's exit code,
never a stack trace.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from tallybook._version import __version__
from tallybook.cli import billing as billing_cli
from tallybook.cli import keys, ledger, program, serve, table
from tallybook.cli import loyalty as loyalty_cli
from tallybook.cli import notifications as notifications_cli
from tallybook.cli import report as report_cli
from tallybook.cli import torture as torture_cli
from tallybook.cli import wallet as wallet_cli
from tallybook.cli import webhooks as webhooks_cli
from tallybook.cli.options import NUMERIC_ARGS, NumericArgsCommand, StoreOption
from tallybook.errors import TallybookError
from tallybook.store.url import resolve_store_url

app = typer.Typer(
    name="tallybook",
    help="Rewards, loyalty and wallet ledger. Store: --store URL or $TALLYBOOK_STORE "
    "(default sqlite:///./tallybook.db).",
    epilog="Example: tallybook --store sqlite:///./tallybook.db account show alice --program shop",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"tallybook {__version__}")
        raise typer.Exit()


@app.callback()
def _global(
    store: StoreOption = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Rewards, loyalty and wallet ledger.

    Every command takes --store URL (or $TALLYBOOK_STORE); the default is the
    embedded SQLite file ./tallybook.db. Accepted: sqlite:///PATH.db,
    dynamodb://TABLE?region=REGION&endpoint=URL, or memory://NAME (tests and
    experiments only: the data is lost when the command exits).
    """
    if store is not None:  # an empty one is refused, not read as the default
        os.environ["TALLYBOOK_STORE"] = resolve_store_url(store)


app.add_typer(
    table.app,
    name="table",
    epilog="Example: tallybook table create --store 'dynamodb://ledger?region=eu-west-1'",
)
app.add_typer(ledger.account_app, name="account")
# a negative adjustment (-5) is an amount, not an option
app.command("post", context_settings=NUMERIC_ARGS, cls=NumericArgsCommand)(ledger.post)
app.command("history")(ledger.history)
app.command("check")(ledger.check)
app.add_typer(program.app, name="program")
app.add_typer(keys.app, name="keys")
app.command("serve")(serve.serve)
app.add_typer(
    loyalty_cli.app,
    name="loyalty",
    epilog="Example: tallybook loyalty earn alice order-1001 4599 --program shop",
)
app.command("expire")(loyalty_cli.expire)
app.add_typer(
    notifications_cli.app,
    name="notifications",
    epilog="Example: tallybook notifications list alice --program shop",
)
app.add_typer(
    notifications_cli.events_app,
    name="events",
    epilog="Example: tallybook events ingest events.ndjson --program shop",
)
app.add_typer(
    billing_cli.app,
    name="billing",
    epilog="Example: tallybook billing list --program shop --since 2026-01-01T00:00:00Z "
    "--until 2026-01-02T00:00:00Z",
)
app.add_typer(
    report_cli.app,
    name="report",
    epilog="Example: tallybook report run --program shop --interval 1h --out ./reports",
)
app.add_typer(
    wallet_cli.app,
    name="wallet",
    epilog="Example: tallybook wallet balance alice --program shop",
)
app.command("reconcile")(wallet_cli.reconcile)
app.add_typer(
    webhooks_cli.app,
    name="webhooks",
    epilog="Example: tallybook webhooks deliver --once",
)
app.command("torture")(torture_cli.torture)


def _click_error(exc: Exception) -> bool:
    """One of click's errors: a usage error (missing or bad option, unknown command,
    extra argument) or a file error. By name: typer runs on its own copy of click."""
    return any(c.__name__ == "ClickException" for c in type(exc).__mro__)


def _click_error_line(exc: Exception) -> str:
    """A click error as one ``error:`` line like every other error, instead of
    click's usage lines and rich box; a usage error names the command's --help."""
    message = " ".join(str(getattr(exc, "format_message", exc.__str__)()).split())
    if not message.endswith((".", "?", "!")):
        message += "."
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        message += f" Try '{ctx.command_path} --help'."
    elif type(exc).__name__ == "BadOptionUsage":  # an option given no value: click has no ctx
        message += f" Try '{_command_path(sys.argv[1:])} --help'."
    return f"error: {message}"


def _command_path(args: list[str]) -> str:
    """The command ``args`` run, named as click names it in its hints: ``tallybook
    wallet hold``, or ``python -m tallybook wallet hold`` when run as a module."""
    package = getattr(sys.modules["__main__"], "__package__", None)
    name = os.path.basename(sys.argv[0])
    if package:
        module = os.path.splitext(name)[0]
        name = f"python -m {package if module == '__main__' else f'{package}.{module}'}"
    words = [name]
    command = typer.main.get_command(app)
    for word in args:
        subcommands = getattr(command, "commands", None)
        if not subcommands:
            break
        if word in subcommands:
            command = subcommands[word]
            words.append(word)
    return " ".join(words)


#: the exit status when the reader of stdout went away (``tallybook history ... | head -1``):
#: a shell's status for a command ended by SIGPIPE (128 + 13), as ``cat`` or ``seq`` give
CLOSED_PIPE_EXIT = 141


def main() -> None:
    """Run the command; a closed stdout ends it quietly with :data:`CLOSED_PIPE_EXIT`.

    click and rich end a write to a closed pipe with exit 1, and output Python
    still buffered raised at exit ("Exception ignored ... BrokenPipeError", exit
    120). SIGPIPE keeps Python's handling (ignored), so ``serve`` and webhook
    deliveries do not die of a client's closed socket.
    """
    code: str | int | None = CLOSED_PIPE_EXIT
    try:
        _main()
    except SystemExit as exc:
        if not isinstance(exc.__context__, BrokenPipeError):
            try:  # what print() left buffered, written here rather than at exit
                sys.stdout.flush()
            except BrokenPipeError:
                if exc.code not in (0, None):
                    code = exc.code  # a failure keeps its own exit code
            else:
                raise
    except BrokenPipeError:
        pass
    # nothing more can reach the reader: stdout goes nowhere, so exit flushes nothing
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(code)


def _main() -> None:
    try:
        # not standalone: click's errors come here instead of being drawn as a box
        code = app(standalone_mode=False)
    except typer.Abort:
        typer.secho("error: aborted", err=True, fg=typer.colors.RED)
        sys.exit(1)
    except TallybookError as exc:
        typer.secho(f"error: {exc.message}", err=True, fg=typer.colors.RED)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # last resort: one line, never a stack trace (unless asked)
        if _click_error(exc):
            if type(exc).__name__ != "NoArgsIsHelpError":  # its help is printed already
                typer.secho(_click_error_line(exc), err=True, fg=typer.colors.RED)
            sys.exit(getattr(exc, "exit_code", 2))
        if os.environ.get("TALLYBOOK_DEBUG"):
            raise
        typer.secho(
            f"error: unexpected {type(exc).__name__}: {exc} (set TALLYBOOK_DEBUG=1 for details)",
            err=True,
            fg=typer.colors.RED,
        )
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
