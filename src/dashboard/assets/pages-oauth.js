// Tollgate dashboard, OAuth for MCP clients: the consent page an MCP client's sign-in lands on
// (`/dashboard/authorize?…`, sent there by `/oauth/authorize`), and the account's connected
// apps (OAuth grants) with their revocation.
(function () {
  'use strict';
  const TG = window.TG;
  const { h } = TG;

  // The authorization request's parameters, passed back to the API as they came.
  const PARAMS = ['response_type', 'client_id', 'redirect_uri', 'code_challenge', 'code_challenge_method', 'state', 'resource', 'scope'];

  TG.pages.authorize = async (view) => {
    TG.add(view, h('h1', { tabindex: -1, text: 'Connect an app' }), TG.loading());
    const q = new URLSearchParams(location.search);
    const res = await TG.api.get('/api/v1/oauth/authorize?' + q.toString());
    view.lastChild.remove();
    if (!res.ok) {
      return TG.add(view, TG.notice('This sign-in request cannot be approved: ' + res.error, 'error'),
        h('p', {}, 'Start the connection again from your app. ', h('a', { href: '/dashboard', text: 'Go to the dashboard' }), '.'));
    }
    const d = res.data;
    const client = d.client || {};
    const keys = TG.arr(d.keys);
    const request = {};
    for (const p of PARAMS) if (q.has(p)) request[p] = q.get(p);
    const options = [{ value: 'new', label: 'A new key for this app' }].concat(
      keys.map((k) => ({ value: TG.str(k.id), label: `${TG.str(k.name)} (${TG.str(k.prefix)}…)` })));
    const form = TG.form({
      id: 'consent-form',
      submit: 'Approve',
      fields: [{ name: 'key_id', label: 'Act as', options, value: 'new',
        hint: 'The app’s calls are charged and limited as this key’s: its budget, allowed models and tools, and limits apply. A new key can be limited on the API keys page.' }],
      onSubmit: async (v) => decide(request, true, v.key_id),
    });
    const deny = h('button', { type: 'button', id: 'consent-deny', text: 'Deny' });
    deny.addEventListener('click', () => TG.busy(deny, async () => {
      const r = await decide(request, false);
      if (r && r.ok === false) TG.add(view, TG.notice(r.error, 'error'));
    }));
    form.querySelector('.actions').append(deny);
    TG.add(view,
      TG.section('Access requested',
        h('p', { id: 'consent-client' }, h('strong', { text: TG.str(client.name) }),
          ' asks to use your Tollgate MCP tools: list them and call them, charged to your credits.'),
        h('dl', { class: 'facts' },
          h('dt', { text: 'Tools' }), h('dd', {}, h('code', { id: 'consent-resource', text: TG.str(d.resource) })),
          h('dt', { text: 'Returns to' }), h('dd', {}, h('code', { id: 'consent-redirect', text: TG.str(d.redirect_uri) })),
          h('dt', { text: 'Client id' }), h('dd', {}, h('code', { text: TG.str(client.id) }))),
        TG.notice('Approve only if you started this connection in that app. You can disconnect it at any time under Connected apps.', 'warn'),
        form));
  };

  async function decide(request, approve, keyId) {
    const body = Object.assign({}, request, { approve });
    if (approve && keyId && keyId !== 'new') body.key_id = keyId;
    const res = await TG.api.post('/api/v1/oauth/authorize', body);
    if (!res.ok) return res;
    if (typeof res.data.redirect_to !== 'string') return { ok: false, error: 'The gateway did not say where to return.' };
    location.assign(res.data.redirect_to);
    return { ok: true };
  }

  TG.pages.apps = async (view) => {
    TG.add(view, h('h1', { tabindex: -1, text: 'Connected apps' }),
      h('p', { class: 'muted' }, 'MCP clients you signed in to Tollgate with OAuth. Each acts as one of your API keys; disconnecting stops its tokens within seconds.'),
      TG.loading());
    const res = await TG.api.get('/api/v1/oauth/grants');
    view.lastChild.remove();
    if (!res.ok) return TG.add(view, TG.failed(res, 'your connected apps'));
    const rows = TG.arr(res.data.data).map((g) => {
      const b = h('button', { type: 'button', class: 'danger', text: 'Disconnect', 'aria-label': `Disconnect ${TG.str(g.client_name)}` });
      b.addEventListener('click', () => TG.busy(b, async () => {
        const r = await TG.api.del('/api/v1/oauth/grants/' + TG.enc(TG.str(g.id)));
        if (!r.ok) return TG.add(view, TG.notice(r.error, 'error'));
        TG.render();
      }));
      return h('tr', { class: 'grant-row', 'data-grant': TG.str(g.id) },
        h('td', { class: 'grant-client', text: TG.str(g.client_name) }),
        h('td', { text: TG.str(g.key_name) }),
        h('td', {}, h('code', { text: TG.str(g.resource) })),
        h('td', { text: TG.time(g.created_at) }),
        h('td', { text: g.last_used_at ? TG.time(g.last_used_at) : 'Never' }),
        h('td', {}, b));
    });
    TG.add(view, h('div', { id: 'grants-list' },
      TG.table('Connected apps', ['App', 'Acts as key', 'Tools', 'Connected', 'Last used', ''], rows, 'No app is connected. Add the MCP URL to Claude Desktop, Cursor or VS Code to connect one.')));
  };
})();
