"""ASGI middleware: request ids, JSON access logs, metrics, body limits.

Order, outermost first: :class:`RequestContextMiddleware` (request id, timing,
access log, metrics, last-resort 500 problem) -> :class:`BodyMiddleware` (size
limit 413, content type 415, reads the body once) -> idempotency -> the app.

Log lines never carry key material: the access log records the key id (an
identifier, useless without the secret), never the Authorization header or
the query string.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from datetime import UTC, datetime
from typing import Any, cast

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tallybook.errors import TallybookError
from tallybook.http.idempotency import replay_receive
from tallybook.http.metrics import Metrics
from tallybook.http.problems import PROBLEM_MEDIA_TYPE, problem_body

DEFAULT_MAX_BODY = 1024 * 1024
REQUEST_ID_HEADER = "X-Request-Id"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
_BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "tallybook_request_id", default=None
)
access_log = logging.getLogger("tallybook.http.access")
error_log = logging.getLogger("tallybook.http")

#: attributes of a LogRecord that are not user-supplied ``extra`` fields
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's ANSI-coloured duplicate of the message
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, extras."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None) or request_id_var.get()
        if request_id is not None:
            data["request_id"] = request_id
        for name, value in vars(record).items():
            if name not in _STANDARD_ATTRS and not name.startswith("_"):
                data[name] = value
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def configure_json_logging(level: int = logging.INFO) -> None:
    """Send tallybook's and uvicorn's logs to stderr as JSON lines."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    for name in ("tallybook", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(level)
        logger.propagate = False


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return cast(bytes, v).decode("latin-1")
    return None


async def send_problem(
    scope: Scope, send: Send, status: int, code: str, detail: str, title: str | None = None
) -> None:
    state = scope.setdefault("state", {})
    state["problem_code"] = code
    request_id = state.get("request_id")
    body = json.dumps(
        problem_body(
            status, code, detail, title=title, request_id=request_id, instance=scope.get("path")
        )
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = _header(scope, b"x-request-id")
        request_id = given if given and _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 0

        async def wrapped(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.lower().encode(), request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, wrapped)
        except TallybookError as exc:
            # raised outside the routes (the idempotency middleware's own store
            # reads and writes): the same problem a route would have answered
            error_log.warning("request failed: %s: %s", exc.code, exc.message)
            if status == 0:
                await send_problem(scope, wrapped, exc.status, exc.code, exc.message)
        except Exception:
            error_log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            if status == 0:
                await send_problem(
                    scope,
                    wrapped,
                    500,
                    "internal",
                    "an unexpected error occurred; it has been logged",
                    "Internal error",
                )
        finally:
            elapsed = time.perf_counter() - started
            self._record(scope, status or 500, elapsed)
            request_id_var.reset(token)

    def _record(self, scope: Scope, status: int, elapsed: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        self.metrics.observe_request(scope["method"], template, status, elapsed)
        state = scope.get("state", {})
        problem_code = state.get("problem_code")
        if problem_code is not None:
            self.metrics.observe_problem(status, problem_code)
        principal = state.get("principal")
        access_log.info(
            "request",
            extra={
                "request_id": scope.get("state", {}).get("request_id"),
                "method": scope["method"],
                "path": scope["path"],
                "route": template,
                "status": status,
                "duration_ms": round(elapsed * 1000, 3),
                "program": getattr(principal, "program", None),
                "key_id": getattr(principal, "key_id", None),
            },
        )


class BodyMiddleware:
    """Reads a request body once, up to ``max_body`` bytes (413 beyond); JSON only on /v1.

    ``text/plain`` is accepted under ``/v1`` too, because SNS delivers its JSON
    envelopes with that content type; routes parsing a pydantic body still
    need JSON and answer 422 otherwise.
    """

    def __init__(self, app: ASGIApp, max_body: int = DEFAULT_MAX_BODY) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await self._too_large(scope, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await self._too_large(scope, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and scope["path"].startswith("/v1/") and not _json_like(scope):
            await send_problem(
                scope,
                send,
                415,
                "unsupported-media-type",
                "send the request body as JSON (Content-Type: application/json)",
                "Unsupported media type",
            )
            return
        scope.setdefault("state", {})["body"] = body
        await self.app(scope, replay_receive(body, receive), send)

    async def _too_large(self, scope: Scope, send: Send) -> None:
        await send_problem(
            scope,
            send,
            413,
            "payload-too-large",
            f"the request body exceeds the limit of {self.max_body} bytes",
            "Payload too large",
        )


def _json_like(scope: Scope) -> bool:
    content_type = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
    return content_type in ("application/json", "text/plain") or content_type.endswith("+json")
