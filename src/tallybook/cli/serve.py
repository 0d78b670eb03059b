"""``tallybook serve``: the HTTP API (uvicorn) over a store."""

from __future__ import annotations

import socket
from typing import Annotated

import typer

from tallybook.cli.options import Number, StoreOption
from tallybook.cli.output import err_console
from tallybook.errors import TallybookError


def serve(
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", help="TCP port.", parser=Number(min=0, max=65535))
    ] = 8080,
    store: StoreOption = None,
    max_body: Annotated[
        int,
        typer.Option(
            "--max-body", help="Largest request body accepted, in bytes.", parser=Number(min=1)
        ),
    ] = 1024 * 1024,
    log_level: Annotated[
        str, typer.Option("--log-level", help="debug, info, warning or error.")
    ] = "info",
    metrics: Annotated[
        str,
        typer.Option(
            "--metrics",
            help="Who may read /metrics on the API address: key (an admin API key), "
            "open (anyone) or off.",
        ),
    ] = "key",
    metrics_bind: Annotated[
        str | None,
        typer.Option(
            "--metrics-bind",
            help="Serve /metrics without a key on this HOST:PORT only (e.g. 127.0.0.1:9100); "
            "the API address then serves none.",
        ),
    ] = None,
) -> None:
    """Serve the HTTP API, its OpenAPI docs and the admin page; logs are JSON lines.

    Example: tallybook serve --port 8080 --store sqlite:///./tallybook.db
    """
    import logging

    from tallybook.extras import install_hint, missing

    if missing("server"):
        err_console.print(install_hint("server"), style="red", markup=False)
        raise typer.Exit(1)
    import uvicorn

    from tallybook.http.app import create_app
    from tallybook.http.keycache import key_cache_seconds_from_env
    from tallybook.http.middleware import configure_json_logging
    from tallybook.ledger import Ledger

    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise typer.BadParameter(f"unknown log level {log_level!r}", param_hint="--log-level")
    if metrics not in ("key", "open", "off"):
        raise typer.BadParameter("choose key, open or off", param_hint="--metrics")
    bind = _host_port(metrics_bind) if metrics_bind else None
    key_cache_seconds = key_cache_seconds_from_env()
    _check_listen(host, port)
    configure_json_logging(level)
    ledger = Ledger.open(store)
    app = create_app(
        ledger,
        max_body=max_body,
        metrics_access="off" if bind else metrics,
        key_cache_seconds=key_cache_seconds,
    )
    if bind is not None:
        from prometheus_client import start_http_server

        start_http_server(bind[1], bind[0], registry=app.state.metrics.registry)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    base = f"http://{f'[{shown}]' if ':' in shown else shown}:{port}"  # [::1] in a URL
    err_console.print(f"tallybook on {ledger.store.describe()}")
    err_console.print(f"  durability: {ledger.store.durability()}")
    err_console.print(f"  API docs: {base}/docs")
    err_console.print(f"  admin:    {base}/admin")
    if bind is not None:
        err_console.print(f"  metrics:  http://{bind[0]}:{bind[1]}/metrics")
    if not ledger.programs.list():
        err_console.print(
            "  no program yet; create one and an admin key to log in:\n"
            "    tallybook program create shop\n"
            "    tallybook keys create --program shop --scopes read,write,admin"
        )
    try:
        uvicorn.run(
            app, host=host, port=port, access_log=False, log_config=None, log_level=log_level
        )
    except SystemExit as exc:
        if exc.code != _UVICORN_STARTUP_FAILURE:
            raise
        # e.g. the port taken between the check above and uvicorn's own bind
        raise TallybookError(
            f"the server could not start on {host}:{port} (the log line above says why)"
        ) from None
    finally:
        ledger.close()


#: uvicorn.run's exit code when the server did not start (it logs why first)
_UVICORN_STARTUP_FAILURE = 3


def _check_listen(host: str, port: int) -> None:
    """One error line (exit 1) when HOST:PORT cannot be listened on, e.g. a port in
    use, instead of uvicorn's JSON log lines and its exit code 3."""
    # the socket uvicorn makes: IPv6 for an address with a colon, else IPv4
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # a port left in TIME_WAIT by a server just stopped is free, as for uvicorn
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except (OSError, UnicodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise TallybookError(f"cannot listen on {host}:{port}: {reason}") from None


def _host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise typer.BadParameter("give HOST:PORT, e.g. 127.0.0.1:9100", param_hint="--metrics-bind")
    return host, int(port)
