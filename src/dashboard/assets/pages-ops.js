// Tollgate dashboard, the operator (accounts in `[server] admin_emails`; the session cookie is
// accepted on /api/v1/admin/*): tool servers to approve, reject, suspend and resume; accounts
// (credits, plan, limits); payments no account could be found for.
(function () {
  'use strict';
  const TG = window.TG;
  const { h } = TG;

  const MOVES = { pending: ['approve', 'reject'], live: ['suspend'], suspended: ['resume'], rejected: [] };
  const LABEL = { approve: 'Approve', reject: 'Reject', suspend: 'Suspend', resume: 'Resume' };

  function servicesSection() {
    let current = 'pending';
    const list = h('div', { id: 'ops-services' });
    const status = h('div', { 'aria-live': 'polite' });
    const filters = h('div', { class: 'filters', role: 'group', 'aria-label': 'Show tool servers that are' });
    const load = async (message) => {
      for (const b of filters.children) b.setAttribute('aria-pressed', String(b.dataset.status === current));
      TG.replace(list, TG.loading());
      const res = await TG.api.get(`/api/v1/admin/mcp/services?status=${TG.enc(current)}`);
      if (!res.ok) return TG.replace(list, TG.failed(res, 'the tool servers'));
      const rows = TG.arr(res.data.data).filter((s) => s && typeof s.slug === 'string');
      TG.replace(status, message ? TG.notice(message, 'ok') : null);
      if (!rows.length) return TG.replace(list, h('p', { class: 'muted', text: `No ${current} tool servers.` }));
      TG.replace(list, rows.map((s) => {
        const err = h('p', { class: 'form-error', role: 'alert', hidden: true });
        const buttons = (MOVES[s.status] || []).map((action) => {
          const b = h('button', { type: 'button', class: action === 'approve' || action === 'resume' ? 'primary' : 'secondary',
            id: `${action}-${s.slug}`, text: LABEL[action], 'aria-label': `${LABEL[action]} ${s.slug}` });
          b.addEventListener('click', () => TG.busy(b, async () => {
            err.hidden = true;
            const res = await TG.api.post(`/api/v1/admin/mcp/services/${TG.enc(s.slug)}/${action}`, {});
            if (!res.ok) {
              err.textContent = res.error;
              err.hidden = false;
              return;
            }
            await load(`${s.slug} is now ${TG.str(res.data.status) || action}.`);
          }));
          return b;
        });
        return h('article', { class: 'service', id: `ops-service-${s.slug}` },
          h('div', { class: 'section-head' }, h('h3', {}, h('code', { text: s.slug }), s.name ? ` · ${s.name}` : ''), TG.statusBadge(s.status)),
          s.description ? h('p', { text: TG.str(s.description) }) : null,
          h('dl', { class: 'facts' },
            h('dt', { text: 'Owner' }), h('dd', {}, h('code', { text: TG.str(s.owner_id) || '—' }), s.first_party ? ' (first party)' : ''),
            h('dt', { text: 'Upstream' }), h('dd', {}, h('code', { text: TG.str(s.upstream_url) })),
            h('dt', { text: 'Price' }), h('dd', { text: `${TG.credits(s.default_credits)} credits per call` }),
            h('dt', { text: 'Tools' }), h('dd', { class: 'service-tools', text: TG.arr(s.tools).join(', ') || '—' }),
            h('dt', { text: 'Registered' }), h('dd', { text: TG.time(s.created_at) })),
          buttons.length ? h('div', { class: 'actions' }, buttons, err) : null);
      }));
    };
    for (const st of ['pending', 'live', 'suspended', 'rejected']) {
      const b = h('button', { type: 'button', class: 'filter', 'data-status': st, id: `filter-${st}`, text: st.charAt(0).toUpperCase() + st.slice(1) });
      b.addEventListener('click', () => { current = st; load(); });
      filters.append(b);
    }
    load();
    return h('section', { class: 'card', id: 'ops-tools' }, h('h2', { text: 'Tool servers' }), filters, status, list);
  }

  function accountCard(a, planNames, refresh) {
    const id = TG.str(a.user_id);
    const status = h('div', { 'aria-live': 'polite' });
    const credits = TG.form({
      id: 'adjust-credits-form', submit: 'Adjust credits',
      fields: [
        { name: 'delta', label: 'Credits to add (negative to take)', type: 'number', step: 'any', inputmode: 'decimal' },
        { name: 'reason', label: 'Reason (kept in the ledger)' },
      ],
      onSubmit: async (v) => {
        const delta = Number(v.delta);
        if (v.delta === '' || !isFinite(delta)) return { ok: false, field: 'delta', error: 'delta: must be a number of credits' };
        const res = await TG.api.post(`/api/v1/admin/accounts/${TG.enc(id)}/credits`, { delta, reason: v.reason });
        if (!res.ok) return res;
        await refresh(`Balance of ${id} is now ${TG.credits(res.data.credits)} credits.`);
        return { ok: true };
      },
    });
    const names = planNames.includes(a.plan) || !a.plan ? planNames : [a.plan, ...planNames];
    const options = names.length ? names.map((n) => ({ value: n, label: TG.planName(n) })) : null;
    const plan = TG.form({
      id: 'set-plan-form', submit: 'Set plan and limits',
      fields: [
        options ? { name: 'plan', label: 'Plan', options, value: a.plan } : { name: 'plan', label: 'Plan', value: a.plan },
        { name: 'requests_per_hour', label: 'Requests per hour (empty: the plan’s)', type: 'number', min: 1, step: 1, value: a.requests_per_hour },
        { name: 'requests_per_day', label: 'Requests per day (empty: the plan’s)', type: 'number', min: 1, step: 1, value: a.requests_per_day },
      ],
      onSubmit: async (v) => {
        const body = { plan: v.plan };
        for (const k of ['requests_per_hour', 'requests_per_day']) {
          if (v[k] === '') continue;
          const n = Number(v[k]);
          if (!Number.isInteger(n) || n < 1) return { ok: false, field: k, error: `${k}: must be a whole number above 0, or empty` };
          body[k] = n;
        }
        const res = await TG.api.put(`/api/v1/admin/accounts/${TG.enc(id)}/plan`, body);
        if (!res.ok) return res;
        await refresh(`${id} is on ${TG.planName(res.data.plan)} now.`);
        return { ok: true };
      },
    });
    return h('article', { class: 'account', id: 'ops-account' },
      h('h3', {}, TG.str(a.email) || 'No e-mail (anonymous)', ' ', h('code', { text: id })),
      h('div', { class: 'stats' },
        TG.stat('Balance', `${TG.credits(a.credits)} credits`, null, 'ops-balance'),
        TG.stat('Plan', TG.planName(a.plan), a.requests_per_hour || a.requests_per_day
          ? `Own limits: ${TG.limit(a.requests_per_hour)} / hour · ${TG.limit(a.requests_per_day)} / day` : 'The plan’s limits', 'ops-plan'),
        TG.stat('Usage', `${TG.int(a.usage_rows)} requests`, `${TG.credits(a.credits_spent)} credits spent`, 'ops-usage')),
      status,
      h('div', { class: 'two' }, h('div', {}, h('h4', { text: 'Adjust credits' }), credits), h('div', {}, h('h4', { text: 'Plan and limits' }), plan)));
  }

  function accountsSection(planNames) {
    const out = h('div', { id: 'ops-account-result' });
    const find = async (q, message) => {
      const res = await TG.api.get(`/api/v1/admin/accounts?q=${TG.enc(q)}`);
      if (!res.ok) return res;
      const card = accountCard(res.data, planNames, (m) => find(q, m));
      TG.replace(out, card);
      if (message) card.querySelector('[aria-live]').append(TG.notice(message, 'ok'));
      return { ok: true };
    };
    const form = TG.form({
      id: 'find-account-form', inline: true, submit: 'Find',
      fields: [{ name: 'q', label: 'E-mail or user id', placeholder: 'name@example.com or usr_…' }],
      onSubmit: async (v) => {
        TG.clear(out);
        if (!v.q) return { ok: false, field: 'q', error: 'q: type an e-mail or a user id' };
        const res = await find(v.q);
        if (!res.ok && res.status === 404) res.field = 'q';
        return res;
      },
    });
    return h('section', { class: 'card', id: 'ops-accounts' }, h('h2', { text: 'Accounts' }), form, out);
  }

  function unclaimedSection() {
    const list = h('div', { id: 'ops-unclaimed' }, TG.loading());
    const status = h('div', { 'aria-live': 'polite' });
    const load = async (message) => {
      const res = await TG.api.get('/api/v1/admin/billing/unclaimed');
      if (!res.ok) return TG.replace(list, TG.failed(res, 'unclaimed payments'));
      TG.replace(status, message ? TG.notice(message, 'ok') : null);
      const rows = TG.arr(res.data.data).filter((u) => u && typeof u.id === 'string');
      TG.replace(list, TG.table('Unclaimed payments', ['Paid', 'Payer e-mail', 'Plan', { num: 'Credits' }, 'Assign to'], rows.map((u) => {
        const form = TG.form({
          inline: true, cls: 'assign-form', submit: 'Assign',
          fields: [{ name: 'user_id', label: `Account for ${TG.str(u.payer_email) || u.id}`, placeholder: 'usr_…' }],
          onSubmit: async (v) => {
            if (!v.user_id) return { ok: false, field: 'user_id', error: 'user_id: the account to give it to' };
            const r = await TG.api.post(`/api/v1/admin/billing/unclaimed/${TG.enc(u.id)}/assign`, { user_id: v.user_id });
            if (!r.ok) return r;
            await load(`Assigned to ${TG.str(r.data.assigned_to)}: ${TG.credits(r.data.credits)} credits, plan ${TG.planName(r.data.plan)}.`);
            return { ok: true };
          },
        });
        return h('tr', { id: `unclaimed-${u.id}` }, h('td', { class: 'nowrap', text: TG.time(u.created_at) }), h('td', { text: TG.str(u.payer_email) || '—' }),
          h('td', { text: TG.planName(u.plan) }), h('td', { class: 'num', text: TG.credits(u.credits) }), h('td', {}, form));
      }), 'No unclaimed payments: every payment found its account.'));
    };
    load();
    return h('section', { class: 'card' }, h('h2', { text: 'Unclaimed payments' }),
      h('p', { class: 'muted', text: 'Payments no account could be matched to. Check who paid (Stripe, the receipt) before assigning.' }),
      status, list);
  }

  TG.pages.operator = async (view) => {
    const plans = await TG.api.get('/api/v1/plans');
    const names = plans.ok ? TG.arr(plans.data.plans).map((p) => p && p.name).filter((n) => typeof n === 'string' && n !== 'guest') : [];
    TG.add(view, h('h1', { tabindex: -1, text: 'Operator' }), servicesSection(), accountsSection(names), unclaimedSection());
  };
})();
