// The dashboard's stylesheet and script, compiled in: poold serves them from memory and
// fetches nothing from the internet. The script only adds to pages that read fine without
// it: the overview's live table and charts (polling /api/v1/stats once a second) and the
// events page's live stream (Server-Sent Events). It writes task values with textContent,
// never as HTML.
#include "http/dashboard.hpp"

namespace sandpool::http {

const char* const kDashboardCss = R"CSS(
:root { --fg: #1d232a; --muted: #66707a; --line: #d8dde3; --accent: #2563eb; --bad: #b91c1c;
        --bg: #fbfcfd; font-family: system-ui, sans-serif; font-size: 15px; }
body { margin: 0; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1.5em; align-items: center; padding: .6em 1.2em;
         background: #111827; color: #e5e7eb; }
header a { color: #e5e7eb; text-decoration: none; margin-right: 1em; }
header .brand { font-weight: 700; }
header .who { margin-left: auto; font-size: .9em; }
header button { font-size: .85em; }
main { padding: 1em 1.2em; }
h1 { font-size: 1.4em; margin: .2em 0 .6em; }
h2 { font-size: 1.1em; margin-top: 1.4em; }
table.grid { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
table.grid th, table.grid td { border-bottom: 1px solid var(--line); padding: .3em .5em;
                               text-align: left; vertical-align: top; }
table.grid th { font-weight: 600; color: var(--muted); }
.muted { color: var(--muted); }
.notice { background: #fef3c7; padding: .5em 1.2em; margin: 0; }
.flash { background: #dbeafe; padding: .5em 1.2em; margin: 0; }
.error { color: var(--bad); }
.danger { color: var(--bad); }
form.inline { display: inline-block; margin: 0 .3em .3em 0; }
.actions { margin: .6em 0; }
.filters label, form.inline label { margin-right: .8em; }
form.stack { display: grid; gap: .6em; max-width: 28em; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dl.facts dt { color: var(--muted); }
pre { background: #f1f5f9; padding: .6em; overflow: auto; max-height: 24em; white-space: pre-wrap; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
.charts h2 { width: 100%; }
.charts figure { margin: 0; border: 1px solid var(--line); padding: .4em; background: #fff; }
.charts figcaption { font-size: .85em; color: var(--muted); }
)CSS";

const char* const kDashboardJs = R"JS(
'use strict';
(function () {
  const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#4b5563'];
  const KEEP = 300;  // points: five minutes at one a second

  function draw(canvas, series) {
    const ctx = canvas.getContext('2d');
    const w = canvas.width, h = canvas.height;
    ctx.clearRect(0, 0, w, h);
    let max = 1;
    for (const s of series) for (const v of s.values) if (v > max) max = v;
    ctx.fillStyle = '#66707a';
    ctx.font = '11px sans-serif';
    ctx.fillText(max.toFixed(max < 10 ? 1 : 0), 2, 11);
    // The first minute fills the width; after it the chart scrolls over the last five.
    let span = 60;
    for (const s of series) span = Math.max(span, s.values.length);
    series.forEach((s, i) => {
      ctx.strokeStyle = s.color || COLORS[i % COLORS.length];
      ctx.setLineDash(s.dashed ? [4, 3] : []);
      ctx.beginPath();
      s.values.forEach((v, x) => {
        const px = w - (s.values.length - 1 - x) * (w / (span - 1));
        const py = h - 2 - (v / max) * (h - 16);
        if (x === 0) ctx.moveTo(px, py); else ctx.lineTo(px, py);
      });
      ctx.stroke();
    });
  }

  function overview() {
    const table = document.getElementById('pools');
    if (!table) return;
    const charts = document.getElementById('charts');
    const hist = {};  // pool -> {throughput, p50, p99, queue, restarts}
    let last = null;
    function push(arr, v) { arr.push(v); if (arr.length > KEEP) arr.shift(); }
    async function poll() {
      try {
        const r = await fetch('/api/v1/stats', {credentials: 'same-origin'});
        if (!r.ok) return;
        const body = await r.json();
        const now = Date.now();
        for (const p of body.pools) {
          const row = table.querySelector('tr[data-pool="' + CSS.escape(p.name) + '"]');
          if (row) {
            const set = (k, v) => { const c = row.querySelector('[data-k=' + k + ']'); if (c) c.textContent = v; };
            set('state', p.state + (p.crash_loop ? ' (crash loop)' : ''));
            set('workers', p.workers + '/' + p.target_workers);
            set('queued', p.queued);
            set('in_flight', p.in_flight);
            set('completed', p.completed);
            set('dead_lettered', p.dead_lettered);
            set('restarts', p.restarts);
            set('p50', p.latency_ms.p50 == null ? '-' : p.latency_ms.p50.toFixed(1));
            set('p99', p.latency_ms.p99 == null ? '-' : p.latency_ms.p99.toFixed(1));
          }
          const h = hist[p.name] || (hist[p.name] = {throughput: [], p50: [], p99: [], queue: [], restarts: []});
          const prev = last && last.pools[p.name];
          const dt = last ? (now - last.time) / 1000 : 0;
          push(h.throughput, prev && dt > 0 ? Math.max(0, (p.completed - prev.completed) / dt) : 0);
          push(h.restarts, prev ? Math.max(0, p.restarts - prev.restarts) : 0);
          push(h.p50, p.latency_ms.p50 || 0);
          push(h.p99, p.latency_ms.p99 || 0);
          push(h.queue, p.queued);
        }
        last = {time: now, pools: Object.fromEntries(body.pools.map(p => [p.name, p]))};
        const names = Object.keys(hist);
        const pick = k => names.map(n => ({values: hist[n][k]}));
        draw(document.getElementById('chart-throughput'), pick('throughput'));
        draw(document.getElementById('chart-latency'),
             names.flatMap((n, i) => [{values: hist[n].p50, color: COLORS[i % COLORS.length]},
                                      {values: hist[n].p99, color: COLORS[i % COLORS.length], dashed: true}]));
        draw(document.getElementById('chart-queue'), pick('queue'));
        draw(document.getElementById('chart-restarts'), pick('restarts'));
        const legend = document.getElementById('legend');
        legend.textContent = '';
        names.forEach((n, i) => {
          const span = document.createElement('span');
          span.style.color = COLORS[i % COLORS.length];
          span.textContent = '■ ' + n + '  ';
          legend.appendChild(span);
        });
        charts.hidden = false;
      } catch (e) {
        // poold restarting: the next poll tries again
      }
    }
    poll();
    setInterval(poll, 1000);
  }

  function events() {
    const table = document.getElementById('events');
    if (!table || !window.EventSource) return;
    const pool = table.dataset.pool;
    const body = table.tBodies[0];
    const src = new EventSource('/api/v1/events' + (pool ? '?pool=' + encodeURIComponent(pool) : ''));
    const note = document.getElementById('live-note');
    src.onopen = () => { note.textContent = 'Live: new events appear at the top.'; };
    src.onmessage = (m) => {
      let e;
      try { e = JSON.parse(m.data); } catch (err) { return; }
      const tr = document.createElement('tr');
      const cells = [new Date(e.time_ms).toISOString().replace('T', ' ').slice(0, 19), e.pool,
                     e.event, e.pid == null ? '' : e.pid, e.task_id == null ? '' : e.task_id,
                     e.outcome || e.state || '', e.reason || e.detail || ''];
      for (const c of cells) {
        const td = document.createElement('td');
        td.textContent = String(c);
        tr.appendChild(td);
      }
      body.insertBefore(tr, body.firstChild);
      while (body.rows.length > 500) body.deleteRow(body.rows.length - 1);
    };
    src.addEventListener('end', () => src.close());
  }

  overview();
  events();
})();
)JS";

}  // namespace sandpool::http
