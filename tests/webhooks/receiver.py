"""A real webhook receiver on 127.0.0.1 for tests: verifies every signature with
:func:`tallybook.webhooks.verify` and records what it accepted, in arrival order."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tallybook.webhooks import WebhookVerificationError, verify


@dataclass
class Receiver:
    secret: str = ""
    #: answer this status to the next ``fail_count`` requests (then 200)
    fail_status: int = 500
    fail_count: int = 0
    #: every accepted delivery: (webhook-id, parsed body)
    accepted: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    rejected_signatures: int = 0
    failed_answers: int = 0
    #: requests whose body ended before its content-length (the sender was
    #: killed between sending the headers and the body): not answered, not a delivery
    cut_short: int = 0
    url: str = ""
    #: seconds to wait before answering (a slow endpoint)
    delay: float = 0.0
    #: when set, wait until it is set before answering (an endpoint that hangs
    #: until the test lets it go: no race with the sender's timeout)
    hold: threading.Event | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, headers: dict[str, str], body: bytes) -> int:
        with self.lock:
            if self.fail_count > 0:
                self.fail_count -= 1
                self.failed_answers += 1
                return self.fail_status
            try:
                msg_id = verify(self.secret, headers, body)
            except WebhookVerificationError:
                self.rejected_signatures += 1
                return 400
            self.accepted.append((msg_id, json.loads(body)))
            return 204

    def ids(self) -> set[str]:
        with self.lock:
            return {i for i, _ in self.accepted}


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            if len(body) < length:
                # http.client sends the headers and the body in two writes: a
                # sender SIGKILLed between them leaves a torn request, which no
                # receiver could answer (nor verify)
                with receiver.lock:
                    receiver.cut_short += 1
                self.close_connection = True
                return
            if receiver.delay:
                time.sleep(receiver.delay)
            if receiver.hold is not None:
                receiver.hold.wait(120)
            status = receiver.answer(dict(self.headers.items()), body)
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
