"""The scenario format as one declarative table (docs/scenarios.md explains it).

Every key a scenario file may hold, at any depth, is written here with its
type, default and backends; anything else is refused at load, naming file,
step and key. To add a step, put it in `STEPS`; to add a fault kind, add it
to `simulator/faults.py` (the `fault` step reads that table); to add a
top-level section, put it in `SCENARIO`.

Names a scenario declares (agents, clients, nodes, sessions) and names the
project knows (checkers, message types, history events) are checked as
references against a `Context` built from the file's own topology.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tetherbed.agent.config import AGENT_DEFECTS
from tetherbed.hub.config import HUB_DEFECTS, OwnershipPolicy
from tetherbed.simulator.checkers import CHECKERS, checker_options
from tetherbed.simulator.faults import FAULT_KINDS
from tetherbed.simulator.history import EVENTS
from tetherbed.simulator.peripherals.llm_server.config import FAILURE_MODES
from tetherbed.simulator.peripherals.serial_device import PINNABLE, SPEEDS, pin_problem
from tetherbed.simulator.scenario import control, dsh
from tetherbed.simulator.validation import (
    Anything,
    Boolean,
    ByKey,
    Field,
    Integer,
    ListOf,
    Literal,
    MapOf,
    Number,
    OneOf,
    Record,
    Ref,
    SchemaError,
    Spec,
    Switch,
    Tagged,
    Text,
    Where,
    seconds,
)
from tetherbed.wire import serial_io
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.messages import MessageType

BACKENDS = ("sim", "process", "docker")
#: What `expect {agent: A, state: S}` can wait for.
AGENT_STATES = ("connected", "disconnected", "running", "paused", "exited")
#: What `assert {agent: A, status: S}` can check.
NODE_STATUSES = ("not_started", "running", "paused", "exited")
OUTCOMES = ("ok", "fail", "info")
#: Checkers run when a scenario names none.
DEFAULT_CHECKERS = (
    "single_owner",
    "exactly_one_answer",
    "no_double_execution",
    "no_reconnect_after_fatal",
    "backoff_bounds",
    "no_crossed_answers",
    "file_contents",
)

#: The spec's message types and those of Tetherbed's serial I/O extension.
MESSAGE_TYPES = tuple(t.value for t in MessageType) + tuple(
    t.value for t in serial_io.SerialMessageType
)
ERROR_CODES = (
    tuple(c.value for c in ErrorCode)
    + tuple(c.value for c in ExtensionCode)
    + tuple(c.value for c in serial_io.SerialErrorCode)
    + dsh.ERROR_CODES
)
EVENT_NAMES = tuple(sorted({name for names in EVENTS.values() for name in names}))

_AGENT = Ref("agents", "declared agent")
_CLIENT = Ref("clients", "declared client")
_SESSION_CLIENT = Ref("session_clients", "declared client")  # of a session, not api: dsh
_NODE = Ref("nodes", "node (the hub or a declared agent)")
_WITHIN = Field(seconds(exclusive=True), doc="how long to wait (backend seconds; default 30)")
_FIELDS = Field(Anything(mapping=True), doc="fields the record's value must have")
_DIRECTION = Field(Text(("both", "to_hub", "from_hub")), default="both")
_REFERENCE_ONLY = Field(
    Boolean(),
    doc="only Tetherbed's own parts can show it (journal events, exit codes): "
    "not applicable to a third-party target (docs/scenarios.md)",
)


# --- topology -----------------------------------------------------------------------

HUB_OPTIONS = Record(
    {
        "max_concurrent": Field(Integer(minimum=1)),
        "max_file_size": Field(Integer(minimum=1)),
        "command_timeout": Field(Integer(minimum=1)),
        "ping_interval": Field(seconds(exclusive=True)),
        "pong_timeout": Field(seconds(exclusive=True)),
        "retry_window": Field(seconds()),
        "queue_limit": Field(Integer(minimum=1)),
        "request_timeout": Field(seconds(exclusive=True)),
        "command_slack": Field(seconds()),
        "overload_backoff": Field(seconds(exclusive=True)),
        "overload_retries": Field(Integer(minimum=0)),
        "handshake_timeout": Field(seconds(exclusive=True)),
        "slow_consumer_seconds": Field(seconds(exclusive=True)),
        "slow_consumer_bytes": Field(Integer(minimum=1)),
        "ownership": Field(Text(tuple(p.value for p in OwnershipPolicy))),
        "protocol_version": Field(Text()),
        "defects": Field(ListOf(Text(tuple(sorted(HUB_DEFECTS))))),
        "dsh": Field(dsh.HUB_OPTIONS, doc="the dsh-computers routes' options"),
        # For a third-party hub (hub.url): {user: {agent: TOKEN, client: TOKEN}}.
        "tokens": Field(
            MapOf(Record({"agent": Field(Text(), True), "client": Field(Text(), True)})),
            backends=frozenset({"process"}),
        ),
    },
    noun="hub options",
)

#: `agents.NAME.options.llm`: the machine's Ollama-compatible server
#: (`tetherbed llm-server`; in process on sim), given to the agent as its
#: `--ollama-url`. The keys are LlmServerConfig's.
LLM_OPTIONS = Record(
    {
        "models": Field(ListOf(Text(), nonempty=True)),
        "seed": Field(Integer()),
        "latency_ms": Field(Number()),
        "load_ms": Field(Number()),
        "tokens_per_second": Field(Number()),
        "max_output_tokens": Field(Integer(minimum=1)),
        "fail_rate": Field(Number()),
        "fail_mode": Field(Text(FAILURE_MODES)),
        "fail_models": Field(ListOf(Text())),
        "missing_models": Field(ListOf(Text())),
        "parallel": Field(Integer(minimum=1)),
        "max_queue": Field(Integer(minimum=0)),
        "reachable": Field(Boolean(), doc="false: nothing listens (a backend that is down)"),
    },
    noun="local LLM server options",
)


class _PortName(Spec):
    """A serial port's name (`ttyTB0`): letters, digits, `_`, `-` and `.`, as a
    file name of its own (the backends make the port at a path ending in it)."""

    def check(self, value: Any, where: Where, context: Any) -> Any:
        if (
            not isinstance(value, str)
            or not value
            or len(value) > 32
            or value.startswith(".")
            or not all(c.isascii() and (c.isalnum() or c in "_-.") for c in value)
        ):
            raise SchemaError(where, f"expected {self.describe()}, got {value!r}")
        return value

    def describe(self) -> str:
        return "a port name (letters, digits, _ - ., at most 32, e.g. ttyTB0)"


def _pins_in_range(sensors: dict[str, Any], where: Where) -> None:
    for sensor, value in sensors.items():
        problem = pin_problem(sensor, value)
        if problem:
            raise SchemaError(where.key(sensor), problem)


#: `agents.NAME.options.serial.PORT`: a virtual serial port of the agent's
#: machine with a simulated device on its far end (its speed and answers).
SERIAL_DEVICE = Record(
    {
        "baud": Field(
            OneOf(tuple(Literal(speed) for speed in SPEEDS)),
            default=9600,
            doc="the device's speed: a client at another speed gets garbage",
        ),
        "serial": Field(Text(), doc="the serial number `ID?` answers (default MACHINE-PORT)"),
        "model": Field(Text(), doc="the model `ID?` answers (default sim-arduino)"),
        "seed": Field(Integer(), doc="seed of the sensors' noise"),
        "sensors": Field(
            Record(
                {sensor: Field(Number()) for sensor in PINNABLE},
                noun="readings pinned from the start",
                rules=(_pins_in_range,),
            ),
            doc="readings pinned from the start ({temp: 30.5}); READ answers them",
        ),
    },
    noun="a simulated serial device",
)

AGENT_OPTIONS = Record(
    {
        "shell": Field(Boolean()),
        "max_concurrent": Field(Integer(minimum=1)),
        "protocol_version": Field(Text()),
        "defects": Field(ListOf(Text(tuple(sorted(AGENT_DEFECTS))))),
        "files": Field(MapOf(Text(nonempty=False)), doc="initial files: {path: content}"),
        "file_ops": Field(
            Text(("overlapped", "serial")),
            doc="sim only: 'serial' runs file operations one at a time, atomically "
            "(how the sim ran them before they overlapped as on a real machine)",
            backends=frozenset({"sim"}),
        ),
        "llm": Field(
            LLM_OPTIONS,
            doc="a local Ollama-compatible server for this agent",
            backends=frozenset({"sim", "process"}),
        ),
        "serial": Field(
            MapOf(SERIAL_DEVICE, key=_PortName()),
            doc="virtual serial ports of the machine, each with a simulated device",
        ),
    },
    noun="agent options",
)

WEBSOCKET_AGENT = Record(
    {
        "machine": Field(Text()),
        "session": Field(Text()),
        "user": Field(Text(), default="alice"),
        "root": Field(Text()),
        "options": Field(AGENT_OPTIONS, default={}),
        "command": Field(ListOf(Text(), nonempty=True), backends=frozenset({"process", "docker"})),
        "control": Field(
            control.CONTROL,
            doc="the machine's control-mode agent (instead of `session:`)",
            backends=control.BACKENDS,
        ),
    },
    noun="an agent",
    rules=(control.session_or_control,),
)
AGENT = Switch(
    "transport",
    {"websocket": WEBSOCKET_AGENT, "sse": dsh.AGENT},
    backends={"sse": dsh.BACKENDS},
    default="websocket",
    noun="transport",
)

SESSION_CLIENT = Record(
    {"session": Field(Text(), required=True), "user": Field(Text(), default="alice")},
    noun="a client",
)
CLIENT = Switch(
    "api",
    {"local-executor": SESSION_CLIENT, "dsh": dsh.CLIENT, "machine": control.MACHINE_CLIENT},
    backends={"dsh": dsh.BACKENDS, "machine": control.BACKENDS},
    default="local-executor",
    noun="api",
)


def _names_are_distinct(topology: dict[str, Any], where: Where) -> None:
    agents, clients = topology.get("agents", {}), topology.get("clients", {})
    if "hub" in agents:
        raise SchemaError(where.key("agents").key("hub"), "'hub' is the hub's name")
    clash = sorted(set(agents) & set(clients))
    if clash:
        raise SchemaError(where, f"names used for both an agent and a client: {clash}")


TOPOLOGY = Record(
    {
        "hub": Field(
            Record(
                {
                    "options": Field(HUB_OPTIONS, default={}),
                    "url": Field(
                        Text(),
                        backends=frozenset({"process"}),
                        doc="a third-party hub to test instead of the reference one",
                    ),
                },
                noun="the hub",
            ),
            default={"options": {}},
        ),
        "agents": Field(MapOf(AGENT), default={}),
        "clients": Field(MapOf(CLIENT), default={}),
    },
    noun="a topology with hub, agents, clients",
    rules=(_names_are_distinct, dsh.check_topology_references),
)


# --- steps --------------------------------------------------------------------------


def _fault_record(kind: str) -> Record:
    params = FAULT_KINDS[kind].params
    return Record({"agent": Field(_AGENT, required=True), **params}, noun=f"{kind} fault")


FAULT = Switch(
    "kind",
    {kind: _fault_record(kind) for kind in FAULT_KINDS},
    backends={kind: fault.backends for kind, fault in FAULT_KINDS.items()},
)

ONE_AGENT_OR_ALL = OneOf((Literal("all"), Record({"agent": Field(_AGENT, required=True)})))


def _state_or_exit_code(args: dict[str, Any], where: Where) -> None:
    if "state" not in args and "exit_code" not in args:
        raise SchemaError(where, "expect {agent: ...} needs `state:` or `exit_code:`")


EXPECT = ByKey(
    {
        "client": Record(
            {
                "client": Field(_CLIENT, required=True),
                "id": Field(Text(), required=True),
                "outcome": Field(Text(OUTCOMES)),
                "type": Field(Text(MESSAGE_TYPES)),
                "code": Field(Text(ERROR_CODES)),
                "value": _FIELDS,
                "within": _WITHIN,
                "reference_only": _REFERENCE_ONLY,
            },
            noun="the completion of a request",
        ),
        "agent": Record(
            {
                "agent": Field(_AGENT, required=True),
                "state": Field(Text(AGENT_STATES)),
                "exit_code": Field(Integer()),
                "within": _WITHIN,
                "reference_only": _REFERENCE_ONLY,
            },
            noun="an agent's state",
            rules=(_state_or_exit_code,),
        ),
        "event": Record(
            {
                "event": Field(Text(EVENT_NAMES), required=True),
                "process": Field(Text()),
                "session": Field(Text()),
                "machine": Field(Text()),
                "value": _FIELDS,
                "since": Field(Text(("start",)), doc="`start`: the whole history"),
                "within": _WITHIN,
                "reference_only": _REFERENCE_ONLY,
            },
            noun="an event",
        ),
        "computer": dsh.EXPECT_PRESENCE,
    }
)


def _one_bound(args: dict[str, Any], where: Where) -> None:
    if not {"equals", "at_most", "at_least"} & set(args):
        raise SchemaError(where, "assert {count: ...} needs `equals:`, `at_most:` or `at_least:`")


def _content_or_exists(args: dict[str, Any], where: Where) -> None:
    if "content" not in args and "exists" not in args:
        raise SchemaError(where, "assert {file: ...} needs `content:` or `exists:`")


ASSERT = ByKey(
    {
        "count": Record(
            {
                "count": Field(
                    Record(
                        {
                            "event": Field(Text(EVENT_NAMES), required=True),
                            "process": Field(Text()),
                            "value": _FIELDS,
                            "since_step": Field(Integer(minimum=0)),
                        }
                    ),
                    required=True,
                ),
                "equals": Field(Integer(minimum=0)),
                "at_most": Field(Integer(minimum=0)),
                "at_least": Field(Integer(minimum=0)),
                "reference_only": _REFERENCE_ONLY,
            },
            rules=(_one_bound,),
        ),
        "file": Record(
            {
                "file": Field(
                    Record(
                        {
                            "agent": Field(_AGENT, required=True),
                            "path": Field(Text(), required=True),
                            "content": Field(Text(nonempty=False)),
                            "exists": Field(Boolean()),
                        },
                        rules=(_content_or_exists,),
                    ),
                    required=True,
                ),
                "reference_only": _REFERENCE_ONLY,
            }
        ),
        "agent": Record(
            {
                "agent": Field(_AGENT, required=True),
                "status": Field(Text(NODE_STATUSES)),
                "exit_code": Field(Integer()),
                "reference_only": _REFERENCE_ONLY,
            }
        ),
        "credentials_stored": dsh.ASSERT_CREDENTIALS,
    }
)

# --- serial ports (Tetherbed's serial I/O extension) ---------------------------------

_PORT = Field(
    _PortName(), required=True, doc="a port the agent declares in options.serial (by name)"
)
PLUGGING = Record({"agent": Field(_AGENT, required=True), "port": _PORT}, noun="a serial port")


def _serial_request(noun: str, fields: dict[str, Field]) -> Record:
    """A client's SERIAL_* request on a declared port: the hub relays it to the
    agent serving the client's session. `agent` names whose port when more than
    one agent of the session declares one of that name. Values go out as they
    are given (a test may send one the agent must refuse); only the fields
    given are sent, with the port's path filled in."""
    return Record(
        {
            "client": Field(_CLIENT, required=True),
            "id": Field(Text(), required=True, doc="refers to the answer in `expect`"),
            "port": _PORT,
            "agent": Field(_AGENT),
            **fields,
        },
        noun=noun,
    )


_ENCODING = Field(Text(("utf-8", "base64")))
#: Each client step of the serial extension → its request's message type.
SERIAL_STEPS = {
    "serial_open": "SERIAL_OPEN",
    "serial_write": "SERIAL_WRITE",
    "serial_read": "SERIAL_READ",
    "serial_close": "SERIAL_CLOSE",
}
SERIAL_REQUESTS: Mapping[str, Record] = {
    "serial_open": _serial_request(
        "SERIAL_OPEN",
        {
            "baud_rate": Field(Integer()),
            "bytesize": Field(Integer()),
            "parity": Field(Text(("none", "even", "odd", "mark", "space"))),
            "stopbits": Field(Number()),
        },
    ),
    "serial_write": _serial_request(
        "SERIAL_WRITE", {"data": Field(Text(nonempty=False), required=True), "encoding": _ENCODING}
    ),
    "serial_read": _serial_request(
        "SERIAL_READ",
        {
            "max_bytes": Field(Integer()),
            "timeout_ms": Field(Integer()),
            "until": Field(Text()),
            "encoding": _ENCODING,
        },
    ),
    "serial_close": _serial_request("SERIAL_CLOSE", {}),
}

#: Every step: its name → the spec of its argument.
STEPS: Mapping[str, Spec] = {
    "start": _NODE,
    "stop": _NODE,
    "kill": _NODE,
    "restart": _NODE,
    "pause": _NODE,
    "resume": _NODE,
    "partition": Record({"agent": Field(_AGENT, required=True), "direction": _DIRECTION}),
    "heal": ONE_AGENT_OR_ALL,
    "fault": dsh.OnTheRightLink(FAULT),
    "clear": ONE_AGENT_OR_ALL,
    "send": Record(
        {
            "client": Field(_SESSION_CLIENT, required=True),
            "id": Field(Text(), required=True, doc="refers to the answer in `expect`"),
            "type": Field(Text(MESSAGE_TYPES), required=True),
            "payload": Field(Anything(mapping=True), default={}),
        }
    ),
    "expect": EXPECT,
    "wait": seconds(),
    "assert": ASSERT,
    "revoke": Ref("sessions", "session of a declared agent or client"),
    "note": Text(),
    "unplug": PLUGGING,
    "plug": PLUGGING,
    **SERIAL_REQUESTS,
    **dsh.STEPS,
    **control.STEPS,
}
STEP = Tagged(STEPS)


# --- checkers -----------------------------------------------------------------------


def _option_spec(default: Any) -> Spec:
    if isinstance(default, bool):
        return Boolean()
    if isinstance(default, int | float):
        return Number()
    if isinstance(default, str):
        return Text(nonempty=False)
    return Anything()


def _checker_record(name: str) -> Record:
    options = checker_options(name)
    return Record(
        {option: Field(_option_spec(default)) for option, default in options.items()},
        noun=f"options of {name}",
    )


class CheckerOptions(Spec):
    """`checker_options: {checker: {option: value}}`, each checker's own options."""

    def check(self, value: Any, where: Where, context: Any) -> Any:
        if not isinstance(value, Mapping):
            raise SchemaError(where, f"expected a mapping of checker to options, got {value!r}")
        checked = {}
        for name, options in value.items():
            Ref("checkers", "checker").check(name, where.key(name), context)
            checked[name] = _checker_record(name).check(options, where.key(name), context)
        return checked

    def describe(self) -> str:
        return "a mapping of checker to its options"


#: The checkers a scenario may name.
CHECKER_NAMES = tuple(CHECKERS)


# --- the whole file -----------------------------------------------------------------


def _steps_or_generate(top: dict[str, Any], where: Where) -> None:
    if ("steps" in top) == ("generate" in top):
        raise SchemaError(where, "a scenario has `steps:` or `generate:` (exactly one of them)")


SCENARIO = Record(
    {
        "name": Field(Text(), required=True),
        "description": Field(Text(nonempty=False), default=""),
        "seed": Field(Integer(), default=1),
        "timeout": Field(
            seconds(exclusive=True), default=600.0, doc="backend seconds before it is an error"
        ),
        "backends": Field(ListOf(Text(BACKENDS), nonempty=True), default=list(BACKENDS)),
        "checkers": Field(
            ListOf(Ref("checkers", "checker"), nonempty=True), default=list(DEFAULT_CHECKERS)
        ),
        "checker_options": Field(CheckerOptions(), default={}),
        "topology": Field(TOPOLOGY, required=True),
        # Each step is checked against STEP once the topology's names are known.
        "steps": Field(ListOf(Anything(), nonempty=True)),
        # Checked by simulator/scenario/generation.py, with the topology's names.
        "generate": Field(Anything(mapping=True), doc="a seeded operation mix, instead of steps"),
        "nemesis": Field(Anything(mapping=True), doc="a seeded fault schedule (with generate)"),
    },
    noun="a scenario",
    rules=(_steps_or_generate,),
)
