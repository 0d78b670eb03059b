"""Inbound events: SNS-style envelopes (HTTP) and NDJSON batches (CLI).

An envelope of ``Type: Notification`` carries the event in ``Message`` (a
JSON string, as SNS sends it, or an object)::

    {"Type": "Notification", "MessageId": "6f1c...", "TopicArn": "...",
     "Message": "{\\"account\\": \\"alice\\", \\"type\\": \\"TopUp\\", \\"payload\\": {...}}"}

``MessageId`` is the idempotency key: a redelivered message is a no-op. A
``SubscriptionConfirmation`` is confirmed through the ``confirm`` hook (by
default only when ``$TALLYBOOK_SNS_AUTO_CONFIRM=1``, and only for an https
``SubscribeURL`` on an SNS host, ``sns.<region>.amazonaws.com`` or, in China,
``.amazonaws.com.cn``); otherwise its URL is logged and reported for an
operator to visit. NDJSON lines are envelopes, or bare events
``{"id": ..., "account": ..., "type": ..., "payload": {...}}``.

A bad message raises :class:`RejectedMessage` with a stable ``reason`` and is
counted in :class:`IngestStats`; a batch records it and goes on.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tallybook.domain.ids import check_id, check_progress
from tallybook.domain.json_text import RepeatedKey, loads_unique
from tallybook.domain.notifications import Notification, check_payload, check_type
from tallybook.errors import IdempotencyConflict, NotFound, TallybookError, ValidationError

log = logging.getLogger("tallybook.events")

AUTO_CONFIRM_ENV = "TALLYBOOK_SNS_AUTO_CONFIRM"
#: SNS's own hosts: ``sns.<region>.amazonaws.com`` (GovCloud's regions too) and
#: China's ``sns.<region>.amazonaws.com.cn``; any other amazonaws.com host (an S3
#: bucket's, ``sns.s3-us-west-2.amazonaws.com`` too) is anyone's to serve
SNS_HOST = re.compile(r"sns\.[a-z]{2}(-gov)?-[a-z]+-[0-9]+\.amazonaws\.com(\.cn)?")
MAX_MESSAGE_BYTES = 256 * 1024

Confirmer = Callable[[str], None]


class NotificationAdder(Protocol):
    """What ingesting needs of the notifications service: ``NotificationService.add``
    with an idempotency key (the message id)."""

    def add(
        self,
        program: str,
        account: str,
        type: str,
        payload: Mapping[str, Any] | None,
        *,
        idempotency_key: str | None,
    ) -> Notification: ...


class RejectedMessage(ValidationError):
    """An inbound message that cannot be applied; ``reason`` is a stable slug."""

    code = "rejected-message"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class InboundEvent:
    account: str
    type: str
    payload: dict[str, Any]
    program: str | None = None


@dataclass(frozen=True, slots=True)
class Envelope:
    kind: str  # "notification" | "subscription_confirmation" | "unsubscribe_confirmation"
    message_id: str
    event: InboundEvent | None = None
    subscribe_url: str | None = None
    topic_arn: str | None = None


@dataclass(frozen=True, slots=True)
class IngestResult:
    #: added | replayed | confirmed | pending_confirmation | ignored
    status: str
    message_id: str
    notification: Notification | None = None
    detail: str | None = None


@dataclass
class IngestStats:
    """Counts since the process started (or since ``reset``): one per outcome
    (:class:`IngestResult`'s status; ``ignored`` is an unsubscribe confirmation)."""

    received: int = 0
    added: int = 0
    replayed: int = 0
    confirmed: int = 0
    #: a subscription confirmation left for an operator to visit (no auto-confirm)
    pending_confirmation: int = 0
    ignored: int = 0
    rejected: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, outcome: str, reason: str | None = None) -> None:
        with self._lock:
            self.received += 1
            if outcome in ("added", "replayed", "confirmed", "pending_confirmation", "rejected"):
                setattr(self, outcome, getattr(self, outcome) + 1)
            else:
                self.ignored += 1
            if reason:
                self.reasons[reason] += 1

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "received": self.received,
                "added": self.added,
                "replayed": self.replayed,
                "confirmed": self.confirmed,
                "pending_confirmation": self.pending_confirmation,
                "ignored": self.ignored,
                "rejected": self.rejected,
                "reasons": dict(self.reasons),
            }


@dataclass
class BatchReport:
    stats: IngestStats = field(default_factory=IngestStats)
    #: (line number, reason slug, message) of each rejected line
    rejected: list[tuple[int, str, str]] = field(default_factory=list)


def _loads(raw: str | bytes, what: str) -> Any:
    try:
        return loads_unique(raw)
    except RepeatedKey as exc:  # which one counts (a second MessageId?) would be a guess
        raise RejectedMessage(
            "duplicate-key", f"{what} gives {exc.key[:64]!r} more than once"
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RejectedMessage("not-json", f"{what} is not valid JSON ({exc})") from None
    except RecursionError:
        raise RejectedMessage("not-json", f"{what} is nested too deeply to parse") from None


def _field(obj: Mapping[str, Any], *names: str) -> Any:
    given = [n for n in names if n in obj]
    if len(given) > 1:  # which one counts would be a guess
        raise RejectedMessage("duplicate-key", f"{' and '.join(given)} name the same field")
    return obj[given[0]] if given else None


#: the fields of an event (a Message, or a bare event with its ``id``)
EVENT_FIELDS = frozenset({"account", "Account", "type", "Type", "payload", "Payload", "program"})
BARE_EVENT_FIELDS = EVENT_FIELDS | {"id", "MessageId"}


def parse_event(
    obj: object, what: str = "Message", fields: frozenset[str] = EVENT_FIELDS
) -> InboundEvent:
    if not isinstance(obj, Mapping):
        raise RejectedMessage("bad-message", f"{what} must be a JSON object")
    # a misspelt field ("paylaod") was ignored: the event was added without it and
    # its MessageId used up, so the corrected event was an idempotency conflict
    unknown = sorted(str(k)[:40] for k in obj if k not in fields)
    if unknown:
        raise RejectedMessage(
            "unknown-field",
            f"{what} has unknown field(s) {', '.join(map(repr, unknown[:5]))}; "
            "an event has account, type, payload and program",
        )
    account, type_, payload = (
        _field(obj, "account", "Account"),
        _field(obj, "type", "Type"),
        _field(obj, "payload", "Payload"),
    )
    try:
        account = check_id(account, "account")
    except ValidationError as exc:
        raise RejectedMessage("bad-account", exc.message) from None
    try:
        type_ = check_type(type_)
    except ValidationError as exc:
        raise RejectedMessage("bad-type", exc.message) from None
    try:
        payload = check_payload(payload)
    except ValidationError as exc:
        raise RejectedMessage("bad-payload", exc.message) from None
    program = obj.get("program")
    if program is not None and not isinstance(program, str):
        raise RejectedMessage("bad-message", "program must be a string")
    return InboundEvent(account, type_, payload, program)


def parse_envelope(raw: str | bytes | Mapping[str, Any]) -> Envelope:
    """An SNS-style envelope, or a bare event with an ``id``; raises RejectedMessage."""
    if isinstance(raw, str | bytes):
        if len(raw) > MAX_MESSAGE_BYTES:
            raise RejectedMessage("too-large", f"a message holds at most {MAX_MESSAGE_BYTES} bytes")
        raw = _loads(raw, "the message")
    if not isinstance(raw, Mapping):
        raise RejectedMessage("not-an-object", "the message must be a JSON object")
    message_id = _field(raw, "MessageId", "id")
    if message_id is None:
        raise RejectedMessage("missing-message-id", "MessageId is required (the idempotency key)")
    try:
        check_id(message_id, "MessageId")
    except ValidationError as exc:
        raise RejectedMessage("bad-message-id", exc.message) from None
    kind = raw.get("Type")
    if kind is None:
        return Envelope(
            "notification", message_id, parse_event(raw, "the event", BARE_EVENT_FIELDS)
        )
    topic = raw.get("TopicArn") if isinstance(raw.get("TopicArn"), str) else None
    if kind == "Notification":
        message = raw.get("Message")
        if isinstance(message, str):
            message = _loads(message, "Message")
        return Envelope("notification", message_id, parse_event(message), topic_arn=topic)
    if kind in ("SubscriptionConfirmation", "UnsubscribeConfirmation"):
        url = raw.get("SubscribeURL")
        if (
            not isinstance(url, str)
            or not url.startswith(("https://", "http://"))
            or not (url.isascii() and url.isprintable())  # SNS's are; the answer echoes it
            or not _has_host(url)
        ):
            raise RejectedMessage("bad-subscribe-url", "SubscribeURL must be an http(s) URL")
        name = "subscription" if kind == "SubscriptionConfirmation" else "unsubscribe"
        return Envelope(f"{name}_confirmation", message_id, subscribe_url=url, topic_arn=topic)
    raise RejectedMessage(
        "unknown-type",
        f"Type {str(kind)[:40]!r} is not Notification, SubscriptionConfirmation "
        "or UnsubscribeConfirmation",
    )


def sns_confirmer(url: str) -> None:
    """Visit an AWS SNS SubscribeURL (https on an SNS host, :data:`SNS_HOST`, only)."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # out of range
        port = -1
    if (
        parts.scheme != "https"
        or not SNS_HOST.fullmatch(parts.hostname or "")
        or port not in (None, 443)
        or parts.username is not None
    ):
        raise RejectedMessage(
            "untrusted-subscribe-url",
            "SubscribeURL is not an AWS SNS URL (https://sns.<region>.amazonaws.com/...)",
        )
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - checked above
        response.read()


def confirmer_from_env() -> Confirmer | None:
    return sns_confirmer if os.environ.get(AUTO_CONFIRM_ENV) == "1" else None


class EventIngestor:
    def __init__(self, notifications: NotificationAdder, confirm: Confirmer | None = None):
        self.notifications = notifications
        self.confirm = confirm if confirm is not None else confirmer_from_env()
        self.stats = IngestStats()
        self._by_program: dict[str, IngestStats] = {}
        self._lock = threading.Lock()

    def stats_for(self, program: str) -> IngestStats:
        """The counts of one program's messages (the HTTP stats endpoint shows these)."""
        with self._lock:
            return self._by_program.setdefault(program, IngestStats())

    def _count(self, program: str, outcome: str, reason: str | None = None) -> None:
        self.stats.count(outcome, reason)
        self.stats_for(program).count(outcome, reason)

    def ingest(self, program: str, raw: str | bytes | Mapping[str, Any]) -> IngestResult:
        """Apply one message for ``program``; counts it; raises on a bad one."""
        try:
            result = self._ingest(program, raw)
        except RejectedMessage as exc:
            self._count(program, "rejected", exc.reason)
            raise
        self._count(program, result.status)
        return result

    def ingest_lines(
        self,
        program: str,
        lines: Iterable[str | bytes],
        progress: Callable[[int], None] | None = None,
    ) -> BatchReport:
        """Every NDJSON line; a bad line is recorded and skipped, never fatal.

        Lines read from a file in binary mode are decoded here, so a line that is
        not UTF-8 is rejected (``not-json``) instead of stored with its bytes replaced.
        ``progress`` is called with each line's size in bytes (for a progress bar).
        """
        check_progress(progress)
        report = BatchReport()
        for number, line in enumerate(lines, start=1):
            # a lone surrogate (text read with errors="surrogateescape") has no UTF-8
            # form: its line is rejected below, like any text that is no valid event
            size = (
                len(line) if isinstance(line, bytes) else len(line.encode("utf-8", "surrogatepass"))
            )
            if number == 1:  # a byte order mark starting the file is not part of line 1
                line = (
                    line.removeprefix(b"\xef\xbb\xbf")
                    if isinstance(line, bytes)
                    else line.removeprefix("\ufeff")
                )
            if line.strip():
                try:
                    result = self.ingest(program, line)
                except RejectedMessage as exc:
                    report.stats.count("rejected", exc.reason)
                    report.rejected.append((number, exc.reason, exc.message))
                else:
                    report.stats.count(result.status)
            if progress is not None:
                progress(size)
        return report

    def _ingest(self, program: str, raw: str | bytes | Mapping[str, Any]) -> IngestResult:
        envelope = parse_envelope(raw)
        if envelope.kind == "subscription_confirmation":
            return self._confirm(envelope)
        if envelope.kind == "unsubscribe_confirmation":
            return IngestResult("ignored", envelope.message_id, detail="unsubscribed")
        event = envelope.event
        assert event is not None
        if event.program is not None and event.program != program:
            raise RejectedMessage(
                "wrong-program", f"the event is for program {event.program[:40]!r}, not {program}"
            )
        try:
            n = self.notifications.add(
                program,
                event.account,
                event.type,
                event.payload,
                idempotency_key=envelope.message_id,
            )
        except NotFound as exc:
            raise RejectedMessage("not-found", exc.message) from None
        except IdempotencyConflict as exc:
            raise RejectedMessage("idempotency-conflict", exc.message) from None
        except ValidationError as exc:
            raise RejectedMessage("invalid", exc.message) from None
        return IngestResult("replayed" if n.replay else "added", envelope.message_id, n)

    def _confirm(self, envelope: Envelope) -> IngestResult:
        url = envelope.subscribe_url
        assert url is not None
        if self.confirm is None:
            if envelope.topic_arn is None:
                log.warning("SNS subscription (no TopicArn given) awaits confirmation: %s", url)
            else:
                log.warning(
                    "SNS subscription to %s awaits confirmation: %s", envelope.topic_arn, url
                )
            return IngestResult(
                "pending_confirmation", envelope.message_id, detail=f"visit {url} to confirm"
            )
        try:
            self.confirm(url)
        except TallybookError:
            raise
        except Exception as exc:
            raise RejectedMessage("confirmation-failed", f"{type(exc).__name__}: {exc}") from None
        return IngestResult("confirmed", envelope.message_id, detail=envelope.topic_arn)


def _has_host(url: str) -> bool:
    """Whether ``url`` parses with a host (``http://[::1`` or ``https://`` do not)."""
    try:
        return bool(urllib.parse.urlsplit(url).hostname)
    except ValueError:
        return False
