"""The hub's SQLite store: sessions are names within a user; schema 1 migrates."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tetherbed.hub.admission import Refusal, admit_agent, admit_client
from tetherbed.hub.store import DATABASE_NAME, SCHEMA_VERSION, HubStore

SCHEMA_1 = """
CREATE TABLE users (name TEXT PRIMARY KEY, created REAL NOT NULL);
CREATE TABLE tokens (sha256 TEXT PRIMARY KEY, user TEXT NOT NULL, kind TEXT NOT NULL,
    created REAL NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);
CREATE TABLE sessions (id TEXT PRIMARY KEY, user TEXT NOT NULL, created REAL NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0);
CREATE TABLE session_grants (session_id TEXT PRIMARY KEY, machine_id TEXT NOT NULL,
    root_grant TEXT NOT NULL, updated REAL NOT NULL);
INSERT INTO users VALUES ('alice', 1.0);
INSERT INTO sessions VALUES ('chat', 'alice', 2.0, 0);
INSERT INTO sessions VALUES ('old', 'alice', 3.0, 1);
INSERT INTO session_grants VALUES ('chat', 'm1', 'v1.g.h', 4.0);
"""


def test_two_users_may_each_have_a_session_of_the_same_id() -> None:
    store = HubStore(":memory:")
    store.create_session("alice", "chat")
    bob = store.claim_session("bob", "chat")
    assert bob.user == "bob" and not bob.revoked
    store.mark_revoked("alice", "chat")
    assert store.session("alice", "chat").revoked  # type: ignore[union-attr]
    assert not store.session("bob", "chat").revoked  # type: ignore[union-attr]


def test_admission_never_depends_on_another_users_sessions() -> None:
    store = HubStore(":memory:")
    store.create_session("alice", "alices")
    token = store.create_token("mallory", "agent")
    assert admit_agent(store, token, "alices") == admit_agent(store, token, "never-seen")
    client = store.create_token("mallory", "client")
    assert isinstance(admit_client(store, client, "alices"), str)  # mallory's own "alices"


def test_a_revoked_session_is_refused_to_agents_and_clients() -> None:
    store = HubStore(":memory:")
    agent, client = store.create_token("alice", "agent"), store.create_token("alice", "client")
    store.create_session("alice", "s")
    store.mark_revoked("alice", "s")
    refused_agent = admit_agent(store, agent, "s")
    refused_client = admit_client(store, client, "s")
    assert isinstance(refused_agent, Refusal) and refused_agent.status == 401
    assert isinstance(refused_client, Refusal) and refused_client.status == 403
    assert refused_client.code == "SESSION_REVOKED"


def test_a_schema_1_database_is_migrated_in_place(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / DATABASE_NAME) as db:
        db.executescript(SCHEMA_1)
    store = HubStore(tmp_path)
    assert store.session("alice", "chat") is not None
    assert store.session("alice", "old").revoked  # type: ignore[union-attr]
    assert store.grants() == [("alice", "chat", "m1", "v1.g.h")]
    store.claim_session("bob", "chat")  # the new key allows it
    store.close()
    with sqlite3.connect(tmp_path / DATABASE_NAME) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    HubStore(tmp_path).close()  # opening again changes nothing
