"""AWS Lambda entry point: the same app behind API Gateway, through Mangum.

Configure the function's handler as ``tallybook.lambda_handler.handler`` and
set ``TALLYBOOK_STORE`` (for example ``dynamodb://tallybook?region=eu-west-1``).
The app and its store connection are built on the first invocation and reused
by the warm container.
"""

from __future__ import annotations

from typing import Any

from mangum import Mangum

_adapter: Mangum | None = None


def _get_adapter() -> Mangum:
    global _adapter
    if _adapter is None:
        from tallybook.http.app import get_app

        _adapter = Mangum(get_app(), lifespan="off")
    return _adapter


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Serve one API Gateway (REST or HTTP API) or ALB event."""
    response: dict[str, Any] = _get_adapter()(event, context)
    return response
