// Tollgate dashboard, organizations: the caller's organizations and a form to make one; one
// organization's page (`/dashboard/orgs?id=org_…`) with the sections the caller's role may use
// (members, invitations, caps, models, usage, keys, single sign-on, buying); and the page an
// invitation link opens (`/dashboard/join?token=…`).
(function () {
  'use strict';
  const TG = window.TG;
  const { h } = TG;

  const ROLES = [
    { value: 'member', label: 'Member' },
    { value: 'admin', label: 'Admin' },
  ];
  const CAP_PERIODS = [
    { value: 'day', label: 'Per day' },
    { value: 'week', label: 'Per week' },
    { value: 'month', label: 'Per month' },
  ];
  const RANK = { member: 1, admin: 2, owner: 3 };
  const roleName = (r) => { const s = TG.str(r); return s ? s.charAt(0).toUpperCase() + s.slice(1) : '—'; };
  const orgPath = (id) => `/api/v1/orgs/${TG.enc(id)}`;
  // The organization last opened here, for the list to mark it.
  const remembered = {
    get() { try { return localStorage.getItem('tg_org') || ''; } catch (e) { return ''; } },
    set(id) { try { localStorage.setItem('tg_org', id); } catch (e) { /* an optimisation only */ } },
  };
  // A message for the next page shown (after a navigation).
  const flash = () => {
    const m = TG.state.orgFlash;
    TG.state.orgFlash = null;
    return m ? TG.notice(m, 'ok') : null;
  };
  // An error shown with TG.notice in `where` (a live region).
  const fail = (where, res) => TG.replace(where, TG.notice(res.error || 'Something went wrong.', 'error'));
  const button = (text, attrs, fn) => h('button', Object.assign({ type: 'button', class: 'secondary', text, on: { click: fn } }, attrs));
  // An in-page confirmation in `cell` (the keys page's): `yes` runs the action.
  function confirmIn(cell, question, yesText, run, back) {
    const yes = h('button', { type: 'button', class: 'danger', text: yesText });
    const no = h('button', { type: 'button', class: 'secondary', text: 'Cancel' });
    no.addEventListener('click', back);
    yes.addEventListener('click', () => TG.busy(yes, run));
    TG.replace(cell, h('div', { class: 'confirm', role: 'group', 'aria-label': question }, h('span', { text: question }), yes, no));
    yes.focus();
  }

  // ---- the list --------------------------------------------------------------------------
  TG.pages.orgs = async (view) => {
    const id = new URLSearchParams(location.search).get('id');
    if (id) return orgPage(view, id);
    const list = h('div', { id: 'orgs-list' }, TG.loading());
    const form = TG.form({
      id: 'create-org-form', inline: true, submit: 'Create organization',
      fields: [{ name: 'name', label: 'Organization name', placeholder: 'e.g. Acme', autocomplete: 'organization' }],
      onSubmit: async (v) => {
        const res = await TG.api.post('/api/v1/orgs', { name: v.name });
        if (!res.ok) return res;
        TG.state.orgFlash = `Organization “${TG.str(res.data.name)}” created. You are its owner.`;
        TG.go(`/dashboard/orgs?id=${TG.enc(TG.str(res.data.id))}`);
        return { ok: true };
      },
    });
    TG.add(view, h('h1', { tabindex: -1, text: 'Organizations' }), flash(),
      h('p', { class: 'muted', text: 'An organization has its own credits, plan and keys, shared by its members.' }),
      h('section', { class: 'card' }, h('h2', { text: 'Your organizations' }), list),
      TG.section('Create an organization', form));
    const res = await TG.api.get('/api/v1/orgs');
    if (!res.ok) return TG.replace(list, TG.failed(res, 'your organizations'));
    const orgs = TG.arr(res.data.data).filter((o) => o && typeof o.id === 'string');
    const last = remembered.get();
    TG.replace(list, TG.table('Your organizations', ['Name', 'Role', 'Plan', { num: 'Credits' }],
      orgs.map((o) => h('tr', { id: `org-${o.id}` },
        h('td', {}, h('a', { href: `/dashboard/orgs?id=${TG.enc(o.id)}`, text: TG.str(o.name) || o.id }),
          o.id === last ? h('span', { class: 'cell-note', text: ' (last opened)' }) : null),
        h('td', {}, TG.badge(roleName(o.role), 'role')),
        h('td', { text: TG.planName(o.plan) }),
        h('td', { class: 'num', text: TG.credits(o.credits) }))),
      'You belong to no organization yet.'));
  };

  // ---- one organization ------------------------------------------------------------------
  async function orgPage(view, id) {
    const [res, all] = await Promise.all([TG.api.get(orgPath(id)), TG.api.get('/api/v1/orgs')]);
    if (!res.ok) {
      TG.add(view, h('h1', { tabindex: -1, text: 'Organization' }),
        TG.notice(res.status === 404 ? 'There is no such organization, or you are not one of its members.' : `Could not load the organization: ${res.error}`, 'error'),
        h('p', {}, h('a', { href: '/dashboard/orgs', text: 'Your organizations' })));
      return;
    }
    const org = res.data;
    const role = TG.str(org.role);
    const admin = (RANK[role] || 0) >= RANK.admin;
    const owner = role === 'owner';
    remembered.set(id);
    document.title = `${TG.str(org.name)} · Tollgate`;

    // The switcher: which organization this page is about, and the others to go to.
    const orgs = all.ok ? TG.arr(all.data.data).filter((o) => o && typeof o.id === 'string') : [];
    if (!orgs.some((o) => o.id === id)) orgs.unshift(org);
    const switcher = h('select', { id: 'org-switcher', 'aria-describedby': 'org-switcher-hint' },
      orgs.map((o) => h('option', { value: o.id, text: TG.str(o.name) || o.id, selected: o.id === id ? 'selected' : null })));
    switcher.addEventListener('change', () => TG.go(`/dashboard/orgs?id=${TG.enc(switcher.value)}`));
    const head = h('div', { class: 'section-head org-head' },
      h('h1', { tabindex: -1, id: 'org-name', text: TG.str(org.name) || id }),
      h('div', { class: 'field org-switch' }, h('label', { for: 'org-switcher', text: 'Organization' }), switcher,
        h('p', { class: 'sr-only', id: 'org-switcher-hint', text: 'Choosing another opens its page.' })));
    const stats = h('div', { class: 'stats', id: 'org-stats' },
      TG.stat('Your role', roleName(role), null, 'org-role'),
      TG.stat('Plan', TG.planName(org.plan), null, 'org-plan'),
      TG.stat('Credits', TG.credits(org.credits), 'Shared by the members’ organization keys.', 'org-credits'));
    TG.add(view, head, flash(), stats,
      h('p', { class: 'muted' }, h('a', { href: '/dashboard/orgs', text: 'All your organizations' }), ` · ${id}`));

    const page = { id, org, role, admin, owner, view, members: [] };
    const parts = [];
    if (admin) parts.push(membersSection(page), invitationsSection(page), capsSection(page), modelsSection(page));
    parts.push(usageSection(page), keysSection(page));
    if (owner) parts.push(ssoSection(page), billingSection(page));
    if (!owner) parts.push(leaveSection(page));
    for (const p of parts) view.appendChild(p.el);
    await Promise.all(parts.map((p) => (p.load ? p.load() : null)));
  }

  // Members: the table, role changes, removal and transfer (admin/owner).
  function membersSection(page) {
    const list = h('div', { id: 'org-members' }, TG.loading());
    const status = h('div', { 'aria-live': 'polite' });
    const el = h('section', { class: 'card', id: 'org-members-section' }, h('h2', { text: 'Members' }), status, list);
    const load = async (message) => {
      const res = await TG.api.get(`${orgPath(page.id)}/members`);
      if (!res.ok) return TG.replace(list, TG.failed(res, 'the members'));
      page.members = TG.arr(res.data.data).filter((m) => m && typeof m.account_id === 'string');
      TG.replace(list, TG.table('Members', ['E-mail', 'Role', 'Cap', 'Joined', ''], page.members.map((m) => memberRow(m)), 'No members.'));
      TG.replace(status, message ? TG.notice(message, 'ok') : null);
      if (page.onMembers) page.onMembers();
    };
    page.reloadMembers = load;
    const me = TG.state.me ? TG.str(TG.state.me.user_id) : '';
    function memberRow(m) {
      const who = TG.str(m.email) || m.account_id;
      const actions = h('td', { class: 'row-actions' });
      const cap = TG.num(m.cap_credits) === null ? 'None'
        : `${TG.credits(m.cap_credits)} per ${TG.str(m.cap_period)}`;
      const row = h('tr', { id: `member-${m.account_id}`, 'data-email': TG.str(m.email) },
        h('td', { text: who }), h('td', {}, TG.badge(roleName(m.role), 'role')),
        h('td', { class: 'member-cap', text: cap }), h('td', { class: 'nowrap', text: TG.day(m.joined_at) }), actions);
      if (m.role === 'owner' || m.account_id === me) return row;
      const idle = () => {
        const sel = h('select', { 'aria-label': `Role of ${who}` },
          ROLES.map((r) => h('option', { value: r.value, text: r.label, selected: r.value === m.role ? 'selected' : null })));
        const change = button('Change role', { 'aria-label': `Change the role of ${who}` }, () => TG.busy(change, async () => {
          if (sel.value === m.role) return TG.replace(status, TG.notice(`${who} is already ${sel.value === 'admin' ? 'an admin' : 'a member'}.`, 'info'));
          const res = await TG.api.patch(`${orgPath(page.id)}/members`, { account_id: m.account_id, role: sel.value });
          if (!res.ok) return fail(status, res);
          await load(`${who} is now ${sel.value === 'admin' ? 'an admin' : 'a member'}.`);
        }));
        const remove = button('Remove', { 'aria-label': `Remove ${who}` }, () => confirmIn(actions, `Remove ${who}? Their organization keys are revoked.`, 'Yes, remove', async () => {
          const res = await TG.api.post(`${orgPath(page.id)}/members/remove`, { account_id: m.account_id });
          if (!res.ok) { idle(); return fail(status, res); }
          await load(`${who} was removed; ${TG.int(res.data.keys_revoked || 0)} of their keys revoked.`);
        }, idle));
        const transfer = page.owner ? button('Make owner', { 'aria-label': `Transfer ownership to ${who}` }, () => confirmIn(actions,
          `Make ${who} the owner? You become an admin.`, 'Yes, transfer', async () => {
            const res = await TG.api.post(`${orgPath(page.id)}/transfer`, { account_id: m.account_id });
            if (!res.ok) { idle(); return fail(status, res); }
            TG.state.orgFlash = `${who} is now the owner; you are an admin.`;
            TG.go(`/dashboard/orgs?id=${TG.enc(page.id)}`);
          }, idle)) : null;
        TG.replace(actions, h('div', { class: 'key-actions' }, sel, change, remove, transfer));
      };
      idle();
      return row;
    }
    return { el, load: () => load() };
  }

  // Invitations: a link for an e-mail and a role, shown once; the open ones, withdrawable.
  function invitationsSection(page) {
    const shown = h('div', { id: 'invite-result', 'aria-live': 'polite' });
    const list = h('div', { id: 'org-invitations' }, TG.loading());
    const status = h('div', { 'aria-live': 'polite' });
    const load = async (message) => {
      const res = await TG.api.get(`${orgPath(page.id)}/invitations`);
      if (!res.ok) return TG.replace(list, TG.failed(res, 'the invitations'));
      const open = TG.arr(res.data.data).filter((i) => i && typeof i.id === 'string');
      TG.replace(list, TG.table('Open invitations', ['E-mail', 'Role', 'Expires', ''], open.map((i) => {
        const cell = h('td', { class: 'row-actions' });
        const withdraw = button('Withdraw', { 'aria-label': `Withdraw the invitation of ${TG.str(i.email)}` }, () => TG.busy(withdraw, async () => {
          const r = await TG.api.post(`${orgPath(page.id)}/invitations/withdraw`, { id: i.id });
          if (!r.ok) return fail(status, r);
          await load(`The invitation of ${TG.str(i.email)} is withdrawn: its link no longer works.`);
        }));
        cell.appendChild(withdraw);
        return h('tr', { id: `invitation-${i.id}` }, h('td', { text: TG.str(i.email) }), h('td', { text: roleName(i.role) }),
          h('td', { class: 'nowrap', text: TG.time(i.expires_at) }), cell);
      }), 'No open invitations.'));
      TG.replace(status, message ? TG.notice(message, 'ok') : null);
    };
    const form = TG.form({
      id: 'invite-form', submit: 'Invite',
      fields: [
        { name: 'email', label: 'E-mail', type: 'email', autocomplete: 'off', placeholder: 'name@example.com' },
        { name: 'role', label: 'Role', options: ROLES, value: 'member' },
      ],
      onSubmit: async (v) => {
        const res = await TG.api.post(`${orgPath(page.id)}/invitations`, { email: v.email, role: v.role });
        if (!res.ok) return res;
        TG.replace(shown, h('div', { class: 'card new-key', id: 'invite-panel' },
          h('p', {}, 'Send this link to ', h('strong', { text: TG.str(res.data.email) }),
            '. It is shown only this once and works for that e-mail address only (Tollgate sends no mail).'),
          TG.code(TG.str(res.data.url), 'invite-link')));
        form.reset();
        await load();
        return { ok: true };
      },
    });
    const el = h('section', { class: 'card', id: 'org-invitations-section' }, h('h2', { text: 'Invitations' }), form, shown,
      h('h3', { text: 'Open invitations' }), status, list);
    return { el, load: () => load() };
  }

  // Caps: what one member's organization keys may spend per day, week or month.
  function capsSection(page) {
    const status = h('div', { 'aria-live': 'polite' });
    const form = TG.form({
      id: 'cap-form', submit: 'Save cap',
      fields: [
        { name: 'account_id', label: 'Member', options: [] },
        { name: 'cap_credits', label: 'Cap (credits)', type: 'number', min: 0, step: 'any', inputmode: 'decimal', hint: 'Empty: no cap.' },
        { name: 'period', label: 'Period', options: CAP_PERIODS, value: 'day', hint: 'Starts afresh with each period (UTC).' },
      ],
      onSubmit: async (v) => {
        if (!v.account_id) return { ok: false, error: 'Choose a member.', field: 'account_id' };
        const credits = v.cap_credits === '' ? null : isFinite(Number(v.cap_credits)) ? Number(v.cap_credits) : v.cap_credits;
        const res = await TG.api.put(`${orgPath(page.id)}/caps`, { account_id: v.account_id, cap_credits: credits, period: v.period });
        if (!res.ok) return res;
        const m = page.members.find((x) => x.account_id === v.account_id);
        const who = m ? TG.str(m.email) || m.account_id : v.account_id;
        const said = credits === null ? `${who} has no cap now.` : `${who} may spend ${TG.credits(credits)} credits per ${v.period}.`;
        TG.replace(status, TG.notice(said, 'ok'));
        if (page.reloadMembers) await page.reloadMembers();
        return { ok: true };
      },
    });
    const select = form.inputs.account_id.input;
    const credits = form.inputs.cap_credits.input;
    const period = form.inputs.period.input;
    const fill = () => {
      const m = page.members.find((x) => x.account_id === select.value);
      credits.value = m && TG.num(m.cap_credits) !== null ? String(m.cap_credits) : '';
      if (m && m.cap_period) period.value = TG.str(m.cap_period);
    };
    select.addEventListener('change', fill);
    page.onMembers = () => {
      const was = select.value;
      TG.replace(select, page.members.map((m) => h('option', { value: m.account_id, text: `${TG.str(m.email) || m.account_id} (${roleName(m.role)})` })));
      if (page.members.some((m) => m.account_id === was)) select.value = was;
      fill();
    };
    const el = h('section', { class: 'card', id: 'org-caps-section' }, h('h2', { text: 'Caps' }),
      h('p', { class: 'muted', text: 'What a member’s organization keys may spend together; a request the cap cannot pay is refused.' }),
      status, form);
    return { el };
  }

  // Models: the allowlist every organization key is held to.
  function modelsSection(page) {
    const status = h('div', { 'aria-live': 'polite' });
    const current = (o) => TG.arr(o.allowed_models).map(TG.str).join(', ');
    const form = TG.form({
      id: 'org-models-form', submit: 'Save models',
      fields: [{ name: 'allowed_models', label: 'Allowed models', value: current(page.org), placeholder: 'e.g. economy',
        hint: 'Model ids, aliases or tiers, separated by commas. Empty: every model.' }],
      onSubmit: async (v) => {
        const list = v.allowed_models.split(',').map((s) => s.trim()).filter(Boolean);
        const res = await TG.api.put(`${orgPath(page.id)}/models`, { allowed_models: list.length ? list : null });
        if (!res.ok) return res.field ? Object.assign({}, res, { field: res.field.replace(/\[\d+\]$/, '') }) : res;
        const now = current(res.data);
        form.inputs.allowed_models.input.value = now;
        TG.replace(status, TG.notice(now ? `Organization keys may use: ${now}.` : 'Organization keys may use every model.', 'ok'));
        return { ok: true };
      },
    });
    return { el: h('section', { class: 'card', id: 'org-models-section' }, h('h2', { text: 'Models' }), status, form) };
  }

  // Usage: 30 days per member and per key (a member sees its own), what caching saved, and the CSV.
  function usageSection(page) {
    const body = h('div', { id: 'org-usage' }, TG.loading());
    const csv = h('a', { href: `${orgPath(page.id)}/usage?format=csv`, download: `${page.id}-usage.csv`, id: 'org-usage-csv', class: 'button-link', text: 'Download CSV' });
    const load = async () => {
      const res = await TG.api.get(`${orgPath(page.id)}/usage`);
      if (!res.ok) return TG.replace(body, TG.failed(res, 'the usage'));
      const n = (x) => h('span', { class: 'num', text: TG.int(x) });
      const c = (x) => h('span', { class: 'num', text: TG.credits(x) });
      const members = TG.arr(res.data.by_member).filter(Boolean);
      const keys = TG.arr(res.data.by_key).filter(Boolean);
      const emailOf = (id) => {
        const m = members.find((x) => x.account_id === id);
        return m && m.email ? TG.str(m.email) : TG.str(id) || '—';
      };
      const saved = res.data.savings && typeof res.data.savings === 'object' ? res.data.savings : {};
      TG.replace(body,
        h('p', { id: 'org-usage-saved', text: `Saved by caching: ${TG.credits(saved.total)} credits (`
          + `${TG.credits(saved.response_cache)} by ${TG.int(saved.response_cache_hits)} response cache hits, `
          + `${TG.credits(saved.cache_reads)} by prompt cache reads).` }),
        h('h3', { text: 'Per member' }),
        TG.table('Usage per member', ['Member', { num: 'Requests' }, { num: 'Input tokens' }, { num: 'Output tokens' }, { num: 'Credits' }],
          members.map((m) => h('tr', { class: 'usage-member', 'data-email': TG.str(m.email) },
            h('td', { text: TG.str(m.email) || TG.str(m.account_id) || '—' }), h('td', {}, n(m.requests)), h('td', {}, n(m.prompt_tokens)),
            h('td', {}, n(m.completion_tokens)), h('td', {}, c(m.credits)))), 'No usage in the last 30 days.'),
        h('h3', { text: 'Per key' }),
        TG.table('Usage per key', ['Key', 'Member', { num: 'Requests' }, { num: 'Credits' }],
          keys.map((k) => h('tr', { class: 'usage-key' },
            h('td', { text: TG.str(k.name) || TG.str(k.key_id) }), h('td', { text: emailOf(k.account_id) }),
            h('td', {}, n(k.requests)), h('td', {}, c(k.credits)))), 'No usage in the last 30 days.'));
    };
    const el = h('section', { class: 'card', id: 'org-usage-section' },
      h('div', { class: 'section-head' }, h('h2', { text: page.admin ? 'Usage' : 'Your usage' }), csv),
      h('p', { class: 'muted', text: page.admin ? 'The last 30 days, of every member.' : 'The last 30 days, of your organization keys.' }),
      body);
    return { el, load };
  }

  // Keys: an organization key the caller owns, shown once; the caller's keys of it.
  function keysSection(page) {
    const top = h('div', {});
    const list = h('div', { id: 'org-keys' }, TG.loading());
    const load = async () => {
      const res = await TG.api.get('/api/v1/keys');
      if (!res.ok) return TG.replace(list, TG.failed(res, 'your keys'));
      const keys = TG.arr(res.data.data).filter((k) => k && k.organization_id === page.id && !k.revoked);
      TG.replace(list, TG.table('Your keys of this organization', ['Name', 'Key', 'Created', 'Last used'], keys.map((k) => [
        TG.str(k.name), h('code', { text: `${TG.str(k.prefix)}…` }), TG.day(k.created_at), k.last_used_at ? TG.time(k.last_used_at) : 'Never',
      ]), 'You have no keys of this organization.'));
    };
    const form = TG.form({
      id: 'org-key-form', inline: true, submit: 'Create key',
      fields: [{ name: 'name', label: 'Key name', placeholder: 'e.g. ci', hint: 'Requests with it are paid by the organization.' }],
      onSubmit: async (v) => {
        const res = await TG.api.post('/api/v1/keys', { name: v.name || 'unnamed', organization_id: page.id });
        if (!res.ok) return res;
        TG.state.newKey = { key: TG.str(res.data.key), name: TG.str(res.data.name) };
        TG.replace(top, TG.newKeyPanel());
        top.querySelector('h2').focus();
        form.reset();
        await load();
        return { ok: true };
      },
    });
    const el = h('section', { class: 'card', id: 'org-keys-section' }, h('h2', { text: 'Create an organization key' }), top, form,
      h('h3', { text: 'Your keys of this organization' }), list,
      h('p', { class: 'muted' }, 'Settings, rotation and revocation: ', h('a', { href: '/dashboard/keys', text: 'API keys' }), '.'));
    return { el, load };
  }

  // Single sign-on (owner): loaded when opened (an organization without it answers 404).
  function ssoSection(page) {
    const status = h('div', { 'aria-live': 'polite' });
    const urls = h('div', { id: 'org-sso-urls' });
    const body = h('div', {});
    const showUrls = (s) => TG.replace(urls, s ? [
      h('p', { text: 'Members sign in at:' }), TG.code(TG.str(s.login_url), 'sso-login-url'),
      h('p', { text: 'Register this redirect URI with the provider:' }), TG.code(TG.str(s.redirect_uri), 'sso-redirect-uri'),
    ] : null);
    const formFor = (s) => TG.form({
      id: 'org-sso-form', submit: 'Save single sign-on',
      fields: [
        { name: 'issuer', label: 'Issuer URL', type: 'url', value: s ? TG.str(s.issuer) : '', placeholder: 'https://login.example.com' },
        { name: 'client_id', label: 'Client ID', value: s ? TG.str(s.client_id) : '' },
        { name: 'client_secret', label: 'Client secret', type: 'password', autocomplete: 'new-password', hint: s ? 'Enter it again to save changes.' : null },
        { name: 'allowed_domains', label: 'Allowed e-mail domains', value: s ? TG.arr(s.allowed_domains).join(', ') : '', placeholder: 'example.com', hint: 'Separated by commas.' },
        { name: 'default_role', label: 'Role of new members', options: ROLES, value: s ? TG.str(s.default_role) : 'member' },
        { name: 'required', label: 'Required', options: [{ value: 'no', label: 'No: passwords work too' }, { value: 'yes', label: 'Yes: members must sign in with SSO' }], value: s && s.required === true ? 'yes' : 'no' },
      ],
      onSubmit: async (v) => {
        const res = await TG.api.put(`${orgPath(page.id)}/sso`, {
          issuer: v.issuer, client_id: v.client_id, client_secret: v.client_secret,
          allowed_domains: v.allowed_domains.split(',').map((d) => d.trim()).filter(Boolean),
          default_role: v.default_role, required: v.required === 'yes',
        });
        if (!res.ok) return res.field ? Object.assign({}, res, { field: res.field.replace(/\[\d+\]$/, '') }) : res;
        showUrls(res.data);
        TG.replace(status, TG.notice('Single sign-on is saved.', 'ok'));
        return { ok: true };
      },
    });
    let loaded = false;
    const details = h('details', { class: 'org-more', id: 'org-sso' }, h('summary', { text: 'Set up single sign-on (OpenID Connect)' }), body);
    details.addEventListener('toggle', async () => {
      if (!details.open || loaded) return;
      loaded = true;
      TG.replace(body, TG.loading());
      const res = await TG.api.get(`${orgPath(page.id)}/sso`);
      const s = res.ok && res.data && res.data.configured === true ? res.data : null;
      if (!res.ok) TG.replace(status, TG.notice(`Could not load single sign-on: ${res.error}`, 'error'));
      // The redirect URI is shown before the first save too: the provider needs it first.
      showUrls(res.ok ? res.data : null);
      TG.replace(body, urls, formFor(s));
    });
    return { el: h('section', { class: 'card', id: 'org-sso-section' }, h('h2', { text: 'Single sign-on' }), status, details) };
  }

  // Billing (owner): a plan or a credit pack for the organization, through Checkout.
  function billingSection(page) {
    const body = h('div', { id: 'org-buy' }, TG.loading());
    const load = async () => {
      const res = await TG.api.get('/api/v1/plans');
      if (!res.ok) return TG.replace(body, TG.failed(res, 'the plans'));
      const billing = res.data.billing === true;
      const what = (x) => Object.assign(x, { organization_id: page.id });
      const plans = TG.arr(res.data.plans).filter((p) => p && p.purchasable === true && typeof p.name === 'string');
      const packs = TG.arr(res.data.credit_packs).filter((k) => k && typeof k.name === 'string');
      const items = [
        ...plans.map((p) => h('article', { class: 'plan', id: `org-plan-${p.name}` },
          h('h3', { text: TG.planName(p.name) }), h('p', { class: 'price', text: TG.str(p.price_label) || '—' }),
          page.org.plan === p.name ? TG.badge('current plan', 'live') : null,
          billing ? TG.buyButton(what({ plan: p.name }), `Buy ${TG.planName(p.name)} for the organization`, `org-buy-${p.name}`) : null)),
        ...packs.map((k) => h('article', { class: 'plan', id: `org-pack-${k.name}` },
          h('h3', { text: `${TG.planName(k.name)} credit pack` }), h('p', { class: 'price', text: TG.str(k.price_label) || '—' }),
          h('p', { text: `${TG.credits(k.credits)} credits` }),
          billing ? TG.buyButton(what({ credits_pack: k.name }), 'Buy credits for the organization', `org-buy-pack-${k.name}`) : null)),
      ];
      TG.replace(body, billing ? null : TG.notice('Online payments are not enabled on this gateway.', 'info'),
        items.length ? h('div', { class: 'plans' }, items) : h('p', { class: 'muted', text: 'Nothing is sold online here.' }));
    };
    return { el: h('section', { class: 'card', id: 'org-billing-section' }, h('h2', { text: 'Billing' }), body), load };
  }

  // Leaving (not the owner, who transfers first).
  function leaveSection(page) {
    const status = h('div', { 'aria-live': 'polite' });
    const cell = h('div', {});
    const idle = () => {
      const leave = button('Leave organization', { id: 'org-leave' }, () => confirmIn(cell,
        `Leave ${TG.str(page.org.name)}? Your keys of it are revoked.`, 'Yes, leave', async () => {
          const res = await TG.api.post(`${orgPath(page.id)}/leave`, {});
          if (!res.ok) { idle(); return fail(status, res); }
          TG.state.orgFlash = `You left ${TG.str(page.org.name)}.`;
          TG.go('/dashboard/orgs');
        }, idle));
      TG.replace(cell, leave);
    };
    idle();
    return { el: h('section', { class: 'card', id: 'org-leave-section' }, h('h2', { text: 'Leave' }), status, cell) };
  }

  // ---- an invitation link ----------------------------------------------------------------
  TG.pages.join = async (view) => {
    const token = TG.str(new URLSearchParams(location.search).get('token')).trim();
    const status = h('div', { 'aria-live': 'polite', id: 'join-status' });
    TG.add(view, h('h1', { tabindex: -1, text: 'Join an organization' }), TG.newKeyPanel());
    if (!token) {
      TG.add(view, TG.notice('This link has no invitation in it. Ask for the link again.', 'error'));
      return;
    }
    const me = TG.state.me || {};
    const join = h('button', { type: 'button', class: 'primary', id: 'join-button', text: 'Join' });
    join.addEventListener('click', () => TG.busy(join, async () => {
      const res = await TG.api.post('/api/v1/invitations/accept', { token });
      if (!res.ok) return fail(status, res);
      TG.state.orgFlash = `Welcome to ${TG.str(res.data.name)}: you joined as ${TG.str(res.data.role) === 'admin' ? 'an admin' : 'a member'}.`;
      TG.go(`/dashboard/orgs?id=${TG.enc(TG.str(res.data.id))}`);
    }));
    TG.add(view, h('section', { class: 'card' },
      h('p', {}, 'You were invited to an organization. You join as ', h('strong', { text: TG.str(me.email) || 'this account' }),
        '; the invitation must be for this e-mail address.'),
      h('div', { class: 'actions' }, join), status));
  };
})();
