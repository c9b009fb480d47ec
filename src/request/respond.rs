//! Writing whole responses to the client. Every response gets `X-Request-Id`; every error
//! body comes from [`GatewayError::to_json`], the one mapping.

use crate::request::Session;
use bytes::Bytes;
use pingora::http::ResponseHeader;
use tollgate_filters::{anthropic, GatewayError};

use super::ctx::{RequestCtx, Wire};

/// Headers added to a response beyond the defaults.
pub type Extra<'a> = &'a [(&'static str, String)];

/// The response head, its header names written in lower case (as HTTP/2 writes them; names are
/// case-insensitive): Pingora's case-preserving head keeps a second map of every name, which
/// was ~3 % of a tool call's CPU with its serialization.
pub fn header(status: u16, ctx: &RequestCtx, extra: Extra<'_>) -> Option<ResponseHeader> {
    let mut h = ResponseHeader::build_no_case(status, Some(4 + extra.len())).ok()?;
    h.insert_header("X-Request-Id", &ctx.request_id).ok()?;
    for (k, v) in ctx.headers.iter().chain(extra.iter()) {
        h.append_header(*k, v).ok()?;
    }
    Some(h)
}

/// Sends a complete response. A client that has gone away is not an error worth more than a
/// debug line.
pub async fn send(
    session: &mut Session,
    ctx: &mut RequestCtx,
    status: u16,
    content_type: &str,
    body: Vec<u8>,
    extra: Extra<'_>,
) {
    ctx.status = status;
    let Some(mut h) = header(status, ctx, extra) else {
        tracing::error!(request_id = %ctx.request_id, "could not build response header");
        return;
    };
    let len = body.len().to_string();
    if h.insert_header("Content-Type", content_type).is_err()
        || h.insert_header("Content-Length", len).is_err()
    {
        return;
    }
    if let Err(e) = session.write_response_header(Box::new(h)).await {
        tracing::debug!(request_id = %ctx.request_id, "client gone before header: {e}");
        return;
    }
    if let Err(e) = session.write_response_body(Bytes::from(body), true).await {
        tracing::debug!(request_id = %ctx.request_id, "client gone during body: {e}");
    }
}

pub async fn json(
    session: &mut Session,
    ctx: &mut RequestCtx,
    status: u16,
    body: &serde_json::Value,
    extra: Extra<'_>,
) {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    send(session, ctx, status, "application/json", bytes, extra).await;
}

/// Answers an error with its `{"error":{…}}` body. After a 400, 404 or 405 the request body
/// may not have been read, so the connection is not reused.
pub async fn error(session: &mut Session, ctx: &mut RequestCtx, err: &GatewayError) {
    if matches!(err.status(), 400 | 404 | 405) {
        session.set_keepalive(None);
    }
    let mut extra: Vec<(&'static str, String)> = Vec::new();
    if let Some(r) = err.retry_after_header() {
        extra.push(("Retry-After", r.to_string()));
    }
    ctx.error = Some(err.message.clone());
    let (status, body) = match ctx.wire {
        Wire::OpenAi => (err.status(), err.to_json()),
        Wire::Anthropic => (
            anthropic::error::error_type(err).0,
            anthropic::error::error_body(err),
        ),
        Wire::Gemini => tollgate_filters::gemini::reply::error_body(err),
    };
    send(session, ctx, status, "application/json", body, &extra).await;
}
