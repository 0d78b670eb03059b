"""Webhook secrets at rest: sealed with AES-256-GCM under a server key.

The server must sign every delivery with the subscription's secret itself, so
it cannot keep only a hash (as it does for API keys). It keeps the secret
sealed: AES-256-GCM under a key derived (HKDF-SHA256) from the server key,
with the subscription's program and id as associated data, so a sealed
secret copied onto another subscription does not open. The item holds
``secret_sealed`` (``v1:<key id>:<nonce and ciphertext, base64>``) and the
last four characters for listings, never the secret.

The server key (docs/webhooks.md, "Secrets at rest") comes from the first of:

- ``TALLYBOOK_WEBHOOK_KEY``: keys separated by commas, each at least 32
  characters; the first seals, every one opens (list the old key after the
  new one while rotating, then ``tallybook webhooks rekey``);
- ``TALLYBOOK_WEBHOOK_KEY_SECRET``: the name or ARN of an AWS Secrets Manager
  secret holding that same text (the SAM stack's way);
- on SQLite only, a key file beside the database (``PATH-webhook.key``, mode
  0600): a zero-setup default for one machine, made when a secret is first
  sealed (``keyring_for(store, make=True)``: a new subscription, or a plain
  secret of an earlier version); reading a sealed secret never makes it, as a
  new key would open none: a missing file is then an error naming it;
- the in-memory engine: a random key for the life of the process.

On DynamoDB with neither variable set, creating a subscription and delivering
are refused with :class:`WebhookKeyError`, which names the variable.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tallybook.errors import ConfigError
from tallybook.store.port import ItemStore

KEY_ENV = "TALLYBOOK_WEBHOOK_KEY"
KEY_SECRET_ENV = "TALLYBOOK_WEBHOOK_KEY_SECRET"  # noqa: S105 - a variable's name
KEY_FILE_SUFFIX = "-webhook.key"
MIN_KEY_CHARS = 32
SEALED_VERSION = "v1"
_INFO = b"tallybook webhook secrets v1"
_NONCE_BYTES = 12
#: a key read from Secrets Manager is used this long before it is read again
SECRET_CACHE_SECONDS = 300.0
_SETUP = (
    f"set {KEY_ENV} (a key of at least {MIN_KEY_CHARS} characters: "
    f"`tallybook webhooks new-key` prints one) or {KEY_SECRET_ENV} "
    "(an AWS Secrets Manager secret holding it)"
)


class WebhookKeyError(ConfigError):
    """The server key that seals webhook secrets is missing, malformed or wrong."""

    code = "webhook-key"
    status = 503


class RekeyIncomplete(WebhookKeyError):
    """A rekey sealed every secret it could open (``sealed``) but not those in
    ``failed``: (program, subscription id, why), each still as it was."""

    def __init__(self, sealed: int, failed: list[tuple[str, str, str]]) -> None:
        names = ", ".join(f"{sub} ({program})" for program, sub, _ in failed)
        super().__init__(
            f"{len(failed)} subscription secret(s) could not be opened and were left as "
            f"they are: {names}; {sealed} other(s) sealed under the current key"
        )
        self.sealed = sealed
        self.failed = failed


def new_key() -> str:
    """A fresh server key: 32 random bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def _aead(key: bytes) -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise WebhookKeyError(
            "webhook secrets are sealed with the cryptography package: "
            "pip install 'tallybook[webhooks]'"
        ) from exc
    return AESGCM(key)


def _derive(text: str) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(text.encode())


def _key_id(key: bytes) -> str:
    return hashlib.sha256(b"tallybook key id\x00" + key).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class Keyring:
    """The server keys: the first seals, any opens (found by its key id)."""

    keys: tuple[bytes, ...]
    #: where the keys came from, for error messages (never the keys)
    source: str

    @classmethod
    def parse(cls, text: str, source: str) -> Keyring:
        parts = [p.strip() for p in text.split(",")]
        if not parts or any(len(p) < MIN_KEY_CHARS or any(c.isspace() for c in p) for p in parts):
            raise WebhookKeyError(
                f"{source}: each key must be at least {MIN_KEY_CHARS} characters without "
                "spaces, keys separated by commas (`tallybook webhooks new-key` prints one)"
            )
        _aead(b"\x00" * 32)  # the package is there before any key is derived
        return cls(tuple(_derive(p) for p in parts), source)

    def seal(self, secret: str, context: str) -> str:
        """``secret`` sealed under the first key, bound to ``context``."""
        key = self.keys[0]
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = _aead(key).encrypt(nonce, secret.encode(), context.encode())
        blob = base64.urlsafe_b64encode(nonce + sealed).decode()
        return f"{SEALED_VERSION}:{_key_id(key)}:{blob}"

    def open(self, sealed: str, context: str) -> str:
        """The secret ``sealed`` holds; :class:`WebhookKeyError` when no key opens it."""
        from cryptography.exceptions import InvalidTag

        version, _, rest = sealed.partition(":")
        kid, _, blob = rest.partition(":")
        if version != SEALED_VERSION or not blob:
            raise WebhookKeyError(f"the secret of {context} is not in a known sealed format")
        key = next((k for k in self.keys if _key_id(k) == kid), None)
        if key is None:
            raise WebhookKeyError(
                f"the secret of {context} was sealed with key {kid}, which is not among the "
                f"{len(self.keys)} key(s) of {self.source}: add that key (old keys go after "
                "the current one, comma-separated)"
            )
        raw = base64.urlsafe_b64decode(blob.encode())
        try:
            plain = _aead(key).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], context.encode())
        except InvalidTag as exc:
            raise WebhookKeyError(
                f"the secret of {context} does not open with key {kid} of {self.source}: "
                "it was altered or belongs to another subscription"
            ) from exc
        return bytes(plain).decode()

    def is_current(self, sealed: str) -> bool:
        """Whether ``sealed`` is under the key that seals now."""
        return sealed.startswith(f"{SEALED_VERSION}:{_key_id(self.keys[0])}:")


def keyring_for(store: ItemStore, *, make: bool = False) -> Keyring:
    """The server keys for ``store``'s subscriptions (see the module's docstring);
    ``make``: a SQLite store without a key file gets one (to seal a secret)."""
    text = os.environ.get(KEY_ENV, "").strip()
    if text:
        return Keyring.parse(text, KEY_ENV)
    secret_id = os.environ.get(KEY_SECRET_ENV, "").strip()
    if secret_id:
        return Keyring.parse(_from_secrets_manager(secret_id), f"{KEY_SECRET_ENV} {secret_id}")
    from tallybook.store.memory import MemoryStore
    from tallybook.store.sqlite import SqliteStore
    from tallybook.webhooks.log import unwrap

    engine = unwrap(store)
    if isinstance(engine, SqliteStore):
        path = Path(engine.path + KEY_FILE_SUFFIX)
        return Keyring.parse(_key_file(path, make=make), f"key file {path}")
    if isinstance(engine, MemoryStore):
        return Keyring.parse(_process_key(), "this process's in-memory key")
    raise WebhookKeyError(f"webhook secrets are stored sealed under a server key: {_SETUP}")


_PROCESS: list[str] = []


def _process_key() -> str:
    if not _PROCESS:
        _PROCESS.append(new_key())
    return _PROCESS[0]


def _key_file(path: Path, *, make: bool) -> str:
    """The key in ``path``; with ``make``, made (mode 0600, atomically) when there is none."""
    if not path.exists() and not make:
        raise WebhookKeyError(
            f"no webhook key: key file {path} does not exist (it is made when the first "
            "subscription is created, or by `tallybook webhooks rekey` sealing a secret of "
            f"an earlier version; restore a lost one from the database's backup), or {_SETUP}"
        )
    if not path.exists():
        tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(new_key() + "\n")
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(FileExistsError):  # another process made it: use theirs
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise WebhookKeyError(
            f"key file {path} is readable by others (mode {mode:o}): chmod 600 {path}"
        )
    return path.read_text().strip()


_SECRETS: dict[str, tuple[float, str]] = {}


def _from_secrets_manager(secret_id: str) -> str:
    cached = _SECRETS.get(secret_id)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    client: Any = boto3.client("secretsmanager")
    try:
        value = client.get_secret_value(SecretId=secret_id)
    except (BotoCoreError, ClientError) as exc:
        raise WebhookKeyError(
            f"cannot read {KEY_SECRET_ENV} {secret_id} from Secrets Manager: {exc}"
        ) from exc
    text = str(value.get("SecretString") or "")
    _SECRETS[secret_id] = (time.monotonic() + SECRET_CACHE_SECONDS, text)
    return text
