"""A lean path through a hot route for the requests that need nothing else.

FastAPI's generic handler solves each request's dependencies one by one,
validates every parameter through its own machinery, re-validates the
response model and wraps the call in two exit stacks; on a posting that costs
about as much as the posting's own Python. A route declared with
``route_class_override=fast_path(handler)`` keeps its FastAPI declaration
(signature, models, OpenAPI document: nothing of it changes) but first offers
each request to ``handler``, which either answers it or returns ``None``.

``None`` means "not mine": the request then goes through the generic handler,
unchanged, which answers it exactly as before (422 with FastAPI's field
errors, 400 malformed JSON, ...). So a handler only needs to be right for
well-formed requests, and it must keep FastAPI's order of failures:

1. the body is parsed as JSON (:func:`json_body`; failure: ``None``),
2. the caller is authenticated and authorised (:func:`tallybook.http.deps.principal_for`,
   which raises the same problems as the route's dependency),
3. parameters and body are validated (:meth:`FastPathRoute.validate_body`,
   :func:`header_id`; any failure: ``None``).

Errors raised by the handler (the service's own, as a ``TallybookError``)
reach the app's exception handlers exactly as they do from an endpoint.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tallybook.domain.ids import MAX_ID_LENGTH
from tallybook.http.schemas.common import ID_PATTERN

#: ``handler(route, request)``: the response, or ``None`` for the generic path
FastHandler = Callable[["FastPathRoute", Request], Awaitable[Response | None]]

_ID = re.compile(ID_PATTERN)


class FastPathRoute(APIRoute):
    """An ``APIRoute`` that offers each request to :attr:`fast` first."""

    fast: FastHandler

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] in (self.methods or ())
            and not self._overridden(scope)
        ):
            response = await type(self).fast(self, Request(scope, receive, send))
            if response is not None:
                await response(scope, receive, send)
                return
        await super().handle(scope, receive, send)

    def _overridden(self, scope: Scope) -> bool:
        """Dependency overrides (tests) need the generic path, which applies them."""
        app = scope.get("app")
        return bool(getattr(app, "dependency_overrides", None))

    def validate_body(self, data: Any) -> Any | None:
        """``data`` validated as the route's body exactly as FastAPI validates it;
        ``None`` when it is invalid (the generic path then reports why)."""
        field = self.body_field
        if field is None:
            return None
        value, errors = field.validate(data, {}, loc=("body",))
        return None if errors else value

    def render(self, value: BaseModel, status_code: int, headers: dict[str, str]) -> Response:
        """``value`` as FastAPI renders the route's response model (the same bytes),
        without validating again the model the handler just built."""
        field = self.response_field
        assert field is not None, "a fast route declares its response model"
        response = Response(
            field.serialize_json(value), status_code=status_code, media_type="application/json"
        )
        response.headers.update(headers)
        return response


def fast_path(handler: FastHandler) -> type[FastPathRoute]:
    """The route class for ``route_class_override`` that tries ``handler`` first."""
    return type(f"FastPath_{handler.__name__}", (FastPathRoute,), {"fast": staticmethod(handler)})


def match_first(app: FastAPI, router: APIRouter, method: str, path: str) -> None:
    """Have ``app`` try ``router``'s route for ``method path`` before all others.

    Starlette matches a request against the routes in order, and FastAPI's
    match of a route of an included router is not cheap: the posting route,
    about twentieth in line, paid more for being found than for its fast
    path. The route is registered once more at the head of the app's routes,
    out of the OpenAPI document (the original stays where it is documented).
    Only do it for a route whose path no earlier route matches, so that
    matching gives the same route as before.
    """
    original = next(
        r
        for r in router.routes
        if isinstance(r, APIRoute) and r.path == path and method in (r.methods or ())
    )
    first = type(original)(
        original.path,
        original.endpoint,
        methods=[method],
        status_code=original.status_code,
        response_model=original.response_model,
        name=original.name,
        openapi_extra=original.openapi_extra,
        include_in_schema=False,
        dependency_overrides_provider=app,
    )
    app.router.routes.insert(0, first)


def json_body(request: Request) -> Any | None:
    """The request's JSON body when FastAPI would parse it as JSON and it parses.

    The body was read and size-limited by the request middleware
    (``scope["state"]["body"]``); anything unusual (no body, another content
    type, JSON that does not parse, or a JSON ``null``) is ``None``.
    """
    body = request.scope.get("state", {}).get("body")
    if not body:
        return None
    content_type = request.headers.get("content-type", "")
    if content_type.partition(";")[0].strip().lower() != "application/json":
        return None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def header_id(request: Request, name: str) -> str | None:
    """A header holding an id (1-128 of A-Z a-z 0-9 . _ : -), as the route's
    ``Header(pattern=ID_PATTERN)`` parameter accepts it; ``None`` otherwise."""
    value = request.headers.get(name)
    if value is None or not 0 < len(value) <= MAX_ID_LENGTH or not _ID.fullmatch(value):
        return None
    return value
