//! The Pingora service: a dispatch table in `request_filter`.
//!
//! Every request is answered from `request_filter` (it returns `Ok(true)`): the chat path by
//! the gateway's own forwarding loop ([`forward`]), for the reasons in DESIGN.md
//! ("Forwarding"), and the side endpoints by small handlers. `upstream_peer` is therefore
//! never reached. `logging` records metrics and is where settlement hooks in.

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

use crate::state::Shared;

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
                let rt = self.shared.runtime.load();
                let body = models::list(&rt.config.catalog, unix_now(), self.started);
                respond::json(session, ctx, 200, &body, &[]).await;
                Ok(())
            }
            ("GET", "/v1/models/pricing") => {
                ctx.route = "pricing";
                let rt = self.shared.runtime.load();
                let body = models::pricing(&rt.config.catalog, unix_now());
                respond::json(session, ctx, 200, &body, &[]).await;
                Ok(())
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
                client_gone = ctx.client_gone,
                error = ctx.error.as_deref().unwrap_or(""),
                elapsed_ms = ctx.start.elapsed().as_millis() as u64,
                "chat completion"
            );
        }
    }
}

async fn readyz(gw: &Gateway, session: &mut Session, ctx: &mut RequestCtx) {
    let rt = gw.shared.runtime.load();
    let providers: serde_json::Map<String, serde_json::Value> = rt
        .pools
        .iter()
        .map(|(name, p)| (name.clone(), p.has_usable_endpoint().into()))
        .collect();
    let any = providers
        .values()
        .any(|v| v == &serde_json::Value::Bool(true));
    let status = if any { 200 } else { 503 };
    let body = serde_json::json!({"status": if any {"ready"} else {"no healthy upstream"}, "providers": providers});
    respond::json(session, ctx, status, &body, &[]).await;
}
