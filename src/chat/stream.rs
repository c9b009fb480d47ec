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
//! is metered for what was delivered.

use std::time::Duration;

use bytes::Bytes;
use pingora::proxy::Session;
use pingora::upstreams::peer::HttpPeer;
use tollgate_filters::cost::Cost;
use tollgate_filters::openai::stream::StreamStep;
use tollgate_filters::sse::{SseDecoder, SseEvent};
use tollgate_filters::translator::StreamTranslator;
use tollgate_filters::{tokens, GatewayError, Usage};

use super::attempt::Attempt;
use super::tokenize::off_thread;
use super::translate::{self, Shape};
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;
use crate::upstream::failover::{check_status, failover, AttemptError, Failover};
use crate::upstream::wire::Response;

/// Largest single SSE event accepted from an upstream.
const MAX_SSE_EVENT: usize = 4 * 1024 * 1024;

/// How an upstream stream broke. [`Broke::words`] is what the client is told; the `Display`
/// form, with what the upstream said, goes to the log.
enum Broke {
    Silent(Duration),
    Closed,
    ErrorEvent(String),
    Invalid(String),
    Read(String),
}

impl Broke {
    fn words(&self) -> String {
        match self {
            Broke::Silent(d) => format!("went silent for {}s", d.as_secs_f64()),
            Broke::Closed => "closed the stream before it finished".into(),
            Broke::ErrorEvent(_) => "sent an error event".into(),
            Broke::Invalid(_) => "sent an event that is not valid".into(),
            Broke::Read(_) => "dropped the connection".into(),
        }
    }
}

impl std::fmt::Display for Broke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Broke::Silent(d) => write!(f, "upstream silent for {d:?}"),
            Broke::Closed => f.write_str("upstream closed the stream before it finished"),
            Broke::ErrorEvent(e) => write!(f, "upstream error event: {e}"),
            Broke::Invalid(e) => write!(f, "upstream sent an invalid event: {e}"),
            Broke::Read(e) => write!(f, "reading the upstream failed: {e}"),
        }
    }
}

/// One stream's state across the phases.
struct Relay {
    up: Response,
    decoder: SseDecoder,
    /// The upstream's events in the client's format.
    rewriter: Box<dyn StreamTranslator>,
    events: Vec<SseEvent>,
    /// The upstream sent `[DONE]`.
    done: bool,
    /// The client went away.
    gone: bool,
    /// Why the stream broke after the commit.
    failure: Option<Broke>,
    /// How long one write to the client may wait (`timeouts.client_write`).
    write_limit: Duration,
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

pub async fn run(
    a: &Attempt<'_>,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<Streamed, AttemptError> {
    let (mut relay, first) = open(a, ctx).await?;
    a.served(ctx, Usage::default(), false);
    commit(&mut relay, session, ctx, first).await?;
    self::relay(&mut relay, a, session).await;
    Ok(finish(relay, a, ctx).await)
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
async fn open(a: &Attempt<'_>, ctx: &RequestCtx) -> Result<(Relay, Vec<u8>), AttemptError> {
    let timeouts = a.timeouts;
    let sent = a.send(&ctx.request_id);
    let mut up = match tokio::time::timeout(timeouts.stream_chunk, sent).await {
        Ok(r) => r?,
        Err(_) => return Err(failover(Failover::Timeout, "no response head in time")),
    };
    check_status(&mut up, timeouts.stream_chunk).await?;
    let mut r = Relay {
        up,
        decoder: SseDecoder::new(MAX_SSE_EVENT),
        rewriter: translate::stream(
            ctx.wire,
            a.dest.pool.provider.kind.wire(),
            &a.dest.model.id,
            a.req.client_wants_usage,
            Shape::of(&a.front, &a.dest.pool.provider),
        ),
        events: Vec::new(),
        done: false,
        gone: false,
        failure: None,
        write_limit: timeouts.client_write,
    };
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
    Ok((r, pending))
}

/// Phase 2: from here the client has a 200 and every problem is told in-stream.
async fn commit(
    r: &mut Relay,
    session: &mut Session,
    ctx: &RequestCtx,
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
    r.gone = session
        .write_response_header(Box::new(h), false)
        .await
        .is_err()
        || !send(session, Bytes::from(first), false, r.write_limit).await;
    Ok(())
}

/// Phase 3: upstream events to the client until `[DONE]`, a failure or the client leaves.
async fn relay(r: &mut Relay, a: &Attempt<'_>, session: &mut Session) {
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
            Ok(Some(p)) => p,
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

/// Phase 4: what the stream used and how it ended; its closing events wait for [`close`].
async fn finish(mut r: Relay, a: &Attempt<'_>, ctx: &mut RequestCtx) -> Streamed {
    // The upstream's own usage when it sent one, else the tokenizer over what was actually
    // delivered.
    let counted = r.rewriter.upstream_usage().is_none();
    let usage = match r.rewriter.upstream_usage() {
        Some(u) => u,
        None => {
            let messages = a.req.get("messages").map(|m| m.get().to_owned());
            let text = r.rewriter.delivered_text().to_owned();
            off_thread(a.shared, move || Usage {
                prompt_tokens: messages.as_deref().map_or(0, tokens::count_prompt_json),
                completion_tokens: tokens::count_text(&text),
                ..Usage::default()
            })
            .await
            .unwrap_or_default()
        }
    };
    a.served(ctx, usage, counted);
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

/// Writes a piece of the stream to the client within `limit`; false when the client is gone or
/// stopped reading (its socket buffers full for that long). A client that never reads must not
/// pin the upstream connection and the credit hold forever.
async fn send(session: &mut Session, bytes: Bytes, end: bool, limit: Duration) -> bool {
    matches!(
        tokio::time::timeout(limit, session.write_response_body(Some(bytes), end)).await,
        Ok(Ok(()))
    )
}

/// Reads the next upstream body piece, sending SSE comments to the client while the upstream
/// is quiet so that the client never sees `client_idle` of silence. `Ok(None)` is the end of
/// the upstream body; `Err` a read failure or `stream_chunk` of upstream silence.
async fn next_piece(
    up: &mut Response,
    session: Option<&mut Session>,
    silence: Duration,
    keepalive: Duration,
    client_gone: &mut bool,
) -> Result<Option<Bytes>, Broke> {
    let read = up.read_body();
    tokio::pin!(read);
    let limit = tokio::time::sleep(silence);
    tokio::pin!(limit);
    let Some(session) = session else {
        return tokio::select! {
            r = &mut read => r.map_err(|e| Broke::Read(e.to_string())),
            _ = &mut limit => Err(Broke::Silent(silence)),
        };
    };
    loop {
        let tick = tokio::time::sleep(keepalive);
        tokio::pin!(tick);
        tokio::select! {
            r = &mut read => return r.map_err(|e| Broke::Read(e.to_string())),
            _ = &mut limit => return Err(Broke::Silent(silence)),
            _ = &mut tick => {
                let comment = Bytes::from_static(b": keep-alive\n\n");
                if !*client_gone && !send(session, comment, false, keepalive).await {
                    *client_gone = true;
                }
            }
        }
    }
}
