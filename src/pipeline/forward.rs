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
use super::resume;
pub use super::route::Forward;
use super::stream::{self, Ran, Streamed};
use crate::request::ctx::RequestCtx;
use crate::request::timeline::Outcome;
use crate::upstream::failover::{record_answered, record_failover, AttemptError, Failover};

/// What an attempt served: a JSON reply to send, or a stream whose closing events wait.
pub enum Reply {
    Json(Vec<u8>),
    /// Boxed: the upstream response and its peer are most of a kilobyte.
    Stream(Box<Streamed>),
    /// A stream answered from the response cache.
    Replay(Box<stream::Replayed>),
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
    let mut failures = Failures::new();
    for (i, model, pool) in f.candidates_from(0) {
        let Some(max_tokens) = size(f, ctx, i, model).await? else {
            failures.skip(f, ctx, model, Failover::Unaffordable, None);
            continue;
        };
        let body = f
            .front
            .door
            .upstream_body(f.req, &pool.provider, model, max_tokens, ctx);
        let body = match body {
            Ok(b) => Bytes::from(f.breakpoints.apply(model, &pool.provider, b)),
            Err(e) => {
                // Only a later candidate gets here: the first one's kind was checked before
                // the hold, so the client was told then.
                failures.skip(f, ctx, model, Failover::Untranslatable, Some(&e));
                continue;
            }
        };
        for endpoint in f.endpoints(model, pool) {
            if !f.req.stream && Instant::now() >= deadline {
                return Err(GatewayError::upstream(format!(
                    "no upstream answered within {}s: {}",
                    timeouts.response.as_secs_f64(),
                    failures.last
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
            let provider = &pool.provider.name;
            let leg = ctx
                .timeline
                .begin(&model.id, provider, endpoint.url.authority(), false);
            let result = match f.req.stream {
                true => stream_once(f, i, &attempt, session, ctx).await,
                false => attempt.json(ctx, deadline).await.map(Reply::Json),
            };
            let m = &f.shared.metrics;
            match result {
                Ok(reply) => {
                    record_answered(m, pool, &endpoint, "ok");
                    f.served(model, pool, &endpoint, &body).await;
                    // A stream that broke after its output and was not resumed ends with an
                    // error event: its leg was cut.
                    let outcome = match &ctx.error {
                        Some(e) => Outcome::Cut(e.clone()),
                        None => Outcome::Served,
                    };
                    ctx.timeline.end(leg, outcome);
                    return Ok(reply);
                }
                Err(AttemptError::Client(e)) => {
                    record_answered(m, pool, &endpoint, "rejected");
                    ctx.timeline.end(leg, Outcome::Rejected(e.message.clone()));
                    return Err(e);
                }
                Err(AttemptError::Failover { reason, detail }) => {
                    let outcome = Outcome::Failover {
                        reason: reason.label(),
                        detail: detail.clone(),
                    };
                    ctx.timeline.end(leg, outcome);
                    failures.tried = true;
                    failures.overloaded &= reason == Failover::Overloaded;
                    failures.last = record_failover(
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
    Err(failures.into_error())
}

/// The `max_tokens` candidate `i` is sent: what the charge pays for at its rates (the hold
/// topped up first for a later, pricier one); `None` skips a candidate the hold cannot buy a
/// token of. A guest's request has no charge and sends what it asked.
async fn size(
    f: &Forward<'_>,
    ctx: &mut RequestCtx,
    i: usize,
    model: &ModelSpec,
) -> Result<Option<u64>, GatewayError> {
    let requested = model_max(f.req, model);
    let Some(charge) = ctx.metered.as_mut() else {
        return Ok(Some(requested));
    };
    let meter = f.shared.meter()?;
    Ok(charge
        .size_attempt(&meter, &ctx.request_id, model, requested, i > 0)
        .await)
}

/// One streamed attempt at candidate `i`: a stream that completed, or one cut after its
/// commit that continues on a later candidate (`resume.rs`).
async fn stream_once(
    f: &Forward<'_>,
    i: usize,
    attempt: &Attempt<'_>,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<Reply, AttemptError> {
    match stream::run(attempt, session, ctx, f.resume).await? {
        Ran::Done(s) => Ok(Reply::Stream(s)),
        Ran::Cut(relay) => {
            // Boxed: a resumed stream is rare and its future the largest of the attempt's;
            // unboxed it would be part of every request's future, which is copied whole when
            // the request's future is boxed (docs/performance.md).
            let s = Box::pin(resume::resume(f, i, relay, attempt, session, ctx)).await;
            Ok(Reply::Stream(Box::new(s)))
        }
    }
}

/// What the loop knows of its failures so far, for the answer when every candidate failed.
struct Failures {
    last: String,
    /// Every failure so far was an overloaded upstream (Anthropic's 529): the Messages API
    /// answers that as Anthropic would.
    overloaded: bool,
    /// An attempt was made.
    tried: bool,
}

impl Failures {
    fn new() -> Failures {
        Failures {
            last: String::from("no endpoint was usable"),
            overloaded: true,
            tried: false,
        }
    }

    /// A candidate skipped before any attempt at it, counted and logged with `why`.
    fn skip(
        &mut self,
        f: &Forward<'_>,
        ctx: &RequestCtx,
        model: &ModelSpec,
        reason: Failover,
        why: Option<&GatewayError>,
    ) {
        f.shared
            .metrics
            .failovers
            .with_label_values(&[&model.id, reason.label()])
            .inc();
        match why {
            None => {
                tracing::info!(request_id = %ctx.request_id, model = %model.id, "skipping a candidate the credit hold cannot pay for");
                self.last = format!("{}: the credit hold cannot pay for it", model.id);
            }
            Some(e) => {
                tracing::info!(request_id = %ctx.request_id, model = %model.id, "skipping a candidate that cannot take this request: {e}");
                self.last = format!("{} {}", model.id, reason.words());
                self.overloaded = false;
            }
        }
    }

    fn into_error(self) -> GatewayError {
        let message = format!("every upstream failed; last: {}", self.last);
        if self.tried && self.overloaded {
            return GatewayError::new(ErrorKind::Overloaded, message);
        }
        GatewayError::upstream(message)
    }
}

/// The client's `max_tokens`, or the model's most, capped at the model's most.
fn model_max(req: &ChatRequest<'_>, model: &ModelSpec) -> u64 {
    req.max_tokens
        .unwrap_or(model.max_output_tokens)
        .min(model.max_output_tokens)
}
