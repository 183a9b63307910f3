"""timeline.html: well-formed, self-contained, lanes drawn, failures pinned, stable."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tetherbed.simulator.checkers import Verdict, run_checkers
from tetherbed.simulator.history import History
from tetherbed.simulator.reports.timeline.model import BULK_LIMIT, build_timeline, pack
from tetherbed.simulator.reports.timeline.render import render_timeline, write_timeline

VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "wbr", "source"}


class TagBalance(HTMLParser):
    """Fails on a closing tag that does not match the open one."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        pass

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()


def scenario() -> History:
    """Two machines fighting over s1 (silent takeover), a partition, a lost answer."""
    h = History()

    def e(t: float, process: str, f: str, session: str | None = "s1", **value: object) -> int:
        return h.append(t, process, "event", f, value, session=session).index

    e(0, "hub", "started", None)
    e(0, "runner", "step", None, index=0, name="start", detail="")
    e(0.1, "agent:a", "started")
    e(0.2, "agent:a", "attempt", attempt=1)
    e(0.3, "hub", "ack", conn="c1", control=False)
    e(0.3, "agent:a", "connected", conn="c1")
    e(2, "fault", "fault_start", None, kind="partition", target="a", direction="both")
    e(4, "hub", "pong_timeout", conn="c1")
    e(4, "agent:a", "lost", code=1006, handshake=True)
    e(4, "agent:a", "backoff", attempt=0, delay=1.5)
    e(5, "fault", "fault_stop", None, kind="partition", target="a")
    e(5.5, "agent:a", "attempt", attempt=2)
    e(5.6, "hub", "ack", conn="c2", control=False)
    e(5.6, "agent:a", "connected", conn="c2")
    e(6, "agent:b", "attempt", attempt=1)
    e(6.1, "hub", "takeover", old="c2", new="c3", silent=True)
    e(6.1, "hub", "ack", conn="c3", control=False)
    e(6.1, "agent:b", "connected", conn="c3")
    e(6.5, "agent:b", "paused")
    e(7.5, "agent:b", "resumed")
    payload = {"path": "a.txt", "content": "</script><!--"}
    h.append(
        7,
        "client:alice",
        "invoke",
        "FILE_WRITE",
        {"payload": payload, "digest": "d1"},
        session="s1",
        req="r1",
    )
    e(7.1, "agent:a", "exec", kind="FILE_WRITE", request_id="h1", digest="d1")
    h.append(7.2, "client:alice", "ok", "FILE_WRITE", {"type": "ACK"}, session="s1", req="r1")
    h.append(
        8,
        "client:bob",
        "invoke",
        "EXECUTE_COMMAND",
        {"payload": {"command": "make"}, "digest": "d2"},
        session="s1",
        req="r1",
    )
    e(9, "runner", "final_file", path="a.txt", exists=False, content=None)
    return h


def test_the_page_is_well_formed_and_self_contained() -> None:
    history = scenario()
    page = render_timeline(history, run_checkers(history), "silent <takeover>")
    checker = TagBalance()
    checker.feed(page)
    checker.close()
    assert checker.errors == [] and checker.stack == []
    for svg_id in ("tb-names", "tb-plot"):
        svg = re.search(rf'<svg id="{svg_id}".*?</svg>', page, re.S)
        assert svg is not None
        ET.fromstring(svg.group(0))  # valid XML, so valid inline SVG
    assert "<title>silent &lt;takeover&gt;</title>" in page
    assert "<link" not in page and " src=" not in page
    urls = set(re.findall(r"https?://[^\"' )]+", page))
    assert urls == {"http://www.w3.org/2000/svg"}
    records_block = page.split('id="tb-records">')[1].split("</script>")[0]
    assert "</script>" not in records_block and "<!--" not in records_block


def lane_names(page: str) -> list[str]:
    names = re.search(r'<svg id="tb-names".*?</svg>', page, re.S).group(0)
    return re.findall(r'class="lane-name"[^>]*>([^<]+)<', names)


def test_lanes_in_order() -> None:
    history = scenario()
    page = render_timeline(history, [], "t")
    assert lane_names(page) == [
        "hub",
        "agent:a",
        "agent:b",
        "client:alice",
        "client:bob",
        "fault",
        "runner",
    ]
    assert "owner s1 (2nd owner!)" in page  # the silent takeover's overlap


def test_failing_checkers_are_pinned_in_red_with_their_names() -> None:
    history = scenario()
    verdicts = run_checkers(history)
    failing = {v.name for v in verdicts if not v.ok}
    assert {"single_owner", "exactly_one_answer", "file_contents"} <= failing
    page = render_timeline(history, verdicts, "t", scenario="takeover", backend="sim", seed=3)
    assert 'class="badge fail"' in page and "scenario <b>takeover</b>" in page
    plot = re.search(r'<svg id="tb-plot".*?</svg>', page, re.S).group(0)
    for verdict in verdicts:
        for index in verdict.evidence_indexes():
            assert re.search(rf'class="pin"[^>]*data-r="{index}"', plot), index
            assert f'data-goto="{index}"' in page
    assert "single_owner" in plot  # the pin labels
    flagged = re.findall(r'class="[^"]*flagged[^"]*"[^>]*data-r="([^"]+)"', plot)
    blamed = {i for v in verdicts for i in v.evidence_indexes()}
    assert flagged and all(set(map(int, f.split())) & blamed for f in flagged)
    assert "✘ FAIL" in page and "✔ pass" in page


def test_operations_faults_and_pauses_are_drawn() -> None:
    history = scenario()
    model = build_timeline(history, [])
    kinds = {(s.lane, s.css) for s in model.shapes}
    assert ("client:alice", "op ok") in kinds
    assert ("client:bob", "op missing") in kinds and ("client:bob", "op-missing") in kinds
    assert ("agent:a", "backoff") in kinds and ("agent:a", "exec") in kinds
    assert ("agent:b", "paused") in kinds
    assert any(s.css.startswith("takeover silent") for s in model.shapes)
    [shade] = model.shades
    assert shade.lanes == ("agent:a", "fault") and (shade.start, shade.end) == (2, 5)
    page = render_timeline(history, [], "t")
    plot = re.search(r'<svg id="tb-plot".*?</svg>', page, re.S).group(0)
    assert plot.count('class="shade"') == 2  # agent:a's lane and the fault lane


def test_identical_histories_give_identical_pages(tmp_path: Path) -> None:
    history = scenario()
    verdicts = run_checkers(history)
    history.write(tmp_path / "history.jsonl")
    again = History.read(tmp_path / "history.jsonl")
    write_timeline(tmp_path / "a.html", history, verdicts, "t")
    write_timeline(tmp_path / "b.html", again, run_checkers(again), "t")
    assert (tmp_path / "a.html").read_bytes() == (tmp_path / "b.html").read_bytes()


def test_an_empty_history_still_renders() -> None:
    page = render_timeline(History(), [], "nothing happened")
    assert "no checkers ran" in page and 'class="badge pass"' in page
    ET.fromstring(re.search(r'<svg id="tb-plot".*?</svg>', page, re.S).group(0))


def test_ten_thousand_records_stay_readable() -> None:
    h = History()
    h.append(0, "hub", "event", "ack", {"conn": "c1", "control": False}, session="s1")
    h.append(0, "agent:a", "event", "connected", {"conn": "c1"}, session="s1")
    for n in range(3400):
        t = n * 0.1
        req = f"r{n}"
        value = {"payload": {"path": f"f{n % 7}.txt"}, "digest": f"d{n}"}
        h.append(t, "client:alice", "invoke", "FILE_READ", value, session="s1", req=req)
        h.append(
            t + 0.01,
            "agent:a",
            "event",
            "exec",
            {"kind": "FILE_READ", "digest": f"d{n}"},
            session="s1",
        )
        outcome = "fail" if n % 500 == 0 else "ok"
        h.append(
            t + 0.05, "client:alice", outcome, "FILE_READ", {"type": "X"}, session="s1", req=req
        )
    lost = h.append(400, "client:alice", "invoke", "FILE_READ", {}, session="s1", req="lost")
    assert len(h) > 10_000
    verdicts = [Verdict("exactly_one_answer", False, "lost", [lost.to_dict()])]
    started = time.perf_counter()
    page = render_timeline(h, verdicts, "big")
    assert time.perf_counter() - started < 10
    model = build_timeline(h, verdicts)
    per_lane: dict[str, int] = {}
    for shape in model.shapes:
        per_lane[shape.lane] = per_lane.get(shape.lane, 0) + 1
    assert max(per_lane.values()) < BULK_LIMIT * 2
    assert any(s.kind == "density" for s in model.shapes)
    assert sum(1 for s in model.shapes if s.css == "op fail") == 7  # unusual: kept
    assert re.search(rf'class="pin"[^>]*data-r="{lost.index}"', page)
    assert len(page) < 8_000_000


def test_pack_never_overlaps_within_a_track() -> None:
    spans = [(0, 5), (1, 2), (2, 3), (4, 9), (5, 6), (0, 10)]
    tracks = pack(spans)
    for a, (s1, e1) in enumerate(spans):
        for b, (s2, e2) in enumerate(spans):
            if a < b and tracks[a] == tracks[b]:
                assert e1 <= s2 or e2 <= s1
    crowded = pack([(0, 1)] * 20, limit=3)
    assert crowded[:3] == [0, 1, 2] and set(crowded) == {0, 1, 2}


PROBE = """<script>
window.addEventListener('load', () => {
  const out = {};
  const plot = document.getElementById('tb-plot');
  out.before = +plot.getAttribute('width');
  document.querySelector('[data-zoom="2"]').click();
  out.zoomed = +plot.getAttribute('width');
  document.querySelector('[data-zoom="fit"]').click();
  out.fit = +plot.getAttribute('width');
  const row = document.querySelector('[data-goto]');
  row.click();
  out.pulsed = plot.querySelectorAll('.pulse').length;
  const shape = plot.querySelector('rect[data-r]');
  shape.dispatchEvent(new MouseEvent('mouseover', {bubbles: true, clientX: 5, clientY: 5}));
  out.tip = document.getElementById('tb-tip').textContent;
  out.ticks = document.querySelectorAll('#tb-axis .tick-label').length;
  document.title = 'PROBE' + JSON.stringify(out);
});
</script>"""


def test_the_script_zooms_locates_and_explains(tmp_path: Path) -> None:
    """Runs the page's script in headless Chromium (`make test` installs it)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.fail("Chromium is needed to run the page's script: install the Debian package")
    history = scenario()
    page = render_timeline(history, run_checkers(history), "t")
    path = tmp_path / "timeline.html"
    path.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    done = subprocess.run(
        [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--dump-dom",
            "--window-size=1200,800",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r"<title>PROBE(.*?)</title>", done.stdout)
    assert found, done.stderr[-2000:]
    out = json.loads(
        found.group(1)
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", '"')
    )
    assert out["zoomed"] > out["before"] > 0
    assert 0 < out["fit"] <= 1200
    assert out["pulsed"] >= 1
    assert '"process":' in out["tip"] or '"process": ' in out["tip"]
    assert out["ticks"] >= 2


# --- readable without hovering ----------------------------------------------------


def fight() -> History:
    """laptop-b's agent is refused (4427) while laptop-a owns s1; a reset; the hub is killed."""
    h = History()

    def e(t: float, process: str, f: str, machine: str | None = None, **value: object) -> None:
        h.append(t, process, "event", f, value, session="s1", machine=machine)

    e(0, "hub", "started")
    e(0.1, "agent:laptop-a", "attempt", "laptop-a", attempt=0)
    e(0.2, "hub", "hello", "laptop-a", conn="c1")
    e(0.2, "hub", "ack", "laptop-a", conn="c1", control=False)
    e(0.2, "agent:laptop-a", "connected", "laptop-a", conn="c1")
    e(1.0, "agent:laptop-b", "attempt", "laptop-b", attempt=0)
    e(1.1, "hub", "hello", "laptop-b", conn="c2")
    e(1.1, "hub", "takeover_rejected", "laptop-b", conn="c2", owner="c1")
    e(1.1, "agent:laptop-b", "fatal_close", "laptop-b", code=4427)
    e(
        1.1,
        "agent:laptop-b",
        "stop",
        "laptop-b",
        exit_code=27,
        reason="session taken over (another machine owns it)",
    )
    e(1.2, "agent:laptop-b", "exited", "laptop-b", code=27)
    e(2.0, "fault", "fault_start", kind="reset", target="laptop-a")
    e(2.0, "agent:laptop-a", "lost", "laptop-a", code=None, handshake=True)
    e(2.5, "agent:laptop-a", "attempt", "laptop-a", attempt=0)
    e(2.6, "hub", "ack", "laptop-a", conn="c3", control=False)
    e(2.6, "agent:laptop-a", "connected", "laptop-a", conn="c3")
    e(4.0, "hub", "killed")
    e(9.0, "fault", "fault_stop", kind="faults", target="all")
    e(10.0, "runner", "note", text="the end")
    return h


def labels_of(timeline, lane: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [s.label for s in timeline.shapes if s.lane == lane and s.label]


def test_owners_are_labelled_with_agent_names_not_connection_ids() -> None:
    timeline = build_timeline(fight(), [])
    owners = [s for s in timeline.shapes if s.lane == "hub" and s.css.startswith("owner")]
    assert [s.label for s in owners] == ["laptop-a (c1)", "laptop-a (c3)"]
    hub_labels = labels_of(timeline, "hub")
    assert any("laptop-b" in label and "4427" in label for label in hub_labels), hub_labels


def test_exit_codes_and_refusals_are_labelled_and_always_shown() -> None:
    timeline = build_timeline(fight(), [])
    agent = labels_of(timeline, "agent:laptop-b")
    assert "fatal 4427" in agent and "exit 27" in agent
    assert any(label.startswith("stop 27: session taken over") for label in agent)
    kept = [s for s in timeline.shapes if s.keep]
    assert {s.label for s in kept} >= {"fatal 4427", "exit 27"}
    page = render_timeline(fight(), [], "fight")
    for text in ("exit 27", "fatal 4427", "stop 27: session taken over"):
        (element,) = re.findall(rf'<text class="([^"]*)"[^>]*>{re.escape(text)}[^<]*<', page)
        assert "hid" not in element.split(), text


def test_a_killed_hub_is_drawn_down_and_ends_its_owners() -> None:
    timeline = build_timeline(fight(), [])
    (down,) = [s for s in timeline.shapes if s.lane == "hub" and s.css == "hub-down"]
    assert (down.start, down.end) == (4.0, timeline.end)
    assert "down" in down.label
    last_owner = [s for s in timeline.shapes if s.lane == "hub" and s.css.startswith("owner")][-1]
    assert last_owner.end == 4.0


def test_an_instant_fault_is_a_point_not_a_period() -> None:
    timeline = build_timeline(fight(), [])
    (reset,) = [s for s in timeline.shapes if s.lane == "fault" and "reset" in s.label]
    assert reset.kind == "mark" and reset.start == reset.end == 2.0
    assert not [shade for shade in timeline.shades if "reset" in shade.label]
