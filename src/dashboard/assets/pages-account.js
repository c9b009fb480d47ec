// Tollgate dashboard, the account holder: the overview, API keys (shown once; their budget,
// models, expiry and limits set at issue or in a dialog; rotated with a grace period; revoked
// after an in-page confirmation) and billing (plan, subscription, payments, buying, the portal).
(function () {
  'use strict';
  const TG = window.TG;
  const { h } = TG;

  // A key just issued: shown once, here, and never again (the gateway keeps only its hash).
  TG.newKeyPanel = () => {
    const k = TG.state.newKey;
    if (!k) return null;
    TG.state.newKey = null;
    return h('section', { class: 'card new-key', id: 'new-key-panel', 'aria-labelledby': 'new-key-title' },
      h('h2', { id: 'new-key-title', tabindex: -1, text: k.fresh ? 'Your first API key' : `New key “${k.name}”` }),
      k.note ? h('p', { text: k.note }) : null,
      TG.notice('Copy this key now. It is shown only this once: Tollgate stores only a hash of it, so nobody can show it to you again. If you lose it, issue a new one and revoke this one.', 'warn'),
      TG.code(k.key, 'new-key'));
  };

  function quickStart() {
    return TG.section('Make a request',
      TG.code(`curl ${TG.origin()}/v1/chat/completions \\\n  -H "Authorization: Bearer <YOUR_API_KEY>" \\\n  -H "Content-Type: application/json" \\\n  -d '{"model": "economy", "messages": [{"role": "user", "content": "Hello"}]}'`),
      h('p', { class: 'muted' }, 'Or set the base URL of any OpenAI SDK to ', h('code', { text: `${TG.origin()}/v1` }), '.'));
  }

  TG.pages.overview = async (view) => {
    const panel = TG.newKeyPanel();
    TG.add(view, h('h1', { tabindex: -1, text: 'Overview' }), panel, TG.loading());
    const res = await TG.refreshMe();
    view.lastChild.remove();
    if (!res.ok) return TG.add(view, TG.failed(res, 'your account'));
    const me = res.data;
    const limits = me.limits && typeof me.limits === 'object' ? me.limits : {};
    const left = me.remaining && typeof me.remaining === 'object' ? me.remaining : {};
    const windowLeft = (rem, lim) => (lim === null || lim === undefined ? 'Unlimited' : `${TG.int(rem)} of ${TG.int(lim)}`);
    TG.add(view, 
      h('div', { class: 'stats', id: 'overview-stats' },
        TG.stat('Balance', `${TG.credits(me.credits)} credits`, 'Credits never expire.', 'stat-balance'),
        TG.stat('Plan', TG.planName(me.plan), null, 'stat-plan'),
        TG.stat('Requests left this hour', 'remaining' in me ? windowLeft(left.hour, limits.requests_per_hour) : '—', null, 'stat-hour'),
        TG.stat('Requests left today', 'remaining' in me ? windowLeft(left.day, limits.requests_per_day) : '—', null, 'stat-day'),
        TG.stat('Spent this month', `${TG.credits(me.spent_this_month)} credits`, null, 'stat-month')),
      h('p', { class: 'muted' }, 'Signed in as ', h('strong', { text: TG.str(me.email) }), ` (${TG.str(me.user_id)}). `,
        h('a', { href: '/dashboard/billing', text: 'Change plan or buy credits' }), '.'),
      quickStart());
  };

  // ---- keys ------------------------------------------------------------------------------
  // A key's controls. Each field is named as the API names the setting, so the `param` of a
  // refusal lands next to its field.
  const PERIODS = [
    { value: 'day', label: 'Per day' },
    { value: 'week', label: 'Per week' },
    { value: 'month', label: 'Per month' },
    { value: 'lifetime', label: 'Lifetime (never resets)' },
  ];
  // [setting, label, unit in the list]
  const LIMITS = [
    ['requests_per_minute', 'Requests per minute', 'requests/min'],
    ['tokens_per_minute', 'Tokens per minute', 'tokens/min'],
    ['concurrent_requests', 'Requests in flight at once', 'at once'],
  ];
  const GRACE = [
    { value: '0', label: 'No time: it stops now' },
    { value: '3600', label: '1 hour' },
    { value: '86400', label: '24 hours' },
    { value: '604800', label: '7 days' },
    { value: '2592000', label: '30 days' },
  ];

  // A key's settings as the form's text (all empty for a new key): what the form starts with,
  // and what a submit compares with to send only what changed.
  function settingsText(k) {
    const t = (x) => (TG.num(x) === null ? '' : String(x));
    const v = {
      budget_credits: t(k.budget_credits),
      budget_period: TG.str(k.budget_period) || 'month',
      allowed_models: TG.arr(k.allowed_models).join(', '),
      expires_at: TG.num(k.expires_at) === null ? '' : TG.day(k.expires_at),
      log_payloads: k.log_payloads === true ? 'true' : 'false',
    };
    for (const [name] of LIMITS) v[name] = t(k[name]);
    return v;
  }

  function settingsFields(v, models) {
    const known = models.length ? ` On this gateway: ${models.slice(0, 12).join(', ')}${models.length > 12 ? ', …' : ''}.` : '';
    return [
      { name: 'budget_credits', label: 'Budget (credits)', type: 'number', min: 0, step: 'any', inputmode: 'decimal', value: v.budget_credits, hint: 'Empty: no budget of its own.' },
      { name: 'budget_period', label: 'Budget period', options: PERIODS, value: v.budget_period, hint: 'Starts afresh with each period (UTC).' },
      { name: 'expires_at', label: 'Expires on', type: 'date', value: v.expires_at, hint: 'At 00:00 UTC that day. Empty: never.' },
      { name: 'allowed_models', label: 'Allowed models', value: v.allowed_models, placeholder: 'e.g. economy', hint: `Model ids, aliases or tiers, separated by commas. Empty: every model.${known}` },
      ...LIMITS.map(([name, label]) => ({ name, label, type: 'number', min: 1, step: 1, inputmode: 'numeric', value: v[name], hint: 'Empty: the plan’s limits only.' })),
      { name: 'log_payloads', label: 'Payload logging', options: [{ value: 'false', label: 'Off' }, { value: 'true', label: 'On' }], value: v.log_payloads, hint: 'On: its requests’ bodies are kept in the request log (redacted of keys, size-capped) for the payload retention.' },
    ];
  }

  // The settings the form changed, as the API takes them: numbers where numbers are meant (what
  // is not one is sent as typed, for the gateway to refuse by name), null for an emptied field.
  function settingsBody(v, was) {
    const num = (s) => (s === '' ? null : isFinite(Number(s)) ? Number(s) : s);
    const changed = (name) => v[name] !== was[name];
    const body = {};
    if (changed('budget_credits') || (v.budget_credits !== '' && changed('budget_period'))) {
      body.budget_credits = num(v.budget_credits);
      if (v.budget_credits !== '') body.budget_period = v.budget_period;
    }
    if (changed('allowed_models')) {
      const list = v.allowed_models.split(',').map((s) => s.trim()).filter(Boolean);
      body.allowed_models = list.length ? list : null;
    }
    if (changed('expires_at')) body.expires_at = v.expires_at ? Date.parse(`${v.expires_at}T00:00:00Z`) / 1000 : null;
    for (const [name] of LIMITS) if (changed(name)) body[name] = num(v[name]);
    if (changed('log_payloads')) body.log_payloads = v.log_payloads === 'true';
    return body;
  }
  // `allowed_models[1]: …` is the allowed-models field's error.
  const byField = (res) => (res.field ? Object.assign({}, res, { field: res.field.replace(/\[\d+\]$/, '') }) : res);

  function budgetCell(k) {
    const cap = TG.num(k.budget_credits), spent = TG.num(k.spent_credits);
    if (cap === null) {
      return h('td', { class: 'key-budget' }, 'None', spent ? h('div', { class: 'cell-note', text: `${TG.credits(spent)} spent` }) : null);
    }
    const period = TG.str(k.budget_period) || 'lifetime';
    const resets = TG.num(k.budget_resets_at) === null ? '' : `, resets ${TG.time(k.budget_resets_at)}`;
    return h('td', { class: 'key-budget' }, h('span', { class: 'nowrap', text: `${TG.credits(spent || 0)} / ${TG.credits(cap)}` }),
      h('div', { class: 'cell-note', text: period === 'lifetime' ? 'lifetime' : `per ${period}${resets}` }));
  }

  // Unix seconds as "2026-11-23 14:05 UTC" that wraps only between date and time.
  const stamp = (unix) => {
    const t = TG.time(unix);
    return t === '—' ? t : [h('span', { class: 'nowrap', text: t.slice(0, 10) }), ' ', h('span', { class: 'nowrap', text: t.slice(11) })];
  };

  function keyRow(k, page) {
    const set = LIMITS.filter(([name]) => TG.num(k[name]) !== null);
    const models = TG.arr(k.allowed_models).map(TG.str);
    const expired = TG.num(k.expires_at) !== null && k.expires_at * 1000 <= Date.now();
    const actions = h('td', { class: 'row-actions' });
    const row = h('tr', { id: `key-${k.id}`, 'data-key-id': k.id, class: k.revoked || expired ? 'revoked' : null },
      h('td', {}, h('div', { class: 'key-name', text: TG.str(k.name) }),
        k.revoked ? TG.badge('revoked', 'off') : expired ? TG.badge('expired', 'off') : TG.badge('active', 'live')),
      h('td', {}, h('code', { text: `${TG.str(k.prefix)}…` })),
      budgetCell(k),
      h('td', { class: 'key-limits' }, set.length ? set.map(([name, , unit]) => h('div', { class: 'nowrap', text: `${TG.int(k[name])} ${unit}` })) : 'The plan’s'),
      h('td', { class: 'key-models' }, models.length ? models.map((m, i) => [i ? ', ' : null, h('span', { class: 'nowrap', text: m })]) : 'All'),
      h('td', { class: 'key-expires' }, TG.num(k.expires_at) === null ? 'Never' : stamp(k.expires_at)),
      h('td', {}, k.last_used_at ? stamp(k.last_used_at) : 'Never', h('div', { class: 'cell-note nowrap', text: `created ${TG.day(k.created_at)}` })),
      actions);
    if (k.revoked) return row;
    const ask = () => {
      const yes = h('button', { type: 'button', class: 'danger', text: 'Yes, revoke' });
      const no = h('button', { type: 'button', class: 'secondary', text: 'Cancel' });
      const err = h('p', { class: 'form-error', role: 'alert', hidden: true });
      no.addEventListener('click', () => { idle(); revoke.focus(); });
      yes.addEventListener('click', () => TG.busy(yes, async () => {
        const res = await TG.api.del(`/api/v1/keys/${TG.enc(k.id)}`);
        if (!res.ok) {
          err.textContent = res.error;
          err.hidden = false;
          return;
        }
        await page.reload(`Key “${k.name}” is revoked; requests with it are refused.`);
      }));
      TG.replace(actions, h('div', { class: 'confirm', role: 'group', 'aria-label': `Revoke ${k.name}?` },
        h('span', { text: 'Revoke it? Apps using it stop working.' }), yes, no, err));
      yes.focus();
    };
    const button = (text, label, fn) => h('button', { type: 'button', class: 'secondary', text, 'aria-label': label, on: { click: fn } });
    const settings = button('Settings', `Settings of key ${k.name}`, () => settingsDialog(k, page));
    const rotate = button('Rotate', `Rotate key ${k.name}`, () => rotateDialog(k, page));
    const revoke = button('Revoke', `Revoke key ${k.name}`, ask);
    const idle = () => TG.replace(actions, h('div', { class: 'key-actions' }, settings, rotate, revoke));
    idle();
    return row;
  }

  function settingsDialog(k, page) {
    const was = settingsText(k);
    const form = TG.form({
      id: 'key-settings-form', cls: 'key-form', submit: 'Save settings',
      fields: settingsFields(was, page.models),
      onSubmit: async (v) => {
        const body = settingsBody(v, was);
        if (!Object.keys(body).length) return { ok: false, error: 'Nothing changed.' };
        const res = await TG.api.patch(`/api/v1/keys/${TG.enc(k.id)}`, body);
        if (!res.ok) return byField(res);
        dialog.close();
        await page.reload(`Settings of “${k.name}” saved.`, k.id);
        return { ok: true };
      },
    });
    const dialog = page.dialog('key-settings', `Settings of “${k.name}” (${TG.str(k.prefix)}…)`, form);
  }

  function rotateDialog(k, page) {
    const form = TG.form({
      id: 'rotate-key-form', submit: 'Rotate key',
      fields: [{ name: 'grace_seconds', label: 'Keep the old key working for', options: GRACE, value: '86400', hint: 'Time to move your apps to the new key.' }],
      onSubmit: async (v) => {
        const res = await TG.api.post(`/api/v1/keys/${TG.enc(k.id)}/rotate`, { grace_seconds: Number(v.grace_seconds) });
        if (!res.ok) return res;
        const until = TG.num((res.data.replaces || {}).expires_at);
        const old = `The old key ${TG.str(k.prefix)}…`;
        dialog.close();
        page.shown({ key: TG.str(res.data.key), name: TG.str(res.data.name),
          note: until !== null && until * 1000 > Date.now() ? `${old} keeps working until ${TG.time(until)}.` : `${old} no longer works.` });
        await page.reload(`Key “${k.name}” is rotated.`);
        return { ok: true };
      },
    });
    const dialog = page.dialog('rotate-key', `Rotate “${k.name}” (${TG.str(k.prefix)}…)`,
      h('p', { text: 'A new key with the same settings replaces this one. It is shown once.' }), form);
  }

  TG.pages.keys = async (view) => {
    const top = h('div', {});
    const list = h('div', { id: 'keys-list' }, TG.loading());
    const status = h('div', { 'aria-live': 'polite' });
    const listed = await TG.api.get('/v1/models');
    const page = {
      models: listed.ok ? TG.arr(listed.data.data).map((m) => (m ? TG.str(m.id) : '')).filter(Boolean) : [],
      // After a change: the list afresh, what happened, and focus back on the key's row.
      reload: async (message, focusId) => {
        const res = await TG.api.get('/api/v1/keys');
        if (!res.ok) return TG.replace(list, TG.failed(res, 'your keys'));
        const keys = TG.arr(res.data.data).filter((k) => k && typeof k.id === 'string');
        keys.sort((a, b) => (a.revoked === b.revoked ? (b.created_at || 0) - (a.created_at || 0) : a.revoked ? 1 : -1));
        TG.replace(list, TG.table('Your API keys', ['Name', 'Key', 'Budget', 'Limits', 'Models', 'Expires', 'Last used', ''],
          keys.map((k) => keyRow(k, page)), 'No keys yet.'));
        TG.replace(status, message ? TG.notice(message, 'ok') : null);
        const back = focusId && document.getElementById(`key-${focusId}`);
        if (back && back.querySelector('button')) back.querySelector('button').focus();
      },
      // A new key, shown once at the top of the page.
      shown: (key) => {
        TG.state.newKey = key;
        TG.replace(top, TG.newKeyPanel());
        top.querySelector('h2').focus();
      },
      // A modal dialog (the browser's own: focus stays inside, Escape closes it).
      dialog: (id, title, ...body) => {
        const d = h('dialog', { class: 'dialog', id, 'aria-labelledby': `${id}-title` }, h('h2', { id: `${id}-title`, text: title }), ...body);
        const form = d.querySelector('form');
        form.querySelector('button[type=submit]').after(h('button', { type: 'button', class: 'secondary', text: 'Cancel', on: { click: () => d.close() } }));
        d.addEventListener('close', () => d.remove());
        view.appendChild(d);
        d.showModal();
        return d;
      },
    };
    const blank = settingsText({});
    const form = TG.form({
      id: 'issue-key-form', cls: 'issue-form', submit: 'Issue key',
      fields: [{ name: 'name', label: 'Key name', placeholder: 'e.g. production', hint: 'A name to tell your keys apart.' },
        ...settingsFields(blank, page.models)],
      onSubmit: async (v) => {
        const res = await TG.api.post('/api/v1/keys', Object.assign({ name: v.name || 'unnamed' }, settingsBody(v, blank)));
        if (!res.ok && res.field && res.field !== 'name') more.open = true;
        if (!res.ok) return byField(res);
        page.shown({ key: TG.str(res.data.key), name: TG.str(res.data.name) });
        form.reset();
        await page.reload();
        return { ok: true };
      },
    });
    // The controls are optional: folded away until asked for, and settable later too.
    const grid = h('div', { class: 'key-grid' });
    for (const f of settingsFields(blank, [])) grid.appendChild(form.inputs[f.name].input.closest('.field'));
    const more = h('details', { class: 'key-more' }, h('summary', { text: 'Budget, models, expiry and limits (optional)' }), grid);
    form.insertBefore(more, form.querySelector('.actions'));
    TG.add(view, h('h1', { tabindex: -1, text: 'API keys' }), top,
      TG.section('Issue a key', form),
      h('section', { class: 'card' }, h('h2', { text: 'Your keys' }), status, list));
    TG.replace(top, TG.newKeyPanel());
    await page.reload();
  };

  // ---- billing ---------------------------------------------------------------------------
  function paymentsTable(payments) {
    const rows = payments.map((p) => [
      h('span', { class: 'nowrap', text: TG.time(p.created_at) }),
      TG.str(p.kind),
      p.plan ? TG.planName(p.plan) : p.credits_pack ? `${TG.planName(p.credits_pack)} pack` : '—',
      h('span', { class: 'num', text: TG.credits(p.credits) }),
      h('span', { class: 'num', text: TG.money(p.amount, p.currency) }),
      h('code', { text: TG.str(p.reference) }),
    ]);
    return TG.table('Payments', ['Date', 'Kind', 'Item', { num: 'Credits' }, { num: 'Amount' }, 'Reference'], rows, 'No payments yet.');
  }

  TG.pages.billing = async (view) => {
    const params = new URLSearchParams(location.search);
    const buying = params.get('buy');
    TG.add(view, h('h1', { tabindex: -1, text: 'Billing' }), TG.newKeyPanel());
    if (params.get('paid') === '1') {
      TG.add(view, TG.notice('Thank you! Your payment is applied as soon as Stripe confirms it, usually within seconds.', 'ok'));
    }
    if (TG.state.checkoutError) TG.add(view, TG.notice(`The checkout could not start: ${TG.state.checkoutError}`, 'error'));
    TG.state.checkoutError = null;
    if (buying) {
      TG.add(view, h('div', { class: 'card' }, h('p', { text: `You chose the ${TG.planName(buying)} plan.` }),
        TG.buyButton({ plan: buying }, `Continue to checkout: ${TG.planName(buying)}`, 'continue-checkout')));
    }
    TG.add(view, TG.loading());
    const [bill, plans] = await Promise.all([TG.api.get('/api/v1/billing'), TG.api.get('/api/v1/plans')]);
    view.lastChild.remove();
    if (!bill.ok) {
      TG.add(view, TG.failed(bill, 'billing'));
    } else {
      const b = bill.data;
      const sub = b.subscription && typeof b.subscription === 'object' ? b.subscription : null;
      const manage = h('button', { type: 'button', class: 'secondary', id: 'manage-subscription', text: 'Manage subscription' });
      const manageErr = h('p', { class: 'form-error', role: 'alert', hidden: true });
      manage.addEventListener('click', () => TG.busy(manage, async () => {
        manageErr.hidden = true;
        const res = await TG.api.post('/api/v1/billing/portal', {});
        if (res.ok && typeof res.data.portal_url === 'string') return location.assign(res.data.portal_url);
        manageErr.textContent = res.ok ? 'The gateway did not return a portal address.' : res.error;
        manageErr.hidden = false;
      }));
      TG.add(view, h('section', { class: 'card', id: 'current-plan' },
        h('h2', { text: 'Current plan' }),
        h('div', { class: 'stats' },
          TG.stat('Plan', TG.planName(b.plan), null, 'billing-plan'),
          TG.stat('Subscription', sub ? TG.str(sub.status) || 'active' : 'None',
            sub && sub.renews_at ? `Renews ${TG.day(sub.renews_at)}` : null, 'billing-subscription')),
        b.customer === true ? h('div', { class: 'actions' }, manage, manageErr)
          : h('p', { class: 'muted', text: 'Cancel or change your card in the Stripe portal once you have bought something.' })));
    }
    if (plans.ok) {
      const billing = plans.data.billing === true;
      const current = bill.ok ? bill.data.plan : null;
      const sellable = TG.arr(plans.data.plans).filter((p) => p && p.purchasable === true && typeof p.name === 'string');
      const packs = TG.arr(plans.data.credit_packs).filter((k) => k && typeof k.name === 'string');
      const items = [
        ...sellable.map((p) => h('article', { class: 'plan', id: `billing-plan-${p.name}` },
          h('h3', { text: TG.planName(p.name) }), h('p', { class: 'price', text: TG.str(p.price_label) || '—' }),
          TG.num(p.grant_credits) !== null ? h('p', { text: `${TG.credits(p.grant_credits)} credits` }) : null,
          current === p.name ? TG.badge('your plan', 'live') : null,
          billing && !(current === p.name && p.recurring === true)
            ? TG.buyButton({ plan: p.name }, `Buy ${TG.planName(p.name)}`, `billing-buy-${p.name}`) : null)),
        ...packs.map((k) => h('article', { class: 'plan', id: `billing-pack-${k.name}` },
          h('h3', { text: `${TG.planName(k.name)} credit pack` }), h('p', { class: 'price', text: TG.str(k.price_label) || '—' }),
          h('p', { text: `${TG.credits(k.credits)} credits` }),
          billing ? TG.buyButton({ credits_pack: k.name }, 'Buy credits', `billing-buy-pack-${k.name}`) : null)),
      ];
      TG.add(view, TG.section('Buy',
        billing ? null : TG.notice('Online payments are not enabled on this gateway.', 'info'),
        items.length ? h('div', { class: 'plans' }, items) : h('p', { class: 'muted', text: 'Nothing is sold online here.' })));
    } else {
      TG.add(view, TG.section('Buy', TG.failed(plans, 'the plans')));
    }
    if (bill.ok) TG.add(view, TG.section('Payment history', paymentsTable(TG.arr(bill.data.payments))));
  };
})();
