"""RFC 9457 problem details: every error the API answers is ``application/problem+json``.

``type`` is ``https://tallybook.dev/problems/<code>`` with the stable ``code`` of
the :mod:`tallybook.errors` class (or of the HTTP-level failure), so clients
branch on ``type``, never on ``detail`` text. Unexpected exceptions become a
500 problem that says nothing of internals; the exception is logged with the
request id.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, MutableMapping
from typing import Any
from urllib.parse import quote, unquote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from tallybook.errors import TallybookError

PROBLEM_BASE = "https://tallybook.dev/problems/"
PROBLEM_MEDIA_TYPE = "application/problem+json"
#: the longest ``detail`` a problem carries, and the longest text of an error's
#: ``msg`` or ``loc``: what a client sent is quoted, never repeated whole
MAX_DETAIL = 1000
MAX_ERROR_TEXT = 200
#: the longest request path a problem's ``instance`` (and a log line) repeats
MAX_PATH = 1000
#: the most ``errors`` a validation problem lists; ``errors_omitted`` counts the rest
MAX_ERRORS = 20

log = logging.getLogger("tallybook.http")

#: HTTP statuses the framework itself answers, and their stable codes
_HTTP_CODES = {
    400: ("bad-request", "Bad request"),
    401: ("unauthorized", "Unauthorized"),
    403: ("forbidden", "Forbidden"),
    404: ("not-found", "Not found"),
    405: ("method-not-allowed", "Method not allowed"),
    406: ("not-acceptable", "Not acceptable"),
    409: ("conflict", "Conflict"),
    413: ("payload-too-large", "Payload too large"),
    415: ("unsupported-media-type", "Unsupported media type"),
    422: ("validation", "Validation failed"),
    429: ("throttled", "Too many requests"),
    500: ("internal", "Internal error"),
    503: ("unavailable", "Service unavailable"),
}


class FieldError(BaseModel):
    """One invalid field of a request (``loc`` is the path to it)."""

    loc: list[str | int]
    msg: str
    type: str


class Problem(BaseModel):
    """An RFC 9457 problem document."""

    type: str = Field(description="stable URI naming the kind of problem")
    title: str
    status: int
    detail: str
    instance: str | None = None
    request_id: str | None = None
    errors: list[FieldError] | None = Field(
        default=None,
        description=(
            f"the invalid fields (request validation problems only): the first {MAX_ERRORS}"
        ),
    )
    errors_omitted: int | None = Field(
        default=None,
        description=f"how many invalid fields were left out of ``errors`` (over {MAX_ERRORS})",
    )


def _title(code: str) -> str:
    """The title of a problem ``code``: the framework's own where it has one
    (so a 422 is "Validation failed" whether pydantic or a service refused it)."""
    for known, title in _HTTP_CODES.values():
        if known == code:
            return title
    return code.replace("-", " ").capitalize()


def problem_body(
    status: int,
    code: str,
    detail: str,
    *,
    title: str | None = None,
    request_id: str | None = None,
    instance: str | None = None,
    errors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": PROBLEM_BASE + code,
        "title": title or _title(code),
        "status": status,
        "detail": _bounded(detail, MAX_DETAIL),
    }
    if instance is not None:
        body["instance"] = _bounded_reference(instance)
    if request_id is not None:
        body["request_id"] = request_id
    if errors is not None:
        body["errors"] = errors[:MAX_ERRORS]
        if len(errors) > MAX_ERRORS:
            body["errors_omitted"] = len(errors) - MAX_ERRORS
    return body


def scope_problem(
    scope: MutableMapping[str, Any],
    status: int,
    code: str,
    detail: str,
    *,
    title: str | None = None,
    errors: list[dict[str, Any]] | None = None,
) -> bytes:
    """The body of a problem answered by ASGI middleware (below the app's
    handlers), encoded as :class:`JSONResponse` encodes every other problem;
    records ``code`` for the metrics middleware."""
    state = scope.setdefault("state", {})
    state["problem_code"] = code
    body = problem_body(
        status,
        code,
        detail,
        title=title,
        request_id=state.get("request_id"),
        instance=instance_of(scope),
        errors=errors,
    )
    return bytes(JSONResponse(body).body)


def problem_response(
    status: int,
    code: str,
    detail: str,
    *,
    request: Request | None = None,
    title: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    request_id = None
    if request is not None:
        request.state.problem_code = code  # counted by the metrics middleware
        request_id = getattr(request.state, "request_id", None)
    instance = instance_of(request.scope) if request is not None else None
    body = problem_body(
        status, code, detail, title=title, request_id=request_id, instance=instance, errors=errors
    )
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def error_headers(exc: TallybookError) -> dict[str, str] | None:
    """The headers a problem for ``exc`` carries: ``Retry-After`` on a 429 or 503,
    ``WWW-Authenticate`` on a 401, ``Idempotent-Replayed`` on a final refusal given again."""
    headers = {"Retry-After": "1"} if exc.status in (429, 503) else None
    if exc.status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    if exc.replay:  # a final refusal given again for the same Idempotency-Key
        headers = {"Idempotent-Replayed": "true"}
    return headers


def error_response(exc: TallybookError, request: Request | None = None) -> JSONResponse:
    headers = error_headers(exc)
    return problem_response(
        exc.status, exc.code, exc.message, request=request, title=_title(exc.code), headers=headers
    )


def bounded_path(path: str) -> str:
    """A request ``path`` as a problem or a log line repeats it: at most
    :data:`MAX_PATH` characters (ending in an ellipsis when cut)."""
    return _bounded(path, MAX_PATH)


#: what a path keeps as it is in a URI reference: RFC 3986's ``pchar`` and ``/``
_PATH_CHARACTERS = "/:@!$&'()*+,;=-._~"


def instance_of(scope: MutableMapping[str, Any]) -> str:
    """The request's path as a problem's ``instance``, a URI reference (RFC 9457):
    percent-encoded as the client sent it (``raw_path``) when that is the path the
    app routes, else encoded again from the path (behind an API Gateway stage,
    which the app's path is without), never decoded (``a%2Fb`` is not ``a/b``)."""
    path = str(scope.get("path", ""))
    raw = scope.get("raw_path")
    if isinstance(raw, bytes) and unquote(raw.decode("latin-1")) == path:
        return quote(raw, safe=_PATH_CHARACTERS + "%")
    return quote(path, safe=_PATH_CHARACTERS)


def _bounded_reference(reference: str) -> str:
    """A percent-encoded ``reference`` cut as :func:`bounded_path` cuts a path,
    never inside an escape (``%2`` of ``%20``)."""
    if len(reference) <= MAX_PATH:
        return reference
    kept = reference[: MAX_PATH - 1]
    escape = kept.rfind("%", len(kept) - 2)
    return (kept[:escape] if escape >= 0 else kept) + "\u2026"


def _bounded(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters (ending in an ellipsis) when longer."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _field_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    out = []
    for err in exc.errors():
        loc = [
            p if isinstance(p, int) else _bounded(str(p), MAX_ERROR_TEXT)
            for p in err.get("loc", ())
        ]
        msg = _bounded(_message(err), MAX_ERROR_TEXT)
        out.append({"loc": loc, "msg": msg, "type": str(err.get("type", ""))})
    return out


def _message(err: Any) -> str:
    """The ``msg`` of a pydantic error; an unknown tag of a tagged union (a posting's
    ``type``) names the accepted ones first, so cutting what was sent never hides them."""
    ctx = err.get("ctx") or {}
    if err.get("type") == "union_tag_invalid" and "expected_tags" in ctx:
        tag, got = ctx.get("discriminator", "the tag"), _bounded(str(ctx.get("tag", "")), 40)
        return f"{tag} must be one of {ctx['expected_tags']}, not '{got}'"
    return str(err.get("msg", ""))


async def _tallybook_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TallybookError)
    if exc.status >= 500:
        log.warning("request failed: %s: %s", exc.code, exc.message)
    return error_response(exc, request)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = _field_errors(exc)
    if any(e["type"] == "json_invalid" for e in errors):
        return problem_response(
            400,
            "malformed-json",
            "the request body is not valid JSON",
            request=request,
            title="Malformed JSON",
        )
    summary = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[:5])
    # the count of the others is kept whole when the summary is cut
    rest = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return problem_response(
        422,
        "validation",
        _bounded(f"invalid request: {summary}", MAX_DETAIL - len(rest)) + rest,
        request=request,
        title="Validation failed",
        errors=errors,
    )


async def _http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code, title = _HTTP_CODES.get(exc.status_code, ("http-error", "HTTP error"))
    detail = exc.detail if isinstance(exc.detail, str) else title
    path = request.url.path
    if exc.status_code == 404 and path.endswith("/") and path != "/":
        detail = "Not Found (API paths do not end with '/')"
    headers = dict(exc.headers) if exc.headers else None
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(request))}
    return problem_response(
        exc.status_code, code, detail, request=request, title=title, headers=headers
    )


def allowed_methods(request: Request) -> list[str]:
    """Every method the app serves at the request's path: a path such as
    ``/v1/webhooks`` is served by one route per method, and Starlette's 405
    names only the first route's (``Allow: GET`` where POST works too).

    Of the routes whose template matches, those naming the most segments
    literally count (``.../notifications/history`` is not a notification id,
    although ``.../notifications/{notification_id}`` matches it)."""
    found: dict[str, set[str]] = {}
    _routes_at(request.app.router.routes, request.scope, found)
    if not found:
        return []
    literal = max(_literal_segments(template) for template in found)
    return _with_head(
        set().union(*(m for t, m in found.items() if _literal_segments(t) == literal))
    )


def _routes_at(
    routes: Iterable[Any], scope: MutableMapping[str, Any], found: dict[str, set[str]]
) -> None:
    """Fill ``found`` with the path template and methods of each route matching ``scope``."""
    for route in routes:
        inner = getattr(route, "original_router", None)  # FastAPI's included routers
        if inner is not None:
            _routes_at(inner.routes, scope, found)
            continue
        match, _ = route.matches(scope)
        methods = getattr(route, "methods", None)
        if match is not Match.NONE and methods:
            found.setdefault(str(route.path), set()).update(methods)


def literal_paths(routes: Iterable[Any]) -> tuple[tuple[re.Pattern[str], frozenset[str]], ...]:
    """(pattern, methods served) of each path template that a template with fewer
    literal segments also matches, with a method only the latter serves
    (``DELETE .../notifications/{notification_id}`` beside ``GET
    .../notifications/history``). Starlette would route such a method to the
    parameterised route, which reads ``history`` as an id (a 422); the request
    middleware answers it a 405 instead, as any other method a path does not serve."""
    templates = _templates(routes)
    found = []
    for template, (pattern, served) in templates.items():
        sample = re.sub(r"\{[^}]+\}", "x", template)
        literal = _literal_segments(template)
        if any(
            _literal_segments(other) < literal and other_pattern.match(sample) and others - served
            for other, (other_pattern, others) in templates.items()
        ):
            found.append((pattern, frozenset(served)))
    return tuple(found)


def route_paths(routes: Iterable[Any]) -> tuple[tuple[re.Pattern[str], frozenset[str]], ...]:
    """(pattern, methods served) of every path template of ``routes``: what the
    request middleware needs to know that a path or method is served at all."""
    return tuple((pattern, frozenset(served)) for pattern, served in _templates(routes).values())


def _templates(routes: Iterable[Any]) -> dict[str, tuple[re.Pattern[str], set[str]]]:
    templates: dict[str, tuple[re.Pattern[str], set[str]]] = {}
    for route in routes:
        methods = getattr(route, "methods", None)
        if methods:
            _, served = templates.setdefault(str(route.path), (route.path_regex, set()))
            served.update(methods)
    return templates


def allow_header(methods: Iterable[str]) -> str:
    """``Allow`` for a path serving ``methods``, HEAD included wherever GET is."""
    return ", ".join(_with_head(methods))


def _with_head(methods: Iterable[str]) -> list[str]:
    """``methods`` sorted, with HEAD wherever GET is: the request middleware
    answers it as GET without the body."""
    allowed = set(methods)
    if "GET" in allowed:
        allowed.add("HEAD")
    return sorted(allowed)


def _literal_segments(template: str) -> int:
    return sum(1 for part in template.split("/") if part and not part.startswith("{"))


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, bounded_path(request.url.path))
    return problem_response(
        500,
        "internal",
        "an unexpected error occurred; it has been logged",
        request=request,
        title="Internal error",
    )


def install(app: FastAPI) -> None:
    """Register the problem+json exception handlers on ``app``."""
    app.add_exception_handler(TallybookError, _tallybook_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(Exception, _unexpected)


#: a typical problem per status, the example of its documented answer: (code, detail)
_EXAMPLE_PROBLEMS = {
    400: ("malformed-json", "the request body is not valid JSON"),
    401: ("unauthorized", "unknown or revoked API key"),
    402: ("payment-declined", "the charge was declined; nothing was applied"),
    403: ("forbidden", "this API key lacks the 'write' scope"),
    404: ("not-found", "account alice not found in program shop"),
    409: (
        "idempotency-conflict",
        "transaction id topup-1 was used before with a different request",
    ),
    413: ("payload-too-large", "the request body is over 1048576 bytes"),
    415: (
        "unsupported-media-type",
        "send the request body as JSON (Content-Type: application/json)",
    ),
    422: ("insufficient-funds", "insufficient funds in cash of alice: available 250, needed 10000"),
    429: ("throttled", "the store is throttling requests; retry later"),
    500: ("internal", "internal error"),
    503: ("store-unavailable", "the store did not answer; retry later"),
}


def _problem_content(status: int) -> dict[str, Any]:
    code, detail = _EXAMPLE_PROBLEMS.get(status, _HTTP_CODES.get(status, ("problem", "")))
    example = {
        "type": PROBLEM_BASE + code,
        "title": _title(code),
        "status": status,
        "detail": detail or _title(code),
        "instance": "/v1/accounts/alice",
        "request_id": "6966124e6f6b492a9750adb25e8d5732",
    }
    return {
        PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}, "example": example}
    }


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries documenting problem answers for ``statuses``."""
    return {
        s: {
            "model": Problem,
            "description": _HTTP_CODES.get(s, ("", "Problem"))[1],
            "content": _problem_content(s),
        }
        for s in statuses
    }


#: the problems any authenticated /v1 route may answer
STANDARD_PROBLEMS = problem_responses(400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503)
