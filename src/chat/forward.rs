//! The forwarding loop (DESIGN.md, "Forwarding: why the chat path drives its own upstream
//! calls"): for each candidate of the route and each usable endpoint of its pool, one
//! [`Attempt`], failing over on connect error, timeout, 5xx or 429 until one answers. Once the
//! first byte has gone to the client there is no failing over.
//!
//! This is the one module that would move onto Pingora's own body hooks if a later Pingora
//! lifts its 64 KiB retry-buffer limit.

use std::time::Instant;

use bytes::Bytes;
use pingora::proxy::Session;
use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::GatewayError;

use super::attempt::{reason_in_words, Attempt, AttemptError, Destination};
use super::stream;
use crate::metering::Budget;
use crate::proxy::ctx::RequestCtx;
use crate::runtime::{Runtime, Shared};
use crate::upstream::provider;

/// A request ready to forward.
pub struct Forward<'a> {
    pub shared: &'a Shared,
    pub rt: &'a Runtime,
    pub req: &'a ChatRequest,
    /// Catalog indices of the models to try, in order.
    pub candidates: &'a [usize],
    /// What the credit hold pays for; `None` (a guest): no bound but the model's.
    pub budget: Option<Budget>,
}

pub async fn run(
    f: &Forward<'_>,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let timeouts = &f.rt.config.timeouts;
    let deadline = Instant::now() + timeouts.response;
    let mut last_failure = String::from("no endpoint was usable");
    for &mi in f.candidates {
        let model = f.rt.config.catalog.model(mi);
        let Some(pool) = f.rt.pools.get(&model.provider) else {
            continue;
        };
        // Always sent, so that nothing but the hold bounds what the provider may bill: the
        // client's own or the model's most, lowered to what the hold pays for at this model's
        // rates. A model the hold cannot buy one token per completion of is skipped.
        let requested = f
            .req
            .max_tokens
            .unwrap_or(model.max_output_tokens)
            .min(model.max_output_tokens);
        let max_tokens = match &f.budget {
            None => requested,
            Some(b) => match b.max_tokens(model, requested) {
                Some(t) => t,
                None => {
                    f.shared
                        .metrics
                        .failovers
                        .with_label_values(&[&model.id, "unaffordable"])
                        .inc();
                    tracing::info!(request_id = %ctx.request_id, model = %model.id, "skipping a candidate the credit hold cannot pay for");
                    last_failure = format!("{}: the credit hold cannot pay for it", model.id);
                    continue;
                }
            },
        };
        let body = provider::chat_body(
            &pool.provider,
            f.req,
            &model.upstream_model,
            Some(max_tokens),
        );
        let body = Bytes::from(body);
        for endpoint in pool.usable_endpoints() {
            if !f.req.stream && Instant::now() >= deadline {
                return Err(GatewayError::upstream(format!(
                    "no upstream answered within {}s: {last_failure}",
                    timeouts.response.as_secs_f64()
                )));
            }
            let attempt = Attempt {
                shared: f.shared,
                timeouts,
                req: f.req,
                dest: Destination {
                    model,
                    pool,
                    peer: pool.peer(
                        &endpoint,
                        timeouts.connect,
                        timeouts.response.max(timeouts.stream_chunk),
                    ),
                    endpoint: &endpoint,
                },
                body: body.clone(),
            };
            let result = if f.req.stream {
                stream::run(&attempt, session, ctx).await
            } else {
                attempt.json(session, ctx, deadline).await
            };
            let m = &f.shared.metrics;
            let provider = &pool.provider.name;
            match result {
                Ok(()) => {
                    pool.record_success(&endpoint);
                    m.upstream_attempts
                        .with_label_values(&[provider, "ok"])
                        .inc();
                    return Ok(());
                }
                Err(AttemptError::Client(e)) => {
                    pool.record_success(&endpoint);
                    m.upstream_attempts
                        .with_label_values(&[provider, "rejected"])
                        .inc();
                    return Err(e);
                }
                Err(AttemptError::Failover { reason, detail }) => {
                    m.upstream_attempts
                        .with_label_values(&[provider, reason])
                        .inc();
                    m.failovers.with_label_values(&[&model.id, reason]).inc();
                    if pool.record_failure(&endpoint) {
                        tracing::warn!(provider = %provider, endpoint = %endpoint.addr, "endpoint ejected after consecutive failures");
                    }
                    tracing::info!(request_id = %ctx.request_id, model = %model.id, endpoint = %endpoint.addr, reason, %detail, "failing over");
                    // The client is told which model failed and how, in words; the address and
                    // the provider's own text are in the log line above.
                    last_failure = format!("{} {}", model.id, reason_in_words(reason));
                }
            }
        }
    }
    Err(GatewayError::upstream(format!(
        "every upstream failed; last: {last_failure}"
    )))
}
