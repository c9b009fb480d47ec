//! The GenAI figures of a finished request, from its timeline: time to first token and time
//! per output token (streams), the serving leg's duration, tokens and credits. Labels are the
//! model and provider only (bounded by the config), never a key or an account.

use std::time::Instant;

use crate::metrics::Metrics;
use crate::request::ctx::RequestCtx;

pub fn observe(m: &Metrics, ctx: &RequestCtx) {
    // A response cache hit used no provider: its replay's speed and tokens are not the model's.
    if let (Some(d), None) = (&ctx.served, ctx.cache_hit) {
        let labels = [d.model.as_str(), d.provider.as_str()];
        let usage = ctx.resumed.as_ref().map_or(d.usage, |l| l.usage());
        let end = Instant::now();
        if let Some(first) = ctx.timeline.first_output {
            m.ttft
                .with_label_values(&labels)
                .observe(first.saturating_duration_since(ctx.start).as_secs_f64());
            // OpenTelemetry's server TPOT: the time after the first token over the tokens after it.
            if usage.completion_tokens > 1 {
                let after = end.saturating_duration_since(first).as_secs_f64();
                m.tpot
                    .with_label_values(&labels)
                    .observe(after / (usage.completion_tokens - 1) as f64);
            }
        }
        if let Some(leg) = ctx.timeline.serving() {
            let took = leg.end.unwrap_or(end).saturating_duration_since(leg.start);
            m.upstream_duration
                .with_label_values(&[leg.model.as_str(), leg.provider.as_str()])
                .observe(took.as_secs_f64());
        }
        let (model, provider) = (labels[0], labels[1]);
        m.tokens
            .with_label_values(&[model, provider, "input"])
            .inc_by(usage.prompt_tokens);
        m.tokens
            .with_label_values(&[model, provider, "output"])
            .inc_by(usage.completion_tokens);
    }
    if let Some(w) = ctx.charged.filter(|w| w.charged > 0) {
        let model = match &ctx.served {
            Some(d) => d.model.as_str(),
            None => ctx.model_requested.as_deref().unwrap_or_default(),
        };
        m.credits_charged
            .with_label_values(&[model])
            .inc_by(w.charged as u64);
    }
}
