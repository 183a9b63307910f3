"""The FILE_OPERATIONS table, wire round trips, and concurrent use from worker threads."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tetherbed.agent.config import Limits
from tetherbed.agent.files import FILE_OPERATIONS
from tetherbed.agent.files.content_encoding import (
    CONTENT_BUDGET_BYTES,
    base64_length,
    decode_content,
    encode_content,
    is_text,
)
from tetherbed.agent.path_jail import PathJail
from tetherbed.wire import limits as wire_limits
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import PAYLOAD_MODELS, MessageType


@pytest.fixture
def jail(tmp_path: Path) -> PathJail:
    (tmp_path / "root").mkdir()
    return PathJail(str(tmp_path / "root"))


def call(jail: PathJail, kind: MessageType, payload: dict[str, Any]) -> tuple[MessageType, Any]:
    """Decode a request from JSON the way the dispatcher does, run it, encode the answer."""
    request = msgspec.json.decode(msgspec.json.encode(payload), type=PAYLOAD_MODELS[kind])
    response_kind, operation = FILE_OPERATIONS[kind]
    response = operation(request, jail, Limits())
    assert type(response) is PAYLOAD_MODELS[response_kind]
    return response_kind, msgspec.json.decode(msgspec.json.encode(response))


def test_the_table_maps_every_file_request_to_its_response() -> None:
    assert {kind: response for kind, (response, _) in FILE_OPERATIONS.items()} == {
        MessageType.FILE_READ: MessageType.FILE_CONTENTS,
        MessageType.FILE_WRITE: MessageType.ACK,
        MessageType.FILE_STAT: MessageType.FILE_STAT_RESPONSE,
        MessageType.FILE_LIST: MessageType.FILE_LIST_RESPONSE,
        MessageType.FILE_DELETE: MessageType.ACK,
        MessageType.FILE_MOVE: MessageType.ACK,
    }


def test_a_session_of_operations_over_the_wire_models(jail: PathJail) -> None:
    root = Path(jail.root)
    assert call(
        jail,
        MessageType.FILE_WRITE,
        {"path": "d/x.txt", "content": "hi\r\n", "create_parents": True},
    ) == (
        MessageType.ACK,
        {"ok": True},
    )
    kind, contents = call(jail, MessageType.FILE_READ, {"path": "d/x.txt"})
    assert kind is MessageType.FILE_CONTENTS
    assert contents == {
        "content": "hi\r\n",
        "encoding": "utf-8",
        "size_bytes": 4,
        "truncated": False,
    }
    _, stat = call(jail, MessageType.FILE_STAT, {"path": "d/x.txt"})
    assert (stat["exists"], stat["size_bytes"], stat["path"]) == (
        True,
        4,
        str(root / "d" / "x.txt"),
    )
    _, listing = call(jail, MessageType.FILE_LIST, {"path": "d"})
    assert [entry["name"] for entry in listing["entries"]] == ["x.txt"]
    call(jail, MessageType.FILE_MOVE, {"src": "d/x.txt", "dst": "y.txt"})
    call(jail, MessageType.FILE_DELETE, {"path": "d"})
    assert sorted(p.name for p in root.iterdir()) == ["y.txt"]
    _, gone = call(jail, MessageType.FILE_STAT, {"path": "d"})
    assert gone["exists"] is False


def test_operations_run_concurrently_in_threads(jail: PathJail) -> None:
    def work(number: int) -> str:
        name = f"t{number}/f.bin"
        data = bytes([number]) * 10_000
        call(
            jail,
            MessageType.FILE_WRITE,
            {
                "path": name,
                "content": base64.b64encode(data).decode(),
                "encoding": "base64",
                "create_parents": True,
            },
        )
        _, contents = call(jail, MessageType.FILE_READ, {"path": name, "encoding": "base64"})
        assert base64.b64decode(contents["content"]) == data
        call(jail, MessageType.FILE_MOVE, {"src": name, "dst": f"t{number}/g.bin"})
        call(jail, MessageType.FILE_DELETE, {"path": f"t{number}", "recursive": True})
        return name

    with ThreadPoolExecutor(max_workers=8) as pool:
        done = list(pool.map(work, range(32)))
    assert len(done) == 32
    assert list(Path(jail.root).iterdir()) == []


# --- content encoding -------------------------------------------------------------


def test_format_and_encoding_agreement() -> None:
    assert is_text("utf-8", None) and is_text("utf-8", "text")
    assert not is_text("base64", None) and not is_text("base64", "bytes")
    for encoding, format in (("utf-8", "bytes"), ("base64", "text")):
        with pytest.raises(ProtocolError) as caught:
            is_text(encoding, format)  # type: ignore[arg-type]
        assert caught.value.code == ExtensionCode.INVALID_MESSAGE


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 1000])
def test_base64_length_is_exact(size: int) -> None:
    assert base64_length(size) == len(base64.b64encode(b"x" * size))


def test_content_budget_leaves_room_for_the_envelope() -> None:
    expected = wire_limits.FRAME_LIMIT_BYTES - wire_limits.ENVELOPE_HEADROOM_BYTES
    assert expected == CONTENT_BUDGET_BYTES


def test_encode_and_decode_are_inverse() -> None:
    data = bytes(range(256))
    text = encode_content(data, as_text=False, wire_path="p")
    assert decode_content(text, as_text=False, limit=256, wire_path="p") == data
    with pytest.raises(ProtocolError) as caught:
        decode_content(text, as_text=False, limit=255, wire_path="p")
    assert caught.value.code == ErrorCode.FILE_TOO_LARGE
