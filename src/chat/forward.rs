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
use tollgate_filters::anthropic::request::MessagesRequest;
use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::route::ModelSpec;
use tollgate_filters::ErrorKind;
use tollgate_filters::GatewayError;

use super::attempt::{reason_in_words, Attempt, AttemptError, Destination};
use super::stream;
use crate::metering::{self, Budget};
use crate::proxy::ctx::RequestCtx;
use crate::runtime::{Runtime, Shared};
use crate::upstream::provider;

/// A request ready to forward.
pub struct Forward<'a> {
    pub shared: &'a Shared,
    pub rt: &'a Runtime,
    pub req: &'a ChatRequest<'a>,
    /// The body as an Anthropic client sent it (`/v1/messages`); `None` for OpenAI clients.
    pub anthropic: Option<&'a MessagesRequest<'a>>,
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
    let mut budget = f.budget;
    // Every failure so far was an overloaded upstream (Anthropic's 529): the Messages API
    // answers that as Anthropic would.
    let mut overloaded = true;
    let mut tried = false;
    for (i, &mi) in f.candidates.iter().enumerate() {
        let model = f.rt.config.catalog.model(mi);
        let Some(pool) = f.rt.pools.get(&model.provider) else {
            continue;
        };
        let max_tokens = match budget.as_mut() {
            None => model_max(f.req, model),
            Some(b) => match size_attempt(f, ctx, b, model, i > 0).await {
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
        let body = match provider::chat_body(
            &pool.provider,
            f.req,
            f.anthropic,
            &model.upstream_model,
            max_tokens,
        ) {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                // Only a later candidate gets here: the first one's kind was checked before
                // the hold, so the client was told then.
                let reason = "untranslatable";
                f.shared
                    .metrics
                    .failovers
                    .with_label_values(&[&model.id, reason])
                    .inc();
                tracing::info!(request_id = %ctx.request_id, model = %model.id, "skipping a candidate that cannot take this request: {e}");
                last_failure = format!("{} {}", model.id, reason_in_words(reason));
                overloaded = false;
                continue;
            }
        };
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
                    tried = true;
                    overloaded &= reason == "overloaded";
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
    let message = format!("every upstream failed; last: {last_failure}");
    if tried && overloaded {
        return Err(GatewayError::new(ErrorKind::Overloaded, message));
    }
    Err(GatewayError::upstream(message))
}

/// The client's `max_tokens`, or the model's most, capped at the model's most.
fn model_max(req: &ChatRequest<'_>, model: &ModelSpec) -> u64 {
    req.max_tokens
        .unwrap_or(model.max_output_tokens)
        .min(model.max_output_tokens)
}

/// The `max_tokens` an attempt at `model` sends (always sent, so that nothing but the hold
/// bounds what the provider may bill; DESIGN.md, Rules: Credits): what was asked, when the hold
/// pays for it at this model's rates. A later candidate whose bound is higher first has the
/// hold topped up to that bound; failing that, `max_tokens` is lowered to what the hold pays
/// for, and `None` skips a model the hold cannot buy one token per completion of. Each such
/// decision is noted for the usage row.
async fn size_attempt(
    f: &Forward<'_>,
    ctx: &mut RequestCtx,
    b: &mut Budget,
    model: &ModelSpec,
    later: bool,
) -> Option<u64> {
    let requested = model_max(f.req, model);
    let bound = b.bound(model, requested);
    if later && bound > b.held {
        if let (Some(hold), Ok(meter)) = (ctx.hold.as_mut(), f.shared.meter()) {
            match metering::top_up(&meter, hold, &ctx.request_id, bound - b.held).await {
                Ok(true) => {
                    b.held = hold.held;
                    ctx.note_hold(format!("{}: hold topped up", model.id));
                    return Some(requested);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(request_id = %ctx.request_id, "could not top the hold up: {e}")
                }
            }
        }
    }
    let t = b.max_tokens(model, requested);
    match t {
        Some(t) if t < requested => {
            ctx.note_hold(format!("{}: max_tokens lowered to {t}", model.id));
        }
        None => ctx.note_hold(format!(
            "{}: skipped, the hold cannot pay one token",
            model.id
        )),
        Some(_) => {}
    }
    t
}
