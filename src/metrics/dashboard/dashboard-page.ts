/**
 * The dashboard: one page, no build step. Charts by uPlot (served from node_modules at
 * /admin/ui/uplot.*), fed by Server-Sent Events from /admin/events. The admin token
 * reaches it as the HttpOnly cookie /admin/login sets (or an Authorization header).
 */
export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>epd-encoder</title>
<link rel="stylesheet" href="/admin/ui/uplot.css">
<style>
  :root { color-scheme: light dark; --fg: #1c2330; --muted: #667085; --card: #f6f7f9; --ok: #1a7f37; --bad: #c62828; }
  @media (prefers-color-scheme: dark) { :root { --fg: #e6e8eb; --muted: #98a2b3; --card: #1d2230; } }
  body { font: 14px/1.4 system-ui, sans-serif; margin: 16px 24px; color: var(--fg); }
  header { display: flex; align-items: baseline; gap: 16px; }
  h1 { font-size: 18px; margin: 0; }
  #status { color: var(--muted); }
  #status.live { color: var(--ok); }
  #status.down { color: var(--bad); }
  .tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 8px; margin: 12px 0; }
  .tile { background: var(--card); border-radius: 6px; padding: 8px 10px; }
  .tile b { display: block; font-size: 20px; font-variant-numeric: tabular-nums; }
  .tile span { color: var(--muted); font-size: 12px; }
  .charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(460px, 1fr)); gap: 12px; }
  .chart { background: var(--card); border-radius: 6px; padding: 8px; }
  .chart h2, section h2 { font-size: 13px; margin: 0 0 4px; color: var(--muted); font-weight: 600; }
  /* Cards wide enough for the widest table (ranks: 5 columns); narrower screens scroll within a card. */
  .tables { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 400px), 1fr)); gap: 12px; margin-top: 12px; }
  .tables > section { min-width: 0; overflow-x: auto; }
  table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
  th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid rgba(127,127,127,.25); }
  td.num, th.num { text-align: right; }
  .bad { color: var(--bad); }
</style>
</head>
<body>
<header><h1>epd-encoder</h1><span id="status">connecting…</span><span id="updated"></span></header>
<div class="tiles">
  <div class="tile"><b id="registry-entries">–</b><span>registry entries</span></div>
  <div class="tile"><b id="registry-waiters">–</b><span>pending waiters</span></div>
  <div class="tile"><b id="staged-bytes">–</b><span>staged bytes</span></div>
  <div class="tile"><b id="staged-oldest">–</b><span>oldest staged</span></div>
  <div class="tile"><b id="queue-depth">–</b><span>forward queue</span></div>
  <div class="tile"><b id="pending">–</b><span>encodes in flight</span></div>
  <div class="tile"><b id="wait-p50">–</b><span>wait_metadata p50</span></div>
  <div class="tile"><b id="wait-p99">–</b><span>wait_metadata p99</span></div>
  <div class="tile"><b id="rate-504">–</b><span>504 / s</span></div>
  <div class="tile"><b id="encode-rate">–</b><span>encodes / s</span></div>
  <div class="tile"><b id="encodes-total">–</b><span>encodes ok (total)</span></div>
  <div class="tile"><b id="waits-total">–</b><span>waits ok / 504</span></div>
  <div class="tile"><b id="desired-replicas">–</b><span>encoders wanted / live</span></div>
  <div class="tile"><b id="utilization">–</b><span>cluster utilization</span></div>
</div>
<div class="charts">
  <div class="chart"><h2>wait_metadata latency (ms)</h2><div id="chart-wait"></div></div>
  <div class="chart"><h2>wait_metadata 504 / s</h2><div id="chart-504"></div></div>
  <div class="chart"><h2>encode throughput (/ s)</h2><div id="chart-encode"></div></div>
  <div class="chart"><h2>staged MiB and forward queue</h2><div id="chart-staging"></div></div>
</div>
<div class="tables">
  <section><h2>errors in the last minute, by type</h2>
    <table id="errors"><thead><tr><th>type</th><th class="num">count</th></tr></thead><tbody></tbody></table></section>
  <section><h2>ranks</h2>
    <table id="ranks"><thead><tr><th>dp_rank</th><th class="num">active</th><th class="num">staged</th><th class="num">queue</th><th class="num">encodes</th></tr></thead><tbody></tbody></table></section>
  <section><h2>instances</h2>
    <table id="instances"><thead><tr><th>id</th><th>state</th><th class="num">heartbeat</th></tr></thead><tbody></tbody></table></section>
</div>
<script src="/admin/ui/uplot.js"></script>
<script>
(() => {
  const KEEP = 300;
  const $ = (id) => document.getElementById(id);
  const fmtBytes = (n) => n >= 1 << 30 ? (n / (1 << 30)).toFixed(2) + ' GiB' : n >= 1 << 20 ? (n / (1 << 20)).toFixed(1) + ' MiB' : n >= 1024 ? (n / 1024).toFixed(1) + ' KiB' : n + ' B';
  const fmtMs = (s) => s == null ? '–' : (s * 1000).toFixed(s < 0.01 ? 2 : 1) + ' ms';
  const fmtRate = (r) => r >= 100 ? r.toFixed(0) : r.toFixed(1);
  const cols = { t: [], p50: [], p99: [], r504: [], enc: [], mib: [], queue: [] };
  const charts = {};
  function chart(id, series) {
    const el = $(id);
    return new uPlot({
      width: Math.max(300, el.clientWidth || 440), height: 180,
      series: [{}, ...series.map(([label, stroke]) => ({ label, stroke, width: 1.5, spanGaps: true }))],
      axes: [{}, { size: 56 }],
      scales: { x: { time: true } },
    }, [[]].concat(series.map(() => [])), el);
  }
  function init() {
    charts.wait = chart('chart-wait', [['p50', '#2f6fdf'], ['p99', '#d9480f']]);
    charts.r504 = chart('chart-504', [['504/s', '#c62828']]);
    charts.enc = chart('chart-encode', [['encodes/s', '#1a7f37']]);
    charts.staging = chart('chart-staging', [['staged MiB', '#7048e8'], ['queue', '#e67700']]);
  }
  function push(s) {
    cols.t.push(s.t / 1000);
    cols.p50.push(s.wait.p50 == null ? null : s.wait.p50 * 1000);
    cols.p99.push(s.wait.p99 == null ? null : s.wait.p99 * 1000);
    cols.r504.push(s.wait.timeoutsPerS);
    cols.enc.push(s.encode.perS);
    cols.mib.push(s.staging.bytes / (1 << 20));
    cols.queue.push(s.queue.depth);
    for (const k of Object.keys(cols)) if (cols[k].length > KEEP) cols[k].shift();
  }
  function draw() {
    charts.wait.setData([cols.t, cols.p50, cols.p99]);
    charts.r504.setData([cols.t, cols.r504]);
    charts.enc.setData([cols.t, cols.enc]);
    charts.staging.setData([cols.t, cols.mib, cols.queue]);
  }
  function rows(id, items, cells) {
    const body = $(id).tBodies[0];
    body.replaceChildren(...items.map((item) => {
      const tr = document.createElement('tr');
      for (const [text, cls] of cells(item)) {
        const td = document.createElement('td');
        td.textContent = String(text);
        if (cls) td.className = cls;
        tr.appendChild(td);
      }
      return tr;
    }));
  }
  function show(s) {
    $('registry-entries').textContent = s.registry.entries;
    $('registry-waiters').textContent = s.registry.waiters;
    $('staged-bytes').textContent = fmtBytes(s.staging.bytes);
    $('staged-oldest').textContent = s.staging.oldestAgeS.toFixed(1) + ' s';
    $('queue-depth').textContent = s.queue.depth;
    $('pending').textContent = s.queue.pending;
    $('wait-p50').textContent = fmtMs(s.wait.p50);
    $('wait-p99').textContent = fmtMs(s.wait.p99);
    $('rate-504').textContent = fmtRate(s.wait.timeoutsPerS);
    $('encode-rate').textContent = fmtRate(s.encode.perS);
    $('encodes-total').textContent = s.encode.success;
    $('waits-total').textContent = s.wait.ok + ' / ' + s.wait.timeout;
    // The autoscaling signal (docs/scaling.md, "Autoscaling"); none in a DP supervisor.
    $('desired-replicas').textContent = s.scaling ? s.scaling.desired + ' / ' + s.scaling.instances : '–';
    $('utilization').textContent = s.scaling ? s.scaling.utilization.toFixed(2) : '–';
    $('updated').textContent = new Date(s.t).toLocaleTimeString();
    rows('errors', s.errors, (e) => [[e.type, 'bad'], [e.count, 'num']]);
    rows('ranks', s.ranks, (r) => [[r.rank], [r.active, 'num'], [fmtBytes(r.stagedBytes), 'num'], [r.queue, 'num'], [r.encodes, 'num']]);
    rows('instances', s.instances, (i) => [[i.id + (i.self ? ' (this)' : '')], [i.alive ? 'alive' : 'gone', i.alive ? '' : 'bad'], [(i.lastHeartbeatMsAgo / 1000).toFixed(1) + ' s', 'num']]);
  }
  init();
  const es = new EventSource('/admin/events');
  es.addEventListener('history', (e) => {
    for (const k of Object.keys(cols)) cols[k].length = 0;
    const list = JSON.parse(e.data);
    list.forEach(push);
    if (list.length) show(list[list.length - 1]);
    draw();
  });
  es.addEventListener('snapshot', (e) => {
    const s = JSON.parse(e.data);
    push(s); show(s); draw();
    $('status').textContent = 'live'; $('status').className = 'live';
  });
  es.onerror = () => { $('status').textContent = 'disconnected (retrying)'; $('status').className = 'down'; };
})();
</script>
</body>
</html>
`;

/** The sign-in page: the token is posted once and kept in an HttpOnly cookie. */
export const LOGIN_HTML = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>epd-encoder: sign in</title>
<style>body{font:14px system-ui,sans-serif;margin:48px auto;max-width:360px}input,button{font:inherit;padding:6px;width:100%;box-sizing:border-box;margin:4px 0}#error{color:#c62828}</style></head>
<body>
<h1>epd-encoder</h1>
<form id="login"><label>Admin token (EPD_ADMIN_TOKEN)<input id="token" type="password" autocomplete="current-password" required autofocus></label>
<button type="submit">Open the dashboard</button><div id="error"></div></form>
<script>
document.getElementById('login').addEventListener('submit', async (e) => {
  e.preventDefault();
  const res = await fetch('/admin/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: document.getElementById('token').value }) });
  if (res.ok) location.assign('/admin/ui');
  else document.getElementById('error').textContent = 'That is not the admin token.';
});
</script>
</body>
</html>
`;
