//! What is measured of every request when it ends, beyond the access log: the GenAI latency
//! histograms and token and credit counters in [`crate::metrics`] ([`histograms`]), and the
//! request's trace ([`context`]: its place in the client's trace, and what each upstream is
//! sent; [`spans`]: the request as spans), offered to the export queue ([`queue`]), which
//! `background::traces` sends to the collector. Nothing exported names a key or carries a
//! prompt or a reply; nothing here waits.

pub mod context;
pub mod histograms;
pub mod queue;
pub mod spans;

use context::TraceCtx;

use crate::request::ctx::RequestCtx;
use crate::request::Session;
use crate::runtime::Shared;

/// Records the finished request: its histograms always; its spans when traces are on, it is
/// metered (a model request or a tool call) and sampled or failed.
pub fn record(shared: &Shared, ctx: &RequestCtx) {
    histograms::observe(&shared.metrics, ctx);
    let Some(tracer) = shared.tracer.as_ref() else {
        return;
    };
    if ctx.metered_by.is_none() || !ctx.trace.on {
        return;
    }
    if !ctx.trace.sampled && !spans::failed(ctx) {
        return;
    }
    let config = &shared.runtime.load().config;
    tracer.offer(spans::of(ctx, config), &shared.metrics);
}

/// The trace of a request to a front door or the MCP endpoint, from its `traceparent` and
/// `tracestate` headers (`route`: its method and path pattern).
pub fn begin(shared: &Shared, session: &Session, route: (&'static str, &'static str)) -> TraceCtx {
    let headers = &session.req_header().headers;
    let parent = headers.get("traceparent").map(|v| v.as_bytes());
    let state = headers.get("tracestate").map(|v| v.as_bytes());
    TraceCtx::begin(
        shared.tracer.as_ref().map(|t| t.sampler),
        parent,
        state,
        route,
    )
}
