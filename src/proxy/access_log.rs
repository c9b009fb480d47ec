//! What is recorded of every request when it ends: the request metrics, and one log line per
//! metered request (a model request of any front door, a tool call) with what was served and
//! charged.

use crate::request::ctx::RequestCtx;
use crate::runtime::Shared;

pub fn record(shared: &Shared, ctx: &RequestCtx) {
    let m = &shared.metrics;
    let served = ctx.served.as_ref();
    let model = served.map_or("", |d| d.model.as_str());
    let provider = served.map_or("", |d| d.provider.as_str());
    let status = ctx.status.to_string();
    m.requests
        .with_label_values(&[ctx.route, model, provider, &status])
        .inc();
    m.latency
        .with_label_values(&[ctx.route, model, provider])
        .observe(ctx.start.elapsed().as_secs_f64());
    crate::request_log::enqueue(ctx);
    // One line for every metered request, of whichever door (a tool call's usage row names
    // the tool as its model, and its provider is `mcp:{slug}`).
    if let Some(door) = ctx.metered_by {
        tracing::info!(
            request_id = %ctx.request_id,
            door = door.name,
            route = ctx.route,
            status = ctx.status,
            model_requested = ctx.model_requested.as_deref().unwrap_or(""),
            model_used = model,
            provider,
            prompt_tokens = served.map(|d| d.usage.prompt_tokens),
            completion_tokens = served.map(|d| d.usage.completion_tokens),
            usage_counted = served.is_some_and(|d| d.usage_counted),
            // "charged" only once committed to the ledger; a leased charge's usage row is
            // committed by the lease's next round (a queued one says so in its own line).
            charged_micros = ctx.charged.filter(|w| !w.in_lease).map(|w| w.charged),
            leased_micros = ctx.charged.filter(|w| w.in_lease).map(|w| w.charged),
            client_gone = ctx.client_gone,
            error = ctx.error.as_deref().unwrap_or(""),
            elapsed_ms = ctx.start.elapsed().as_millis() as u64,
            "{}",
            door.what
        );
    }
    crate::telemetry::record(shared, ctx);
}
