"""What flows through one direction of a proxied connection.

Data is plain `bytes`. The three signals say how that direction ends:
EOF passes on the sender's half-close (FIN); CLOSE closes the receiving socket
after what is queued before it, which then closes the other direction too;
RESET aborts both sockets with RST at once.
"""

from __future__ import annotations

import enum


class Signal(enum.Enum):
    EOF = "eof"
    CLOSE = "close"
    RESET = "reset"


Event = bytes | Signal
# (loop time at which the event may leave, the event)
Timed = tuple[float, Event]
