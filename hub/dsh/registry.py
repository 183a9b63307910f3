"""Enrollment keys, computers and agent tokens: the rules of §2, §3.1 and §4.

Pure: times come in as arguments, randomness from the `entropy` callable,
and every change is returned as a store change for the driver to apply in one
transaction. The registry keeps every user's computers; each user sees, keys
and enrolls only their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tetherbed.hub.dsh.actions import Change, DropComputer, DropKey, PutComputer, PutKey
from tetherbed.hub.dsh.bodies import Enrollment, KeyRequest
from tetherbed.hub.dsh.config import DshConfig
from tetherbed.hub.dsh.records import Computer, PendingKey
from tetherbed.wire.dsh import constants as C
from tetherbed.wire.dsh.credentials import digest, is_credential, make_credential, same_digest

Entropy = Callable[[int], bytes]


@dataclass(frozen=True, slots=True)
class Refused:
    status: int
    error: str
    message: str


@dataclass(frozen=True, slots=True)
class Enrolled:
    computer: Computer
    token: str
    #: The computer existed (a `replace` key) and its old token is now dead.
    replaced: bool


class Registry:
    def __init__(
        self,
        config: DshConfig,
        entropy: Entropy,
        computers: Iterable[Computer] = (),
        keys: Iterable[PendingKey] = (),
    ) -> None:
        self._config = config
        self._entropy = entropy
        self._clear_tokens = "token_in_clear" in config.defects
        self._reusable_keys = "reusable_key" in config.defects
        self.computers: dict[str, Computer] = {c.id: c for c in computers}
        self.keys: dict[str, PendingKey] = {k.digest: k for k in keys}
        self._by_token = {c.token_hash: c.id for c in self.computers.values()}

    # --- lookups -----------------------------------------------------------

    def authenticate(self, token: str | None) -> Computer | None:
        """The computer whose token this is. The digest finds the record; the
        comparison that decides is constant-time on the digests."""
        if not token or not is_credential(token):
            return None
        presented = token if self._clear_tokens else digest(token)
        computer_id = self._by_token.get(presented)
        computer = self.computers.get(computer_id) if computer_id else None
        if computer is None or not same_digest(computer.token_hash, presented):
            return None
        return computer

    def of_user(self, user: str) -> list[Computer]:
        return [c for c in self.computers.values() if c.user == user]

    def owned(self, user: str, computer_id: object) -> Computer | None:
        computer = self.computers.get(computer_id) if isinstance(computer_id, str) else None
        return computer if computer is not None and computer.user == user else None

    def pending_key(self, user: str, now: float) -> PendingKey | None:
        """The user's one live, unused key (§4.1 `pendingKey`)."""
        live = [
            k
            for k in self.keys.values()
            if k.user == user and k.used_at is None and k.expires_at > now
        ]
        return max(live, key=lambda k: k.created_at) if live else None

    def key_for(self, user: str, key: object) -> PendingKey | None:
        if not is_credential(key):
            return None
        record = self.keys.get(digest(key))  # type: ignore[arg-type]
        return record if record is not None and record.user == user else None

    def key_refusal(self, key: object, now: float) -> Refused | None:
        """Why this key cannot enroll (or None if it can), in §3.1's terms."""
        record = self.keys.get(digest(key)) if is_credential(key) else None  # type: ignore[arg-type]
        if record is None:
            return Refused(401, C.ErrorCode.INVALID_KEY, "unknown enrollment key")
        if record.used_at is not None and not self._reusable_keys:
            return Refused(409, C.ErrorCode.KEY_USED, "this enrollment key was already used")
        if record.expires_at <= now:
            return Refused(410, C.ErrorCode.KEY_EXPIRED, "this enrollment key has expired")
        return None

    # --- keys --------------------------------------------------------------

    def create_key(
        self, user: str, request: KeyRequest, now: float
    ) -> tuple[str, PendingKey, list[Change]]:
        """A new single-use key; the user's earlier pending keys are used up."""
        changes: list[Change] = []
        for record in self.keys.values():
            if record.user == user and record.used_at is None:
                record.used_at = now
                changes.append(PutKey(record))
        key = make_credential(self._entropy(C.CREDENTIAL_RANDOM_BYTES))
        record = PendingKey(
            digest=digest(key),
            user=user,
            created_at=now,
            expires_at=now + self._config.key_ttl_minutes * 60,
            os=request.os,
            label=request.label,
            replace=request.replace,
            key=key,
        )
        self.keys[record.digest] = record
        changes.append(PutKey(record))
        return key, record, changes + self.prune(now)

    def prune(self, now: float) -> list[Change]:
        """§2: drop keys used over an hour ago or expired over an hour ago."""
        cutoff = now - C.PRUNE_AFTER_SECONDS
        stale = [
            d
            for d, k in self.keys.items()
            if (k.used_at is not None and k.used_at < cutoff) or k.expires_at < cutoff
        ]
        changes: list[Change] = []
        for d in stale:
            del self.keys[d]
            changes.append(DropKey(d))
        # A computer enrolled with a key but never activated, whose key is
        # gone, can never be seen or deleted by its user: drop it as well.
        if self._config.hide_unactivated:
            live_ids = {k.computer_id for k in self.keys.values()}
            for computer in list(self.computers.values()):
                if (
                    computer.activated_at is None
                    and computer.id not in live_ids
                    and computer.created_at < cutoff
                ):
                    changes += self.drop(computer.id)
        return changes

    # --- enrollment --------------------------------------------------------

    def enroll(self, request: Enrollment, now: float) -> tuple[Enrolled | Refused, list[Change]]:
        refused = self.key_refusal(request.key, now)
        if refused is not None:
            return refused, []
        record = self.keys[digest(request.key)]
        token = make_credential(self._entropy(C.CREDENTIAL_RANDOM_BYTES))
        token_hash = token if self._clear_tokens else digest(token)
        name = record.label or request.name or request.hostname or "computer"
        existing = self._replaceable(record, request) if record.replace else None
        if existing is not None:
            self._by_token.pop(existing.token_hash, None)
            computer = existing
            computer.token_hash = token_hash
            if record.label:
                computer.name = record.label
            replaced = True
        else:
            computer = Computer(
                id=self._new_computer_id(),
                user=record.user,
                name=name,
                hostname=request.hostname or name,
                token_hash=token_hash,
                created_at=now,
            )
            replaced = False
        computer.hostname = request.hostname or computer.hostname
        computer.os = request.os
        computer.arch = request.arch
        computer.platform_label = request.platform_label
        computer.cpu_model = request.cpu_model
        computer.memory_bytes = request.memory_bytes
        computer.node_version = request.node_version
        computer.agent_version = request.agent_version
        computer.last_seen_at = now
        if request.capabilities is not None:
            computer.capabilities = request.capabilities
            computer.capabilities_updated_at = now
        if request.workspace_base is not None:
            computer.workspace_base = request.workspace_base
        self.computers[computer.id] = computer
        self._by_token[token_hash] = computer.id
        if not self._reusable_keys:
            record.used_at = now
        record.computer_id = computer.id
        changes: list[Change] = [PutComputer(computer), PutKey(record)]
        return Enrolled(computer, token, replaced), changes + self.prune(now)

    def _replaceable(self, record: PendingKey, request: Enrollment) -> Computer | None:
        """§3.1: a computer of the key's user whose name or hostname matches."""
        wanted = {n.casefold() for n in (request.name, request.hostname, record.label) if n}
        for computer in self.computers.values():
            if computer.user == record.user and (
                computer.name.casefold() in wanted or computer.hostname.casefold() in wanted
            ):
                return computer
        return None

    def _new_computer_id(self) -> str:
        while True:
            candidate = C.COMPUTER_ID_PREFIX + self._entropy(8).hex()[: C.COMPUTER_ID_HEX_CHARS]
            if candidate not in self.computers:
                return candidate

    # --- changes to a computer ---------------------------------------------

    def rename(self, computer: Computer, name: str) -> list[Change]:
        computer.name = name
        return [PutComputer(computer)]

    def drop(self, computer_id: str) -> list[Change]:
        computer = self.computers.pop(computer_id, None)
        if computer is None:
            return []
        self._by_token.pop(computer.token_hash, None)
        return [DropComputer(computer_id)]

    def key_status(self, record: PendingKey | None, now: float, online: bool) -> str:
        """§4.3 for one of the user's keys."""
        if record is None:
            return "unknown"
        computer = self.computers.get(record.computer_id) if record.computer_id else None
        if computer is not None:
            if online:
                return "connected"
            return "waiting" if computer.activated_at is None else "used"
        if record.used_at is not None:
            return "used"
        if record.expires_at <= now:
            return "expired"
        return "waiting"
