// Tollgate dashboard, requests: the request log of the account (or of one of its
// organizations), filtered by model, status and key, a page at a time; a row opens its record
// with its upstream legs and, where payload logging was on, its payloads; the list as JSON
// lines; and the account's payload-logging switch.
(function () {
  'use strict';
  const TG = window.TG;
  const { h } = TG;

  const STATUSES = [
    { value: '', label: 'Any status' },
    { value: 'ok', label: 'Succeeded' },
    { value: 'error', label: 'Failed or refused' },
    { value: '402', label: '402 (credits)' },
    { value: '429', label: '429 (limits)' },
  ];

  function statusBadge(status) {
    const s = TG.num(status);
    if (s === null) return TG.badge('—', 'off');
    return TG.badge(String(s), s >= 200 && s < 300 ? 'live' : s >= 500 ? 'bad' : 'warn');
  }

  const ms = (x) => (TG.num(x) === null ? '—' : `${TG.int(x)} ms`);

  // The query of the list (and of its export) from the filters.
  function query(v, cursor, format) {
    const q = new URLSearchParams();
    if (v.organization_id) q.set('organization_id', v.organization_id);
    if (v.model) q.set('model', v.model);
    if (v.status) q.set('status', v.status);
    if (v.key_id) q.set('key_id', v.key_id);
    if (cursor) q.set('cursor', cursor);
    if (format) q.set('format', format);
    return q.toString();
  }

  function payload(title, body, truncated, id) {
    if (body === null || body === undefined) return null;
    return h('div', { class: 'payload', id },
      h('h3', { text: title + (truncated ? ' (cut at the size limit)' : '') }),
      h('pre', { class: 'payload-body', text: TG.str(body) }));
  }

  // One record, its legs and its payloads.
  function detail(r) {
    const legs = TG.arr(r.legs);
    return h('section', { class: 'card', id: 'request-detail', 'data-request-id': TG.str(r.id) },
      h('h2', {}, 'Request ', h('code', { text: TG.str(r.id) })),
      h('dl', { class: 'facts' },
        h('dt', { text: 'Time' }), h('dd', { text: TG.time(r.created_at) }),
        h('dt', { text: 'Key' }), h('dd', {}, h('code', { text: TG.str(r.key_id) })),
        h('dt', { text: 'Door' }), h('dd', { text: TG.str(r.door) }),
        h('dt', { text: 'Model' }), h('dd', { text: `${TG.str(r.model_requested) || '—'} → ${TG.str(r.model_used) || '—'} (${TG.str(r.provider) || '—'})` }),
        h('dt', { text: 'Status' }), h('dd', {}, statusBadge(r.status)),
        h('dt', { text: 'Tokens in / out' }), h('dd', { text: `${TG.int(r.prompt_tokens)} / ${TG.int(r.completion_tokens)}` }),
        h('dt', { text: 'Credits' }), h('dd', { text: TG.credits(r.cost) }),
        h('dt', { text: 'Latency, first token' }), h('dd', { text: `${ms(r.latency_ms)}, ${ms(r.ttft_ms)}` }),
        r.error ? h('dt', { text: 'Error' }) : null, r.error ? h('dd', { class: 'request-error', text: TG.str(r.error) }) : null),
      h('h3', { text: 'Upstream legs' }),
      TG.table('Upstream legs', ['Model', 'Provider', 'Endpoint', 'Outcome', 'Reason', { num: 'Duration' }],
        legs.map((l) => h('tr', { class: 'leg' },
          h('td', {}, h('code', { text: TG.str(l.model) })),
          h('td', { text: TG.str(l.provider) }),
          h('td', {}, h('code', { text: TG.str(l.endpoint) })),
          h('td', {}, TG.badge(TG.str(l.outcome), l.outcome === 'served' ? 'live' : 'warn')),
          h('td', { text: TG.str(l.reason || l.detail) || '—' }),
          h('td', { class: 'num', text: ms(l.duration_ms) }))),
        'No upstream was called.'),
      r.payload_stored
        ? h('div', { class: 'payloads' },
          payload('Request body', r.request_body, r.request_truncated, 'request-payload'),
          payload('Response', r.response_body, r.response_truncated, 'response-payload'))
        : h('p', { class: 'muted', id: 'no-payload', text: 'No payload stored: payload logging was off for this key and its wallet, or its payloads passed their retention.' }));
  }

  async function open(id, into) {
    TG.replace(into, TG.loading());
    const res = await TG.api.get(`/api/v1/requests/${TG.enc(id)}`);
    if (!res.ok) return TG.replace(into, TG.failed(res, 'the request'));
    TG.replace(into, detail(res.data));
    into.scrollIntoView({ block: 'nearest' });
  }

  function rows(list, into) {
    return list.map((r) => {
      const button = h('button', { type: 'button', class: 'secondary small open-request', text: 'Open' });
      button.addEventListener('click', () => open(r.id, into));
      return h('tr', { class: 'request-row', 'data-request-id': TG.str(r.id) },
        h('td', { class: 'nowrap', text: TG.time(r.created_at) }),
        h('td', {}, h('code', { text: TG.str(r.model_requested) || '—' })),
        h('td', {}, h('code', { text: TG.str(r.model_used) || '—' })),
        h('td', {}, statusBadge(r.status)),
        h('td', { class: 'num', text: `${TG.int(r.prompt_tokens)} / ${TG.int(r.completion_tokens)}` }),
        h('td', { class: 'num credits', text: TG.credits(r.cost) }),
        h('td', { class: 'num', text: ms(r.latency_ms) }),
        h('td', {}, button));
    });
  }

  // The account's own payload logging, with its switch.
  async function payloadSwitch() {
    const el = h('section', { class: 'card', id: 'payload-logging' }, TG.loading());
    const me = await TG.api.get('/api/v1/auth/me');
    if (!me.ok) return TG.replace(el, TG.failed(me, 'your settings'));
    const on = me.data.log_payloads === true;
    const button = h('button', { type: 'button', class: 'secondary', id: 'toggle-payloads', text: on ? 'Turn off' : 'Turn on' });
    button.addEventListener('click', () => TG.busy(button, async () => {
      const res = await TG.api.patch('/api/v1/auth/me', { log_payloads: !on });
      if (!res.ok) return TG.add(el, TG.notice(res.error, 'error'));
      await TG.render();
    }));
    TG.replace(el,
      h('div', { class: 'section-head' }, h('h2', { text: 'Payload logging' }), button),
      h('p', { id: 'payload-state', text: on
        ? 'On: the request and response bodies of every key of this account are kept (redacted of keys, size-capped) for the payload retention.'
        : 'Off: only each request’s record is kept. A key can turn it on for itself in its settings.' }));
    return el;
  }

  TG.pages.requests = async (view) => {
    const params = new URLSearchParams(location.search);
    const org = params.get('organization_id') || '';
    TG.add(view, h('h1', { tabindex: -1, text: org ? `Requests of ${org}` : 'Requests' }));
    if (!org) TG.add(view, await payloadSwitch());
    const detailBox = h('div', { id: 'request-detail-box' });
    const listBox = h('div', { id: 'requests-list' }, TG.loading());
    const more = h('button', { type: 'button', class: 'secondary', id: 'older-requests', text: 'Older', hidden: true });
    const exportLink = h('a', { class: 'button-link', id: 'export-jsonl', text: 'Export JSON lines', download: 'requests.jsonl' });
    let filters = { organization_id: org, model: '', status: '', key_id: '' };
    let cursor = null;
    let shown = [];

    async function load(append) {
      exportLink.href = `/api/v1/requests?${query(filters, null, 'jsonl')}`;
      const res = await TG.api.get(`/api/v1/requests?${query(filters, append ? cursor : null)}`);
      if (!res.ok) return TG.replace(listBox, TG.failed(res, 'the requests'));
      const data = TG.arr(res.data.data).filter((r) => r && typeof r.id === 'string');
      shown = append ? shown.concat(data) : data;
      cursor = typeof res.data.next_cursor === 'string' ? res.data.next_cursor : null;
      more.hidden = !cursor;
      TG.replace(listBox, TG.table('Requests',
        ['Time', 'Model requested', 'Model used', 'Status', { num: 'Tokens in / out' }, { num: 'Credits' }, { num: 'Latency' }, ''],
        rows(shown, detailBox), 'No requests match. Make one with a key and it shows up here.'));
    }
    more.addEventListener('click', () => TG.busy(more, () => load(true)));

    const form = TG.form({
      id: 'request-filters', inline: true, submit: 'Filter',
      fields: [
        { name: 'model', label: 'Model', placeholder: 'any model' },
        { name: 'status', label: 'Status', options: STATUSES, value: '' },
        { name: 'key_id', label: 'Key id', placeholder: 'any key' },
      ],
      onSubmit: async (v) => {
        filters = { organization_id: org, model: v.model, status: v.status, key_id: v.key_id };
        await load(false);
        return { ok: true };
      },
    });
    TG.add(view,
      h('section', { class: 'card', id: 'requests' },
        h('div', { class: 'section-head' }, h('h2', { text: 'Log' }), exportLink),
        form, listBox, h('div', { class: 'actions' }, more)),
      detailBox);
    await load(false);
  };
})();
