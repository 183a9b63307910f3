"""The timeline page's inline style and script: no network, no libraries.

The script only adds zoom, tooltips and "locate this evidence"; its layout
rule for labels mirrors timeline_svg so the zoomed page looks like the
initial one.
"""

from __future__ import annotations

CSS = """
:root { font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232b; }
body { margin: 0; background: #fff; }
header { padding: 12px 16px 4px; }
h1 { font-size: 18px; margin: 0 0 4px; }
h3 { font-size: 13px; margin: 10px 0 4px; }
.badge { font-size: 12px; padding: 2px 8px; border-radius: 10px; color: #fff;
  vertical-align: middle; text-transform: uppercase; letter-spacing: .04em; }
.badge.pass { background: #2e7d32; } .badge.fail { background: #c62828; }
.badge.error { background: #6a1b9a; } .badge.not_applicable { background: #9e9d24; }
.meta { margin: 0 0 8px; color: #555; }
table { border-collapse: collapse; }
td, th { padding: 2px 8px; text-align: left; vertical-align: top; }
table.checkers td.ok { color: #2e7d32; font-weight: 600; white-space: nowrap; }
table.checkers td.bad { color: #c62828; font-weight: 600; white-space: nowrap; }
table.checkers td.unknown { color: #8d6e00; font-weight: 600; white-space: nowrap; }
table.checkers td:nth-child(2) { white-space: nowrap; }
.evidence-box { max-height: 38vh; overflow: auto; border: 1px solid #eee; padding: 0 8px 8px; }
table.evidence tr.why td { background: #fdecea; color: #8e1c1c; font-weight: 600; cursor: default; }
table.evidence { font-size: 12px; }
table.evidence tr { cursor: pointer; }
table.evidence tr:hover { background: #fdecea; }
table.evidence th { background: #f3f3f3; }
code { font: 11px/1.3 ui-monospace, Menlo, Consolas, monospace; }
.controls { padding: 4px 16px; color: #666; font-size: 12px; }
.controls button { font: inherit; min-width: 32px; margin-right: 4px; }
#tb-scroll { display: flex; overflow: auto; border-top: 1px solid #ddd;
  border-bottom: 1px solid #ddd; max-height: 78vh; }
#tb-names { position: sticky; left: 0; z-index: 2; flex: none; background: #fff;
  border-right: 1px solid #ccc; }
#tb-plot { flex: none; }
.lane-a { fill: #ffffff; } .lane-b { fill: #f6f8fa; }
.lane-name { font-weight: 600; font-size: 12px; fill: #1d232b; }
.row-name { font-size: 11px; fill: #666; }
.grid { stroke: #e3e6ea; stroke-width: 1; }
.tick-label { font-size: 11px; fill: #666; text-anchor: middle; }
.lbl { font-size: 11px; fill: #1d232b; pointer-events: none; }
.lbl.bad { fill: #c62828; font-weight: 600; }
.lbl.hid { display: none; }
.pin-lbl { fill: #c62828; font-weight: 700; font-size: 10px; }
.conn.handshake { fill: #b8d4f0; } .conn.up { fill: #3b7dd8; }
.conn.failed { fill: #d5d5d5; stroke: #9a9a9a; stroke-width: .5; }
.conn.open { opacity: .75; }
.backoff { fill: #f0a030; }
.exec { fill: #1d232b; }
.owner { stroke: #0003; stroke-width: .5; } .owner.open { opacity: .8; }
.p0 { fill: #4e79a7; } .p1 { fill: #59a14f; } .p2 { fill: #b07aa1; } .p3 { fill: #76b7b2; }
.p4 { fill: #edc948; } .p5 { fill: #ff9da7; } .p6 { fill: #9c755f; } .p7 { fill: #bab0ac; }
.op.ok { fill: #43a047; } .op.fail { fill: #9e9e9e; } .op.info { fill: #f2b632; }
.op.missing { fill: url(#tb-missing); stroke: #c62828; stroke-dasharray: 3 2; }
.missing-line { fill: #f3b1ad; }
.op-missing .glyph, .stray .glyph { fill: #c62828; font-weight: 700; }
.fault { fill: #7e57c2; } .fault-at .glyph { fill: #7e57c2; font-weight: 700; }
.hub-down { fill: #bdbdbd; } .down { fill: url(#tb-hatch); opacity: .6; }
.shade { fill: #7e57c2; opacity: .13; }
.paused { fill: url(#tb-hatch); }
.hatch-line { fill: #8a8f98; opacity: .35; }
.density { opacity: .8; }
.density.op { fill: #43a047; } .density.exec { fill: #1d232b; } .density.ev { fill: #888; }
.mark .hit { fill: transparent; }
.glyph { font-size: 12px; text-anchor: middle; fill: #444; }
.ev-started .glyph { fill: #2e7d32; } .ev-killed .glyph, .ev-fatal_close .glyph { fill: #c62828; }
.ev-exited .glyph, .ev-stop .glyph { fill: #555; } .ev-paused .glyph { fill: #6d6d6d; }
.ev-revoked .glyph, .ev-revoke .glyph { fill: #ad1457; }
.ev-takeover_rejected .glyph, .ev-refused .glyph { fill: #d84315; }
.takeover .glyph { fill: #37474f; font-size: 14px; }
.takeover.silent .glyph { fill: #e8590c; }
.takeover-arrow line { stroke: #37474f; stroke-width: 1.5; }
.takeover-arrow.silent line { stroke: #e8590c; stroke-dasharray: 3 2; }
#tb-arrow path { fill: #37474f; }
.step .glyph { fill: #455a64; } .bad .glyph { fill: #c62828; } .final .glyph { fill: #00796b; }
.flagged { stroke: #d50000 !important; stroke-width: 2 !important; }
.mark.flagged .glyph { fill: #d50000; }
.pin line { stroke: #d50000; stroke-width: 2; } .pin path { fill: #d50000; }
.pulse { animation: tb-pulse 1.6s ease-out 2; }
@keyframes tb-pulse { 0% { opacity: 1; } 50% { opacity: .15; } 100% { opacity: 1; } }
#tb-tip { position: fixed; z-index: 10; max-width: 560px; max-height: 60vh; overflow: hidden;
  background: #1d232bee; color: #f5f5f5; padding: 6px 8px; border-radius: 4px;
  font: 11px/1.35 ui-monospace, Menlo, Consolas, monospace; white-space: pre-wrap;
  pointer-events: none; }
.legend { padding: 8px 16px 16px; display: flex; flex-wrap: wrap; gap: 6px 18px;
  font-size: 12px; color: #444; }
.legend span { display: inline-flex; align-items: center; gap: 5px; }
"""

JS = """
(() => {
  const plot = document.getElementById('tb-plot');
  const scroller = document.getElementById('tb-scroll');
  const names = document.getElementById('tb-names');
  const tip = document.getElementById('tb-tip');
  if (!plot) return;
  const records = JSON.parse(document.getElementById('tb-records').textContent);
  const T0 = +plot.dataset.start, T1 = +plot.dataset.end, PAD = +plot.dataset.pad;
  const CH = +plot.dataset.char, TICK = +plot.dataset.tick, AXIS = +plot.dataset.axis;
  const RIGHT = +plot.dataset.right;
  const initial = +plot.dataset.scale;
  let scale = initial;
  const X = t => PAD + (t - T0) * scale;
  const fmt = v => String(Math.round(v * 1000) / 1000);
  const niceStep = s => {
    if (s <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(s)));
    for (const f of [1, 2, 5, 10]) if (f * p >= s) return f * p;
    return 10 * p;
  };
  function axis() {
    const g = document.getElementById('tb-axis');
    const h = plot.getAttribute('height');
    const step = niceStep(TICK / scale);
    let html = '';
    for (let n = Math.ceil(T0 / step); n <= Math.floor(T1 / step); n++) {
      const t = n * step, x = fmt(X(t));
      html += `<line class="grid" x1="${x}" x2="${x}" y1="${AXIS - 6}" y2="${h}"/>` +
        `<text class="tick-label" x="${x}" y="${AXIS - 10}">${fmt(t)} s</text>`;
    }
    g.innerHTML = html;
  }
  function layout() {
    const width = fmt(2 * PAD + RIGHT + (T1 - T0) * scale);
    plot.setAttribute('width', width);
    for (const el of plot.querySelectorAll('.band')) el.setAttribute('width', width);
    for (const el of plot.querySelectorAll('[data-t0]')) {
      if (el.tagName === 'text') continue;
      const t0 = +el.dataset.t0, t1 = +el.dataset.t1;
      if (el.tagName === 'rect') {
        el.setAttribute('x', fmt(X(t0)));
        el.setAttribute('width', fmt(Math.max(+el.dataset.minw || 1, (t1 - t0) * scale)));
      } else {
        el.setAttribute('transform', `translate(${fmt(X(t0))},${el.dataset.y})`);
      }
    }
    const rows = new Map();
    for (const el of plot.querySelectorAll('text[data-k]')) {
      if (!rows.has(el.dataset.k)) rows.set(el.dataset.k, []);
      rows.get(el.dataset.k).push(el);
    }
    for (const els of rows.values()) {
      els.sort((a, b) => (+a.dataset.t0 - +b.dataset.t0) || (+a.dataset.t1 - +b.dataset.t1) ||
        (+a.dataset.o - +b.dataset.o) ||
        (a.textContent < b.textContent ? -1 : a.textContent > b.textContent ? 1 : 0));
      const taken = [];
      let last = -Infinity;
      for (const el of els) {  // kept labels (exit codes, refusals): always shown
        if (!el.dataset.keep) continue;
        const pt = el.dataset.kind === 'pt';
        const x = Math.max(X(+el.dataset.t0) + (pt ? 9 : 3), last + 4);
        last = x + el.textContent.length * CH;
        taken.push([x, last]);
        el.classList.remove('hid');
        el.setAttribute('transform', `translate(${fmt(x)},${el.dataset.y})`);
      }
      last = -Infinity;
      for (const el of els) {
        if (el.dataset.keep) continue;
        const w = el.textContent.length * CH, pt = el.dataset.kind === 'pt';
        const x = X(+el.dataset.t0) + (pt ? 9 : 3);
        let ok = x >= last + 4 && taken.every(([a, b]) => x + w + 4 <= a || x >= b + 4);
        if (!pt) ok = ok && (+el.dataset.t1 - +el.dataset.t0) * scale >= w + 6;
        if (ok) last = x + w;
        el.classList.toggle('hid', !ok);
        el.setAttribute('transform', `translate(${fmt(x)},${el.dataset.y})`);
      }
    }
    axis();
  }
  function zoom(how) {
    const side = names ? names.getBoundingClientRect().width : 0;
    const view = scroller.clientWidth - side;
    const centre = T0 + (scroller.scrollLeft + view / 2 - PAD) / scale;
    if (how === 'fit') scale = Math.max(view - 2 * PAD - RIGHT, 50) / Math.max(T1 - T0, 1e-6);
    else if (how === 'reset') scale = initial;
    else scale = Math.min(Math.max(scale * how, 1e-3), 1e5);
    layout();
    scroller.scrollLeft = Math.max(0, X(centre) - view / 2);
  }
  for (const b of document.querySelectorAll('[data-zoom]')) {
    b.addEventListener('click', () => {
      const z = b.dataset.zoom;
      zoom(z === 'fit' || z === 'reset' ? z : +z);
    });
  }
  scroller.addEventListener('wheel', ev => {
    if (!(ev.ctrlKey || ev.metaKey)) return;
    ev.preventDefault();
    zoom(ev.deltaY < 0 ? 1.25 : 0.8);
  }, { passive: false });
  function move(ev) {
    const r = tip.getBoundingClientRect();
    let x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + r.width > innerWidth) x = Math.max(0, ev.clientX - r.width - 14);
    if (y + r.height > innerHeight) y = Math.max(0, innerHeight - r.height - 4);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }
  plot.addEventListener('mouseover', ev => {
    const el = ev.target.closest('[data-tip],[data-r]');
    if (!el || !plot.contains(el)) { tip.hidden = true; return; }
    const ids = (el.dataset.r || '').split(' ').filter(Boolean);
    let text = el.dataset.tip || '';
    for (const id of ids.slice(0, 6)) {
      if (records[id]) text += '\\n' + JSON.stringify(records[id], null, 1);
    }
    if (ids.length > 6) text += `\\n… ${ids.length - 6} more record(s)`;
    tip.textContent = text;
    tip.hidden = false;
    move(ev);
  });
  plot.addEventListener('mousemove', ev => { if (!tip.hidden) move(ev); });
  plot.addEventListener('mouseleave', () => { tip.hidden = true; });
  for (const row of document.querySelectorAll('[data-goto]')) {
    row.addEventListener('click', () => {
      const id = row.dataset.goto;
      const els = plot.querySelectorAll(`[data-r~="${id}"]`);
      for (const el of els) {
        el.classList.remove('pulse');
        void el.getBoundingClientRect();
        el.classList.add('pulse');
      }
      const first = plot.querySelector(`.pin[data-r~="${id}"]`) || els[0];
      if (first) first.scrollIntoView({ behavior: 'smooth', block: 'center', inline: 'center' });
    });
  }
})();
"""
