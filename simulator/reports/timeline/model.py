"""From a history to what the timeline draws: lanes, rows and shapes in time.

Kept apart from the HTML so that it can be tested without parsing markup and
so that the drawing code only maps seconds to pixels. Everything here is in
seconds and history indexes; nothing depends on dict or set iteration order.

Readability at scale: per lane, routine shapes (successful operations, exec
ticks, connections and backoffs, minor hub events) beyond BULK_LIMIT are
folded into a density strip, while anything unusual — failures, unknown
outcomes, missing answers, takeovers, faults and every record a checker
blamed — is always drawn alone.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from tetherbed.simulator.checkers.evidence.lifecycle import EVERY_TARGET, fault_periods, pauses
from tetherbed.simulator.checkers.evidence.operations import Operation, operations
from tetherbed.simulator.checkers.evidence.records import (
    fields,
    is_agent,
    is_client,
    is_event,
    number,
    ordered,
    text,
    time_of,
)
from tetherbed.simulator.checkers.single_owner import OwnerInterval, owner_intervals
from tetherbed.simulator.checkers.verdict import Verdict
from tetherbed.simulator.faults import INSTANT_FAULTS
from tetherbed.simulator.history import History, Record
from tetherbed.wire.codes import CloseCode

#: Routine shapes drawn one by one per lane; beyond this they become a density strip.
BULK_LIMIT = 1500
#: Columns of a density strip.
DENSITY_BINS = 600
#: Concurrent operations shown side by side in a client lane; more share the last row.
MAX_TRACKS = 8
#: Hub events worth a labelled marker of their own.
NOTABLE_HUB = frozenset(
    {
        "takeover",
        "takeover_rejected",
        "refused",
        "revoke",
        "shutdown_close",
        "pong_timeout",
        "outcome_unknown",
        "hold_expired",
        "auto_restore",
        "auto_restore_failed",
    }
)
#: Marker glyphs: plain geometric shapes that common fonts have (no emoji).
_GLYPHS = {
    "started": "▶",
    "exited": "■",
    "killed": "✖",
    "paused": "‖",
    "resumed": "▷",
    "fatal_close": "✖",
    "revoked": "⊘",
    "stop": "■",
    "takeover": "⇄",
    "takeover_rejected": "✕",
    "refused": "✕",
    "revoke": "⊘",
    "shutdown_close": "▼",
    "pong_timeout": "◌",
    "outcome_unknown": "?",
    "step": "▸",
    "expect_failed": "✘",
    "assert_failed": "✘",
    "final_file": "▤",
    "fault_start": "✦",
}
#: Agent and hub events whose label a reader needs without hovering.
_KEPT = frozenset(
    {
        "exited",
        "killed",
        "stop",
        "fatal_close",
        "revoked",
        "refused",
        "takeover_rejected",
        "revoke",
        "shutdown_close",
    }
)


@dataclass(frozen=True, slots=True)
class Shape:
    """One drawn thing. `kind`: bar, thin, tick, mark, density, hatch, arrow."""

    lane: str
    row: int
    start: float
    end: float
    kind: str
    css: str
    label: str = ""
    tip: str = ""
    records: tuple[int, ...] = ()
    glyph: str = ""
    #: density: relative count 0..1; arrow: the row it points to.
    weight: float = 1.0
    to_row: int = 0
    #: Owner intervals: colour by session (-1: none).
    palette: int = -1
    bulk: bool = False
    #: The label is always shown (exit codes, refusals): others make room for it.
    keep: bool = False


@dataclass(frozen=True, slots=True)
class Shade:
    """A fault period shaded across the lanes it affects (all when `lanes` is empty)."""

    start: float
    end: float
    lanes: tuple[str, ...]
    label: str
    records: tuple[int, ...]


@dataclass(slots=True)
class Lane:
    name: str
    rows: int = 1
    row_titles: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Timeline:
    start: float
    end: float
    lanes: list[Lane]
    shapes: list[Shape]
    shades: list[Shade]
    #: History index → names of the failing checkers that blamed it.
    flagged: dict[int, list[str]]
    #: History index → the record, for tooltips.
    records: dict[int, Record]

    def lane(self, name: str) -> Lane | None:
        return next((lane for lane in self.lanes if lane.name == name), None)


def build_timeline(history: History, verdicts: list[Verdict]) -> Timeline:
    records = ordered(history)
    times = [time_of(r) for r in records]
    start = min([0.0, *times])
    end = max([start + 1.0, *times])
    builder = _Builder(records, start, end)
    builder.hub(owner_intervals(history))
    builder.agents(history)
    builder.clients(operations(history))
    builder.faults(history)
    builder.runner()
    builder.others()
    flagged: dict[int, list[str]] = defaultdict(list)
    for verdict in sorted(verdicts, key=lambda v: v.name):
        if verdict.ok:
            continue
        for index in verdict.evidence_indexes():
            if verdict.name not in flagged[index]:
                flagged[index].append(verdict.name)
    shapes = _fold_bulk(builder.shapes, start, end, set(flagged))
    return Timeline(
        start=start,
        end=end,
        lanes=builder.lane_list(),
        shapes=shapes,
        shades=builder.shades,
        flagged=dict(flagged),
        records={r.index: r for r in records},
    )


def lane_order(process: str) -> tuple[int, str]:
    """hub, agents, clients, faults, runner, then anything else."""
    if process == "hub":
        return (0, "")
    if is_agent(process):
        return (1, process)
    if is_client(process):
        return (2, process)
    if process == "fault":
        return (3, "")
    if process == "runner":
        return (4, "")
    return (5, process)


def pack(spans: list[tuple[float, float]], limit: int = MAX_TRACKS) -> list[int]:
    """A track per span so that spans on one track never overlap (greedy)."""
    ends: list[float] = []
    tracks: list[int] = []
    for begin, finish in spans:
        for track, last in enumerate(ends):
            if last <= begin:
                ends[track] = finish
                tracks.append(track)
                break
        else:
            if len(ends) < limit:
                ends.append(finish)
                tracks.append(len(ends) - 1)
            else:
                track = min(range(len(ends)), key=lambda t: (ends[t], t))
                ends[track] = max(ends[track], finish)
                tracks.append(track)
    return tracks


class _Builder:
    def __init__(self, records: list[Record], start: float, end: float) -> None:
        self.records = records
        self.start = start
        self.end = end
        self.shapes: list[Shape] = []
        self.shades: list[Shade] = []
        self.lanes: dict[str, Lane] = {}
        self.by_process: dict[str, list[Record]] = defaultdict(list)
        for record in records:
            if isinstance(record.process, str):
                self.by_process[record.process].append(record)
        for process in self.by_process:
            self.lanes[process] = Lane(process)
        self.agent_of_conn = _agents_by_connection(records)
        self.hub_down = _hub_down(self.by_process.get("hub", []), end)

    def who(self, conn: object) -> str:
        """A hub connection as a person knows it: the agent's name, then the id."""
        name = self.agent_of_conn.get(conn) if isinstance(conn, str) else None
        return f"{name} ({conn})" if name else str(conn)

    def who_short(self, conn: object) -> str:
        name = self.agent_of_conn.get(conn) if isinstance(conn, str) else None
        return name or str(conn)

    def lane_list(self) -> list[Lane]:
        return [self.lanes[name] for name in sorted(self.lanes, key=lane_order)]

    def add(self, shape: Shape) -> None:
        self.shapes.append(shape)

    def mark(self, record: Record, row: int = 0, label: str = "", **extra: object) -> None:
        css = str(extra.pop("css", f"ev ev-{record.f}"))
        bulk = bool(extra.pop("bulk", False))
        keep = bool(label) and record.f in _KEPT and record.process != "runner"
        self.add(
            Shape(
                lane=record.process,
                row=row,
                start=time_of(record),
                end=time_of(record),
                kind="mark",
                css=css,
                label=label,
                tip=f"{record.process} {record.f}",
                records=(record.index,),
                glyph=_GLYPHS.get(record.f, "•"),
                bulk=bulk,
                keep=keep,
            )
        )

    # --- hub --------------------------------------------------------------

    def hub(self, intervals: list[OwnerInterval]) -> None:
        records = self.by_process.get("hub", [])
        if not records:
            return
        lane = self.lanes["hub"]
        lane.row_titles = ["events"]
        for record in records:
            if not is_event(record):
                continue
            if record.f == "ack" and fields(record).get("control") is not True:
                continue  # drawn as the start of an owner interval
            value = fields(record)
            label = ""
            if record.f == "takeover_rejected":
                code = int(CloseCode.SESSION_TAKEN_OVER)
                label = f"{code} → {self.who_short(value.get('conn'))}"
                if value.get("owner"):
                    label += f" (owner {self.who_short(value.get('owner'))})"
            elif record.f == "refused":
                label = f"refused {self.who_short(value.get('conn'))}: {value.get('code')}"
                if value.get("reason"):
                    label += f" {value.get('reason')}"
            elif record.f in ("revoke", "pong_timeout", "shutdown_close"):
                label = f"{record.f} {self.who_short(value.get('conn'))}"
            elif record.f in ("killed", "exited"):
                label = ""  # the "hub down" bar says it
            elif record.f in NOTABLE_HUB or record.f in _GLYPHS:
                label = record.f
            if record.f != "takeover":
                routine = record.f not in NOTABLE_HUB and record.f not in _GLYPHS
                self.mark(record, label=label, bulk=routine)
        sessions = sorted({i.session for i in intervals})
        row_of: dict[int, int] = {}
        next_row = 1
        for palette, session in enumerate(sessions):
            mine = sorted((i for i in intervals if i.session == session), key=lambda i: i.start_key)
            tracks = pack(
                [(time_of(i.start), self._end(i.end)) for i in mine], limit=len(mine) or 1
            )
            for interval, track in zip(mine, tracks, strict=True):
                row_of[id(interval)] = next_row + track
                self._owner(interval, next_row + track, palette)
            depth = max(tracks, default=0) + 1
            lane.row_titles += [f"owner {session}"] + [f"owner {session} (2nd owner!)"] * (
                depth - 1
            )
            next_row += depth
        lane.rows = next_row
        self._takeovers(records, intervals, row_of)
        for down, up in self.hub_down:
            why = "killed" if down.f == "killed" else f"exited {fields(down).get('code')}"
            until = "until the end" if up is None else "until restarted"
            self.add(
                Shape(
                    "hub",
                    0,
                    time_of(down),
                    self._end(up),
                    "bar",
                    "hub-down",
                    label=f"hub down ({why})",
                    tip=f"the hub is down ({why}) {until}",
                    records=(down.index,) + (() if up is None else (up.index,)),
                    keep=True,
                )
            )
            self.add(
                Shape(
                    "hub", -1, time_of(down), self._end(up), "hatch", "down", records=(down.index,)
                )
            )

    def _owner(self, interval: OwnerInterval, row: int, palette: int) -> None:
        closing = interval.end
        records = (interval.start.index,) + (() if closing is None else (closing.index,))
        how = "still owner at the end" if closing is None else f"until {closing.f}"
        finish = self._end(closing)
        begin = time_of(interval.start)
        # A dead hub owns nothing: the interval ends when the hub went down.
        for down, _ in self.hub_down:
            if begin <= time_of(down) < finish:
                finish, how = time_of(down), f"until the hub went down ({down.f})"
                records = (*records, down.index)
                closing = down
                break
        self.add(
            Shape(
                lane="hub",
                row=row,
                start=begin,
                end=finish,
                kind="bar",
                css="owner" + (" open" if closing is None else ""),
                label=self.who(interval.conn),
                tip=f"{self.who(interval.conn)} owns {interval.session} ({how})",
                records=records,
                palette=palette,
            )
        )

    def _takeovers(
        self, records: list[Record], intervals: list[OwnerInterval], row_of: dict[int, int]
    ) -> None:
        by_conn: dict[str, list[OwnerInterval]] = defaultdict(list)
        for interval in intervals:
            by_conn[interval.conn].append(interval)
        for record in records:
            if not is_event(record, "takeover"):
                continue
            value = fields(record)
            old, new = text(value.get("old")) or "?", text(value.get("new")) or "?"
            silent = value.get("silent") is True
            at = time_of(record)
            old_row = self._row_at(by_conn.get(old, []), at, row_of, before=True)
            new_row = self._row_at(by_conn.get(new, []), at, row_of, before=False)
            kind = "silent takeover" if silent else "takeover"
            row = new_row or old_row or 0
            self.add(
                Shape(
                    lane="hub",
                    row=row,
                    start=at,
                    end=at,
                    kind="mark",
                    css="takeover silent" if silent else "takeover",
                    label=f"{kind} {self.who_short(old)}→{self.who_short(new)}",
                    tip=f"{kind}: {self.who(old)} → {self.who(new)}",
                    records=(record.index,),
                    glyph=_GLYPHS["takeover"],
                )
            )
            if old_row and new_row and old_row != new_row:
                self.add(
                    Shape(
                        lane="hub",
                        row=old_row,
                        start=at,
                        end=at,
                        kind="arrow",
                        css="takeover-arrow silent" if silent else "takeover-arrow",
                        tip=f"{kind}: {self.who(old)} → {self.who(new)}",
                        records=(record.index,),
                        to_row=new_row,
                    )
                )

    def _row_at(
        self,
        candidates: list[OwnerInterval],
        at: float,
        row_of: dict[int, int],
        *,
        before: bool,
    ) -> int:
        """The row of the owner interval of that conn around time `at`, or 0."""
        best = 0
        for interval in candidates:
            begin = time_of(interval.start)
            if (begin <= at if before else begin >= at) and at <= self._end(interval.end):
                best = row_of.get(id(interval), 0)
                if not before:
                    return best
        return best

    def _end(self, record: Record | None) -> float:
        return self.end if record is None else time_of(record)

    # --- agents -----------------------------------------------------------

    def agents(self, history: History) -> None:
        frozen = pauses(history)
        for process in sorted(p for p in self.by_process if is_agent(p)):
            self.lanes[process].rows = 2
            self.lanes[process].row_titles = ["connections", "lifecycle"]
            self._agent(process, self.by_process[process])
        for process in sorted(frozen):
            if process not in self.lanes:
                continue
            for pause in frozen[process]:
                closing = pause.end
                self.add(
                    Shape(
                        lane=process,
                        row=-1,
                        start=time_of(pause.start),
                        end=self._end(closing),
                        kind="hatch",
                        css="paused",
                        tip=f"{process} paused",
                        records=(pause.start.index,)
                        + (() if closing is None else (closing.index,)),
                    )
                )

    def _agent(self, process: str, records: list[Record]) -> None:
        attempt: Record | None = None
        connected: Record | None = None

        def close(at: Record | None, why: str) -> None:
            nonlocal attempt, connected
            if attempt is None:
                return
            finish = self._end(at)
            tail = () if at is None else (at.index,)
            if connected is None:
                self.add(
                    Shape(
                        process,
                        0,
                        time_of(attempt),
                        finish,
                        "bar",
                        "conn failed",
                        tip=f"attempt {fields(attempt).get('attempt')} never connected ({why})",
                        records=(attempt.index, *tail),
                        bulk=True,
                    )
                )
            else:
                self.add(
                    Shape(
                        process,
                        0,
                        time_of(attempt),
                        time_of(connected),
                        "bar",
                        "conn handshake",
                        tip="connecting (upgrade + HELLO)",
                        records=(attempt.index, connected.index),
                        bulk=True,
                    )
                )
                conn = text(fields(connected).get("conn")) or ""
                self.add(
                    Shape(
                        process,
                        0,
                        time_of(connected),
                        finish,
                        "bar",
                        "conn up" + (" open" if at is None else ""),
                        label=conn,
                        tip=f"connected as {conn} ({why})",
                        records=(connected.index, *tail),
                        bulk=True,
                    )
                )
            attempt = connected = None

        for record in records:
            if not is_event(record):
                continue
            value = fields(record)
            if record.f == "attempt":
                close(record, "next attempt")
                attempt = record
            elif record.f == "connected":
                connected = record if attempt is not None else None
            elif record.f == "lost":
                close(record, f"lost, code {value.get('code')}")
            elif record.f == "backoff":
                close(record, "gave up")
                delay = number(value.get("delay")) or 0.0
                self.add(
                    Shape(
                        process,
                        0,
                        time_of(record),
                        time_of(record) + max(delay, 0.0),
                        "thin",
                        "backoff",
                        label=f"{delay:.1f}s",
                        tip=f"backoff n={value.get('attempt')} delay {delay:.3f} s",
                        records=(record.index,),
                        bulk=True,
                    )
                )
            elif record.f == "exec":
                self.add(
                    Shape(
                        process,
                        0,
                        time_of(record),
                        time_of(record),
                        "tick",
                        "exec",
                        tip=f"exec {value.get('kind')}",
                        records=(record.index,),
                        bulk=True,
                    )
                )
            elif record.f in ("exited", "killed", "stop"):
                close(record, record.f)
                label = record.f
                if record.f == "stop":
                    label = f"stop {value.get('exit_code')}"
                    if value.get("reason"):
                        label += f": {value.get('reason')}"
                elif record.f == "exited":
                    label = f"exit {value.get('code')}"
                self.mark(record, row=1, label=label)
            elif record.f == "fatal_close":
                self.mark(record, row=1, label=f"fatal {value.get('code')}")
            elif record.f == "revoked":
                self.mark(record, row=1, label=f"revoked ({value.get('reason')})")
            elif record.f in ("started", "paused", "resumed"):
                self.mark(record, row=1, label=record.f)
            else:
                self.mark(record, bulk=True)
        close(None, "still connected at the end")

    # --- clients ----------------------------------------------------------

    def clients(self, ops: list[Operation]) -> None:
        by_client: dict[str, list[Operation]] = defaultdict(list)
        for op in ops:
            if op.process in self.lanes:
                by_client[op.process].append(op)
        for process in sorted(by_client):
            mine = by_client[process]
            spans = [(time_of(op.invoke), self._end(op.completion)) for op in mine]
            tracks = pack(spans)
            depth = max(tracks, default=0) + 1
            self.lanes[process].rows = depth
            self.lanes[process].row_titles = ["requests"] + [""] * (depth - 1)
            for op, track in zip(mine, tracks, strict=True):
                self._operation(op, track)
        paired = {id(op.completion) for op in ops if op.completion is not None}
        for process, records in sorted(self.by_process.items()):
            if not is_client(process):
                continue
            for record in records:
                if record.type == "event":
                    self.mark(record, label=record.f, bulk=True)
                elif record.type != "invoke" and id(record) not in paired:
                    self.mark(record, label=f"stray {record.type}", css="stray")

    def _operation(self, op: Operation, track: int) -> None:
        outcome = op.outcome or "missing"
        answer = op.answer
        payload = op.payload
        subject = text(payload.get("path")) or text(payload.get("command")) or ""
        label = op.kind + (f" {subject}" if subject else "")
        detail = outcome
        if outcome in ("fail", "info"):
            detail += f" {answer.get('code')}"
        elif outcome == "missing":
            detail = "no answer by the end of the run"
        records = (op.invoke.index,) + (() if op.completion is None else (op.completion.index,))
        self.add(
            Shape(
                lane=op.process,
                row=track,
                start=time_of(op.invoke),
                end=self._end(op.completion),
                kind="bar",
                css=f"op {outcome}",
                label=label,
                tip=f"{op.kind} req {op.invoke.req}: {detail}",
                records=records,
                bulk=outcome == "ok",
            )
        )
        if op.completion is None:
            self.add(
                Shape(
                    lane=op.process,
                    row=track,
                    start=self.end,
                    end=self.end,
                    kind="mark",
                    css="op-missing",
                    label="no answer",
                    tip=f"{op.kind} req {op.invoke.req} never answered",
                    records=(op.invoke.index,),
                    glyph="?",
                )
            )

    # --- faults, runner, the rest ----------------------------------------

    def faults(self, history: History) -> None:
        if "fault" not in self.lanes:
            return
        periods = fault_periods(history)
        paired = {p.start.index for p in periods} | {
            p.end.index for p in periods if p.end is not None
        }
        for record in self.by_process["fault"]:
            if record.index not in paired:
                self.mark(record, label=record.f)
        # An instant fault (a reset, an injected close) happens at one time:
        # a point, not a period that lasts until the next `clear`.
        for period in [p for p in periods if fields(p.start).get("kind") in INSTANT_FAULTS]:
            self.mark(period.start, label=f"{period.kind} {period.target}".strip(), css="fault-at")
        periods = [p for p in periods if fields(p.start).get("kind") not in INSTANT_FAULTS]
        tracks = pack([(time_of(p.start), self._end(p.end)) for p in periods])
        lane = self.lanes["fault"]
        lane.rows = max(tracks, default=0) + 1
        lane.row_titles = ["faults"] + [""] * (lane.rows - 1)
        for period, track in zip(periods, tracks, strict=True):
            value = fields(period.start)
            label = f"{period.kind} {period.target}".strip()
            records = (period.start.index,) + (() if period.end is None else (period.end.index,))
            params = {k: v for k, v in sorted(value.items()) if k not in ("id", "kind", "target")}
            tip = f"fault {label}" + (f" {params}" if params else "")
            self.add(
                Shape(
                    "fault",
                    track,
                    time_of(period.start),
                    self._end(period.end),
                    "bar",
                    "fault",
                    label=label,
                    tip=tip,
                    records=records,
                )
            )
            self.shades.append(
                Shade(
                    time_of(period.start),
                    self._end(period.end),
                    self._affected(period.target),
                    label,
                    records,
                )
            )

    def _affected(self, target: str) -> tuple[str, ...]:
        """The lanes a fault target names; () means every lane."""
        if not target or target in EVERY_TARGET:
            return ()
        for lane in (target, f"agent:{target}", f"client:{target}"):
            if lane in self.lanes:
                return (lane, "fault")
        named = [
            lane
            for lane in sorted(self.lanes, key=lane_order)
            if lane != "fault" and lane in target
        ]
        return (*named, "fault") if named else ()

    def runner(self) -> None:
        for record in self.by_process.get("runner", []):
            value = fields(record)
            if record.f == "step":
                label = str(value.get("name") or value.get("index") or "step")
                self.mark(record, label=label, css="step")
            elif record.f in ("expect_failed", "assert_failed"):
                self.mark(record, label=record.f, css="bad")
            elif record.f == "final_file":
                exists = "" if value.get("exists") else " (absent)"
                self.mark(record, label=f"{value.get('path')}{exists}", css="final")
            else:
                self.mark(record, label=record.f, bulk=True)

    def others(self) -> None:
        for process, records in sorted(self.by_process.items()):
            if lane_order(process)[0] == 5:
                for record in records:
                    self.mark(record, label=record.f, bulk=True)


def _agents_by_connection(records: list[Record]) -> dict[str, str]:
    """Hub connection id → agent name: from the agent's own `connected`, else
    from the machine a hub event names when only one agent runs on it."""
    names: dict[str, str] = {}
    on_machine: dict[str, set[str]] = defaultdict(set)
    for record in records:
        if not is_agent(record.process):
            continue
        name = record.process.split(":", 1)[1]
        if isinstance(record.machine, str):
            on_machine[record.machine].add(name)
        conn = text(fields(record).get("conn"))
        if record.f == "connected" and conn:
            names.setdefault(conn, name)
    for record in records:
        conn = text(fields(record).get("conn"))
        agents = on_machine.get(record.machine) if isinstance(record.machine, str) else None
        if record.process == "hub" and conn and conn not in names and agents and len(agents) == 1:
            names[conn] = next(iter(agents))
    return names


def _hub_down(records: list[Record], end: float) -> list[tuple[Record, Record | None]]:
    """When the hub process was down: from killed/exited to the next start."""
    periods: list[tuple[Record, Record | None]] = []
    down: Record | None = None
    for record in records:
        if not is_event(record):
            continue
        if record.f in ("killed", "exited") and down is None:
            down = record
        elif record.f == "started" and down is not None:
            periods.append((down, record))
            down = None
    if down is not None:
        periods.append((down, None))
    return periods


def _fold_bulk(shapes: list[Shape], start: float, end: float, flagged: set[int]) -> list[Shape]:
    """Replace a lane's routine shapes by a density strip when there are too many."""
    routine: dict[str, list[Shape]] = defaultdict(list)
    for shape in shapes:
        if shape.bulk and not flagged.intersection(shape.records):
            routine[shape.lane].append(shape)
    crowded = {lane for lane, found in routine.items() if len(found) > BULK_LIMIT}
    if not crowded:
        return shapes
    kept = [
        s
        for s in shapes
        if not (s.lane in crowded and s.bulk and not flagged.intersection(s.records))
    ]
    width = (end - start) / DENSITY_BINS
    for lane in sorted(crowded):
        counts: dict[tuple[str, int], int] = defaultdict(int)
        for shape in routine[lane]:
            column = min(int((shape.start - start) / width), DENSITY_BINS - 1)
            counts[(shape.css, column)] += 1
        peak = max(counts.values())
        for (css, column), count in sorted(counts.items()):
            begin = start + column * width
            kept.append(
                replace(
                    Shape(lane, 0, begin, begin + width, "density", f"density {css}"),
                    weight=count / peak,
                    tip=f"{count} × {css} between {begin:.2f} s and {begin + width:.2f} s",
                )
            )
    return kept
