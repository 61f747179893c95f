// The explorer: a single page over this server's own API (same origin, /v1).
// Hand-written, no dependencies: charts are plain SVG, so every mark is an
// element a test can count and a screen reader can skip to its data table.
//
// Routes (in the URL fragment):
//   #/                      markets
//   #/markets/{asset}       one market
//   #/wallets               wallets
//   #/wallets/{address}     one wallet
//   #/events                position events
//
// The events page and a market page follow the event stream (a "Live"
// panel): new events appear without a reload.
//
// `body[data-state]` is `loading` while any request of the page is under way,
// `ready` when every section has rendered (data, an empty state or a
// problem), and `key` while the key form is shown.
'use strict';
(() => {
  const KEY = 'mds.apiKey';
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const main = document.getElementById('main');
  const DAY = 86_400_000;
  // Chart colours, as in explore.css (marks keep at least 3:1 against white).
  const C = {
    long: '#1a7f37', short: '#c4222c', longSoft: '#2da44e', shortSoft: '#e5534b', accent: '#8250df',
    shrimp: '#3a87c8', shark: '#1f5c99', whale: '#0b2e5c',
  };
  const INTERVAL_MS = { '5m': 300_000, '15m': 900_000, '1h': 3_600_000, '4h': 14_400_000, '1d': DAY };

  // History pickers: bucket width → how many buckets a chart shows.
  const HISTORY_BUCKETS = [['1h', '1 hour (last 12 days)', 288], ['4h', '4 hours (last 30 days)', 180], ['1d', '1 day (last 90 days)', 90]];
  const historyLimit = (interval) => HISTORY_BUCKETS.find(([v]) => v === interval)[2];
  const MIN_VALUES = [['', 'Any'], ['100000', '$100K'], ['1000000', '$1M'], ['10000000', '$10M']];

  let network = null;
  // Bumped on every navigation: the answers of a page left behind are dropped.
  let generation = 0;
  let pending = 0;

  // ---------------------------------------------------------------- DOM

  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'text') el.textContent = v;
      else el.setAttribute(k, v === true ? '' : v);
    }
  }
  function fill(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : String(c));
    }
    return el;
  }
  const h = (tag, attrs, ...children) => {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    return fill(el, children);
  };
  const s = (tag, attrs, ...children) => {
    const el = document.createElementNS(SVG_NS, tag);
    setAttrs(el, attrs);
    return fill(el, children);
  };

  // ---------------------------------------------------------------- API

  /** A problem answer (RFC 9457) or a failed request. */
  class ApiProblem extends Error {
    constructor(status, problem) {
      super((problem && problem.detail) || `HTTP ${status}`);
      this.status = status;
      this.problem = problem || {};
    }
  }
  /** No key, or the server rejected it (401): the key form is shown. */
  class KeyRejected extends Error {}

  async function api(path, params = {}) {
    const key = sessionStorage.getItem(KEY);
    if (!key) throw new KeyRejected('');
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v !== undefined && v !== null && v !== '') query.set(k, v);
    }
    const url = `/v1${path}${query.size ? `?${query}` : ''}`;
    let res;
    try {
      res = await fetch(url, { headers: { 'X-API-Key': key, Accept: 'application/json' } });
    } catch (e) {
      throw new ApiProblem(0, { title: 'The server could not be reached', detail: String(e.message || e) });
    }
    const json = (res.headers.get('content-type') || '').includes('json');
    const body = json ? await res.json().catch(() => null) : null;
    if (res.status === 401) throw new KeyRejected((body && body.detail) || 'The key was not accepted.');
    if (!res.ok) throw new ApiProblem(res.status, body);
    const version = res.headers.get('x-data-version');
    if (version) document.getElementById('version').textContent = `data version ${version}`;
    return body;
  }
  const net = (path) => `/networks/${encodeURIComponent(network)}${path}`;

  // Every page of a keyset-paged list (for the heatmap's 90 days).
  async function all(path, params, field) {
    const out = [];
    let cursor;
    do {
      const page = await api(path, { ...params, cursor });
      out.push(...page[field]);
      cursor = page.nextCursor;
    } while (cursor);
    return out;
  }

  // ---------------------------------------------------------------- live events

  // The open event stream of the page, if any: one at a time.
  let live = null;

  /**
   * Follows the position-event stream with `params`, calling `onEvent` for
   * each event and `onStatus` with a sentence on the connection. `fetch`,
   * not EventSource: the key goes in a header. After a drop it resumes
   * from the last id (Last-Event-ID), so no event is lost or repeated.
   */
  function follow(params, onEvent, onStatus) {
    if (live) live.abort();
    const controller = new AbortController();
    live = controller;
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v) query.set(k, v);
    const url = `/v1${net('/position-events/stream')}${query.size ? `?${query}` : ''}`;
    let last = null;
    (async () => {
      while (!controller.signal.aborted) {
        const headers = { 'X-API-Key': sessionStorage.getItem(KEY) || '', Accept: 'text/event-stream' };
        if (last) headers['Last-Event-ID'] = last;
        try {
          const res = await fetch(url, { headers, signal: controller.signal });
          if (!res.ok) {
            const body = await res.json().catch(() => null);
            onStatus(`Live updates are off: ${(body && body.detail) || `HTTP ${res.status}`}`);
            return;
          }
          onStatus('Live: new events appear here as they are published.');
          const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
          let buffer = '';
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buffer += value;
            let end;
            while ((end = buffer.indexOf('\n\n')) >= 0) {
              const block = buffer.slice(0, end);
              buffer = buffer.slice(end + 2);
              let event = null;
              let data = null;
              for (const line of block.split('\n')) {
                if (line.startsWith('id: ')) last = line.slice(4);
                else if (line.startsWith('event: ')) event = line.slice(7);
                else if (line.startsWith('data: ')) data = line.slice(6);
              }
              if (event === 'position-event' && data) onEvent(JSON.parse(data));
            }
          }
        } catch (e) {
          if (controller.signal.aborted) return;
        }
        onStatus('Live updates paused; reconnecting…');
        await new Promise((resolve) => { setTimeout(resolve, 2000); });
      }
    })();
  }

  /** A "Live" panel: the newest streamed events first, at most 50. */
  function livePanel(params, { wallet = true } = {}) {
    const status = h('p', { class: 'muted', role: 'status' }, 'Connecting to live updates…');
    const rows = h('div', { id: 'live-events' });
    const seen = [];
    follow(params, (e) => {
      seen.unshift(e);
      seen.length = Math.min(seen.length, 50);
      rows.replaceChildren(eventsTable(seen, { wallet }));
      layout(rows);
    }, (text) => { status.replaceChildren(...richText(text)); });
    return h('section', { class: 'panel', 'aria-labelledby': 'live-h' },
      h('h2', { id: 'live-h' }, 'Live'), status, rows);
  }

  // ---------------------------------------------------------------- formatting

  const group = (digits) => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  /** A decimal string with its integer digits grouped; every digit kept. */
  function exact(str) {
    if (str === null || str === undefined) return '–';
    const neg = str.startsWith('-');
    const [int, frac] = (neg ? str.slice(1) : str).split('.');
    return `${neg ? '−' : ''}${group(int)}${frac === undefined ? '' : `.${frac}`}`;
  }
  const usd = (str) => (str === null || str === undefined ? '–'
    : str.startsWith('-') ? `−$${exact(str.slice(1))}` : `$${exact(str)}`);
  const UNITS = [[1e3, 'K'], [1e6, 'M'], [1e9, 'B'], [1e12, 'T']];
  /**
   * Rounded for cards and axes (display only: through a float). The figure
   * is rounded first and the unit picked after, so 999,999 reads "1.00M",
   * never "1000.00K".
   */
  function compact(n, digits = 2) {
    if (!Number.isFinite(n)) return '–';
    const sign = n < 0 ? '−' : '';
    const a = Math.abs(n);
    // Below 1,000: `digits + 1` significant digits, whole from 100 on.
    const precision = Math.min(4, Math.max(1, digits + 1));
    const small = Number(a.toPrecision(precision));
    if (small < 1000) {
      const decimals = small >= 100 ? 0 : small === 0 ? precision - 1
        : Math.max(0, precision - 1 - Math.floor(Math.log10(small)));
      return `${sign}${small.toFixed(decimals)}`;
    }
    for (const [i, [unit, suffix]] of UNITS.entries()) {
      const text = (a / unit).toFixed(digits);
      if (Number(text) < 1000 || i === UNITS.length - 1) return `${sign}${text}${suffix}`;
    }
    return '–';
  }
  /** A USD figure, compact: "−$1.25M" (the sign before the dollar). */
  const compactUsd = (value, digits = 2) => {
    const n = Number(value);
    return `${n < 0 ? '−' : ''}$${compact(Math.abs(n), digits)}`;
  };
  const pct = (str) => (str === null || str === undefined ? '–' : `${Number(str) > 0 ? '+' : ''}${exact(str)} %`);
  /**
   * A decimal fraction as a percentage, by moving the decimal point (no
   * float): "0.000125" → "0.0125%", "-0.0000096" → "−0.00096%".
   */
  function percent(str) {
    if (str === null || str === undefined || str === '') return '–';
    const neg = str.startsWith('-');
    const [int, frac = ''] = str.replace(/^[-+]/, '').split('.');
    const digits = int + frac.padEnd(2, '0');
    const point = int.length + 2;
    const whole = digits.slice(0, point).replace(/^0+(?=\d)/, '');
    const rest = digits.slice(point);
    return `${neg ? '−' : ''}${group(whole)}${rest ? `.${rest}` : ''}%`;
  }
  /**
   * Server text (a problem's detail) as nodes: its `backtick` spans become
   * <code> elements. Text nodes only; the text is never parsed as HTML.
   */
  function richText(text) {
    const parts = String(text).split('`');
    // An unpaired backtick stays a backtick.
    if (parts.length % 2 === 0) parts.splice(-2, 2, `${parts[parts.length - 2]}\`${parts[parts.length - 1]}`);
    return parts.map((part, i) => (i % 2 ? h('code', {}, part) : part)).filter((part) => part !== '');
  }
  const when = (iso) => (iso ? `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC` : '–');
  const day = (ms) => new Date(ms).toISOString().slice(0, 10);
  const shortAddress = (a) => `${a.slice(0, 6)}…${a.slice(-4)}`;
  const side = (d) => (d ? h('span', { class: d }, d) : '–');
  /** A price axis label: enough digits to tell ticks apart. */
  function tickLabel(v, step) {
    if (Math.abs(v) >= 1e9) return compact(v, 2);
    const decimals = Math.max(0, Math.min(8, -Math.floor(Math.log10(step || 1))));
    return group(v.toFixed(decimals).split('.')[0]) + (decimals ? `.${v.toFixed(decimals).split('.')[1]}` : '');
  }

  const card = (label, value, cls) => h('div', { class: 'card' },
    h('div', { class: 'label' }, label), h('div', { class: `value ${cls || ''}` }, value));
  const walletLink = (address, label) => h('a', { href: `#/wallets/${address}`, class: label ? null : 'mono', title: address },
    label || shortAddress(address));
  const marketLink = (symbol) => h('a', { href: `#/markets/${encodeURIComponent(symbol)}` }, symbol);

  // ---------------------------------------------------------------- page state

  function settle() {
    if (pending === 0 && document.body.dataset.state !== 'key') document.body.dataset.state = 'ready';
  }

  /**
   * Renders `load()`'s content into `el`: a loading line first, then the
   * content, or the problem the server answered. Of two loads into one
   * element, the later wins.
   */
  async function section(el, load) {
    const gen = generation;
    const token = (el.loadToken = (el.loadToken || 0) + 1);
    el.setAttribute('aria-busy', 'true');
    el.replaceChildren(h('p', { class: 'loading', role: 'status' }, 'Loading…'));
    pending += 1;
    document.body.dataset.state = 'loading';
    try {
      const content = await load();
      if (gen === generation && token === el.loadToken) {
        el.replaceChildren(...[content].flat(Infinity).filter(Boolean));
        layout(el);
      }
    } catch (e) {
      if (gen !== generation || token !== el.loadToken) return;
      if (e instanceof KeyRejected) askKey(e.message);
      else if (e instanceof ApiProblem) el.replaceChildren(problemBox(e));
      else throw e;
    } finally {
      if (gen === generation) {
        pending -= 1;
        if (token === el.loadToken) el.removeAttribute('aria-busy');
        settle();
      }
    }
  }

  function problemBox(e) {
    const p = e.problem || {};
    return h('div', { class: 'problem', role: 'alert' },
      h('strong', {}, p.title || 'The request failed'), e.status ? ` (HTTP ${e.status})` : '',
      h('p', {}, richText(p.detail || e.message)));
  }
  const empty = (text) => h('p', { class: 'empty' }, text);

  function askKey(message) {
    generation += 1;
    pending = 0;
    network = null;
    sessionStorage.removeItem(KEY);
    document.getElementById('forget-key').hidden = true;
    const input = h('input', {
      id: 'api-key', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true,
      'aria-describedby': 'key-help',
    });
    const form = h('form', { class: 'key-form', 'aria-labelledby': 'key-title' },
      h('h1', { id: 'key-title' }, 'Enter your API key'),
      message ? h('div', { class: 'problem', role: 'alert' },
        h('strong', {}, 'The server did not accept the key.'), h('p', {}, richText(message))) : null,
      h('label', { for: 'api-key' }, 'API key'),
      input,
      h('p', { id: 'key-help', class: 'muted' },
        'Create one with ', h('code', {}, 'market-data-server token create --name NAME'),
        '. It is kept in this browser tab (sessionStorage) and sent only to this server, in the X-API-Key header.'),
      h('button', { type: 'submit' }, 'Continue'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(KEY, input.value.trim());
      route();
      main.focus({ preventScroll: true });
    });
    main.replaceChildren(form);
    document.body.dataset.state = 'key';
    input.focus();
  }

  // ---------------------------------------------------------------- tables

  /**
   * A table of `rows` with `columns` ({title, cell(row), num}); `sort`
   * ({key, order, onSort}) makes the titles of columns with a `sortKey`
   * buttons.
   */
  function table(columns, rows, { caption, sort, rowAttrs } = {}) {
    const head = h('tr', {}, columns.map((c) => {
      const sorted = sort && c.sortKey && sort.key === c.sortKey;
      const th = h('th', {
        scope: 'col', class: c.num ? 'num' : null,
        'aria-sort': sorted ? (sort.order === 'asc' ? 'ascending' : 'descending') : null,
      });
      if (sort && c.sortKey) {
        th.append(h('button', {
          type: 'button', 'data-sort': c.sortKey,
          onclick: () => sort.onSort(c.sortKey),
        }, c.title));
      } else th.append(c.title);
      return th;
    }));
    const body = h('tbody', {}, rows.map((r) => h('tr', rowAttrs ? rowAttrs(r) : {},
      columns.map((c) => h('td', { class: c.num ? 'num' : null }, c.cell(r))))));
    return h('div', { class: 'table-wrap' },
      h('table', {}, caption ? h('caption', { class: 'muted' }, caption) : null, h('thead', {}, head), body));
  }

  /** A select bound to `value`, calling `onChange(value)`. */
  function picker(label, options, value, onChange) {
    const id = `pick-${label.toLowerCase().replace(/[^a-z]+/g, '-')}-${Math.random().toString(36).slice(2, 7)}`;
    const sel = h('select', { id, onchange: () => onChange(sel.value) },
      options.map(([v, text]) => h('option', { value: v, selected: v === value }, text)));
    return h('span', {}, h('label', { for: id }, label), sel);
  }

  /**
   * Keyset paging over `fetchPage(cursor)`: renders each page with
   * `render(page)` and offers the next page and a way back to the first.
   */
  function pager(el, fetchPage, render) {
    const cursors = [undefined];
    const show = (index) => section(el, async () => {
      const page = await fetchPage(cursors[index]);
      cursors[index + 1] = page.nextCursor || null;
      const nav = h('div', { class: 'toolbar' },
        h('button', { type: 'button', disabled: index === 0, onclick: () => show(index - 1) }, 'Previous page'),
        h('span', { class: 'muted' }, `page ${index + 1}`),
        h('button', { type: 'button', disabled: !page.nextCursor, 'data-next': true, onclick: () => show(index + 1) }, 'Next page'));
      return [render(page), nav];
    });
    show(0);
  }

  // ---------------------------------------------------------------- charts
  //
  // A chart is drawn at the width it is shown at: its viewBox is its size in
  // CSS pixels, so its text is as large on a phone as on a desktop (no
  // scaling down), and its ticks are spaced for that width. A chart box
  // draws again when its width changes.

  const HOUR = 3_600_000;
  // Chart boxes and table boxes follow their width: a chart is drawn again,
  // a table box says again whether it scrolls.
  const resized = new ResizeObserver((entries) => {
    for (const { target } of entries) {
      if (target.classList.contains('chart-box')) drawChart(target);
      else scrollable(target);
    }
  });
  /** Keeps `box` observed while it is in the page; false once it left. */
  function followed(box) {
    if (!box.isConnected) {
      resized.unobserve(box);
      box.observed = false;
      return false;
    }
    if (!box.observed) {
      box.observed = true;
      resized.observe(box);
    }
    return true;
  }
  /** A box drawing `draw(width)` (an SVG) at its own width, in CSS pixels. */
  function chartBox(draw) {
    const box = h('div', { class: 'chart-box' });
    box.draw = draw;
    return box;
  }
  function drawChart(box) {
    if (!followed(box)) return;
    const width = Math.floor(box.getBoundingClientRect().width);
    if (width <= 0 || width === box.drawnWidth) return;
    box.drawnWidth = width;
    box.replaceChildren(box.draw(width));
  }
  /**
   * A table wider than its box scrolls sideways (on a phone): the box is
   * then a labelled region in the tab order, so a keyboard can scroll it.
   */
  function scrollable(wrap) {
    if (!followed(wrap)) return;
    if (wrap.scrollWidth > wrap.clientWidth + 1) {
      const heading = wrap.closest('section')?.querySelector('h2') || main.querySelector('h1');
      setAttrs(wrap, { role: 'region', tabindex: '0', 'aria-label': `${heading ? heading.textContent : 'Table'} (scrolls sideways)` });
    } else {
      for (const a of ['role', 'tabindex', 'aria-label']) wrap.removeAttribute(a);
    }
  }
  /** Lays out what was just put into `el` (charts, tables), before the page is ready. */
  function layout(el) {
    for (const box of el.querySelectorAll('.chart-box')) drawChart(box);
    for (const wrap of el.querySelectorAll('.table-wrap')) scrollable(wrap);
  }

  function ticks(lo, hi, count = 5) {
    if (!(hi > lo)) return { step: 1, values: [lo] };
    const raw = (hi - lo) / count;
    const mag = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((st) => st >= raw);
    const values = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) values.push(v);
    return { step, values };
  }
  const scale = (d0, d1, r0, r1) => (v) => (d1 === d0 ? (r0 + r1) / 2 : r0 + ((v - d0) / (d1 - d0)) * (r1 - r0));
  // About how wide a label of 11 px text is (digits are about 6.2 px).
  const labelWidth = (text) => text.length * 6.6;

  /** An SVG chart frame: the SVG, its title and description for screen readers. */
  function frame(width, height, title, desc, kind) {
    const id = `c${Math.random().toString(36).slice(2, 9)}`;
    return s('svg', {
      class: 'chart', viewBox: `0 0 ${width} ${height}`, role: 'img', 'data-chart': kind,
      'aria-labelledby': `${id}t ${id}d`, preserveAspectRatio: 'xMidYMid meet',
    }, s('title', { id: `${id}t` }, title), s('desc', { id: `${id}d` }, desc));
  }

  function yAxis(svg, y, lo, hi, x0, x1, format) {
    const t = ticks(lo, hi);
    const grid = s('g', { class: 'grid' });
    const labels = s('g', { class: 'axis' });
    for (const v of t.values) {
      grid.append(s('line', { x1: x0, x2: x1, y1: y(v), y2: y(v) }));
      labels.append(s('text', { x: x1 + 4, y: y(v) + 4 }, format ? format(v) : tickLabel(v, t.step)));
    }
    svg.append(grid, labels);
  }

  /**
   * Tick times for a time axis `px` pixels long over [t0, t1], on UTC
   * calendar boundaries: whole hours (at midnight the date) for spans under
   * three days; midnights every 1, 2, 3, 7 or 14 days (multiples of that
   * many days since 1970-01-01, so the ticks stay put as the window moves)
   * for longer ones; first days of months beyond. The step is the smallest
   * that keeps the labels apart.
   */
  function timeTicks(t0, t1, px) {
    const span = t1 - t0;
    if (!(span > 0)) return [{ t: t0, label: new Date(t0).toISOString().slice(5, 16).replace('T', ' ') }];
    const perMs = px / span;
    const fits = (ms, gap) => ms * perMs >= gap;
    const out = [];
    const every = (stepMs, label) => {
      for (let t = Math.ceil(t0 / stepMs) * stepMs; t <= t1; t += stepMs) out.push({ t, label: label(t) });
      return out;
    };
    if (span < 3 * DAY) {
      const hours = [1, 2, 3, 6, 12].find((n) => fits(n * HOUR, 56)) || 24;
      return every(hours * HOUR, (t) => (t % DAY === 0 ? day(t).slice(5) : new Date(t).toISOString().slice(11, 16)));
    }
    const days = [1, 2, 3, 7, 14].find((n) => fits(n * DAY, 52));
    if (days) return every(days * DAY, (t) => day(t).slice(5));
    const months = [1, 2, 3, 6].find((n) => fits(n * 30.44 * DAY, 64)) || 12;
    const start = new Date(t0);
    let m = start.getUTCFullYear() * 12 + start.getUTCMonth();
    if (Date.UTC(start.getUTCFullYear(), start.getUTCMonth(), 1) < t0) m += 1;
    for (m = Math.ceil(m / months) * months; ; m += months) {
      const t = Date.UTC(Math.floor(m / 12), m % 12, 1);
      if (t > t1) break;
      out.push({ t, label: day(t).slice(0, 7) });
    }
    return out;
  }
  /**
   * The time axis under a plot from `x0` to `x1` (bottom `bottom`) of an SVG
   * `width` wide: a tick and a label (`data-time`, ms) per tick time; a
   * label that would be cut at an edge is left out.
   */
  function timeAxis(svg, x, t0, t1, { x0, x1, bottom, labelY, width }) {
    const g = s('g', { class: 'axis', 'data-axis': 'time' });
    for (const { t, label } of timeTicks(t0, t1, x1 - x0)) {
      const at = x(t);
      if (at - labelWidth(label) / 2 < 0 || at + labelWidth(label) / 2 > width) continue;
      g.append(s('line', { x1: at, x2: at, y1: bottom, y2: bottom + 4 }),
        s('text', { x: at, y: labelY, 'text-anchor': 'middle', 'data-time': t }, label));
    }
    svg.append(g);
  }
  const swatch = (color) => s('svg', { class: 'swatch', width: 12, height: 12, 'aria-hidden': 'true' },
    s('rect', { width: 12, height: 12, rx: 2, fill: color }));
  const legend = (items) => h('div', { class: 'legend' }, items.map(([color, text]) => h('span', {}, swatch(color), text)));
  function altTable(summary, columns, rows) {
    return h('details', { class: 'alt' }, h('summary', {}, summary), table(columns, rows));
  }

  /** Candlesticks: one `g.candle` (wick and body) per candle. */
  function candleChart(candles, symbol, interval) {
    const lows = candles.map((c) => Number(c.low));
    const highs = candles.map((c) => Number(c.high));
    const lo = Math.min(...lows); const hi = Math.max(...highs);
    const pad = (hi - lo) * 0.05 || hi * 0.01 || 1;
    const t0 = candles[0].time; const t1 = candles[candles.length - 1].time;
    const last = candles[candles.length - 1];
    return chartBox((W) => {
      const H = 320; const L = 10; const R = W - 70; const T = 10; const B = H - 30;
      const y = scale(lo - pad, hi + pad, B, T);
      const x = scale(t0, t1, L + 4, R - 4);
      const w = Math.max(1, ((R - L) / candles.length) * 0.7);
      const svg = frame(W, H, `${symbol} price, ${interval} candles`,
        `${candles.length} candles from ${when(candles[0].openTime)} to ${when(last.openTime)}; last close ${last.close}, range ${exact(String(lo))} to ${exact(String(hi))}.`, 'candles');
      yAxis(svg, y, lo - pad, hi + pad, L, R);
      const marks = s('g', { class: 'marks' });
      for (const c of candles) {
        const up = Number(c.close) >= Number(c.open);
        const color = up ? C.longSoft : C.shortSoft;
        const top = y(Math.max(Number(c.open), Number(c.close)));
        const bottom = y(Math.min(Number(c.open), Number(c.close)));
        marks.append(s('g', { class: 'candle' },
          s('title', {}, `${when(c.openTime)} O ${c.open} H ${c.high} L ${c.low} C ${c.close}, volume ${c.volume}`),
          s('line', { x1: x(c.time), x2: x(c.time), y1: y(Number(c.high)), y2: y(Number(c.low)), stroke: color }),
          s('rect', { x: x(c.time) - w / 2, y: top, width: w, height: Math.max(1, bottom - top), fill: color })));
      }
      svg.append(marks);
      timeAxis(svg, x, t0, t1, { x0: L + 4, x1: R - 4, bottom: B, labelY: H - 8, width: W });
      return svg;
    });
  }

  /**
   * Lines over time: `series` = [{name, color, values: [[ms, number]]}],
   * one `path.series` each (`data-points` = its point count).
   */
  function lineChart(series, { title, desc, format, zero = false, height = 240 }) {
    const points = series.flatMap((se) => se.values);
    const ts = points.map((p) => p[0]);
    const vs = points.map((p) => p[1]);
    const t0 = Math.min(...ts); const t1 = Math.max(...ts);
    let lo = Math.min(...vs); const hi = Math.max(...vs);
    if (zero) lo = Math.min(0, lo);
    const pad = (hi - lo) * 0.06 || Math.abs(hi) * 0.05 || 1;
    const bottomValue = zero && lo === 0 ? 0 : lo - pad;
    const box = chartBox((W) => {
      const H = height; const L = 10; const R = W - 80; const T = 10; const B = H - 30;
      const y = scale(bottomValue, hi + pad, B, T);
      const x = scale(t0, t1, L, R);
      const svg = frame(W, H, title, desc, 'lines');
      yAxis(svg, y, bottomValue, hi + pad, L, R, format);
      for (const se of series) {
        const d = se.values.map(([t, v], i) => `${i ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)}`).join('');
        svg.append(s('path', {
          class: 'series', d, fill: 'none', stroke: se.color, 'stroke-width': 2,
          'data-series': se.name, 'data-points': se.values.length,
        }, s('title', {}, se.name)));
        // A line needs two points; one is drawn as a dot, not left blank.
        if (se.values.length === 1) {
          const [[t, v]] = se.values;
          svg.append(s('circle', { cx: x(t), cy: y(v), r: 4, fill: se.color }, s('title', {}, `${se.name}: ${v}`)));
        }
      }
      timeAxis(svg, x, t0, t1, { x0: L, x1: R, bottom: B, labelY: H - 10, width: W });
      return svg;
    });
    return [legend(series.map((se) => [se.color, se.name])), box];
  }

  // ---------------------------------------------------------------- markets

  const marketSort = { key: 'volume24h', order: 'desc' };
  let marketSearch = '';

  function marketsPage() {
    const list = h('div');
    const coverage = h('p', { class: 'muted' });
    const search = h('input', {
      id: 'market-search', type: 'search', placeholder: 'BTC, xyz:TSLA…', value: marketSearch,
      'aria-controls': 'markets-table',
    });
    const count = h('span', { class: 'muted', role: 'status', 'aria-live': 'polite' });
    main.replaceChildren(
      h('h1', {}, 'Markets'),
      coverage,
      h('div', { class: 'toolbar' }, h('label', { for: 'market-search' }, 'Search'), search, count),
      list);
    section(coverage, async () => {
      const c = await api(net('/coverage'));
      return `${exact(String(c.wallets.tracked))} wallets tracked; their positions are ${(Number(c.coveredShare) * 100).toFixed(1)} % of the open interest (as of ${when(c.asOf)}).`;
    });
    let rows = [];
    const apply = () => {
      const q = marketSearch.trim().toLowerCase();
      let shown = 0;
      for (const tr of list.querySelectorAll('tbody tr')) {
        const hit = !q || tr.dataset.symbol.toLowerCase().includes(q);
        tr.hidden = !hit;
        shown += hit ? 1 : 0;
      }
      count.textContent = `${shown} of ${rows.length} markets`;
      const none = list.querySelector('.empty');
      if (shown === 0 && rows.length && !none) list.append(empty(`No market matches “${marketSearch}”.`));
      if (shown > 0 && none) none.remove();
    };
    search.addEventListener('input', () => { marketSearch = search.value; apply(); });
    const load = () => section(list, async () => {
      const page = await api(net('/markets'), { sort: marketSort.key, order: marketSort.order });
      rows = page.items;
      if (!rows.length) return empty('No market has been scanned yet: run a scan, track or seed-demo.');
      const t = table([
        { title: 'Market', cell: (m) => marketLink(m.symbol) },
        { title: 'Price', num: true, cell: (m) => exact(m.price) },
        { title: '24h change', num: true, sortKey: 'change24hPct', cell: (m) => h('span', { class: Number(m.change24hPct) >= 0 ? 'long' : 'short' }, pct(m.change24hPct)) },
        { title: 'Volume 24h', num: true, sortKey: 'volume24h', cell: (m) => compactUsd(m.volume24h) },
        { title: 'Open interest', num: true, sortKey: 'openInterest', cell: (m) => compactUsd(m.openInterest) },
        { title: 'Funding', num: true, cell: (m) => percent(m.funding) },
        { title: 'Longs', num: true, cell: (m) => exact(String(m.longCount)) },
        { title: 'Shorts', num: true, cell: (m) => exact(String(m.shortCount)) },
        { title: 'Long/short', num: true, cell: (m) => m.longShortRatio ?? '–' },
        { title: 'Liquidation value', num: true, sortKey: 'totalLiquidationValue', cell: (m) => compactUsd(m.totalLiquidationValue) },
      ], rows, {
        sort: {
          ...marketSort,
          onSort: (key) => {
            marketSort.order = marketSort.key === key && marketSort.order === 'desc' ? 'asc' : 'desc';
            marketSort.key = key;
            load().then(() => list.querySelector(`th button[data-sort="${key}"]`)?.focus());
          },
        },
        rowAttrs: (m) => ({ 'data-symbol': m.symbol }),
      });
      t.querySelector('table').id = 'markets-table';
      return t;
    }).then(apply);
    load();
  }

  // ---------------------------------------------------------------- one market

  function marketPage(asset) {
    const path = net(`/markets/${encodeURIComponent(asset)}`);
    const title = h('h1', {}, asset);
    const cards = h('div');
    const price = h('div');
    const liq = h('div');
    const whales = h('div');
    const history = h('div');
    const cohorts = h('div');
    let interval = '1h';
    let historyInterval = '4h';
    let market = null;

    const priceSection = h('section', { class: 'panel', 'aria-labelledby': 'price-h' },
      h('h2', { id: 'price-h' }, 'Price'),
      h('div', { class: 'toolbar' }, picker('Interval', [['15m', '15 minutes'], ['1h', '1 hour'], ['4h', '4 hours'], ['1d', '1 day']], interval,
        (v) => { interval = v; loadCandles(); })),
      price);
    // The rest of the page appears once the market is known: an unknown
    // asset shows one problem, not one per section.
    const rest = [priceSection,
      h('section', { class: 'panel', 'aria-labelledby': 'liq-h' }, h('h2', { id: 'liq-h' }, 'Liquidation map'), liq),
      h('section', { class: 'panel', 'aria-labelledby': 'whales-h' }, h('h2', { id: 'whales-h' }, 'Whale positions'), whales),
      h('section', { class: 'panel', 'aria-labelledby': 'hist-h' }, h('h2', { id: 'hist-h' }, 'Positioning over time'),
          h('div', { class: 'toolbar' }, picker('Buckets', HISTORY_BUCKETS, historyInterval,
            (v) => { historyInterval = v; loadHistory(); })),
          history),
      h('section', { class: 'panel', 'aria-labelledby': 'coh-h' }, h('h2', { id: 'coh-h' }, 'Size classes'), cohorts)];
    const liveSlot = h('div');
    rest.push(liveSlot);
    main.replaceChildren(h('p', {}, h('a', { href: '#/' }, '← Markets')), title, cards);

    section(cards, async () => {
      market = await api(path);
      title.textContent = market.symbol;
      document.title = `${market.symbol} · Market data explorer`;
      main.append(...rest);
      startRest();
      return h('div', { class: 'cards' },
        card('Price', exact(market.price)),
        card('24h change', pct(market.change24hPct), Number(market.change24hPct) >= 0 ? 'long' : 'short'),
        card('Open interest', compactUsd(market.openInterest)),
        card('Volume 24h', compactUsd(market.volume24h)),
        card('Funding (hourly)', percent(market.funding)),
        card('Longs / shorts', `${exact(String(market.longCount))} / ${exact(String(market.shortCount))}`),
        card('Long liquidation value', compactUsd(market.longLiquidationValue), 'long'),
        card('Short liquidation value', compactUsd(market.shortLiquidationValue), 'short'));
    });

    const loadCandles = () => section(price, async () => {
      const limit = 240;
      const page = await api(`${path}/candles`, { interval, limit, from: Date.now() - limit * (INTERVAL_MS[interval] || DAY) });
      if (!page.candles.length) return empty(`No ${interval} candles in this window.`);
      return candleChart(page.candles, page.coin, interval);
    });

    // The liquidation map: today's levels, or the 90-day heatmap.
    let liqView = 'today';
    const tabs = [['today', 'Today'], ['heatmap', '90 days']];
    const liqBody = h('div', { role: 'tabpanel', id: 'liq-panel' });
    const tabButtons = tabs.map(([v, text]) => h('button', {
      type: 'button', role: 'tab', id: `tab-${v}`, 'aria-controls': 'liq-panel',
      'aria-selected': String(v === liqView), tabindex: v === liqView ? '0' : '-1',
      onclick: () => selectTab(v),
    }, text));
    const tablist = h('div', { class: 'tablist', role: 'tablist', 'aria-label': 'Liquidation view' }, tabButtons);
    tablist.addEventListener('keydown', (ev) => {
      if (ev.key !== 'ArrowRight' && ev.key !== 'ArrowLeft') return;
      const i = tabs.findIndex(([v]) => v === liqView);
      const next = tabs[(i + (ev.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length][0];
      selectTab(next);
      document.getElementById(`tab-${next}`).focus();
    });
    const selectTab = (v) => {
      liqView = v;
      for (const b of tabButtons) {
        const on = b.id === `tab-${v}`;
        b.setAttribute('aria-selected', String(on));
        b.tabIndex = on ? 0 : -1;
      }
      liqBody.setAttribute('aria-labelledby', `tab-${v}`);
      if (v === 'today') section(liqBody, () => liquidationToday(asset, market));
      else section(liqBody, () => heatmap(asset));
    };
    liq.replaceChildren(h('p', { class: 'muted' }, 'USD of open positions by the price at which they would be liquidated (scanned wallets only).'), tablist, liqBody);

    const loadWhales = (() => {
      let direction = '';
      let minValue = '';
      const list = h('div');
      const reload = () => pager(list,
        (cursor) => api(`${path}/whale-positions`, { direction, minValue, limit: 25, cursor }),
        (page) => (page.items.length ? positionsTable(page.items, false) : empty('No open position matches these filters.')));
      whales.replaceChildren(h('div', { class: 'toolbar' },
        picker('Direction', [['', 'Both'], ['long', 'Long'], ['short', 'Short']], direction, (v) => { direction = v; reload(); }),
        picker('Minimum value', MIN_VALUES, minValue, (v) => { minValue = v; reload(); })),
      list);
      return reload;
    })();

    const loadHistory = () => section(history, async () => {
      const limit = historyLimit(historyInterval);
      const page = await api(`${path}/history`, { interval: historyInterval, limit });
      const items = page.items;
      if (!items.length) return empty('No history yet: it is written with every data version (scan, track, import or seed-demo).');
      const series = (name, color, f) => ({ name, color, values: items.map((p) => [p.time, Number(p[f])]) });
      const last = items[items.length - 1];
      return [
        h('div', { class: 'grid2' }, h('div', {}, h('h3', {}, 'Open positions'),
        lineChart([series('Longs', C.long, 'longCount'), series('Shorts', C.short, 'shortCount')], {
          title: `${asset}: long and short positions over time`,
          desc: `${items.length} buckets of ${historyInterval}; last: ${last.longCount} longs, ${last.shortCount} shorts.`,
          format: (v) => compact(v, 1), height: 260,
        })),
        h('div', {}, h('h3', {}, 'Liquidation value'),
        lineChart([series('Long liquidation value', C.long, 'longLiquidationValue'), series('Short liquidation value', C.short, 'shortLiquidationValue')], {
          title: `${asset}: USD liquidatable on each side over time`,
          desc: `${items.length} buckets of ${historyInterval}; last: long ${usd(last.longLiquidationValue)}, short ${usd(last.shortLiquidationValue)}.`,
          format: (v) => compactUsd(v, 1), height: 260,
        }))),
        altTable('Last 12 buckets as a table', [
          { title: 'Bucket (last observation)', cell: (p) => when(p.observedAt) },
          { title: 'Longs', num: true, cell: (p) => p.longCount },
          { title: 'Shorts', num: true, cell: (p) => p.shortCount },
          { title: 'Long liquidation value', num: true, cell: (p) => usd(p.longLiquidationValue) },
          { title: 'Short liquidation value', num: true, cell: (p) => usd(p.shortLiquidationValue) },
        ], items.slice(-12).reverse()),
      ];
    });

    const loadCohorts = () => section(cohorts, async () => {
      const c = await api(`${path}/cohorts`);
      if (!c.items.some((i) => i.count > 0)) return empty('No open position in this market.');
      return [cohortChart(c.items, asset), table([
        { title: 'Class', cell: (i) => i.sizeClass },
        { title: 'Side', cell: (i) => side(i.side) },
        { title: 'Positions', num: true, cell: (i) => exact(String(i.count)) },
        { title: 'Value', num: true, cell: (i) => compactUsd(i.positionValue) },
        { title: 'Avg leverage', num: true, cell: (i) => (i.averageLeverage ? `${Number(i.averageLeverage).toFixed(1)}×` : '–') },
        { title: 'Avg entry', num: true, cell: (i) => (i.averageEntryPrice ? exact(String(Number(i.averageEntryPrice).toPrecision(6))) : '–') },
        { title: 'uPnL', num: true, cell: (i) => compactUsd(i.uPnl) },
      ], c.items, { caption: `As of ${when(c.observedAt)}; wallets by account value: shrimp < $100K ≤ shark < $1M ≤ whale.` })];
    });

    function startRest() {
      liveSlot.replaceChildren(livePanel({ asset }));
      loadCandles();
      selectTab('today');
      loadWhales();
      loadHistory();
      loadCohorts();
    }
  }

  /** Position value by size class, one bar per side (a `rect.cohort` per class). */
  function cohortChart(items, asset) {
    const colors = { shrimp: C.shrimp, shark: C.shark, whale: C.whale };
    const box = chartBox((width) => {
      const W = Math.min(width, 700); const H = 110;
      const svg = frame(W, H, `${asset}: position value by size class`, items.map((i) => `${i.sizeClass} ${i.side}: ${usd(i.positionValue)}`).join('; '), 'cohorts');
      ['long', 'short'].forEach((sd, row) => {
        const parts = items.filter((i) => i.side === sd);
        const total = parts.reduce((a, i) => a + Number(i.positionValue), 0);
        let x = 60;
        svg.append(s('text', { x: 0, y: 28 + row * 44 }, sd));
        for (const i of parts) {
          const w = total ? (Number(i.positionValue) / total) * (W - 70) : 0;
          svg.append(s('rect', { class: 'cohort', x, y: 12 + row * 44, width: w, height: 26, fill: colors[i.sizeClass], stroke: '#fff', 'stroke-width': 1.5 },
            s('title', {}, `${i.sizeClass} ${sd}: ${usd(i.positionValue)} (${total ? ((Number(i.positionValue) / total) * 100).toFixed(1) : 0} %)`)));
          x += w;
        }
      });
      return svg;
    });
    return [legend(Object.entries(colors).map(([k, c]) => [c, k])), box];
  }

  /**
   * The price range holding the middle `share` of the USD of `levels`
   * ([price, usd] pairs): one far bucket would otherwise squeeze the rest
   * into a few pixels.
   */
  function usdRange(levels, share) {
    const sorted = [...levels].sort((a, b) => a[0] - b[0]);
    const total = sorted.reduce((a, l) => a + l[1], 0);
    const tail = (total * (1 - share)) / 2;
    let acc = 0; let lo = sorted[0][0]; let hi = sorted[sorted.length - 1][0]; let loSet = false;
    for (const [p, v] of sorted) {
      acc += v;
      if (!loSet && acc > tail) { lo = p; loSet = true; }
      if (acc >= total - tail) { hi = p; break; }
    }
    return [lo, hi, total];
  }

  /** Today's levels as bars (`rect.bar`) by bucket price, with the mark price. */
  async function liquidationToday(asset, market) {
    // Yesterday too: the server's current day may differ from this clock's.
    const page = await api(net('/liquidity-levels'), { asset, fromDate: day(Date.now() - DAY), toDate: day(Date.now() + DAY) });
    const d = page.items[page.items.length - 1];
    if (!d || !d.levels.length) return empty('No open position with a known liquidation price today.');
    const mark = Number(market.price);
    const bucket = Number(d.bucketSize);
    const [pLo, pHi, total] = usdRange(d.levels.map((l) => [Number(l.bucketPrice), Number(l.totalAmountUsd)]), 0.99);
    const lo = Math.min(pLo, mark) - bucket; const hi = Math.max(pHi, mark) + bucket;
    const inRange = d.levels.filter((l) => Number(l.bucketPrice) >= lo && Number(l.bucketPrice) <= hi);
    const shown = inRange.reduce((a, l) => a + Number(l.totalAmountUsd), 0);
    const top = Math.max(...inRange.map((l) => Number(l.totalAmountUsd)));
    const chart = chartBox((W) => {
      const H = 330; const L = 10; const R = W - 80; const T = 14; const B = 300;
      const x = scale(lo, hi, L, R);
      const y = scale(0, top * 1.05, B, T);
      const svg = frame(W, H, `${asset} liquidation map, ${d.date}`,
        `${d.levels.length} price buckets of ${d.bucketSize}; longs ${usd(d.totals.long.totalAmountUsd)} in ${d.totals.long.positionCount} positions, shorts ${usd(d.totals.short.totalAmountUsd)} in ${d.totals.short.positionCount} positions; mark price ${market.price}. Prices ${tickLabel(lo, bucket)} to ${tickLabel(hi, bucket)} are shown, holding ${((shown / total) * 100).toFixed(1)} % of the USD.`, 'liquidation-map');
      svg.dataset.from = lo;
      svg.dataset.to = hi;
      yAxis(svg, y, 0, top * 1.05, L, R, (v) => compactUsd(v, 1));
      const bw = Math.max(1.5, x(lo + bucket) - x(lo) - 0.5);
      const bars = s('g', { class: 'marks' });
      for (const l of inRange) {
        const v = Number(l.totalAmountUsd);
        bars.append(s('rect', {
          class: `bar ${l.side}`, x: x(Number(l.bucketPrice)) - bw / 2, y: y(v), width: bw, height: Math.max(0.5, B - y(v)),
          fill: l.side === 'long' ? C.longSoft : C.shortSoft,
        }, s('title', {}, `${l.side} liquidations near ${l.bucketPrice}: ${usd(l.totalAmountUsd)}, ${l.positionCount} positions`)));
      }
      svg.append(bars);
      // As many price labels as the width holds (at most 8), none cut at an edge.
      const px = ticks(lo, hi, Math.max(3, Math.min(8, Math.floor((R - L) / 80))));
      const axis = s('g', { class: 'axis' });
      for (const v of px.values) {
        const label = tickLabel(v, px.step);
        if (x(v) - labelWidth(label) / 2 < 0 || x(v) + labelWidth(label) / 2 > W) continue;
        axis.append(s('text', { x: x(v), y: H - 8, 'text-anchor': 'middle' }, label));
      }
      // The mark price's label goes left of its line near the right edge.
      const markLabel = `mark ${exact(market.price)}`;
      const leftOf = x(mark) + 4 + labelWidth(markLabel) > W;
      svg.append(axis,
        s('line', { class: 'mark-price', x1: x(mark), x2: x(mark), y1: T, y2: B }),
        s('text', { class: 'mark-label', x: x(mark) + (leftOf ? -4 : 4), y: T + 10, 'text-anchor': leftOf ? 'end' : 'start' }, markLabel));
      return svg;
    });
    const top10 = (sd) => d.levels.filter((l) => l.side === sd)
      .sort((a, b) => Number(b.totalAmountUsd) - Number(a.totalAmountUsd)).slice(0, 10);
    const levelColumns = [
      { title: 'Bucket price', num: true, cell: (l) => exact(l.bucketPrice) },
      { title: 'Positions', num: true, cell: (l) => l.positionCount },
      { title: 'USD', num: true, cell: (l) => usd(l.totalAmountUsd) },
      { title: 'Liquidation prices', num: true, cell: (l) => `${exact(l.minLiquidationPrice)} – ${exact(l.maxLiquidationPrice)}` },
    ];
    return [
      h('div', { class: 'totals', 'data-date': d.date },
        h('div', { 'data-total': 'long' }, swatch(C.longSoft), 'Longs: ',
          h('strong', { class: 'long', 'data-usd': true }, usd(d.totals.long.totalAmountUsd)), ' in ',
          h('span', { 'data-count': true }, exact(String(d.totals.long.positionCount))), ' positions'),
        h('div', { 'data-total': 'short' }, swatch(C.shortSoft), 'Shorts: ',
          h('strong', { class: 'short', 'data-usd': true }, usd(d.totals.short.totalAmountUsd)), ' in ',
          h('span', { 'data-count': true }, exact(String(d.totals.short.positionCount))), ' positions'),
        h('div', { class: 'muted' }, `${d.date} (${d.coverage}), bucket ${d.bucketSize}, updated ${when(d.updatedAt)}`),
        shown < total ? h('div', { class: 'muted' }, `The chart shows the prices holding ${((shown / total) * 100).toFixed(1)} % of the USD; the tables and totals hold all of it.`) : null),
      chart,
      h('div', { class: 'grid2' },
        altTable('Top 10 long buckets as a table', levelColumns, top10('long')),
        altTable('Top 10 short buckets as a table', levelColumns, top10('short'))),
    ];
  }

  /** 90 days × price rows; colour = USD (`rect.cell` per non-empty cell). */
  async function heatmap(asset) {
    const to = Date.now();
    const [days, candles] = await Promise.all([
      all(net('/liquidity-levels'), { asset, fromDate: day(to - 89 * DAY), toDate: day(to), limit: 90 }, 'items'),
      api(net(`/markets/${encodeURIComponent(asset)}/candles`), { interval: '1d', limit: 90, from: to - 90 * DAY }),
    ]);
    // One column per day of the window, by date (a day without levels stays blank).
    const first = Date.parse(`${day(to - 89 * DAY)}T00:00:00Z`);
    const COLS = 90;
    const col = (d) => Math.round((Date.parse(`${d.date}T00:00:00Z`) - first) / DAY);
    const levels = days.flatMap((d) => d.levels.map((l) => [col(d), Number(l.bucketPrice), Number(l.totalAmountUsd)]));
    if (!levels.length) return empty('No liquidation levels in the last 90 days.');
    // Rows cover the prices holding 98 % of the USD, so one far bucket does
    // not squeeze the rest into a few rows.
    const [lo, top, total] = usdRange(levels.map((l) => [l[1], l[2]]), 0.98);
    const hi = top > lo ? top : lo + 1;
    const ROWS = 60;
    const step = (hi - lo) / ROWS;
    const grid = new Map();
    let shown = 0;
    for (const [i, p, v] of levels) {
      if (p < lo || p > hi) continue;
      const r = Math.min(ROWS - 1, Math.floor((p - lo) / step));
      const k = i * ROWS + r;
      grid.set(k, (grid.get(k) || 0) + v);
      shown += v;
    }
    const max = Math.max(...grid.values());
    const cellList = [];
    for (const [k, v] of grid) {
      const i = Math.floor(k / ROWS); const r = k % ROWS;
      const rowLo = lo + r * step;
      cellList.push({ i, r, date: day(first + i * DAY), from: rowLo, to: rowLo + step, usd: v });
    }
    // The daily close over the map: where the price went through the levels.
    const byDate = new Map(candles.candles.map((c) => [day(c.time), Number(c.close)]));
    const closes = days.map((d) => [col(d), byDate.get(d.date)]).filter(([, c]) => c !== undefined && c >= lo && c <= hi);
    const chart = chartBox((W) => {
      const H = 380; const L = 10; const R = W - 80; const T = 10; const B = 350;
      const cw = (R - L) / COLS; const rh = (B - T) / ROWS;
      const svg = frame(W, H, `${asset} liquidation heatmap, ${days[0].date} to ${days[days.length - 1].date}`,
        `${days.length} days by ${ROWS} price rows of ${exact(String(Number(step.toPrecision(4))))}; colour is the USD liquidatable in a cell on a square-root scale, darkest ${usd(String(Math.round(max)))}: a mid-blue cell holds a quarter of that. The rows hold ${((shown / total) * 100).toFixed(1)} % of the USD.`, 'heatmap');
      svg.dataset.days = days.length;
      svg.dataset.rows = ROWS;
      const y = scale(lo, hi, B, T);
      yAxis(svg, y, lo, hi, L, R);
      const cells = s('g', { class: 'marks' });
      for (const c of cellList) {
        cells.append(s('rect', {
          class: 'cell', x: L + c.i * cw, y: B - (c.r + 1) * rh, width: cw + 0.2, height: rh + 0.2, fill: heat(Math.sqrt(c.usd / max)),
        }, s('title', {}, `${c.date}, ${tickLabel(c.from, step)} – ${tickLabel(c.to, step)}: ${usd(String(Math.round(c.usd)))}`)));
      }
      svg.append(cells);
      if (closes.length > 1) {
        svg.append(s('path', {
          class: 'close-line', fill: 'none', stroke: C.accent, 'stroke-width': 2,
          d: closes.map(([i, c], n) => `${n ? 'L' : 'M'}${(L + (i + 0.5) * cw).toFixed(1)},${y(c).toFixed(1)}`).join(''),
        }, s('title', {}, 'Daily close')));
      }
      // Dates under the middle of their column.
      timeAxis(svg, (t) => L + ((t - first) / DAY + 0.5) * cw, first, first + (COLS - 1) * DAY,
        { x0: L, x1: R - cw, bottom: B, labelY: H - 8, width: W });
      return svg;
    });
    const top10 = [...cellList].sort((a, b) => b.usd - a.usd).slice(0, 10);
    return [
      h('div', { class: 'toolbar' }, heatLegend(max), legend([[C.accent, 'daily close']])),
      chart,
      altTable('Top 10 cells as a table', [
        { title: 'Date', cell: (c) => c.date },
        { title: 'Prices', num: true, cell: (c) => `${tickLabel(c.from, step)} – ${tickLabel(c.to, step)}` },
        { title: 'USD', num: true, cell: (c) => usd(String(Math.round(c.usd))) },
      ], top10),
    ];
  }

  // The heatmap's colours: white → blue → navy, at 0, ½ and 1.
  const HEAT = [[0, [247, 251, 255]], [0.5, [107, 174, 214]], [1, [8, 48, 107]]];
  /** The colour at `t` in [0, 1]: linear between the stops of HEAT. */
  function heat(t) {
    const u = Math.max(0, Math.min(1, t));
    const n = u <= HEAT[1][0] ? 0 : 1;
    const [[t0, a], [t1, b]] = [HEAT[n], HEAT[n + 1]];
    const f = (u - t0) / (t1 - t0);
    return `rgb(${a.map((c, i) => Math.round(c + (b[i] - c) * f)).join(',')})`;
  }

  /**
   * The heatmap's colour scale. A cell's colour is at √(USD / max) along
   * it, so the ticks are placed there with their USD: the middle of the
   * bar is a quarter of the maximum, not half.
   */
  function heatLegend(max) {
    const W = 300; const H = 34; const L = 24; const R = W - 24;
    const id = `g${Math.random().toString(36).slice(2, 9)}`;
    const at = [0, 0.25, 0.5, 0.75, 1];
    const value = (f) => (f === 0 ? '$0' : compactUsd(max * f * f));
    const svg = s('svg', {
      class: 'heat-scale', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'data-legend': 'heatmap',
      'aria-label': `Colour scale, square root of the USD in a cell: ${at.map((f) => `${value(f)} at ${f * 100} %`).join(', ')} of the bar.`,
    },
    s('defs', {}, s('linearGradient', { id },
      HEAT.map(([offset, rgb]) => s('stop', { offset, 'stop-color': `rgb(${rgb.join(',')})` })))),
    s('rect', { class: 'heat-bar', x: L, y: 2, width: R - L, height: 12, fill: `url(#${id})` }));
    for (const f of at) {
      const x = L + f * (R - L);
      svg.append(s('line', { x1: x, x2: x, y1: 14, y2: 18 }),
        s('text', { x, y: H - 4, 'text-anchor': 'middle', 'data-at': f, 'data-usd': max * f * f }, value(f)));
    }
    return h('span', { class: 'scale' }, 'USD in a cell (square-root scale)', svg);
  }

  /** Whale-positions items (or a wallet's positions, `bySymbol`). */
  function positionsTable(items, bySymbol) {
    return table([
      bySymbol ? { title: 'Market', cell: (p) => marketLink(p.symbol) } : { title: 'Wallet', cell: (p) => walletLink(p.address, p.label) },
      { title: 'Side', cell: (p) => side(p.direction) },
      { title: 'Value', num: true, cell: (p) => usd(p.positionValue) },
      { title: 'Size', num: true, cell: (p) => `${exact(p.size)} ${p.sizeUnit}` },
      { title: 'Leverage', num: true, cell: (p) => (p.leverage ? `${p.leverage}×` : '–') },
      { title: 'Entry', num: true, cell: (p) => exact(p.entryPrice) },
      { title: 'Mark', num: true, cell: (p) => exact(p.markPrice) },
      { title: 'Liquidation', num: true, cell: (p) => exact(p.liqPrice) },
      { title: 'uPnL', num: true, cell: (p) => h('span', { class: Number(p.uPnl) >= 0 ? 'long' : 'short' }, usd(p.uPnl)) },
      { title: 'Observed', cell: (p) => when(p.observedAt) },
    ], items);
  }

  function eventsTable(items, { wallet = true } = {}) {
    const size = (e) => `${exact(e.previousSize)} → ${exact(e.size)}`;
    return table([
      { title: 'Observed', cell: (e) => when(e.observedAt) },
      wallet ? { title: 'Wallet', cell: (e) => [walletLink(e.address, e.label), ...e.tags.map((t) => h('span', { class: 'tag' }, t))] } : null,
      { title: 'Market', cell: (e) => marketLink(e.symbol) },
      { title: 'Event', cell: (e) => e.kind.replaceAll('_', ' ') },
      { title: 'Side', cell: (e) => side(e.direction || e.previousDirection) },
      { title: 'Size', num: true, cell: size },
      { title: 'Value', num: true, cell: (e) => `${compactUsd(e.previousValue)} → ${compactUsd(e.value)}` },
      { title: 'Price', num: true, cell: (e) => exact(e.price) },
    ].filter(Boolean), items);
  }

  // ---------------------------------------------------------------- wallets

  const walletQuery = { size: '', direction: '', sort: 'accountTotalValue' };
  function walletsPage() {
    const list = h('div');
    const reload = () => pager(list,
      (cursor) => api(net('/wallets'), { ...walletQuery, limit: 50, cursor }),
      (page) => (page.items.length ? [
        h('p', { class: 'muted' }, `${exact(String(page.total))} wallets match.`),
        table([
          { title: 'Wallet', cell: (w) => [walletLink(w.address, w.label), ...w.tags.map((t) => h('span', { class: 'tag' }, t))] },
          { title: 'Class', cell: (w) => w.sizeClass },
          { title: 'Side', cell: (w) => side(w.direction) },
          { title: 'Account value', num: true, cell: (w) => usd(w.accountTotalValue) },
          { title: 'Position value', num: true, cell: (w) => usd(w.totalPositionValue) },
          { title: 'Leverage', num: true, cell: (w) => (w.leverage ? `${w.leverage}×` : '–') },
          { title: 'Positions', num: true, cell: (w) => w.positions },
          { title: 'Net PnL', num: true, cell: (w) => (w.netPnl ? compactUsd(w.netPnl) : '–') },
          { title: 'ROI', num: true, cell: (w) => (w.roi ? pct(w.roi) : '–') },
          { title: 'Observed', cell: (w) => when(w.observedAt) },
        ], page.items),
      ] : empty('No wallet matches these filters.')));
    main.replaceChildren(h('h1', {}, 'Wallets'),
      h('div', { class: 'toolbar' },
        picker('Size class', [['', 'All'], ['whale', 'Whales (≥ $1M)'], ['shark', 'Sharks ($100K–$1M)'], ['shrimp', 'Shrimp (< $100K)']], walletQuery.size, (v) => { walletQuery.size = v; reload(); }),
        picker('Direction', [['', 'Both'], ['long', 'Net long'], ['short', 'Net short']], walletQuery.direction, (v) => { walletQuery.direction = v; reload(); }),
        picker('Sort by', [['accountTotalValue', 'Account value'], ['totalPositionValue', 'Position value'], ['netPnl', 'Net PnL'], ['roi', 'ROI'], ['winRate', 'Win rate']], walletQuery.sort, (v) => { walletQuery.sort = v; reload(); })),
      list);
    reload();
  }

  function walletPage(address) {
    const path = net(`/wallets/${encodeURIComponent(address)}`);
    const head = h('div');
    const positions = h('div');
    const history = h('div');
    const events = h('div');
    let interval = '4h';
    // As on the market page, the rest appears once the wallet is known.
    const rest = [
      h('section', { class: 'panel', 'aria-labelledby': 'pos-h' }, h('h2', { id: 'pos-h' }, 'Open positions'), positions),
      h('section', { class: 'panel', 'aria-labelledby': 'wh-h' }, h('h2', { id: 'wh-h' }, 'Account over time'),
        h('div', { class: 'toolbar' }, picker('Buckets', HISTORY_BUCKETS, interval, (v) => { interval = v; loadHistory(); })),
        history),
      h('section', { class: 'panel', 'aria-labelledby': 'ev-h' }, h('h2', { id: 'ev-h' }, 'Position events'), events)];
    main.replaceChildren(h('p', {}, h('a', { href: '#/wallets' }, '← Wallets')), head);

    section(head, async () => {
      const d = await api(path);
      const w = d.wallet;
      positions.replaceChildren(d.positions.length ? positionsTable(d.positions, true) : empty('This wallet holds no open position.'));
      main.append(...rest);
      loadHistory();
      pager(events, (cursor) => api(net('/position-events'), { address, limit: 25, cursor }),
        (page) => (page.items.length ? eventsTable(page.items, { wallet: false }) : empty('No position event recorded for this wallet.')));
      document.title = `${w.label || shortAddress(w.address)} · Market data explorer`;
      return [
        h('h1', {}, w.label || 'Wallet', ' ', h('span', { class: 'mono muted' }, w.address)),
        h('p', {}, w.tags.map((t) => h('span', { class: 'tag' }, t)), `${w.sizeClass}, net ${w.direction || 'flat'}; observed ${when(w.observedAt)}`,
          w.strategy ? `; strategy ${w.strategy.replaceAll('_', ' ')}` : ''),
        h('div', { class: 'cards' },
          card('Account value', compactUsd(w.accountTotalValue)),
          card('Position value', compactUsd(w.totalPositionValue)),
          card('Long value', compactUsd(w.longValue), 'long'),
          card('Short value', compactUsd(w.shortValue), 'short'),
          card('Leverage', w.leverage ? `${w.leverage}×` : '–'),
          card('Positions', String(w.positions)),
          card('Net PnL', w.netPnl ? compactUsd(w.netPnl) : '–'),
          card('ROI / win rate', `${w.roi ? pct(w.roi) : '–'} / ${w.winRate ? `${w.winRate} %` : '–'}`)),
      ];
    });
    const loadHistory = () => section(history, async () => {
      const limit = historyLimit(interval);
      const page = await api(`${path}/history`, { interval, limit });
      if (!page.items.length) return empty('No history for this wallet yet.');
      const series = (name, color, f) => ({ name, color, values: page.items.map((p) => [p.time, Number(p[f])]) });
      const last = page.items[page.items.length - 1];
      return [
        lineChart([series('Account value', C.accent, 'accountTotalValue'), series('Long value', C.long, 'longValue'), series('Short value', C.short, 'shortValue')], {
          title: 'Account and position value over time',
          desc: `${page.items.length} buckets of ${interval}; last: account ${usd(last.accountTotalValue)}, long ${usd(last.longValue)}, short ${usd(last.shortValue)}.`,
          format: (v) => compactUsd(v, 1), zero: true,
        }),
        altTable('Last 12 buckets as a table', [
          { title: 'Bucket (last observation)', cell: (p) => when(p.observedAt) },
          { title: 'Account value', num: true, cell: (p) => usd(p.accountTotalValue) },
          { title: 'Long value', num: true, cell: (p) => usd(p.longValue) },
          { title: 'Short value', num: true, cell: (p) => usd(p.shortValue) },
          { title: 'uPnL', num: true, cell: (p) => usd(p.uPnl) },
        ], page.items.slice(-12).reverse()),
      ];
    });
  }

  // ---------------------------------------------------------------- events

  const eventQuery = { kind: '', minValue: '1000000', asset: '' };
  function eventsPage() {
    const list = h('div');
    const feed = h('div');
    const reload = () => {
      feed.replaceChildren(livePanel(eventQuery));
      pager(list, (cursor) => api(net('/position-events'), { ...eventQuery, limit: 50, cursor }),
        (page) => (page.items.length ? eventsTable(page.items) : empty('No event matches these filters.')));
    };
    const asset = h('input', { id: 'event-asset', type: 'search', value: eventQuery.asset, placeholder: 'all', size: 10 });
    asset.addEventListener('change', () => { eventQuery.asset = asset.value.trim(); reload(); });
    main.replaceChildren(h('h1', {}, 'Position events'),
      h('p', { class: 'muted' }, 'Derived from consecutive observations of each wallet, newest first.'),
      h('div', { class: 'toolbar' },
        picker('Event', [['', 'All'], ['opened', 'Opened'], ['increased', 'Increased'], ['reduced', 'Reduced'], ['closed', 'Closed'], ['closed_near_liquidation', 'Closed near liquidation'], ['flipped', 'Flipped']], eventQuery.kind, (v) => { eventQuery.kind = v; reload(); }),
        picker('Minimum value', MIN_VALUES, eventQuery.minValue, (v) => { eventQuery.minValue = v; reload(); }),
        h('span', {}, h('label', { for: 'event-asset' }, 'Market'), asset)),
      feed,
      list);
    reload();
  }

  // ---------------------------------------------------------------- routing

  async function route() {
    if (live) { live.abort(); live = null; }
    generation += 1;
    pending = 0;
    const gen = generation;
    if (!sessionStorage.getItem(KEY)) { askKey(''); return; }
    document.getElementById('forget-key').hidden = false;
    document.body.dataset.state = 'loading';
    if (!network) {
      try {
        const networks = await api('/networks');
        network = networks.items.length ? networks.items[0].network : null;
      } catch (e) {
        if (e instanceof KeyRejected) { askKey(e.message); return; }
        main.replaceChildren(problemBox(e));
        settle();
        return;
      }
      if (gen !== generation) return;
      if (!network) { main.replaceChildren(empty('This server serves no network.')); settle(); return; }
    }
    const [page, ...rest] = location.hash.replace(/^#\/?/, '').split('/');
    const arg = rest.length ? decodeURIComponent(rest.join('/')) : '';
    for (const a of document.querySelectorAll('[data-nav]')) {
      if (a.dataset.nav === (page || 'markets') && !arg) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    document.title = 'Market data explorer';
    if (page === 'markets' && arg) marketPage(arg);
    else if (page === 'wallets' && arg) walletPage(arg);
    else if (page === 'wallets') walletsPage();
    else if (page === 'events') eventsPage();
    else marketsPage();
    settle();
  }

  document.getElementById('forget-key').addEventListener('click', () => askKey(''));
  window.addEventListener('hashchange', () => {
    route();
    main.focus({ preventScroll: true });
    window.scrollTo(0, 0);
  });
  route();
})();
