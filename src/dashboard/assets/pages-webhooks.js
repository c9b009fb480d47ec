// Tollgate dashboard, webhooks: the endpoints of the account (or of an organization the
// caller owns or administers), a new one with its events (its signing secret shown once),
// enabling, disabling and deleting, a test event, and each endpoint's delivery log.
(function () {
  'use strict';
  const TG = window.TG;
  const { h } = TG;

  const EVENTS = [
    ['balance.low', 'Balance below the threshold'],
    ['budget.threshold', 'A key budget or member cap at 80 % and 100 %'],
    ['key.expiring', 'A key expiring within 7 days'],
    ['key.expired', 'A key expired'],
    ['payment.received', 'A payment received'],
    ['tool_server.status_changed', 'A tool server of yours approved, rejected, suspended or resumed'],
  ];

  const statusKind = { delivered: 'live', pending: 'pending', failed: 'off' };

  function deliveriesTable(rows) {
    return TG.table('Deliveries', ['Created', 'Event', 'Type', 'Status', { num: 'Attempts' }, 'Last answer'],
      rows.map((d) => h('tr', { class: 'delivery', 'data-status': TG.str(d.status) },
        h('td', { class: 'nowrap', text: TG.time(d.created_at) }),
        h('td', {}, h('code', { text: TG.str(d.event_id) })),
        h('td', { text: TG.str(d.type) }),
        h('td', {}, TG.badge(TG.str(d.status), statusKind[d.status] || 'off')),
        h('td', { class: 'num', text: TG.int(d.attempts) }),
        h('td', { text: d.last_error ? TG.str(d.last_error) : d.last_status ? `HTTP ${d.last_status}` : '—' }))),
      'No deliveries yet.');
  }

  function endpointCard(e, reload) {
    const path = `/api/v1/webhooks/${TG.enc(e.id)}`;
    const log = h('div', { class: 'webhook-log', id: `deliveries-${e.id}` }, TG.loading());
    const status = h('div', { 'aria-live': 'polite' });
    const loadLog = async () => {
      const res = await TG.api.get(`${path}/deliveries`);
      TG.replace(log, res.ok ? deliveriesTable(TG.arr(res.data.data)) : TG.failed(res, 'the deliveries'));
    };
    const button = (cls, text, fn) => {
      const b = h('button', { type: 'button', class: `secondary ${cls}`, text });
      b.addEventListener('click', () => TG.busy(b, fn));
      return b;
    };
    const test = button('webhook-test', 'Send test event', async () => {
      const res = await TG.api.post(`${path}/test`, {});
      TG.replace(status, TG.notice(res.ok ? `Test event ${TG.str(res.data.event_id)} queued.` : res.error, res.ok ? 'ok' : 'error'));
      await loadLog();
    });
    const toggle = button('webhook-toggle', e.enabled ? 'Disable' : 'Enable', async () => {
      const res = await TG.api.patch(path, { enabled: !e.enabled });
      if (!res.ok) return TG.replace(status, TG.notice(res.error, 'error'));
      await reload(`${e.url} is ${e.enabled ? 'disabled' : 'enabled'}.`);
    });
    const del = button('webhook-delete', 'Delete', async () => {
      const res = await TG.api.del(path);
      if (!res.ok) return TG.replace(status, TG.notice(res.error, 'error'));
      await reload(`${e.url} is deleted.`);
    });
    const refresh = button('webhook-refresh', 'Refresh log', loadLog);
    loadLog();
    return h('article', { class: 'service webhook', id: `webhook-${e.id}` },
      h('div', { class: 'section-head' },
        h('h3', {}, h('code', { text: TG.str(e.url) })),
        TG.badge(e.enabled ? 'enabled' : 'disabled', e.enabled ? 'live' : 'off')),
      e.description ? h('p', { text: TG.str(e.description) }) : null,
      h('dl', { class: 'facts' },
        h('dt', { text: 'Events' }), h('dd', { text: TG.arr(e.events).join(', ') }),
        h('dt', { text: 'Balance threshold' }), h('dd', { text: e.balance_threshold === null ? '—' : `${TG.credits(e.balance_threshold)} credits` })),
      h('div', { class: 'actions' }, test, toggle, del, refresh), status,
      h('h4', { text: 'Deliveries' }), log);
  }

  function createForm(wallet, result, reload) {
    const boxes = EVENTS.map(([name, label]) => {
      const id = `event-${name.replace(/\W/g, '-')}`;
      return h('label', { class: 'check', for: id },
        h('input', { type: 'checkbox', id, name: 'events', value: name }), ` ${label} `, h('code', { text: name }));
    });
    const form = TG.form({
      id: 'webhook-form', submit: 'Add endpoint',
      fields: [
        { name: 'url', label: 'Endpoint URL', type: 'url', placeholder: 'https://example.com/tollgate-events', hint: 'Public http(s) only: private and loopback addresses are refused.' },
        { name: 'description', label: 'Description (optional)' },
        { name: 'balance_threshold', label: 'Balance threshold (credits, for balance.low)', type: 'number', min: 0, step: 'any', inputmode: 'decimal' },
      ],
      onSubmit: async (v) => {
        TG.clear(result);
        const events = boxes.map((b) => b.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
        const body = { url: v.url, events };
        if (v.description) body.description = v.description;
        if (v.balance_threshold !== '') body.balance_threshold = Number(v.balance_threshold);
        if (wallet()) body.organization_id = wallet();
        const res = await TG.api.post('/api/v1/webhooks', body);
        if (!res.ok) return res;
        TG.replace(result, h('div', { class: 'notice notice-ok', role: 'status' },
          h('p', {}, h('strong', { text: 'Endpoint added.' }), ' Its signing secret is shown this once: keep it to verify the Tollgate-Signature header.'),
          TG.code(TG.str(res.data.secret), 'webhook-secret')));
        form.reset();
        await reload();
        return { ok: true };
      },
    });
    form.insertBefore(h('fieldset', { class: 'events', id: 'webhook-events' }, h('legend', { text: 'Events' }), boxes),
      form.querySelector('.actions'));
    return form;
  }

  TG.pages.webhooks = async (view) => {
    const result = h('div', { id: 'webhook-result', 'aria-live': 'polite' });
    const list = h('div', { id: 'webhooks-list' }, TG.loading());
    const status = h('div', { 'aria-live': 'polite' });
    const picker = h('select', { id: 'webhook-wallet', 'aria-label': 'Whose endpoints' },
      h('option', { value: '', text: 'Your account' }));
    const wallet = () => picker.value;
    const reload = async (message) => {
      const q = wallet() ? `?organization_id=${TG.enc(wallet())}` : '';
      const res = await TG.api.get(`/api/v1/webhooks${q}`);
      const endpoints = res.ok ? TG.arr(res.data.data).filter((e) => e && typeof e.id === 'string') : [];
      TG.replace(list, !res.ok ? TG.failed(res, 'the endpoints')
        : endpoints.length ? h('div', { class: 'services' }, endpoints.map((e) => endpointCard(e, reload)))
          : h('p', { class: 'muted', text: 'No endpoint yet.' }));
      TG.replace(status, message ? TG.notice(message, 'ok') : null);
    };
    const orgs = await TG.api.get('/api/v1/orgs');
    for (const o of orgs.ok ? TG.arr(orgs.data.data) : []) {
      if (o && (o.role === 'owner' || o.role === 'admin')) picker.appendChild(h('option', { value: TG.str(o.id), text: TG.str(o.name) }));
    }
    picker.addEventListener('change', () => { TG.clear(result); reload(); });
    TG.add(view, h('h1', { tabindex: -1, text: 'Webhooks' }),
      h('p', { class: 'lead', text: 'Tollgate POSTs signed events to your endpoints: retried with backoff, in order, each with an idempotency id.' }),
      h('p', {}, h('label', { for: 'webhook-wallet', text: 'Endpoints of ' }), picker),
      TG.section('Add an endpoint', createForm(wallet, result, reload), result),
      h('section', { class: 'card' }, h('h2', { text: 'Your endpoints' }), status, list));
    await reload();
  };
})();
