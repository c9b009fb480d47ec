//! The Pingora adapter: the `ProxyHttp` hooks, each a line or three that call into the rest.
//!
//! Every request is answered from `request_filter` (it returns `Ok(true)`): [`routes`] finds
//! the handler in the one route table (the chat path runs the gateway's own forwarding loop,
//! for the reasons in DESIGN.md, "Forwarding"), and an error comes back here to be answered by
//! [`crate::request::respond`]. `upstream_peer` is therefore never reached. `logging` settles
//! whatever is still held and records the request ([`access_log`]).
//!
//! Beside them: the route table ([`table`]) and the probes ([`probes`]). The plumbing the
//! handlers share lives a layer below, in [`crate::request`] (the request context, body reads,
//! responses), and who is calling in [`crate::auth`]: nothing below this folder imports it.

pub mod access_log;
pub mod probes;
pub mod routes;
pub mod table;

use std::sync::Arc;

use async_trait::async_trait;
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};

use crate::request::ctx::RequestCtx;
use crate::runtime::Shared;

pub struct Gateway {
    pub shared: Arc<Shared>,
}

#[async_trait]
impl ProxyHttp for Gateway {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        RequestCtx::new()
    }

    /// No downstream modules. Pingora's default is a response-compression module, disabled,
    /// whose context is still built and whose filters still run for every request; Tollgate
    /// compresses nothing (a stream is relayed as it comes).
    fn init_downstream_modules(&self, _modules: &mut pingora::modules::http::HttpModules) {}

    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        if let Err(e) = routes::dispatch(&self.shared, session, ctx).await {
            crate::request::respond::error(session, ctx, &e).await;
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

    async fn logging(&self, _session: &mut Session, _e: Option<&Error>, ctx: &mut RequestCtx) {
        // Normally settled already by its pipeline; this settles what a dropped future left
        // (a client that went away mid-request), through metering.
        // Boxed: this hook's future is boxed for every request, and unboxed the settlement
        // it rarely runs would make it 4 KB to copy each time.
        if ctx.metered.is_some() {
            if let Ok(meter) = self.shared.meter() {
                Box::pin(ctx.settle(&meter)).await;
            }
        }
        access_log::record(&self.shared.metrics, ctx);
    }
}
