"""The DynamoDB engine owns its retries: botocore sends each request once.

An endpoint that fails every request with a retryable error is sent exactly
the engine's budget of requests for one call; botocore retrying underneath
would multiply it (and double the wait on an endpoint that never answers)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tallybook.errors import StoreUnavailable
from tallybook.store.dynamodb.errors import MAX_ATTEMPTS
from tallybook.store.dynamodb.store import DynamoStore
from tallybook.store.port import Key


class _Failing(BaseHTTPRequestHandler):
    """Answers every request as DynamoDB answers an internal error."""

    requests = 0

    def do_POST(self) -> None:
        type(self).requests += 1
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"x"}'
        self.send_response(500)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def failing_endpoint() -> Iterator[str]:
    _Failing.requests = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_one_call_sends_the_engines_budget_and_no_more(failing_endpoint: str) -> None:
    store = DynamoStore("retries", region="us-east-1", endpoint=failing_endpoint)
    store.connection.sleep = lambda seconds: None
    with pytest.raises(StoreUnavailable):
        store.get(Key("a", "b"))
    assert _Failing.requests == MAX_ATTEMPTS
