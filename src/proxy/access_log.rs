//! What is recorded of every request when it ends: the request metrics, and one log line per
//! chat completion with what was served and charged.

use super::ctx::RequestCtx;
use crate::metrics::Metrics;

pub fn record(m: &Metrics, ctx: &RequestCtx) {
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
