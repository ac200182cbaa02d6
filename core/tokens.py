"""The token file of access control: who may do what, to which queues (docs/OPERATIONS.md,
"Access control").

A TOML file with one `[[tokens]]` table per token:

    [[tokens]]
    name = "orders-producer"      # shown in the access log; never the token itself
    sha256 = "9f86d081..."        # hex SHA-256 of the token: the file holds no secret
    scopes = ["write"]            # read, write, admin (admin includes write, write read)
    queues = 'orders(\\..*)?'     # regex (a literal string: no escapes) the whole queue
                                  # name must match; default ".*"
    aws_access_key_id = "AKID..." # optional: SQS requests signed with this key (a key of
                                  # --sqs-credentials) act with this token's scopes and queues

The daemon keeps the file's tokens in memory and reads the file again when its inode, mtime
or size changed, looked at no more than once per RECHECK_SECONDS.
"""

import hashlib
import hmac
import os
import re
import time
import tomllib
from dataclasses import dataclass

from mq.errors import Invalid

#: The scopes, each including the ones ranked below it.
RANKS = {"read": 1, "write": 2, "admin": 3}
#: The queues of a token that names none: every queue.
ALL_QUEUES = ".*"
#: Seconds between two looks at the token file for a change.
RECHECK_SECONDS = 1.0
KEYS = {"name", "sha256", "scopes", "queues", "aws_access_key_id"}
HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Token:
    """One entry of the token file: its name, the SHA-256 of its secret, its rank, its queues."""

    name: str
    digest: bytes
    rank: int
    queues: re.Pattern
    aws_access_key_id: str | None = None

    def allows(self, scope: str) -> bool:
        """True when the token's scopes include this one."""
        return self.rank >= RANKS[scope]

    def allows_queue(self, queue: str) -> bool:
        """True when the queue name matches the token's whole regex."""
        return self.queues.fullmatch(queue) is not None

    @property
    def every_queue(self) -> bool:
        """True when the token is not limited to some queues."""
        return self.queues.pattern == ALL_QUEUES


def digest_of(secret: str) -> bytes:
    """The SHA-256 of a token as the token file holds it (hex of its UTF-8 bytes)."""
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest().encode()


def parse_entry(pos: int, entry) -> Token:
    """One [[tokens]] table checked; raise Invalid naming the entry and what is wrong."""
    where = f"token {pos + 1}"
    if not isinstance(entry, dict):
        raise Invalid(f"{where}: must be a table")
    unknown = set(entry) - KEYS
    if unknown:
        raise Invalid(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; known: "
                      f"{', '.join(sorted(KEYS))}")
    name = entry.get("name", f"token-{pos + 1}")
    if not isinstance(name, str) or not name:
        raise Invalid(f"{where}: name must be a non-empty string")
    digest = entry.get("sha256")
    if not isinstance(digest, str) or not HEX_DIGEST.fullmatch(digest.lower()):
        raise Invalid(f"{where} ({name}): sha256 must be the 64 hex digits of the token's "
                      f"SHA-256")
    scopes = entry.get("scopes")
    if not isinstance(scopes, list) or not scopes or any(s not in RANKS for s in scopes):
        raise Invalid(f"{where} ({name}): scopes must be a non-empty list of read, write, admin")
    queues = entry.get("queues", ALL_QUEUES)
    try:
        pattern = re.compile(queues)
    except (re.error, TypeError) as err:
        raise Invalid(f"{where} ({name}): queues must be a regex: {err}") from None
    key = entry.get("aws_access_key_id")
    if key is not None and (not isinstance(key, str) or not key.strip()):
        raise Invalid(f"{where} ({name}): aws_access_key_id must be a non-empty string")
    return Token(name, digest.lower().encode(), max(RANKS[s] for s in scopes), pattern,
                 key.strip() if key else None)


def parse(text: str) -> list[Token]:
    """The tokens of a token file's text; raise Invalid naming the first thing wrong."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise Invalid(f"not TOML: {err}") from None
    unknown = set(document) - {"tokens"}
    if unknown:
        raise Invalid(f"unknown key(s) {', '.join(sorted(unknown))}; only [[tokens]] tables")
    entries = document.get("tokens", [])
    if not isinstance(entries, list):
        raise Invalid("tokens must be an array of tables ([[tokens]])")
    tokens = [parse_entry(pos, entry) for pos, entry in enumerate(entries)]
    seen: dict = {}
    for token in tokens:
        for key, what in ((token.digest, "sha256"), (token.name, "name"),
                          (token.aws_access_key_id, "aws_access_key_id")):
            if key is None:
                continue
            if (key, what) in seen:
                raise Invalid(f"tokens {seen[key, what]} and {token.name}: same {what}")
            seen[key, what] = token.name
    return tokens


def load(path: str) -> list[Token]:
    """The tokens of a token file; raise Invalid naming the file and the problem."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as err:
        raise Invalid(f"token file {path}: {getattr(err, 'strerror', None) or err}") from None
    try:
        return parse(text)
    except Invalid as err:
        raise Invalid(f"token file {path}: {err.message}") from None


def find(tokens: list[Token], secret: str) -> Token | None:
    """The token whose digest is the secret's, compared in constant time with every entry."""
    return find_digest(tokens, digest_of(secret))


def find_digest(tokens: list[Token], digest: bytes) -> Token | None:
    """The token with this digest (digest_of), compared in constant time with every entry: a
    connection that authenticated once keeps the digest, never the token, and finds its token
    again in the file in force for each call."""
    found = None
    for token in tokens:
        # No early exit: the time taken does not say which entry matched, or how far.
        if hmac.compare_digest(token.digest, digest):
            found = token
    return found


def find_access_key(tokens: list[Token], key: str) -> Token | None:
    """The token whose aws_access_key_id is this SQS access key id (not a secret: the SQS
    signature, checked before, proved the key)."""
    return next((token for token in tokens if token.aws_access_key_id == key), None)


class TokenFile:
    """The tokens of a file, read again when the file changes; a bad new version is refused
    and the tokens in force are kept (on_error is told why). A file bad from the start gives
    no token at all: every request is refused until it is mended."""

    def __init__(self, path: str, on_load=None, on_error=None):
        self.path = path
        self.on_load = on_load or (lambda tokens: None)
        self.on_error = on_error or (lambda message: None)
        self.stamp = self._stamp()
        self.tokens: list[Token] = []
        try:
            self.tokens = load(path)
            self.on_load(self.tokens)
        except Invalid as err:
            self.on_error(err.message)
        self.checked = time.monotonic()

    def _stamp(self):
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def current(self) -> list[Token]:
        """The tokens in force, the file looked at again when RECHECK_SECONDS have passed."""
        now = time.monotonic()
        if now - self.checked >= RECHECK_SECONDS:
            self.checked = now
            stamp = self._stamp()
            if stamp != self.stamp:
                self.stamp = stamp
                try:
                    self.tokens = load(self.path)
                    self.on_load(self.tokens)
                except Invalid as err:
                    self.on_error(err.message)
        return self.tokens
