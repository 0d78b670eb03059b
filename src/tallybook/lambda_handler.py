"""AWS Lambda entry points: the HTTP API behind API Gateway, and scheduled jobs.

- ``tallybook.lambda_handler.handler``: API Gateway (REST or HTTP API) and ALB
  events through Mangum (the ``server`` extra); it also runs scheduled events,
  so one function can do both.
- ``tallybook.lambda_handler.scheduled``: EventBridge scheduled events only;
  needs nothing beyond the base package (boto3).

Both read ``TALLYBOOK_STORE`` (for example ``dynamodb://tallybook?region=eu-west-1``).
A scheduled event names its job and, optionally, its program, from the first
place that has it: the event itself (a rule's constant input
``{"job": "expire", "program": "shop"}``), the event's ``detail``, or the
function's environment (``TALLYBOOK_JOB``, ``TALLYBOOK_PROGRAM``; no program
means every program). The store connection is opened on the first invocation
and reused by the warm container.

An event ``handler`` cannot read as an HTTP request (neither an API Gateway,
ALB nor scheduled event, a field of the wrong shape, a body marked
``isBase64Encoded`` that is not base64) is answered with a 400 ``bad-request``
problem+json in the shape of the event, and nothing runs.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from typing import TYPE_CHECKING, Any

from tallybook.errors import ConfigError, TallybookError, ValidationError
from tallybook.jobs import check_job, run_job

if TYPE_CHECKING:
    from mangum import Mangum
    from starlette.types import ASGIApp, Receive, Scope, Send

    from tallybook.ledger import Ledger

JOB_ENV = "TALLYBOOK_JOB"
PROGRAM_ENV = "TALLYBOOK_PROGRAM"

#: response types Mangum returns as text; the rest go back base64-encoded, which an
#: API Gateway REST API without ``binaryMediaTypes`` hands the client undecoded.
#: Mangum's defaults lack ``application/problem+json``, the type of every error.
TEXT_MIME_TYPES = [
    "text/",
    "application/json",
    "application/problem+json",
    "application/javascript",
    "application/xml",
    "application/vnd.oai.openapi",
]

#: base64's alphabet with its padding; a whole base64 text also has a length of 4n
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")

_log = logging.getLogger("tallybook.jobs")
_adapter: Mangum | None = None
_ledger: Ledger | None = None


class JobFailed(TallybookError):
    """A scheduled job failed in at least one program (the invocation fails, so it is retried)."""

    code = "job-failed"


def _get_adapter() -> Mangum:
    global _adapter
    if _adapter is None:
        from tallybook.extras import install_hint, missing

        if missing("server"):  # `pip install tallybook` alone: say what to install
            raise ConfigError(install_hint("server").removeprefix("error: "))
        from mangum import Mangum

        from tallybook.http.app import get_app

        _adapter = Mangum(_WithoutStage(get_app()), lifespan="off", text_mime_types=TEXT_MIME_TYPES)
    return _adapter


class _WithoutStage:
    """The app, given the path an HTTP API event names without its stage, and
    the path the client asked for before the app's routes (``app_root_path``).

    An HTTP API stage other than ``$default`` is the first segment of the path
    it passes on (``/prod/v1/accounts``), in payload format 2.0 and 1.0 alike,
    where the app's routes begin after it: every request was a 404. A REST API
    (its events have no ``version``) passes the path after its stage, which
    its ``requestContext.path`` still holds (``/prod/docs`` for ``/docs``).
    Either way the links the app makes (the admin page's, the API docs' page
    and document) keep that prefix, as their base URL: ``/prod/admin/``, not
    ``/admin/``, where API Gateway answers 403 or 404."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            event = scope.get("aws.event")
            stage = _named_stage(event)
            path = scope["path"]
            if stage and (path == stage or path.startswith(f"{stage}/")):
                scope = {**scope, "path": path[len(stage) :] or "/", "app_root_path": stage}
            elif base := _rest_base_path(event, path):
                scope = {**scope, "app_root_path": base}
        await self.app(scope, receive, send)


def _named_stage(event: Any) -> str:
    """``/{stage}`` of an HTTP API event (payload 2.0 or 1.0) on a stage other
    than ``$default``, or ``""``."""
    if not isinstance(event, dict) or event.get("version") not in ("1.0", "2.0"):
        return ""
    context = event.get("requestContext")
    stage = context.get("stage") if isinstance(context, dict) else None
    if not isinstance(stage, str) or stage in ("", "$default"):
        return ""
    return f"/{stage}"


def _rest_base_path(event: Any, path: str) -> str:
    """What a REST API event's ``requestContext.path`` (the path the client asked
    for) has before the ``path`` the app routes: ``/prod`` on the API's own URL, a
    custom domain's base path mapping, or ``""``."""
    if not isinstance(event, dict) or "version" in event:
        return ""
    context = event.get("requestContext")
    asked = context.get("path") if isinstance(context, dict) else None
    if not isinstance(asked, str) or not asked.startswith("/"):
        return ""
    if path == "/":
        return asked.rstrip("/")
    return asked[: -len(path)].rstrip("/") if asked.endswith(path) else ""


def _get_ledger() -> Ledger:
    global _ledger
    if _ledger is None:
        from tallybook.ledger import Ledger

        _ledger = Ledger.open()
    return _ledger


def is_scheduled(event: dict[str, Any]) -> bool:
    """An EventBridge event, or a constant input naming a job."""
    return event.get("source") == "aws.events" or "job" in event


def _setting(event: dict[str, Any], name: str, env: str) -> str | None:
    detail = event.get("detail")
    for place in (event, detail if isinstance(detail, dict) else {}):
        value = place.get(name)
        if value:
            return str(value)
    return os.environ.get(env) or None


def scheduled(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Run the job a scheduled event names; returns and logs what it did per program.

    Raises :class:`JobFailed` after every program has been tried if one failed,
    so the invocation counts as an error and Lambda retries it (jobs are
    idempotent).
    """
    if not isinstance(event, dict):
        raise ValidationError("a scheduled event is a JSON object (an EventBridge event)")
    job = _setting(event, "job", JOB_ENV)
    if job is None:
        raise JobFailed(f"no job named: set {JOB_ENV} or give 'job' in the event")
    check_job(job)
    run = run_job(_get_ledger(), job, program=_setting(event, "program", PROGRAM_ENV))
    report = run.as_dict()
    _log.setLevel(logging.INFO)
    _log.info(json.dumps(report, default=str, sort_keys=True))
    if not run.ok:
        failed = [p.program for p in run.programs if p.status == "failed"]
        raise JobFailed(f"job {job} failed in {', '.join(failed)}: {json.dumps(report)}")
    return report


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Serve one API Gateway or ALB event, or run a scheduled one."""
    if isinstance(event, dict) and is_scheduled(event):
        return scheduled(event, context)
    adapter = _get_adapter()
    unreadable = _unreadable(adapter, event, context)
    if unreadable is not None:
        return _bad_event(event, unreadable)
    response: dict[str, Any] = adapter(event, context)
    headers = response.get("headers")
    # Mangum gives an HTTP API answer without a body (a 204, a redirect)
    # "content-type: application/json"; the app sent none (a HEAD's empty
    # answer keeps the GET's type)
    status = response.get("statusCode")
    if (
        event.get("version") == "2.0"
        and isinstance(status, int)
        and (status == 204 or 300 <= status < 400)
        and isinstance(headers, dict)
        and headers.get("content-type") == "application/json"
    ):
        del headers["content-type"]
    return response


def _unreadable(adapter: Mangum, event: Any, context: Any) -> str | None:
    """Why ``event`` is not an HTTP request Mangum can serve, or ``None``.

    Reads what Mangum reads before the app runs (the request and its body), so
    a malformed event is refused before anything is written."""
    if not isinstance(event, dict):
        return "the event is not a JSON object"
    try:
        request = adapter.infer(event, context)
    except (RuntimeError, LookupError, TypeError):
        return "the event is not an API Gateway (REST or HTTP API), ALB or scheduled event"
    try:
        scope = request.scope
    except (LookupError, TypeError, AttributeError, ValueError):
        scope = None
    if scope is None or not isinstance(scope["method"], str) or not scope["method"]:
        return "the event's request is malformed (a field is missing or of the wrong type)"
    body = event.get("body")
    if event.get("isBase64Encoded") and isinstance(body, str):
        # checked, not decoded: Mangum decodes it once, for the app (leniently:
        # it skips characters outside the alphabet, so "!!!" would be no body)
        if len(body) % 4 or _BASE64.fullmatch(body) is None:
            return "the event's body is marked isBase64Encoded but is not valid base64"
        return None
    try:
        request.body  # noqa: B018
    except UnicodeEncodeError:  # a lone surrogate: no bytes the app could read
        return "the event's body is not valid text"
    except ValueError:  # binascii.Error included
        return "the event's body is marked isBase64Encoded but is not valid base64"
    except (TypeError, AttributeError):
        return "the event's body is not a string"
    return None


def _bad_event(event: Any, detail: str) -> dict[str, Any]:
    """A 400 ``bad-request`` problem answered without the app, in the event's shape."""
    from tallybook.http.problems import PROBLEM_MEDIA_TYPE, problem_body

    request_id = uuid.uuid4().hex
    logging.getLogger("tallybook.http").warning("unreadable Lambda event: %s", detail)
    body = problem_body(400, "bad-request", detail, request_id=request_id)
    headers = {"content-type": PROBLEM_MEDIA_TYPE, "x-request-id": request_id}
    response: dict[str, Any] = {
        "statusCode": 400,
        "body": json.dumps(body, separators=(",", ":")),
        "isBase64Encoded": False,
    }
    if isinstance(event, dict) and "multiValueHeaders" in event:
        # an ALB with multi-value headers on takes only these
        response["multiValueHeaders"] = {k: [v] for k, v in headers.items()}
    else:
        response["headers"] = headers
    return response
