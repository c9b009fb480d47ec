// Tollgate dashboard, core: building DOM without innerHTML, formatting, the API client, and
// forms that show the API's error next to the field it names. No framework, no build step.
(function () {
  'use strict';
  const TG = (window.TG = window.TG || {});
  TG.pages = TG.pages || {};
  TG.state = { me: null, newKey: null };

  // ---- DOM -------------------------------------------------------------------------------
  // h('p', {class: 'x', on: {click: f}}, 'text', child, [more]) — strings become text nodes,
  // so nothing the API returns is ever parsed as HTML.
  function build(el, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'on') {
        for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      } else if (k === 'text') {
        el.textContent = String(v);
      } else if (k === 'disabled' || k === 'hidden' || k === 'checked' || k === 'value') {
        el[k] = v;
      } else {
        el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    append(el, children);
    return el;
  }
  function append(el, children) {
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) append(el, c);
      else if (c instanceof Node) el.appendChild(c);
      else el.appendChild(document.createTextNode(String(c)));
    }
  }
  TG.h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
  TG.svg = (tag, attrs, ...children) =>
    build(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children);
  TG.clear = (el) => {
    while (el.firstChild) el.removeChild(el.firstChild);
    return el;
  };
  // Appends children, skipping null/false (Element.append would print "null").
  TG.add = (el, ...children) => {
    append(el, children);
    return el;
  };
  // Text in which `backticked` names are shown as code (the changelog's sentences).
  TG.rich = (text) => TG.str(text).split('`').map((part, i) => (i % 2 ? TG.h('code', { text: part }) : part));
  TG.replace = (el, ...children) => {
    TG.clear(el);
    append(el, children);
    return el;
  };

  // ---- values from the API: never trust their shape --------------------------------------
  TG.arr = (x) => (Array.isArray(x) ? x : []);
  TG.num = (x) => (typeof x === 'number' && isFinite(x) ? x : null);
  TG.str = (x) => (typeof x === 'string' ? x : x === null || x === undefined ? '' : String(x));

  const creditFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 6 });
  const intFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
  TG.credits = (x) => (TG.num(x) === null ? '—' : creditFmt.format(x));
  TG.int = (x) => (TG.num(x) === null ? '—' : intFmt.format(x));
  TG.limit = (x) => (x === null || x === undefined ? 'Unlimited' : TG.int(x));
  // Unix seconds to "2026-11-23 14:05 UTC": one zone for everyone reading the same ledger.
  TG.time = (unix) => {
    if (TG.num(unix) === null) return '—';
    const d = new Date(unix * 1000);
    return isNaN(d) ? '—' : d.toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
  };
  TG.day = (unix) => (TG.num(unix) === null ? '—' : new Date(unix * 1000).toISOString().slice(0, 10));
  TG.money = (amount, currency) => {
    if (TG.num(amount) === null) return '—';
    const cur = TG.str(currency).toUpperCase() || 'USD';
    try {
      return new Intl.NumberFormat('en-US', { style: 'currency', currency: cur }).format(amount / 100);
    } catch (e) {
      return (amount / 100).toFixed(2) + ' ' + cur;
    }
  };
  TG.origin = () => location.origin;

  // ---- the API ---------------------------------------------------------------------------
  // Every answer becomes {ok, status, data, error, type, field}; nothing throws. Writes always
  // send a JSON body: the gateway refuses a cookie-authenticated write without one (CSRF).
  async function call(method, path, body) {
    const opts = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (method !== 'GET' && method !== 'DELETE') {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body === undefined ? {} : body);
    }
    let res;
    try {
      res = await fetch(path, opts);
    } catch (e) {
      return { ok: false, status: 0, data: null, error: 'The gateway could not be reached. Check your connection and try again.' };
    }
    let data = null;
    try {
      const text = await res.text();
      data = text ? JSON.parse(text) : null;
    } catch (e) {
      data = null;
    }
    if (res.ok) return { ok: true, status: res.status, data: data || {} };
    const err = data && typeof data.error === 'object' && data.error ? data.error : {};
    let message = typeof err.message === 'string' && err.message ? err.message : `The gateway answered ${res.status}.`;
    const retry = TG.num(err.retry_after);
    if (res.status === 429 && retry !== null && !/try again/i.test(message)) {
      message += ` Try again in ${retry} s.`;
    }
    // (An admin route's 401 says the account is not an operator, not that the session ended.)
    const own = path.startsWith('/api/v1/') && !path.startsWith('/api/v1/admin/') && !path.startsWith('/api/v1/auth/login');
    if (res.status === 401 && TG.state.me && own) {
      // The session expired or was ended elsewhere: back to the log-in screen.
      TG.sessionEnded();
      setTimeout(() => TG.render(), 0);
    }
    return { ok: false, status: res.status, data, error: message, type: TG.str(err.type), field: TG.str(err.param) };
  }
  TG.api = {
    get: (p) => call('GET', p),
    post: (p, b) => call('POST', p, b),
    put: (p, b) => call('PUT', p, b),
    patch: (p, b) => call('PATCH', p, b),
    del: (p) => call('DELETE', p),
  };
  TG.enc = encodeURIComponent;

  // Whether this browser holds a session: the cookie is HttpOnly, so a marker beside it lets
  // the public pages skip asking `/api/v1/auth/me` (a 401 for every visitor otherwise).
  TG.marker = {
    get() {
      try { return localStorage.getItem('tg_signed_in') === '1'; } catch (e) { return false; }
    },
    set(on) {
      try {
        if (on) localStorage.setItem('tg_signed_in', '1');
        else localStorage.removeItem('tg_signed_in');
      } catch (e) { /* storage disabled: the marker is an optimisation only */ }
    },
  };
  TG.sessionEnded = () => {
    TG.state.me = null;
    TG.marker.set(false);
  };

  // ---- buttons and forms -----------------------------------------------------------------
  // Runs `fn` with the button disabled and saying so; long actions always show they work.
  TG.busy = async (button, fn) => {
    const label = button.textContent;
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    button.textContent = 'Working…';
    try {
      return await fn();
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
      button.textContent = label;
    }
  };

  let uid = 0;
  // fields: [{name, label, type, value, hint, placeholder, autocomplete, options, required}]
  // onSubmit(values, form) → an API result ({ok:false,…} shows its error) or anything else.
  TG.form = ({ id, fields, submit, onSubmit, cls, inline }) => {
    const form = TG.h('form', { class: 'form' + (inline ? ' inline' : '') + (cls ? ' ' + cls : ''), id, novalidate: true });
    const inputs = {};
    for (const f of fields) {
      const fid = `f${++uid}-${f.name}`;
      let input;
      if (f.options) {
        input = TG.h('select', { id: fid, name: f.name },
          f.options.map((o) => TG.h('option', { value: o.value, text: o.label, selected: o.value === f.value ? 'selected' : null })));
      } else if (f.type === 'textarea') {
        input = TG.h('textarea', { id: fid, name: f.name, rows: 2, placeholder: f.placeholder });
      } else {
        input = TG.h('input', {
          id: fid, name: f.name, type: f.type || 'text', placeholder: f.placeholder, autocomplete: f.autocomplete || 'off',
          min: f.min, max: f.max, step: f.step, inputmode: f.inputmode, required: f.required ? true : null, spellcheck: 'false',
        });
        if (f.value !== undefined && f.value !== null) input.defaultValue = input.value = String(f.value);
      }
      const err = TG.h('p', { class: 'field-error', id: fid + '-err', 'data-error-for': f.name, hidden: true });
      const hint = f.hint ? TG.h('p', { class: 'hint', id: fid + '-hint', text: f.hint }) : null;
      input.setAttribute('aria-describedby', [hint ? fid + '-hint' : null, fid + '-err'].filter(Boolean).join(' '));
      inputs[f.name] = { input, err };
      form.appendChild(TG.h('div', { class: 'field field-' + f.name }, TG.h('label', { for: fid, text: f.label }), input, hint, err));
    }
    const formErr = TG.h('p', { class: 'form-error', role: 'alert', hidden: true });
    const button = TG.h('button', { type: 'submit', class: 'primary', text: submit });
    form.appendChild(TG.h('div', { class: 'actions' }, button, formErr));
    const clearErrors = () => {
      formErr.hidden = true;
      for (const { input, err } of Object.values(inputs)) {
        err.hidden = true;
        err.textContent = '';
        input.removeAttribute('aria-invalid');
      }
    };
    form.showError = (res, fallbackField) => {
      const name = res.field && inputs[res.field] ? res.field : fallbackField && inputs[fallbackField] ? fallbackField : null;
      if (name) {
        const { input, err } = inputs[name];
        err.textContent = res.error;
        err.hidden = false;
        err.setAttribute('role', 'alert');
        input.setAttribute('aria-invalid', 'true');
        input.focus();
      } else {
        formErr.textContent = res.error;
        formErr.hidden = false;
      }
    };
    form.inputs = inputs;
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      if (button.disabled) return;
      clearErrors();
      const values = {};
      for (const [k, { input }] of Object.entries(inputs)) values[k] = input.type === 'password' ? input.value : input.value.trim();
      await TG.busy(button, async () => {
        try {
          const res = await onSubmit(values, form);
          if (res && res.ok === false) form.showError(res);
        } catch (e) {
          form.showError({ error: 'Something went wrong in the page: ' + (e && e.message ? e.message : e) });
        }
      });
    });
    return form;
  };

  // A section with a heading.
  TG.section = (title, ...children) => TG.h('section', { class: 'card' }, TG.h('h2', { text: title }), ...children);
  // A table in a scrolling wrapper (phones), with a caption for screen readers.
  // headers: strings, or {num: 'Label'} for a right-aligned numeric column.
  TG.table = (caption, headers, rows, empty) => {
    if (!rows.length) return TG.h('p', { class: 'muted', text: empty || 'Nothing yet.' });
    return TG.h('div', { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': caption },
      TG.h('table', {},
        TG.h('caption', { class: 'sr-only', text: caption }),
        TG.h('thead', {}, TG.h('tr', {}, headers.map((x) => (typeof x === 'string'
          ? TG.h('th', { scope: 'col', text: x })
          : TG.h('th', { scope: 'col', class: 'num', text: x.num }))))),
        TG.h('tbody', {}, rows.map((r) => (r instanceof Node ? r : TG.h('tr', {}, r.map((c) => TG.h('td', {}, c))))))));
  };
  TG.stat = (label, value, note, id) =>
    TG.h('div', { class: 'stat', id }, TG.h('div', { class: 'stat-label', text: label }),
      TG.h('div', { class: 'stat-value', text: value }), note ? TG.h('div', { class: 'stat-note', text: note }) : null);
  TG.badge = (text, kind) => TG.h('span', { class: 'badge badge-' + (kind || TG.str(text)), text });
  TG.notice = (text, kind) => TG.h('p', { class: 'notice notice-' + (kind || 'info'), role: kind === 'error' ? 'alert' : 'status', text });
  TG.loading = () => TG.h('p', { class: 'muted', 'aria-live': 'polite', text: 'Loading…' });
  // A failed load shown where the data would be.
  TG.failed = (res, what) => TG.notice(`Could not load ${what}: ${res.error}`, 'error');

  // Copies text; falls back to selecting it when the clipboard is not available.
  TG.copyButton = (getText, target) => {
    const b = TG.h('button', { type: 'button', class: 'secondary', text: 'Copy' });
    b.addEventListener('click', async () => {
      let done = false;
      try {
        if (navigator.clipboard && window.isSecureContext) {
          await navigator.clipboard.writeText(getText());
          done = true;
        }
      } catch (e) {
        done = false;
      }
      if (!done && target) {
        const r = document.createRange();
        r.selectNodeContents(target);
        const s = window.getSelection();
        s.removeAllRanges();
        s.addRange(r);
      }
      b.textContent = done ? 'Copied' : 'Selected: press Ctrl+C';
      setTimeout(() => { b.textContent = 'Copy'; }, 2500);
    });
    return b;
  };
  TG.code = (text, id) => {
    const pre = TG.h('pre', { class: 'code', id, tabindex: 0 }, TG.h('code', { text }));
    return TG.h('div', { class: 'code-box' }, pre, TG.copyButton(() => text, pre));
  };
})();
