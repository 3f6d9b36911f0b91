/*
 * tidegate console: reads this admin listener's JSON endpoints and
 * /metrics every few seconds and fills the panels in place.
 *
 * Safety: the admin key is typed once, kept in sessionStorage (this tab
 * only) and sent as the Authorization header; no cookie is ever used.
 * Every value from the server goes into the page with textContent or as
 * an SVG attribute set through setAttribute, never as markup. A key with
 * admin-read sees the admin API's data with its buttons disabled (the
 * server refuses its actions anyway). Requests go
 * to this origin only (the Content-Security-Policy forbids anything else).
 */
'use strict';

(function () {
  const KEY = 'tidegate.adminKey';
  const REFRESH_MS = 2000;
  const TIMEOUT_MS = 10000;
  const WINDOW_MS = 5 * 60 * 1000;
  const SVG = 'http://www.w3.org/2000/svg';
  const samples = [];          // {t, m}: parsed /metrics, newest last
  let timer = null;
  let busy = false;
  let canAct = false;          // the key may use the admin API (redeliver)

  const $ = (id) => document.getElementById(id);

  function key() { return sessionStorage.getItem(KEY) || ''; }

  function headers() {
    const h = { Accept: 'application/json' };
    if (key()) h.Authorization = 'Bearer ' + key();
    return h;
  }

  /* GET path on this origin: {status, body (parsed JSON or text), actions:
   * false when the key may only read the admin API (admin-read)}. */
  async function get(path, asText) {
    const r = await send(path, { headers: headers() });
    let body = null;
    try { body = asText ? await r.text() : await r.json(); } catch (e) { body = null; }
    return { status: r.status, body: body,
      actions: r.headers.get('X-Tidegate-Admin-Actions') !== 'none' };
  }

  /* fetch with a deadline: a gateway that does not answer fails the
   * refresh (said in the status line) instead of holding the next ones. */
  function send(path, opts) {
    const ac = new AbortController();
    const t = setTimeout(() => ac.abort(), TIMEOUT_MS);
    return fetch(path, Object.assign({ credentials: 'omit', cache: 'no-store',
      signal: ac.signal }, opts)).finally(() => clearTimeout(t));
  }

  // ---- DOM helpers: text only ----

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  /* Replace tbody's rows with rows (arrays of cells: a value, or a Node). */
  function fillRows(table, rows, emptyText) {
    const tb = $(table).tBodies[0];
    const out = document.createDocumentFragment();
    const ncol = $(table).tHead.rows[0].cells.length;
    if (rows.length === 0) {
      const tr = el('tr', null, 'empty');
      const td = el('td', emptyText || 'none');
      td.colSpan = ncol;
      tr.appendChild(td);
      out.appendChild(tr);
    }
    for (const row of rows) {
      const tr = el('tr');
      for (const c of row) {
        if (c instanceof Node) {
          const td = el('td');
          td.appendChild(c);
          tr.appendChild(td);
        } else {
          tr.appendChild(el('td', c === null || c === undefined ? '–' : c,
            typeof c === 'number' ? 'num' : ''));
        }
      }
      out.appendChild(tr);
    }
    tb.replaceChildren(out);
  }

  /* A definition list from [label, value, id] triples; ids let tests read it. */
  function fillKv(id, pairs) {
    const out = document.createDocumentFragment();
    for (const [label, value, name] of pairs) {
      const d = el('div');
      d.appendChild(el('dt', label));
      const dd = el('dd', value === null || value === undefined ? '–' : value);
      if (name) dd.dataset.figure = name;
      d.appendChild(dd);
      out.appendChild(d);
    }
    $(id).replaceChildren(out);
  }

  // ---- /metrics ----

  /* Prometheus text into {name: [{labels, value}]}. */
  function parseMetrics(text) {
    const m = {};
    for (const line of text.split('\n')) {
      if (line === '' || line[0] === '#') continue;
      const sp = line.lastIndexOf(' ');
      const series = line.slice(0, sp);
      const value = Number(line.slice(sp + 1));
      const b = series.indexOf('{');
      const name = b < 0 ? series : series.slice(0, b);
      const labels = {};
      if (b >= 0) {
        const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
        let x;
        while ((x = re.exec(series.slice(b))) !== null)
          labels[x[1]] = x[2].replace(/\\n/g, '\n').replace(/\\(.)/g, '$1');
      }
      (m[name] = m[name] || []).push({ labels: labels, value: value });
    }
    return m;
  }

  /* Sum of name's samples whose labels match want. */
  function metric(m, name, want) {
    let sum = 0;
    for (const s of m[name] || []) {
      let ok = true;
      for (const k in want || {}) if (s.labels[k] !== want[k]) { ok = false; break; }
      if (ok) sum += s.value;
    }
    return sum;
  }

  function services(m) {
    const set = new Set();
    for (const s of m.tidegate_upstream_requests_total || []) set.add(s.labels.service);
    return [...set];
  }

  function saved(m, svc) {
    return metric(m, 'tidegate_poll_requests_total', { service: svc, result: 'cached' }) +
      metric(m, 'tidegate_poll_requests_total', { service: svc, result: 'coalesced' }) +
      metric(m, 'tidegate_login_cache_total', { service: svc, result: 'hit' });
  }

  // ---- charts (computed here from successive samples) ----

  /* Per service: points [t, y] from consecutive samples by f(prev, cur, svc). */
  function rates(f) {
    const out = {};
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1], b = samples[i];
      const dt = (b.t - a.t) / 1000;
      if (dt <= 0) continue;
      for (const svc of services(b.m)) {
        const y = f(a.m, b.m, svc, dt);
        if (y === null || !isFinite(y)) continue;
        (out[svc] = out[svc] || []).push([b.t, y]);
      }
    }
    return out;
  }

  function svgEl(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    return e;
  }

  /* A line chart of series {name: [[x, y]…]} into svg, x over [x0, x1]. */
  function lineChart(svg, legend, series, x0, x1, unit) {
    const W = 300, H = 80, P = 4;
    const names = Object.keys(series).sort();
    let ymax = 0;
    for (const n of names) for (const p of series[n]) ymax = Math.max(ymax, p[1]);
    ymax = ymax > 0 ? ymax * 1.1 : 1;
    const frag = document.createDocumentFragment();
    frag.appendChild(svgEl('line', { x1: P, y1: H - P, x2: W - P, y2: H - P, class: 'axis' }));
    const label = svgEl('text', { x: P + 2, y: 10 });
    label.textContent = 'max ' + fmt(ymax / 1.1) + ' ' + unit;
    frag.appendChild(label);
    names.forEach((n, i) => {
      const pts = series[n].map((p) =>
        (P + (W - 2 * P) * (p[0] - x0) / Math.max(1, x1 - x0)).toFixed(1) + ',' +
        (H - P - (H - 2 * P) * p[1] / ymax).toFixed(1)).join(' ');
      const line = svgEl('polyline', { points: pts, class: 'series c' + (i % 6) });
      line.dataset.series = n;
      frag.appendChild(line);
    });
    svg.replaceChildren(frag);
    const lg = document.createDocumentFragment();
    names.forEach((n, i) => {
      const last = series[n].length ? series[n][series[n].length - 1][1] : null;
      lg.appendChild(el('span', n + (last === null ? '' : ' ' + fmt(last) + ' ' + unit),
        'c' + (i % 6)));
    });
    legend.replaceChildren(lg);
  }

  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return '–';
    if (Math.abs(v) >= 100 || Number.isInteger(v)) return String(Math.round(v));
    return v.toFixed(2);
  }

  function bytes(n) {
    if (!isFinite(n)) return '–';
    const u = ['B', 'KB', 'MB', 'GB', 'TB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(n) : n.toFixed(1)) + ' ' + u[i];
  }

  function duration(s) {
    if (!isFinite(s) || s <= 0) return 'none';
    if (s < 120) return Math.round(s) + ' s';
    if (s < 7200) return Math.round(s / 60) + ' min';
    return (s / 3600).toFixed(1) + ' h';
  }

  // ---- panels ----

  /* Cumulative bucket counts of the vendor latency histogram for svc
   * (origins summed): {le: count}, le in seconds (Infinity for +Inf). */
  function vendorBuckets(m, svc) {
    const out = new Map();
    for (const s of m.tidegate_vendor_request_duration_seconds_bucket || []) {
      if (s.labels.service !== svc) continue;
      const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
      out.set(le, (out.get(le) || 0) + s.value);
    }
    return out;
  }

  /* Quantile q in ms of the calls between two snapshots (bucket count
   * differences), interpolated inside its bucket as Prometheus's
   * histogram_quantile does; null without calls. */
  function quantile(a, b, q) {
    const les = [...b.keys()].sort((x, y) => x - y);
    const total = (b.get(Infinity) || 0) - (a.get(Infinity) || 0);
    if (!(total > 0)) return null;
    let prevLe = 0, prevN = 0;
    for (const le of les) {
      const n = b.get(le) - (a.get(le) || 0);
      if (n >= q * total) {
        if (le === Infinity) return 1000 * prevLe;
        return 1000 * (prevLe + (le - prevLe) * (q * total - prevN) / Math.max(1, n - prevN));
      }
      prevLe = le;
      prevN = n;
    }
    return null;
  }

  /* The vendor's p50 and p95 per service between successive samples. */
  function vendorLatency() {
    const out = {};
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1].m, b = samples[i].m;
      for (const svc of services(b)) {
        const ba = vendorBuckets(a, svc), bb = vendorBuckets(b, svc);
        for (const q of [0.5, 0.95]) {
          const y = quantile(ba, bb, q);
          if (y === null) continue;
          const n = svc + ' p' + Math.round(q * 100);
          (out[n] = out[n] || []).push([samples[i].t, y]);
        }
      }
    }
    return out;
  }

  function renderVendor(ready, m) {
    const svcs = services(m);
    let total = 0, calls = 0;
    const rows = svcs.map((svc) => {
      const s = saved(m, svc);
      total += s;
      calls += metric(m, 'tidegate_upstream_requests_total', { service: svc, kind: 'sent' });
      return [svc, ready && ready.vendor ? ready.vendor[svc] : null,
        ready && ready.services ? ready.services[svc] : null,
        duration(metric(m, 'tidegate_token_expiry_seconds', { service: svc })), s];
    });
    $('saved-total').textContent = String(total);
    $('calls-total').textContent = String(calls);
    fillRows('services-table', rows);
    const orows = [];
    const origins = (ready && ready.origins) || {};
    for (const svc of Object.keys(origins)) {
      for (const o of origins[svc]) {
        orows.push([svc, o.origin, o.host, o.state, o.fails,
          metric(m, 'tidegate_upstream_origin_ejections_total', { service: svc, origin: o.origin }),
          o.lastError || o.last_error || o.error || null]);
      }
    }
    fillRows('origins-table', orows, 'no origins');
    const now = samples.length ? samples[samples.length - 1].t : Date.now();
    lineChart($('chart-calls'), $('legend-calls'), rates((a, b, svc, dt) =>
      (metric(b, 'tidegate_upstream_requests_total', { service: svc, kind: 'sent' }) -
       metric(a, 'tidegate_upstream_requests_total', { service: svc, kind: 'sent' })) / dt),
    now - WINDOW_MS, now, '/s');
    lineChart($('chart-vendor-latency'), $('legend-vendor-latency'), vendorLatency(),
      now - WINDOW_MS, now, 'ms');
    lineChart($('chart-latency'), $('legend-latency'), rates((a, b, svc) => {
      const n = metric(b, 'tidegate_request_duration_seconds_count', { service: svc }) -
        metric(a, 'tidegate_request_duration_seconds_count', { service: svc });
      const s = metric(b, 'tidegate_request_duration_seconds_sum', { service: svc }) -
        metric(a, 'tidegate_request_duration_seconds_sum', { service: svc });
      return n > 0 ? 1000 * s / n : null;
    }), now - WINDOW_MS, now, 'ms');
  }

  function renderJobs(m) {
    fillKv('jobs-kv', [
      ['exports in flight', metric(m, 'tidegate_poll_in_flight', { family: 'export' }),
        'in_flight_export'],
      ['imports in flight', metric(m, 'tidegate_poll_in_flight', { family: 'import' }),
        'in_flight_import'],
      ['simulations in flight', metric(m, 'tidegate_poll_in_flight', { family: 'simulation' }),
        'in_flight_simulation'],
      ['jobs tracked', metric(m, 'tidegate_poll_entries'), 'poll_entries'],
      ['long-poll waiters', m.tidegate_poll_waiters ? metric(m, 'tidegate_poll_waiters') : null,
        'poll_waiters'],
      ['cached answers', bytes(metric(m, 'tidegate_poll_cache_bytes')) + ' of ' +
        bytes(metric(m, 'tidegate_poll_cache_max_bytes')), 'poll_cache_bytes'],
      ['cache evictions', metric(m, 'tidegate_poll_cache_evictions_total'), 'poll_cache_evictions'],
      ['spool files', metric(m, 'tidegate_poll_spool_files'), 'poll_spool_files'],
      ['spool use', bytes(metric(m, 'tidegate_poll_spool_bytes')), 'poll_spool_bytes'],
      ['requests in flight', metric(m, 'tidegate_inflight_requests'), 'inflight'],
    ]);
    const kinds = ['cached', 'coalesced', 'fetched', 'long-poll', 'passthrough', 'spool'];
    fillRows('polls-table', services(m).map((svc) => [svc].concat(kinds.map((k) =>
      metric(m, 'tidegate_poll_requests_total', { service: svc, result: k })),
    [metric(m, 'tidegate_poll_upstream_total', { service: svc })])));
  }

  function redeliverButton(job) {
    const b = el('button', 'Redeliver');
    b.type = 'button';
    b.dataset.webhook = job.id;
    b.setAttribute('aria-label', 'Redeliver webhook ' + job.id);
    b.disabled = !canAct;
    if (!canAct) b.title = 'this key may read the admin API but not act on it (admin-read)';
    b.addEventListener('click', async () => {
      b.disabled = true;
      let msg = 'redelivery of ' + job.id + ': ';
      try {
        const r = await send('/webhooks/' + encodeURIComponent(job.id) + '/redeliver',
          { method: 'POST', headers: headers() });
        let j = {};
        try { j = await r.json(); } catch (e) { j = {}; }
        msg += r.ok ? 'queued' : (j.message || ('HTTP ' + r.status));
      } catch (e) { msg += 'no answer (' + e.message + ')'; }
      $('webhooks-message').textContent = msg;
      refresh();
    });
    return b;
  }

  function renderWebhooks(m, dead, latest) {
    const states = ['waiting', 'ready', 'delivered', 'gone', 'dead'];
    fillKv('outbox-kv', states.map((s) =>
      [s, metric(m, 'tidegate_webhook_jobs', { state: s }), 'webhook_' + s]).concat([
      ['attempts in flight', metric(m, 'tidegate_webhook_attempts_in_flight'), 'webhook_inflight'],
      ['refused by egress policy', metric(m, 'tidegate_webhook_egress_refusals_total'),
        'webhook_egress_refusals'],
    ]));
    if (dead.status !== 200 || latest.status !== 200) {
      $('webhooks-message').textContent = refusal(dead.status, dead.body);
      fillRows('dead-table', [], 'needs a key with the admin service');
      fillRows('latest-table', [], 'needs a key with the admin service');
      return;
    }
    if ($('webhooks-message').textContent.indexOf('redelivery') !== 0)
      $('webhooks-message').textContent = '';
    fillRows('dead-table', dead.body.webhooks.map((j) => [j.id, j.kind, j.url, j.attempts,
      j.lastStatus, j.lastError, redeliverButton(j)]), 'no dead jobs');
    fillRows('latest-table', latest.body.webhooks.slice(0, 10).map((j) => [j.id, j.state, j.url,
      j.attempts, j.lastStatus, j.lastError, when(j.lastAttemptAt || j.createdAt)]), 'no jobs');
  }

  /* The egress policy (GET /webhooks/policy): where callbacks may go. */
  function renderEgress(pol) {
    const p = pol.status === 200 ? pol.body : null;
    fillKv('egress-kv', [
      ['webhook mode', p ? p.mode : null, 'egress_mode'],
      ['callback schemes', p ? p.schemes.join(', ') : null, 'egress_schemes'],
      ['callback ports', p ? p.ports.min + '–' + p.ports.max : null, 'egress_ports'],
      ['CA bundle', p ? (p.caFile || 'system') : null, 'egress_ca'],
    ]);
    const why = p ? '' : 'needs a key with the admin service';
    fillRows('egress-allow-table', p ? p.allow.map((a) => [a]) : [],
      why || 'nothing beyond public addresses');
    fillRows('egress-refused-table', p ? p.refused.map((r) => [r.cidr, r.range]) : [],
      why || 'none');
  }

  function refusal(status, body) {
    const why = body && body.message ? body.message : 'HTTP ' + status;
    if (status === 401) return 'refused: ' + why + ' (enter an admin key above)';
    if (status === 403) return 'read-only: ' + why;
    return 'unavailable: ' + why;
  }

  /* An ISO 8601 time as 2026-01-02 03:04:05Z (UTC, as the server says it). */
  function when(iso) {
    return typeof iso === 'string' ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : null;
  }

  function daysLeft(iso) {
    const t = Date.parse(iso);
    return isFinite(t) ? Math.floor((t - Date.now()) / 86400000) : null;
  }

  function renderSimulations(m, runs, sweeps) {
    const st = ['IN_PROGRESS', 'COMPLETED', 'FAILED', 'EXPIRED', 'UNKNOWN'];
    fillKv('runs-kv', st.map((s) => [s.toLowerCase().replace('_', ' '),
      metric(m, 'tidegate_runs', { status: s }), 'runs_' + s]).concat([
      ['sweeps running', metric(m, 'tidegate_sweeps', { state: 'running' }), 'sweeps_running'],
      ['sweeps done', metric(m, 'tidegate_sweeps', { state: 'done' }), 'sweeps_done'],
    ]));
    if (runs.status !== 200) {
      $('simulations-message').textContent = refusal(runs.status, runs.body);
      fillRows('runs-table', [], 'needs a key with the admin service');
      $('sweeps').replaceChildren();
      return;
    }
    $('simulations-message').textContent = '';
    fillRows('runs-table', runs.body.runs.slice(0, 10).map((r) => [r.simulationId, r.status,
      r.caseId, r.apiKey, when(r.submittedAt), when(r.expiresAt), daysLeft(r.expiresAt)]),
    'no runs');
    const frag = document.createDocumentFragment();
    for (const s of sweeps) frag.appendChild(sweepBlock(s));
    $('sweeps').replaceChildren(frag);
  }

  /* One sweep: its variants side by side, and a chart with one series per
   * variant over the figure columns (each column scaled to its largest). */
  function sweepBlock(s) {
    const box = el('div', null, 'sweep');
    box.dataset.sweep = s.sweepId;
    const c = s.counts || {};
    box.appendChild(el('h3', 'sweep ' + s.sweepId + ' · ' + s.baseCaseId + ' · ' + s.state +
      ' · ' + (c.completed || 0) + ' completed, ' + (c.failed || 0) + ' failed'));
    const cols = (s.columns || []).slice(0, 8);
    const t = el('table', null, 'grid sweep-table');
    const head = el('tr');
    for (const h of ['variant', 'status'].concat(cols)) {
      const th = el('th', h);
      th.scope = 'col';
      head.appendChild(th);
    }
    t.appendChild(el('thead')).appendChild(head);
    const tb = t.appendChild(el('tbody'));
    for (const v of s.variants || []) {
      const tr = tb.appendChild(el('tr'));
      tr.appendChild(el('td', v.name));
      tr.appendChild(el('td', v.status + (v.failure ? ' (' + v.failure + ')' : '')));
      for (const col of cols) {
        const x = v.figures ? v.figures[col] : undefined;
        tr.appendChild(el('td', typeof x === 'number' ? (Math.abs(x) >= 1000 ? String(Math.round(x)) :
          String(Number(x.toPrecision(4)))) : '–', 'num'));
      }
    }
    box.appendChild(t);
    box.appendChild(sweepChart(s.variants || [], cols));
    return box;
  }

  /* Each column scaled between its smallest and largest figure, so that
   * what differs between variants shows; the values are in the table and
   * in each series' title. */
  function sweepChart(variants, cols) {
    const W = 600, H = 160, P = 24;
    const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'chart sweep-chart',
      role: 'img', 'aria-label': 'variants compared over ' + cols.join(', ') });
    const num = (v, c) => (v.figures && typeof v.figures[c] === 'number' ? v.figures[c] : null);
    const lo = cols.map((c) => Math.min(...variants.map((v) => num(v, c)).filter((y) => y !== null)));
    const hi = cols.map((c) => Math.max(...variants.map((v) => num(v, c)).filter((y) => y !== null)));
    const x = (i) => P + (W - 2 * P) * (cols.length > 1 ? i / (cols.length - 1) : 0.5);
    const y = (i, v) => H - P - (H - 2 * P) * (hi[i] > lo[i] ? (v - lo[i]) / (hi[i] - lo[i]) : 0.5);
    svg.appendChild(svgEl('line', { x1: P, y1: H - P, x2: W - P, y2: H - P, class: 'axis' }));
    cols.forEach((c, i) => {
      svg.appendChild(svgEl('line', { x1: x(i), y1: P, x2: x(i), y2: H - P, class: 'axis' }));
      const tx = svgEl('text', { x: x(i), y: H - 8, 'text-anchor': 'middle' });
      tx.textContent = c.length > 11 ? c.slice(0, 10) + '…' : c;
      svg.appendChild(tx);
    });
    variants.forEach((v, k) => {
      const pts = [];
      cols.forEach((c, i) => {
        const f = num(v, c);
        if (f !== null) pts.push(x(i).toFixed(1) + ',' + y(i, f).toFixed(1));
      });
      const line = svgEl('polyline', { points: pts.join(' '), class: 'series c' + (k % 6) });
      line.dataset.series = v.name;
      const title = svgEl('title', {});
      title.textContent = v.name + ': ' + cols.map((c) => c + ' ' + fmt(num(v, c))).join(', ');
      line.appendChild(title);
      svg.appendChild(line);
    });
    const fig = el('figure');
    fig.appendChild(svg);
    const lg = el('div', null, 'legend');
    variants.forEach((v, k) => lg.appendChild(el('span', v.name, 'c' + (k % 6))));
    fig.appendChild(lg);
    return fig;
  }

  /* The instances the state knows of (GET /fleet), each with what it holds. */
  function renderInstances(fleet) {
    if (fleet.status !== 200) {
      $('instances-message').textContent = refusal(fleet.status, fleet.body);
      fillRows('fleet-table', [], 'needs a key with the admin service');
      return;
    }
    $('instances-message').textContent = '';
    fillRows('fleet-table', fleet.body.instances.map((i) => [
      i.instance + (i.self ? ' (this one)' : ''), i.liveUntil ? when(i.liveUntil) : null,
      i.leadCount === null ? 'not recorded (one instance)' :
        i.leads.join(', ') + (i.leadCount > i.leads.length ? ' …' : '') || 'none',
      i.webhookLeases, i.claims]), 'none');
  }

  function renderFleet(ready, m, limits) {
    const st = (ready && ready.state) || {};
    const q = ready && ready.quota;
    fillKv('fleet-kv', [
      ['status', ready ? ready.status : null, 'status'],
      ['state backend', st.backend, 'backend'],
      ['database', st.up === undefined ? null : (st.up ? 'up' : 'down: ' + (st.reason || '')),
        'database'],
      ['shared (fleet)', st.shared === undefined ? null : (st.shared ? 'yes' : 'no'), 'shared'],
      ['leads held here', metric(m, 'tidegate_state_leases_held'), 'leases_held'],
      ['hears other instances', metric(m, 'tidegate_state_listening') ? 'yes' : 'no', 'listening'],
      ['wake-ups heard', metric(m, 'tidegate_state_wakeups_total'), 'wakeups'],
      ['quota', q ? q.state : 'no limits', 'quota'],
    ]);
    if (limits.status !== 200) {
      $('limits-message').textContent = refusal(limits.status, limits.body);
      fillRows('limits-table', [], 'needs a key with the admin service');
      return;
    }
    $('limits-message').textContent = '';
    fillRows('limits-table', limits.body.keys.map((k) => [k.key, k.admitted,
      Object.keys(k.limits || {}).map((n) => n + ': ' + JSON.stringify(k.limits[n])).join('; ') ||
      'none']), 'no keys');
  }

  // ---- the loop ----

  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const [ready, met, dead, latest, limits, runs, sweeps, pol, fleet] = await Promise.all([
        get('/readyz'), get('/metrics', true), get('/webhooks?state=dead&limit=50'),
        get('/webhooks?limit=10'), get('/limits'), get('/runs?limit=10'),
        get('/runs/sweeps?limit=3'), get('/webhooks/policy'), get('/fleet')]);
      const m = parseMetrics(met.body || '');
      samples.push({ t: Date.now(), m: m });
      while (samples.length > 2 && samples[0].t < Date.now() - WINDOW_MS) samples.shift();
      canAct = dead.status === 200 && dead.actions;
      auth(dead);
      let summaries = [];
      if (sweeps.status === 200) {
        summaries = (await Promise.all(sweeps.body.sweeps.map((s) =>
          get('/runs/sweeps/' + encodeURIComponent(s.sweepId)))))
          .filter((r) => r.status === 200).map((r) => r.body);
      }
      renderVendor(ready.body, m);
      renderJobs(m);
      renderWebhooks(m, dead, latest);
      renderEgress(pol);
      renderSimulations(m, runs, summaries);
      renderFleet(ready.body, m, limits);
      renderInstances(fleet);
      $('status').textContent = 'updated ' + new Date().toLocaleTimeString() +
        (canAct ? ' · admin' : ' · read-only');
    } catch (e) {
      $('status').textContent = e.name === 'AbortError' ? 'the gateway did not answer within ' +
        (TIMEOUT_MS / 1000) + ' s (retrying)' : 'the gateway did not answer: ' + e.message;
    } finally {
      busy = false;
    }
  }

  /* What the admin API said of the key, in words. */
  function auth(r) {
    const msg = $('auth-message');
    if (r.status === 401)
      msg.textContent = key() ? 'This key was refused: ' + ((r.body && r.body.message) ||
        'unknown API key') + '.' : 'Enter an admin API key to see the webhooks, runs and limits.';
    else if (r.status === 403)
      msg.textContent = 'This key has no admin service: the console is read-only.';
    else if (r.status === 200 && !r.actions)
      msg.textContent = 'This key may read but not act (admin-read): the console is read-only.';
    else
      msg.textContent = '';
  }

  function start() {
    $('interval').textContent = String(REFRESH_MS / 1000);
    $('key-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const v = $('key-input').value.trim();
      if (v) sessionStorage.setItem(KEY, v);
      $('key-input').value = '';
      refresh();
    });
    $('key-forget').addEventListener('click', () => {
      sessionStorage.removeItem(KEY);
      refresh();
    });
    refresh();
    timer = setInterval(refresh, REFRESH_MS);
  }

  document.addEventListener('DOMContentLoaded', start);
  window.addEventListener('pagehide', () => clearInterval(timer));
}());
