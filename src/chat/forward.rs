//! The forwarding loop (DESIGN.md, "Forwarding: why the chat path drives its own upstream
//! calls"): for each candidate of the route and each usable endpoint of its pool, one
//! [`Attempt`], failing over on connect error, timeout, 5xx or 429 until one answers. Once the
//! first byte has gone to the client there is no failing over. It returns what was served
//! ([`Reply`]); settling and answering are the pipeline's.
//!
//! This is the one module that would move onto Pingora's own body hooks if a later Pingora
//! lifts its 64 KiB retry-buffer limit.

use std::time::Instant;

use crate::request::Session;
use bytes::Bytes;
use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::route::ModelSpec;
use tollgate_filters::ErrorKind;
use tollgate_filters::GatewayError;

use super::attempt::{Attempt, Destination};
use super::front::Front;
use super::resume;
use super::stream::{self, Ran, Streamed};
use crate::request::ctx::RequestCtx;
use crate::runtime::{Runtime, Shared};
use crate::upstream::failover::{record_answered, record_failover, AttemptError, Failover};
use crate::upstream::provider;

/// A request ready to forward.
pub struct Forward<'a> {
    pub shared: &'a Shared,
    pub rt: &'a Runtime,
    pub req: &'a ChatRequest<'a>,
    /// What the client's front door adds (the Anthropic body, a Responses stream, a legacy
    /// completion); all `None` for a chat-completions client.
    pub front: Front<'a>,
    /// Catalog indices of the models to try, in order.
    pub candidates: &'a [usize],
    /// A stream cut after its commit is continued on a later candidate (`resume.rs`).
    pub resume: bool,
}

/// What an attempt served: a JSON reply to send, or a stream whose closing events wait.
pub enum Reply {
    Json(Vec<u8>),
    /// Boxed: the upstream response and its peer are most of a kilobyte.
    Stream(Box<Streamed>),
}

/// Tries the candidates until one serves; each attempt's `max_tokens` is what the request's
/// charge (`ctx.metered`, none for a guest) pays for at that model's rates.
pub async fn run(
    f: &Forward<'_>,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<Reply, GatewayError> {
    let timeouts = &f.rt.config.timeouts;
    let deadline = Instant::now() + timeouts.response;
    let mut last_failure = String::from("no endpoint was usable");
    // Every failure so far was an overloaded upstream (Anthropic's 529): the Messages API
    // answers that as Anthropic would.
    let mut overloaded = true;
    let mut tried = false;
    for (i, &mi) in f.candidates.iter().enumerate() {
        let model = f.rt.config.catalog.model(mi);
        let Some(pool) = f.rt.pools.get(&model.provider) else {
            continue;
        };
        let requested = model_max(f.req, model);
        let max_tokens = match ctx.metered.as_mut() {
            None => requested,
            Some(charge) => match charge
                .size_attempt(&f.shared.meter()?, &ctx.request_id, model, requested, i > 0)
                .await
            {
                Some(t) => t,
                None => {
                    f.shared
                        .metrics
                        .failovers
                        .with_label_values(&[&model.id, Failover::Unaffordable.label()])
                        .inc();
                    tracing::info!(request_id = %ctx.request_id, model = %model.id, "skipping a candidate the credit hold cannot pay for");
                    last_failure = format!("{}: the credit hold cannot pay for it", model.id);
                    continue;
                }
            },
        };
        let body = upstream_body(f, ctx, pool, model, max_tokens);
        let body = match body {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                // Only a later candidate gets here: the first one's kind was checked before
                // the hold, so the client was told then.
                let reason = Failover::Untranslatable;
                f.shared
                    .metrics
                    .failovers
                    .with_label_values(&[&model.id, reason.label()])
                    .inc();
                tracing::info!(request_id = %ctx.request_id, model = %model.id, "skipping a candidate that cannot take this request: {e}");
                last_failure = format!("{} {}", model.id, reason.words());
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
                front: f.front,
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
                match stream::run(&attempt, session, ctx, f.resume).await {
                    Ok(Ran::Done(s)) => Ok(Reply::Stream(s)),
                    Ok(Ran::Cut(relay)) => {
                        let route = resume::Forward {
                            shared: f.shared,
                            rt: f.rt,
                            req: f.req,
                            front: f.front,
                            candidates: f.candidates,
                        };
                        // Boxed: a resumed stream is rare and its future the largest of the
                        // attempt's; unboxed it would be part of every request's future (7 KB
                        // against 4), which is copied whole when the request's future is boxed.
                        let s = Box::pin(resume::resume(&route, i, relay, &attempt, session, ctx))
                            .await;
                        Ok(Reply::Stream(Box::new(s)))
                    }
                    Err(e) => Err(e),
                }
            } else {
                attempt.json(ctx, deadline).await.map(Reply::Json)
            };
            let m = &f.shared.metrics;
            match result {
                Ok(reply) => {
                    record_answered(m, pool, &endpoint, "ok");
                    return Ok(reply);
                }
                Err(AttemptError::Client(e)) => {
                    record_answered(m, pool, &endpoint, "rejected");
                    return Err(e);
                }
                Err(AttemptError::Failover { reason, detail }) => {
                    tried = true;
                    overloaded &= reason == Failover::Overloaded;
                    last_failure = record_failover(
                        m,
                        pool,
                        &endpoint,
                        &model.id,
                        &ctx.request_id,
                        reason,
                        &detail,
                    );
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

/// The body a candidate gets in its provider's shape: the front door's own for a legacy
/// completion or a Responses provider, else the internal chat request translated. A
/// Responses request bridged to a chat provider leaves its hosted tools out and says so in
/// `X-Tollgate-Warning` (or cannot be bridged when it forces one).
fn upstream_body(
    f: &Forward<'_>,
    ctx: &mut RequestCtx,
    pool: &crate::upstream::Pool,
    model: &ModelSpec,
    max_tokens: u64,
) -> Result<Vec<u8>, GatewayError> {
    let up = &model.upstream_model;
    match (f.front.completions, f.front.responses) {
        (Some(legacy), _) => Ok(legacy.upstream_body(up, max_tokens)),
        (None, Some(r)) if pool.provider.responses_api => {
            Ok(r.request.native_body(r.history, up, max_tokens))
        }
        (None, Some(r)) => {
            r.request.check_bridgeable(&model.id)?;
            if let Some(w) = r.request.dropped_warning() {
                ctx.set_header("X-Tollgate-Warning", w);
            }
            provider::chat_body(&pool.provider, f.req, None, up, max_tokens)
        }
        _ => provider::chat_body(&pool.provider, f.req, f.front.anthropic, up, max_tokens),
    }
}
