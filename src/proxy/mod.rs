//! The Pingora service: a dispatch table in `request_filter`.
//!
//! Every request is answered from `request_filter` (it returns `Ok(true)`): the chat path by
//! the gateway's own forwarding loop ([`forward`]), for the reasons in DESIGN.md
//! ("Forwarding"), and the side endpoints by small handlers. `upstream_peer` is therefore
//! never reached. `logging` records metrics and is where settlement hooks in.

pub mod account;
pub mod admin;
pub mod body;
pub mod chat;
pub mod forward;
pub mod models;
pub mod respond;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use pingora::connectors::http::Connector;
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};
use tollgate_filters::{ErrorKind, GatewayError, Usage};

use crate::auth::{Caller, SESSION_COOKIE};
use crate::metering::Metering;
use crate::state::Shared;
use crate::store::Ledger;

pub struct Gateway {
    pub shared: Arc<Shared>,
    pub connector: Connector,
    started: i64,
}

impl Gateway {
    pub fn new(shared: Arc<Shared>) -> Gateway {
        Gateway {
            shared,
            connector: Connector::new(None),
            started: unix_now(),
        }
    }

    /// Checks and counts the request against the caller's plan (accounts by id, guests by IP),
    /// sets the `X-RateLimit-*` headers, and answers 429 when a window is full. A rejected
    /// request is not counted.
    pub async fn rate_limit(
        &self,
        session: &Session,
        ctx: &mut RequestCtx,
        caller: &Caller,
    ) -> Result<(), GatewayError> {
        let rt = self.shared.runtime.load();
        let plans = &rt.config.raw.plans;
        let (ident, plan, windows) = match caller {
            Caller::Key(k) => (
                format!("acct:{}", k.account_id),
                k.plan.clone(),
                crate::limits::windows(plans, &k.plan, k.requests_per_hour, k.requests_per_day),
            ),
            Caller::Guest => {
                let ip = client_ip(session, &rt.config.trusted_proxies)
                    .map(|i| i.to_string())
                    .unwrap_or_default();
                (
                    format!("ip:{ip}"),
                    "guest".to_string(),
                    crate::limits::windows(plans, "guest", None, None),
                )
            }
            Caller::Session(_) => return Ok(()),
        };
        let m = &self.shared.metrics;
        let d = self
            .shared
            .limiter
            .check(&ident, &windows, &ctx.request_id, &plan, m)
            .await?;
        if d.limit > 0 {
            ctx.set_header("X-RateLimit-Limit-Requests", d.limit.to_string());
            ctx.set_header("X-RateLimit-Remaining-Requests", d.remaining.to_string());
            ctx.set_header(
                "X-RateLimit-Reset-Requests",
                crate::limits::format_reset(d.reset_ms),
            );
        }
        m.ratelimit
            .with_label_values(&[&plan, if d.admitted { "admitted" } else { "limited" }])
            .inc();
        if d.admitted {
            Ok(())
        } else {
            Err(GatewayError::new(
                ErrorKind::RateLimited { retry_after: d.retry_after_secs() },
                format!("rate limit of the {plan} plan reached ({} requests per window); retry after {} s", d.limit, d.retry_after_secs()),
            ))
        }
    }

    /// The model lists count against the limit for guests only.
    async fn guest_limit(
        &self,
        session: &Session,
        ctx: &mut RequestCtx,
    ) -> Result<(), GatewayError> {
        match self.authenticate(session, false).await? {
            Caller::Guest => self.rate_limit(session, ctx, &Caller::Guest).await,
            _ => Ok(()),
        }
    }

    /// The ledger, or 503 while the store is still connecting.
    pub fn ledger(&self) -> Result<&Ledger, GatewayError> {
        self.shared.ledger.get().ok_or_else(|| {
            GatewayError::new(
                ErrorKind::ServiceUnavailable,
                "the ledger store is not connected yet; retry shortly",
            )
        })
    }

    /// Who is calling. No `Authorization` header: a dashboard session when `allow_session` and
    /// the cookie is valid, else the guest tier. A header that is not a valid key: 401.
    pub async fn authenticate(
        &self,
        session: &Session,
        allow_session: bool,
    ) -> Result<Caller, GatewayError> {
        let header = session.req_header().headers.get("authorization");
        let Some(header) = header else {
            if allow_session {
                if let Some(sid) = session_cookie(session) {
                    let hash = tollgate_filters::keys::hash(&sid);
                    if let Some(account) = self
                        .ledger()?
                        .session_account(&hash, crate::now_ms())
                        .await?
                    {
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
        let ledger = self.ledger()?;
        Ok(Caller::Key(self.shared.keys.resolve(ledger, key).await?))
    }
}

/// The client's IP: the peer, or for a peer in `trusted_proxies` the right-most untrusted
/// address of `X-Forwarded-For`.
pub fn client_ip(
    session: &Session,
    trusted: &[tollgate_filters::ratelimit::Cidr],
) -> Option<std::net::IpAddr> {
    let peer = session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a| a.ip())?;
    let xff = session
        .req_header()
        .headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok());
    Some(tollgate_filters::ratelimit::client_ip(peer, xff, trusted))
}

pub fn session_cookie(session: &Session) -> Option<String> {
    let h = session.req_header().headers.get("cookie")?.to_str().ok()?;
    crate::auth::cookie(h, SESSION_COOKIE).map(str::to_owned)
}

pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Per-request state, from the first filter to `logging`.
pub struct RequestCtx {
    pub request_id: String,
    pub start: Instant,
    pub route: &'static str,
    pub status: u16,
    pub error: Option<String>,
    /// Set by the forwarding loop: what was served and what it used, for settlement.
    pub model_requested: Option<String>,
    pub model_used: Option<String>,
    pub provider: Option<String>,
    pub usage: Option<Usage>,
    /// Usage came from the tokenizer, not the upstream.
    pub usage_counted: bool,
    pub client_gone: bool,
    /// Rates (µcr per 1K in, out) of the model used, for settlement.
    pub rates: Option<(u64, u64)>,
    /// The credit hold, until settled.
    pub metering: Option<Metering>,
    /// What settlement charged.
    pub charged: Option<i64>,
    /// Headers every response of this request carries (e.g. `X-Credits-Remaining`).
    pub headers: Vec<(&'static str, String)>,
}

impl RequestCtx {
    pub fn set_header(&mut self, name: &'static str, value: String) {
        self.headers.retain(|(k, _)| *k != name);
        self.headers.push((name, value));
    }
}

static REQUEST_SEQ: AtomicU64 = AtomicU64::new(0);

fn new_request_id() -> String {
    // Random per process plus a sequence: unique without a syscall per request.
    static PREFIX: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let p = *PREFIX.get_or_init(rand::random::<u32>);
    let n = REQUEST_SEQ.fetch_add(1, Ordering::Relaxed);
    format!("req_{p:08x}{n:012x}")
}

#[async_trait]
impl ProxyHttp for Gateway {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        RequestCtx {
            request_id: new_request_id(),
            start: Instant::now(),
            route: "other",
            status: 0,
            error: None,
            model_requested: None,
            model_used: None,
            provider: None,
            usage: None,
            usage_counted: false,
            client_gone: false,
            rates: None,
            metering: None,
            charged: None,
            headers: Vec::new(),
        }
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        let method = session.req_header().method.clone();
        let path = session.req_header().uri.path().to_owned();
        let result = match (method.as_str(), path.as_str()) {
            ("POST", "/v1/chat/completions") => {
                ctx.route = "chat";
                chat::handle(self, session, ctx).await
            }
            ("GET", "/v1/models") => {
                ctx.route = "models";
                match self.guest_limit(session, ctx).await {
                    Ok(()) => {
                        let rt = self.shared.runtime.load();
                        let body = models::list(&rt.config.catalog, unix_now(), self.started);
                        respond::json(session, ctx, 200, &body, &[]).await;
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            ("GET", "/v1/models/pricing") => {
                ctx.route = "pricing";
                match self.guest_limit(session, ctx).await {
                    Ok(()) => {
                        let rt = self.shared.runtime.load();
                        let body = models::pricing(&rt.config.catalog, unix_now());
                        respond::json(session, ctx, 200, &body, &[]).await;
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            ("GET", "/healthz") => {
                ctx.route = "healthz";
                respond::json(session, ctx, 200, &serde_json::json!({"status": "ok"}), &[]).await;
                Ok(())
            }
            ("GET", "/readyz") => {
                ctx.route = "readyz";
                readyz(self, session, ctx).await;
                Ok(())
            }
            (m, p) if p.starts_with("/api/v1/") => {
                ctx.route = "api";
                api(self, session, ctx, m, p).await
            }
            (
                _,
                "/v1/chat/completions"
                | "/v1/models"
                | "/v1/models/pricing"
                | "/healthz"
                | "/readyz",
            ) => Err(GatewayError::new(
                ErrorKind::MethodNotAllowed,
                format!("method {method} is not allowed on {path}"),
            )),
            _ => Err(GatewayError::new(
                ErrorKind::NotFound,
                format!("no route for {method} {path}"),
            )),
        };
        if let Err(e) = result {
            if e.status() == 400 || e.status() == 404 || e.status() == 405 {
                // The body may not have been read; do not reuse a connection in an unknown state.
                session.set_keepalive(None);
            }
            respond::error(session, ctx, &e).await;
        }
        Ok(true)
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        _ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        // Every route answers in request_filter; reaching here is a bug, not a client error.
        Error::e_explain(
            ErrorType::InternalError,
            "no route proxies through upstream_peer",
        )
    }

    async fn logging(
        &self,
        _session: &mut Session,
        _e: Option<&pingora::Error>,
        ctx: &mut RequestCtx,
    ) {
        // Normally settled already; this catches a request that ended some other way.
        crate::metering::settle(self, ctx).await;
        let m = &self.shared.metrics;
        let model = ctx.model_used.as_deref().unwrap_or("");
        let provider = ctx.provider.as_deref().unwrap_or("");
        let status = ctx.status.to_string();
        m.requests
            .with_label_values(&[ctx.route, model, provider, &status])
            .inc();
        m.latency
            .with_label_values(&[ctx.route, model])
            .observe(ctx.start.elapsed().as_secs_f64());
        if ctx.route == "chat" {
            tracing::info!(
                request_id = %ctx.request_id,
                status = ctx.status,
                model_requested = ctx.model_requested.as_deref().unwrap_or(""),
                model_used = model,
                provider,
                prompt_tokens = ctx.usage.map(|u| u.prompt_tokens),
                completion_tokens = ctx.usage.map(|u| u.completion_tokens),
                usage_counted = ctx.usage_counted,
                charged_micros = ctx.charged,
                client_gone = ctx.client_gone,
                error = ctx.error.as_deref().unwrap_or(""),
                elapsed_ms = ctx.start.elapsed().as_millis() as u64,
                "chat completion"
            );
        }
    }
}

/// `/api/v1/*`: account, keys, usage and admin endpoints.
async fn api(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    method: &str,
    path: &str,
) -> Result<(), GatewayError> {
    let rest = &path["/api/v1/".len()..];
    if let Some(admin_rest) = rest.strip_prefix("admin/") {
        return admin::handle(gw, session, ctx, method, admin_rest).await;
    }
    match (method, rest) {
        ("POST", "auth/signup") => return account::signup(gw, session, ctx).await,
        ("POST", "auth/login") => return account::login(gw, session, ctx).await,
        ("POST", "auth/logout") => return account::logout(gw, session, ctx).await,
        _ => {}
    }
    let known = matches!(rest, "auth/me" | "keys" | "usage") || rest.starts_with("keys/");
    if !known {
        return Err(GatewayError::new(
            ErrorKind::NotFound,
            format!("no route for {method} {path}"),
        ));
    }
    let caller = gw.authenticate(session, true).await?;
    match (method, rest) {
        ("GET", "auth/me") => account::me(gw, session, ctx, &caller).await,
        ("GET", "keys") => account::list_keys(gw, session, ctx, &caller).await,
        ("POST", "keys") => account::create_key(gw, session, ctx, &caller).await,
        ("DELETE", r) if r.len() > 5 && r.starts_with("keys/") => {
            account::revoke_key(gw, session, ctx, &caller, &r[5..]).await
        }
        ("GET", "usage") => account::usage(gw, session, ctx, &caller).await,
        _ => Err(GatewayError::new(
            ErrorKind::MethodNotAllowed,
            format!("method {method} is not allowed on {path}"),
        )),
    }
}

async fn readyz(gw: &Gateway, session: &mut Session, ctx: &mut RequestCtx) {
    let ledger = match gw.shared.ledger.get() {
        Some(l) => l.ping().await,
        None => false,
    };
    let rt = gw.shared.runtime.load();
    let providers: serde_json::Map<String, serde_json::Value> = rt
        .pools
        .iter()
        .map(|(name, p)| (name.clone(), p.has_usable_endpoint().into()))
        .collect();
    let any = providers
        .values()
        .any(|v| v == &serde_json::Value::Bool(true));
    let ready = any && ledger;
    let status = if ready { 200 } else { 503 };
    let why = match (ledger, any) {
        (true, true) => "ready",
        (false, _) => "ledger store unreachable",
        (true, false) => "no healthy upstream",
    };
    let body = serde_json::json!({"status": why, "ledger": ledger, "providers": providers});
    respond::json(session, ctx, status, &body, &[]).await;
}
