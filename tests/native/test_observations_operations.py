"""Observation store and coordinate mapping; the operation cache; planning; session rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tetherbed.agent.native.actions import Drag, Pointer, TypeText, plan
from tetherbed.agent.native.errors import Code, NativeError
from tetherbed.agent.native.observations import ObservationStore, Rect
from tetherbed.agent.native.operations import OperationCache
from tetherbed.agent.native.session import Session


def make(store: ObservationStore, now: float = 0.0, *, generation: int = 1):
    return store.create(
        generation=generation,
        geometry_epoch=0,
        frame_id=7,
        source_rect=Rect(100, 50, 1920, 1080),
        image_width=960,
        image_height=540,
        now=now,
    )


def code_of(fn) -> Code:
    with pytest.raises(NativeError) as info:
        fn()
    return info.value.code


def test_mapping_scales_and_offsets() -> None:
    obs = make(ObservationStore())
    assert obs.to_display(0, 0) == (101, 51)  # pixel centre of a 2x2 block
    assert obs.to_display(959, 539) == (100 + 1919, 50 + 1079)
    assert code_of(lambda: obs.to_display(960, 0)) is Code.COORDINATE_OUT_OF_RANGE
    assert code_of(lambda: obs.to_display(-1, 0)) is Code.COORDINATE_OUT_OF_RANGE


@given(st.integers(1, 4000), st.integers(1, 4000), st.data())
def test_mapping_stays_inside_the_source(width: int, height: int, data: st.DataObject) -> None:
    store = ObservationStore()
    iw = data.draw(st.integers(1, width))
    ih = data.draw(st.integers(1, height))
    obs = store.create(
        generation=1,
        geometry_epoch=0,
        frame_id=1,
        source_rect=Rect(10, 20, width, height),
        image_width=iw,
        image_height=ih,
        now=0,
    )
    x = data.draw(st.floats(0, iw, exclude_max=True))
    y = data.draw(st.floats(0, ih, exclude_max=True))
    dx, dy = obs.to_display(x, y)
    assert 10 <= dx < 10 + width and 20 <= dy < 20 + height


def test_expiry_capacity_and_staleness() -> None:
    store = ObservationStore()
    first = make(store)
    get = lambda oid, now=1.0, generation=1, epoch=0: store.get(  # noqa: E731
        oid, generation=generation, geometry_epoch=epoch, now=now
    )
    assert get(first.id) is first
    assert code_of(lambda: get(first.id, epoch=1)) is Code.OBSERVATION_STALE
    assert code_of(lambda: get(first.id, generation=2)) is Code.OBSERVATION_STALE
    assert code_of(lambda: get(first.id, now=30.0)) is Code.OBSERVATION_EXPIRED
    store = ObservationStore()
    ids = [make(store, now=i * 0.01).id for i in range(33)]
    assert len(store) == 32
    assert code_of(lambda: get(ids[0])) is Code.OBSERVATION_EXPIRED
    assert get(ids[-1]).id == ids[-1]
    assert code_of(lambda: get("obs_1_999")) is Code.OBSERVATION_NOT_FOUND
    assert code_of(lambda: get("nonsense")) is Code.OBSERVATION_NOT_FOUND
    store.invalidate()
    assert code_of(lambda: get(ids[-1], generation=2)) is Code.OBSERVATION_STALE


def test_operation_cache_conflict_retention_and_capacity() -> None:
    cache = OperationCache()
    args = {"observation_id": "obs_1_1", "action": {"type": "move", "x": 1, "y": 2}}
    assert cache.lookup("a", args, 0) is None
    entry = cache.start("a", args, 0)
    reordered = {"action": {"y": 2, "x": 1, "type": "move"}, "observation_id": "obs_1_1"}
    assert cache.lookup("a", reordered, 1) is entry  # key order does not matter
    changed = {**args, "action": {"type": "move", "x": 1, "y": 3}}
    assert code_of(lambda: cache.lookup("a", changed, 1)) is Code.OPERATION_CONFLICT
    cache.finish(entry, {"status": "submitted"})
    for i in range(127):
        cache.finish(cache.start(f"op{i}", args, 10), {"status": "submitted"})
    assert len(cache) == 128
    assert code_of(lambda: cache.start("new", args, 299)) is Code.OPERATION_CACHE_FULL
    cache.start("new", args, 300.5)  # "a" is older than five minutes: removable now
    assert cache.lookup("a", changed, 301) is None
    assert len(cache) == 128


def test_plan_drag_is_timed_by_wait_steps() -> None:
    ident = lambda x, y: (int(x), int(y))  # noqa: E731
    steps = plan(Drag(((0, 0), (10, 0), (10, 10)), 400), ident)
    assert [s.op for s in steps] == ["move", "down", "wait", "move", "wait", "move", "up"]
    assert sum(s.seconds for s in steps) == pytest.approx(0.4)
    assert plan(Pointer("double_click", 3, 4, "right"), ident)[0].count == 2
    chunks = plan(TypeText("x" * 70), ident)
    assert "".join(s.text for s in chunks) == "x" * 70 and len(chunks) == 3


def test_session_rules() -> None:
    session = Session()
    assert code_of(session.require_connected) is Code.NOT_CONNECTED
    session.begin(device="1" * 9, mode="observe", display=0, decode_path="browser", decoder="auto")
    assert code_of(lambda: session.begin(
        device="1" * 9, mode="observe", display=0, decode_path="browser", decoder="auto"
    )) is Code.ALREADY_CONNECTED  # fmt: skip
    assert code_of(lambda: session.set_control(True)) is Code.CONTROL_DENIED
    assert session.state == "connecting"
    session.frame_arrived(session.generation)
    assert session.state == "ready"
    generation = session.change_display(0)
    assert generation == 2 and session.state == "connecting"
    session.frame_arrived(1)  # an old generation's frame does not make it ready
    assert session.state == "connecting"
    control = Session()
    control.begin(device="1" * 9, mode="control", display=0, decode_path="browser", decoder="auto")
    assert control.control_allowed
    control.pause()
    assert not control.control_allowed
    assert code_of(control.require_control) is Code.HUMAN_PAUSED
    assert code_of(lambda: control.set_control(True)) is Code.HUMAN_PAUSED
    control.resume()
    control.set_control(False)
    assert code_of(control.require_control) is Code.CONTROL_DENIED
