// A real OpenID provider for the single sign-on tests: the npm package `oidc-provider` (9.x,
// pinned by `./dev test` under .tools/oidc), started by testkit/src/oidc.rs.
//
// Env:
//   PORT           listens on 127.0.0.1:PORT; the issuer is http://127.0.0.1:PORT
//   CLIENT_ID, CLIENT_SECRET, REDIRECT_URI
//                  the one client: code flow only, client_secret_basic at the token endpoint,
//                  PKCE (S256) required, exactly that redirect URI
//   NODE_PATH      where `oidc-provider` is installed (…/node_modules); ES modules ignore
//                  NODE_PATH, so the package is resolved from there by hand
//
// Accounts: any login is an account; its id is the login (an e-mail) and its claims are
// sub = email = the login, email_verified = true. The built-in development interactions ask for
// a login and any password; consent is given automatically (the client's grant for `openid
// email` is made on the first authorization), so the flow is login -> redirect with the code.
// Each start generates a new RS256 signing key with a random kid: restarting on the same port
// is a key rotation (and forgets every session, code and token: storage is in memory).
//
// Fault injection (this test provider only): `POST /__tamper` with `{"mode": "<mode>"}` (or
// `{"mode": null}` to stop) answers 204; from then on the `id_token` of every successful token
// response is rewritten by that mode, until the next `/__tamper` (a restart forgets it):
//   signature         `email` changed in the payload, original header and signature kept
//   audience          `aud` = "someone-else", re-signed with the provider's key
//   issuer            `iss` = "http://127.0.0.1:9", re-signed
//   expired           `exp` = now - 3600, `iat` = now - 7200, re-signed
//   nonce             `nonce` = "not-the-one-sent", re-signed
//   alg_none          header {"alg":"none"}, empty signature part
//   other_key         re-signed RS256 by a freshly generated key under the provider's kid
//   unverified_email  `email_verified` = false, re-signed
// ("re-signed" = a valid RS256 signature by the provider's own key, same header: only the
// named claim is wrong.) An unknown mode or a body that is not such JSON answers 400.
//
// Prints `READY <issuer>` on stdout once listening; exits on SIGTERM / SIGINT.

import { randomBytes, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

function env(name) {
  const v = process.env[name];
  if (!v) {
    process.stderr.write(`provider.mjs: ${name} is not set\n`);
    process.exit(2);
  }
  return v;
}

// `require.resolve` from each NODE_PATH entry (then from here), imported as an ES module.
async function load(pkg, from) {
  const bases = [
    ...(from ? [from] : []),
    ...(process.env.NODE_PATH || '').split(':').filter(Boolean).map((d) => join(d, 'x.js')),
    import.meta.filename,
  ];
  for (const base of bases) {
    let entry;
    try {
      entry = createRequire(base).resolve(pkg);
    } catch {
      continue;
    }
    return { mod: await import(pathToFileURL(entry).href), entry };
  }
  process.stderr.write(`provider.mjs: cannot find ${pkg} (NODE_PATH=${process.env.NODE_PATH || ''})\n`);
  process.exit(2);
}

const port = Number(env('PORT'));
const clientId = env('CLIENT_ID');
const clientSecret = env('CLIENT_SECRET');
const redirectUri = env('REDIRECT_URI');
const issuer = `http://127.0.0.1:${port}`;

const { mod: oidc, entry: providerEntry } = await load('oidc-provider');
// jose is oidc-provider's own dependency: resolved from its directory.
const { mod: jose } = await load('jose', providerEntry);
const Provider = oidc.default ?? oidc.Provider;

const { privateKey } = await jose.generateKeyPair('RS256', { modulusLength: 2048, extractable: true });
const signingKey = {
  ...(await jose.exportJWK(privateKey)),
  kid: randomUUID(),
  alg: 'RS256',
  use: 'sig',
};

const SCOPE = 'openid email';

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'RS256',
    },
  ],
  jwks: { keys: [signingKey] },
  pkce: { required: () => true },
  // The e-mail claims go into the ID token too, not only to userinfo (the default puts scope
  // claims in the ID token only when no access token is issued).
  conformIdTokenClaims: false,
  claims: { openid: ['sub'], email: ['email', 'email_verified'] },
  async findAccount(_ctx, id) {
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: id, email_verified: true };
      },
    };
  },
  // Automatic consent: the client's grant for `openid email` is made when none exists yet.
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) {
      const found = await ctx.oidc.provider.Grant.find(grantId);
      if (found) return found;
    }
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope(SCOPE);
    await grant.save();
    return grant;
  },
  // Over plain http the cookies are never `secure` (oidc-provider sets `secure` only when the
  // request is https); they are signed with a key of this run. Cookies ignore ports: a gateway
  // on 127.0.0.1 receives these too, hence names that say whose they are (sso_login.py leaves
  // them out of the gateway's cookies).
  cookies: {
    names: {
      session: 'oidc_provider_session',
      interaction: 'oidc_provider_interaction',
      resume: 'oidc_provider_resume',
    },
    keys: [randomBytes(32).toString('base64url')],
    long: { httpOnly: true, sameSite: 'lax' },
    short: { httpOnly: true, sameSite: 'lax' },
  },
  features: {
    devInteractions: { enabled: true },
  },
  // A plain error page that sso_login.py recognises (#error_description).
  renderError(ctx, out) {
    const safe = (v) => String(v ?? '').replace(/[<>&"']/g, '');
    ctx.type = 'html';
    ctx.body = `<!DOCTYPE html><title>oidc error</title><h1 id="error">${safe(out.error)}</h1>`
      + `<p id="error_description">${safe(out.error_description)}</p>`;
  },
});
// Direct connections only (no proxy in front): X-Forwarded-* is not trusted.
provider.proxy = false;

const TOKEN_PATH = provider.pathFor('token');

// oidc-provider takes client_secret_post from any client_secret_basic client (and the other way
// round); the gateway's contract is client_secret_basic, so a token request with its secret in
// the body, or without Basic credentials, is refused here as the registered method requires.
provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && ctx.path === TOKEN_PATH && !/^basic /i.test(ctx.get('authorization'))) {
    ctx.status = 401;
    ctx.set('WWW-Authenticate', 'Basic realm="token"');
    ctx.body = { error: 'invalid_client', error_description: 'client_secret_basic required (HTTP Basic credentials)' };
    process.stderr.write('provider.mjs: token request without HTTP Basic client credentials refused\n');
    return;
  }
  await next();
});

// --- Fault injection: POST /__tamper, and the token endpoint's ID token rewritten. ---

const b64json = (part) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
const b64url = (value) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

// The same protected header (alg RS256, the provider's kid), this payload, signed by `key`.
async function resign(header, payload, key = privateKey) {
  return new jose.CompactSign(new TextEncoder().encode(JSON.stringify(payload)))
    .setProtectedHeader(header)
    .sign(key);
}

// mode -> (header, payload, signature part, the original compact JWS) -> the tampered token.
const TAMPER = {
  async signature(h, p, sig, jwt) {
    const at = String(p.email ?? '').lastIndexOf('@');
    const email = at >= 0 ? `tampered-${p.email.slice(0, at)}${p.email.slice(at)}` : 'tampered@example.com';
    return `${jwt.split('.')[0]}.${b64url({ ...p, email })}.${sig}`;
  },
  audience: (h, p) => resign(h, { ...p, aud: 'someone-else' }),
  issuer: (h, p) => resign(h, { ...p, iss: 'http://127.0.0.1:9' }),
  expired: (h, p) => resign(h, { ...p, exp: now() - 3600, iat: now() - 7200 }),
  nonce: (h, p) => resign(h, { ...p, nonce: 'not-the-one-sent' }),
  async alg_none(h, p) {
    return `${b64url({ alg: 'none' })}.${b64url(p)}.`;
  },
  async other_key(h, p) {
    const stranger = await jose.generateKeyPair('RS256', { modulusLength: 2048 });
    return resign({ ...h, alg: 'RS256', kid: signingKey.kid }, p, stranger.privateKey);
  },
  unverified_email: (h, p) => resign(h, { ...p, email_verified: false }),
};

let tamperMode = null;

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

provider.use(async (ctx, next) => {
  if (ctx.path !== '/__tamper') return next();
  if (ctx.method !== 'POST') {
    ctx.status = 405;
    ctx.set('Allow', 'POST');
    return;
  }
  let mode;
  try {
    ({ mode } = JSON.parse(await readBody(ctx.req)));
  } catch {
    mode = undefined;
  }
  if (mode !== null && !Object.hasOwn(TAMPER, mode ?? '')) {
    ctx.status = 400;
    ctx.body = { error: `mode must be null or one of ${Object.keys(TAMPER).join(', ')}` };
    return;
  }
  tamperMode = mode;
  process.stderr.write(`provider.mjs: tamper mode ${mode ?? 'off'}\n`);
  ctx.status = 204;
});

provider.use(async (ctx, next) => {
  await next();
  if (ctx.path !== TOKEN_PATH || ctx.status !== 200 || !tamperMode) return;
  const body = ctx.body;
  if (!body || typeof body !== 'object' || typeof body.id_token !== 'string') return;
  const jwt = body.id_token;
  const [h, p, sig] = jwt.split('.');
  ctx.body = { ...body, id_token: await TAMPER[tamperMode](b64json(h), b64json(p), sig, jwt) };
  process.stderr.write(`provider.mjs: tamper: id_token of the token response rewritten (${tamperMode})\n`);
});

provider.on('server_error', (_ctx, err) => process.stderr.write(`provider.mjs: server_error: ${err?.stack || err}\n`));
provider.on('grant.error', (_ctx, err) => process.stderr.write(`provider.mjs: grant.error: ${err?.message} ${err?.error_detail || ''}\n`));
provider.on('authorization.error', (_ctx, err) => process.stderr.write(`provider.mjs: authorization.error: ${err?.message} ${err?.error_detail || ''}\n`));

const server = provider.listen(port, '127.0.0.1', () => {
  process.stdout.write(`READY ${issuer}\n`);
});
server.on('error', (err) => {
  process.stderr.write(`provider.mjs: listen on 127.0.0.1:${port}: ${err.message}\n`);
  process.exit(1);
});

for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    server.close();
    server.closeAllConnections?.();
    process.exit(0);
  });
}
