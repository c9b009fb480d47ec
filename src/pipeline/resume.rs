//! Streams that survive a cut (docs/api.md, "Streams that survive a cut"). A committed stream whose
//! request opted in and whose upstream broke (closed, sent an error event, went silent past
//! `stream_chunk`) after delivering only text is continued on the next candidate of its route
//! (as failover picks them: healthy, within the key's allowlist, affordable under the hold,
//! topped up when it falls short), asked to continue the partial answer: a prefill for an
//! Anthropic provider, the provider's `continuation` mode for an OpenAI-compatible one. Its
//! events go out as the rest of the same stream ([`tollgate_filters::resume::Seamed`]), after
//! an SSE comment `: resumed on <model>`. At most `[routing] max_resumes` times per stream;
//! a stream that cannot be resumed ends as any cut stream, with the error event.
//!
//! Each leg is charged at its own model's rates ([`Legs`]): the first for what it delivered,
//! a continuation for its prompt (the conversation and the partial answer) and its output.

use std::sync::Arc;
use std::time::Instant;

use crate::request::Session;
use bytes::Bytes;
use tollgate_filters::resume::request::{anthropic_continuation, openai_continuation};
use tollgate_filters::sse::SseDecoder;

use super::attempt::{Attempt, Destination, Tags};
use super::cut::send;
use super::route::Forward;
use super::stream::{self, Relay, Streamed, Tally, MAX_SSE_EVENT};
use super::translate;
use crate::config::ProviderKind;
use crate::metering::legs::Legs;
use crate::request::ctx::RequestCtx;
use crate::request::timeline::Outcome;
use crate::upstream::failover::{
    check_status, failover, record_answered, record_failover, AttemptError, Failover,
};
use crate::upstream::Endpoint;

/// A continuation that answered: where it went, kept to build its attempt again.
struct Plan {
    /// Its position in the route's candidates.
    at: usize,
    endpoint: Arc<Endpoint>,
    body: Bytes,
}

/// The attempt of a planned continuation (only candidates with a pool are planned).
fn attempt<'a>(f: &'a Forward<'a>, plan: &'a Plan) -> Option<Attempt<'a>> {
    let model = f.rt.config.catalog.model(f.candidates[plan.at]);
    let timeouts = &f.rt.config.timeouts;
    let pool = f.rt.pools.get(&model.provider)?;
    Some(Attempt {
        shared: f.shared,
        timeouts,
        req: f.req,
        front: f.front,
        dest: Destination {
            model,
            pool,
            peer: pool.peer(
                &plan.endpoint,
                timeouts.connect,
                timeouts.response.max(timeouts.stream_chunk),
            ),
            endpoint: &plan.endpoint,
        },
        body: plan.body.clone(),
    })
}

/// Continues the cut stream `r`, whose first leg was `first`, the route's candidate `from`;
/// returns it served up to its closing events, as [`stream::run`] would have.
pub async fn resume(
    f: &Forward<'_>,
    from: usize,
    mut r: Box<Relay>,
    first: &Attempt<'_>,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Streamed {
    let routing = &f.rt.config.routing;
    let metrics = &f.shared.metrics;
    let mut legs = Legs::new(routing.gateway_pays_resumed_prompt);
    let (usage, counted) = stream::leg_usage(&r, first, None).await;
    first.served(ctx, usage, counted);
    let m = first.dest.model;
    legs.push(&m.id, &first.dest.pool.provider.name, usage, &m.rates());
    legs.partial = r.rewriter.delivered_text().to_owned();
    let mut current: Option<Plan> = None;
    let mut resumes = 0;
    while let Some(broke) = r.failure.take() {
        ctx.timeline.end_open(Outcome::Cut(broke.to_string()));
        let outcome = |o: &str| metrics.resumes.with_label_values(&[broke.label(), o]).inc();
        if resumes >= routing.max_resumes {
            outcome("limit");
            r.failure = Some(broke);
            break;
        }
        if !r.rewriter.resumable() {
            outcome("not_text");
            r.failure = Some(broke);
            break;
        }
        resumes += 1;
        let cut = Instant::now();
        let after = current.as_ref().map_or(from, |p| p.at) + 1;
        let Some(plan) = next_leg(f, after, &mut r, &legs, session, ctx).await else {
            outcome("failed");
            r.failure = Some(broke);
            break;
        };
        outcome("resumed");
        {
            // The leg that broke (the stream's closing records a break that ends it).
            let next = &f.rt.config.catalog.model(f.candidates[plan.at]).id;
            let leg = current.as_ref().and_then(|p| attempt(f, p));
            let dest = leg.as_ref().map_or(&first.dest, |a| &a.dest);
            tracing::warn!(request_id = %ctx.request_id, model = %dest.model.id, "stream failed after the first byte, resumed on {next}: {broke}");
            metrics
                .upstream_attempts
                .with_label_values(&[&dest.pool.provider.name, "mid_stream_failure"])
                .inc();
        }
        current = Some(plan);
        let Some(a) = current.as_ref().and_then(|p| attempt(f, p)) else {
            r.failure = Some(broke);
            break;
        };
        metrics
            .resume_seam
            .with_label_values(&[&a.dest.model.id])
            .observe(cut.elapsed().as_secs_f64());
        stream::relay(&mut r, &a, session).await;
        if r.failure.is_none() || r.gone {
            return stream::finish(*r, &a, ctx, Tally::Last(legs)).await;
        }
        // Cut again: this leg is settled as delivered, its text part of what comes next.
        let (usage, counted) = stream::leg_usage(&r, &a, Some(&legs.partial)).await;
        a.served(ctx, usage, counted);
        let m = a.dest.model;
        legs.push(&m.id, &a.dest.pool.provider.name, usage, &m.rates());
        legs.partial.push_str(r.rewriter.delivered_text());
    }
    match current.as_ref().and_then(|p| attempt(f, p)) {
        None => stream::finish(*r, first, ctx, Tally::Settled(legs)).await,
        Some(a) => stream::finish(*r, &a, ctx, Tally::Settled(legs)).await,
    }
}

/// Tries the candidates from `after` on (each usable endpoint, as failover does) until one
/// continues the answer with output; that output, after the seam's comment, has gone to the
/// client. `None`: none could (unaffordable, untranslatable, failed before any output).
async fn next_leg(
    f: &Forward<'_>,
    after: usize,
    r: &mut Relay,
    legs: &Legs,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Option<Plan> {
    let metrics = &f.shared.metrics;
    let delivered = legs.usage().completion_tokens;
    for (at, model, pool) in f.candidates_from(after) {
        // A candidate whose stream has another shape cannot carry the answer on.
        if !f.front.door.resumes_on(Some(&pool.provider)) {
            continue;
        }
        // The whole answer stays within the client's max_tokens.
        let requested = f
            .req
            .max_tokens
            .unwrap_or(model.max_output_tokens)
            .min(model.max_output_tokens)
            .saturating_sub(delivered)
            .max(1);
        let max_tokens = match (ctx.metered.as_mut(), f.shared.meter()) {
            (None, _) => requested,
            (Some(charge), Ok(meter)) => {
                let spent = (legs.cost(), delivered);
                match charge
                    .size_continuation(&meter, &ctx.request_id, model, requested, spent)
                    .await
                {
                    Some(t) => t,
                    None => continue,
                }
            }
            (Some(_), Err(_)) => return None,
        };
        let body = f
            .front
            .door
            .chat_body(f.req, &pool.provider, &model.upstream_model, max_tokens)
            .map_err(|e| e.to_string())
            .and_then(|b| match pool.provider.kind.wire() {
                ProviderKind::Anthropic => anthropic_continuation(&b, &legs.partial),
                ProviderKind::OpenAi | ProviderKind::Demo => {
                    openai_continuation(&b, &legs.partial, pool.provider.continuation)
                }
            });
        let body = match body {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                tracing::info!(request_id = %ctx.request_id, model = %model.id, "no continuation on this candidate: {e}");
                continue;
            }
        };
        for endpoint in pool.usable_endpoints() {
            let plan = Plan {
                at,
                endpoint,
                body: body.clone(),
            };
            let Some(a) = attempt(f, &plan) else { break };
            let provider = &pool.provider.name;
            let leg = ctx
                .timeline
                .begin(&model.id, provider, plan.endpoint.url.authority(), true);
            match open_leg(&a, r, ctx).await {
                Ok(first) => {
                    record_answered(metrics, pool, &plan.endpoint, "ok");
                    let mut out = format!(": resumed on {}\n\n", model.id).into_bytes();
                    out.extend_from_slice(&first);
                    if !send(session, Bytes::from(out), false, r.write_limit).await {
                        r.gone = true;
                    }
                    tracing::info!(request_id = %ctx.request_id, model = %model.id, "stream resumed");
                    return Some(plan);
                }
                Err(AttemptError::Failover { reason, detail }) => {
                    let outcome = Outcome::Failover {
                        reason: reason.label(),
                        detail: detail.clone(),
                    };
                    ctx.timeline.end(leg, outcome);
                    record_failover(
                        metrics,
                        pool,
                        &plan.endpoint,
                        &model.id,
                        &ctx.request_id,
                        reason,
                        &detail,
                    );
                }
                Err(AttemptError::Client(e)) => {
                    // A provider that refuses the continuation (a prefill it does not take):
                    // the next candidate may take it.
                    record_answered(metrics, pool, &plan.endpoint, "rejected");
                    ctx.timeline.end(leg, Outcome::Rejected(e.message.clone()));
                    tracing::info!(request_id = %ctx.request_id, model = %model.id, "continuation refused: {e}");
                    break;
                }
            }
        }
    }
    None
}

/// Sends a continuation and reads it until its first output, which it returns; the relay
/// then reads this upstream, through the stream's translator carried on with its own.
async fn open_leg(
    a: &Attempt<'_>,
    r: &mut Relay,
    ctx: &RequestCtx,
) -> Result<Vec<u8>, AttemptError> {
    let timeouts = a.timeouts;
    let tags = Tags::of(ctx);
    let mut up = match tokio::time::timeout(timeouts.stream_chunk, a.send(&tags)).await {
        Ok(r) => r?,
        Err(_) => return Err(failover(Failover::Timeout, "no response head in time")),
    };
    check_status(&mut up, timeouts.stream_chunk).await?;
    let (kind, model) = (a.dest.pool.provider.kind.wire(), &a.dest.model.id);
    let leg = translate::leg(ctx.wire, kind, model, a.req.client_wants_usage);
    if !r.rewriter.resume(leg) {
        return Err(failover(Failover::Internal, "the stream cannot be resumed"));
    }
    r.up = up;
    r.decoder = SseDecoder::new(MAX_SSE_EVENT);
    r.events.clear();
    r.done = false;
    r.failure = None;
    stream::first_output(r, timeouts).await
}
