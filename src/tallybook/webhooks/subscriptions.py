"""Webhook subscriptions: one endpoint of a program, the event types it wants, its secret.

The secret signs every delivery, so the server must keep it usable: the
subscription item holds it sealed under the server key
(:mod:`tallybook.webhooks.vault`), and it is returned once, when the
subscription is created; listings show its last four characters. An item of
an older version holds it in plain text (``secret``): it is read as it is and
sealed on its next enable or disable, or by :meth:`SubscriptionStore.reseal`
(``tallybook webhooks rekey``), which also moves secrets to a new key.
URLs must be ``https://``; ``http://`` is accepted only for a loopback host
(127.0.0.0/8, ::1, localhost) and only with ``allow_http`` (a development
setting). A URL is ASCII: a host in its IDNA form, a path percent-encoded.
"""

from __future__ import annotations

import builtins
import contextlib
import ipaddress
import secrets
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from tallybook.domain.ids import check_flag, check_id
from tallybook.domain.webhooks import ACTIVE, Subscription, secret_hint
from tallybook.errors import AlreadyExists, ConditionFailed, NotFound, ValidationError
from tallybook.services.clock import Clock
from tallybook.store.port import ItemStore, Remove, Set
from tallybook.store.records.codec import iso
from tallybook.store.records.webhooks import (
    StoredSubscription,
    delete_subscription,
    disable_if_active,
    list_subscriptions,
    put_subscription,
    read_subscription,
    sealing,
    status_changes,
    update_subscription,
)
from tallybook.webhooks.events import EVENT_TYPES
from tallybook.webhooks.signing import new_secret
from tallybook.webhooks.vault import Keyring, WebhookKeyError, keyring_for

MAX_URL_LENGTH = 2048
MAX_DESCRIPTION = 200


@dataclass(frozen=True, slots=True)
class Created:
    """A new subscription and its secret (shown this once)."""

    subscription: Subscription
    secret: str


def check_url(url: str, *, allow_http: bool = False) -> str:
    """The URL if a webhook may be sent to it; else a :class:`ValidationError`."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise ValidationError(f"url is required (at most {MAX_URL_LENGTH} characters)")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ValidationError("url must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError as exc:
        raise ValidationError(f"url {url[:80]!r} is not a valid URL") from exc
    if port == 0:  # nothing listens there: every delivery would fail for 3 days
        raise ValidationError("url port must be 1-65535")
    if not host:
        raise ValidationError("url needs a host")
    try:
        ascii_host = host.encode("idna").decode("ascii")  # no empty or overlong label
    except UnicodeError as exc:
        raise ValidationError(f"url {url[:80]!r} has an invalid host name") from exc
    if not url.isascii():
        raise ValidationError(_not_ascii(host, ascii_host))
    if parts.username is not None or parts.password is not None:
        raise ValidationError("url must not carry credentials; the secret signs each delivery")
    if parts.fragment:
        raise ValidationError("url must not have a #fragment")
    if parts.scheme == "https":
        return url
    if parts.scheme != "http":
        raise ValidationError("url must start with https://")
    if not _is_loopback(host):
        raise ValidationError("http:// is accepted only for a loopback host; use https://")
    if not allow_http:
        raise ValidationError(
            "http:// to a loopback host needs the development flag (allow_http / --allow-http)"
        )
    return url


def _not_ascii(host: str, ascii_host: str) -> str:
    """Why a URL that is not ASCII is refused. The sender cannot send a path or
    query that is not ASCII (every attempt failed, for 3 days), and Python's
    IDNA 2003 maps some host names to another host than IDNA 2008 does
    (``faß.de`` to ``fass.de``), so a host is written in its ASCII form."""
    if host.isascii():
        return "url must be ASCII: percent-encode the path and query (é is %C3%A9)"
    # the ASCII form is named only when it reads back as the host written
    same = ascii_host.encode("ascii").decode("idna") == host
    form = f" ({ascii_host})" if same else ""
    return f"url host {host[:80]!r} is not ASCII: write it in its IDNA form{form}"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_printable(text: str, what: str) -> str:
    """``text`` unless it holds a control character (``\\x00``, a tab, a line
    break), as the URL rule refuses them."""
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise ValidationError(f"{what} must not contain control characters (tabs, line breaks)")
    return text


def check_types(types: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if not isinstance(types, list | tuple) or not all(isinstance(t, str) for t in types):
        raise ValidationError(f"types is a list of event types; known: {', '.join(EVENT_TYPES)}")
    unknown = [t for t in types if t not in EVENT_TYPES]
    if unknown:
        raise ValidationError(
            f"unknown event type(s) {', '.join(unknown)}; known: {', '.join(EVENT_TYPES)}"
        )
    return tuple(dict.fromkeys(types))


def _context(program: str, sub_id: str) -> str:
    """What a sealed secret is bound to (AES-GCM's associated data)."""
    return f"subscription {sub_id} of program {program}"


class SubscriptionStore:
    """Create, read, enable and disable subscriptions in the item store."""

    def __init__(self, store: ItemStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def keyring(self, *, make: bool = False) -> Keyring:
        """The server keys (:class:`WebhookKeyError` when there are none); read at each
        use, so a changed key takes effect without a restart (Secrets Manager: within
        :data:`~tallybook.webhooks.vault.SECRET_CACHE_SECONDS`). ``make``: to seal a
        secret, a SQLite store's key file is made if there is none."""
        return keyring_for(self.store, make=make)

    def create(
        self,
        program: str,
        url: str,
        *,
        types: list[str] | tuple[str, ...] = (),
        allow_http: bool = False,
        description: str | None = None,
        sub_id: str | None = None,
    ) -> Created:
        """A new subscription; an existing ``sub_id`` is :class:`AlreadyExists`."""
        check_id(program, "program id")
        check_url(url, allow_http=check_flag(allow_http, "allow_http"))
        wanted = check_types(types)
        if description is not None and not isinstance(description, str):
            raise ValidationError(
                f"description must be a string of at most {MAX_DESCRIPTION} characters"
            )
        if description is not None and len(description) > MAX_DESCRIPTION:
            raise ValidationError(f"description is longer than {MAX_DESCRIPTION} characters")
        if description is not None:
            check_printable(description, "description")
        sid = (
            check_id(sub_id, "subscription id")
            if sub_id is not None  # an empty id is refused, not replaced by a random one
            else f"sub_{secrets.token_hex(8)}"
        )
        secret = new_secret()
        sub = Subscription(
            program=program,
            id=sid,
            url=url,
            types=wanted,
            status=ACTIVE,
            created_at=iso(self.clock.now()),
            secret_hint=secret_hint(secret),
            description=description or None,
            allow_http=allow_http,
        )
        try:
            sealed = self.keyring(make=True).seal(secret, _context(program, sid))
            put_subscription(self.store, sub, sealed)
        except ConditionFailed as exc:
            raise AlreadyExists(f"subscription {sid} exists in program {program}") from exc
        return Created(sub, secret)

    def list(self, program: str) -> list[Subscription]:
        return [s.subscription for s in list_subscriptions(self.store, program)]

    def stored(self, program: str, sub_id: str) -> StoredSubscription:
        check_id(sub_id, "subscription id")
        found = read_subscription(self.store, program, sub_id)
        if found is None:
            raise NotFound(f"subscription {sub_id} not found in program {program}")
        return found

    def get(self, program: str, sub_id: str) -> Subscription:
        return self.stored(program, sub_id).subscription

    def secret(self, program: str, sub_id: str) -> str:
        """The signing secret, opened with the server key (plain in an older item)."""
        return self._open(self.stored(program, sub_id))

    def _open(self, stored: StoredSubscription) -> str:
        sub = stored.subscription
        if stored.sealed is not None:
            return self.keyring().open(stored.sealed, _context(sub.program, sub.id))
        return str(stored.plain)

    def _reseal(self, stored: StoredSubscription) -> tuple[Set | Remove, ...]:
        """The changes that seal a secret under the current key (none when it is);
        sealing a plain secret may make the key, opening a sealed one never does."""
        keyring = self.keyring(make=stored.sealed is None)
        if stored.sealed is not None and keyring.is_current(stored.sealed):
            return ()
        secret = self._open(stored)
        sub = stored.subscription
        return sealing(keyring.seal(secret, _context(sub.program, sub.id)), secret_hint(secret))

    def stored_all(self, program: str) -> builtins.list[StoredSubscription]:
        """Every subscription of ``program`` as stored (its secret sealed or plain)."""
        return list_subscriptions(self.store, program)

    def reseal(
        self, found: builtins.list[StoredSubscription], failed: builtins.list[tuple[str, str, str]]
    ) -> int:
        """Seal every secret ``found`` under the current key; how many changed.
        One no key opens is left as it is and added to ``failed`` as (program,
        subscription id, why); the others are sealed all the same."""
        done = 0
        for stored in found:
            program = stored.subscription.program
            try:
                changes = self._reseal(stored)
            except WebhookKeyError as exc:
                failed.append((program, stored.subscription.id, exc.message))
                continue
            if not changes:
                continue
            try:
                update_subscription(self.store, program, stored.subscription.id, changes)
            except ConditionFailed:
                continue  # deleted meanwhile
            done += 1
        return done

    def set_status(self, program: str, sub_id: str, status: str, reason: str | None) -> None:
        """Enable or disable (idempotent); a missing subscription is :class:`NotFound`.

        The write also seals a plain-text or old-key secret when the server key is
        at hand (without one, the status still changes)."""
        stored = self.stored(program, sub_id)
        try:
            reseal = self._reseal(stored)
        except WebhookKeyError:
            reseal = ()
        try:
            update_subscription(
                self.store, program, sub_id, (*status_changes(status, reason), *reseal)
            )
        except ConditionFailed as exc:
            raise NotFound(f"subscription {sub_id} not found in program {program}") from exc

    def disable_if_active(self, program: str, sub_id: str, reason: str) -> None:
        """Disable unless already disabled (the worker, on a 410 answer)."""
        with contextlib.suppress(ConditionFailed):
            disable_if_active(self.store, program, sub_id, reason)

    def delete(self, program: str, sub_id: str) -> None:
        """Remove it and its queue; its delivery records stay readable (``deliveries``)
        until they expire."""
        self.stored(program, sub_id)
        delete_subscription(self.store, program, sub_id)

    def now(self) -> datetime:
        return self.clock.now()
