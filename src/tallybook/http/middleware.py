"""One pure-ASGI middleware for everything around a request, and the JSON logs.

:class:`RequestMiddleware` (outermost of ours) gives the request its id and
trace context, reads and limits the body (413 beyond ``max_body``, 415 for a
non-JSON body under ``/v1``, ``text/plain`` included except where SNS sends
it), records the request in the metrics, writes the access log line, and
turns an exception that escaped the app into a problem.
It is one layer on purpose: every ASGI layer wraps ``send`` and ``receive``
once more, and on a posting that overhead is of the order of the posting.

Request id: ``X-Request-Id`` when given and well-formed, else the W3C trace
id of a valid ``traceparent``, else a fresh one; echoed in ``X-Request-Id``,
in every problem body and in every log line of the request. A valid
``traceparent`` is honoured: its trace id and parent span id go into the log
lines, and the response carries a ``traceparent`` with the same trace id and
this request's own span id.

Log lines never carry key material: the access log records the key id (an
identifier, useless without the secret), never the Authorization header or
the query string.
"""

from __future__ import annotations

import contextvars
import logging
import re
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any, cast
from urllib.parse import parse_qsl

from pythonjsonlogger.json import JsonFormatter as _LibraryJsonFormatter
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tallybook.domain.json_text import RepeatedKey, loads_unique
from tallybook.errors import TallybookError
from tallybook.http.deps import PARSED_BODY
from tallybook.http.idempotency import replay_receive
from tallybook.http.metrics import Metrics
from tallybook.http.problems import (
    PROBLEM_MEDIA_TYPE,
    allow_header,
    bounded_path,
    error_headers,
    scope_problem,
)

DEFAULT_MAX_BODY = 1024 * 1024
REQUEST_ID_HEADER = "X-Request-Id"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_BODY_METHODS = frozenset(("POST", "PUT", "PATCH", "DELETE"))
#: the answer a request is refused with, sent unless no route serves it (a 404 or 405)
Refusal = Callable[[Send], Awaitable[None]]
_REQUEST_ID_KEY = REQUEST_ID_HEADER.lower().encode()
_IDEMPOTENCY_KEY = b"idempotency-key"

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "tallybook_request_id", default=None
)
#: (trace id, parent span id, this request's span id) of a request with a traceparent
trace_var: contextvars.ContextVar[tuple[str, str, str] | None] = contextvars.ContextVar(
    "tallybook_trace", default=None
)
#: the log fields of :data:`trace_var`'s three ids, on every line of a traced request
_TRACE_FIELDS = ("trace_id", "parent_span_id", "span_id")
access_log = logging.getLogger("tallybook.http.access")
error_log = logging.getLogger("tallybook.http")


class JsonFormatter(_LibraryJsonFormatter):
    """One JSON object per line (python-json-logger): time, level, logger,
    message, the request id and trace of the request being served, and the
    record's ``extra`` fields."""

    def __init__(self) -> None:
        super().__init__(
            "%(message)s %(levelname)s %(name)s",
            rename_fields={"levelname": "level", "name": "logger"},
            reserved_attrs=[*_RESERVED, "color_message", "taskName"],
            json_default=str,
        )

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        log_data["time"] = datetime.fromtimestamp(record.created, UTC).isoformat()
        super().add_fields(log_data, record, message_dict)
        log_data["level"] = str(log_data.get("level", "")).lower()
        request_id = getattr(record, "request_id", None) or request_id_var.get()
        if request_id is not None:
            log_data["request_id"] = request_id
        trace = trace_var.get()
        if trace is not None and "trace_id" not in log_data:
            log_data.update(zip(_TRACE_FIELDS, trace, strict=True))


_RESERVED = tuple(vars(logging.LogRecord("", 0, "", 0, "", (), None)))


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
    scope: Scope,
    send: Send,
    status: int,
    code: str,
    detail: str,
    title: str | None = None,
    headers: dict[str, str] | None = None,
    errors: list[dict[str, Any]] | None = None,
) -> None:
    body = scope_problem(scope, status, code, detail, title=title, errors=errors)
    extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
                (b"content-length", str(len(body)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _trace(scope: Scope) -> tuple[str, str, str] | None:
    """(trace id, parent span id, new span id) from a valid W3C ``traceparent``."""
    value = _header(scope, b"traceparent")
    match = _TRACEPARENT.fullmatch(value.strip().lower()) if value else None
    if match is None or match.group(1) == "ff":
        return None
    trace_id, parent = match.group(2), match.group(3)
    if trace_id == "0" * 32 or parent == "0" * 16:
        return None
    return trace_id, parent, secrets.token_hex(8)


class RequestMiddleware:
    """Request id, trace, body limit and content type, HEAD as GET, metrics, access log,
    last-resort 500."""

    def __init__(
        self,
        app: ASGIApp,
        metrics: Metrics,
        max_body: int = DEFAULT_MAX_BODY,
        literal_paths: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (),
        api_paths: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (),
        too_large_page: Callable[[Scope, int], Response | None] | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body = max_body
        #: :func:`tallybook.http.problems.literal_paths` of the app's API routes
        self.literal_paths = literal_paths
        #: :func:`tallybook.http.problems.route_paths` of the app's API routes
        self.api_paths = api_paths
        #: the admin page's own answer to a body over ``max_body`` (``None``: not a page)
        self.too_large_page = too_large_page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        trace = _trace(scope)
        given = _header(scope, b"x-request-id")
        if given and _REQUEST_ID.fullmatch(given):
            request_id = given
        else:
            request_id = trace[0] if trace else uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        extra = [(_REQUEST_ID_KEY, request_id.encode())]
        if trace is not None:
            extra.append((b"traceparent", f"00-{trace[0]}-{trace[2]}-01".encode()))
        token = request_id_var.set(request_id)
        trace_token = trace_var.set(trace)
        status = 0
        # HEAD is answered as GET without the body (RFC 9110: a server supports
        # both); the routes declare GET only
        head = scope["method"] == "HEAD"
        app_scope = {**scope, "method": "GET"} if head else scope

        async def wrapped(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), *extra]
            elif head and message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        try:
            for pattern, served in self.literal_paths:
                if app_scope["method"] not in served and pattern.match(scope["path"]):
                    allow = {"Allow": allow_header(served)}
                    detail = "Method Not Allowed"
                    await send_problem(
                        scope, wrapped, 405, "method-not-allowed", detail, headers=allow
                    )
                    return
            refusal: Refusal | None = None
            query = scope.get("query_string", b"")
            if query and scope["path"].startswith("/v1/"):
                name = _repeated_parameter(query)
                if name is not None:
                    refusal = partial(_refuse_repeated_parameter, scope, name=name)
            if refusal is None and scope["method"] in _BODY_METHODS:
                if _given_twice(scope, _IDEMPOTENCY_KEY):
                    refusal = partial(_refuse_repeated_key_header, scope)
                else:
                    read = await self._read_body(scope, receive)
                    if read is None:
                        return  # the client left
                    body, refusal = read
                    receive = replay_receive(body, receive)
            # an unknown path is a 404 and a method the path does not serve a 405
            # (with Allow), whatever its query or body would be refused for; the
            # routes are only scanned for a request about to be refused
            if refusal is not None and not self._unserved(app_scope):
                await refusal(wrapped)
                return
            await self.app(app_scope, receive, wrapped)
        except TallybookError as exc:
            # raised outside the routes (the idempotency middleware's own store
            # reads and writes): the same problem a route would have answered
            error_log.warning("request failed: %s: %s", exc.code, exc.message)
            if status == 0:
                await send_problem(
                    scope, wrapped, exc.status, exc.code, exc.message, headers=error_headers(exc)
                )
        except Exception:
            error_log.exception(
                "unhandled error on %s %s", scope["method"], bounded_path(scope["path"])
            )
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
            if head and "route" in app_scope:
                scope["route"] = app_scope["route"]
            self._record(scope, status or 500, time.perf_counter() - started)
            request_id_var.reset(token)
            trace_var.reset(trace_token)

    def _unserved(self, scope: Scope) -> bool:
        """Whether no API route serves this ``/v1`` path and method (none is, without
        ``api_paths``)."""
        path, method = scope["path"], scope["method"]
        if not self.api_paths or not path.startswith("/v1/"):
            return False
        return not any(method in served and p.match(path) for p, served in self.api_paths)

    async def _read_body(
        self, scope: Scope, receive: Receive
    ) -> tuple[bytes, Refusal | None] | None:
        """The whole body (empty when too large) and the refusal it earns, if any;
        ``None`` when the client left."""
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            return b"", partial(self._too_large, scope, receive)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return b"", partial(self._too_large, scope, receive)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if body and scope["path"].startswith("/v1/") and not _json_like(scope):
            return body, partial(
                send_problem,
                scope,
                status=415,
                code="unsupported-media-type",
                detail="send the request body as JSON (Content-Type: application/json)",
                title="Unsupported media type",
            )
        repeated = _parse_unique(scope, body)
        if repeated is not None:  # which one counts would be a guess: refused, never ignored
            return body, partial(
                send_problem,
                scope,
                status=422,
                code="validation",
                detail=f"invalid request: the body gives {repeated[:64]!r} more than once",
                errors=[
                    {"loc": ["body", repeated[:64]], "msg": "given twice", "type": "duplicate"}
                ],
            )
        scope["state"]["body"] = body
        return body, None

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        page = self.too_large_page(scope, self.max_body) if self.too_large_page else None
        if page is not None:
            await page(scope, receive, send)
            return
        await send_problem(
            scope,
            send,
            413,
            "payload-too-large",
            f"the request body exceeds the limit of {self.max_body} bytes",
            "Payload too large",
        )

    def _record(self, scope: Scope, status: int, elapsed: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        self.metrics.observe_request(scope["method"], template, status, elapsed)
        state = scope["state"]
        problem_code = state.get("problem_code")
        if problem_code is not None:
            self.metrics.observe_problem(status, problem_code)
        if not access_log.isEnabledFor(logging.INFO):
            return
        principal = state.get("principal")
        trace = trace_var.get()
        access_log.info(
            "request",
            extra={
                "request_id": state.get("request_id"),
                **({} if trace is None else dict(zip(_TRACE_FIELDS, trace, strict=True))),
                "method": scope["method"],
                "path": bounded_path(scope["path"]),
                "route": template,
                "status": status,
                "duration_ms": round(elapsed * 1000, 3),
                "program": getattr(principal, "program", None),
                "key_id": getattr(principal, "key_id", None),
            },
        )


def _given_twice(scope: Scope, name: bytes) -> bool:
    """Whether the request carries header ``name`` more than once."""
    count = 0
    for k, _ in scope.get("headers", ()):
        if k.lower() == name:
            count += 1
    return count > 1


async def _refuse_repeated_key_header(scope: Scope, send: Send) -> None:
    """Two ``Idempotency-Key`` headers: which one is the request's (its transaction
    id) would be a guess, so it is refused, never run under the first. (Behind
    API Gateway the two arrive joined by a comma, which the key's pattern refuses.)"""
    await send_problem(
        scope,
        send,
        422,
        "validation",
        "invalid request: the Idempotency-Key header is given more than once",
        errors=[{"loc": ["header", "Idempotency-Key"], "msg": "given twice", "type": "duplicate"}],
    )


def _repeated_parameter(query: bytes) -> str | None:
    """A name the query string gives more than once (every ``/v1`` parameter
    takes one value), else ``None``."""
    seen: set[str] = set()
    for name, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if name in seen:
            return name
        seen.add(name)
    return None


async def _refuse_repeated_parameter(scope: Scope, send: Send, name: str) -> None:
    """``?limit=1&limit=500``: which value counts would be a guess (Starlette took
    the last), so it is refused, never read."""
    await send_problem(
        scope,
        send,
        422,
        "validation",
        f"invalid request: the query parameter {name[:64]!r} is given more than once",
        errors=[{"loc": ["query", name[:64]], "msg": "given twice", "type": "duplicate"}],
    )


def _parse_unique(scope: Scope, body: bytes) -> str | None:
    """A key a JSON object of a ``/v1`` body gives twice (the SNS route answers its
    own envelopes); ``None`` when there is none or the body is not JSON (the
    route answers that). A body that parses is kept as
    ``scope["state"][PARSED_BODY]``: the routes and the idempotency fingerprint
    read it instead of parsing the bytes again."""
    path = scope["path"]
    if not body or not path.startswith("/v1/") or path in TEXT_JSON_PATHS:
        return None
    try:
        scope["state"][PARSED_BODY] = loads_unique(body)
    except RepeatedKey as exc:
        return exc.key
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return None


#: the routes that also read a ``text/plain`` body as JSON (SNS delivers its
#: envelopes with that type); any other route would refuse it as "not an object"
TEXT_JSON_PATHS = frozenset(("/v1/events/sns",))


def _json_like(scope: Scope) -> bool:
    """JSON, or ``text/plain`` on a route that reads it (:data:`TEXT_JSON_PATHS`)."""
    content_type = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
    if content_type == "text/plain":
        return scope["path"] in TEXT_JSON_PATHS
    return content_type == "application/json" or content_type.endswith("+json")
