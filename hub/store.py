"""The hub's durable state in SQLite: users, bearer tokens, sessions.

Tokens are stored only as SHA-256 hashes: a leaked database reveals no
credential. A session id is a name within its user (the key is the pair):
two users may each have a session "chat-1", and nothing a token can do tells
it whether another user's session of some id exists. All calls are quick
single-row statements, made by the drivers (never by the core).
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    sha256 TEXT PRIMARY KEY,
    user TEXT NOT NULL REFERENCES users(name),
    kind TEXT NOT NULL CHECK (kind IN ('agent', 'client')),
    created REAL NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT NOT NULL,
    user TEXT NOT NULL REFERENCES users(name),
    created REAL NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user, id)
);
CREATE TABLE IF NOT EXISTS session_grants (
    user TEXT NOT NULL,
    session_id TEXT NOT NULL,
    machine_id TEXT NOT NULL,
    root_grant TEXT NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (user, session_id),
    FOREIGN KEY (user, session_id) REFERENCES sessions(user, id)
);
"""

#: Schema 1 keyed sessions by id alone; 2 keys them by (user, id).
SCHEMA_VERSION = 2

_FROM_SCHEMA_1 = """
ALTER TABLE sessions RENAME TO sessions_v1;
ALTER TABLE session_grants RENAME TO session_grants_v1;
"""

_COPY_SCHEMA_1 = """
INSERT INTO sessions (id, user, created, revoked)
    SELECT id, user, created, revoked FROM sessions_v1;
INSERT INTO session_grants (user, session_id, machine_id, root_grant, updated)
    SELECT s.user, g.session_id, g.machine_id, g.root_grant, g.updated
    FROM session_grants_v1 g JOIN sessions_v1 s ON s.id = g.session_id;
DROP TABLE session_grants_v1;
DROP TABLE sessions_v1;
"""

# The dsh-computers registry (hub/dsh): computers and enrollment keys. Rows hold
# a JSON record that hub/dsh/persistence.py reads and writes; only the columns
# the store must index or constrain are broken out. Agent tokens and keys are
# stored only as SHA-256 digests.
_DSH_SCHEMA = """
CREATE TABLE IF NOT EXISTS dsh_computers (
    id TEXT PRIMARY KEY,
    user TEXT NOT NULL REFERENCES users(name),
    token_hash TEXT NOT NULL UNIQUE,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS dsh_keys (
    digest TEXT PRIMARY KEY,
    user TEXT NOT NULL REFERENCES users(name),
    record TEXT NOT NULL
);
"""

DATABASE_NAME = "hub.sqlite3"


class TokenKind(StrEnum):
    AGENT = "agent"
    CLIENT = "client"


@dataclass(frozen=True, slots=True)
class SessionRecord:
    session_id: str
    user: str
    created: float
    revoked: bool


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class HubStore:
    """Open (and create) the database in `state_dir`, or in memory for ":memory:"."""

    def __init__(self, state_dir: str | Path) -> None:
        if str(state_dir) == ":memory:":
            target = ":memory:"
        else:
            directory = Path(state_dir)
            directory.mkdir(parents=True, exist_ok=True)
            target = str(directory / DATABASE_NAME)
        self._db = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._migrate()
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(_DSH_SCHEMA)

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version >= SCHEMA_VERSION:
            return
        columns = self._db.execute("PRAGMA table_info(sessions)").fetchall()
        keyed_by_id_alone = [c[1] for c in columns if c[5]] == ["id"]
        steps = [_FROM_SCHEMA_1, _SCHEMA, _COPY_SCHEMA_1] if keyed_by_id_alone else [_SCHEMA]
        # One script, one transaction: a crash midway leaves schema 1 intact.
        self._db.executescript(
            "BEGIN;\n" + "".join(steps) + f"PRAGMA user_version = {SCHEMA_VERSION};\nCOMMIT;\n"
        )

    def close(self) -> None:
        self._db.close()

    # --- users and tokens --------------------------------------------------

    def create_token(self, user: str, kind: TokenKind | str) -> str:
        """Mint a bearer token for `user` (created if new); only its hash is kept."""
        kind = TokenKind(kind)
        if not user or len(user) > 128:
            raise ValueError("user name must be 1-128 characters")
        token = f"tb_{kind.value[0]}_{secrets.token_urlsafe(32)}"
        now = time.time()
        with self._db:
            self._db.execute("INSERT OR IGNORE INTO users VALUES (?, ?)", (user, now))
            self._db.execute(
                "INSERT INTO tokens (sha256, user, kind, created) VALUES (?, ?, ?, ?)",
                (hash_token(token), user, kind.value, now),
            )
        return token

    def authenticate(self, token: str | None, kind: TokenKind) -> str | None:
        """The user a live token of this kind belongs to, or None."""
        if not token:
            return None
        row = self._db.execute(
            "SELECT user FROM tokens WHERE sha256 = ? AND kind = ? AND revoked = 0",
            (hash_token(token), kind.value),
        ).fetchone()
        return row[0] if row else None

    def revoke_token(self, token: str) -> bool:
        with self._db:
            cursor = self._db.execute(
                "UPDATE tokens SET revoked = 1 WHERE sha256 = ?", (hash_token(token),)
            )
        return cursor.rowcount > 0

    # --- sessions ----------------------------------------------------------

    def create_session(self, user: str, session_id: str | None = None) -> SessionRecord:
        session_id = session_id or str(uuid.uuid4())
        now = time.time()
        with self._db:
            self._db.execute("INSERT OR IGNORE INTO users VALUES (?, ?)", (user, now))
            self._db.execute(
                "INSERT INTO sessions (id, user, created) VALUES (?, ?, ?)",
                (session_id, user, now),
            )
        return SessionRecord(session_id, user, now, False)

    def claim_session(self, user: str, session_id: str) -> SessionRecord:
        """`user`'s session `session_id`, created if new (agents name their sessions)."""
        existing = self.session(user, session_id)
        if existing is not None:
            return existing
        try:
            return self.create_session(user, session_id)
        except sqlite3.IntegrityError:  # created meanwhile
            record = self.session(user, session_id)
            assert record is not None
            return record

    def session(self, user: str, session_id: str) -> SessionRecord | None:
        row = self._db.execute(
            "SELECT id, user, created, revoked FROM sessions WHERE user = ? AND id = ?",
            (user, session_id),
        ).fetchone()
        return SessionRecord(row[0], row[1], row[2], bool(row[3])) if row else None

    def sessions_of(self, user: str) -> list[SessionRecord]:
        rows = self._db.execute(
            "SELECT id, user, created, revoked FROM sessions WHERE user = ? ORDER BY created",
            (user,),
        ).fetchall()
        return [SessionRecord(r[0], r[1], r[2], bool(r[3])) for r in rows]

    def sessions_with_id(self, session_id: str) -> list[SessionRecord]:
        """Every user's session named `session_id` (operator tooling only)."""
        rows = self._db.execute(
            "SELECT id, user, created, revoked FROM sessions WHERE id = ? ORDER BY user",
            (session_id,),
        ).fetchall()
        return [SessionRecord(r[0], r[1], r[2], bool(r[3])) for r in rows]

    def mark_revoked(self, user: str, session_id: str) -> None:
        with self._db:
            self._db.execute(
                "UPDATE sessions SET revoked = 1 WHERE user = ? AND id = ?", (user, session_id)
            )
            self._db.execute(
                "DELETE FROM session_grants WHERE user = ? AND session_id = ?", (user, session_id)
            )

    # --- root grants (durable, so transparent restore survives a restart) --

    def save_grant(self, user: str, session_id: str, machine_id: str, root_grant: str) -> None:
        self.claim_session(user, session_id)
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO session_grants VALUES (?, ?, ?, ?, ?)",
                (user, session_id, machine_id, root_grant, time.time()),
            )

    def grants(self) -> list[tuple[str, str, str, str]]:
        """(user, session_id, machine_id, root_grant) for every live grant."""
        return self._db.execute(
            "SELECT g.user, g.session_id, g.machine_id, g.root_grant FROM session_grants g "
            "JOIN sessions s ON s.user = g.user AND s.id = g.session_id WHERE s.revoked = 0"
        ).fetchall()

    # === dsh-computers registry (hub/dsh) ===================================

    def dsh_rows(self) -> tuple[list[tuple[str, str, str, str]], list[tuple[str, str, str]]]:
        """Every computer row (id, user, token_hash, record) and key row
        (digest, user, record), in insertion order."""
        computers = self._db.execute(
            "SELECT id, user, token_hash, record FROM dsh_computers ORDER BY rowid"
        ).fetchall()
        keys = self._db.execute(
            "SELECT digest, user, record FROM dsh_keys ORDER BY rowid"
        ).fetchall()
        return computers, keys

    def dsh_write(
        self,
        computers: list[tuple[str, str, str, str]],
        dropped_computers: list[str],
        keys: list[tuple[str, str, str]],
        dropped_keys: list[str],
    ) -> None:
        """Apply one batch of registry changes in one transaction.

        The connection is in autocommit mode (isolation_level=None), where
        `with connection:` opens no transaction; so BEGIN explicitly.
        """
        now = time.time()
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for user in {row[1] for row in computers} | {row[1] for row in keys}:
                db.execute("INSERT OR IGNORE INTO users VALUES (?, ?)", (user, now))
            db.executemany(
                "DELETE FROM dsh_computers WHERE id = ?", [(i,) for i in dropped_computers]
            )
            db.executemany(
                "INSERT INTO dsh_computers VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                "user = excluded.user, token_hash = excluded.token_hash, record = excluded.record",
                computers,
            )
            db.executemany("DELETE FROM dsh_keys WHERE digest = ?", [(d,) for d in dropped_keys])
            db.executemany("INSERT OR REPLACE INTO dsh_keys VALUES (?, ?, ?)", keys)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
