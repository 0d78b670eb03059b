"""Servers the end-to-end tests talk to on 127.0.0.1: a free port for one, and the
HTTP app served by uvicorn in a thread of the test process."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tallybook.http.app import create_app
from tallybook.ledger import Ledger


def free_port() -> int:
    """A free port of 127.0.0.1 (the docs' servers say 8080)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(ledger: Ledger) -> Iterator[str]:
    """``create_app(ledger)`` served by uvicorn on a free port of 127.0.0.1, in a
    thread; yields its base URL once it accepts connections, stops it after."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(
        create_app(ledger), host="127.0.0.1", port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
