// Tollgate dashboard, the tool developer: register an MCP tool server (checked live by the
// gateway), own services with their status and price, earnings, and how agents connect.
(function () {
  'use strict';
  const TG = window.TG;
  const { h } = TG;

  TG.statusBadge = (status) => {
    const s = TG.str(status);
    return TG.badge(s || '—', { live: 'live', pending: 'pending', suspended: 'warn', rejected: 'off' }[s] || 'off');
  };

  function priceEditor(s, reload) {
    const form = TG.form({
      inline: true, cls: 'price-form', submit: 'Save price',
      fields: [{ name: 'default_credits', label: `Price of ${s.slug} (credits per call)`, type: 'number', min: 0, max: 60, step: 1, value: s.default_credits, inputmode: 'numeric' }],
      onSubmit: async (v) => {
        const price = Number(v.default_credits);
        if (v.default_credits === '' || !Number.isInteger(price)) {
          return { ok: false, field: 'default_credits', error: 'default_credits: must be a whole number of credits' };
        }
        const res = await TG.api.patch(`/api/v1/mcp/services/${TG.enc(s.slug)}`, { default_credits: price });
        if (!res.ok) return res;
        await reload(`The price of ${s.slug} is now ${TG.credits(price)} credits per call.`);
        return { ok: true };
      },
    });
    return form;
  }

  function servicesList(services, reload) {
    if (!services.length) return h('p', { class: 'muted', text: 'You have not registered a tool server yet.' });
    return h('div', { class: 'services' }, services.map((s) => h('article', { class: 'service', id: `service-${s.slug}` },
      h('div', { class: 'section-head' },
        h('h3', {}, h('code', { text: s.slug }), s.name ? ` · ${s.name}` : ''),
        TG.statusBadge(s.status)),
      s.description ? h('p', { text: TG.str(s.description) }) : null,
      h('dl', { class: 'facts' },
        h('dt', { text: 'Upstream' }), h('dd', {}, h('code', { text: TG.str(s.upstream_url) })),
        h('dt', { text: 'Price' }), h('dd', { class: 'service-price', text: `${TG.credits(s.default_credits)} credits per call` }),
        h('dt', { text: 'Tools' }), h('dd', { class: 'service-tools', text: TG.arr(s.tools).join(', ') || '—' })),
      s.status === 'pending' ? h('p', { class: 'muted', text: 'Waiting for an operator to approve it. Agents see it once it is live.' }) : null,
      priceEditor(s, reload))));
  }

  function earningsSection(res) {
    if (!res.ok) return TG.section('Earnings', TG.failed(res, 'your earnings'));
    const e = res.data;
    const recent = TG.arr(e.recent).filter((r) => r && typeof r === 'object');
    const points = TG.perDay(recent.map((r) => ({ day: TG.day(r.created_at), value: TG.num(r.credits_earned) || 0 })), 30);
    return h('section', { class: 'card', id: 'earnings' },
      h('h2', { text: 'Earnings' }),
      h('div', { class: 'stats' },
        TG.stat('Credits earned', TG.credits(e.total_credits_earned), 'Already in your balance.', 'earned-total'),
        TG.stat('Paid calls', TG.int(e.total_calls), null, 'earned-calls')),
      h('h3', { text: 'Credits earned per day (recent calls)' }),
      TG.barChart(points, 'Credits earned', 'earnings-chart-svg'),
      h('h3', { text: 'Per service' }),
      TG.table('Earnings per service', ['Service', { num: 'Paid calls' }, { num: 'Credits earned' }],
        TG.arr(e.services).map((s) => h('tr', { id: `earned-${TG.str(s.slug)}` },
          h('td', {}, h('code', { text: TG.str(s.slug) })), h('td', { class: 'num', text: TG.int(s.calls) }),
          h('td', { class: 'num', text: TG.credits(s.credits_earned) }))), 'No paid calls yet.'),
      h('h3', { text: 'Recent paid calls' }),
      TG.table('Recent paid calls', ['Time', 'Tool', { num: 'Credits earned' }],
        recent.map((r) => h('tr', {}, h('td', { class: 'nowrap', text: TG.time(r.created_at) }),
          h('td', {}, h('code', { text: `${TG.str(r.slug)}__${TG.str(r.tool)}` })),
          h('td', { class: 'num', text: TG.credits(r.credits_earned) }))),
        'No paid calls yet.'));
  }

  function connectSection() {
    const base = TG.origin();
    return TG.section('Connect an MCP client',
      h('p', {}, 'Agents reach every live tool at ', h('code', { text: `${base}/mcp` }),
        ' (Streamable HTTP) with their Tollgate key; tools are named ', h('code', { text: 'slug__tool' }),
        '. One server alone: ', h('code', { text: `${base}/mcp/<slug>` }), '.'),
      TG.code(JSON.stringify({
        mcpServers: { tollgate: { type: 'http', url: `${base}/mcp`, headers: { Authorization: 'Bearer <YOUR_API_KEY>' } } },
      }, null, 2)));
  }

  TG.pages.developer = async (view) => {
    const result = h('div', { id: 'register-result', 'aria-live': 'polite' });
    const mine = h('div', { id: 'my-services' }, TG.loading());
    const status = h('div', { 'aria-live': 'polite' });
    const earnings = h('div', {}, TG.loading());
    const reload = async (message) => {
      const [own, earned] = await Promise.all([TG.api.get('/api/v1/mcp/services'), TG.api.get('/api/v1/mcp/earnings')]);
      TG.replace(mine, own.ok ? servicesList(TG.arr(own.data.data).filter((s) => s && typeof s.slug === 'string'), reload) : TG.failed(own, 'your services'));
      TG.replace(earnings, earningsSection(earned));
      TG.replace(status, message ? TG.notice(message, 'ok') : null);
    };
    const form = TG.form({
      id: 'register-form', submit: 'Register and check',
      fields: [
        { name: 'slug', label: 'Slug', placeholder: 'weather', hint: 'Lower-case letters, digits and dashes; tools are offered as slug__tool.' },
        { name: 'upstream_url', label: 'Server URL', type: 'url', placeholder: 'https://tools.example.com/mcp', hint: 'Your MCP server (Streamable HTTP or plain JSON-RPC). The gateway checks it live now.' },
        { name: 'default_credits', label: 'Price per call (credits)', type: 'number', min: 0, max: 60, step: 1, value: 1, inputmode: 'numeric', hint: 'At most 60. You earn 80% of it, rounded up.' },
        { name: 'name', label: 'Name (optional)' },
        { name: 'description', label: 'Description (optional)', type: 'textarea' },
      ],
      onSubmit: async (v) => {
        TG.clear(result);
        const price = Number(v.default_credits);
        if (v.default_credits === '' || !Number.isInteger(price)) {
          return { ok: false, field: 'default_credits', error: 'default_credits: must be a whole number from 0 to 60' };
        }
        const body = { slug: v.slug, upstream_url: v.upstream_url, default_credits: price };
        if (v.name) body.name = v.name;
        if (v.description) body.description = v.description;
        const res = await TG.api.post('/api/v1/mcp/services', body);
        if (!res.ok) {
          // The live check's reason belongs to the URL it checked.
          if (res.type === 'tool_server_check_failed') res.field = 'upstream_url';
          return res;
        }
        const s = res.data;
        TG.replace(result, h('div', { class: 'notice notice-ok', role: 'status' },
          h('p', {}, h('strong', { text: `${TG.str(s.slug)} passed the live check` }), ` and is ${TG.str(s.status)}: an operator approves it before agents see it.`),
          h('p', { class: 'tools-found' }, 'Tools found: ', TG.arr(s.tools).map((t, i) => [i ? ', ' : '', h('code', { text: TG.str(t) })]))));
        form.reset();
        await reload();
        return { ok: true };
      },
    });
    TG.add(view, h('h1', { tabindex: -1, text: 'Tool developer' }),
      h('p', { class: 'lead', text: 'List a paid MCP tool server. Every successful call through the gateway is billed to the caller and 80% of the price is credited to you.' }),
      TG.section('Register a tool server', form, result),
      h('section', { class: 'card' }, h('h2', { text: 'Your tool servers' }), status, mine),
      earnings, connectSection());
    await reload();
  };
})();
