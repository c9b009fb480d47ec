//! Who is calling: an API key, a dashboard session, the admin token, or nobody (the guest
//! tier); and the rate-limit identity that follows from it.
//!
//! No `Authorization` header is the guest tier (or a session, where the route accepts one);
//! a header that is not a valid, live key is 401, never a silent fall back to guest.

use std::net::IpAddr;

use crate::request::Session;
use tollgate_filters::keys::{self, constant_time_eq};
use tollgate_filters::net::Cidr;
use tollgate_filters::{ErrorKind, GatewayError};

use super::SESSION_COOKIE;
use crate::ledger::KeyAuth;
use crate::limits::{self, Who};
use crate::request::ctx::RequestCtx;
use crate::runtime::Shared;

// A key's variant is larger than the others: a caller lives once per request, on its stack,
// and boxing the key would cost every keyed request an allocation for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Caller {
    Guest,
    Key(KeyAuth),
    /// A dashboard session (account id); never accepted on the chat path.
    Session(String),
    /// The holder of the admin token.
    Admin,
}

impl Caller {
    pub fn account_id(&self) -> Option<&str> {
        match self {
            Caller::Guest | Caller::Admin => None,
            Caller::Key(k) => Some(&k.account_id),
            Caller::Session(a) => Some(a),
        }
    }

    /// The caller's account, or 401 for a caller without one.
    pub fn account(&self) -> Result<&str, GatewayError> {
        self.account_id().ok_or_else(|| {
            GatewayError::new(
                ErrorKind::Authentication,
                "authentication required: send Authorization: Bearer <API key>",
            )
        })
    }
}

/// Resolves the caller from the `Authorization` header, or with `allow_session` from the
/// dashboard's session cookie.
pub async fn authenticate(
    shared: &Shared,
    session: &Session,
    allow_session: bool,
) -> Result<Caller, GatewayError> {
    let headers = &session.req_header().headers;
    // Anthropic's SDKs send the key as `x-api-key`; it is accepted everywhere a key is.
    if let (None, Some(v)) = (headers.get("authorization"), headers.get("x-api-key")) {
        let key = v.to_str().map_err(|_| {
            GatewayError::new(ErrorKind::Authentication, "invalid or revoked API key")
        })?;
        let ledger = shared.ledger()?;
        return Ok(Caller::Key(
            shared
                .keys
                .resolve(ledger, key.trim(), || presenter(shared, session))
                .await?,
        ));
    }
    // Google's SDKs send the key as `x-goog-api-key` or `?key=`: accepted everywhere too.
    if headers.get("authorization").is_none() {
        let goog = headers
            .get("x-goog-api-key")
            .map(|v| v.to_str().map(str::to_owned).unwrap_or_default())
            .or_else(|| query_key(session));
        if let Some(key) = goog {
            let ledger = shared.ledger()?;
            return Ok(Caller::Key(
                shared
                    .keys
                    .resolve(ledger, key.trim(), || presenter(shared, session))
                    .await?,
            ));
        }
    }
    let header = headers.get("authorization");
    let Some(header) = header else {
        if allow_session {
            if let Some(sid) = session_cookie(session) {
                let hash = keys::hash(&sid);
                let now = crate::clock::now_ms();
                if let Some(account) = shared.ledger()?.session_account(&hash, now).await? {
                    check_cross_site(shared, session)?;
                    return Ok(Caller::Session(account));
                }
            }
        }
        return Ok(Caller::Guest);
    };
    let bad = || GatewayError::new(ErrorKind::Authentication, "invalid or revoked API key");
    let value = header.to_str().map_err(|_| bad())?;
    let key = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .ok_or_else(|| {
            GatewayError::new(
                ErrorKind::Authentication,
                "Authorization must be `Bearer <API key>`",
            )
        })?
        .trim();
    let ledger = shared.ledger()?;
    Ok(Caller::Key(
        shared
            .keys
            .resolve(ledger, key, || presenter(shared, session))
            .await?,
    ))
}

/// Who presents a key, for the invalid-key limit: the client's address and its limit.
fn presenter(shared: &Shared, session: &Session) -> (Option<IpAddr>, u64) {
    let rt = shared.runtime.load();
    let ip = client_ip(session, &rt.config.server.trusted_proxies);
    (ip, rt.config.abuse.invalid_keys_per_minute)
}

/// The `key` parameter of the query string (Google's API keys ride there too).
fn query_key(session: &Session) -> Option<String> {
    let q = session.req_header().uri.query()?;
    q.split('&')
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| *k == "key")
        .map(|(_, v)| v.to_owned())
}

/// A browser sends the session cookie with any request to the gateway, also one another site
/// makes it send (CSRF). So a cookie-authenticated write must be one a foreign page cannot
/// forge: a body with `Content-Type: application/json` (a form cannot send that without a
/// CORS preflight), and an `Origin`, when the browser sends one, of the gateway itself.
fn check_cross_site(shared: &Shared, session: &Session) -> Result<(), GatewayError> {
    let req = session.req_header();
    if matches!(req.method.as_str(), "GET" | "HEAD" | "OPTIONS") {
        return Ok(());
    }
    let header = |name: &str| req.headers.get(name).and_then(|v| v.to_str().ok());
    if matches!(req.method.as_str(), "POST" | "PUT" | "PATCH") {
        let json = header("content-type").is_some_and(|c| {
            c.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
        if !json {
            return Err(GatewayError::invalid(
                "content-type: a write with the session cookie must send application/json",
            ));
        }
    }
    if let Some(origin) = header("origin") {
        let rt = shared.runtime.load();
        let own = rt.config.server.public_url.trim_end_matches('/');
        if !origin.eq_ignore_ascii_case(own) {
            return Err(GatewayError::new(
                ErrorKind::Authentication,
                format!("origin `{origin}` is not this gateway's ({own}); the session cookie is refused"),
            ));
        }
    }
    Ok(())
}

/// The admin API's caller: the token of `server.admin_token_env`, compared by SHA-256 digest in
/// constant time; or, without an `Authorization` header, the dashboard session of an account
/// listed in `server.admin_emails` (an operator; the session's CSRF rules apply).
pub async fn admin(shared: &Shared, session: &Session) -> Result<Caller, GatewayError> {
    let rt = shared.runtime.load();
    let header = session.req_header().headers.get("authorization");
    if header.is_none() && !rt.config.server.admin_emails.is_empty() {
        if let Some(sid) = session_cookie(session) {
            let ledger = shared.ledger()?;
            let now = crate::clock::now_ms();
            if let Some(account) = ledger.session_account(&keys::hash(&sid), now).await? {
                if is_operator(shared, ledger, &account).await? {
                    check_cross_site(shared, session)?;
                    return Ok(Caller::Admin);
                }
                return Err(GatewayError::new(
                    ErrorKind::Authentication,
                    "this account is not an operator (server.admin_emails)",
                ));
            }
        }
    }
    let Some(digest) = rt.config.server.admin_token_digest.as_deref() else {
        return Err(GatewayError::new(
            ErrorKind::Authentication,
            "the admin API is disabled: no admin token is configured",
        ));
    };
    let presented = header
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if constant_time_eq(keys::hash(presented).as_bytes(), digest.as_bytes()) {
        Ok(Caller::Admin)
    } else {
        Err(GatewayError::new(
            ErrorKind::Authentication,
            "invalid admin token",
        ))
    }
}

/// Whether the account's e-mail is one of `server.admin_emails`.
pub async fn is_operator(
    shared: &Shared,
    ledger: &crate::ledger::Ledger,
    account: &str,
) -> Result<bool, GatewayError> {
    let rt = shared.runtime.load();
    let emails = &rt.config.server.admin_emails;
    if emails.is_empty() {
        return Ok(false);
    }
    let email = ledger.account(account).await?.and_then(|a| a.email);
    Ok(email.is_some_and(|e| emails.contains(&e)))
}

/// Counts the request against the caller's plan (accounts by id, guests by IP; sessions and
/// the admin are not limited) and sets the `X-RateLimit-*` headers; 429 when a window is full.
pub async fn admit(
    shared: &Shared,
    session: &Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let rt = shared.runtime.load();
    let who = match caller {
        Caller::Key(k) => Who::Account {
            id: &k.account_id,
            plan: &k.plan,
            per_hour: k.requests_per_hour,
            per_day: k.requests_per_day,
        },
        Caller::Guest => Who::Guest(client_ip(session, &rt.config.server.trusted_proxies)),
        Caller::Session(_) | Caller::Admin => return Ok(()),
    };
    let plans = &rt.config.plans;
    let v = limits::admit(
        &shared.limiter,
        plans,
        &shared.metrics,
        &who,
        &ctx.request_id,
    )
    .await;
    for (name, value) in v.headers {
        ctx.set_header(name, value);
    }
    if let Some(e) = v.refused {
        return Err(e);
    }
    if let Caller::Key(key) = caller {
        let (limiter, metrics) = (&shared.limiter, &shared.metrics);
        ctx.slot =
            super::key_limits::admit_request(limiter, plans, metrics, key, &ctx.request_id).await?;
    }
    Ok(())
}

/// Counts a signup or login attempt from the client's address against `[abuse]`; 429 past it.
pub async fn admit_attempt(
    shared: &Shared,
    session: &Session,
    ctx: &RequestCtx,
    what: &'static str,
) -> Result<(), GatewayError> {
    let rt = shared.runtime.load();
    let limits = match what {
        "signup" => rt.config.abuse.signups,
        _ => rt.config.abuse.logins,
    };
    let ip = client_ip(session, &rt.config.server.trusted_proxies);
    let (limiter, metrics) = (&shared.limiter, &shared.metrics);
    limits::admit_address(limiter, metrics, what, ip, limits, &ctx.request_id).await
}

/// The client's IP: the peer, or for a peer in `trusted_proxies` the right-most untrusted
/// address of `X-Forwarded-For`.
pub fn client_ip(session: &Session, trusted: &[Cidr]) -> Option<IpAddr> {
    let peer = session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a| a.ip())?;
    // Only a trusted peer's header is read; every line of it, in order.
    let xff: Vec<&str> = if trusted.is_empty() {
        Vec::new()
    } else {
        let lines = session.req_header().headers.get_all("x-forwarded-for");
        lines.iter().filter_map(|v| v.to_str().ok()).collect()
    };
    Some(tollgate_filters::net::client_ip(peer, &xff, trusted))
}

pub fn session_cookie(session: &Session) -> Option<String> {
    let h = session.req_header().headers.get("cookie")?.to_str().ok()?;
    super::cookie(h, SESSION_COOKIE).map(str::to_owned)
}
