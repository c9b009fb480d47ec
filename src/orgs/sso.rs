//! Single sign-on per organization (OpenID Connect, authorization code flow with PKCE): the
//! owner sets its provider (`PUT /api/v1/orgs/{id}/sso`); people sign in to the dashboard
//! through it (`GET /api/v1/sso/{id}/start` → the provider → `GET /api/v1/sso/callback`),
//! `state` bound to the browser by a cookie and taken once on any instance, the ID token's
//! signature, issuer, audience, expiry and nonce verified against the provider's discovery
//! document and keys (`tollgate_filters::oidc`), the keys fetched again when a token names one
//! they lack (a rotation). A first sign-in with an allowed domain makes the account and its
//! membership.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};
use tollgate_filters::oidc::{self, Discovery, Expect, Jwks, OidcError};
use tollgate_filters::{keys, ErrorKind, GatewayError};

use super::{access, read};
use crate::accounts::{random_bytes, random_id, SESSION_COOKIE, SESSION_TTL_SECS};
use crate::auth::caller::Caller;
use crate::ledger::orgs::Role;
use crate::ledger::sso::{PendingLogin, SsoSettings};
use crate::request::ctx::RequestCtx;
use crate::request::{respond, Session};
use crate::runtime::Shared;
use crate::upstream::outbound;

/// How long a sign-in may take at the provider.
const LOGIN_TTL_MS: i64 = 10 * 60 * 1000;
/// How long a provider's discovery document and keys are kept before they are read again.
const CACHE_TTL: Duration = Duration::from_secs(600);
const STATE_COOKIE: &str = "tg_sso";
const TIMEOUT: Duration = Duration::from_secs(5);
const MAX_REPLY: usize = 1 << 20;

/// What was read from providers, by issuer or URL, with when.
type Cache<T> = Mutex<HashMap<String, (Instant, Arc<T>)>>;

/// Discovery documents by issuer, key sets by their URL.
static DISCOVERED: LazyLock<Cache<Discovery>> = LazyLock::new(Default::default);
static KEYS: LazyLock<Cache<Jwks>> = LazyLock::new(Default::default);

fn cached<T>(map: &Cache<T>, key: &str) -> Option<Arc<T>> {
    let m = map.lock().ok()?;
    m.get(key)
        .filter(|(at, _)| at.elapsed() < CACHE_TTL)
        .map(|(_, v)| v.clone())
}

fn keep<T>(map: &Cache<T>, key: &str, v: Arc<T>) {
    if let Ok(mut m) = map.lock() {
        m.insert(key.to_owned(), (Instant::now(), v));
    }
}

fn provider_error(what: &str, e: impl std::fmt::Display) -> GatewayError {
    GatewayError::upstream(format!("the organization's OpenID provider: {what}: {e}"))
}

async fn get(shared: &Shared, url: &str) -> Result<bytes::BytesMut, GatewayError> {
    let r = outbound::call(
        shared,
        "the OpenID provider",
        ("GET", url),
        &[("Accept", "application/json")],
        b"",
        (TIMEOUT, MAX_REPLY),
    )
    .await
    .map_err(|e| provider_error("unreachable", e))?;
    if r.status != 200 {
        return Err(provider_error(url, format!("HTTP {}", r.status)));
    }
    Ok(r.body)
}

async fn discovery(shared: &Shared, issuer: &str) -> Result<Arc<Discovery>, GatewayError> {
    if let Some(d) = cached(&DISCOVERED, issuer) {
        return Ok(d);
    }
    let url = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    let d = Discovery::parse(&get(shared, &url).await?, issuer)
        .map_err(|e| provider_error("discovery document", e))?;
    let d = Arc::new(d);
    keep(&DISCOVERED, issuer, d.clone());
    Ok(d)
}

async fn key_set(shared: &Shared, uri: &str, fresh: bool) -> Result<Arc<Jwks>, GatewayError> {
    if let Some(k) = cached(&KEYS, uri).filter(|_| !fresh) {
        return Ok(k);
    }
    let k = Arc::new(Jwks::parse(&get(shared, uri).await?).map_err(|e| provider_error("keys", e))?);
    keep(&KEYS, uri, k.clone());
    Ok(k)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SsoChange {
    issuer: String,
    client_id: String,
    client_secret: String,
    allowed_domains: Vec<String>,
    #[serde(default)]
    default_role: Option<String>,
    #[serde(default)]
    required: bool,
}

fn settings_json(shared: &Shared, s: &SsoSettings) -> Value {
    let base = public_base(shared);
    json!({"object": "organization.sso", "organization_id": s.org_id, "configured": true, "issuer": s.issuer,
           "client_id": s.client_id, "allowed_domains": s.allowed_domains,
           "default_role": s.default_role.as_str(), "required": s.required,
           "login_url": format!("{base}/api/v1/sso/{}/start", s.org_id),
           "redirect_uri": format!("{base}/api/v1/sso/callback")})
}

fn public_base(shared: &Shared) -> String {
    shared
        .runtime
        .load()
        .config
        .server
        .public_url
        .trim_end_matches('/')
        .to_owned()
}

/// `PUT /api/v1/orgs/{id}/sso`: the owner sets the provider (checked by reading its discovery
/// document before anything is stored).
pub async fn set(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    access(shared, session, caller, org, Role::Owner).await?;
    let b: SsoChange = read(shared, session).await?;
    let issuer = b.issuer.trim().trim_end_matches('/').to_owned();
    if !(issuer.starts_with("https://") || issuer.starts_with("http://")) {
        return Err(GatewayError::invalid(
            "issuer: must be the provider's http(s) URL",
        ));
    }
    for (field, v) in [
        ("client_id", &b.client_id),
        ("client_secret", &b.client_secret),
    ] {
        if v.trim().is_empty() || v.len() > 1024 {
            return Err(GatewayError::invalid(format!(
                "{field}: must be 1 to 1024 characters"
            )));
        }
    }
    let domains = domains(&b.allowed_domains)?;
    let default_role = match b.default_role.as_deref().unwrap_or("member") {
        r @ ("member" | "admin") => Role::parse(r).unwrap_or(Role::Member),
        _ => {
            return Err(GatewayError::invalid(
                "default_role: must be `member` or `admin`",
            ))
        }
    };
    discovery(shared, &issuer)
        .await
        .map_err(|e| GatewayError::invalid(format!("issuer: {}", e.message)))?;
    let s = SsoSettings {
        org_id: org.to_owned(),
        issuer,
        client_id: b.client_id.trim().to_owned(),
        client_secret: b.client_secret,
        allowed_domains: domains,
        default_role,
        required: b.required,
    };
    ledger.set_sso(&s, crate::clock::now_ms()).await?;
    respond::json(session, ctx, 200, &settings_json(shared, &s), &[]).await;
    Ok(())
}

/// The allowed e-mail domains, lower-cased; at least one, each a domain name.
fn domains(list: &[String]) -> Result<Vec<String>, GatewayError> {
    if list.is_empty() || list.len() > 50 {
        return Err(GatewayError::invalid(
            "allowed_domains: 1 to 50 e-mail domains",
        ));
    }
    list.iter()
        .enumerate()
        .map(|(i, d)| {
            let d = d.trim().trim_start_matches('@').to_lowercase();
            let ok = d.contains('.')
                && !d.starts_with('.')
                && !d.ends_with('.')
                && d.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
            ok.then_some(d).ok_or_else(|| {
                GatewayError::invalid(format!("allowed_domains[{i}]: not a domain name"))
            })
        })
        .collect()
}

/// `GET /api/v1/orgs/{id}/sso`: the settings, without the secret (owner or admin); before
/// any, `configured: false` with the redirect URI to register with the provider.
pub async fn show(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    access(shared, session, caller, org, Role::Admin).await?;
    let body = match shared.ledger()?.sso(org).await? {
        Some(s) => settings_json(shared, &s),
        None => json!({"object": "organization.sso", "organization_id": org, "configured": false,
                       "login_url": format!("{}/api/v1/sso/{org}/start", public_base(shared)),
                       "redirect_uri": format!("{}/api/v1/sso/callback", public_base(shared))}),
    };
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

/// `GET /api/v1/sso/{id}/start`: to the organization's provider, with a fresh state (also in
/// a cookie of this browser), nonce and PKCE challenge.
pub async fn start(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    org: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let no_sso = || {
        GatewayError::new(
            ErrorKind::NotFound,
            format!("no single sign-on for `{org}`"),
        )
    };
    let s = ledger.sso(org).await?.ok_or_else(no_sso)?;
    let d = discovery(shared, &s.issuer).await?;
    let state = random_id(43)?;
    let nonce = random_id(43)?;
    let mut seed = [0u8; 32];
    seed.copy_from_slice(&random_bytes(32));
    let verifier = oidc::pkce_verifier(&seed);
    let login = PendingLogin {
        org_id: org.to_owned(),
        nonce: nonce.clone(),
        verifier: verifier.clone(),
    };
    ledger
        .begin_login(
            &keys::hash(&state),
            &login,
            crate::clock::now_ms() + LOGIN_TTL_MS,
        )
        .await?;
    let redirect = format!("{}/api/v1/sso/callback", public_base(shared));
    let url = oidc::authorization_url(
        &d,
        &s.client_id,
        &redirect,
        &state,
        &nonce,
        &oidc::pkce_challenge(&verifier),
        "openid email",
    );
    let cookie = format!(
        "{STATE_COOKIE}={state}; Path=/api/v1/sso; HttpOnly; SameSite=Lax; Max-Age=600{}",
        secure(shared)
    );
    respond::send(
        session,
        ctx,
        302,
        "text/plain",
        Vec::new(),
        &[("Location", url), ("Set-Cookie", cookie)],
    )
    .await;
    Ok(())
}

fn secure(shared: &Shared) -> &'static str {
    match shared
        .runtime
        .load()
        .config
        .server
        .public_url
        .starts_with("https://")
    {
        true => "; Secure",
        false => "",
    }
}

fn refused(message: impl Into<String>) -> GatewayError {
    GatewayError::new(ErrorKind::Forbidden, message)
}

/// `GET /api/v1/sso/callback?code=…&state=…`: the provider's answer. The state must be this
/// browser's and unused; the code is exchanged (with the PKCE verifier) for an ID token,
/// which is verified; its verified e-mail must be of an allowed domain. Then the account (made
/// on a first sign-in) is a member and has a session made by this sign-on.
pub async fn callback(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let query = crate::oauth::form::parse(session.req_header().uri.query().unwrap_or(""))
        .map_err(|_| GatewayError::invalid("query: malformed"))?;
    let param = |k: &str| query.get(k).cloned();
    if let Some(e) = param("error") {
        return Err(refused(format!(
            "the provider refused the sign-in: {}",
            e.chars().take(100).collect::<String>()
        )));
    }
    let (Some(code), Some(state)) = (param("code"), param("state")) else {
        return Err(GatewayError::invalid("query: code and state are required"));
    };
    let cookie = session
        .req_header()
        .headers
        .get("cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|h| crate::auth::cookie(h, STATE_COOKIE).map(str::to_owned));
    if cookie.as_deref() != Some(state.as_str()) {
        return Err(GatewayError::invalid(
            "state: not this browser's sign-in; start again",
        ));
    }
    let ledger = shared.ledger()?;
    let now = crate::clock::now_ms();
    let Some(login) = ledger.take_login(&keys::hash(&state), now).await? else {
        return Err(GatewayError::invalid(
            "state: unknown, used or expired; start again",
        ));
    };
    let s = ledger
        .sso(&login.org_id)
        .await?
        .ok_or_else(|| refused("this organization's single sign-on was removed"))?;
    // RFC 9207: a provider that names itself in its answer must be the one asked (a mix-up).
    let issuer = |i: &str| i.trim_end_matches('/').to_owned();
    if param("iss").is_some_and(|iss| issuer(&iss) != issuer(&s.issuer)) {
        return Err(refused(
            "the answer came from another provider than this organization's",
        ));
    }
    let email = verified_email(shared, &s, &login, &code).await?;
    if !oidc::domain_allowed(&email, &s.allowed_domains) {
        return Err(refused(format!(
            "the e-mail domain of `{email}` may not sign in to this organization"
        )));
    }
    let sid = random_id(43)?;
    let expires = now + SESSION_TTL_SECS * 1000;
    let new_id = format!("usr_{}", random_id(16)?);
    ledger
        .sso_sign_in(
            (&new_id, &email),
            (&s.org_id, s.default_role),
            (&keys::hash(&sid), expires),
            now,
        )
        .await?;
    let session_cookie = format!(
        "{SESSION_COOKIE}={sid}; Path=/; HttpOnly; SameSite=Strict; Max-Age={SESSION_TTL_SECS}{}",
        secure(shared)
    );
    let clear = format!("{STATE_COOKIE}=; Path=/api/v1/sso; HttpOnly; SameSite=Lax; Max-Age=0");
    // A page, not a redirect: the navigation to the dashboard then starts on this site, so the
    // browser sends the new SameSite=Strict session cookie with it.
    let page = "<!doctype html><meta charset=utf-8><title>Signed in</title><link rel=icon href=/assets/favicon.svg><meta http-equiv=refresh content=\"0;url=/dashboard\"><a href=/dashboard>Continue to the dashboard</a>";
    let extra: &[(&str, String)] = &[("Set-Cookie", session_cookie), ("Set-Cookie", clear)];
    respond::send(
        session,
        ctx,
        200,
        "text/html; charset=utf-8",
        page.as_bytes().to_vec(),
        extra,
    )
    .await;
    Ok(())
}

/// The code exchanged for an ID token, verified; its verified e-mail, lower-cased.
async fn verified_email(
    shared: &Shared,
    s: &SsoSettings,
    login: &PendingLogin,
    code: &str,
) -> Result<String, GatewayError> {
    let d = discovery(shared, &s.issuer).await?;
    let redirect = format!("{}/api/v1/sso/callback", public_base(shared));
    let body = oidc::token_request_body(code, &redirect, &login.verifier, &s.client_id);
    let basic = base64_basic(&s.client_id, &s.client_secret);
    let headers = [
        ("Authorization", basic.as_str()),
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Accept", "application/json"),
    ];
    let r = outbound::call(
        shared,
        "the OpenID provider",
        ("POST", &d.token_endpoint),
        &headers,
        body.as_bytes(),
        (TIMEOUT, MAX_REPLY),
    )
    .await
    .map_err(|e| provider_error("token endpoint", e))?;
    let token = oidc::parse_token_response(&r.body)
        .map_err(|e| refused(format!("the provider would not give a token: {e}")))?;
    let expect = Expect::new(d.issuer.clone(), s.client_id.clone(), login.nonce.clone());
    let now = crate::clock::now_secs();
    let mut claims = oidc::verify_id_token(
        &token,
        &*key_set(shared, &d.jwks_uri, false).await?,
        &expect,
        now,
    );
    if matches!(claims, Err(OidcError::UnknownKey)) {
        // The provider rotated its keys since they were read.
        claims = oidc::verify_id_token(
            &token,
            &*key_set(shared, &d.jwks_uri, true).await?,
            &expect,
            now,
        );
    }
    let claims = claims.map_err(|e| refused(format!("the ID token was refused: {e}")))?;
    let email = claims
        .verified_email()
        .ok_or_else(|| refused("the provider gave no verified e-mail"))?;
    crate::accounts::signup::normalise_email(email)
}

/// `Basic` credentials of a client (RFC 6749 2.3.1: each part form-encoded first).
fn base64_basic(id: &str, secret: &str) -> String {
    use base64::Engine;
    let pair = format!(
        "{}:{}",
        oidc::percent_encode(id),
        oidc::percent_encode(secret)
    );
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}
