"""``tallybook webhooks ...``: subscriptions, deliveries, resend and the delivery worker."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from tallybook.cli.keys import JsonOption, ProgramOption
from tallybook.cli.options import Number, StoreOption
from tallybook.cli.output import console, err_console, next_page, open_ledger, print_json, table
from tallybook.domain.webhooks import short_position
from tallybook.errors import ValidationError

if TYPE_CHECKING:
    from tallybook.webhooks.service import WebhookService

app = typer.Typer(
    help="Signed, retried webhooks of the ledger's events (docs/webhooks.md).",
    epilog="Example: tallybook webhooks create https://example.com/hooks --program shop",
    no_args_is_help=True,
)

SubArg = Annotated[str, typer.Argument(help="Subscription id (sub_...).")]


@app.command("create")
def create(
    url: Annotated[str, typer.Argument(help="The receiver's https:// URL.")],
    program: ProgramOption,
    types: Annotated[
        str | None,
        typer.Option("--types", help="Comma-separated event types (default: every type)."),
    ] = None,
    allow_http: Annotated[
        bool,
        typer.Option("--allow-http", help="Development only: accept http:// to a loopback host."),
    ] = False,
    description: Annotated[
        str | None,
        typer.Option(
            "--description",
            help="Free text kept on the subscription (at most 200, no control characters).",
        ),
    ] = None,
    sub_id: Annotated[str | None, typer.Option("--id", help="Choose the id.")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Subscribe a URL and print its signing secret ONCE.

    Examples:
      tallybook webhooks create https://example.com/hooks -p shop
      tallybook webhooks create https://example.com/h -p shop --types hold.expired
    """
    wanted = [t.strip() for t in types.split(",")] if types is not None else []
    if "" in wanted:
        raise ValidationError("--types takes event types separated by commas, none empty")
    with open_ledger(store) as ledger:
        created = ledger.webhooks.create(
            program,
            url,
            types=wanted,
            allow_http=allow_http,
            description=description,
            sub_id=sub_id,
        )
    sub = created.subscription
    if as_json:
        print_json({**sub.public(), "secret": created.secret})
        return
    print(created.secret)
    err_console.print(
        f"subscription {sub.id} -> {sub.url}: store the secret now, it is not shown again"
    )


@app.command("list")
def list_subscriptions(
    program: ProgramOption, store: StoreOption = None, as_json: JsonOption = False
) -> None:
    """List a program's subscriptions (never their secrets).

    Example: tallybook webhooks list --program shop
    """
    with open_ledger(store, create=False) as ledger:
        subs = ledger.webhooks.list(program)
    if as_json:
        print_json([s.public() for s in subs])
        return
    table(
        f"webhook subscriptions of {program}",
        ["id", "url", "types", "status", "secret"],
        [[s.id, s.url, ",".join(s.types) or "(all)", s.status, s.secret_hint] for s in subs],
    )


def _change(store: str | None, change: Callable[[WebhookService], None], done: str) -> None:
    with open_ledger(store) as ledger:
        change(ledger.webhooks)
    console.print(done)


@app.command("disable")
def disable(sub_id: SubArg, program: ProgramOption, store: StoreOption = None) -> None:
    """Stop delivering to a subscription (its queue waits).

    Example: tallybook webhooks disable sub_0123456789abcdef --program shop
    """
    _change(store, lambda w: w.disable(program, sub_id), f"subscription {sub_id} disabled")


@app.command("enable")
def enable(sub_id: SubArg, program: ProgramOption, store: StoreOption = None) -> None:
    """Deliver to a subscription again (after a 410 or a disable).

    Example: tallybook webhooks enable sub_0123456789abcdef --program shop
    """
    _change(store, lambda w: w.enable(program, sub_id), f"subscription {sub_id} enabled")


@app.command("delete")
def delete(sub_id: SubArg, program: ProgramOption, store: StoreOption = None) -> None:
    """Delete a subscription.

    Example: tallybook webhooks delete sub_0123456789abcdef --program shop
    """
    _change(store, lambda w: w.delete(program, sub_id), f"subscription {sub_id} deleted")


@app.command("deliveries")
def deliveries(
    sub_id: SubArg,
    program: ProgramOption,
    limit: Annotated[
        int,
        typer.Option("--limit", parser=Number(min=1, max=200), help="Deliveries per page (1-200)."),
    ] = 20,
    cursor: Annotated[
        str | None, typer.Option(help="Cursor from the previous page (printed after it).")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """A subscription's deliveries, newest first, with their last attempt.

    One page of --limit deliveries; the next one is --cursor CURSOR, as printed
    (on stderr with --json, which prints the page's list).

    Example: tallybook webhooks deliveries sub_0123456789abcdef --program shop
    """
    with open_ledger(store, create=False) as ledger:
        items, next_cursor = ledger.webhooks.deliveries(program, sub_id, limit=limit, cursor=cursor)
    if as_json:
        print_json([d.public() for d in items])
        next_page(next_cursor, stderr=True)
        return
    # positions without their leading zeros (`resend` takes them so); event ids and
    # latencies are in --json, errors only when there are some: at 80 columns there
    # was no room left for the status
    errors = any(d.last_error for d in items)
    table(
        f"deliveries of {sub_id}",
        ["position", "status", "type", "tries", "code", *(["error"] if errors else [])],
        [
            [
                short_position(d.position),
                d.status,
                d.type,
                d.attempts,
                d.last_code,
                *([d.last_error] if errors else []),
            ]
            for d in items
        ],
    )
    next_page(next_cursor)


@app.command("resend")
def resend(
    sub_id: SubArg,
    position: Annotated[str, typer.Argument(help="The delivery's position (see deliveries).")],
    program: ProgramOption,
    store: StoreOption = None,
) -> None:
    """Queue a delivery again; the next worker pass sends it.

    A delivery still queued (not yet delivered or dead) stays as it is, and the
    command says so.

    Example: tallybook webhooks resend sub_0123456789abcdef 1795802895697672712.000 --program shop
    """
    with open_ledger(store) as ledger:
        _, queued = ledger.webhooks.requeue(program, sub_id, position)
    if queued:
        console.print(f"delivery {position} of {sub_id} queued again")
    else:
        console.print(
            f"delivery {position} of {sub_id} is still queued (not yet delivered or dead): "
            "nothing changed; the worker sends it when it is due"
        )


@app.command("new-key")
def new_key() -> None:
    """Print a fresh server key for TALLYBOOK_WEBHOOK_KEY (it seals webhook secrets).

    To rotate, put the new key first and the old one after a comma, run
    `tallybook webhooks rekey`, then drop the old key.

    Example: export TALLYBOOK_WEBHOOK_KEY=$(tallybook webhooks new-key)
    """
    from tallybook.webhooks.vault import new_key as make

    print(make())


@app.command("rekey")
def rekey(
    program: Annotated[
        str | None, typer.Option("--program", "-p", help="One program (default: every program).")
    ] = None,
    store: StoreOption = None,
) -> None:
    """Seal every subscription's secret under the current server key.

    Moves secrets sealed with an older key (listed after the current one in
    TALLYBOOK_WEBHOOK_KEY) and plain-text secrets of older versions to it.
    Without a key it touches nothing (and makes no SQLite key file unless it
    has a plain-text secret to seal). A secret no listed key opens is left as
    it is and named on one error line each, the others are sealed all the
    same, and the exit is 2: add the missing key and run it again (safe: a
    sealed secret is skipped). Do not drop an old key before a clean run.

    Example: tallybook webhooks rekey
    """
    from tallybook.webhooks.vault import RekeyIncomplete

    with open_ledger(store, create=False) as ledger:  # a mistyped path: refused, not made
        try:
            changed = ledger.webhooks.rekey(program)
        except RekeyIncomplete as exc:
            for _, _, why in exc.failed:  # why names the subscription and program
                err_console.print(
                    f"error: {why}",
                    style="red",
                    markup=False,
                    highlight=False,
                )
            console.print(
                f"{exc.sealed} subscription secret(s) sealed under the current key, "
                f"{len(exc.failed)} not"
            )
            raise typer.Exit(exc.exit_code) from None
    console.print(f"{changed} subscription secret(s) sealed under the current key")


#: the longest --interval: a longer wait (1e20 s) overflows after a pass
MAX_INTERVAL = 86_400


@app.command("deliver")
def deliver(
    once: Annotated[
        bool, typer.Option("--once", help="One pass, then exit (a scheduled job).")
    ] = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            help="Seconds between idle passes (at most a day).",
            parser=Number(min=0.05, max=MAX_INTERVAL, decimal=True),
        ),
    ] = 1.0,
    store: StoreOption = None,
) -> None:
    """Deliver due webhooks: take in new events, send, retry, dead-letter.

    Runs until interrupted (SIGINT/SIGTERM end it after the current pass), or
    one pass with --once. Prints one line per pass that did something.

    Example: tallybook webhooks deliver --once
    """
    # set by SIGTERM; waited on between idle passes, so a stop also ends the wait
    # (a sleep went on to its end: up to --interval seconds)
    stopping = threading.Event()

    def stop(*_: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    with open_ledger(store, create=False) as ledger:  # a mistyped path: refused, not made
        worker = ledger.webhooks.worker()
        while True:
            stats = worker.run_once()
            if stats.delivered or stats.failed or stats.dead or stats.disabled or once:
                console.print(
                    f"delivered {stats.delivered}, failed {stats.failed}, dead {stats.dead}, "
                    f"waiting {stats.waiting}, subscriptions disabled {stats.disabled}"
                )
            if once or stopping.is_set():
                return
            if not (stats.delivered or stats.failed):
                stopping.wait(interval)
