"""The agent's file operations: FILE_READ, FILE_WRITE, FILE_STAT, FILE_LIST, FILE_DELETE, FILE_MOVE.

Each operation is a plain blocking function `(request, jail, limits) -> payload`
that raises ProtocolError on failure. They keep no state, so the dispatcher may
run them in worker threads, concurrently with each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tetherbed.agent.config import Limits
from tetherbed.agent.files.delete import delete_path
from tetherbed.agent.files.listing import list_directory
from tetherbed.agent.files.metadata import stat_path
from tetherbed.agent.files.move import move_path
from tetherbed.agent.files.read import read_file
from tetherbed.agent.files.write import write_file
from tetherbed.agent.path_jail import PathJail
from tetherbed.wire.messages import MessageType, Payload

#: `(request payload, jail, limits) -> response payload`; raises ProtocolError.
FileOperation = Callable[[Any, PathJail, Limits], Payload]

#: Request type -> (response type, operation).
FILE_OPERATIONS: dict[MessageType, tuple[MessageType, FileOperation]] = {
    MessageType.FILE_READ: (MessageType.FILE_CONTENTS, read_file),
    MessageType.FILE_WRITE: (MessageType.ACK, write_file),
    MessageType.FILE_STAT: (MessageType.FILE_STAT_RESPONSE, stat_path),
    MessageType.FILE_LIST: (MessageType.FILE_LIST_RESPONSE, list_directory),
    MessageType.FILE_DELETE: (MessageType.ACK, delete_path),
    MessageType.FILE_MOVE: (MessageType.ACK, move_path),
}

__all__ = [
    "FILE_OPERATIONS",
    "FileOperation",
    "delete_path",
    "list_directory",
    "move_path",
    "read_file",
    "stat_path",
    "write_file",
]
