"""One HTTP POST to a receiver, with a timeout; never raises for the receiver's faults
(nor for a URL it cannot send to: that attempt fails).

Redirects are not followed (a receiver answering 3xx has failed the delivery)
and at most :data:`MAX_RESPONSE_BYTES` of the answer are read.
"""

from __future__ import annotations

import http.client
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

MAX_RESPONSE_BYTES = 4096
USER_AGENT = "tallybook-webhooks/1"


@dataclass(frozen=True, slots=True)
class Response:
    """What one attempt got: a status code, or an error when none came."""

    status: int | None
    latency_ms: int
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class Sender(Protocol):
    def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeout: float
    ) -> Response: ...


class HttpSender:
    """The production sender: ``http.client`` over TCP (TLS for https)."""

    def __init__(self) -> None:
        self._tls = ssl.create_default_context()

    def post(self, url: str, headers: Mapping[str, str], body: bytes, timeout: float) -> Response:
        parts = urlsplit(url)
        host = parts.hostname or ""
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn: http.client.HTTPConnection | None = None
        start = time.monotonic()
        try:
            if parts.scheme == "https":
                conn = http.client.HTTPSConnection(
                    host, parts.port, timeout=timeout, context=self._tls
                )
            else:
                conn = http.client.HTTPConnection(host, parts.port, timeout=timeout)
            conn.request(
                "POST",
                path,
                body=body,
                headers={
                    **headers,
                    "content-type": "application/json",
                    "user-agent": USER_AGENT,
                },
            )
            answer = conn.getresponse()
            answer.read(MAX_RESPONSE_BYTES)
            return Response(answer.status, _ms(start))
        except TimeoutError:
            return Response(None, _ms(start), f"timed out after {timeout:g}s")
        except (OSError, ValueError, http.client.HTTPException) as exc:
            # ValueError: a host that cannot be resolved as a name (an empty or
            # overlong label fails its IDNA encoding): the attempt fails, the
            # pass goes on
            return Response(None, _ms(start), f"{type(exc).__name__}: {exc}"[:200])
        finally:
            if conn is not None:
                conn.close()


def _ms(start: float) -> int:
    return int((time.monotonic() - start) * 1000)
