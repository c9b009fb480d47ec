// Tollgate dashboard, the account holder: the overview, API keys (shown once, revoked after an
// in-page confirmation) and billing (plan, subscription, payments, buying, the Stripe portal).
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
      h('h2', { id: 'new-key-title', text: k.fresh ? 'Your first API key' : `New key “${k.name}”` }),
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
  function keyRow(k, reload) {
    const actions = h('td', { class: 'row-actions' });
    const row = h('tr', { id: `key-${k.id}`, 'data-key-id': k.id, class: k.revoked ? 'revoked' : null },
      h('td', { class: 'key-name', text: TG.str(k.name) }),
      h('td', {}, h('code', { text: `${TG.str(k.prefix)}…` })),
      h('td', { class: 'nowrap', text: TG.time(k.created_at) }),
      h('td', { class: 'nowrap', text: k.last_used_at ? TG.time(k.last_used_at) : 'Never' }),
      h('td', {}, k.revoked ? TG.badge('revoked', 'off') : TG.badge('active', 'live')),
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
        await reload(`Key “${k.name}” is revoked; requests with it are refused.`);
      }));
      TG.replace(actions, h('div', { class: 'confirm', role: 'group', 'aria-label': `Revoke ${k.name}?` },
        h('span', { text: 'Revoke it? Apps using it stop working.' }), yes, no, err));
      yes.focus();
    };
    const revoke = h('button', { type: 'button', class: 'secondary', text: 'Revoke', 'aria-label': `Revoke key ${k.name}` });
    revoke.addEventListener('click', ask);
    const idle = () => TG.replace(actions, revoke);
    idle();
    return row;
  }

  TG.pages.keys = async (view) => {
    const top = h('div', {});
    const list = h('div', { id: 'keys-list' }, TG.loading());
    const status = h('div', { 'aria-live': 'polite' });
    const reload = async (message) => {
      const res = await TG.api.get('/api/v1/keys');
      if (!res.ok) return TG.replace(list, TG.failed(res, 'your keys'));
      const keys = TG.arr(res.data.data).filter((k) => k && typeof k.id === 'string');
      keys.sort((a, b) => (a.revoked === b.revoked ? (b.created_at || 0) - (a.created_at || 0) : a.revoked ? 1 : -1));
      TG.replace(list, TG.table('Your API keys', ['Name', 'Key', 'Created', 'Last used', 'Status', ''], keys.map((k) => keyRow(k, reload)), 'No keys yet.'));
      TG.replace(status, message ? TG.notice(message, 'ok') : null);
    };
    const form = TG.form({
      id: 'issue-key-form', inline: true, submit: 'Issue key',
      fields: [{ name: 'name', label: 'Key name', placeholder: 'e.g. production', hint: 'A name to tell your keys apart.' }],
      onSubmit: async (v) => {
        const res = await TG.api.post('/api/v1/keys', { name: v.name || 'unnamed' });
        if (!res.ok) return res;
        TG.state.newKey = { key: TG.str(res.data.key), name: TG.str(res.data.name) };
        TG.replace(top, TG.newKeyPanel());
        form.reset();
        await reload();
        return { ok: true };
      },
    });
    TG.add(view, h('h1', { tabindex: -1, text: 'API keys' }), top,
      TG.section('Issue a key', form),
      h('section', { class: 'card' }, h('h2', { text: 'Your keys' }), status, list));
    TG.replace(top, TG.newKeyPanel());
    await reload();
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
