// Tollgate dashboard, usage: credits per day (a chart), per model, what caching saved, the recent
// requests with what each cost (a response cache hit marked), and a CSV export made in the
// browser.
(function () {
  'use strict';
  const TG = window.TG;
  const { h } = TG;

  // One CSV field: quoted when needed; text that a spreadsheet would run as a formula is
  // prefixed with a quote (numbers are left as they are).
  TG.csvField = (v) => {
    if (v === null || v === undefined) return '';
    if (typeof v === 'number') return String(v);
    let s = String(v);
    if (/^[=+\-@\t\r]/.test(s)) s = "'" + s;
    return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  TG.csv = (header, rows) => [header, ...rows].map((r) => r.map(TG.csvField).join(',')).join('\r\n') + '\r\n';

  // Offers `text` as a file download through a blob: URL made here (nothing leaves the page).
  TG.download = (name, text, type) => {
    const url = URL.createObjectURL(new Blob([text], { type: type || 'text/csv;charset=utf-8' }));
    const a = h('a', { href: url, download: name, hidden: true });
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  };

  const RECENT_HEADER = ['time_utc', 'request_id', 'model_requested', 'model_used', 'provider', 'prompt_tokens',
    'completion_tokens', 'credits', 'status', 'latency_ms', 'hold_note'];
  const recentCsvRow = (r) => [TG.time(r.created_at).replace(' UTC', ''), r.request_id, r.model_requested, r.model_used,
    r.provider, r.prompt_tokens, r.completion_tokens, r.credits, r.status, r.latency_ms, r.hold_note];

  function statusBadge(status) {
    const s = TG.num(status);
    if (s === null) return TG.badge('—', 'off');
    return TG.badge(String(s), s >= 200 && s < 300 ? 'live' : s >= 500 ? 'bad' : 'warn');
  }

  TG.pages.usage = async (view) => {
    TG.add(view, h('h1', { tabindex: -1, text: 'Usage' }), TG.loading());
    const res = await TG.api.get('/api/v1/usage');
    view.lastChild.remove();
    if (!res.ok) return TG.add(view, TG.failed(res, 'your usage'));
    const byDay = TG.arr(res.data.by_day).filter((r) => r && typeof r.day === 'string');
    const byModel = TG.arr(res.data.by_model).filter((r) => r && r.model !== undefined);
    const recent = TG.arr(res.data.recent).filter((r) => r && typeof r === 'object');
    const total = byDay.reduce((s, r) => s + (TG.num(r.credits) || 0), 0);
    const requests = byDay.reduce((s, r) => s + (TG.num(r.requests) || 0), 0);
    const savings = res.data.savings && typeof res.data.savings === 'object' ? res.data.savings : {};
    const savedNote = `${TG.credits(savings.response_cache)} by ${TG.int(savings.response_cache_hits)} response cache hits, `
      + `${TG.credits(savings.cache_reads)} by prompt cache reads`;
    const points = TG.perDay(byDay.map((r) => ({ day: r.day, value: TG.num(r.credits) || 0 })), 30);

    const exportButton = h('button', { type: 'button', class: 'secondary', id: 'export-csv', text: 'Export CSV' });
    exportButton.addEventListener('click', () => {
      TG.download(`tollgate-usage-${new Date().toISOString().slice(0, 10)}.csv`, TG.csv(RECENT_HEADER, recent.map(recentCsvRow)));
    });
    const dayExport = h('button', { type: 'button', class: 'secondary', id: 'export-days-csv', text: 'Export days as CSV' });
    dayExport.addEventListener('click', () => {
      TG.download(`tollgate-usage-by-day-${new Date().toISOString().slice(0, 10)}.csv`,
        TG.csv(['day', 'requests', 'prompt_tokens', 'completion_tokens', 'credits'],
          byDay.map((r) => [r.day, r.requests, r.prompt_tokens, r.completion_tokens, r.credits])));
    });

    TG.add(view, 
      h('div', { class: 'stats' },
        TG.stat('Credits, last 30 days', TG.credits(total), null, 'usage-total'),
        TG.stat('Requests, last 30 days', TG.int(requests), null, 'usage-requests'),
        TG.stat('Saved by caching, last 30 days', TG.credits(savings.total), savedNote, 'usage-saved')),
      h('section', { class: 'card', id: 'usage-chart' },
        h('h2', { text: 'Credits per day' }),
        TG.barChart(points, 'Credits', 'usage-chart-svg'),
        h('div', { class: 'actions' }, dayExport)),
      TG.section('By model',
        TG.table('Usage by model', ['Model', { num: 'Requests' }, { num: 'Prompt tokens' }, { num: 'Completion tokens' }, { num: 'Credits' }],
          byModel.map((r) => h('tr', {}, h('td', {}, h('code', { text: TG.str(r.model) })),
            [r.requests, r.prompt_tokens, r.completion_tokens].map((n) => h('td', { class: 'num', text: TG.int(n) })),
            h('td', { class: 'num', text: TG.credits(r.credits) }))), 'No requests in the last 30 days.')),
      h('section', { class: 'card', id: 'recent' },
        h('div', { class: 'section-head' }, h('h2', { text: 'Recent requests' }), recent.length ? exportButton : null),
        TG.table('Recent requests', ['Time', 'Model requested', 'Model used', { num: 'Tokens in / out' }, { num: 'Credits' }, 'Status', { num: 'Latency' }],
          recent.map((r) => h('tr', { 'data-request-id': TG.str(r.request_id) },
            h('td', { class: 'nowrap', text: TG.time(r.created_at) }),
            h('td', {}, h('code', { text: TG.str(r.model_requested) || '—' })),
            h('td', {}, h('code', { text: TG.str(r.model_used) || '—' }), r.hold_note ? h('div', { class: 'hint', text: TG.str(r.hold_note) }) : null,
              r.cache_hit === true ? h('div', { class: 'cache-hit' }, TG.badge('response cache hit', 'live')) : null),
            h('td', { class: 'num', text: `${TG.int(r.prompt_tokens)} / ${TG.int(r.completion_tokens)}` }),
            h('td', { class: 'num credits', text: TG.credits(r.credits) }),
            h('td', {}, statusBadge(r.status)),
            h('td', { class: 'num', text: TG.num(r.latency_ms) === null ? '—' : `${TG.int(r.latency_ms)} ms` }))),
          'No requests yet. Make one with your key and it shows up here.')));
  };
})();
