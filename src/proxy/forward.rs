//! The forwarding loop (DESIGN.md, "Forwarding: why the chat path drives its own upstream
//! calls"). For each candidate of the plan and each usable endpoint of its pool: take a pooled
//! connection from Pingora's connector, write the rewritten request, read the response head
//! under the deadline, and fail over on connect error, timeout, 5xx or 429. Once the first
//! byte has gone to the client there is no failing over: a broken stream ends with an SSE
//! error event and is metered for what was delivered.
//!
//! This is the one module that would move onto Pingora's own body hooks if a later Pingora
//! lifts its 64 KiB retry-buffer limit.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use pingora::http::RequestHeader;
use pingora::protocols::http::client::HttpSession;
use pingora::proxy::Session;
use pingora::upstreams::peer::HttpPeer;
use tollgate_filters::route::ModelSpec;
use tollgate_filters::sse::{SseDecoder, SseEvent};
use tollgate_filters::stream::{rewrite_completion, StreamRewriter, StreamStep, DONE_EVENT};
use tollgate_filters::validate::{upstream_body, ChatRequest};
use tollgate_filters::{tokens, GatewayError, Usage};

use super::{respond, Gateway, RequestCtx};
use crate::state::Runtime;
use crate::upstream::{Endpoint, Pool};

/// Largest non-streaming reply the gateway will buffer from an upstream.
const MAX_UPSTREAM_JSON: usize = 32 * 1024 * 1024;
/// Largest single SSE event accepted from an upstream.
const MAX_SSE_EVENT: usize = 4 * 1024 * 1024;

/// Why one attempt did not produce a response.
enum AttemptError {
    /// Nothing reached the client: try the next endpoint or candidate.
    Failover {
        reason: &'static str,
        detail: String,
    },
    /// The upstream refused the request itself (a 400-class answer another provider would
    /// give too): tell the client.
    Client(GatewayError),
}

fn failover(reason: &'static str, detail: impl std::fmt::Display) -> AttemptError {
    AttemptError::Failover {
        reason,
        detail: detail.to_string(),
    }
}

/// Everything one attempt needs to know about where it goes.
struct Target<'a> {
    model: &'a ModelSpec,
    pool: &'a Pool,
    endpoint: &'a Endpoint,
    peer: HttpPeer,
}

pub async fn run(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    rt: &Runtime,
    req: &ChatRequest,
    plan: &[usize],
    max_tokens: Option<u64>,
) -> Result<(), GatewayError> {
    let timeouts = &rt.config.timeouts;
    let deadline = Instant::now() + timeouts.response;
    let mut last_failure = String::from("no endpoint was usable");
    for &mi in plan {
        let model = rt.config.catalog.model(mi);
        let Some(pool) = rt.pools.get(&model.provider) else {
            continue;
        };
        // The metering step may have lowered max_tokens to what the balance pays for.
        let max_tokens = max_tokens
            .or(req.max_tokens)
            .map(|n| n.min(model.max_output_tokens));
        let body = Bytes::from(upstream_body(req, &model.upstream_model, max_tokens));
        for endpoint in pool.usable_endpoints() {
            if !req.stream && Instant::now() >= deadline {
                return Err(GatewayError::upstream(format!(
                    "no upstream answered within {}s: {last_failure}",
                    timeouts.response.as_secs_f64()
                )));
            }
            let target = Target {
                model,
                pool,
                peer: pool.peer(&endpoint, timeouts.connect),
                endpoint: &endpoint,
            };
            let result = if req.stream {
                stream_attempt(gw, session, ctx, rt, req, &target, body.clone()).await
            } else {
                json_attempt(gw, session, ctx, req, &target, body.clone(), deadline).await
            };
            let m = &gw.shared.metrics;
            match result {
                Ok(()) => {
                    pool.record_success(&endpoint);
                    m.upstream_attempts
                        .with_label_values(&[&pool.provider.name, "ok"])
                        .inc();
                    return Ok(());
                }
                Err(AttemptError::Client(e)) => {
                    pool.record_success(&endpoint);
                    m.upstream_attempts
                        .with_label_values(&[&pool.provider.name, "rejected"])
                        .inc();
                    return Err(e);
                }
                Err(AttemptError::Failover { reason, detail }) => {
                    m.upstream_attempts
                        .with_label_values(&[&pool.provider.name, reason])
                        .inc();
                    m.failovers.with_label_values(&[&model.id, reason]).inc();
                    if pool.record_failure(&endpoint) {
                        tracing::warn!(provider = %pool.provider.name, endpoint = %endpoint.addr, "endpoint ejected after consecutive failures");
                    }
                    tracing::info!(request_id = %ctx.request_id, model = %model.id, endpoint = %endpoint.addr, reason, %detail, "failing over");
                    last_failure = format!("{} at {}: {detail}", model.id, endpoint.addr);
                }
            }
        }
    }
    Err(GatewayError::upstream(format!(
        "every upstream failed; last: {last_failure}"
    )))
}

fn request_header(
    req_stream: bool,
    t: &Target<'_>,
    len: usize,
    request_id: &str,
) -> Result<Box<RequestHeader>, AttemptError> {
    let path = format!("{}/v1/chat/completions", t.endpoint.url.base_path);
    let build = || -> pingora::Result<Box<RequestHeader>> {
        // No case map: upstreams get lower-case names (HTTP/2 style), one map fewer per request.
        let mut h = RequestHeader::build_no_case("POST", path.as_bytes(), Some(8))?;
        h.insert_header("Host", t.endpoint.url.authority())?;
        h.insert_header("Content-Type", "application/json")?;
        h.insert_header("Content-Length", len.to_string())?;
        // Decompressing upstream replies would cost CPU on every byte; ask for none.
        h.insert_header("Accept-Encoding", "identity")?;
        h.insert_header(
            "Accept",
            if req_stream {
                "text/event-stream"
            } else {
                "application/json"
            },
        )?;
        h.insert_header("X-Request-Id", request_id)?;
        if let Some(key) = &t.pool.provider.api_key {
            h.insert_header("Authorization", format!("Bearer {key}"))?;
        }
        Ok(Box::new(h))
    };
    build().map_err(|e| failover("request_build", e))
}

/// Opens (or reuses) a connection, sends the request and reads the response head. A pooled
/// connection the upstream closed while idle fails on first use; that is retried once on a
/// fresh connection instead of being counted against the endpoint. The header is built per
/// try (rather than cloned for a retry that almost never happens).
async fn send_request(
    gw: &Gateway,
    t: &Target<'_>,
    header: impl Fn() -> Result<Box<RequestHeader>, AttemptError>,
    body: &Bytes,
) -> Result<HttpSession, AttemptError> {
    let mut tries = 0;
    loop {
        tries += 1;
        let header = header()?;
        let (mut up, reused) = gw
            .connector
            .get_http_session(&t.peer)
            .await
            .map_err(|e| failover("connect", e))?;
        let sent = async {
            up.write_request_header(header).await?;
            up.write_request_body(body.clone(), true).await?;
            up.finish_request_body().await?;
            up.read_response_header().await
        }
        .await;
        match sent {
            Ok(()) => return Ok(up),
            Err(e) if reused && tries < 2 => {
                tracing::debug!("stale pooled connection, retrying fresh: {e}");
            }
            Err(e) => return Err(failover("send", e)),
        }
    }
}

/// Maps an upstream's non-200 status: 400-class rejections of the request go to the client,
/// everything else (5xx, 429, auth failures of our key, unknown model upstream) fails over.
async fn check_status(up: &mut HttpSession, stream: bool) -> Result<(), AttemptError> {
    let status = up.response_header().map(|h| h.status.as_u16()).unwrap_or(0);
    if status == 200 {
        return Ok(());
    }
    let reason = match status {
        429 => "429",
        500..=599 => "5xx",
        _ => "4xx",
    };
    if matches!(status, 400 | 413 | 422) {
        // Read a bounded amount of the reason for the client.
        let mut buf = BytesMut::new();
        while let Ok(Some(b)) = up.read_response_body().await {
            buf.extend_from_slice(&b);
            if buf.len() > 64 * 1024 {
                break;
            }
        }
        let msg = serde_json::from_slice::<serde_json::Value>(&buf)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&buf[..buf.len().min(512)]).into_owned());
        return Err(AttemptError::Client(GatewayError::invalid(format!(
            "upstream rejected the request: {msg}"
        ))));
    }
    let _ = stream;
    Err(failover(reason, format!("upstream answered {status}")))
}

#[allow(clippy::too_many_arguments)]
async fn json_attempt(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    req: &ChatRequest,
    t: &Target<'_>,
    body: Bytes,
    deadline: Instant,
) -> Result<(), AttemptError> {
    let header = || request_header(false, t, body.len(), &ctx.request_id);
    let remaining = deadline.saturating_duration_since(Instant::now());
    let exchange = async {
        let mut up = send_request(gw, t, header, &body).await?;
        check_status(&mut up, false).await?;
        let mut buf = BytesMut::new();
        loop {
            match up.read_response_body().await {
                Ok(Some(b)) => {
                    buf.extend_from_slice(&b);
                    if buf.len() > MAX_UPSTREAM_JSON {
                        return Err(failover("bad_reply", "upstream reply too large"));
                    }
                }
                Ok(None) => break,
                Err(e) => return Err(failover("read", e)),
            }
        }
        Ok((up, buf))
    };
    let (up, buf) = match tokio::time::timeout(remaining, exchange).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(failover(
                "timeout",
                format!("no complete reply within {remaining:?}"),
            ))
        }
    };
    gw.connector
        .release_http_session(up, &t.peer, t.peer.options.idle_timeout)
        .await;

    let messages = req.body.get("messages");
    let (out, usage, counted) = rewrite_completion(&buf, &t.model.id, || {
        messages.map(tokens::count_prompt).unwrap_or(0)
    })
    .map_err(|e| failover("bad_reply", e))?;
    ctx.model_used = Some(t.model.id.clone());
    ctx.provider = Some(t.pool.provider.name.clone());
    ctx.rates = Some((t.model.input_micros_per_1k, t.model.output_micros_per_1k));
    ctx.usage = Some(usage);
    ctx.usage_counted = counted;
    ctx.status = 200;
    // JSON responses carry the balance after settlement, so settle before answering.
    crate::metering::settle(gw, ctx).await;
    respond::send(session, ctx, 200, "application/json", out, &[]).await;
    Ok(())
}

/// Reads the next upstream body piece, sending SSE comments to the client while the upstream
/// is quiet so that the client never sees `client_idle` of silence. `Ok(None)` is the end of
/// the upstream body; `Err` a read failure or `stream_chunk` of upstream silence.
async fn next_piece(
    up: &mut HttpSession,
    session: Option<&mut Session>,
    silence: Duration,
    keepalive: Duration,
    client_gone: &mut bool,
) -> Result<Option<Bytes>, String> {
    let read = up.read_response_body();
    tokio::pin!(read);
    let limit = tokio::time::sleep(silence);
    tokio::pin!(limit);
    let Some(session) = session else {
        return tokio::select! {
            r = &mut read => r.map_err(|e| e.to_string()),
            _ = &mut limit => Err(format!("upstream silent for {silence:?}")),
        };
    };
    loop {
        let tick = tokio::time::sleep(keepalive);
        tokio::pin!(tick);
        tokio::select! {
            r = &mut read => return r.map_err(|e| e.to_string()),
            _ = &mut limit => return Err(format!("upstream silent for {silence:?}")),
            _ = &mut tick => {
                if !*client_gone && session.write_response_body(Some(Bytes::from_static(b": keep-alive\n\n")), false).await.is_err() {
                    *client_gone = true;
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn stream_attempt(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    rt: &Runtime,
    req: &ChatRequest,
    t: &Target<'_>,
    body: Bytes,
) -> Result<(), AttemptError> {
    let timeouts = &rt.config.timeouts;
    let header = || request_header(true, t, body.len(), &ctx.request_id);
    let mut up =
        match tokio::time::timeout(timeouts.stream_chunk, send_request(gw, t, header, &body)).await
        {
            Ok(r) => r?,
            Err(_) => return Err(failover("timeout", "no response head in time")),
        };
    check_status(&mut up, true).await?;

    let mut decoder = SseDecoder::new(MAX_SSE_EVENT);
    let mut rewriter = StreamRewriter::new(&t.model.id, req.client_wants_usage);
    let mut events: Vec<SseEvent> = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut done = false;
    let mut gone = false;
    let mut early_failure: Option<String> = None;

    // Phase 1: hold the client's response until the upstream has produced a usable event, so
    // that a refusal, an error event or an early death still fails over.
    while pending.is_empty() && !done {
        let piece = next_piece(
            &mut up,
            None,
            timeouts.stream_chunk,
            timeouts.client_idle,
            &mut gone,
        )
        .await
        .map_err(|e| failover("timeout_or_read", e))?;
        let Some(piece) = piece else {
            return Err(failover(
                "early_eof",
                "upstream closed the stream before any event",
            ));
        };
        decoder
            .push(&piece, &mut events)
            .map_err(|e| failover("bad_reply", e))?;
        for ev in events.drain(..) {
            match rewriter.on_event(&ev.data) {
                StreamStep::Emit(b) => pending.extend_from_slice(&b),
                StreamStep::Done => done = true,
                StreamStep::UpstreamError(e) if pending.is_empty() => {
                    return Err(failover("error_event", e));
                }
                StreamStep::UpstreamError(e) => {
                    // Content is ready to go out: deliver it, then end with the error.
                    early_failure = Some(format!("upstream error event: {e}"));
                    break;
                }
            }
            if done {
                break;
            }
        }
    }

    // Phase 2: committed. From here the client has a 200 and every problem is told in-stream.
    ctx.model_used = Some(t.model.id.clone());
    ctx.provider = Some(t.pool.provider.name.clone());
    ctx.rates = Some((t.model.input_micros_per_1k, t.model.output_micros_per_1k));
    ctx.status = 200;
    let mut h = match respond::header(200, ctx, &[]) {
        Some(h) => h,
        None => return Err(failover("internal", "could not build response header")),
    };
    let _ = h.insert_header("Content-Type", "text/event-stream");
    let _ = h.insert_header("Cache-Control", "no-cache");
    let _ = h.insert_header("X-Accel-Buffering", "no");
    if !session.is_http2() {
        let _ = h.insert_header("Transfer-Encoding", "chunked");
    }
    if session
        .write_response_header(Box::new(h), false)
        .await
        .is_err()
    {
        gone = true;
    }
    if !gone
        && session
            .write_response_body(Some(Bytes::from(pending)), false)
            .await
            .is_err()
    {
        gone = true;
    }

    let keepalive = timeouts.client_idle.mul_f64(0.75);
    let mut failure: Option<String> = early_failure;
    while !done && !gone && failure.is_none() {
        let piece = next_piece(
            &mut up,
            Some(session),
            timeouts.stream_chunk,
            keepalive,
            &mut gone,
        )
        .await;
        let piece = match piece {
            Ok(Some(p)) => p,
            Ok(None) => {
                if !rewriter.finished() {
                    failure = Some("upstream closed the stream before it finished".into());
                }
                break;
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        if let Err(e) = decoder.push(&piece, &mut events) {
            failure = Some(e.to_string());
            break;
        }
        let mut out = Vec::new();
        for ev in events.drain(..) {
            match rewriter.on_event(&ev.data) {
                StreamStep::Emit(b) => out.extend_from_slice(&b),
                StreamStep::Done => {
                    done = true;
                    break;
                }
                StreamStep::UpstreamError(e) => {
                    failure = Some(format!("upstream error event: {e}"));
                    break;
                }
            }
        }
        if !out.is_empty()
            && session
                .write_response_body(Some(Bytes::from(out)), false)
                .await
                .is_err()
        {
            gone = true;
        }
        if failure.is_some() {
            break;
        }
    }

    // Metering: the upstream's own usage when it sent one, else the tokenizer over what was
    // actually delivered.
    let usage = match rewriter.upstream_usage() {
        Some(u) => u,
        None => {
            ctx.usage_counted = true;
            Usage {
                prompt_tokens: req
                    .body
                    .get("messages")
                    .map(tokens::count_prompt)
                    .unwrap_or(0),
                completion_tokens: tokens::count_text(rewriter.delivered_text()),
            }
        }
    };
    ctx.usage = Some(usage);
    ctx.client_gone = gone;

    if gone {
        return Ok(());
    }
    let mut tail = Vec::new();
    match &failure {
        Some(msg) => {
            tracing::warn!(request_id = %ctx.request_id, model = %t.model.id, "stream failed after the first byte: {msg}");
            ctx.error = Some(msg.clone());
            gw.shared
                .metrics
                .upstream_attempts
                .with_label_values(&[&t.pool.provider.name, "mid_stream_failure"])
                .inc();
            let err = GatewayError::upstream(format!("the upstream stream failed: {msg}"));
            tail.extend_from_slice(&tollgate_filters::stream::sse_event(&err.to_value()));
        }
        None => {
            if !rewriter.finished() {
                tail.extend_from_slice(&rewriter.synthetic_finish_chunk());
            }
            if rewriter.client_wants_usage() && rewriter.upstream_usage().is_none() {
                tail.extend_from_slice(&rewriter.synthetic_usage_chunk(usage));
            }
            tail.extend_from_slice(DONE_EVENT);
        }
    }
    if session
        .write_response_body(Some(Bytes::from(tail)), true)
        .await
        .is_err()
    {
        ctx.client_gone = true;
    }
    if failure.is_none() && done {
        // Drain to the end so the connection can go back to the pool.
        let drained = tokio::time::timeout(Duration::from_secs(1), async {
            while let Ok(Some(_)) = up.read_response_body().await {}
        })
        .await;
        if drained.is_ok() {
            gw.connector
                .release_http_session(up, &t.peer, t.peer.options.idle_timeout)
                .await;
        }
    }
    Ok(())
}
