// Tollgate dashboard: the router (one page, rendered from location.pathname, moved with
// history.pushState), the navigation, signing up, logging in and out.
(function () {
  'use strict';
  const TG = window.TG;
  const { h } = TG;

  // path → [page, title, needs a session]
  const ROUTES = {
    '/': ['pricing', 'Pricing', false],
    '/pricing': ['pricing', 'Pricing', false],
    '/dashboard': ['overview', 'Overview', true],
    '/dashboard/keys': ['keys', 'API keys', true],
    '/dashboard/usage': ['usage', 'Usage', true],
    '/dashboard/requests': ['requests', 'Requests', true],
    '/dashboard/billing': ['billing', 'Billing', true],
    '/dashboard/developer': ['developer', 'Tool developer', true],
    '/dashboard/operator': ['operator', 'Operator', true],
    '/dashboard/authorize': ['authorize', 'Connect an app', true],
    '/dashboard/apps': ['apps', 'Connected apps', true],
    '/dashboard/orgs': ['orgs', 'Organizations', true],
    '/dashboard/join': ['join', 'Join an organization', true],
    '/dashboard/webhooks': ['webhooks', 'Webhooks', true],
  };
  const NAV = [
    ['/dashboard', 'Overview'],
    ['/dashboard/keys', 'API keys'],
    ['/dashboard/usage', 'Usage'],
    ['/dashboard/requests', 'Requests'],
    ['/dashboard/billing', 'Billing'],
    ['/dashboard/developer', 'Developer'],
    ['/dashboard/apps', 'Connected apps'],
    ['/dashboard/orgs', 'Organizations'],
    ['/dashboard/webhooks', 'Webhooks'],
  ];

  // Pages whose query is what the visitor came for: kept through logging in or signing up.
  const KEEP_QUERY = ['/dashboard/authorize', '/dashboard/join'];

  const main = document.getElementById('main');
  const nav = document.getElementById('nav');
  let seq = 0;

  TG.go = (path) => {
    history.pushState(null, '', path);
    render(true);
  };

  // Same-origin links are app navigation, unless modified (new tab) or a download.
  document.addEventListener('click', (ev) => {
    const a = ev.target instanceof Element ? ev.target.closest('a[href]') : null;
    if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
    if (a.hasAttribute('download') || a.target) return;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin) return;
    const path = url.pathname.replace(/\/+$/, '') || '/';
    if (!ROUTES[path] && !path.startsWith('/dashboard/')) return;
    ev.preventDefault();
    TG.go(url.pathname + url.search + url.hash);
  });
  window.addEventListener('popstate', () => render(true));

  async function loadMe() {
    if (TG.state.me || !TG.marker.get()) return TG.state.me;
    const res = await TG.api.get('/api/v1/auth/me');
    if (res.ok && res.data && typeof res.data.user_id === 'string') TG.state.me = res.data;
    else if (res.status === 401) TG.sessionEnded();
    return TG.state.me;
  }
  TG.refreshMe = async () => {
    const res = await TG.api.get('/api/v1/auth/me');
    if (res.ok && res.data && typeof res.data.user_id === 'string') TG.state.me = res.data;
    return res;
  };

  function renderNav(path) {
    const me = TG.state.me;
    const link = (href, text) =>
      h('a', { href, class: 'nav-link', 'aria-current': path === href ? 'page' : null, text });
    const items = [link('/pricing', 'Pricing')];
    if (me) {
      for (const [href, text] of NAV) items.push(link(href, text));
      if (me.operator === true) items.push(link('/dashboard/operator', 'Operator'));
      const out = h('button', { type: 'button', class: 'linkish', id: 'logout', text: 'Log out' });
      out.addEventListener('click', () => TG.busy(out, logout));
      items.push(h('span', { class: 'who', text: TG.str(me.email) || TG.str(me.user_id) }), out);
    } else {
      items.push(link('/dashboard', 'Log in'));
    }
    TG.replace(nav, items);
  }

  async function logout() {
    await TG.api.post('/api/v1/auth/logout', {});
    TG.sessionEnded();
    TG.state.newKey = null;
    TG.go('/dashboard');
  }

  async function render(moved) {
    const n = ++seq;
    const path = location.pathname.replace(/\/+$/, '') || '/';
    const route = ROUTES[path];
    if (route) await loadMe();
    if (n !== seq) return; // a later navigation won
    renderNav(path);
    const view = h('div', { class: 'view' });
    TG.replace(main, view);
    if (!route) {
      document.title = 'Not found · Tollgate';
      TG.add(view, h('h1', { tabindex: -1, text: 'Page not found' }),
        h('p', {}, 'There is no page at this address. ', h('a', { href: '/dashboard', text: 'Go to the dashboard' }), '.'));
    } else if (route[2] && !TG.state.me) {
      document.title = 'Log in · Tollgate';
      renderAuth(view);
    } else if (route[0] === 'operator' && TG.state.me.operator !== true) {
      document.title = 'Operator · Tollgate';
      TG.add(view, h('h1', { tabindex: -1, text: 'Operator' }),
        TG.notice('This page is for the gateway’s operators. Your account is not one of them.', 'info'));
    } else {
      document.title = `${route[1]} · Tollgate`;
      try {
        await TG.pages[route[0]](view);
      } catch (e) {
        TG.add(view, TG.notice('This page could not be shown: ' + (e && e.message ? e.message : e), 'error'));
      }
    }
    if (moved && n === seq) {
      const h1 = main.querySelector('h1');
      if (h1) {
        h1.setAttribute('tabindex', '-1');
        h1.focus();
      }
    }
  }
  TG.render = () => render(false);

  // ---- signing up and logging in ---------------------------------------------------------
  // autoBuy: continue to the checkout a signed-out Buy asked for (not right after a sign-up,
  // whose new key must be seen first; the billing page offers to continue).
  async function login(email, password, autoBuy) {
    const res = await TG.api.post('/api/v1/auth/login', { email, password });
    if (!res.ok) return res;
    TG.marker.set(true);
    const me = await TG.refreshMe();
    if (!me.ok) return me;
    // Bought from the pricing page while signed out: on to the checkout now.
    const buy = new URLSearchParams(location.search).get('buy');
    if (buy && autoBuy) {
      const started = await TG.checkout({ plan: buy });
      // A refused checkout is explained on the billing page, whose button tries again.
      if (!started.ok) {
        TG.state.checkoutError = started.error || 'unknown error';
        TG.go(`/dashboard/billing?buy=${TG.enc(buy)}`);
      }
      return { ok: true };
    }
    // The consent page's query is the authorization request, the join page's the invitation:
    // kept through logging in.
    const keep = KEEP_QUERY.includes(location.pathname) ? location.search : '';
    history.replaceState(null, '', buy ? `/dashboard/billing?buy=${TG.enc(buy)}` : location.pathname + keep);
    await render(true);
    return { ok: true };
  }

  function renderAuth(view) {
    const buying = new URLSearchParams(location.search).get('buy');
    let mode = 'login';
    const panel = h('div', { class: 'auth-panel' });
    const tabs = h('div', { class: 'tabs', role: 'group', 'aria-label': 'Log in or sign up' });
    const show = (m) => {
      mode = m;
      for (const b of tabs.children) b.setAttribute('aria-pressed', String(b.dataset.mode === mode));
      TG.replace(panel, mode === 'login' ? loginForm() : signupForm());
    };
    for (const [m, text] of [['login', 'Log in'], ['signup', 'Sign up']]) {
      const b = h('button', { type: 'button', class: 'tab', 'data-mode': m, id: 'tab-' + m, text });
      b.addEventListener('click', () => {
        show(m);
        const first = panel.querySelector('input');
        if (first) first.focus();
      });
      tabs.append(b);
    }
    TG.add(view, 
      h('h1', { tabindex: -1, text: 'Your Tollgate account' }),
      buying ? TG.notice(`Log in or sign up to buy the ${buying} plan; the checkout opens right after.`, 'info') : null,
      location.pathname === '/dashboard/join'
        ? TG.notice('You were invited to an organization. Log in, or sign up with the invited e-mail address, to join it.', 'info') : null,
      h('div', { class: 'card auth' }, tabs, panel),
      h('p', { class: 'muted' }, 'New accounts start with free credits, no card needed. ', h('a', { href: '/pricing', text: 'See pricing' }), '.'),
    );
    show(mode);
  }

  function loginForm() {
    return TG.form({
      id: 'login-form',
      submit: 'Log in',
      fields: [
        { name: 'email', label: 'E-mail', type: 'email', autocomplete: 'username' },
        { name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password' },
      ],
      onSubmit: async (v, form) => {
        const res = await login(v.email, v.password, true);
        if (!res.ok && res.status === 401) form.showError(res, 'password');
        else if (!res.ok) form.showError(res, res.status === 429 ? 'email' : null);
        return { ok: true };
      },
    });
  }

  function signupForm() {
    return TG.form({
      id: 'signup-form',
      submit: 'Create account',
      fields: [
        { name: 'email', label: 'E-mail', type: 'email', autocomplete: 'username' },
        { name: 'password', label: 'Password', type: 'password', autocomplete: 'new-password', hint: 'At least 8 characters.' },
      ],
      onSubmit: async (v, form) => {
        const res = await TG.api.post('/api/v1/auth/signup', { email: v.email, password: v.password });
        if (!res.ok) {
          form.showError(res, res.status === 409 || res.status === 429 ? 'email' : null);
          return { ok: true };
        }
        // Signing up issues a key but no session: log in with what was just typed.
        TG.state.newKey = { key: TG.str(res.data.api_key), name: 'default', fresh: true };
        const buy = new URLSearchParams(location.search).get('buy');
        if (!buy && !['/dashboard', ...KEEP_QUERY].includes(location.pathname)) history.replaceState(null, '', '/dashboard');
        const done = await login(v.email, v.password, false);
        if (!done.ok) form.showError(done);
        return { ok: true };
      },
    });
  }

  // Starts a Stripe Checkout for {plan} or {credits_pack} and leaves for it.
  TG.checkout = async (what) => {
    const res = await TG.api.post('/api/v1/billing/checkout', what);
    if (res.ok && typeof res.data.checkout_url === 'string') {
      location.assign(res.data.checkout_url);
      return { ok: true };
    }
    return res.ok ? { ok: false, error: 'The gateway did not return a checkout address.' } : res;
  };

  render(false);
})();
