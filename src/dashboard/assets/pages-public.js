// Tollgate dashboard: the public pricing page — plans, credit packs, models with their credit
// rates, and the model changelog. Everything shown comes from the gateway's own API.
(function () {
  'use strict';
  const TG = window.TG;
  const { h } = TG;

  const TIERS = ['economy', 'normal', 'powerful'];
  TG.planName = (name) => {
    const n = TG.str(name);
    if (n === 'smb') return 'SMB';
    return n ? n.charAt(0).toUpperCase() + n.slice(1) : '—';
  };
  const perWindow = (p) => {
    const hour = p.requests_per_hour, day = p.requests_per_day;
    if ((hour === null || hour === undefined) && (day === null || day === undefined)) return 'No request limit';
    return `${TG.limit(hour)} requests / hour · ${TG.limit(day)} / day`;
  };

  // Buy: straight to the checkout when signed in, else log in first and continue there.
  TG.buyButton = (what, label, id) => {
    const b = h('button', { type: 'button', class: 'primary', id, text: label });
    const err = h('p', { class: 'form-error', role: 'alert', hidden: true });
    const key = what.plan ? 'plan' : 'credits_pack';
    b.addEventListener('click', () => TG.busy(b, async () => {
      err.hidden = true;
      if (!TG.state.me && !TG.marker.get()) {
        if (key === 'plan') TG.go(`/dashboard/billing?buy=${TG.enc(what.plan)}`);
        else TG.go('/dashboard/billing');
        return;
      }
      const res = await TG.checkout(what);
      if (!res.ok && res.status === 401) {
        TG.go(key === 'plan' ? `/dashboard/billing?buy=${TG.enc(what.plan)}` : '/dashboard/billing');
      } else if (!res.ok) {
        err.textContent = res.error;
        err.hidden = false;
      }
    }));
    return h('div', { class: 'buy' }, b, err);
  };

  function planCard(p, billing) {
    const grant = TG.num(p.grant_credits);
    let action = null;
    if (p.name === 'free') {
      action = h('a', { class: 'button secondary', href: '/dashboard', text: 'Sign up free' });
    } else if (p.purchasable === true && billing) {
      action = TG.buyButton({ plan: p.name }, `Buy ${TG.planName(p.name)}`, `buy-${p.name}`);
    } else {
      action = h('p', { class: 'muted', text: 'Set up by contract: ask us.' });
    }
    const price = TG.str(p.price_label) || (p.name === 'free' ? 'No card needed' : 'On request');
    return h('article', { class: 'plan', id: `plan-${p.name}` },
      h('h3', { text: TG.planName(p.name) }),
      h('p', { class: 'price', text: price }),
      h('ul', {},
        h('li', { text: perWindow(p) }),
        grant !== null ? h('li', { text: p.name === 'free' ? `${TG.credits(grant)} credits at sign-up` : `${TG.credits(grant)} credits${p.recurring === true ? ' every period' : ''}` }) : null,
        p.recurring === true && p.purchasable === true ? h('li', { text: 'Subscription; cancel any time' }) : null),
      action);
  }

  function plansSection(res) {
    if (!res.ok) return TG.section('Plans', TG.failed(res, 'the plans'));
    const plans = TG.arr(res.data.plans).filter((p) => p && typeof p.name === 'string');
    const billing = res.data.billing === true;
    const guest = plans.find((p) => p.name === 'guest');
    const packs = TG.arr(res.data.credit_packs).filter((p) => p && typeof p.name === 'string');
    return h('section', { class: 'card', id: 'plans' },
      h('h2', { text: 'Plans' }),
      h('div', { class: 'plans' }, plans.filter((p) => p.name !== 'guest').map((p) => planCard(p, billing))),
      guest ? h('p', { class: 'muted', text: `Without a key you may call the guest models: ${perWindow(guest).toLowerCase()} per address.` }) : null,
      billing ? null : h('p', { class: 'muted', text: 'Online payments are not enabled on this gateway.' }),
      packs.length ? h('div', { id: 'packs' },
        h('h3', { text: 'Credit packs' }),
        h('p', { class: 'muted', text: 'One-off credits on top of any plan. Credits never expire.' }),
        h('div', { class: 'plans' }, packs.map((k) => h('article', { class: 'plan', id: `pack-${k.name}` },
          h('h4', { text: TG.planName(k.name) }),
          h('p', { class: 'price', text: TG.str(k.price_label) || '—' }),
          h('p', { text: `${TG.credits(k.credits)} credits` }),
          billing ? TG.buyButton({ credits_pack: k.name }, 'Buy credits', `buy-pack-${k.name}`) : null)))) : null);
  }

  function notice(m) {
    const parts = [];
    const today = new Date().toISOString().slice(0, 10);
    if (m.deprecated_at) parts.push(`${m.deprecated_at <= today ? 'Deprecated since' : 'Deprecated from'} ${m.deprecated_at}`);
    if (m.retires_at) parts.push(`retires ${m.retires_at}`);
    if (m.replacement) parts.push(`replacement: ${m.replacement}`);
    if (!parts.length) return '';
    const s = parts.join('; ');
    return s.charAt(0).toUpperCase() + s.slice(1);
  }

  function modelsSection(res) {
    if (!res.ok) return TG.section('Models and rates', TG.failed(res, 'the models'));
    const models = TG.arr(res.data.data).filter((m) => m && typeof m.id === 'string');
    models.sort((a, b) => (TIERS.indexOf(a.tier) - TIERS.indexOf(b.tier)) || a.id.localeCompare(b.id));
    const rows = models.map((m) => {
      const n = notice(m);
      return h('tr', { id: `model-${m.id}`, class: m.deprecated_at ? 'deprecated' : null },
        h('td', {}, h('code', { text: m.id }),
          TG.arr(m.aliases).length ? h('div', { class: 'aliases', text: 'alias: ' + TG.arr(m.aliases).join(', ') }) : null),
        h('td', { text: TG.str(m.tier) }),
        h('td', { class: 'num', text: TG.credits(m.input_credits_per_1k) }),
        h('td', { class: 'num', text: TG.credits(m.output_credits_per_1k) }),
        h('td', { class: 'num', text: TG.int(m.max_output_tokens) }),
        h('td', { text: m.guest === true ? 'Yes' : 'No' }),
        h('td', { class: n ? 'notice-cell' : null }, n ? TG.badge(n, 'warn') : ''));
    });
    return h('section', { class: 'card', id: 'models' },
      h('h2', { text: 'Models and rates' }),
      h('p', { class: 'muted', text: 'Credits per 1,000 tokens, charged at the rate of the model that served the request. Send a tier name (economy, normal, powerful) to let the gateway choose; aliases follow the latest stable version.' }),
      TG.table('Models and their credit rates', ['Model', 'Tier', { num: 'Input / 1K' }, { num: 'Output / 1K' }, { num: 'Max output' }, 'Guest', 'Notice'], rows, 'No models are configured.'));
  }

  function changelogSection(res) {
    if (!res.ok) return TG.section('Model changelog', TG.failed(res, 'the changelog'));
    const entries = TG.arr(res.data.data).filter((e) => e && typeof e.text === 'string');
    const list = h('ol', { class: 'changelog' }, entries.map((e) =>
      h('li', { class: 'change change-' + TG.str(e.kind) },
        h('time', { datetime: TG.str(e.date), text: TG.str(e.date) }),
        e.in_effect === true ? TG.badge('in effect', 'done') : TG.badge('scheduled', 'pending'),
        h('span', { class: 'change-text' }, TG.rich(e.text)))));
    return h('section', { class: 'card', id: 'changelog' },
      h('h2', { text: 'Model changelog' }),
      h('p', { class: 'muted', text: 'Alias changes, deprecations and retirements, announced before they happen. Pin a dated model id where regressions matter.' }),
      entries.length ? list : h('p', { class: 'muted', text: 'No changes scheduled or made.' }));
  }

  TG.pages.pricing = async (view) => {
    TG.add(view, 
      h('div', { class: 'hero' },
        h('h1', { tabindex: -1, text: 'One API key for every model' }),
        h('p', { class: 'lead', text: 'An OpenAI-compatible chat API in front of many providers, with failover, metered in credits. Paid tool servers for your agents through one MCP endpoint.' }),
        h('p', {}, h('a', { class: 'button primary', href: '/dashboard', text: TG.state.me ? 'Open the dashboard' : 'Create a free account' }))),
      TG.loading());
    const [plans, models, changes] = await Promise.all([
      TG.api.get('/api/v1/plans'),
      TG.api.get('/v1/models/pricing'),
      TG.api.get('/v1/models/changelog'),
    ]);
    view.lastChild.remove();
    TG.add(view, plansSection(plans), modelsSection(models), changelogSection(changes),
      TG.section('Quick start',
        h('p', { text: 'Any OpenAI SDK works: point its base URL here and use your Tollgate key.' }),
        TG.code(`curl ${TG.origin()}/v1/chat/completions \\\n  -H "Authorization: Bearer <YOUR_API_KEY>" \\\n  -H "Content-Type: application/json" \\\n  -d '{"model": "economy", "messages": [{"role": "user", "content": "Hello"}]}'`)));
  };
})();
