//! A streaming attempt, in four phases:
//! 1. [`open`]: send the request and hold the client's response until the upstream has
//!    produced output (content, a tool call, a refusal or a finish; a role-only first chunk is
//!    not output), so that an error event or an early death before it still fails over and
//!    costs nothing;
//! 2. [`commit`]: the 200 head and what the first events produced go to the client;
//! 3. [`relay`]: events rewritten as they come, SSE comments while the upstream is quiet;
//! 4. [`finish`]: the usage (the upstream's own, else the tokenizer over what was delivered),
//!    as a [`Streamed`] whose closing events wait: the pipeline settles the charge, then
//!    [`close`] writes them with the cost in the final usage (a client that reads its balance
//!    at `[DONE]` sees the charge) and gives the connection back to the pool.
//!
//! After the commit there is no failing over: a broken stream ends with an SSE error event and
//! is metered for what was delivered, unless its request opted in to resuming: then [`run`]
//! hands the cut [`Relay`] back, for `resume.rs` to continue on another provider.

use std::time::Duration;

use crate::request::Session;
use bytes::Bytes;
use pingora::upstreams::peer::HttpPeer;
use tollgate_filters::cost::Cost;
use tollgate_filters::openai::stream::StreamStep;
use tollgate_filters::sse::{SseDecoder, SseEvent};
use tollgate_filters::translator::StreamTranslator;
use tollgate_filters::{tokens, GatewayError, Usage};

use super::attempt::{Attempt, Tags};
use super::cut::{next_piece, send, Broke};
use super::tokenize::off_thread;
use crate::metering::legs::Legs;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::response_cache::Recording;
use crate::runtime::Shared;
use crate::upstream::failover::{check_status, failover, AttemptError, Failover};
use crate::upstream::wire::Response;

/// Largest single SSE event accepted from an upstream.
pub const MAX_SSE_EVENT: usize = 4 * 1024 * 1024;

/// One stream's state across the phases.
pub struct Relay {
    pub up: Response,
    pub decoder: SseDecoder,
    /// The upstream's events in the client's format.
    pub rewriter: Box<dyn StreamTranslator>,
    pub events: Vec<SseEvent>,
    /// The upstream sent `[DONE]`.
    pub done: bool,
    /// The client went away.
    pub gone: bool,
    /// Why the stream broke after the commit.
    pub failure: Option<Broke>,
    /// How long one write to the client may wait (`timeouts.client_write`).
    pub write_limit: Duration,
    /// The upstream's bytes as they came, for the response cache (a miss being filled).
    pub recording: Option<Recording>,
}

/// How a streaming attempt ended: served up to its closing events, or cut after its commit
/// with the request opted in to resuming (the relay, for the continuation).
pub enum Ran {
    Done(Box<Streamed>),
    Cut(Box<Relay>),
}

/// A stream that was served up to its closing events, which wait for the settlement.
pub struct Streamed {
    up: Response,
    /// What writes the closing events (the finish, the usage, `[DONE]` / `message_stop`, or an
    /// error event); `None`: the client is gone.
    rewriter: Option<Box<dyn StreamTranslator>>,
    usage: Usage,
    /// Why the stream broke after the commit, as its client is told.
    failure: Option<GatewayError>,
    /// The upstream finished cleanly: drain it and pool its connection.
    reusable: bool,
    write_limit: Duration,
    peer: HttpPeer,
    /// The whole reply as one object, for a client format that keeps it (a Responses
    /// stream's final response object).
    pub object: Option<serde_json::Value>,
}

/// A stream answered from the response cache (`cached.rs`), sent up to its closing events,
/// which wait for the settlement as a live stream's do.
pub struct Replayed {
    /// What writes the closing events; `None`: the client is gone.
    pub rewriter: Option<Box<dyn StreamTranslator>>,
    pub usage: Usage,
    pub write_limit: Duration,
}

/// A replayed stream's closing events, with its `cost` in their usage.
pub async fn close_replayed(
    r: Replayed,
    session: &mut Session,
    ctx: &mut RequestCtx,
    cost: Option<&Cost>,
) {
    if let Some(mut rewriter) = r.rewriter {
        let tail = rewriter.close(r.usage, cost);
        if !send(session, Bytes::from(tail), true, r.write_limit).await {
            ctx.client_gone = true;
        }
    }
}

/// `resume`: the request opted in to resuming a cut stream (its translator is built to).
pub async fn run(
    a: &Attempt<'_>,
    session: &mut Session,
    ctx: &mut RequestCtx,
    resume: bool,
) -> Result<Ran, AttemptError> {
    let (mut relay, first) = open(a, ctx, resume).await?;
    a.served(ctx, Usage::default(), false);
    commit(&mut relay, session, ctx, first).await?;
    self::relay(&mut relay, a, session).await;
    if resume && relay.failure.is_some() && !relay.gone {
        return Ok(Ran::Cut(Box::new(relay)));
    }
    Ok(Ran::Done(Box::new(
        finish(relay, a, ctx, Tally::Alone).await,
    )))
}

/// Phase 5, after the settlement: the closing events, with a metered request's `cost` in their
/// usage, to the client, and the connection back to the pool once drained.
pub async fn close(
    s: Streamed,
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    cost: Option<&Cost>,
) {
    if let Some(mut rewriter) = s.rewriter {
        let tail = match &s.failure {
            Some(err) => rewriter.error_event(err),
            None => rewriter.close(s.usage, cost),
        };
        if !send(session, Bytes::from(tail), true, s.write_limit).await {
            ctx.client_gone = true;
        }
    }
    if s.reusable {
        let mut up = s.up;
        let drained = tokio::time::timeout(Duration::from_secs(1), async {
            while let Ok(Some(_)) = up.read_body().await {}
        })
        .await;
        if drained.is_ok() {
            up.release(&shared.connector, &s.peer, s.peer.options.idle_timeout);
        }
    }
}

/// Phase 1: the response head, then events until one carries output. Chunks before it (the
/// role chunk) are kept and sent with it.
async fn open(
    a: &Attempt<'_>,
    ctx: &RequestCtx,
    resume: bool,
) -> Result<(Relay, Vec<u8>), AttemptError> {
    let timeouts = a.timeouts;
    let tags = Tags::of(ctx);
    let sent = a.send(&tags);
    let mut up = match tokio::time::timeout(timeouts.stream_chunk, sent).await {
        Ok(r) => r?,
        Err(_) => return Err(failover(Failover::Timeout, "no response head in time")),
    };
    check_status(&mut up, timeouts.stream_chunk).await?;
    let mut r = Relay {
        up,
        decoder: SseDecoder::new(MAX_SSE_EVENT),
        rewriter: a.front.door.stream(
            ctx.wire,
            &a.dest.pool.provider,
            &a.dest.model.id,
            a.req.client_wants_usage,
            resume,
        ),
        events: Vec::new(),
        done: false,
        gone: false,
        failure: None,
        write_limit: timeouts.client_write,
        recording: ctx.cache_fill.as_ref().map(|f| f.recording()),
    };
    let pending = first_output(&mut r, timeouts).await?;
    Ok((r, pending))
}

/// Events until one carries output (a resumed stream's continuation waits for it the same
/// way); what they produced, to send with it.
pub async fn first_output(
    r: &mut Relay,
    timeouts: &crate::config::Timeouts,
) -> Result<Vec<u8>, AttemptError> {
    let mut pending: Vec<u8> = Vec::new();
    while !r.rewriter.has_output() && !r.done {
        let piece = next_piece(
            &mut r.up,
            None,
            timeouts.stream_chunk,
            timeouts.client_idle,
            &mut r.gone,
        )
        .await
        .map_err(|e| failover(Failover::TimeoutOrRead, e))?;
        let Some(piece) = piece else {
            return Err(failover(
                Failover::EarlyEof,
                "upstream closed the stream before any output",
            ));
        };
        if let Some(rec) = &mut r.recording {
            rec.record(&piece);
        }
        r.decoder
            .push(&piece, &mut r.events)
            .map_err(|e| failover(Failover::BadReply, e))?;
        for ev in r.events.drain(..) {
            match r.rewriter.on_event(ev.event.as_deref(), &ev.data) {
                StreamStep::Emit(b) => pending.extend_from_slice(&b),
                StreamStep::Done => r.done = true,
                StreamStep::UpstreamError(e) if !r.rewriter.has_output() => {
                    let overloaded = e["type"] == "overloaded_error";
                    let reason = if overloaded {
                        Failover::Overloaded
                    } else {
                        Failover::ErrorEvent
                    };
                    return Err(failover(reason, e));
                }
                StreamStep::UpstreamError(e) => {
                    // Content is ready to go out: deliver it, then end with the error.
                    r.failure = Some(Broke::ErrorEvent(e.to_string()));
                    break;
                }
            }
            if r.done {
                break;
            }
        }
    }
    Ok(pending)
}

/// Phase 2: from here the client has a 200 and every problem is told in-stream.
async fn commit(
    r: &mut Relay,
    session: &mut Session,
    ctx: &mut RequestCtx,
    first: Vec<u8>,
) -> Result<(), AttemptError> {
    let Some(mut h) = respond::header(200, ctx, &[]) else {
        // Nothing has reached the client yet: the next candidate may do better.
        return Err(failover(
            Failover::Internal,
            "could not build response header",
        ));
    };
    let _ = h.insert_header("Content-Type", r.rewriter.content_type());
    let _ = h.insert_header("Cache-Control", "no-cache");
    let _ = h.insert_header("X-Accel-Buffering", "no");
    if !session.is_http2() {
        let _ = h.insert_header("Transfer-Encoding", "chunked");
    }
    ctx.timeline.output();
    r.gone = session.write_response_header(Box::new(h)).await.is_err()
        || !send(session, Bytes::from(first), false, r.write_limit).await;
    Ok(())
}

/// Phase 3: upstream events to the client until `[DONE]`, a failure or the client leaves.
pub async fn relay(r: &mut Relay, a: &Attempt<'_>, session: &mut Session) {
    let keepalive = a.timeouts.client_idle.mul_f64(0.75);
    while !r.done && !r.gone && r.failure.is_none() {
        let piece = next_piece(
            &mut r.up,
            Some(session),
            a.timeouts.stream_chunk,
            keepalive,
            &mut r.gone,
        )
        .await;
        let piece = match piece {
            Ok(Some(p)) => {
                if let Some(rec) = &mut r.recording {
                    rec.record(&p);
                }
                p
            }
            Ok(None) => {
                if !r.rewriter.finished() {
                    r.failure = Some(Broke::Closed);
                }
                break;
            }
            Err(e) => {
                r.failure = Some(e);
                break;
            }
        };
        if let Err(e) = r.decoder.push(&piece, &mut r.events) {
            r.failure = Some(Broke::Invalid(e.to_string()));
            break;
        }
        let mut out = Vec::new();
        for ev in r.events.drain(..) {
            match r.rewriter.on_event(ev.event.as_deref(), &ev.data) {
                StreamStep::Emit(b) => out.extend_from_slice(&b),
                StreamStep::Done => {
                    r.done = true;
                    break;
                }
                StreamStep::UpstreamError(e) => {
                    r.failure = Some(Broke::ErrorEvent(e.to_string()));
                    break;
                }
            }
        }
        if !out.is_empty() && !send(session, Bytes::from(out), false, r.write_limit).await {
            r.gone = true;
        }
    }
}

/// What the current leg used: the upstream's own usage when it sent one, else the tokenizer
/// over what was actually delivered (and, for a continuation, the `partial` answer it was
/// sent besides the conversation). `true`: counted.
pub fn leg_usage<'a>(
    r: &Relay,
    a: &'a Attempt<'a>,
    partial: Option<&str>,
) -> impl std::future::Future<Output = (Usage, bool)> + Send + 'a {
    // Read now: the relay is not `Sync`, so it is not held across the count.
    let upstream = r.rewriter.upstream_usage();
    let text = r.rewriter.delivered_text().to_owned();
    let partial = partial.map(str::to_owned);
    async move {
        if let Some(u) = upstream {
            return (u, false);
        }
        let messages = a.req.get("messages").map(|m| m.get().to_owned());
        let usage = off_thread(a.shared, move || Usage {
            prompt_tokens: messages.as_deref().map_or(0, tokens::count_prompt_json)
                + partial.as_deref().map_or(0, tokens::count_text),
            completion_tokens: tokens::count_text(&text),
            ..Usage::default()
        })
        .await
        .unwrap_or_default();
        (usage, true)
    }
}

/// Which legs a stream's usage is made of.
pub enum Tally {
    /// One upstream served it all: this one.
    Alone,
    /// A resumed stream whose last leg is this one, after these.
    Last(Legs),
    /// A resumed stream whose legs are these: the current translator's leg (a continuation
    /// that failed before its first output) served nothing.
    Settled(Legs),
}

/// Phase 4: what the stream used and how it ended; its closing events wait for [`close`]. A
/// resumed stream's usage is its legs' summed, each leg charged at its rates.
pub async fn finish(mut r: Relay, a: &Attempt<'_>, ctx: &mut RequestCtx, tally: Tally) -> Streamed {
    // Only a whole reply of one upstream is cached: never a cut or resumed stream.
    let whole = matches!(tally, Tally::Alone) && r.failure.is_none() && r.done && !r.gone;
    if let (true, Some(rec), Some(fill)) = (whole, r.recording.take(), ctx.cache_fill.as_mut()) {
        fill.complete(rec);
    }
    let mut legs = match tally {
        Tally::Alone => None,
        Tally::Last(mut legs) => {
            let (usage, counted) = leg_usage(&r, a, Some(&legs.partial)).await;
            a.served(ctx, usage, counted);
            let (m, p) = (a.dest.model, &a.dest.pool.provider);
            legs.push(&m.id, &p.name, usage, &m.rates());
            Some(legs)
        }
        Tally::Settled(legs) => Some(legs),
    };
    let partial = legs.as_ref().map(|l| l.partial.as_str());
    crate::request_log::capture::streamed(ctx, partial, r.rewriter.delivered_text());
    let usage = match legs.take() {
        Some(l) if l.legs.len() > 1 => {
            let total = l.usage();
            ctx.resumed = Some(l);
            total
        }
        // Only the first leg served: billed as any cut stream (`ctx.served` is its).
        Some(_) => ctx.served.as_ref().map(|d| d.usage).unwrap_or_default(),
        None => {
            let (usage, counted) = leg_usage(&r, a, None).await;
            a.served(ctx, usage, counted);
            usage
        }
    };
    ctx.client_gone = r.gone;
    let mut streamed = Streamed {
        rewriter: None,
        usage,
        failure: None,
        reusable: false,
        write_limit: r.write_limit,
        peer: a.dest.peer.clone(),
        up: r.up,
        object: None,
    };
    if r.gone {
        return streamed;
    }
    if let Some(broke) = &r.failure {
        tracing::warn!(request_id = %ctx.request_id, model = %a.dest.model.id, "stream failed after the first byte: {broke}");
        ctx.error = Some(broke.to_string());
        a.shared
            .metrics
            .upstream_attempts
            .with_label_values(&[&a.dest.pool.provider.name, "mid_stream_failure"])
            .inc();
        // The client learns which model broke off and how; what it said is in the log.
        streamed.failure = Some(GatewayError::upstream(format!(
            "the stream from {} broke off: it {}",
            a.dest.model.id,
            broke.words()
        )));
    }
    r.rewriter.end(usage, streamed.failure.as_ref());
    streamed.object = r.rewriter.take_object();
    streamed.reusable = r.failure.is_none() && r.done;
    streamed.rewriter = Some(r.rewriter);
    streamed
}
