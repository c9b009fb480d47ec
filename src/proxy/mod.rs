//! The Pingora adapter: Tollgate is Pingora's HTTP server application ([`HttpServerApp`]), and
//! each request is read, answered and logged here, each step a line or three that call into
//! the rest.
//!
//! [`routes`] finds the handler in the one route table (the chat path runs the gateway's own
//! forwarding loop, for the reasons in DESIGN.md, "Forwarding"), and an error comes back here to
//! be answered by [`crate::request::respond`]. Then whatever is still held is settled and the
//! request recorded ([`access_log`]), and the connection goes back to Pingora for its next
//! request.
//!
//! Why not `pingora-proxy`'s `ProxyHttp`: Tollgate answers every request itself (its upstream
//! exchange is its own, `crate::upstream`), so of that layer it used only the hooks' plumbing,
//! and paid for it in memory: Pingora boxes `process_new_http`'s whole future when a
//! connection starts waiting for its next request, and the proxy's held the 13 KB request
//! pipeline while the connection sat idle. Here the wait is a small future and the pipeline is
//! boxed only once a request has arrived (README, Performance: 34.5 → 17.9 KB per idle
//! connection, then 1.8 KB with the connections accepted by [`listen`]; the CPU a request
//! costs did not measurably change).
//!
//! Beside them: the accept loop and each connection's task ([`listen`]), where its listening
//! sockets come from ([`handover`]: bound, or taken over from the instance it replaces), how
//! many connections it holds ([`capacity`]: the open-file limit raised at start, the bound), the route table
//! ([`table`]) and the probes ([`probes`]). The plumbing the
//! handlers share lives a layer below, in [`crate::request`] (the request context, body reads,
//! responses), and who is calling in [`crate::auth`]: nothing below this folder imports it.

pub mod access_log;
pub mod capacity;
pub mod handover;
pub mod listen;
pub mod probes;
pub mod routes;
pub mod table;

use std::sync::Arc;

use async_trait::async_trait;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, ReusedHttpStream};
use pingora::protocols::http::ServerSession;
use pingora::server::ShutdownWatch;

use crate::request::ctx::RequestCtx;
use crate::runtime::Shared;

pub struct Gateway {
    pub shared: Arc<Shared>,
}

#[async_trait]
impl HttpServerApp for Gateway {
    async fn process_new_http(
        self: &Arc<Self>,
        mut session: ServerSession,
        shutdown: &ShutdownWatch,
    ) -> Option<ReusedHttpStream> {
        if !next_request(&mut session, shutdown).await {
            return None;
        }
        // Boxed: the request's pipeline is most of this future, and unboxed it would sit in
        // every idle connection's task while it waits for its next request.
        Box::pin(self.serve(session)).await
    }
}

impl Gateway {
    /// One request, from the route table to the access log.
    async fn serve(&self, mut session: ServerSession) -> Option<ReusedHttpStream> {
        let mut ctx = RequestCtx::new();
        if let Err(e) = routes::dispatch(&self.shared, &mut session, &mut ctx).await {
            crate::request::respond::error(&mut session, &mut ctx, &e).await;
        }
        // Normally settled already by its pipeline; this settles what a dropped future left
        // (a handler that ended early), through metering. Boxed: the settlement is rare, and
        // unboxed it would make every request's future 4 KB larger to copy.
        if ctx.metered.is_some() {
            if let Ok(meter) = self.shared.meter() {
                Box::pin(crate::pipeline::settle::settle(&mut ctx, &meter)).await;
            }
        }
        access_log::record(&self.shared, &ctx);
        hand_back(session).await
    }
}

/// Waits for the connection's next request and reads its head; `false`: there is none to
/// answer (the client closed, sent no HTTP, or the server is stopping). A keep-alive
/// connection waits here between requests, in a future of a few hundred bytes. Shared with the
/// lean floor (`examples/lean_floor.rs`), which serves as Tollgate does.
pub async fn next_request(session: &mut ServerSession, shutdown: &ShutdownWatch) -> bool {
    // A stopping server ends the wait (the connection closes) instead of holding it open
    // through the grace period, as Pingora's proxy did.
    let mut stopping = shutdown.clone();
    let read = tokio::select! {
        biased;
        read = session.read_request() => read,
        _ = stopping.wait_for(|stop| *stop) => return false,
    };
    match read {
        Ok(true) => {}
        Ok(false) => return false,
        Err(e) => {
            if matches!(e.etype, pingora::ErrorType::InvalidHTTPHeader) {
                // Not HTTP: a bare 400, then closed (what Pingora's proxy answers).
                let _ = session.respond_error(400).await;
            } else {
                tracing::debug!("reading a request head: {e}");
            }
            session.shutdown().await;
            return false;
        }
    }
    if session.req_header().method == http::Method::CONNECT {
        // Tollgate tunnels nothing, and a CONNECT's framing is not a request's.
        let _ = session.respond_error(405).await;
        session.shutdown().await;
        return false;
    }
    if *shutdown.borrow() {
        session.set_keepalive(None);
    }
    true
}

/// Ends the request: the connection goes back to Pingora for the next one when its response
/// was written to its end and keep-alive holds.
pub async fn hand_back(session: ServerSession) -> Option<ReusedHttpStream> {
    let settings = HttpPersistentSettings::for_session(&session);
    session
        .finish()
        .await
        .ok()
        .flatten()
        .map(|s| ReusedHttpStream::from_reusable_stream(s, settings))
}
